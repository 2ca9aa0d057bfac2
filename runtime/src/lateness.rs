//! How late the tick timer wakes the poll thread: the time from a tick's expiry to the
//! poll thread reading it, as a histogram served as `polld.tick_lateness_*`.
//!
//! Polling's latency is the wait for the next tick plus the path; the part of the wait
//! beyond 1/hz is this lateness, which is the kernel's (timer interrupt, wakeup, the
//! hypervisor) rather than polld's. A constant lateness only shifts every tick and adds
//! nothing to the wait of a frame that arrives at a random moment; its spread does.

use polld_control::answer::TickLateness;

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

#[cfg(test)]
mod tests {
    use super::*;

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
