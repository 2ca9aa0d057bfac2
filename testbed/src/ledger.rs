//! Where every frame went, end to end: what the generator sent = what reached the sink +
//! each named drop on every hop between them.
//!
//! polld checks its own identity on each interface (`rx = forwarded + local + consumed +
//! queued + drops`, [`crate::share::conserved`]); that alone cannot see a frame lost
//! before polld read it or after it wrote it. A [`Ledger`] follows the frames across the
//! whole path, from counters kept by different parties: the generator's own count, the
//! kernel's counters of the interface it sends on (in gen's namespace), polld's counters,
//! and the kernel's counters of the interface the sink receives on. Each hop's losses are
//! named; what no hop explains is [`Ledger::unaccounted`], and a trial whose ledger does
//! not balance fails. This is the one end-to-end conservation check of the benches.

use std::fmt;

use serde::Serialize;

/// One trial's frames, from the generator to the sink.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// Frames the generator handed to its device.
    pub sent: u64,
    /// Frames lost on the way, by hop and reason, in path order: `("tap0 queue full
    /// (kernel tx_dropped)", 123)`.
    pub lost: Vec<(String, u64)>,
    /// Frames still on the way when the trial ended (polld's input queue), named.
    pub in_flight: Vec<(String, u64)>,
    /// Frames that reached the sink's interface.
    pub delivered: u64,
}

impl Ledger {
    /// Adds `n` frames lost at `hop` (nothing when `n` is 0).
    pub fn lose(&mut self, hop: impl Into<String>, n: u64) {
        if n > 0 {
            self.lost.push((hop.into(), n));
        }
    }

    /// Adds `n` frames still on the way at `hop` (nothing when `n` is 0).
    pub fn hold(&mut self, hop: impl Into<String>, n: u64) {
        if n > 0 {
            self.in_flight.push((hop.into(), n));
        }
    }

    /// Sent less delivered less every named loss and frame in flight: 0 when every frame
    /// is accounted for; negative when more arrived than was sent (another sender).
    pub fn unaccounted(&self) -> i64 {
        let named: u64 = self
            .lost
            .iter()
            .chain(&self.in_flight)
            .map(|(_, n)| n)
            .sum();
        self.sent as i64 - self.delivered as i64 - named as i64
    }

    /// Every frame accounted for.
    pub fn balanced(&self) -> bool {
        self.unaccounted() == 0
    }

    /// Both ledgers' frames together (several streams of one trial).
    pub fn merge(&mut self, other: Ledger) {
        self.sent += other.sent;
        self.delivered += other.delivered;
        self.lost.extend(other.lost);
        self.in_flight.extend(other.in_flight);
    }
}

impl fmt::Display for Ledger {
    /// `sent 1000 = delivered 900 + tap0 queue full 90 + polld: no_route 10` and, when it
    /// does not balance, `+ UNACCOUNTED 5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sent {} = delivered {}", self.sent, self.delivered)?;
        for (hop, n) in self.lost.iter().chain(&self.in_flight) {
            write!(f, " + {hop} {n}")?;
        }
        match self.unaccounted() {
            0 => Ok(()),
            n => write!(f, " + UNACCOUNTED {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> Ledger {
        let mut l = Ledger {
            sent: 1000,
            delivered: 880,
            ..Ledger::default()
        };
        l.lose("tap0 queue full (kernel tx_dropped)", 100);
        l.lose("polld tap0: no_route", 0);
        l.lose("polld tap0: ttl_exceeded", 15);
        l.hold("polld: IP input queue", 5);
        l
    }

    #[test]
    fn a_ledger_balances_when_every_frame_is_named() {
        let l = ledger();
        assert!(l.balanced(), "{l}");
        assert_eq!(
            l.to_string(),
            "sent 1000 = delivered 880 + tap0 queue full (kernel tx_dropped) 100 + polld tap0: ttl_exceeded 15 + polld: IP input queue 5"
        );
    }

    #[test]
    fn a_missing_frame_shows_as_unaccounted() {
        let mut l = ledger();
        l.delivered -= 3;
        assert!(!l.balanced());
        assert_eq!(l.unaccounted(), 3);
        assert!(l.to_string().ends_with(" + UNACCOUNTED 3"), "{l}");
        l.delivered += 5;
        assert_eq!(l.unaccounted(), -2, "more arrived than was sent");
    }

    #[test]
    fn streams_merge_into_one_ledger() {
        let mut a = ledger();
        a.merge(ledger());
        assert_eq!((a.sent, a.delivered, a.lost.len()), (2000, 1760, 4));
        assert!(a.balanced());
    }
}
