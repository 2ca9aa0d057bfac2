//! Fuzzes the forwarder's frame path (parse, forward, fragment, ICMP generation).
//!
//! `cargo run --release -p polld-packet --example fuzz_frames -- [--iterations N] [--seed S]`
//! (`scripts/fuzz.sh` runs it with the control-protocol fuzzer). Prints a progress line
//! every million inputs, then the count, the time and the seed; exits 1 on a finding,
//! printing the input that caused it.

#[path = "../../tests/common/mod.rs"]
mod common;
mod harness;

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

fn arg(args: &[String], name: &str) -> Result<Option<u64>, String> {
    match args.iter().position(|a| a == name) {
        None => Ok(None),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.replace('_', "").parse().ok())
            .map(Some)
            .ok_or_else(|| format!("{name} needs a whole number, e.g. {name} 1000000")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = arg(&args, "--iterations").and_then(|n| Ok((n, arg(&args, "--seed")?)));
    let (iterations, seed) = match parsed {
        Ok((n, seed)) => {
            let clock = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            (n.unwrap_or(10_000_000), seed.unwrap_or(clock.as_nanos() as u64))
        }
        Err(e) => {
            eprintln!("fuzz_frames: {e}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    println!("fuzz_frames: seed {seed}, {iterations} inputs");
    let mut progress = |s: &harness::Summary| {
        println!(
            "fuzz_frames: {} inputs, {} forwarded, {} extra fragments, {} generated, {:.1} s",
            s.inputs,
            s.forwarded,
            s.fragments,
            s.generated,
            start.elapsed().as_secs_f64()
        )
    };
    match harness::run(seed, iterations, &mut progress) {
        Ok(s) => {
            let secs = start.elapsed().as_secs_f64();
            println!(
                "fuzz_frames: ok: {} inputs in {secs:.1} s ({:.0}/s), {} forwarded, {} extra fragments, {} generated; seed {seed}",
                s.inputs,
                s.inputs as f64 / secs,
                s.forwarded,
                s.fragments,
                s.generated
            );
            ExitCode::SUCCESS
        }
        Err(finding) => {
            eprintln!("fuzz_frames: FINDING: {finding}");
            ExitCode::FAILURE
        }
    }
}
