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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim(args) => sim::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("polld: {e}");
            ExitCode::FAILURE
        }
    }
}
