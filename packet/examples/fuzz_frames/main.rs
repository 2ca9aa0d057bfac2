//! Fuzzes the forwarder's frame path (parse, forward, fragment, ICMP generation); see
//! `harness.rs` for the invariants.
//!
//! `cargo run --release -p polld-packet --example fuzz_frames -- [--iterations N] [--seed S]`;
//! `scripts/fuzz.sh` runs it with the control-protocol fuzzer.

mod cli;
#[path = "../../tests/common/mod.rs"]
mod common;
mod harness;

fn main() -> std::process::ExitCode {
    cli::main("fuzz_frames", harness::run)
}
