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
use polld_dev::kernel_rx::{self, ThreadClock};

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

/// The poll thread's CPU time between two tick reads: the thread's CPU clock less the time
/// it spun in busy and idle polling (which no cycle budget meters).
/// The time controller holds it to the devices' share: what it takes beyond its cycles
/// (the thread's wakeups, the timer and epoll calls, control requests and status
/// rounds, work outside the cycles, what the kernel charges the thread for the
/// interrupts it takes while it runs) is left out of the next budgets
/// ([`polld_core::Poller::note_tick_cpu`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct TickCpu {
    /// The thread's CPU clock and its spinning time, at the last tick read.
    last: Option<(u64, u64)>,
}

impl TickCpu {
    /// Of `expirations` read now, with the thread's CPU clock at `cpu_ns` and the busy and
    /// idle polling the executor has timed at `spin_ns`: the CPU time but the spinning
    /// since the previous tick read (`None` at the first, or for a read with no
    /// expiration).
    pub fn since_last_read(&mut self, expirations: u64, cpu_ns: u64, spin_ns: u64) -> Option<u64> {
        if expirations == 0 {
            return None;
        }
        let last = self.last.replace((cpu_ns, spin_ns))?;
        let cpu = cpu_ns.saturating_sub(last.0);
        let spin = spin_ns.saturating_sub(last.1);
        Some(cpu.saturating_sub(spin))
    }
}

/// The run time of the poll CPU's `ksoftirqd`, which the time controller counts with the
/// poll thread's CPU. Softirq work the way out of an interrupt leaves over runs there, at
/// the user's priority and outside the poll thread: on 6.1, once a softirq runs long
/// (a virtio-net transmit queue's completion NAPI, rescheduling itself while the device
/// completes what polld sent), all of the CPU's softirqs go there. It is the devices'
/// work, which the share bounds; left out, it came out of the user's share. It is counted
/// only while some interface is on a driver (AF_XDP, whose NAPI runs in softirq when polld
/// does not busy poll it): a TAP has no softirq work of its own, and on the TAP testbed
/// ksoftirqd runs the sink's receive of what polld wrote, the wire's work, not polld's.
#[derive(Debug, Default)]
pub struct SoftirqThread {
    /// The CPU last read, and its thread's clock and run time then (`None`: it has none).
    at: Option<(usize, Option<(ThreadClock, u64)>)>,
    /// Its run time since the first read, summed over reads on the same CPU, ns.
    used_ns: u64,
}

impl SoftirqThread {
    /// The run time of the `ksoftirqd` of `cpu` (the poll thread's CPU now) while it was
    /// `counted`, summed over the reads since the first, ns: a change of CPU, or a read
    /// after reads it was not counted at, starts from the thread as it is.
    pub fn used_ns(&mut self, cpu: usize, counted: bool) -> u64 {
        match &mut self.at {
            _ if !counted => self.at = None,
            Some((c, Some((clock, last)))) if *c == cpu => {
                if let Some(now) = clock.read_ns() {
                    self.used_ns += now.saturating_sub(*last);
                    *last = now;
                }
            }
            Some((c, None)) if *c == cpu => {}
            _ => {
                let thread = kernel_rx::ksoftirqd_pid(cpu)
                    .and_then(ThreadClock::open)
                    .and_then(|clock| {
                        let now = clock.read_ns()?;
                        Some((clock, now))
                    });
                self.at = Some((cpu, thread));
            }
        }
        self.used_ns
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
    fn the_cpu_between_tick_reads_leaves_out_the_spinning() {
        let mut o = TickCpu::default();
        assert_eq!(
            o.since_last_read(1, 5 * MS, 3 * MS),
            None,
            "the first read is the origin"
        );
        assert_eq!(
            o.since_last_read(1, 5 * MS + 700_000, 3 * MS + 500_000),
            Some(200_000)
        );
        assert_eq!(o.since_last_read(0, 9 * MS, 4 * MS), None, "not a tick");
        // The CPU but the spinning since the last tick read (1 ms less 0.5), not a read
        // without expirations.
        assert_eq!(
            o.since_last_read(2, 6 * MS + 700_000, 4 * MS),
            Some(500_000)
        );
        // Spinning timed on the wall clock can exceed the thread's CPU (it was preempted).
        assert_eq!(o.since_last_read(1, 6 * MS + 800_000, 5 * MS), Some(0));
        // No spinning: all of the thread's CPU.
        assert_eq!(o.since_last_read(1, 8 * MS, 5 * MS), Some(1_200_000));
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
