//! Honest CPU accounting on the namespace testbed (root only; CI runs as root): polld
//! finds the kernel threads doing its veth interfaces' receive work through their NAPI
//! ids (in polld's namespace, whatever their names), `polld ifconfig` says that work is
//! outside polld's budget, and `polld stat`'s shares of the poll CPU add up to 100 %,
//! pinned or not. Without a terminal, the live view points to `--once`.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{gen, testbed, Dir, Polld, POLLD};
use polld_testbed::{PolldSetup, Testbed, UpOptions};
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// polld on AF_XDP in polling mode on the testbed, pinned to `cpu` or not.
fn start(tb: &Testbed, dir: &Dir, cpu: Option<usize>) -> Polld {
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    let config = polld_testbed::polld_config(
        tb.layout(),
        &PolldSetup {
            backend: "af_xdp",
            mode: "polling",
            socket: &socket,
            cpu,
            realtime: false,
            knobs: &[("kern.polling.each_burst", "50")],
        },
    );
    std::fs::write(&path, config).unwrap();
    Polld::start(tb, &path, &socket)
}

/// The shares of `polld stat --json` that must add up to 100.
fn shares(cpu: &Value) -> f64 {
    [
        "device",
        "busy_poll",
        "idle_poll",
        "kernel_rx",
        "softirq",
        "user",
        "idle",
    ]
    .iter()
    .map(|k| f(&cpu[*k]))
    .sum()
}

#[test]
fn the_live_view_without_a_terminal_points_to_once() {
    let out = Command::new(POLLD)
        .args(["stat", "--socket", "/nonexistent/polld.sock"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("polld stat --once"),
        "{err}"
    );
}

#[test]
fn kernel_rx_threads_are_found_by_napi_id_and_the_cpu_shares_add_up_to_100() {
    require_root!();
    let tb = testbed("k");
    let fwd_cpu = UpOptions::default().cpus.fwd;
    let dir = Dir::new("acct");
    let polld = start(&tb, &dir, Some(fwd_cpu));

    // The threads polld names are the testbed's own veth1/veth2 NAPI threads, found in
    // fwd (every testbed has a veth1: the names alone could not tell them apart).
    let mut expected = Vec::new();
    for ifname in ["veth1", "veth2"] {
        for napi in polld_testbed::napi::napi_of(&tb.layout().fwd_ns, ifname).unwrap() {
            expected.push(format!(
                "napi/{ifname}-{} (pid {}, CPU{fwd_cpu})",
                napi.id,
                napi.pid.expect("the testbed threads NAPI")
            ));
        }
    }
    assert!(!expected.is_empty());
    assert_eq!(
        polld.ok(&["ctl", "-n", "polld.kernel_rx_found_by"]).trim(),
        "netlink"
    );
    assert_eq!(
        polld.ok(&["ctl", "-n", "polld.kernel_rx_threads"]).trim(),
        expected.join(", ")
    );
    assert_eq!(
        polld.ok(&["ctl", "-n", "polld.kernel_rx_elsewhere"]).trim(),
        ""
    );

    // ifconfig: veth's AF_XDP socket gets no NAPI id, so the work stays in the kernel.
    let interfaces: Value = serde_json::from_str(&polld.ok(&["ifconfig", "--json"])).unwrap();
    for iface in interfaces.as_array().unwrap() {
        let rx = &iface["rx_work"];
        assert_eq!(rx["in_budget"], false, "{iface}");
        let runs_in = rx["runs_in"].as_str().unwrap();
        assert!(
            runs_in.starts_with(&format!("napi/{}-", iface["name"].as_str().unwrap())),
            "{iface}"
        );
        assert!(
            rx["why_not"]
                .as_str()
                .unwrap()
                .contains("waiting for a NAPI id"),
            "{iface}"
        );
        assert_eq!(iface["busy_poll"]["path"], "unavailable", "{iface}");
    }
    let text = polld.ok(&["ifconfig", "veth1"]);
    assert!(
        text.contains("\trx work NOT in polld's budget: napi/veth1-"),
        "{text}"
    );

    // Under load, the kernel thread's time shows as its own share, and the shares of
    // CPU1 add up to 100 (± rounding).
    let _load = gen(&tb, "100k", 8);
    std::thread::sleep(Duration::from_millis(1000));
    let s: Value = serde_json::from_str(&polld.ok(&["stat", "--json", "-w", "2"])).unwrap();
    let cpu = &s["cpu"];
    eprintln!("pinned, 100k/s: {cpu}");
    assert_eq!(cpu["pinned"], true);
    assert_eq!(cpu["cpus"], 1);
    assert!(f(&cpu["kernel_rx"]) > 1.0, "{cpu}");
    assert!((shares(cpu) - 100.0).abs() < 0.5, "{cpu}");
    let text = polld.ok(&["stat", "--once", "-w", "1"]);
    assert!(text.contains("  kern rx "), "{text}");
    assert!(text.contains("kernel rx (netlink): napi/veth1-"), "{text}");
    polld.stop();

    // Unpinned: the split is of both CPUs together, and says so.
    let polld = start(&tb, &dir, None);
    let s: Value = serde_json::from_str(&polld.ok(&["stat", "--json", "-w", "2"])).unwrap();
    let cpu = &s["cpu"];
    eprintln!("unpinned, 100k/s: {cpu}");
    assert_eq!(cpu["pinned"], false);
    assert_eq!(
        f(&cpu["cpus"]) as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    assert!((shares(cpu) - 100.0).abs() < 0.5, "{cpu}");
    let notes = cpu["notes"].to_string();
    assert!(notes.contains("polld is not pinned"), "{notes}");
    polld.stop();
}
