//! `polld ifconfig` against a real control server and a dataplane over simulated NICs.

mod common;

use common::{Daemon, INTERFACES};
use polld_control::proto::{IfStatus, SetResult};
use polld_core::DropReason;

#[test]
fn lists_every_interface_with_addresses_and_counters() {
    let daemon = Daemon::start();
    let out = daemon.ifconfig(&[]).unwrap();
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("sim0: link up mode interrupt backend sim")
    );
    assert_eq!(lines.next(), Some("\tether 02:00:00:00:00:00"));
    assert_eq!(lines.next(), Some("\tinet 10.0.0.1/24"));
    assert_eq!(lines.next(), Some("\tinet6 fd00:0::1/64"));
    let rx = lines.next().unwrap();
    assert!(
        rx.starts_with("\trx_packets ") && rx.contains(" forwarded "),
        "{out}"
    );
    let drops = lines.next().unwrap();
    let (total, reasons) = drops
        .strip_prefix("\tdrops ")
        .unwrap()
        .split_once(": ")
        .unwrap();
    let by_reason: Vec<(&str, u64)> = reasons
        .split(", ")
        .map(|r| r.split_once(' ').unwrap())
        .map(|(reason, n)| (reason, n.parse().unwrap()))
        .collect();
    let names: Vec<&str> = by_reason.iter().map(|r| r.0).collect();
    assert_eq!(names, ["rx_ring_full", "tx_ring_full"], "{out}");
    assert!(by_reason.iter().all(|r| r.1 > 0), "{out}");
    assert_eq!(
        total.parse::<u64>().unwrap(),
        by_reason.iter().map(|r| r.1).sum::<u64>(),
        "{out}"
    );
    assert!(lines.next().unwrap().starts_with("\ttx_packets "), "{out}");
    assert!(lines.next().unwrap().starts_with("\tinterrupts "), "{out}");
    assert_eq!(
        lines.next(),
        Some("sim1: link up mode interrupt backend sim")
    );
}

#[test]
fn json_counters_account_for_every_frame() {
    let daemon = Daemon::start();
    let interfaces: Vec<IfStatus> =
        serde_json::from_str(&daemon.ifconfig(&["--json"]).unwrap()).unwrap();
    let names: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, INTERFACES);
    for iface in &interfaces {
        let count = |n: &str| {
            iface
                .counters
                .iter()
                .find(|c| c.0 == n)
                .map(|c| c.1)
                .unwrap()
        };
        let drops: u64 = iface
            .counters
            .iter()
            .filter(|c| DropReason::is_drop_after_rx(&c.0))
            .map(|c| c.1)
            .sum();
        assert_eq!(
            count("rx_packets"),
            count("forwarded") + count("local") + count("consumed") + count("queued") + drops,
            "{iface:?}"
        );
    }
    assert!(interfaces[0]
        .counters
        .iter()
        .any(|c| c.0 == "forwarded" && c.1 > 0));
}

#[test]
fn one_interface_and_its_mode_changes() {
    let daemon = Daemon::start();
    let mode = |d: &Daemon| {
        let one: IfStatus =
            serde_json::from_str(&d.ifconfig(&["sim1", "--json"]).unwrap()).unwrap();
        one.mode
    };
    assert!(daemon
        .ifconfig(&["sim1"])
        .unwrap()
        .starts_with("sim1: link up mode interrupt"));
    assert_eq!(daemon.ifconfig(&["sim1", "polling"]).unwrap(), "");
    assert_eq!(mode(&daemon), "polling");
    assert_eq!(
        daemon.ctl_ok(&["kern.polling.handlers"]),
        "kern.polling.handlers: 1\n"
    );
    assert_eq!(daemon.ifconfig(&["sim1", "-polling"]).unwrap(), "");
    assert_eq!(mode(&daemon), "interrupt");
    assert_eq!(daemon.ifconfig(&["sim1", "mode", "adaptive"]).unwrap(), "");
    assert_eq!(mode(&daemon), "adaptive");
    let results: Vec<SetResult> = serde_json::from_str(
        &daemon
            .ifconfig(&["--json", "sim1", "mode", "busy"])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(results[0].name, "dev.sim1.mode");
    assert_eq!(
        (results[0].old.as_deref(), results[0].new.as_deref()),
        (Some("adaptive"), Some("busy"))
    );
    assert_eq!(mode(&daemon), "busy");
    assert_eq!(daemon.ifconfig(&["sim1", "auto"]).unwrap(), "");
    assert_eq!(mode(&daemon), "auto");
    assert_eq!(
        daemon.ctl_ok(&["dev.sim1.auto_polling"]),
        "dev.sim1.auto_polling: 0\n",
        "auto starts on interrupts"
    );
}

#[test]
fn unknown_interfaces_and_actions_are_named() {
    let daemon = Daemon::start();
    let err = daemon.ifconfig(&["eth9"]).unwrap_err();
    assert_eq!(err, "no interface 'eth9' in polld; it has: sim0, sim1");
    let err = daemon.ifconfig(&["eth9", "polling"]).unwrap_err();
    assert!(err.contains("no interface 'eth9'"), "{err}");
    let err = daemon.ifconfig(&["sim0", "mode", "turbo"]).unwrap_err();
    assert!(err.contains("unknown mode 'turbo'"), "{err}");
    let err = daemon.ifconfig(&["sim0", "up"]).unwrap_err();
    assert!(
        err.contains("unknown action 'up': use polling, -polling"),
        "{err}"
    );
    let err = daemon.ifconfig(&["sim0", "mode"]).unwrap_err();
    assert!(err.contains("`mode` needs a mode"), "{err}");
}
