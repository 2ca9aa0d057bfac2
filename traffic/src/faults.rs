//! Fault injection for testing sinks: the order in which the generator uses sequence numbers.
//!
//! Every flow sends the same sequence of numbers, one per round of flows. Without faults
//! that is 0, 1, 2, ... With `--inject-gap AT:LEN` the numbers AT..AT+LEN are never sent
//! (the sink must count LEN lost frames per flow). With `--inject-reorder AT` number
//! AT+1 is sent before AT (the sink must count one reordered frame per flow and no loss).

use std::str::FromStr;

/// `--inject-gap AT:LEN`: sequence numbers AT..AT+LEN are skipped in every flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gap {
    pub at: u64,
    pub len: u64,
}

impl FromStr for Gap {
    type Err = String;

    fn from_str(text: &str) -> Result<Gap, String> {
        let bad = || {
            format!("gap `{text}` must be AT:LEN with whole numbers and LEN >= 1 (e.g. 1000:10)")
        };
        let (at, len) = text.split_once(':').ok_or_else(bad)?;
        let gap = Gap {
            at: at.parse().map_err(|_| bad())?,
            len: len.parse().map_err(|_| bad())?,
        };
        if gap.len == 0 {
            return Err(bad());
        }
        Ok(gap)
    }
}

/// The sequence numbers one flow sends, in order, with the injected faults applied.
#[derive(Clone, Debug)]
pub struct SeqSchedule {
    next: u64,
    gaps: Vec<Gap>,
    swaps: Vec<u64>,
    held_back: Option<u64>,
}

impl SeqSchedule {
    pub fn new(gaps: &[Gap], swaps: &[u64]) -> SeqSchedule {
        SeqSchedule {
            next: 0,
            gaps: gaps.to_vec(),
            swaps: swaps.to_vec(),
            held_back: None,
        }
    }

    /// The next number not inside a gap, consumed.
    fn take_unskipped(&mut self) -> u64 {
        while let Some(gap) = self.gaps.iter().find(|g| g.at == self.next) {
            self.next += gap.len;
        }
        self.next += 1;
        self.next - 1
    }

    /// The next sequence number to send.
    pub fn next_seq(&mut self) -> u64 {
        if let Some(seq) = self.held_back.take() {
            return seq;
        }
        let seq = self.take_unskipped();
        if self.swaps.contains(&seq) {
            self.held_back = Some(seq);
            return self.take_unskipped();
        }
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(schedule: &mut SeqSchedule, n: usize) -> Vec<u64> {
        (0..n).map(|_| schedule.next_seq()).collect()
    }

    #[test]
    fn without_faults_numbers_count_up_from_zero() {
        assert_eq!(first(&mut SeqSchedule::new(&[], &[]), 4), [0, 1, 2, 3]);
    }

    #[test]
    fn a_gap_skips_its_numbers() {
        let mut s = SeqSchedule::new(&[Gap { at: 2, len: 3 }], &[]);
        assert_eq!(first(&mut s, 4), [0, 1, 5, 6]);
    }

    #[test]
    fn a_reorder_swaps_one_pair() {
        let mut s = SeqSchedule::new(&[], &[1, 5]);
        assert_eq!(first(&mut s, 8), [0, 2, 1, 3, 4, 6, 5, 7]);
    }

    #[test]
    fn a_reorder_just_before_a_gap_swaps_across_it() {
        let mut s = SeqSchedule::new(&[Gap { at: 3, len: 2 }], &[2]);
        assert_eq!(first(&mut s, 4), [0, 1, 5, 2]);
    }

    #[test]
    fn gap_arguments_are_checked() {
        assert_eq!("100:10".parse(), Ok(Gap { at: 100, len: 10 }));
        for bad in ["100", "100:0", "a:1", "1:-1", ""] {
            let err = bad.parse::<Gap>().unwrap_err();
            assert!(err.contains("AT:LEN"), "{err}");
        }
    }
}
