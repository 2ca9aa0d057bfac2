//! Pacing: how many frames are due now to hold a target rate exactly, with bounded bursts.
//!
//! The schedule is absolute: frame `k` is due at `start + k / rate`. Whenever the
//! generator looks at the clock it sends every frame that is due and not yet sent, so
//! lateness (a slow system call, a preemption, a full ring) is caught up and the long-run
//! rate is exact. The catch-up is bounded: if the generator falls more than
//! [`Pacer::max_lag`] frames behind, the excess is skipped (counted in
//! [`Pacer::skipped`]) rather than sent as one long burst after a stall.

/// The frame schedule for one run at a fixed rate.
#[derive(Clone, Debug)]
pub struct Pacer {
    start_ns: u64,
    ns_per_frame: f64,
    /// Frames already accounted for: sent, or skipped after a stall.
    done: u64,
    max_lag: u64,
    skipped: u64,
}

/// How far behind the schedule the generator may fall before frames are skipped,
/// in time: long enough to ride out a scheduler tick (4 ms at HZ=250) and a
/// preemption, short enough that a catch-up burst stays small.
pub const CATCH_UP_WINDOW_NS: u64 = 5_000_000;

/// The smallest catch-up bound in frames, so that low rates can still batch a little.
const MIN_MAX_LAG: u64 = 4;

impl Pacer {
    /// A schedule of `pps` frames per second starting at `start_ns`.
    pub fn new(pps: f64, start_ns: u64) -> Pacer {
        let ns_per_frame = 1e9 / pps;
        let max_lag = ((CATCH_UP_WINDOW_NS as f64 / ns_per_frame) as u64).max(MIN_MAX_LAG);
        Pacer {
            start_ns,
            ns_per_frame,
            done: 0,
            max_lag,
            skipped: 0,
        }
    }

    /// Frames scheduled at or before `now_ns`, counting from the start.
    fn scheduled(&self, now_ns: u64) -> u64 {
        // +1: frame 0 is due at the start itself.
        (now_ns.saturating_sub(self.start_ns) as f64 / self.ns_per_frame) as u64 + 1
    }

    /// Frames due now and not yet sent. Frames beyond the catch-up bound are skipped.
    pub fn due(&mut self, now_ns: u64) -> u64 {
        let owed = self.scheduled(now_ns).saturating_sub(self.done);
        if owed > self.max_lag {
            let skip = owed - self.max_lag;
            self.skipped += skip;
            self.done += skip;
            return self.max_lag;
        }
        owed
    }

    /// Records that `frames` due frames went out.
    pub fn sent(&mut self, frames: u64) {
        self.done += frames;
    }

    /// When the next unsent frame is due.
    pub fn next_due_ns(&self) -> u64 {
        self.start_ns + (self.done as f64 * self.ns_per_frame).ceil() as u64
    }

    /// The catch-up bound in frames.
    pub fn max_lag(&self) -> u64 {
        self.max_lag
    }

    /// Frames skipped because the generator fell further behind than the bound.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: u64 = 1_000_000_000;

    #[test]
    fn frames_fall_due_one_interval_apart() {
        let mut p = Pacer::new(100_000.0, START); // one every 10 µs
        assert_eq!(p.due(START), 1);
        p.sent(1);
        assert_eq!(p.next_due_ns(), START + 10_000);
        assert_eq!(p.due(START + 9_999), 0);
        assert_eq!(p.due(START + 10_000), 1);
        assert_eq!(p.due(START + 35_000), 3);
        p.sent(3);
        assert_eq!(p.next_due_ns(), START + 40_000);
    }

    #[test]
    fn a_late_look_sends_the_backlog_so_the_long_run_rate_is_exact() {
        let mut p = Pacer::new(10_000.0, START);
        let mut sent = 0;
        // Looks at irregular moments, 0.5 ms apart on average, over exactly 1 s.
        let mut now = START;
        while now < START + 1_000_000_000 {
            let n = p.due(now);
            p.sent(n);
            sent += n;
            now += 1 + (sent * 7919 % 1_000_000);
        }
        let n = p.due(START + 1_000_000_000);
        assert_eq!(sent + n, 10_001, "frames 0..=10000 are due in [0 s, 1 s]");
        assert_eq!(p.skipped(), 0);
    }

    #[test]
    fn a_stall_longer_than_the_window_skips_frames_instead_of_bursting() {
        let mut p = Pacer::new(1_000_000.0, START);
        assert_eq!(p.max_lag(), 5_000, "5 ms at 1 Mpps");
        let first = p.due(START);
        p.sent(first);
        let due = p.due(START + 20_000_000); // 20 ms stall: 20000 frames owed
        assert_eq!(due, 5_000);
        assert_eq!(p.skipped(), 15_000);
        p.sent(due);
        assert_eq!(p.due(START + 20_000_000), 0);
    }

    #[test]
    fn low_rates_keep_a_small_catch_up_bound() {
        let p = Pacer::new(10.0, START);
        assert_eq!(p.max_lag(), MIN_MAX_LAG);
    }
}
