//! Per-flow sequence tracking: loss, reordering and duplicates, counted exactly.
//!
//! Each flow remembers the highest sequence number seen and a bitmap of which of the
//! last [`WINDOW`] numbers arrived. A jump ahead counts the skipped numbers as lost; a
//! number below the highest is either *reordered* (not seen before: it arrived late, so
//! one loss is taken back) or a *duplicate* (seen before). A number more than [`WINDOW`]
//! below the highest can no longer be told apart and counts as *stale*.
//!
//! A flow starts at the lowest number the sink sees, so a sink started after the
//! generator does not count the frames sent before it as lost; a frame that arrives
//! late with a number below the flow's start moves the start down (it is reordered,
//! and the numbers between it and the old start become lost until they arrive).
//! One generator run per sink run: a restarted generator's numbers count as stale.
//!
//! Frames lost after the last one received, and flows never received at all, are
//! invisible to sequence numbers alone; the generator's end-of-run records
//! ([`crate::frame::EndOfRun`]) tell how many numbers each flow was issued
//! ([`SeqTracker::issued`]). From then on a flow's loss is what it was issued less what
//! arrived, counted from 0 when the sink started before the generator (else from the
//! lowest number seen, and flows never seen are left out: their start is unknown).

use serde::Serialize;

/// How many recent sequence numbers each flow remembers.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// Counts for one flow, or summed over flows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SeqCounts {
    /// Frames received (every one, including reordered, duplicate and stale).
    pub received: u64,
    /// Sequence numbers skipped and not (yet) received late.
    pub lost: u64,
    /// Frames that arrived after a higher sequence number of their flow.
    pub reordered: u64,
    /// Frames whose sequence number had already been received.
    pub duplicates: u64,
    /// Frames more than [`WINDOW`] behind the highest number: late or duplicate, unknown.
    pub stale: u64,
}

impl SeqCounts {
    fn add(&mut self, other: &SeqCounts) {
        self.received += other.received;
        self.lost += other.lost;
        self.reordered += other.reordered;
        self.duplicates += other.duplicates;
        self.stale += other.stale;
    }
}

/// The state of one flow.
#[derive(Clone, Debug)]
struct FlowSeq {
    /// The lowest number seen: where the flow starts.
    lowest: u64,
    highest: u64,
    seen: [u64; WORDS],
    counts: SeqCounts,
}

impl FlowSeq {
    fn new(first: u64) -> FlowSeq {
        let mut flow = FlowSeq {
            lowest: first,
            highest: first,
            seen: [0; WORDS],
            counts: SeqCounts {
                received: 1,
                ..SeqCounts::default()
            },
        };
        flow.mark(first);
        flow
    }

    fn bit(seq: u64) -> (usize, u64) {
        let slot = seq % WINDOW;
        ((slot / 64) as usize, 1 << (slot % 64))
    }

    fn mark(&mut self, seq: u64) {
        let (word, mask) = FlowSeq::bit(seq);
        self.seen[word] |= mask;
    }

    fn record(&mut self, seq: u64) {
        self.counts.received += 1;
        if seq > self.highest {
            let skipped = seq - self.highest - 1;
            self.counts.lost += skipped;
            if skipped + 1 >= WINDOW {
                self.seen = [0; WORDS];
            } else {
                for forgotten in self.highest + 1..=seq {
                    let (word, mask) = FlowSeq::bit(forgotten);
                    self.seen[word] &= !mask;
                }
            }
            self.highest = seq;
            self.mark(seq);
        } else if self.highest - seq >= WINDOW {
            self.counts.stale += 1;
        } else {
            let (word, mask) = FlowSeq::bit(seq);
            if self.seen[word] & mask != 0 {
                self.counts.duplicates += 1;
            } else {
                self.seen[word] |= mask;
                self.counts.reordered += 1;
                if seq < self.lowest {
                    // Before the start: the numbers up to the old start were never expected.
                    self.counts.lost += self.lowest - seq - 1;
                    self.lowest = seq;
                } else {
                    self.counts.lost -= 1;
                }
            }
        }
    }
}

/// Sequence state for every flow, indexed by the flow id the frames carry.
#[derive(Clone, Debug, Default)]
pub struct SeqTracker {
    flows: Vec<Option<Box<FlowSeq>>>,
    /// Per flow, the numbers the generator issued, once its end-of-run record came.
    issued: Vec<Option<u64>>,
    /// The sink started before the generator: every flow counts from 0.
    from_zero: bool,
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker::default()
    }

    /// Accounts for one received frame of `flow` carrying `seq`.
    pub fn record(&mut self, flow: u16, seq: u64) {
        let index = usize::from(flow);
        if index >= self.flows.len() {
            self.flows.resize_with(index + 1, || None);
        }
        match &mut self.flows[index] {
            Some(state) => state.record(seq),
            slot @ None => *slot = Some(Box::new(FlowSeq::new(seq))),
        }
    }

    /// Takes the generator's count of issued numbers for flow `flow`; `from_zero` when
    /// the sink was running before the generator started.
    pub fn issued(&mut self, flow: u16, issued: u64, from_zero: bool) {
        let index = usize::from(flow);
        if index >= self.issued.len() {
            self.issued.resize(index + 1, None);
        }
        self.issued[index] = Some(issued);
        self.from_zero = from_zero;
    }

    /// How many flows the generator's end-of-run records named.
    pub fn flows_issued(&self) -> usize {
        self.issued.iter().filter(|n| n.is_some()).count()
    }

    /// How many flows have been seen.
    pub fn flows_seen(&self) -> usize {
        self.flows.iter().filter(|f| f.is_some()).count()
    }

    /// The counts of one flow, if it has been seen or the generator named it.
    pub fn flow(&self, flow: u16) -> Option<SeqCounts> {
        let index = usize::from(flow);
        let seen = self.flows.get(index).and_then(|f| f.as_deref());
        let issued = self.issued.get(index).copied().flatten();
        match (seen, issued) {
            (None, None) => None,
            (Some(f), None) => Some(f.counts),
            (None, Some(n)) => Some(SeqCounts {
                lost: if self.from_zero { n } else { 0 },
                ..SeqCounts::default()
            }),
            (Some(f), Some(n)) => {
                let first = if self.from_zero { 0 } else { f.lowest };
                let arrived = f.counts.received - f.counts.duplicates - f.counts.stale;
                Some(SeqCounts {
                    lost: n.saturating_sub(first).saturating_sub(arrived),
                    ..f.counts
                })
            }
        }
    }

    /// The counts summed over all flows.
    pub fn total(&self) -> SeqCounts {
        let mut sum = SeqCounts::default();
        for flow in 0..self.flows.len().max(self.issued.len()) {
            if let Some(counts) = self.flow(flow as u16) {
                sum.add(&counts);
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: impl IntoIterator<Item = u64>) -> SeqCounts {
        let mut t = SeqTracker::new();
        for s in seqs {
            t.record(0, s);
        }
        t.flow(0).unwrap()
    }

    fn counts(received: u64, lost: u64, reordered: u64, duplicates: u64, stale: u64) -> SeqCounts {
        SeqCounts {
            received,
            lost,
            reordered,
            duplicates,
            stale,
        }
    }

    #[test]
    fn in_order_frames_count_nothing_but_received() {
        assert_eq!(feed(0..1000), counts(1000, 0, 0, 0, 0));
    }

    #[test]
    fn a_gap_counts_exactly_the_missing_numbers() {
        assert_eq!(feed((0..100).chain(110..200)), counts(190, 10, 0, 0, 0));
    }

    #[test]
    fn a_swapped_pair_is_one_reordering_and_no_loss() {
        assert_eq!(feed([0, 1, 3, 2, 4, 5]), counts(6, 0, 1, 0, 0));
    }

    #[test]
    fn a_late_frame_after_a_gap_takes_back_one_loss() {
        assert_eq!(feed([0, 5, 2, 6]), counts(4, 3, 1, 0, 0));
    }

    #[test]
    fn a_late_frame_from_before_the_first_one_seen_extends_the_flow_backwards() {
        assert_eq!(feed([5, 4, 6]), counts(3, 0, 1, 0, 0));
        assert_eq!(feed([5, 2, 6]), counts(3, 2, 1, 0, 0));
        assert_eq!(feed([5, 2, 3, 4]), counts(4, 0, 3, 0, 0));
    }

    #[test]
    fn repeats_are_duplicates_whether_in_order_or_late() {
        assert_eq!(feed([0, 1, 1, 2, 0, 3, 2]), counts(7, 0, 0, 3, 0));
        // A reordered frame that then arrives again is one reordering and one duplicate.
        assert_eq!(feed([0, 2, 1, 1, 3]), counts(5, 0, 1, 1, 0));
    }

    #[test]
    fn numbers_beyond_the_window_are_stale_and_the_window_forgets_old_numbers() {
        assert_eq!(feed([WINDOW + 10, 5]), counts(2, 0, 0, 0, 1));
        // After a jump of a whole window, an old number inside the new window is a
        // late arrival, not a duplicate of the number that shared its bitmap slot.
        let late = 2 * WINDOW - 1;
        assert_eq!(
            feed([WINDOW - 1, 2 * WINDOW, late]),
            counts(3, WINDOW - 1, 1, 0, 0)
        );
        assert_eq!(feed([3, 3 + WINDOW - 1, 3]), counts(3, WINDOW - 2, 0, 1, 0));
    }

    #[test]
    fn the_generators_issued_counts_reveal_tail_loss_and_flows_never_seen() {
        let mut t = SeqTracker::new();
        for s in 0..10 {
            t.record(0, s);
        }
        for s in [0, 2, 3] {
            t.record(1, s);
        }
        assert_eq!(t.total().lost, 1, "only the gap in flow 1 is visible");
        // Flow 0 was issued 15 (5 lost at the end), flow 1 was issued 4 (1 lost), flow 2
        // was issued 7 and never arrived.
        for (flow, n) in [(0, 15), (1, 4), (2, 7)] {
            t.issued(flow, n, true);
        }
        assert_eq!(t.flow(0), Some(counts(10, 5, 0, 0, 0)));
        assert_eq!(t.flow(1), Some(counts(3, 1, 0, 0, 0)));
        assert_eq!(t.flow(2), Some(counts(0, 7, 0, 0, 0)));
        assert_eq!(t.total(), counts(13, 13, 0, 0, 0));
        assert_eq!((t.flows_seen(), t.flows_issued()), (2, 3));
        // A sink started after the generator counts from the lowest number it saw, and
        // cannot tell how much of an unseen flow it should have seen.
        let mut late = SeqTracker::new();
        for s in 100..110 {
            late.record(0, s);
        }
        late.issued(0, 112, false);
        late.issued(1, 112, false);
        assert_eq!(late.total(), counts(10, 2, 0, 0, 0));
    }

    #[test]
    fn flows_are_tracked_independently_and_summed() {
        let mut t = SeqTracker::new();
        for s in [0, 1, 2, 3] {
            t.record(1, s);
        }
        for s in [10, 12, 11] {
            t.record(7, s);
        }
        t.record(7, 12);
        assert_eq!(t.flows_seen(), 2);
        assert_eq!(t.flow(1), Some(counts(4, 0, 0, 0, 0)));
        assert_eq!(t.flow(7), Some(counts(4, 0, 1, 1, 0)));
        assert_eq!(t.flow(2), None);
        assert_eq!(t.total(), counts(8, 0, 1, 1, 0));
    }
}
