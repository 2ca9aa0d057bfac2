//! `polld ctl` against a real control server and a dataplane over simulated NICs.

mod common;

use common::Daemon;
use polld_control::ctl::CtlJson;

#[test]
fn all_lists_every_tree_as_name_value_lines() {
    let daemon = Daemon::start();
    let out = daemon.ctl_ok(&["-a"]);
    for name in [
        "kern.polling.burst",
        "kern.polling.user_frac",
        "net.inet.ip.fastforwarding",
        "dev.sim0.mode",
        "dev.sim1.drops.rx_ring_full",
    ] {
        assert!(
            out.lines().any(|l| l.starts_with(&format!("{name}: "))),
            "{name} missing:\n{out}"
        );
    }
    assert!(out.lines().all(|l| l.contains(": ")), "{out}");
    assert!(out.contains("kern.polling.user_frac: 50\n"), "{out}");
}

#[test]
fn a_subtree_a_single_entry_values_and_descriptions() {
    let daemon = Daemon::start();
    let subtree = daemon.ctl_ok(&["kern.polling"]);
    assert!(subtree.lines().count() > 5, "{subtree}");
    assert!(
        subtree.lines().all(|l| l.starts_with("kern.polling.")),
        "{subtree}"
    );

    assert_eq!(
        daemon.ctl_ok(&["kern.polling.each_burst"]),
        "kern.polling.each_burst: 50\n"
    );
    assert_eq!(daemon.ctl_ok(&["-n", "kern.polling.each_burst"]), "50\n");
    assert_eq!(
        daemon.ctl_ok(&["-d", "kern.polling.each_burst"]),
        "kern.polling.each_burst: Max size of each burst\n"
    );
    // A name that only prefixes another (`dev.sim` of `dev.sim0`) is not a subtree.
    let (status, out, err) = daemon.ctl(&["dev.sim"]).unwrap();
    assert_eq!((status, out.as_str()), (1, ""));
    assert!(err.contains("polld ctl: unknown oid 'dev.sim'"), "{err}");
}

#[test]
fn several_writes_print_old_and_new_and_take_effect() {
    let daemon = Daemon::start();
    let out = daemon.ctl_ok(&[
        "kern.polling.user_frac=30",
        "kern.polling.idle_poll=1",
        "dev.sim0.mode=polling",
    ]);
    assert_eq!(
        out,
        "kern.polling.user_frac: 50 -> 30\nkern.polling.idle_poll: 0 -> 1\ndev.sim0.mode: interrupt -> polling\n"
    );
    assert_eq!(
        daemon.ctl_ok(&[
            "-n",
            "kern.polling.user_frac",
            "dev.sim0.mode",
            "kern.polling.handlers"
        ]),
        "30\npolling\n1\n"
    );
}

#[test]
fn names_and_writes_mixed_are_handled_in_order() {
    let daemon = Daemon::start();
    let out = daemon.ctl_ok(&[
        "kern.polling.reg_frac",
        "kern.polling.reg_frac=7",
        "kern.polling.reg_frac",
    ]);
    assert_eq!(
        out,
        "kern.polling.reg_frac: 20\nkern.polling.reg_frac: 20 -> 7\nkern.polling.reg_frac: 7\n"
    );
}

#[test]
fn a_read_only_write_is_refused_with_the_reason_and_a_failing_status() {
    let daemon = Daemon::start();
    let burst = daemon.ctl_ok(&["-n", "kern.polling.burst"]);
    let (status, out, err) = daemon.ctl(&["kern.polling.burst=3"]).unwrap();
    assert_eq!((status, out.as_str()), (1, ""));
    assert!(
        err.contains("polld ctl: oid 'kern.polling.burst' is read only"),
        "{err}"
    );
    assert_eq!(daemon.ctl_ok(&["-n", "kern.polling.burst"]), burst);
}

#[test]
fn an_out_of_range_write_is_refused_and_the_others_still_apply() {
    let daemon = Daemon::start();
    let (status, out, err) = daemon
        .ctl(&[
            "kern.polling.user_frac=20",
            "kern.polling.user_frac=150",
            "kern.polling.each_burst=9",
            "no.such.knob=1",
        ])
        .unwrap();
    assert_eq!(status, 1);
    assert_eq!(
        out,
        "kern.polling.user_frac: 50 -> 20\nkern.polling.each_burst: 50 -> 9\n"
    );
    let errors: Vec<&str> = err.lines().collect();
    assert_eq!(errors.len(), 2, "{err}");
    // The daemon's reason names the knob, the value and the allowed range.
    assert!(
        errors[0].starts_with("polld ctl: kern.polling.user_frac: 150 is out of range (allowed 0"),
        "{err}"
    );
    assert!(
        errors[1].starts_with("polld ctl: unknown oid 'no.such.knob'"),
        "{err}"
    );
    assert_eq!(
        daemon.ctl_ok(&["-n", "kern.polling.user_frac", "kern.polling.each_burst"]),
        "20\n9\n"
    );
}

#[test]
fn json_output_parses_with_entries_writes_and_errors() {
    let daemon = Daemon::start();
    let (status, out, _) = daemon
        .ctl(&[
            "--json",
            "kern.polling.hz",
            "kern.polling.reg_frac=10",
            "kern.polling.hz=5",
            "bogus",
        ])
        .unwrap();
    assert_eq!(status, 1);
    let report: CtlJson = serde_json::from_str(&out).unwrap();
    assert_eq!(report.entries.len(), 1);
    assert_eq!(report.entries[0].name, "kern.polling.hz");
    assert_eq!(report.entries[0].value, "1000");
    assert!(report.entries[0].writable);
    assert_eq!(report.set.len(), 2);
    assert_eq!(
        (report.set[0].old.as_deref(), report.set[0].new.as_deref()),
        (Some("20"), Some("10"))
    );
    assert_eq!(report.set[0].error, None);
    assert_eq!(
        report.set[1].new.as_deref(),
        Some("1000"),
        "a refused write changes nothing"
    );
    assert!(report.set[1]
        .error
        .as_deref()
        .unwrap()
        .contains("out of range"));
    assert_eq!(report.errors.len(), 2, "{:?}", report.errors);
    assert!(report.errors[1].contains("unknown oid 'bogus'"));
}

#[test]
fn bad_command_lines_are_refused_before_talking_to_polld() {
    let daemon = Daemon::start();
    let nothing = daemon.ctl(&[]).unwrap_err();
    assert!(nothing.contains("NAME[=VALUE]"), "{nothing}");
    assert!(daemon
        .ctl(&["-a", "kern.polling"])
        .unwrap_err()
        .contains("cannot be used with"));
    assert!(daemon
        .ctl(&["=5"])
        .unwrap_err()
        .contains("'=5' has no name"));
}
