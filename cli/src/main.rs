//! `polld`: the command-line tool. Thin: each subcommand parses its arguments and calls
//! the library that does the work.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod sim;

/// Device polling for Linux user-space packet processing (FreeBSD's kern_poll, ported).
#[derive(Parser)]
#[command(name = "polld", version, about, long_about = None)]
struct Cli {
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
        Command::Gen(args) => polld_traffic::gen::run_gen(&args, &mut std::io::stdout())
            .map(drop)
            .map_err(|e| e.to_string()),
        Command::Sink(args) => polld_traffic::sink::run_sink(&args, &mut std::io::stdout())
            .map(drop)
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("polld: {e}");
            ExitCode::FAILURE
        }
    }
}
