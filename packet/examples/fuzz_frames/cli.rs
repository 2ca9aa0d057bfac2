//! The command line the fuzzers share (`fuzz_frames` here, `fuzz_control` in control/):
//! `--iterations N` (default 10^7) and `--seed S` (default: the clock, printed), a
//! progress line from the harness now and then, the count, the time and the seed at the
//! end, and exit status 1 with the input on a finding.

use std::fmt::Display;
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

/// A harness: `(seed, iterations, progress)` to a summary or a finding.
pub type Harness<S, F> = fn(u64, u64, &mut dyn FnMut(&S)) -> Result<S, F>;

pub fn main<S: Display, F: Display>(name: &str, run: Harness<S, F>) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = arg(&args, "--iterations").and_then(|n| Ok((n, arg(&args, "--seed")?)));
    let (iterations, seed) = match parsed {
        Ok((n, seed)) => {
            let clock = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            (
                n.unwrap_or(10_000_000),
                seed.unwrap_or(clock.as_nanos() as u64),
            )
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::from(2);
        }
    };
    let start = Instant::now();
    println!("{name}: seed {seed}, {iterations} inputs");
    let mut progress = |s: &S| println!("{name}: {s}, {:.1} s", start.elapsed().as_secs_f64());
    match run(seed, iterations, &mut progress) {
        Ok(s) => {
            let secs = start.elapsed().as_secs_f64();
            println!("{name}: ok: {s} in {secs:.1} s; seed {seed}");
            ExitCode::SUCCESS
        }
        Err(finding) => {
            eprintln!("{name}: FINDING: {finding}");
            ExitCode::FAILURE
        }
    }
}
