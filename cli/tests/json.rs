//! With `--json`, a command's standard output is one JSON document, all of it, and its
//! progress and logs go to stderr: one test per command here (root only, but `sim`; CI
//! runs as root). The commands other tests already run with `--json` are checked there,
//! with [`common::one_document`]: `gen` and `sink` in examples.rs, `run --check` in
//! check_json.rs, `bench seeds`, `bench ramp` and `bench sweep` through [`common::quick_bench`], and
//! `demo --devices vm` in vm.rs.

mod common;

use std::process::{Command, Output};

use common::{one_document, start_router, testbed, Polld, POLLD};
use serde_json::Value;

/// The standard output of `polld ARGS` against `polld`, which must succeed, as its one
/// JSON document with `keys`.
fn document_of(polld: &Polld, args: &[&str], keys: &[&str]) -> Value {
    let out = polld.run(args);
    succeeded(args, &out);
    one_document(&format!("polld {}", args.join(" ")), &out.stdout, keys)
}

fn succeeded(args: &[&str], out: &Output) {
    assert!(
        out.status.success(),
        "polld {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sim_json_is_one_document() {
    let args = ["sim", "--duration-ms", "20", "--json"];
    let out = Command::new(POLLD).args(args).output().unwrap();
    succeeded(&args, &out);
    one_document("polld sim", &out.stdout, &["scenario", "nics"]);
}

#[test]
fn run_json_is_one_document_when_polld_stops() {
    require_root!();
    let tb = testbed("jr");
    let (_dir, polld) = start_router(&tb, "af_packet", "interrupt");
    let stdout = polld.stop();
    let interfaces = one_document("polld run", stdout.as_bytes(), &["name", "mode"]);
    assert_eq!(interfaces.as_array().map(Vec::len), Some(2), "{interfaces}");
}

#[test]
fn ctl_json_is_one_document_of_reads_writes_and_errors() {
    require_root!();
    let tb = testbed("jc");
    let (_dir, polld) = start_router(&tb, "af_packet", "interrupt");
    let args = [
        "ctl",
        "--json",
        "kern.polling.burst",
        "kern.polling.user_frac=30",
    ];
    let ctl = document_of(&polld, &args, &["entries", "set", "errors"]);
    assert_eq!(ctl["set"][0]["new"], "30", "{ctl}");
}

#[test]
fn ifconfig_json_is_one_document_listing_showing_or_changing() {
    require_root!();
    let tb = testbed("ji");
    let (_dir, polld) = start_router(&tb, "af_packet", "interrupt");
    let all = document_of(&polld, &["ifconfig", "--json"], &["name", "mode"]);
    assert_eq!(all.as_array().map(Vec::len), Some(2), "{all}");
    document_of(&polld, &["ifconfig", "veth1", "--json"], &["name", "mode"]);
    let set = ["ifconfig", "--json", "veth1", "polling"];
    let changed = document_of(&polld, &set, &["name", "old", "new"]);
    assert_eq!(changed[0]["new"], "polling", "{changed}");
}

#[test]
fn stat_json_is_one_document() {
    require_root!();
    let tb = testbed("js");
    let (_dir, polld) = start_router(&tb, "af_packet", "interrupt");
    let keys = ["pid", "cpu", "scheduler", "interfaces"];
    document_of(&polld, &["stat", "--json", "-w", "0.2"], &keys);
}

/// `polld testbed down --json --prefix PREFIX` when dropped, so that a failed test leaves
/// no namespaces behind.
struct Down<'a>(&'a str);

impl Drop for Down<'_> {
    fn drop(&mut self) {
        let _ = Command::new(POLLD)
            .args(["testbed", "down", "--prefix", self.0])
            .output();
    }
}

#[test]
fn testbed_up_status_and_down_json_are_one_document_each() {
    require_root!();
    let prefix = format!("pt{}jt", std::process::id() % 10_000);
    let _down = Down(&prefix);
    let testbed = |command: &str, keys: &[&str]| {
        let args = ["testbed", command, "--json", "--prefix", &prefix];
        let out = Command::new(POLLD).args(args).output().unwrap();
        succeeded(&args, &out);
        one_document(&format!("polld testbed {command}"), &out.stdout, keys)
    };
    testbed("up", &["layout", "placement", "warnings"]);
    let status = testbed("status", &["prefix", "up", "namespaces"]);
    assert_eq!(status["up"], true, "{status}");
    let down = testbed("down", &["removed", "absent"]);
    assert_eq!(down["removed"].as_array().map(Vec::len), Some(3), "{down}");
}

#[test]
fn veth_demo_json_is_one_document_of_ipv4_and_ipv6_rows_its_progress_on_stderr() {
    require_root!();
    let prefix = format!("pt{}jd", std::process::id() % 10_000);
    let _down = Down(&prefix);
    let args = [
        "demo",
        "--devices",
        "veth",
        "--rate",
        "10k",
        "--duration",
        "1",
        "--json",
        "--prefix",
        &prefix,
    ];
    let out = Command::new(POLLD).args(args).output().unwrap();
    succeeded(&args, &out);
    let keys = ["ipv4", "ipv6", "ipv6_over_ipv4"];
    let demo = one_document("polld demo", &out.stdout, &keys);
    // polld forwards both families by fwd's kernel tables.
    family_rows_conserved(&demo);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("polld demo: testbed removed"),
        "the progress lines go to stderr: {stderr}"
    );
}

/// The TAP demo floods IPv4 and then IPv6 in both modes: its document holds a row per
/// family and mode, each flood of the family asked for (by gen's own summary), delivered
/// through polld and conserved end to end, and IPv6's rate over IPv4's per mode.
#[test]
fn tap_demo_json_has_ipv4_and_ipv6_rows_each_conserved_and_their_ratios() {
    require_root!();
    let prefix = format!("pt{}j6", std::process::id() % 10_000);
    let _down = Down(&prefix);
    let args = ["demo", "--duration", "1", "--json", "--prefix", &prefix];
    let out = Command::new(POLLD).args(args).output().unwrap();
    succeeded(&args, &out);
    let keys = ["ipv4", "ipv6", "ipv6_over_ipv4"];
    let demo = one_document("polld demo", &out.stdout, &keys);
    family_rows_conserved(&demo);
}

/// A demo's document holds an interrupt and a polling row per family, each a flood of the
/// family asked for (by gen's own summary), delivered through polld and conserved end to
/// end, and IPv6's rate over IPv4's per mode.
fn family_rows_conserved(demo: &Value) {
    for (family, version) in [("ipv4", 4), ("ipv6", 6)] {
        let rows = demo[family].as_array().expect("rows");
        let modes: Vec<_> = rows.iter().map(|r| r["mode"].as_str().unwrap()).collect();
        assert_eq!(modes, ["interrupt", "polling"], "{demo}");
        for row in rows {
            assert_eq!(row["gen_ip_version"], version, "{family}: {row}");
            assert_eq!(row["conserved"], true, "{family}: {row}");
            assert!(row["ledger"].is_object(), "{family}: {row}");
            assert!(
                row["delivered_pps"].as_f64().unwrap() > 0.0,
                "{family}: {row}"
            );
        }
    }
    for mode in ["interrupt", "polling"] {
        let ratio = demo["ipv6_over_ipv4"][mode].as_f64();
        assert!(ratio.is_some_and(|r| r > 0.0), "{mode}: {demo}");
    }
}
