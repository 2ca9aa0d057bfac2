//! The forward bench's alternated flood rounds: polling against interrupt mode on each veth
//! backend, measured again in turns after the main table. One flood window's ratio varies
//! between runs on a shared machine (0.84x to 1.06x in the runs of 2026-11-25, README) more
//! than the gap the bench is asked about, so the verdict "polling ≥ interrupt" is taken
//! from the median of the per-round ratios (the main table's flood rows count as round 1),
//! with every window's row in the table.

use polld_testbed::demo::Forwarder;
use polld_testbed::Testbed;

use super::{Bench, Row, VETH_BACKENDS};

/// The load name of a round's rows in the table.
pub(super) const LOAD: &str = "round";

const MODES: [&str; 2] = ["interrupt", "polling"];

/// `rounds` more flood windows of interrupt and polling mode on each veth backend, in
/// turns, kept as rows of load [`LOAD`]. Skips a backend `POLLD_BENCH_ONLY` leaves a
/// mode out of.
pub(super) fn run(bench: &mut Bench, tb: &Testbed, rounds: usize) {
    for _ in 0..rounds {
        for backend in VETH_BACKENDS {
            let labels = MODES.map(|mode| format!("polld {backend} {mode}"));
            let forwarder = |mode| Forwarder::Polld {
                backend,
                mode,
                knobs: &[],
            };
            if !MODES
                .iter()
                .zip(&labels)
                .all(|(mode, label)| bench.selected(label, forwarder(mode)))
            {
                continue;
            }
            for (mode, label) in MODES.iter().zip(&labels) {
                bench.run(tb, label, forwarder(mode), LOAD, "unlimited");
            }
        }
    }
}

/// Per backend: the ratio polling/interrupt of each round (the main table's flood rows
/// first), their median, and the median delivered rates.
pub(super) fn report(rows: &[Row]) {
    for backend in VETH_BACKENDS {
        let windows = |mode: &str| -> Vec<f64> {
            let label = format!("polld {backend} {mode}");
            rows.iter()
                .filter(|r| r.demo.mode == label && (r.load == "flood" || r.load == LOAD))
                .map(|r| r.demo.delivered_pps)
                .collect()
        };
        let (interrupt, polling) = (windows("interrupt"), windows("polling"));
        if interrupt.len() < 2 || interrupt.len() != polling.len() {
            continue;
        }
        let ratios: Vec<f64> = polling
            .iter()
            .zip(&interrupt)
            .map(|(p, i)| p / i.max(1.0))
            .collect();
        let listed: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "polld {backend} polling against interrupt mode, {} alternated flood windows each: \
             {} -> median {:.2}x (median delivered {:.0} against {:.0} kpps)",
            ratios.len(),
            listed.join(" "),
            median(&ratios),
            median(&polling) / 1e3,
            median(&interrupt) / 1e3
        );
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}
