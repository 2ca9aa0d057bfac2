//! Fuzzes the control protocol: request parsing and the daemon's answers over simulated
//! NICs; see `harness.rs` for the invariants.
//!
//! `cargo run --release -p polld-control --example fuzz_control -- [--iterations N] [--seed S]`;
//! `scripts/fuzz.sh` runs it with the frame-path fuzzer.

#[path = "../../../packet/examples/fuzz_frames/cli.rs"]
mod cli;
#[path = "../../tests/common/mod.rs"]
mod common;
mod harness;

fn main() -> std::process::ExitCode {
    cli::main("fuzz_control", harness::run)
}
