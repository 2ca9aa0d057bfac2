//! The consumers read the declarations: the typed snapshot carries each entry's declared
//! kind, `/metrics` types every family by it, and a bad write gets the same error from the
//! scheduler, the dataplane (which applies the config file's `[knobs]`) and the control
//! socket (`polld ctl`).

mod common;

use polld_control::answer;
use polld_control::metrics::exposition_of;
use polld_control::proto::{Request, Response};
use polld_core::poll::NODE;
use polld_core::{Kind, Poller, Reading};

fn snapshot() -> Vec<Reading> {
    let mut sim = common::simulation();
    match common::answer(&mut sim, Request::Snapshot) {
        Response::Snapshot { readings } => readings,
        other => panic!("not a snapshot: {other:?}"),
    }
}

#[test]
fn the_snapshot_carries_the_declared_kinds_and_the_list_answers_values() {
    let readings = snapshot();
    let declared = Poller::default().readings(NODE);
    for d in &declared {
        let r = readings
            .iter()
            .find(|r| r.name() == d.name())
            .unwrap_or_else(|| panic!("{} missing from the snapshot", d.name()));
        assert_eq!((r.kind, &r.descr), (d.kind, &d.descr), "{}", d.name());
    }
    // The same entries and values as the text answer `polld ctl -a` reads.
    let mut sim = common::simulation();
    let Response::Entries { entries } = common::answer(
        &mut sim,
        Request::List {
            prefix: String::new(),
        },
    ) else {
        panic!("not entries")
    };
    let typed: Vec<(String, String)> = readings
        .iter()
        .map(|r| (r.name(), r.value.to_string()))
        .collect();
    for e in &entries {
        assert!(
            typed.contains(&(e.name.clone(), e.value.clone())),
            "{} = {} not in the snapshot",
            e.name,
            e.value
        );
    }
    assert_eq!(typed.len(), entries.len());
}

#[test]
fn every_scheduler_family_is_typed_by_its_declaration() {
    let text = exposition_of(&snapshot());
    for d in Poller::default().readings(NODE) {
        if d.value.int().is_none() {
            continue;
        }
        let (family, kind) = match d.kind {
            Kind::Counter => (format!("polld_polling_{}_total", d.leaf), "counter"),
            Kind::Knob | Kind::Gauge => (format!("polld_polling_{}", d.leaf), "gauge"),
        };
        assert!(
            text.contains(&format!("# TYPE {family} {kind}\n")),
            "{family} should be a {kind}:\n{text}"
        );
        assert!(
            text.contains(&format!("# HELP {family} {}\n", d.descr)),
            "{family}'s HELP is its description"
        );
    }
}

#[test]
fn a_bad_write_gets_the_same_error_everywhere() {
    let cases = [
        (
            "kern.polling.nonsense",
            "1",
            "unknown oid 'kern.polling.nonsense'",
        ),
        (
            "kern.polling.user_frac",
            "100",
            "kern.polling.user_frac: 100 is out of range (allowed 0..99)",
        ),
        (
            "kern.polling.each_burst",
            "20001",
            "kern.polling.each_burst: 20001 is out of range (allowed 1..20000)",
        ),
        (
            "kern.polling.controller",
            "fast",
            "kern.polling.controller: invalid value 'fast', expected `classic` or `time`",
        ),
        (
            "kern.polling.burst",
            "3",
            "oid 'kern.polling.burst' is read only",
        ),
    ];
    for (name, value, expected) in cases {
        let scheduler = Poller::default()
            .set_knob(name, value)
            .unwrap_err()
            .to_string();
        let mut sim = common::simulation();
        let dataplane = sim
            .dataplane_mut()
            .sysctl_set(name, value)
            .unwrap_err()
            .to_string();
        let socket = match answer::set(
            sim.dataplane_mut(),
            &[(name.to_string(), value.to_string())],
        ) {
            Response::Set { results } => results[0].error.clone().unwrap(),
            other => panic!("not set results: {other:?}"),
        };
        assert!(scheduler.starts_with(expected), "{scheduler}");
        assert_eq!(dataplane, scheduler);
        assert_eq!(socket, scheduler);
    }
}

#[test]
fn every_knob_of_the_snapshot_takes_its_own_value_back() {
    let mut sim = common::simulation();
    let readings = match common::answer(&mut sim, Request::Snapshot) {
        Response::Snapshot { readings } => readings,
        other => panic!("not a snapshot: {other:?}"),
    };
    let knobs: Vec<&Reading> = readings.iter().filter(|r| r.kind == Kind::Knob).collect();
    assert!(
        knobs.iter().any(|r| r.node.starts_with("dev.")),
        "{knobs:?}"
    );
    let dp = sim.dataplane_mut();
    for r in knobs {
        let (name, value) = (r.name(), r.value.to_string());
        dp.sysctl_set(&name, &value)
            .unwrap_or_else(|e| panic!("{name}={value}: {e}"));
        assert_eq!(dp.sysctl_get(&name), Some(value), "{name}");
    }
}

#[test]
fn entries_given_as_text_get_the_kinds_their_declarations_give() {
    let declared = snapshot();
    let as_text = declared.iter().cloned().map(polld_core::SysctlEntry::from);
    for (typed, r) in answer::typed(as_text).into_iter().zip(&declared) {
        assert_eq!(typed.kind, r.kind, "{}", r.name());
        assert_eq!(typed.value, r.value, "{}", r.name());
    }
}
