//! How late the tick timer wakes the poll thread: the time from a tick's expiry to the
//! poll thread reading it, as a histogram served as `polld.tick_lateness_*`.
//!
//! Polling's latency is the wait for the next tick plus the path; the part of the wait
//! beyond 1/hz is this lateness, which is the kernel's (timer interrupt, wakeup, the
//! hypervisor) rather than polld's. A constant lateness only shifts every tick and adds
//! nothing to the wait of a frame that arrives at a random moment; its spread does.
//!
//! A read that finds several expirations owes that many poll cycles. FreeBSD owes them
//! only when its cycles overran (its clock interrupt is never late), and backs the burst
//! off for each; a user-space poll thread also owes them when it was kept off the CPU
//! (at `SCHED_OTHER`, behind the kernel's receive threads under a flood), where backing off
//! only shrinks what it takes per wakeup. [`WaitedTicks`] tells the two apart by the
//! thread's own CPU time.

use polld_control::daemon::TickLateness;

/// Buckets 1 µs wide up to this many µs; later wakeups share the last bucket (and
/// `max_ns` keeps the worst).
const BUCKETS: usize = 4096;

/// The lateness of every tick wakeup since start.
pub struct Lateness {
    /// Wakeups per µs of lateness.
    buckets: Vec<u64>,
    wakeups: u64,
    max_ns: u64,
}

impl Default for Lateness {
    fn default() -> Lateness {
        Lateness {
            buckets: vec![0; BUCKETS],
            wakeups: 0,
            max_ns: 0,
        }
    }
}

impl Lateness {
    pub fn record(&mut self, late_ns: u64) {
        let bucket = ((late_ns / 1000) as usize).min(BUCKETS - 1);
        self.buckets[bucket] += 1;
        self.wakeups += 1;
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// The upper edge of the bucket holding the `q`-quantile (0 before any wakeup).
    fn quantile_ns(&self, q: f64) -> u64 {
        let rank = (q * self.wakeups as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (us, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return ((us as u64 + 1) * 1000).min(self.max_ns);
            }
        }
        0
    }

    pub fn summary(&self) -> TickLateness {
        TickLateness {
            wakeups: self.wakeups,
            p50_ns: self.quantile_ns(0.50),
            p99_ns: self.quantile_ns(0.99),
            max_ns: self.max_ns,
        }
    }
}

/// Which owed ticks of a timer read the poll thread only waited for: each tick period of
/// CPU time the thread used since the previous read explains one owed tick as its own
/// overrun; the other owed ticks (all but the one the read pays) it waited for.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitedTicks {
    cpu_at_last_read: u64,
}

impl WaitedTicks {
    /// Of `expirations` read now, with the thread's CPU clock at `cpu_ns` and a tick of
    /// `period_ns`, how many the thread waited for.
    ///
    /// Off the CPU is all it can tell: time the thread blocked in a system call, or softirq
    /// work on its CPU that the kernel does not charge to it (`CONFIG_IRQ_TIME_ACCOUNTING`),
    /// also counts as waited.
    pub fn waited(&mut self, expirations: u64, cpu_ns: u64, period_ns: u64) -> u64 {
        if expirations == 0 {
            // Not a tick: the CPU time since the last one still belongs to the next.
            return 0;
        }
        let used = cpu_ns.saturating_sub(self.cpu_at_last_read);
        self.cpu_at_last_read = cpu_ns;
        let overran = used.checked_div(period_ns).unwrap_or(u64::MAX);
        expirations.saturating_sub(1).saturating_sub(overran)
    }
}

/// The poll thread's CPU time per tick that no piece of work accounted for: between two
/// tick reads, the thread's CPU clock less the work the executor timed, per tick read.
/// What is left is the thread's own cost of ticking (its wakeups, the timer and epoll
/// calls, control requests and status rounds), which the time controller leaves out of a
/// cycle's budget ([`polld_core::Poller::note_tick_overhead`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TickOverhead {
    /// The thread's CPU clock and the executor's work, at the last tick read.
    last: Option<(u64, u64)>,
}

impl TickOverhead {
    /// Of `expirations` read now, with the thread's CPU clock at `cpu_ns` and the work the
    /// executor has timed at `work_ns`: the CPU time per tick outside the work since the
    /// previous tick read (`None` at the first, or for a read with no expiration).
    pub fn per_tick(&mut self, expirations: u64, cpu_ns: u64, work_ns: u64) -> Option<u64> {
        if expirations == 0 {
            return None;
        }
        let last = self.last.replace((cpu_ns, work_ns))?;
        let cpu = cpu_ns.saturating_sub(last.0);
        let work = work_ns.saturating_sub(last.1);
        Some(cpu.saturating_sub(work) / expirations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn owed_ticks_are_waited_for_unless_the_threads_own_cpu_time_explains_them() {
        let mut w = WaitedTicks::default();
        assert_eq!(w.waited(1, 300_000, MS), 0, "one tick owes nothing");
        // Four at once after 0.3 ms of work: kept off the CPU for three.
        assert_eq!(w.waited(4, 600_000, MS), 3);
        // Four at once after 2.5 ticks of work: two overran, one waited.
        assert_eq!(w.waited(4, 600_000 + 2_500_000, MS), 1);
        // Busier than the owed ticks: all overran.
        assert_eq!(w.waited(2, 600_000 + 2_500_000 + 5 * MS, MS), 0);
        // No tick period (the timer is off): nothing is excused.
        assert_eq!(w.waited(3, 10 * MS, 0), 0);
        // A read with no expiration keeps the CPU time used for the next tick read.
        assert_eq!(w.waited(0, 12 * MS, MS), 0);
        assert_eq!(
            w.waited(3, 12 * MS, MS),
            0,
            "two ticks of CPU time: both overran"
        );
    }

    #[test]
    fn the_overhead_is_the_cpu_time_per_tick_that_no_work_accounts_for() {
        let mut o = TickOverhead::default();
        assert_eq!(
            o.per_tick(1, 5 * MS, 3 * MS),
            None,
            "the first read is the origin"
        );
        assert_eq!(
            o.per_tick(1, 5 * MS + 700_000, 3 * MS + 500_000),
            Some(200_000)
        );
        assert_eq!(o.per_tick(0, 9 * MS, 4 * MS), None, "not a tick");
        // Two ticks at once: the CPU outside the work (1 ms less 0.5) is shared between them.
        assert_eq!(o.per_tick(2, 6 * MS + 700_000, 4 * MS), Some(250_000));
        // Work timed on the wall clock can exceed the thread's CPU (it was preempted).
        assert_eq!(o.per_tick(1, 6 * MS + 800_000, 5 * MS), Some(0));
    }

    #[test]
    fn quantiles_are_bucket_edges_capped_by_the_max() {
        let mut l = Lateness::default();
        assert_eq!(l.summary(), TickLateness::default());
        for i in 0..100u64 {
            l.record(i * 1000 + 500);
        }
        let s = l.summary();
        assert_eq!(s.wakeups, 100);
        assert_eq!(s.p50_ns, 50_000);
        assert_eq!(s.p99_ns, 99_000);
        assert_eq!(s.max_ns, 99_500);
        l.record(10_000_000);
        assert_eq!(l.summary().max_ns, 10_000_000);
        assert_eq!(l.summary().p50_ns, 51_000);
    }
}
