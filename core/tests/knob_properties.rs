//! Random sequences of knob writes, interleaved with poll cycles, keep the invariants of
//! docs/algorithm.md §9 behaviour 11; a rejected write changes nothing.

use polld_core::{PollCmd, PollHandlers, Poller};
use proptest::prelude::*;

struct Busy;
impl PollHandlers for Busy {
    fn poll(&mut self, _: usize, _: PollCmd, count: u32) -> u32 {
        count
    }
}

fn knob() -> impl Strategy<Value = (&'static str, String)> {
    let names = prop::sample::select(vec![
        "user_frac",
        "burst_max",
        "each_burst",
        "reg_frac",
        "auto_window_ticks",
        "idle_poll",
        "hz",
        "burst",
        "phase",
        "controller",
        "handlers",
        "nonsense",
    ]);
    let values = prop_oneof![
        (-5i64..25_000).prop_map(|v| v.to_string()),
        Just("time".to_string()),
        Just("classic".to_string()),
        Just("x".to_string()),
    ];
    (names, values)
}

proptest! {
    #[test]
    fn knob_writes_keep_the_invariants(ops in prop::collection::vec((knob(), 0u64..3_000), 1..60)) {
        let mut p = Poller::default();
        p.register(0).unwrap();
        let mut now = 0;
        for ((name, value), elapsed) in ops {
            let before = p.knobs().clone();
            if p.set_knob(name, &value).is_err() {
                prop_assert_eq!(p.knobs(), &before);
            }
            p.hardclock(now, 1);
            while p.netisr_poll(now, &mut Busy) {
                now += elapsed;
                p.netisr_pollmore(now);
            }
            now += 1_000_000;
            let (k, s) = (p.knobs(), p.state());
            prop_assert!((10..=20_000).contains(&k.burst_max));
            prop_assert!(1 <= k.each_burst && k.each_burst <= k.burst_max);
            prop_assert!(1 <= s.burst && s.burst <= k.burst_max);
            prop_assert!(k.user_frac <= 99);
            prop_assert!(1 <= k.reg_frac && k.reg_frac <= k.hz);
            prop_assert!(1 <= k.auto_window_ticks && k.auto_window_ticks <= k.hz);
            prop_assert!((100..=20_000).contains(&k.hz));
            prop_assert!(s.phase <= 6);
            prop_assert!(s.residual_burst <= k.burst_max);
        }
    }
}
