//! Knob writes (docs/algorithm.md §9, behaviour 11): FreeBSD's ranges and refusals, and
//! every consequence of a write, knob by knob (`polld_core::poll::knob_write`).

use std::sync::{Arc, Mutex};

use polld_core::poll::KnobHook;
use polld_core::{HandlerId, KnobError, Knobs, PollCmd, PollHandlers, Poller};

// 11. Sysctl validation, with FreeBSD's ranges and the burst_max/each_burst quirk.
#[test]
fn knob_writes_are_validated_like_freebsd() {
    let mut p = Poller::new(Knobs::freebsd());
    let before = p.knobs().clone();
    let bad = [
        ("kern.polling.user_frac", "100"),
        ("kern.polling.user_frac", "-1"),
        ("kern.polling.reg_frac", "0"),
        ("kern.polling.reg_frac", "1001"),
        ("kern.polling.burst_max", "9"),
        ("kern.polling.burst_max", "20001"),
        ("kern.polling.each_burst", "0"),
        ("kern.polling.each_burst", "151"),
        ("kern.polling.hz", "99"),
        ("kern.polling.hz", "20001"),
        ("kern.polling.user_frac", "fifty"),
        ("kern.polling.controller", "pid"),
    ];
    for (name, value) in bad {
        let err = p.set_knob(name, value).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(name) && msg.contains(value), "{msg}");
        assert!(msg.contains("nothing changed"), "{msg}");
    }
    assert_eq!(p.knobs(), &before, "rejected writes change nothing");
    let msg = p
        .set_knob("kern.polling.user_frac", "100")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("0..99"), "names the range: {msg}");

    assert!(matches!(
        p.set_knob("kern.polling.burst", "10"),
        Err(KnobError::ReadOnly { .. })
    ));
    assert!(matches!(
        p.set_knob("kern.polling.handlers", "1"),
        Err(KnobError::ReadOnly { .. })
    ));
    assert!(matches!(
        p.set_knob("kern.polling.bogus", "1"),
        Err(KnobError::Unknown { .. })
    ));

    p.set_knob("kern.polling.burst_max", "100").unwrap();
    p.set_knob("kern.polling.each_burst", "60").unwrap();
    p.set_knob("kern.polling.burst_max", "50").unwrap();
    assert_eq!(
        p.knobs().each_burst,
        10,
        "quirk: each_burst falls to 10, not burst_max"
    );
    p.set_knob("kern.polling.user_frac", "0").unwrap();
    p.set_knob("kern.polling.user_frac", "99").unwrap();
    p.set_knob("kern.polling.hz", "20000").unwrap();
    p.set_knob("kern.polling.reg_frac", "20000").unwrap();
    assert!(
        p.set_knob("kern.polling.hz", "1000").is_err(),
        "hz below reg_frac"
    );
    // polld's knob bounded by hz too: every knob keeps a value it would accept again.
    p.set_knob("kern.polling.reg_frac", "20").unwrap();
    p.set_knob("kern.polling.auto_window_ticks", "1000")
        .unwrap();
    let err = p
        .set_knob("kern.polling.hz", "100")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("auto_window_ticks (1000); lower auto_window_ticks first"),
        "{err}"
    );
    assert_eq!(p.knobs().hz, 20000);
}

/// A poller on `knobs` with one handler whose ring always holds more than a chunk.
fn flooded(knobs: Knobs) -> Poller {
    let mut p = Poller::new(knobs);
    p.register(0).unwrap();
    p
}

struct Flood;

impl PollHandlers for Flood {
    fn poll(&mut self, _id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        count
    }
}

struct Empty;

impl PollHandlers for Empty {
    fn poll(&mut self, _id: HandlerId, _cmd: PollCmd, _count: u32) -> u32 {
        0
    }
}

/// One tick at `now` and its whole cycle, each chunk taking no time.
fn tick(p: &mut Poller, now: u64, h: &mut dyn PollHandlers) {
    p.hardclock(now, 1);
    while p.netisr_poll(now, h) {
        p.netisr_pollmore(now);
    }
}

#[test]
fn a_burst_max_write_clamps_a_grown_burst_and_keeps_an_each_burst_within_it() {
    let mut p = flooded(Knobs::freebsd());
    for t in 0..40 {
        tick(&mut p, t * 1_000_000, &mut Flood);
    }
    assert!(p.state().burst > 20, "{:?}", p.state());
    p.set_knob("kern.polling.burst_max", "20").unwrap();
    assert_eq!(p.state().burst, 20);
    // each_burst (5) is within the new ceiling: kept (the quirk past it: above).
    assert_eq!(p.knobs().each_burst, 5);
}

#[test]
fn a_clock_or_controller_write_starts_the_tick_at_the_knobs_period() {
    let slowed = || {
        let mut p = flooded(Knobs::default());
        for t in 0..20 {
            tick(&mut p, t * 1_000_000, &mut Flood);
            // A tick that costs the thread 0.9 ms: far more than the share.
            p.note_tick_cpu(900_000, 1, true);
        }
        assert!(p.state().stride > 1, "{:?}", p.state());
        p
    };
    let mut p = slowed();
    let stride = p.state().stride;
    p.set_knob("kern.polling.hz", "1000").unwrap();
    assert_eq!(p.state().stride, stride, "the same hz: nothing to restart");
    p.set_knob("kern.polling.hz", "500").unwrap();
    assert_eq!(p.state().stride, 1);
    let mut p = slowed();
    p.set_knob("kern.polling.controller", "classic").unwrap();
    assert_eq!(p.state().stride, 1);
}

#[test]
fn any_write_ends_a_quiet_spell_and_an_idle_poll_write_wakes_the_idle_poller() {
    let mut p = flooded(Knobs::default());
    p.set_knob("kern.polling.quiet_cycles", "3").unwrap();
    for t in 0..3 {
        tick(&mut p, t * 1_000_000, &mut Empty);
    }
    assert!(p.state().quiet);
    p.set_knob("kern.polling.user_frac", "40").unwrap();
    assert!(!p.state().quiet);
    assert!(p.state().idlepoll_sleeping);
    p.set_knob("kern.polling.idle_poll", "1").unwrap();
    assert!(!p.state().idlepoll_sleeping && p.idle_poll_wanted());
    p.set_knob("kern.polling.idle_poll", "0").unwrap();
    assert!(p.state().idlepoll_sleeping);
}

#[test]
fn the_hook_sees_every_write_that_changed_the_knobs_with_all_its_consequences() {
    let seen: Arc<Mutex<Vec<Knobs>>> = Arc::default();
    let mut p = Poller::new(Knobs::default());
    let log = seen.clone();
    p.on_knob_write(KnobHook::new(move |k: &Knobs| {
        log.lock().unwrap().push(k.clone())
    }));
    p.set_knob("kern.polling.burst_max", "40").unwrap();
    p.set_knob("kern.polling.burst_max", "40").unwrap(); // unchanged: not told
    assert!(p.set_knob("kern.polling.hz", "50").is_err()); // refused: not told
    p.set_knob("hz", "500").unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!((seen[0].burst_max, seen[0].each_burst), (40, 10));
    assert_eq!(seen[1].hz, 500);
    assert_eq!(&seen[1], p.knobs());
}
