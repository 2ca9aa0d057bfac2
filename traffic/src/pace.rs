//! Pacing: how many frames are due now to hold a target rate exactly, with bounded bursts.
//!
//! The schedule is absolute: frame `k` is due at `start + k / rate`. Whenever the
//! generator looks at the clock it sends every frame that is due and not yet sent, so
//! lateness (a slow system call, a preemption, a full ring) is caught up and the long-run
//! rate is exact. The catch-up is bounded: if the generator falls more than
//! [`Pacer::max_lag`] frames behind, the excess is skipped (counted in
//! [`Pacer::skipped`]) rather than sent as one long burst after a stall.
//!
//! Frames due within a short batch window are sent together, so that at high rates
//! one system call carries several frames instead of one: the window bounds how early
//! a frame leaves and how large a regular batch is.

/// The frame schedule for one run at a fixed rate.
#[derive(Clone, Debug)]
pub struct Pacer {
    start_ns: u64,
    ns_per_frame: f64,
    window_ns: u64,
    /// No frame is due at or after this time (the end of a `--duration` run).
    end_ns: u64,
    /// Frames already accounted for: sent, or skipped after a stall.
    done: u64,
    max_lag: u64,
    skipped: u64,
}

/// How far behind the schedule the generator may fall before frames are skipped, in
/// time: long enough to ride out the stalls of a busy 2-vCPU VM (several scheduler
/// ticks of 4 ms), short enough that a catch-up burst stays bounded.
pub const CATCH_UP_WINDOW_NS: u64 = 20_000_000;

/// The smallest catch-up bound in frames, so that low rates can still batch a little.
const MIN_MAX_LAG: u64 = 4;

impl Pacer {
    /// A schedule of `pps` frames per second starting at `start_ns`; frames due within
    /// `window_ns` from now count as due now.
    pub fn new(pps: f64, start_ns: u64, window_ns: u64) -> Pacer {
        let ns_per_frame = 1e9 / pps;
        let max_lag = ((CATCH_UP_WINDOW_NS as f64 / ns_per_frame) as u64).max(MIN_MAX_LAG);
        Pacer {
            start_ns,
            ns_per_frame,
            window_ns,
            end_ns: u64::MAX,
            done: 0,
            max_lag,
            skipped: 0,
        }
    }

    /// Ends the schedule at `end_ns`: a run of `d` seconds sends exactly the frames due
    /// in `[start, start + d)`, late ones included.
    pub fn until(mut self, end_ns: u64) -> Pacer {
        self.end_ns = end_ns;
        self
    }

    /// Frames scheduled at or before `now_ns`, counting from the start.
    fn scheduled(&self, now_ns: u64) -> u64 {
        if self.end_ns <= self.start_ns {
            return 0;
        }
        let now_ns = now_ns.min(self.end_ns - 1);
        // +1: frame 0 is due at the start itself.
        (now_ns.saturating_sub(self.start_ns) as f64 / self.ns_per_frame) as u64 + 1
    }

    /// Frames due now and not yet sent. Frames beyond the catch-up bound are skipped.
    pub fn due(&mut self, now_ns: u64) -> u64 {
        let owed = self
            .scheduled(now_ns + self.window_ns)
            .saturating_sub(self.done);
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

    /// Gives up on every frame due now: they count as skipped.
    pub fn skip_due(&mut self, now_ns: u64) {
        let owed = self.due(now_ns);
        self.skipped += owed;
        self.done += owed;
    }

    /// When the next unsent frame is due (less the batch window).
    pub fn next_due_ns(&self) -> u64 {
        (self.start_ns + (self.done as f64 * self.ns_per_frame).ceil() as u64)
            .saturating_sub(self.window_ns)
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
        let mut p = Pacer::new(100_000.0, START, 0); // one every 10 µs
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
        let mut p = Pacer::new(10_000.0, START, 0);
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
        let mut p = Pacer::new(1_000_000.0, START, 0);
        assert_eq!(p.max_lag(), 20_000, "20 ms at 1 Mpps");
        let first = p.due(START);
        p.sent(first);
        let due = p.due(START + 50_000_000); // 50 ms stall: 50000 frames owed
        assert_eq!(due, 20_000);
        assert_eq!(p.skipped(), 30_000);
        p.sent(due);
        assert_eq!(p.due(START + 50_000_000), 0);
        p.skip_due(START + 50_010_000);
        assert_eq!((p.skipped(), p.due(START + 50_010_000)), (30_010, 0));
    }

    #[test]
    fn low_rates_keep_a_small_catch_up_bound() {
        let p = Pacer::new(10.0, START, 0);
        assert_eq!(p.max_lag(), MIN_MAX_LAG);
    }

    #[test]
    fn a_bounded_schedule_ends_with_the_frames_due_before_its_end() {
        let mut p = Pacer::new(1_000.0, START, 0).until(START + 10_000_000);
        assert_eq!(
            p.due(START + 9_999_999),
            10,
            "frames 0..=9 are due before 10 ms"
        );
        assert_eq!(p.due(START + 60_000_000), 10, "late frames still count");
        p.sent(10);
        assert_eq!(p.due(START + 60_000_000), 0);
        assert_eq!(Pacer::new(1_000.0, START, 0).until(START).due(START), 0);
    }

    #[test]
    fn frames_within_the_batch_window_go_together() {
        let mut p = Pacer::new(300_000.0, START, 20_000); // one every 3.33 µs
        assert_eq!(p.due(START), 7, "frames 0..=6 fall due within 20 µs");
        p.sent(7);
        assert_eq!(p.next_due_ns(), START + 23_334 - 20_000);
        assert_eq!(p.due(START + 3_333), 0);
        assert_eq!(p.due(START + 3_334), 1);
    }
}
