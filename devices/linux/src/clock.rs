//! The one clock polld reads: CLOCK_MONOTONIC in nanoseconds. The scheduler, the timers,
//! the generator's send stamps and the sink's receive times all use it, so their times
//! compare directly (the vDSO makes a read cost tens of nanoseconds).

/// Nanoseconds of CLOCK_MONOTONIC.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
