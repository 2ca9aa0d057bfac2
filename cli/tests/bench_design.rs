//! `polld bench design --quick --json --steps looks,quiet_cycles --results FILE` end to
//! end (root only): it brings up its own TAP testbed and runs two of its comparisons.
//! Checked: the report's structure (the steps in the bench's order, each row naming its
//! knob, the default polld starts with and the alternative), that both sides of every row
//! measured something, the ratio it prints, conservation, a progress line per side, and the
//! results page with its command. Which side wins is not checked: the bench prints it.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use std::process::Command;

use common::{Dir, POLLD};
use polld_core::Knobs;
use serde_json::Value;

#[test]
fn two_quick_comparisons_measure_both_sides_and_write_their_page() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let dir = Dir::new("bench-design");
    let page = dir.0.join("design.md");
    let prefix = format!("pt{}bd", std::process::id() % 10_000);
    let out = Command::new(POLLD)
        .args(["bench", "design", "--quick", "--json", "--prefix", &prefix])
        .args(["--steps", "looks,quiet_cycles", "--results"])
        .arg(&page)
        .output()
        .expect("run polld bench design");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "polld bench design failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");

    assert_eq!(report["conserved"], true, "{report:#}");
    assert_eq!(
        report["steps"],
        serde_json::json!(["quiet_cycles", "looks"])
    );
    let defaults = Knobs::default();
    let expected = [
        ("quiet_cycles", defaults.quiet_cycles),
        ("looks", defaults.looks),
    ];
    let rows = report["rows"].as_array().expect("rows");
    // Two figures per step: CPU and tick wakeups when idle, latency p50 and p99.
    let steps: Vec<&str> = rows.iter().map(|r| r["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["quiet_cycles", "quiet_cycles", "looks", "looks"]);
    for r in rows {
        let (knob, default) = expected
            .iter()
            .find(|(k, _)| r["step"] == *k)
            .expect("a step asked for");
        assert_eq!(r["setting"], format!("kern.polling.{knob}"), "{r}");
        assert_eq!(r["default"]["value"], default.to_string(), "{r}");
        assert_eq!(r["alternative"]["value"], "0", "{r}");
        assert!(!r["measured"].as_str().unwrap().is_empty(), "{r}");
        let figure = |side: &str| r[side]["figure"].as_f64().expect("a figure");
        let (d, a) = (figure("default"), figure("alternative"));
        assert!(d >= 0.0 && a >= 0.0, "{r}");
        match r["ratio"].as_f64() {
            Some(ratio) => assert!((ratio - a / d).abs() <= 1e-9 * ratio.abs(), "{r}"),
            None => assert_eq!(d, 0.0, "no ratio but a default of {d}: {r}"),
        }
    }
    // Both sides measured: polld used CPU in each idle window (it answered the samples),
    // and the sink timed frames through polld with and without looks.
    for r in [&rows[0], &rows[2], &rows[3]] {
        for side in ["default", "alternative"] {
            assert!(r[side]["figure"].as_f64().unwrap() > 0.0, "{side}: {r}");
        }
    }
    // Polling that never goes quiet takes its ticks.
    assert!(rows[1]["alternative"]["figure"].as_f64().unwrap() > 0.0);
    for (knob, default) in expected {
        for value in [default.to_string(), "0".to_string()] {
            let line = format!("polld bench design: kern.polling.{knob} = {value} (");
            assert!(
                stderr.contains(&line),
                "no progress line {line:?}\n{stderr}"
            );
        }
    }

    let page = std::fs::read_to_string(&page).expect("the results page");
    assert!(page.starts_with("# polld bench design\n"), "{page}");
    assert!(
        page.contains("| command | `polld bench design --quick --json"),
        "{page}"
    );
    assert!(
        page.contains("\"setting\": \"kern.polling.looks\""),
        "{page}"
    );
}
