//! Every declared `kern.polling.*` entry behaves as its declaration says: a knob reads back
//! what was written, takes the ends of its range and refuses one past them with an error
//! naming it and the range; a word knob takes each of its words; a counter or gauge is
//! refused as read-only; the listing is the declarations, in order.

use polld_core::knobs::KnobError;
use polld_core::poll::NODE;
use polld_core::sysctl::{Kind, Oid, Write};
use polld_core::{Knobs, PollState, Poller};

fn full(oid_name: &str) -> String {
    format!("{NODE}.{oid_name}")
}

/// Every knob oid: the struct's and the one without a field.
fn knob_oids() -> Vec<&'static Oid<Knobs>> {
    Knobs::OIDS
        .iter()
        .chain(std::iter::once(&Knobs::POLL_IN_TRAP))
        .collect()
}

#[test]
fn every_knob_reads_back_what_was_written_and_its_default_at_start() {
    for oid in knob_oids() {
        let mut p = Poller::default();
        let name = full(oid.name);
        let default = (oid.get)(&Knobs::default()).to_string();
        assert_eq!(p.get(oid.name).as_deref(), Some(default.as_str()), "{name}");
        // Writing the current value back is accepted and changes nothing.
        p.set_knob(&name, &default).unwrap();
        assert_eq!(p.get(oid.name).unwrap(), default, "{name}");
        // The short name works as well as the full one.
        p.set_knob(oid.name, &default).unwrap();
        assert_eq!(oid.kind, Kind::Knob, "{name}");
    }
}

#[test]
fn every_integer_knob_takes_the_ends_of_its_range_and_refuses_one_past_them() {
    for oid in knob_oids() {
        let Write::Int { range, .. } = &oid.write else {
            continue;
        };
        let name = full(oid.name);
        let (lo, hi) = range(&Knobs::default());
        for end in [lo, hi] {
            let mut p = Poller::default();
            p.set_knob(&name, &end.to_string()).unwrap();
            assert_eq!(p.get(oid.name).unwrap(), end.to_string(), "{name}");
        }
        for past in [lo.checked_sub(1), hi.checked_add(1)].into_iter().flatten() {
            let mut p = Poller::default();
            let before = p.entries();
            let err = p.set_knob(&name, &past.to_string()).unwrap_err();
            assert_eq!(
                err,
                KnobError::Invalid {
                    name: name.clone(),
                    value: past.to_string(),
                    allowed: format!("{lo}..{hi}"),
                }
            );
            assert!(err.to_string().starts_with(&format!(
                "{name}: {past} is out of range (allowed {lo}..{hi})"
            )));
            assert_eq!(
                p.entries(),
                before,
                "a refused write to {name} changed something"
            );
        }
        let mut p = Poller::default();
        assert!(matches!(
            p.set_knob(&name, "many"),
            Err(KnobError::NotANumber { name: n, .. }) if n == name
        ));
    }
}

#[test]
fn every_word_knob_takes_each_word_and_names_them_when_refusing() {
    let mut words_seen = 0;
    for oid in knob_oids() {
        let Write::Word { words, .. } = &oid.write else {
            continue;
        };
        let name = full(oid.name);
        let mut p = Poller::default();
        for word in words.iter() {
            p.set_knob(&name, word).unwrap();
            assert_eq!(p.get(oid.name).unwrap(), *word);
            words_seen += 1;
        }
        let err = p.set_knob(&name, "fastest").unwrap_err();
        for word in words.iter() {
            assert!(err.to_string().contains(&format!("`{word}`")), "{err}");
        }
        assert!(err
            .to_string()
            .starts_with(&format!("{name}: invalid value 'fastest'")));
    }
    assert!(words_seen >= 2, "kern.polling.controller is a word knob");
}

#[test]
fn counters_and_gauges_are_read_only_and_unknown_names_are_unknown() {
    let mut p = Poller::default();
    let mut read_only = 0;
    for r in p.readings(NODE) {
        if r.kind == Kind::Knob {
            continue;
        }
        read_only += 1;
        assert_eq!(
            p.set_knob(&r.name(), "1"),
            Err(KnobError::ReadOnly { name: r.name() })
        );
    }
    assert_eq!(read_only, PollState::OIDS.len() + 1, "state and handlers");
    let err = p.set_knob("kern.polling.nonsense", "1").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown oid 'kern.polling.nonsense': list the knobs with `polld ctl -a`"
    );
}

#[test]
fn the_listing_is_the_declarations_in_order_writable_exactly_for_knobs() {
    let p = Poller::default();
    let declared: Vec<(String, bool)> = knob_oids()
        .iter()
        .map(|o| (full(o.name), true))
        .chain(PollState::OIDS.iter().map(|o| (full(o.name), false)))
        .chain(std::iter::once((full(Poller::HANDLERS.name), false)))
        .collect();
    let listed: Vec<(String, bool)> = p
        .entries()
        .into_iter()
        .map(|e| (e.name, e.writable))
        .collect();
    assert_eq!(listed, declared);
    for e in p.entries() {
        assert!(!e.descr.is_empty(), "{} has no description", e.name);
        assert!(Poller::is_declared(&e.name));
    }
}

#[test]
fn a_declaration_under_another_node_names_its_entries_there() {
    // Per-CPU pollers hang the same table under their own node.
    let p = Poller::default();
    let names: Vec<String> = p
        .readings("net.ifpoll.1.rx")
        .iter()
        .map(|r| r.name())
        .collect();
    assert!(names.contains(&"net.ifpoll.1.rx.burst_max".to_string()));
    assert_eq!(names.len(), p.entries().len());
}

#[test]
fn the_knobs_with_handlers_of_their_own_name_themselves_and_what_they_allow() {
    let mut p = Poller::default();
    let hz = full(Knobs::HZ.name);
    assert!(p
        .set_knob(&hz, "99")
        .unwrap_err()
        .to_string()
        .starts_with(&format!("{hz}: 99 is out of range (allowed 100..20000)")));
    p.set_knob(&full(Knobs::REG_FRAC.name), "500").unwrap();
    let err = p.set_knob(&hz, "400").unwrap_err().to_string();
    assert!(
        err.contains("at least kern.polling.reg_frac (500)"),
        "{err}"
    );
    let trap = full(Knobs::POLL_IN_TRAP.name);
    p.set_knob(&trap, "0").unwrap();
    let err = p.set_knob(&trap, "1").unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{trap}: 1 is out of range (allowed 0 only")),
        "{err}"
    );
}
