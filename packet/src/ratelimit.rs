//! A token bucket on caller-supplied time, for ICMP error rate limiting
//! (RFC 1812 §4.3.2.8).

/// Allows `rate_per_sec` events per second on average and bursts of up to `burst`.
/// Credit is kept in nanoseconds of accumulated time, so no floating point is involved.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    /// Time that buys one token; `None` when the rate is zero (never allow).
    cost_ns: Option<u64>,
    capacity_ns: u64,
    credit_ns: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at time 0.
    pub fn new(rate_per_sec: u32, burst: u32) -> Self {
        let cost_ns = (rate_per_sec > 0).then(|| 1_000_000_000 / u64::from(rate_per_sec));
        let capacity_ns = cost_ns.unwrap_or(0).saturating_mul(u64::from(burst.max(1)));
        TokenBucket {
            cost_ns,
            capacity_ns,
            credit_ns: capacity_ns,
            last_ns: 0,
        }
    }

    /// Takes a token if one is available at `now_ns`.
    pub fn try_take(&mut self, now_ns: u64) -> bool {
        let Some(cost) = self.cost_ns else {
            return false;
        };
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now_ns);
        self.credit_ns = self.credit_ns.saturating_add(elapsed).min(self.capacity_ns);
        if self.credit_ns >= cost {
            self.credit_ns -= cost;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_rate() {
        let mut b = TokenBucket::new(10, 3);
        assert_eq!((0..5).filter(|_| b.try_take(0)).count(), 3);
        assert!(!b.try_take(50_000_000));
        assert!(b.try_take(100_000_000));
        assert!(!b.try_take(100_000_000));
        // A long idle period refills only up to the burst.
        assert_eq!((0..10).filter(|_| b.try_take(60_000_000_000)).count(), 3);
    }

    #[test]
    fn zero_rate_never_allows() {
        let mut b = TokenBucket::new(0, 5);
        assert!(!b.try_take(0));
        assert!(!b.try_take(u64::MAX));
    }
}
