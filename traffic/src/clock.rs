//! CLOCK_MONOTONIC in nanoseconds, precise sleeps, and the stop signal.
//!
//! Generator and sink run on the same machine, so the send time the generator writes
//! and the receive time the sink reads come from one clock (the vDSO makes a read
//! cost tens of nanoseconds). Sleeps use absolute deadlines with a 1 ns timer slack:
//! on the reference VM that cuts a short sleep from about 88 µs to about 23 µs
//! (docs/measuring.md, §ref-timer).

use std::sync::atomic::{AtomicBool, Ordering};

pub use polld_dev::clock::monotonic_ns;

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (or a signal arrives).
pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: an absolute sleep on a valid timespec; an early return (EINTR) is harmless
    // because every caller re-reads the clock.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Sets this thread's timer slack to 1 ns so that short sleeps wake on time.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::Relaxed);
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, and returns it.
///
/// The loops poll the flag, print their summary and return normally. The handler is
/// installed without SA_RESTART so that a blocking sleep or poll returns at once.
pub fn stop_on_signals() -> &'static AtomicBool {
    STOP_REQUESTED.store(false, Ordering::Relaxed);
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe;
        // the sigaction struct is fully initialised before use.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = request_stop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    &STOP_REQUESTED
}

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
