//! Per-CPU polling on real traffic (root only, 2 CPUs): polld with `[daemon] cpus = [0, 1]`
//! polls one TAP pair on each CPU, each CPU with its own `net.ifpoll.N.rx.user_frac`
//! (90 on CPU0, 85 on CPU1), and a CPU-bound competitor on each CPU gets its CPU's
//! `user_frac` ± 5 points while polld works through a flood queued on both CPUs, measured
//! from the competitor's own CPU time (`/proc/PID/schedstat`). Conservation holds on every
//! interface of both CPUs.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use common::{testbed_of, Dir, POLLD};
use polld_testbed::share::{measure_per_cpu_shares, PerCpuRow, PerCpuTrial};
use polld_testbed::Devices;

#[test]
fn a_competitor_on_each_poll_cpu_keeps_that_cpus_user_frac() {
    require_root!();
    if std::thread::available_parallelism().map_or(0, |n| n.get()) < 2 {
        eprintln!("skipped: needs 2 CPUs (a poll thread and a competitor on each)");
        return;
    }
    let tb = testbed_of("pc", Devices::Tap);
    let second = tb.add_tap_pair(1).expect("second TAP pair");
    let dir = Dir::new("percpu");
    let trial = PerCpuTrial {
        cpus: vec![(0, tb.layout().clone(), 90), (1, second, 85)],
        fill: 1.5,
        warm_up: 0.3,
        window: 1.2,
    };
    let polld = std::path::Path::new(POLLD);
    let within = |r: &PerCpuRow| (r.competitor_percent - f64::from(r.user_frac)).abs() <= 5.0;
    let mut rows = measure_per_cpu_shares(&tb, polld, &dir.0, &trial).expect("per-CPU trial");
    // A 2-CPU CI machine runs other work now and then; one window hit by it says nothing
    // about polld, two in a row do.
    if !rows.iter().all(within) {
        eprintln!("measuring again after {rows:?}");
        rows = measure_per_cpu_shares(&tb, polld, &dir.0, &trial).expect("per-CPU trial");
    }
    for r in &rows {
        eprintln!(
            "CPU{} user_frac {}: competitor {:.1} %, polld {:.1} %, forwarded {:.0}/s, backlog left {}",
            r.cpu, r.user_frac, r.competitor_percent, r.polld_cpu_percent, r.forwarded_pps, r.backlog_left
        );
        assert!(r.conserved, "conservation on CPU{}: {r:?}", r.cpu);
        assert!(r.backlog_left > 0, "the flood ran dry in the window: {r:?}");
        assert!(
            r.forwarded_pps > 10_000.0,
            "polld forwards on CPU{}: {r:?}",
            r.cpu
        );
        assert!(within(r), "CPU{}: {r:?}", r.cpu);
    }
}
