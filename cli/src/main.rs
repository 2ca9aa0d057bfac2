//! `polld`: the daemon and its operator tools. Thin: each subcommand parses its arguments
//! and calls the library that does the work. The lab's commands (`polld demo`, ...) run
//! `polld-lab` installed beside it ([`polld::lab`]); none of the lab's code is in here.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use polld::{lab, logging, man};

mod completions;

/// Device polling for Linux user-space packet processing (FreeBSD's kern_poll, ported).
#[derive(Parser)]
#[command(
    name = "polld",
    version = polld_control::metrics::VERSION,
    about = "Device polling for Linux user-space packet processing: the daemon and its operator tools.",
    long_about = None,
    after_help = "The lab (simulator, traffic generator and sink, testbed, demos, benches) is a \
                  second binary, polld-lab: `polld COMMAND` runs `polld-lab COMMAND` when it is \
                  installed beside polld. See `polld-lab --help`."
)]
struct Cli {
    #[command(flatten)]
    verbosity: logging::Verbosity,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the dataplane on real interfaces from a config file, until SIGINT/SIGTERM.
    Run(polld_runtime::RunArgs),
    /// Read or write a running polld's knobs and counters, like sysctl(8).
    Ctl(polld_control::ctl::CtlArgs),
    /// Show a running polld's interfaces, or change an interface's mode, like ifconfig(8).
    Ifconfig(polld_control::ifconfig::IfconfigArgs),
    /// Show the routes a running polld's router holds, like netstat -rn.
    Netstat(polld_control::netstat::NetstatArgs),
    /// Show the neighbours a running polld's router holds, like arp -an and ndp -an.
    Arp(polld_control::netstat::ArpArgs),
    /// Watch a running polld live, like systat -vmstat: rates, CPU split, scheduler.
    Stat(polld_stat::StatArgs),
    /// Write the manual pages: polld(8), polld.toml(5) and polld-SUBCOMMAND(8).
    Man(man::ManArgs),
    /// Print the completion script for SHELL on stdout.
    Completions { shell: clap_complete::Shell },
    /// A lab command, run by polld-lab.
    #[command(external_subcommand)]
    Lab(Vec<OsString>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.verbosity.init();
    let result = match cli.command {
        Command::Run(args) => {
            polld_runtime::run(&args, &mut std::io::stdout()).map_err(|e| e.to_string())
        }
        Command::Ctl(args) => {
            return match polld_control::ctl::run_ctl(
                &args,
                &mut std::io::stdout(),
                &mut std::io::stderr(),
            ) {
                Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
                Err(e) => {
                    log::error!(target: "polld ctl", "{e}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Ifconfig(args) => {
            polld_control::ifconfig::run_ifconfig(&args, &mut std::io::stdout())
                .map_err(|e| e.to_string())
        }
        Command::Netstat(args) => {
            polld_control::netstat::run_netstat(&args, &mut std::io::stdout())
                .map_err(|e| e.to_string())
        }
        Command::Arp(args) => polld_control::netstat::run_arp(&args, &mut std::io::stdout())
            .map_err(|e| e.to_string()),
        Command::Stat(args) => {
            polld_stat::run_stat(&args, &mut std::io::stdout()).map_err(|e| e.to_string())
        }
        Command::Man(args) => args.run(man::write_pages, Cli::command()),
        Command::Completions { shell } => {
            completions::write(shell, &mut Cli::command(), &mut std::io::stdout())
                .map_err(|e| format!("completions: {e}"))
        }
        Command::Lab(words) => {
            let name = words[0].to_string_lossy().into_owned();
            if !lab::is_command(&name) {
                Cli::command()
                    .error(
                        ErrorKind::InvalidSubcommand,
                        format!("unrecognized subcommand '{name}'"),
                    )
                    .exit();
            }
            let exe = std::env::current_exe().unwrap_or_else(|_| "polld".into());
            Err(lab::exec(&exe, std::env::args_os().skip(1), &name))
        }
    };
    logging::exit_code(result)
}
