//! The one clock polld reads: CLOCK_MONOTONIC in nanoseconds. The scheduler, the timers,
//! the generator's send stamps and the sink's receive times all use it, so their times
//! compare directly (the vDSO makes a read cost tens of nanoseconds).

use rustix::time::ClockId;

/// Nanoseconds of CLOCK_MONOTONIC.
pub fn monotonic_ns() -> u64 {
    clock_ns(ClockId::Monotonic)
}

/// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID), ns: what polld checks its
/// monotonic time accounts against.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(ClockId::ThreadCPUTime)
}

fn clock_ns(clock: ClockId) -> u64 {
    let ts = rustix::time::clock_gettime(clock);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_thread_clock_advances_with_work() {
        let before = super::thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        assert!(super::thread_cpu_ns() > before, "{x}");
    }
}
