//! Polls outside the ticks' cycles (docs/algorithm.md §9, behaviours 13 and 17), on
//! virtual time ([`rig`]): the idle poller, unaccounted, and the looks between two ticks
//! while traffic is light.

mod rig;

use polld_core::{HandlerId, Knobs, PollCmd, PollHandlers, Poller};

use rig::*;

// 13. Idle polling: unaccounted, each_burst per pass, sleeps without handlers.
#[test]
fn idle_polling_adds_capacity_without_touching_the_accounting() {
    let mut r = Rig::new(1, 0);
    assert_eq!(
        r.p.idle_poll(&mut r.h),
        0,
        "idle_poll=0: the idle thread sleeps"
    );
    assert!(r.p.state().idlepoll_sleeping);
    r.set("idle_poll", "1");
    assert!(!r.p.state().idlepoll_sleeping);
    let before = *r.p.state();
    let mut polled = 0u64;
    for _ in 0..1_000 {
        polled += r.p.idle_poll(&mut r.h) as u64;
    }
    assert!(r
        .h
        .calls
        .iter()
        .all(|c| c.count == 5 && c.cmd == PollCmd::PollOnly));
    assert_eq!(r.p.state(), &before, "burst, pending, kern_load untouched");
    // 1000 passes took 5000 frames: more than a cycle's budget (burst_max = 150), so
    // idle polling adds capacity beyond hz * burst_max.
    assert!(polled > 150);
    // No handlers: asleep; a registration wakes it.
    r.p.deregister(0).unwrap();
    assert!(r.p.state().idlepoll_sleeping);
    r.p.register(0).unwrap();
    assert!(!r.p.state().idlepoll_sleeping);
}

/// Handlers whose rings hold `frames` each: a poll takes what is there, up to its count.
struct Light {
    frames: u32,
}

impl PollHandlers for Light {
    fn poll(&mut self, _id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        let n = self.frames.min(count);
        self.frames -= n;
        n
    }
}

/// A poller on polld's defaults (one look a tick) with one handler, after a tick at 0 whose
/// cycle took `frames` from `ring` and closed at `end`.
fn after_a_cycle(knobs: Knobs, ring: &mut Light, end: u64) -> Poller {
    let mut p = Poller::new(knobs);
    p.register(0).unwrap();
    p.hardclock(0, 1);
    p.netisr_poll(0, ring);
    p.netisr_pollmore(end);
    p
}

// 17. Looks (polld): a cycle that emptied the rings while the devices moved frames within
// the last tick, with the tick's share to spare, looks again half-way to the next tick, a cycle owing nothing to the clock; the
// tick stays where it is.
#[test]
fn a_cycle_that_empties_the_rings_looks_again_half_way_to_the_next_tick() {
    let mut ring = Light { frames: 5 };
    let mut p = after_a_cycle(Knobs::default(), &mut ring, 20 * US);
    assert_eq!(p.take_look(), Some(MS / 2));
    assert_eq!(p.take_look(), None, "taken once");
    // The timer fires: frames that came meanwhile are taken then, not at the tick.
    ring.frames = 3;
    assert!(p.look(MS / 2));
    assert_eq!(p.state().pending_polls, 1);
    p.netisr_poll(MS / 2, &mut ring);
    p.netisr_pollmore(MS / 2 + 20 * US);
    assert_eq!(ring.frames, 0);
    let s = *p.state();
    assert_eq!(
        (s.look_cycles, s.cycles, s.pending_polls, s.phase),
        (1, 2, 0, 0)
    );
    // One look a tick: the look's own cycle arms none (the next point is the tick).
    assert_eq!(p.take_look(), None);
    // The tick comes on time: neither lost nor short.
    assert!(p.hardclock(MS, 1));
    let s = *p.state();
    assert_eq!((s.lost_polls, s.short_ticks, s.suspect), (0, 0, 0));
    // Its cycle finds nothing, but the look before it moved frames: traffic is still
    // light, not gone, and the look half a tick on may find the next frame.
    p.netisr_poll(MS, &mut ring);
    p.netisr_pollmore(MS + 10 * US);
    assert_eq!(p.take_look(), Some(MS + MS / 2));
    assert!(p.look(MS + MS / 2));
    p.netisr_poll(MS + MS / 2, &mut ring);
    p.netisr_pollmore(MS + MS / 2 + 10 * US);
    // A tick (two polls) without a frame: the device is idle, the next tick polls.
    p.hardclock(2 * MS, 1);
    p.netisr_poll(2 * MS, &mut ring);
    p.netisr_pollmore(2 * MS + 10 * US);
    assert_eq!(p.take_look(), None);
    assert_eq!(p.state().look_cycles, 2);
}

#[test]
fn looks_are_evenly_spaced_between_two_ticks() {
    let knobs = Knobs {
        looks: 3,
        ..Knobs::default()
    };
    // A 20-µs cycle closed at 300 µs (the tick's cycle started late): the next of the
    // points at 250, 500 and 750 µs.
    let mut ring = Light { frames: 5 };
    let mut p = Poller::new(knobs);
    p.register(0).unwrap();
    p.hardclock(0, 1);
    p.netisr_poll(280 * US, &mut ring);
    p.netisr_pollmore(300 * US);
    assert_eq!(p.take_look(), Some(500 * US));
    ring.frames = 1;
    assert!(p.look(500 * US));
    p.netisr_poll(500 * US, &mut ring);
    p.netisr_pollmore(510 * US);
    assert_eq!(p.take_look(), Some(750 * US));
}

#[test]
fn no_look_after_a_spent_budget_a_spent_share_or_with_looks_off() {
    // The budget ran out before the ring did (a flood): the next tick polls.
    let classic = Knobs {
        controller: polld_core::Controller::Classic,
        ..Knobs::default()
    };
    let mut p = after_a_cycle(classic, &mut Light { frames: 100 }, 10 * US);
    assert_eq!(p.take_look(), None);
    // One more cycle like this one would not fit in the tick's 50 % share.
    let mut p = after_a_cycle(Knobs::default(), &mut Light { frames: 5 }, 300 * US);
    assert_eq!(p.take_look(), None);
    // Nor end before the next tick.
    let mut p = after_a_cycle(Knobs::default(), &mut Light { frames: 5 }, 600 * US);
    assert_eq!(p.take_look(), None);
    // FreeBSD polls at the ticks only.
    let mut p = after_a_cycle(Knobs::freebsd(), &mut Light { frames: 5 }, 10 * US);
    assert_eq!(p.take_look(), None);
}

#[test]
fn a_look_overtaken_by_a_tick_or_a_running_cycle_does_nothing() {
    let mut ring = Light { frames: 5 };
    let mut p = after_a_cycle(Knobs::default(), &mut ring, 10 * US);
    let at = p.take_look().unwrap();
    // The timer fired late, after the next tick, which polled.
    p.hardclock(MS, 1);
    assert!(!p.look(at + MS));
    assert_eq!(p.state().pending_polls, 1, "only the tick's cycle is owed");
    // A look that finds a cycle under way leaves it alone.
    let mut p = after_a_cycle(Knobs::default(), &mut Light { frames: 5 }, 10 * US);
    p.take_look().unwrap();
    p.hardclock(MS / 4, 1);
    assert!(!p.look(MS / 2));
    let s = *p.state();
    assert_eq!((s.look_cycles, s.pending_polls), (0, 1));
}
