//! `polld bench ramp --quick --json` end to end (root only): it brings up its own TAP
//! testbed, ramps gen's rate through polld in auto mode beside a competitor, and prints
//! every sample. Checked: the structure, that auto mode polled during the flood and took
//! interrupts again at the end, its SVG plots, and conservation. Rates are not checked:
//! the bench prints them.
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
    for s in steps {
        assert!(s["competitor_over_user_frac"].is_number(), "{s}");
        assert!(s["promise_held"].is_boolean(), "{s}");
    }

    let samples = report["samples"].as_array().expect("samples");
    assert!(samples.len() >= 5 * 4, "too few samples: {}", samples.len());
    for s in samples {
        for field in [
            "t",
            "offered_pps",
            "delivered_pps",
            "polld_cpu_percent",
            "competitor_percent",
            "interrupts_per_sec",
        ] {
            assert!(s[field].is_number(), "{field} missing in {s}");
        }
    }
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
