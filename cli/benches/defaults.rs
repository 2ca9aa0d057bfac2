//! What `polld run` does with no `[knobs]` (root): the promise and the forwarding rate of
//! the defaults, on a TAP testbed of its own, every figure against a baseline measured in
//! the same run. polld runs realtime on CPU1 with only `kern.polling.user_frac` set.
//! - Share: under an unlimited flood from `polld gen` on CPU0, with a CPU-bound competitor
//!   pinned to CPU1, polld in interrupt mode (the baseline), then polling at user_frac 10,
//!   50 and 90. The promise: the competitor gets user_frac ± 5 points of CPU1 (from its own
//!   `/proc` CPU time); and polling at user_frac 10 forwards at least 0.8x what interrupt
//!   mode forwarded.
//! - Latency: 64-byte frames at `--rate` (10k) through polld, one-way to `polld sink
//!   --backend af_xdp` on tap1, in interrupt mode (the baseline) and polling. The promise:
//!   polling's p99 within 1/hz + 100 µs (a tick, and what the path takes).
//!
//! Each line ends `kept` or `NOT kept`; the bench exits 1 if conservation failed in any
//! run, not on a figure (one window on a shared machine can be hit by unrelated work).
//!
//! `cargo bench -p polld --bench defaults [-- --prefix dflt] [--window 3] [--rate 10k] [--duration 5]`

mod common;

use common::{arg, is_root, measure_or_exit, testbed};
use polld_core::Knobs;
use polld_testbed::demo::{DemoRow, Forwarder, Load, Trial};
use polld_testbed::share::{measure_share, ShareRow, ShareTrial};
use polld_testbed::{Devices, UpOptions};

/// The user_frac values the promise is checked at.
const USER_FRACS: [u32; 3] = [10, 50, 90];
/// How far from user_frac the competitor's share may be, in points.
const SHARE_SLACK: f64 = 5.0;
/// Polling at user_frac 10 forwards at least this fraction of interrupt mode's rate.
const MIN_FORWARD_RATIO: f64 = 0.8;
/// What the path may add to polling's tick in the latency bound, µs.
const PATH_US: f64 = 100.0;

fn verdict(kept: bool) -> &'static str {
    if kept {
        "kept"
    } else {
        "NOT kept"
    }
}

fn main() {
    if !is_root("defaults") {
        return;
    }
    let window: f64 = arg("--window").unwrap_or(3.0);
    let rate: String = arg("--rate").unwrap_or_else(|| "10k".to_string());
    let duration: f64 = arg("--duration").unwrap_or(5.0);
    let polld = std::path::Path::new(env!("CARGO_BIN_EXE_polld"));
    let options = UpOptions::default();
    let (gen_cpu, fwd_cpu) = (options.cpus.gen, options.cpus.fwd);
    let tb = testbed("defaults", Devices::Tap, &options);
    let dir = std::env::temp_dir().join(format!("polld-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let fail = |what: &str, e: polld_testbed::TestbedError| -> ! {
        eprintln!("defaults bench: {what}: {e}");
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = polld_testbed::down(tb.layout()) {
            eprintln!("defaults bench: tearing down the testbed failed: {e}");
        }
        std::process::exit(1);
    };

    let mut shares: Vec<ShareRow> = Vec::new();
    let floods = std::iter::once(("interrupt", 50)).chain(USER_FRACS.map(|uf| ("polling", uf)));
    for (mode, user_frac) in floods {
        eprintln!("defaults bench: {mode}, user_frac {user_frac}, flood and a competitor on CPU{fwd_cpu}, {window} s ...");
        let trial = ShareTrial::flood(mode, user_frac, 1.0, window);
        let row = measure_share(&tb, polld, &dir, (gen_cpu, fwd_cpu), &trial)
            .unwrap_or_else(|e| fail(&format!("{mode} user_frac {user_frac}"), e));
        shares.push(row);
    }

    let latency_trial = |mode: &'static str| Trial {
        label: mode.to_string(),
        forwarder: Forwarder::Polld {
            backend: "tap",
            mode,
            knobs: &[],
        },
        load: Load::Frames {
            rate: &rate,
            sink: true,
        },
        duration,
    };
    let latencies: Vec<DemoRow> = ["interrupt", "polling"]
        .iter()
        .map(|mode| measure_or_exit("defaults", &tb, &options, polld, &dir, &latency_trial(mode)))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);

    let hz = Knobs::default().hz;
    println!(
        "\npolld's defaults (no [knobs] but user_frac), TAP testbed: polld realtime on CPU{fwd_cpu}, polld gen on CPU{gen_cpu}, kern.polling.hz {hz}"
    );
    println!("flood, 60-byte frames, a CPU-bound competitor on CPU{fwd_cpu}, {window} s windows:");
    println!(
        "{:<22} {:>11} {:>12} {:>10} {:>11}",
        "polld", "offered/s", "delivered/s", "polld CPU", "competitor"
    );
    for r in &shares {
        println!(
            "{:<22} {:>11.0} {:>12.0} {:>9.1}% {:>10.1}%",
            format!("{}, user_frac {}", r.mode, r.user_frac),
            r.offered_pps,
            r.delivered_pps,
            r.polld_cpu_percent,
            r.competitor_percent
        );
    }
    let interrupt = &shares[0];
    for r in &shares[1..] {
        let off = r.competitor_percent - f64::from(r.user_frac);
        println!(
            "share at user_frac {}: competitor {:.1} % ({off:+.1} points): {}",
            r.user_frac,
            r.competitor_percent,
            verdict(off.abs() <= SHARE_SLACK)
        );
    }
    let polling_10 = &shares[1];
    let ratio = polling_10.delivered_pps / interrupt.delivered_pps.max(1.0);
    println!(
        "forwarding at user_frac 10: {:.0}/s polling against {:.0}/s in interrupt mode = {ratio:.2}x (at least {MIN_FORWARD_RATIO}x): {}",
        polling_10.delivered_pps,
        interrupt.delivered_pps,
        verdict(ratio >= MIN_FORWARD_RATIO)
    );

    let bound_us = 1e6 / f64::from(hz) + PATH_US;
    println!("\none-way latency at {rate}/s, 64-byte frames, to polld sink (af_xdp) on tap1, {duration} s each:");
    let p99 = |r: &DemoRow| r.latency.map(|l| l.p99_us);
    for r in &latencies {
        let l = r.latency;
        let us = |f: fn(&polld_testbed::demo::SinkLatency) -> f64| {
            l.as_ref()
                .map_or("-".to_string(), |l| format!("{:.0}", f(l)))
        };
        println!(
            "{:<10} delivered {:>7.0}/s lost {:>5} p50 {:>6} µs p99 {:>6} µs max {:>6} µs",
            r.mode,
            r.delivered_pps,
            l.map_or("-".to_string(), |l| l.lost.to_string()),
            us(|l| l.p50_us),
            us(|l| l.p99_us),
            us(|l| l.max_us)
        );
    }
    let polling_p99 = p99(&latencies[1]);
    println!(
        "polling p99 {} µs (interrupt mode's {} µs in the same run) against 1/hz + {PATH_US:.0} µs = {bound_us:.0} µs: {}",
        polling_p99.map_or("-".to_string(), |p| format!("{p:.0}")),
        p99(&latencies[0]).map_or("-".to_string(), |p| format!("{p:.0}")),
        verdict(polling_p99.is_some_and(|p| p <= bound_us))
    );

    let conserved =
        shares.iter().all(|r| r.conserved) && latencies.iter().all(|r| r.conserved != Some(false));
    if conserved {
        println!("conservation held on every interface in every polld run");
    } else {
        println!("CONSERVATION VIOLATED in some polld run: see `polld run --json`");
        std::process::exit(1);
    }
}
