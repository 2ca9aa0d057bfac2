//! The wakeup watchdog on virtual time (`kern.polling.wakeup_watchdog_ms`): what it costs
//! an idle box that waits for wakeups, and that a box that polls does not see it.

use polld_core::Mode;
use polld_sim::{Arrivals, Sim, UserTask};

mod common;

const MS: u64 = 1_000_000;

/// Two idle NICs in `mode`, the watchdog at `watchdog_ms`, run for a second.
fn idle_second(mode: Mode, watchdog_ms: u32) -> Sim {
    let ms = watchdog_ms.to_string();
    let knobs = [("kern.polling.wakeup_watchdog_ms", ms.as_str())];
    let scenario = common::forwarding("idle", Arrivals::None, mode, UserTask::None, &knobs);
    let mut sim = scenario.build().unwrap();
    sim.run_until(1000 * MS);
    sim
}

#[test]
fn an_idle_box_waiting_for_wakeups_takes_one_timer_wakeup_a_watchdog_period() {
    for mode in [Mode::Interrupt, Mode::Adaptive, Mode::Auto] {
        for (ms, most) in [(100, 10), (20, 50), (0, 0)] {
            let sim = idle_second(mode, ms);
            assert!(
                sim.timer_wakeups <= most && sim.timer_wakeups + 1 >= most,
                "{mode:?} at {ms} ms: {} timer wakeups in a second",
                sim.timer_wakeups
            );
            let found: u64 = sim
                .dataplane()
                .interfaces()
                .iter()
                .map(|i| i.counters().watchdog_frames)
                .sum();
            assert_eq!(found, 0, "nothing to find on an idle box");
        }
    }
}

#[test]
fn a_box_that_polls_does_not_see_the_watchdog() {
    let on = idle_second(Mode::Polling, 100);
    let off = idle_second(Mode::Polling, 0);
    assert_eq!(on.timer_wakeups, off.timer_wakeups);
    assert_eq!(on.ticks, off.ticks, "quiet after the same cycles");
    assert_eq!(format!("{:?}", on.split), format!("{:?}", off.split));
}
