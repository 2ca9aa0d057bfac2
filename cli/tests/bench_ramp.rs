//! `polld bench ramp --quick --json` end to end (root only): it brings up its own TAP
//! testbed, ramps gen's rate through polld in auto mode beside a competitor, and prints
//! every sample. Checked: that the offered rate rises to the flood and falls back, that
//! below the flood polld delivers what gen offers and over the run no more than it sent,
//! that each step's promise verdict is the one its printed shares give, that auto mode
//! polled during the flood and took interrupts again at the end, its SVG plots, and
//! conservation. How much the competitor got is not checked: the bench prints it.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use serde_json::Value;

#[test]
fn the_quick_ramp_polls_during_the_flood_returns_to_interrupts_and_conserves() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let (_dir, report, stderr) = common::quick_bench("ramp", "br");

    assert_eq!(report["mode"], "auto");
    assert_eq!(report["conserved"], true, "{report:#}");
    let steps = report["steps"].as_array().expect("steps");
    let rates: Vec<&str> = steps.iter().map(|s| s["rate"].as_str().unwrap()).collect();
    assert_eq!(rates, ["idle", "30000", "unlimited", "30000", "idle"]);
    for n in 1..=steps.len() {
        assert!(
            stderr.contains(&format!("polld bench ramp: step {n}/{}", steps.len())),
            "no progress line for step {n}\n{stderr}"
        );
    }

    assert_eq!(report["user_frac"], 50);
    let num = |v: &Value, field: &str| -> f64 {
        v[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing in {v}"))
    };
    for s in steps {
        // The verdict is the one the printed shares give: at least user_frac - 5.
        let competitor = num(s, "competitor_percent");
        let over = num(s, "competitor_over_user_frac");
        assert!((over - (competitor - 50.0)).abs() < 1e-6, "{s}");
        assert_eq!(s["promise_held"], over >= -5.0, "{s}");
        // polld and the competitor share one CPU.
        let cpu = competitor + num(s, "polld_cpu_percent");
        assert!(cpu <= 102.0, "{cpu} % of one CPU: {s}");
    }
    // gen's rate rises to the flood and falls back; the idle steps offer nothing.
    let offered: Vec<f64> = steps.iter().map(|s| num(s, "offered_pps")).collect();
    assert!(
        offered[0] < 100.0 && offered[4] < 100.0,
        "idle steps offered {offered:?}"
    );
    assert!(
        offered[0] < offered[1] && offered[1] < offered[2],
        "offered does not rise: {offered:?}"
    );
    assert!(
        offered[2] > offered[3] && offered[3] > offered[4],
        "offered does not fall: {offered:?}"
    );
    assert!(
        (15_000.0..=31_000.0).contains(&offered[1]),
        "30000 asked, {} offered",
        offered[1]
    );
    // Below the flood polld keeps up: what gen offers at 30 kpps reaches sink (the TAP
    // dropped up to 4 % of it in some runs, its queue full).
    let delivered = num(&steps[1], "delivered_pps");
    assert!(
        delivered >= 0.8 * offered[1] && delivered <= 1.05 * offered[1],
        "30 kpps offered, {delivered}/s delivered: {:#}",
        steps[1]
    );

    let samples = report["samples"].as_array().expect("samples");
    assert!(samples.len() >= 5 * 4, "too few samples: {}", samples.len());
    // Over the run sink receives no more than gen sent (each sample's rate times its
    // interval; the TAP's queue may carry a few frames past a sample's end).
    let (mut sent, mut received, mut t0) = (0.0, 0.0, 0.0);
    for s in samples {
        let t = num(s, "t");
        assert!(t > t0, "samples out of order at {s}");
        sent += num(s, "offered_pps") * (t - t0);
        received += num(s, "delivered_pps") * (t - t0);
        t0 = t;
        for field in [
            "polld_cpu_percent",
            "competitor_percent",
            "interrupts_per_sec",
        ] {
            assert!(num(s, field) >= 0.0, "{field} in {s}");
        }
    }
    assert!(
        received <= sent * 1.01 + 100.0,
        "sink received {received:.0} frames, gen sent {sent:.0}"
    );
    let polls = |s: &Value| {
        s["polling"]
            .as_object()
            .expect("polling per interface")
            .values()
            .any(|v| v == 1)
    };
    assert!(
        samples
            .iter()
            .filter(|s| s["rate"] == "unlimited")
            .any(polls),
        "auto mode never polled during the flood: {report:#}"
    );
    assert!(
        !polls(samples.last().unwrap()),
        "auto mode still polls at the end of the idle step: {report:#}"
    );
    assert!(samples.last().unwrap()["auto_switches"].as_u64().unwrap() >= 2);

    for svg in report["svgs"].as_array().expect("svgs") {
        let text = std::fs::read_to_string(svg.as_str().unwrap()).expect("the SVG exists");
        assert!(text.starts_with("<svg"), "{svg} is no SVG");
    }
}
