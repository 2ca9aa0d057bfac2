//! The behaviours of FreeBSD's kern_poll cycle (docs/algorithm.md §9, behaviours 1-4 and
//! 7-12), each as its own test, on virtual time ([`rig`]): tick arming, owed ticks, the
//! burst step, the overrun back-off, chunking, the status cadence, stalls, short ticks,
//! registration; and polld's departures there (waited ticks, repoll ticks, the last
//! handler leaving).

mod rig;

use polld_core::{HandlerId, Knobs, Netisr, PollCmd, PollHandlers, Poller, RegError};

use rig::*;

// 1. Tick arming: a cycle is scheduled only when phase <= 2; phase 1/2 at a tick => suspect.
#[test]
fn tick_arming_counts_a_suspect_when_the_scheduled_cycle_never_started() {
    let mut r = Rig::new(1, 0);
    assert!(r.p.hardclock(0, 1));
    assert_eq!(r.p.state().phase, 2);
    // The worker is blocked for a tick: the next tick finds phase 2.
    r.h.now = MS;
    assert!(r.p.hardclock(MS, 1));
    assert_eq!(r.p.state().suspect, 1);
    assert_eq!(r.p.state().lost_polls, 1);
    assert_eq!(r.p.state().pending_polls, 2);
    // The worker runs: one cycle, then the owed one via phase 6.
    r.next_tick = u64::MAX;
    r.cycle();
    assert_eq!(r.p.state().phase, 6);
    r.cycle();
    assert_eq!(r.p.state().phase, 0);
    assert_eq!(r.p.state().cycles, 2);
    assert_eq!(r.p.state().pending_polls, 0);
    // Ticks while a cycle runs (phase 3..6) schedule nothing.
    r.p.hardclock(2 * MS, 1);
    r.p.netisr_poll(2 * MS, &mut r.h);
    assert!(!r.p.hardclock(3 * MS, 1));
    assert_eq!(r.p.state().suspect, 1);
}

// 2. Owed ticks: a cycle lasting 3.5 ticks loses 3 polls and is paid back by 3 cycles.
#[test]
fn owed_ticks_are_paid_back_by_back_to_back_cycles() {
    let mut r = Rig::new(1, 700 * US); // 5 packets x 700 us = 3.5 ms
    r.p.hardclock(0, 1);
    r.next_tick = MS;
    r.netisr();
    r.next_tick = u64::MAX;
    let s = *r.p.state();
    assert_eq!(s.lost_polls, 3);
    assert_eq!(s.pending_polls, 3);
    assert_eq!(s.phase, 6);
    // Make the next cycles cheap: they run back to back until nothing is owed.
    r.h.cost_ns = 0;
    let mut phases = Vec::new();
    while r.p.netisr_due().is_some() {
        r.cycle();
        phases.push(r.p.state().phase);
    }
    assert_eq!(phases, vec![6, 6, 0]);
    assert_eq!(r.p.state().pending_polls, 0);
    // Four ticks arrived (0, 1, 2, 3 ms): four cycles ran, none skipped.
    assert_eq!(r.p.state().cycles, 4);
}

// 3. AIMD step exactness: floor(us * hz / 10000) > 100 - user_frac, strictly.
#[test]
fn burst_steps_by_one_with_freebsd_integer_rule() {
    let mut r = Rig::new(1, 0);
    assert_eq!(r.p.state().burst, 5);
    assert_eq!(
        one_cycle_of(&mut r, 509 * US),
        6,
        "509 us => load 50, not > 50 => +1"
    );
    assert_eq!(
        one_cycle_of(&mut r, 510 * US),
        5,
        "510 us => load 51 > 50 => -1"
    );
    assert_eq!(
        one_cycle_of(&mut r, 510_999),
        4,
        "510.999 us truncates to 510 us"
    );
    for _ in 0..10 {
        one_cycle_of(&mut r, 900 * US);
    }
    assert_eq!(r.p.state().burst, 1, "clamped at 1");
    r.set("burst_max", "10");
    for _ in 0..20 {
        one_cycle_of(&mut r, 0);
    }
    assert_eq!(r.p.state().burst, 10, "clamped at burst_max");
}

// 4. Overrun backoff: -1 for the load, then -burst/8 for the overrun.
#[test]
fn overrun_backs_off_by_an_eighth_after_the_step() {
    let mut r = Rig::new(1, 0);
    while r.p.state().burst < 80 {
        one_cycle_of(&mut r, 0);
    }
    // A cycle with high load during which the next tick arrives.
    let start = r.h.now;
    r.p.hardclock(start, 1);
    r.p.netisr_poll(start, &mut r.h);
    while r.p.state().residual_burst > 0 {
        r.p.netisr_pollmore(start);
        r.p.netisr_poll(start, &mut r.h);
    }
    r.p.hardclock(start + MS, 1);
    r.p.netisr_pollmore(start + MS + 100 * US);
    assert_eq!(r.p.state().burst, 79 - 79 / 8);
    assert_eq!(r.p.state().burst, 70);
    assert_eq!(r.p.state().phase, 6);
}

/// polld's departure from 4: of ticks read late together, those the executor read late
/// because its thread waited for the CPU (at `SCHED_OTHER`, behind other threads) are owed
/// cycles, run at once, but no cycle overran them, so they do not back the burst off. The
/// back-off there held a poll thread at `SCHED_OTHER` under the soak's flood on veth at a
/// burst near 80 and a tenth of interrupt mode's rate. Ticks not excused still back off.
#[test]
fn owed_ticks_read_late_after_waiting_for_the_cpu_do_not_back_off() {
    // Four expirations in one read: the thread was kept off the CPU three ticks (3 excused)
    // or its cycle overran them (none excused).
    for (excused, expected) in [(3, [81, 82, 83, 84]), (0, [71, 63, 56, 57])] {
        let mut r = Rig::new(1, 0);
        while r.p.state().burst < 80 {
            one_cycle_of(&mut r, 0);
        }
        assert!(r.p.hardclock(r.h.now, 4));
        r.p.excuse_waited(excused);
        assert_eq!(pay_owed_cycles(&mut r), expected, "{excused} excused");
        assert_eq!(r.p.state().waited_polls, excused as u64);
    }
    // Never more than the ticks owed after the one being paid.
    let mut r = Rig::new(1, 0);
    r.p.hardclock(0, 2);
    r.p.excuse_waited(5);
    assert_eq!(pay_owed_cycles(&mut r).len(), 2);
    assert_eq!(r.p.state().waited_polls, 1);
}

/// Runs cycles of 10 µs each (within the share: each grows the burst by one first) until
/// no tick is owed; returns the burst after each.
fn pay_owed_cycles(r: &mut Rig) -> Vec<u32> {
    let start = r.h.now;
    let mut bursts = Vec::new();
    while r.p.state().pending_polls > 0 {
        let owed = r.p.state().pending_polls;
        r.p.netisr_poll(start, &mut r.h);
        while r.p.state().residual_burst > 0 {
            r.p.netisr_pollmore(start);
            r.p.netisr_poll(start, &mut r.h);
        }
        r.p.netisr_pollmore(start + 10 * US);
        assert_eq!(r.p.state().pending_polls, owed - 1);
        bursts.push(r.p.state().burst);
    }
    assert_eq!(r.p.state().phase, 0);
    bursts
}

// 7. Chunking: ceil(burst/each_burst) chunks, counts 5,5,2, handlers in table order.
#[test]
fn a_cycle_is_split_into_each_burst_chunks_round_robin() {
    let mut r = Rig::new(2, 0);
    r.set("burst_max", "12");
    while r.p.state().burst < 12 {
        one_cycle_of(&mut r, 0);
    }
    r.h.calls.clear();
    r.stage_ns = 10 * US;
    r.p.hardclock(r.h.now, 1);
    r.next_tick = u64::MAX;
    let stage_runs = r.cycle();
    let got: Vec<(HandlerId, u32)> = r.h.calls.iter().map(|c| (c.id, c.count)).collect();
    assert_eq!(got, vec![(0, 5), (1, 5), (0, 5), (1, 5), (0, 2), (1, 2)]);
    assert_eq!(stage_runs, 3, "the deferred stage runs after every chunk");
}

// 8. Status cadence: CheckStatus on the first chunk of every reg_frac-th cycle only.
#[test]
fn status_is_checked_on_the_first_chunk_every_reg_frac_cycles() {
    let mut r = Rig::new(1, 0);
    r.set("reg_frac", "3");
    for _ in 0..9 {
        r.run_ticks(1);
    }
    let status: Vec<u64> =
        r.h.calls
            .iter()
            .filter(|c| c.cmd == PollCmd::CheckStatus)
            .map(|c| c.cycle)
            .collect();
    assert_eq!(status, vec![2, 5, 8], "cycles 3, 6, 9 (counted from 1)");
    // Only first chunks carry it: every CheckStatus call is its cycle's first call.
    for (i, c) in r.h.calls.iter().enumerate() {
        if c.cmd == PollCmd::CheckStatus {
            assert!(i == 0 || r.h.calls[i - 1].cycle != c.cycle);
        }
    }
    // Lowering reg_frac to or below the running counter resets it.
    r.set("reg_frac", "20");
    r.run_ticks(2); // counter at 2
    r.set("reg_frac", "2");
    r.h.calls.clear();
    r.run_ticks(2);
    let first_status = r.h.calls.iter().position(|c| c.cmd == PollCmd::CheckStatus);
    assert!(r.h.calls[first_status.unwrap()].cycle == r.h.calls[0].cycle + 1);
}

// 9. Stall reset: pending_polls > 100 is taken as a stall.
#[test]
fn a_worker_frozen_for_102_ticks_is_reset_as_a_stall() {
    let mut r = Rig::new(1, 0);
    r.p.hardclock(0, 1);
    r.p.netisr_poll(0, &mut r.h); // frozen mid-cycle, phase 4
    for t in 1..=100 {
        r.p.hardclock(t * MS, 1);
    }
    assert_eq!(r.p.state().pending_polls, 101);
    assert_eq!(r.p.state().stalled, 0);
    assert!(
        r.p.hardclock(101 * MS, 1),
        "a new cycle is scheduled in the same tick"
    );
    let s = r.p.state();
    assert_eq!((s.stalled, s.pending_polls, s.phase), (1, 1, 2));

    // Frozen while phase = 2: suspect rises every tick instead.
    let mut r = Rig::new(1, 0);
    for t in 0..50 {
        r.p.hardclock(t * MS, 1);
    }
    assert_eq!(r.p.state().suspect, 49);
}

// 10. Short ticks: a tick less than half a period after the reference.
#[test]
fn a_tick_at_four_tenths_of_a_period_is_short_and_keeps_the_reference() {
    let mut r = Rig::new(1, 0);
    r.p.hardclock(0, 1);
    r.p.hardclock(400 * US, 1);
    assert_eq!(r.p.state().short_ticks, 1);
    // Reference kept at 0: 900 us later is not short (0.9 tick from the reference).
    r.p.hardclock(900 * US, 1);
    assert_eq!(r.p.state().short_ticks, 1);
    // Several expirations at once are late ticks, not short ones.
    r.p.hardclock(5 * MS, 4);
    assert_eq!(r.p.state().short_ticks, 1);
}

// 12. Registration: 128 entries, ENOMEM/EEXIST/ENOENT, last entry moves into the hole,
//     zero handlers => the tick hook is a no-op.
#[test]
fn registration_table_follows_freebsd() {
    let mut p = Poller::new(Knobs::freebsd());
    assert!(!p.hardclock(0, 1), "no handlers: no-op");
    assert_eq!(p.state().pending_polls, 0);
    p.register(5).unwrap();
    assert_eq!(p.register(5), Err(RegError::Eexist));
    p.deregister(5).unwrap();
    for id in 0..128 {
        p.register(id).unwrap();
    }
    // FreeBSD checks for a full table first.
    assert_eq!(p.register(128), Err(RegError::Enomem));
    assert_eq!(p.register(5), Err(RegError::Enomem));
    p.deregister(3).unwrap();
    assert_eq!(p.table()[3], 127, "the last entry moved into the hole");
    assert_eq!(p.deregister(3), Err(RegError::Enoent));
    assert_eq!(p.handlers(), 127);
    assert_eq!(p.get("handlers").unwrap(), "127");
}

// 12b. The last handler leaving mid-cycle (auto back to interrupts, a gone interface)
// leaves nothing behind: polld resets the cycle state when the table empties, as
// DragonFly does, so the next registration is polled at its first tick, not ~100 ticks
// later by the stall detector (FreeBSD 14's early return in pollmore leaves phase 5 and
// the owed tick behind).
#[test]
fn the_last_handler_leaving_mid_cycle_leaves_no_stall_behind() {
    for leave_after_pollmore in [false, true] {
        let mut r = Rig::new(1, 0);
        r.set("kern.polling.each_burst", "2");
        r.p.hardclock(0, 1);
        r.p.netisr_poll(0, &mut r.h);
        if leave_after_pollmore {
            // Between chunks: pollmore armed the next chunk, then the handler left.
            r.p.netisr_pollmore(0);
            assert_eq!(r.p.netisr_due(), Some(Netisr::Chunk));
        }
        r.p.deregister(0).unwrap();
        // The netisr finds nothing armed for nobody.
        assert_eq!(r.p.netisr_due(), None);
        let s = *r.p.state();
        assert_eq!(
            (s.phase, s.pending_polls, s.residual_burst),
            (0, 0, 0),
            "after pollmore: {leave_after_pollmore}"
        );
        // Ticks without handlers do nothing.
        assert!(!r.p.hardclock(MS, 1));
        // The interface comes back: its first tick schedules a cycle, which completes.
        r.p.register(0).unwrap();
        assert!(
            r.p.hardclock(2 * MS, 1),
            "after pollmore: {leave_after_pollmore}"
        );
        r.h.now = 2 * MS;
        r.next_tick = 3 * MS;
        r.cycle();
        let s = *r.p.state();
        assert_eq!((s.phase, s.pending_polls, s.cycles), (0, 0, 1));
        r.run_ticks(200);
        let s = *r.p.state();
        assert_eq!((s.stalled, s.lost_polls, s.suspect), (0, 0, 0));
        assert!(s.cycles >= 200, "{s:?}");
    }
}

/// A handler whose output is always full: every cycle is cut short and asks to poll again
/// before the next tick.
struct FullOutput;

impl PollHandlers for FullOutput {
    fn poll(&mut self, _id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        count
    }
    fn take_output_full(&mut self, _id: HandlerId) -> bool {
        true
    }
}

// 10b. A repoll's early tick, asked for by a cycle a full output cut short, is polld's own
// schedule, not a short tick of the clock.
#[test]
fn a_repoll_tick_is_not_a_short_tick() {
    let mut p = Poller::default();
    p.register(0).unwrap();
    let mut now = 0;
    for _ in 0..5 {
        p.hardclock(now, 1);
        p.netisr_poll(now, &mut FullOutput);
        p.netisr_pollmore(now + 10 * US);
        let at = p
            .take_repoll()
            .expect("a cut-short cycle asks to poll again");
        assert!(at < now + MS / 2, "early: {at}");
        now = at;
    }
    assert_eq!(p.state().repolls, 5);
    assert_eq!(p.state().short_ticks, 0);
    // The clock's own ticks go on being checked: one 0.4 period after a tick is short.
    p.hardclock(now, 1);
    p.hardclock(now + 400 * US, 1);
    assert_eq!(p.state().short_ticks, 1);
}
