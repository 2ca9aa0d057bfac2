//! The forward bench's DPDK testpmd rows ([`polld_testbed::testpmd`]): testpmd on
//! `net_af_xdp` and on `net_af_packet`, under a flood and at the polld rows' half load,
//! and how polld's CPU per packet compares. A testpmd that is not installed or cannot
//! start is a line in the report, not the end of the bench.

use polld_testbed::demo::Forwarder;
use polld_testbed::Testbed;

use super::{Bench, Row, MODES, VETH_BACKENDS};

fn label(backend: &str) -> String {
    format!("testpmd {backend}")
}

/// testpmd's rows on `tb` at a flood and at `half` frames/s, or notes saying why not.
pub(super) fn run(bench: &mut Bench, tb: &Testbed, half: u64) {
    let program = match polld_testbed::testpmd::program() {
        Ok(program) => program,
        Err(e) => {
            bench.notes.push(format!("DPDK testpmd: {e}; skipped"));
            return;
        }
    };
    for backend in VETH_BACKENDS {
        let label = label(backend);
        let forwarder = Forwarder::Testpmd {
            program: &program,
            backend,
        };
        if !bench.selected(&label, forwarder) {
            continue;
        }
        let half = half.to_string();
        let flood = bench.trial(&label, forwarder, "unlimited");
        let at_half = bench.trial(&label, forwarder, &half);
        let result = bench
            .try_run(tb, "flood", &flood)
            .and_then(|_| bench.try_run(tb, "half", &at_half));
        if let Err(e) = result {
            bench.notes.push(format!("DPDK {label}: {e}; skipped"));
        }
    }
}

/// polld's CPU per packet at half load against testpmd's on the same backend, and
/// whether testpmd's counters accounted for every frame.
pub(super) fn report(rows: &[Row]) {
    let half = |label: &str| {
        rows.iter()
            .find(|r| r.demo.mode == label && r.load == "half")
    };
    for backend in VETH_BACKENDS {
        let Some(testpmd) = half(&label(backend)) else {
            continue;
        };
        for mode in MODES {
            let polld = format!("polld {backend} {mode}");
            if let Some(p) = half(&polld) {
                println!(
                    "{polld}: CPU per packet at half load = {:.2}x testpmd's (goal <= 0.5x)",
                    p.cpu_ns_per_frame() / testpmd.cpu_ns_per_frame().max(1e-9)
                );
            }
        }
    }
    let runs: Vec<&Row> = rows.iter().filter(|r| r.demo.testpmd.is_some()).collect();
    if !runs.is_empty() {
        println!(
            "testpmd rows: \"polld CPU\" is testpmd's own (both lcores, from /proc), \"RSS\" its resident memory (-m 512 without hugepages)"
        );
    }
    let unbalanced: Vec<String> = runs
        .iter()
        .filter(|r| r.demo.testpmd.is_some_and(|c| !c.balanced()))
        .map(|r| format!("{} ({})", r.demo.mode, r.load))
        .collect();
    if unbalanced.is_empty() && !runs.is_empty() {
        println!(
            "testpmd's counters accounted for every frame in all {} testpmd runs",
            runs.len()
        );
    } else if !unbalanced.is_empty() {
        println!(
            "testpmd's counters UNBALANCED in: {}",
            unbalanced.join(", ")
        );
    }
}
