//! Random sequences of knob writes, interleaved with poll cycles, keep the invariant chain
//! stated at the top of `core/src/poll/mod.rs` after every write and every cycle; a
//! refused write changes nothing.

use polld_core::knobs::{MAX_HZ, MAX_LOOKS, MAX_POLL_BURST_MAX, MIN_HZ, MIN_POLL_BURST_MAX};
use polld_core::{Controller, PollCmd, PollHandlers, Poller};
use proptest::prelude::*;

/// Takes its whole count (`Busy`) or nothing (empty rings), by the cycle.
struct Rings {
    busy: bool,
}

impl PollHandlers for Rings {
    fn poll(&mut self, _: usize, _: PollCmd, count: u32) -> u32 {
        if self.busy {
            count
        } else {
            0
        }
    }
}

fn knob() -> impl Strategy<Value = (&'static str, String)> {
    let names = prop::sample::select(vec![
        "user_frac",
        "burst_max",
        "each_burst",
        "reg_frac",
        "auto_window_ticks",
        "auto_empty_polls",
        "idle_poll",
        "idle_wakeups",
        "quiet_cycles",
        "looks",
        "hz",
        "poll_in_trap",
        "burst",
        "phase",
        "controller",
        "handlers",
        "nonsense",
    ]);
    let values = prop_oneof![
        (-5i64..25_000).prop_map(|v| v.to_string()),
        (0i64..12).prop_map(|v| v.to_string()),
        Just("time".to_string()),
        Just("classic".to_string()),
        Just("x".to_string()),
    ];
    (names, values)
}

/// The invariant chain of `core/src/poll/mod.rs`.
fn chain(p: &Poller) -> Result<(), TestCaseError> {
    let (k, s) = (p.knobs(), p.state());
    prop_assert!((MIN_POLL_BURST_MAX..=MAX_POLL_BURST_MAX).contains(&k.burst_max));
    prop_assert!(1 <= k.each_burst && k.each_burst <= k.burst_max, "{k:?}");
    prop_assert!(1 <= s.burst && s.burst <= k.burst_max, "{k:?} {s:?}");
    prop_assert!((MIN_HZ..=MAX_HZ).contains(&k.hz));
    prop_assert!(1 <= k.reg_frac && k.reg_frac <= k.hz);
    prop_assert!(1 <= k.auto_window_ticks && k.auto_window_ticks <= k.hz);
    prop_assert!(k.user_frac <= 99);
    prop_assert!(k.looks <= MAX_LOOKS);
    prop_assert!(1 <= s.stride && s.stride <= 4, "{s:?}");
    prop_assert!(k.controller == Controller::Time || s.stride == 1, "{s:?}");
    prop_assert!(s.phase <= 6);
    prop_assert!(!s.quiet || k.quiet_cycles > 0);
    prop_assert!(k.idle_poll != 0 || s.idlepoll_sleeping);
    Ok(())
}

proptest! {
    #[test]
    fn knob_writes_keep_the_invariant_chain(
        ops in prop::collection::vec((knob(), 0u64..3_000, any::<bool>(), 0u64..2_000_000), 1..60)
    ) {
        let mut p = Poller::default();
        p.register(0).unwrap();
        let mut now = 0;
        for ((name, value), elapsed, busy, thread_cpu) in ops {
            let before = p.knobs().clone();
            if p.set_knob(name, &value).is_err() {
                prop_assert_eq!(p.knobs(), &before);
            }
            chain(&p)?;
            p.hardclock(now, 1);
            while p.netisr_poll(now, &mut Rings { busy }) {
                now += elapsed;
                p.netisr_pollmore(now);
            }
            p.note_tick_cpu(thread_cpu, 1, true);
            chain(&p)?;
            now += p.tick_period_ns();
        }
    }
}
