//! The seed's promise on real traffic (root only): on a TAP testbed under an unlimited
//! flood from gen on CPU0, with polld realtime on CPU1, a CPU-bound competitor pinned to
//! CPU1 gets `kern.polling.user_frac` ± 5 points of it at user_frac 10, 50 and 90, and
//! less than 15 % in interrupt mode; in auto mode it gets user_frac ± 5 at 50 too, and
//! polld delivers at least 90 % of what polling delivered in a window just before, measured
//! from the competitor's own CPU time
//! (`/proc/PID/schedstat`). Conservation holds on every interface in every trial.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use common::{testbed_of, Dir, POLLD};
use polld_testbed::share::{measure_share, ShareRow, ShareTrial};
use polld_testbed::Devices;

/// One trial; a share outside `accept` is measured once more. A 2-core CI machine runs
/// other work (kernel threads, the test harness, other jobs' processes) that lands on
/// CPU1 now and then; one 2-second window hit by such a burst says nothing about polld,
/// two in a row do. Conservation must hold in every trial.
fn share(
    tb: &polld_testbed::Testbed,
    dir: &Dir,
    mode: &str,
    user_frac: u32,
    accept: impl Fn(f64) -> bool,
) -> ShareRow {
    let trial = ShareTrial::flood(mode, user_frac, 1.0, 2.0);
    let polld = std::path::Path::new(POLLD);
    let mut row = measure_share(tb, polld, &dir.0, (0, 1), &trial).expect("share trial");
    assert!(row.conserved, "conservation: {row:?}");
    if !accept(row.competitor_percent) {
        eprintln!("{mode} user_frac {user_frac}: measuring again after {row:?}");
        row = measure_share(tb, polld, &dir.0, (0, 1), &trial).expect("share trial");
        assert!(row.conserved, "conservation: {row:?}");
    }
    eprintln!(
        "{mode} user_frac {user_frac}: competitor {:.1} %, polld {:.1} %, delivered {:.0}/s",
        row.competitor_percent, row.polld_cpu_percent, row.delivered_pps
    );
    row
}

#[test]
fn a_competitor_on_the_poll_cpu_keeps_user_frac_under_a_flood_and_starves_with_interrupts() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let tb = testbed_of("sh", Devices::Tap);
    let dir = Dir::new("promise");
    for user_frac in [10, 50, 90] {
        let target = f64::from(user_frac);
        let row = share(&tb, &dir, "polling", user_frac, |c| {
            (c - target).abs() <= 5.0
        });
        assert!(
            (row.competitor_percent - target).abs() <= 5.0,
            "user_frac {user_frac}: {row:?}"
        );
        assert_eq!(row.interrupts_per_sec, 0.0, "{row:?}");
        assert!(row.delivered_pps > 10_000.0, "polld forwards: {row:?}");
    }
    // Auto mode finds the overload itself: polling's share, and nearly its delivery. Two
    // flood windows of one mode differ by up to 15 % on this shared 2-core machine (polling
    // at user_frac 50 in one run: 165, 189 and 195 kpps), so auto is compared with a polling
    // window taken just before it, in up to three pairs; a mode that failed to poll would
    // starve the competitor instead, or deliver less in every pair.
    let mut pairs = Vec::new();
    for _ in 0..3 {
        let polled = share(&tb, &dir, "polling", 50, |c| (c - 50.0).abs() <= 5.0);
        let row = share(&tb, &dir, "auto", 50, |c| (c - 50.0).abs() <= 5.0);
        assert!(
            (row.competitor_percent - 50.0).abs() <= 5.0,
            "auto: {row:?}"
        );
        let ratio = row.delivered_pps / polled.delivered_pps;
        pairs.push((ratio, row));
        if ratio >= 0.9 {
            break;
        }
    }
    assert!(
        pairs.iter().any(|(ratio, _)| *ratio >= 0.9),
        "auto delivers under 0.9x polling's in every pair: {pairs:?}"
    );
    // Interrupt mode starves the competitor. Its interrupts over the window are not
    // checked: under the flood a handler may never find its ring empty, and then one
    // interrupt runs through the whole window (0 interrupts/s measured; the seeds' curve
    // shows 0 to 3 at its floods).
    let row = share(&tb, &dir, "interrupt", 50, |c| c < 15.0);
    assert!(row.competitor_percent < 15.0, "interrupt mode: {row:?}");
}
