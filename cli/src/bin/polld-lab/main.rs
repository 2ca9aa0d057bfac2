//! `polld-lab`: polld's lab, beside the daemon. The simulator, the traffic generator and
//! sink, the testbed (with the guest's agent), the demos and the benches. It runs the
//! daemon as `polld` installed in the same directory; `polld COMMAND` runs it for each of
//! these commands ([`polld::lab`]). Thin: each subcommand parses its arguments and calls
//! the library that does the work.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use polld::{logging, man};
use polld_testbed::results::ResultsArg;

mod sim;

/// polld's lab: the simulator, traffic, the testbed, demos and benches.
#[derive(Parser)]
#[command(
    name = "polld-lab",
    version = polld_control::metrics::VERSION,
    about = "polld's lab: the simulator, traffic generator and sink, testbed, demos and benches.",
    long_about = None
)]
struct Cli {
    #[command(flatten)]
    verbosity: logging::Verbosity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a scenario on the simulated NIC and virtual CPU (times are simulated).
    Sim(sim::SimArgs),
    /// Send counted, timestamped Ethernet/IPv4/UDP frames at a precise rate.
    Gen(polld_traffic::gen::GenArgs),
    /// Receive frames and report rate, loss, reordering and one-way latency.
    Sink(polld_traffic::sink::SinkArgs),
    /// Create, remove or inspect the gen/fwd/sink network namespaces.
    Testbed(polld_testbed::TestbedArgs),
    /// Forward traffic through polld on the testbed, in interrupt then polling mode.
    Demo {
        #[command(flatten)]
        args: polld_testbed::demo::DemoArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
    /// Measure on the testbed, printed beside published figures.
    Bench {
        #[command(subcommand)]
        bench: Bench,
    },
    /// Write the lab's manual pages: polld-lab(8) and polld-lab-SUBCOMMAND(8).
    Man(man::ManArgs),
}

#[derive(Subcommand)]
enum Bench {
    /// The seeds' experiments on a TAP testbed: Rizzo's table and livelock curve, the
    /// systat screens, iperf3 TCP, the competitor's share; tables, JSON and SVG plots.
    Seeds {
        #[command(flatten)]
        args: polld_testbed::seeds::SeedsArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
    /// A load ramp (idle, rising steps, flood, falling steps, idle) through polld beside a
    /// competitor: offered, delivered, mode per interface and CPU shares over time.
    Ramp {
        #[command(flatten)]
        args: polld_testbed::ramp::RampArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
    /// Every mode of polld and the kernel's own forwarding across the load range (1 % to
    /// 120 % of interrupt mode's capacity) on veth and TAP: delivered, loss, one-way
    /// p50/p99/p99.9, the poll CPU's busy time, interrupts/s, where auto switched, and
    /// the must-show checks as ratios of the run's own figures.
    Sweep {
        #[command(flatten)]
        args: polld_testbed::sweep::SweepArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
    /// polld forwarding by a full table of the kernel's (1,000,000 IPv4 and 200,000 IPv6
    /// routes added with `ip -batch`): the time to take it in, the resident set, and the
    /// forwarding rate against the one-route rate, as ratios of the run's own figures.
    Tables {
        #[command(flatten)]
        args: polld_testbed::tables::TablesArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
    /// Each of polld's own defaults (quiet_cycles, burst_max, looks, auto_window_ticks,
    /// idle_wakeups) against the alternative it was chosen over, both measured in the run.
    Design {
        #[command(flatten)]
        args: polld_testbed::design::DesignArgs,
        #[command(flatten)]
        page: ResultsArg,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.verbosity.init();
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Gen(args) => polld_traffic::gen::run_gen(&args, &mut std::io::stdout())
            .map(drop)
            .map_err(|e| e.to_string()),
        Command::Sink(args) => polld_traffic::sink::run_sink(&args, &mut std::io::stdout())
            .map(drop)
            .map_err(|e| e.to_string()),
        Command::Demo { args, page } => page
            .record("polld demo", &mut std::io::stdout(), |out| {
                let polld = polld_testbed::current_polld();
                polld_testbed::demo::run_demo(&args, &polld, out).map(|()| ((), Vec::new()))
            })
            .map_err(|e| e.to_string()),
        Command::Bench { bench } => {
            let polld = polld_testbed::current_polld();
            let (out, progress) = (&mut std::io::stdout(), &mut std::io::stderr());
            match bench {
                Bench::Seeds { args, page } => page
                    .record("polld bench seeds", out, |out| {
                        polld_testbed::seeds::run_seeds(&args, &polld, out, progress).map(
                            |report| {
                                let svgs = report.svgs.clone();
                                (report, svgs)
                            },
                        )
                    })
                    .and_then(|report| report.verdict()),
                Bench::Ramp { args, page } => page.record("polld bench ramp", out, |out| {
                    polld_testbed::ramp::run_ramp(&args, &polld, out, progress)
                        .map(|report| ((), report.svgs))
                }),
                Bench::Sweep { args, page } => page.record("polld bench sweep", out, |out| {
                    polld_testbed::sweep::run_sweep(&args, &polld, out, progress)
                        .map(|report| ((), report.svgs))
                }),
                Bench::Tables { args, page } => page
                    .record("polld bench tables", out, |out| {
                        polld_testbed::tables::run_tables(&args, &polld, out, progress)
                            .map(|report| (report, Vec::new()))
                    })
                    .and_then(|report| report.verdict()),
                Bench::Design { args, page } => page.record("polld bench design", out, |out| {
                    polld_testbed::design::run_design(&args, &polld, out, progress)
                        .map(|_| ((), Vec::new()))
                }),
            }
            .map_err(|e| e.to_string())
        }
        Command::Man(args) => args.run(man::write_lab_pages, Cli::command()),
        Command::Testbed(args) => {
            return match polld_testbed::run(&args, &mut std::io::stdout()) {
                Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
                Err(e) => {
                    eprintln!("polld: {e}");
                    ExitCode::FAILURE
                }
            };
        }
    };
    logging::exit_code(result)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// The daemon runs polld-lab for exactly the commands polld-lab has (but `man`, which
    /// each has for its own pages).
    #[test]
    fn the_daemon_knows_the_lab_commands() {
        let ours: Vec<String> = super::Cli::command()
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|name| name != "man")
            .collect();
        assert_eq!(ours, polld::lab::COMMANDS);
    }
}
