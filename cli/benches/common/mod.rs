//! What the testbed benches share: the root check, a testbed of their own, their
//! options, and a measured trial or a clear exit.

// Each bench binary uses its own part of this module.
#![allow(dead_code)]

use std::path::Path;

use polld_testbed::demo::{measure, DemoRow, Trial};
use polld_testbed::ledger::Ledger;
use polld_testbed::{Devices, Layout, Testbed, UpOptions};

/// Whether the bench can run; says why not (namespaces need root).
pub fn is_root(bench: &str) -> bool {
    let root = rustix::process::geteuid().is_root();
    if !root {
        eprintln!("{bench} bench: needs root (network namespaces); skipped");
    }
    root
}

/// The value after `--name` on the bench's command line, if it parses.
pub fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    let i = args.iter().position(|a| a == name)?;
    args.get(i + 1)?.parse().ok()
}

/// A testbed of `devices` with namespaces unique to this process (or named by the bench's
/// `--prefix`); exits if it cannot.
/// Says what it could not apply (a placement fallen back to RPS, a realtime receive
/// thread not raised), which the bench's header would otherwise claim.
pub fn testbed(bench: &str, devices: Devices, options: &UpOptions) -> Testbed {
    let prefix = arg("--prefix")
        .unwrap_or_else(|| format!("{}{}", &bench[..2], std::process::id() % 10_000));
    let tb = Testbed::up(&Layout::with_devices(&prefix, devices), options).unwrap_or_else(|e| {
        eprintln!("{bench} bench: {e}");
        std::process::exit(1);
    });
    let report = tb.report();
    for warning in report.warnings.iter().chain(&report.placement.warnings) {
        println!("{bench} bench: NOT AS ASKED: {warning}");
    }
    tb
}

/// Runs `trial` on `tb`, saying what runs; exits with the error if it fails, having
/// deleted the testbed and `dir` (exit runs no destructors).
pub fn measure_or_exit(
    bench: &str,
    tb: &Testbed,
    options: &UpOptions,
    polld: &Path,
    dir: &Path,
    trial: &Trial,
) -> DemoRow {
    announce(bench, trial);
    measure(tb, options, polld, dir, trial).unwrap_or_else(|e| {
        eprintln!("{bench} bench: {}: {e}", trial.label);
        let _ = std::fs::remove_dir_all(dir);
        if let Err(e) = polld_testbed::down(tb.layout()) {
            eprintln!("{bench} bench: tearing down the testbed failed: {e}");
        }
        std::process::exit(1);
    })
}

/// Prints each row's end-to-end ledger (`ledger <forwarder> (<load>): sent = delivered +
/// named drops`), and the biggest named drop over all rows.
pub fn print_ledgers<'a>(rows: impl Iterator<Item = (&'a str, &'a DemoRow)>) {
    print_labelled_ledgers(
        rows.filter_map(|(load, row)| {
            Some((format!("{} ({load})", row.mode), row.ledger.as_ref()?))
        }),
    );
}

/// Prints `ledger <label>: sent = delivered + named drops` per ledger, `UNBALANCED` after
/// one that does not balance, and the biggest named drop over all of them.
pub fn print_labelled_ledgers<'a>(ledgers: impl Iterator<Item = (String, &'a Ledger)>) {
    let mut biggest: Option<(String, u64, String)> = None;
    for (label, ledger) in ledgers {
        let verdict = if ledger.balanced() {
            ""
        } else {
            "  UNBALANCED"
        };
        println!("ledger {label}: {ledger}{verdict}");
        for (hop, n) in &ledger.lost {
            if biggest.as_ref().is_none_or(|(_, b, _)| n > b) {
                biggest = Some((hop.clone(), *n, label.clone()));
            }
        }
    }
    if let Some((hop, n, label)) = biggest {
        println!("biggest named drop: {hop} {n}, in {label}");
    }
}

/// Says which trial runs, for how long (a progress line on stderr).
pub fn announce(bench: &str, trial: &Trial) {
    eprintln!(
        "{bench} bench: {} ({:?}), {} s ...",
        trial.label, trial.load, trial.duration
    );
}
