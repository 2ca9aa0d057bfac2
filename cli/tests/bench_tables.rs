//! `polld bench tables --quick --json` end to end (root only): on a veth testbed of its
//! own, polld on the kernel's tables with one route, then with 10,000 IPv4 and 2,000 IPv6
//! routes added by `ip -batch`. Checked: polld held exactly the kernel's routes (the
//! one-route run's plus the batch's), both floods were forwarded, the memory figures are
//! polld's, each check's verdict is the one its figure and bound give, and every frame of
//! both runs is accounted for. Whether a check holds is not checked: the bench prints it.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use common::POLLD;
use serde_json::Value;
use std::process::Command;

#[test]
fn the_quick_tables_bench_takes_in_every_kernel_route_and_conserves() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let prefix = format!("pt{}tb", std::process::id() % 10_000);
    let out = Command::new(POLLD)
        .args(["bench", "tables", "--quick", "--json", "--prefix", &prefix])
        .output()
        .expect("run polld bench tables");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "polld bench tables failed:\n{stderr}");
    let r = common::one_document("polld bench tables", &out.stdout, &["checks"]);
    let num = |v: &Value, field: &str| -> f64 {
        v[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field} missing in {v}"))
    };

    assert_eq!(r["conserved"], true, "{r:#}");
    assert_eq!((num(&r, "routes"), num(&r, "routes6")), (10_000.0, 2_000.0));
    let (one, full) = (&r["one_route"], &r["full_table"]);
    // One route of its own: the default, beside the connected ones.
    assert!(num(one, "polld_routes") >= 1.0, "{r:#}");
    assert_eq!(
        num(full, "polld_routes") - num(one, "polld_routes"),
        10_000.0,
        "{r:#}"
    );
    assert_eq!(
        num(full, "polld_routes6") - num(one, "polld_routes6"),
        2_000.0,
        "{r:#}"
    );
    for flood in [one, full] {
        assert_eq!(flood["conserved"], true, "{r:#}");
        assert!(num(flood, "forwarded_pps") > 0.0, "{r:#}");
        assert!(num(flood, "offered_pps") > 0.0, "{r:#}");
        let (rss, peak) = (num(flood, "rss_mb"), num(flood, "peak_rss_mb"));
        assert!(0.0 < rss && rss <= peak, "{r:#}");
    }
    assert!(num(&r, "kernel_load_s") > 0.0 && num(&r, "take_in_s") > 0.0);

    let checks = r["checks"].as_array().expect("checks");
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["take_in_s", "peak_rss_mb", "rate_share"]);
    let share = num(full, "forwarded_pps") / num(one, "forwarded_pps");
    let figures = [num(&r, "take_in_s"), num(full, "peak_rss_mb"), share];
    for (check, figure) in checks.iter().zip(figures) {
        let (value, bound) = (num(check, "value"), num(check, "bound"));
        assert!(
            (value - figure).abs() <= 1e-9 * figure.abs().max(1.0),
            "{check}"
        );
        let lower = check["name"] == "rate_share";
        let holds = if lower {
            value >= bound
        } else {
            value <= bound
        };
        assert_eq!(check["holds"], holds, "{check}");
        assert!(
            (num(check, "ratio") - value / bound).abs() < 1e-9,
            "{check}"
        );
    }
}
