//! CLOCK_MONOTONIC in nanoseconds, precise sleeps, and the stop signal.
//!
//! Generator and sink run on the same machine, so the send time the generator writes
//! and the receive time the sink reads come from one clock (the vDSO makes a read
//! cost tens of nanoseconds). Sleeps use absolute deadlines with a 1 ns timer slack:
//! on the reference VM that cuts a short sleep from about 88 µs to about 23 µs
//! (docs/measuring.md, §ref-timer).

use std::num::NonZeroU64;

use rustix::thread::ClockId;
use rustix::time::Timespec;

pub use polld_dev::clock::monotonic_ns;

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (or a signal arrives).
pub fn sleep_until(deadline_ns: u64) {
    let deadline = Timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as i64,
        tv_nsec: (deadline_ns % 1_000_000_000) as i64,
    };
    // An early return (EINTR) is harmless because every caller re-reads the clock.
    let _ = rustix::thread::clock_nanosleep_absolute(ClockId::Monotonic, &deadline);
}

/// Sets this thread's timer slack to 1 ns so that short sleeps wake on time.
pub fn tighten_timer_slack() {
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, and returns it.
pub use polld_dev::sys::stop_on_signals;

/// Waits shorter than this are spun; longer ones sleep first.
const SPIN_BELOW_NS: u64 = 80_000;
/// How early a sleep ends before its target, to absorb wakeup lateness (about 23 µs at
/// the median and up to 74 µs at p99 on the reference VM, docs/measuring.md §ref-timer).
const WAKE_EARLY_NS: u64 = 50_000;

/// Moves towards `target_ns`: sleeps if it is far, spins once if it is near.
///
/// Returns early, by design: callers loop, re-read the clock and call again, so a short
/// wait ends within a spin iteration of the target.
pub fn wait_towards(target_ns: u64) {
    let now = monotonic_ns();
    if target_ns > now + SPIN_BELOW_NS {
        sleep_until(target_ns - WAKE_EARLY_NS);
    } else {
        std::hint::spin_loop();
    }
}
