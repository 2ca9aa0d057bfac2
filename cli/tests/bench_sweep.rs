//! `polld bench sweep --quick --json` end to end (root only): it brings up its own veth
//! testbed and then its own TAP testbed, measures interrupt mode's capacity on each, and
//! runs the kernel (veth only) and every mode of polld at three loads. Checked: the
//! structure (every forwarder at every load, polling at user_frac 10 above capacity only,
//! the kernel only where it can forward), that no forwarder delivered more than gen
//! offered, that the latency quantiles are in order, that each check's verdict is the one
//! its ratio and bound give, the plots, and conservation. Whether a check holds is not
//! checked: the bench prints it.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use serde_json::Value;

#[test]
fn the_quick_sweep_runs_every_forwarder_at_every_load_on_both_testbeds_and_conserves() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let (_dir, report, stderr) = common::quick_bench("sweep", "sw");

    assert_eq!(report["conserved"], true, "{report:#}");
    let loads: Vec<f64> = report["loads"]
        .as_array()
        .expect("loads")
        .iter()
        .map(|l| l.as_f64().unwrap())
        .collect();
    assert_eq!(loads, [0.1, 0.5, 1.2]);
    let testbeds = report["testbeds"].as_array().expect("testbeds");
    let names: Vec<&str> = testbeds
        .iter()
        .map(|t| t["testbed"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["veth", "tap"]);
    let num = |v: &Value, field: &str| -> f64 {
        v[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing in {v}"))
    };

    for t in testbeds {
        let name = t["testbed"].as_str().unwrap();
        assert!(num(t, "capacity_pps") > 0.0, "{t:#}");
        assert_eq!(t["not_conserved"], Value::Array(vec![]), "{t:#}");
        let points = t["points"].as_array().expect("points");
        let mut forwarders = vec!["interrupt", "adaptive", "polling", "auto", "busy"];
        if name == "veth" {
            forwarders.insert(0, "kernel");
        }
        // Every forwarder at every load, in order; polling at user_frac 10 above capacity.
        let mut want: Vec<(String, f64)> = forwarders
            .iter()
            .flat_map(|f| loads.iter().map(move |l| (f.to_string(), *l)))
            .collect();
        want.push(("polling, user_frac 10".into(), 1.2));
        let got: Vec<(String, f64)> = points
            .iter()
            .map(|p| (p["forwarder"].as_str().unwrap().to_string(), num(p, "load")))
            .collect();
        assert_eq!(got, want, "{name}");
        for p in points {
            assert!(
                stderr.contains(&format!(
                    "polld bench sweep: {name}: {} at {:.0} % ({}/s)",
                    p["forwarder"].as_str().unwrap(),
                    num(p, "load") * 100.0,
                    p["rate_pps"]
                )),
                "no progress line for {p}\n{stderr}"
            );
            // The sink receives no more than gen sent.
            let (offered, delivered) = (num(p, "offered_pps"), num(p, "delivered_pps"));
            assert!(offered > 0.0, "{p}");
            assert!(delivered <= offered * 1.01 + 10.0, "{name}: {p}");
            if let (Some(p50), Some(p99), Some(p999)) = (
                p["p50_us"].as_f64(),
                p["p99_us"].as_f64(),
                p["p999_us"].as_f64(),
            ) {
                assert!(p50 <= p99 && p99 <= p999, "{p}");
            }
            let kernel = p["forwarder"] == "kernel";
            assert_eq!(p["conserved"].is_null(), kernel, "{p}");
            assert_eq!(p["interrupts_per_sec"].is_null(), kernel, "{p}");
            assert_eq!(!p["auto"].is_null(), p["forwarder"] == "auto", "{p}");
            assert!(num(p, "cpu_busy_percent") >= 0.0, "{p}");
        }

        // Each verdict is the one its ratio and bound give.
        let checks = t["checks"].as_array().expect("checks");
        for c in checks {
            let Some(ratio) = c["ratio"].as_f64() else {
                continue;
            };
            let bound = num(c, "bound");
            let rule = c["rule"].as_str().unwrap();
            let holds = match rule {
                "overload" => ratio >= bound,
                _ => ratio <= bound,
            };
            assert_eq!(c["holds"], holds, "{c}");
            let verdict = c["verdict"].as_str().unwrap();
            assert_eq!(verdict == "holds", holds, "{c}");
            if !holds {
                let by = format!("does not hold by {:.2}", (ratio - bound).abs());
                assert_eq!(verdict, by, "{c}");
            }
            let below = num(c, "load") < 1.0;
            match rule {
                "auto_p99" | "auto_cpu" | "busy_lowest" | "polling_bound" => {
                    assert!(below, "{c}")
                }
                "overload" => assert!(!below, "{c}"),
                "best_vs_kernel" => assert_eq!(name, "veth", "{c}"),
                other => panic!("unknown rule {other}"),
            }
        }
        let rules: Vec<&str> = checks.iter().map(|c| c["rule"].as_str().unwrap()).collect();
        for rule in [
            "auto_p99",
            "auto_cpu",
            "busy_lowest",
            "polling_bound",
            "overload",
        ] {
            assert!(
                rules.contains(&rule),
                "no {rule} check on {name}: {checks:#?}"
            );
        }
        assert!(t["auto_switched"]
            .as_str()
            .unwrap()
            .contains("auto_polling"));

        let svgs = t["svgs"].as_array().expect("svgs");
        assert_eq!(svgs.len(), 2, "{name}");
        for svg in svgs {
            let text = std::fs::read_to_string(svg.as_str().unwrap()).expect("the SVG exists");
            assert!(text.starts_with("<svg"), "{svg} is no SVG");
        }
    }
}
