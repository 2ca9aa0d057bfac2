//! Polls between two ticks: *looks* at light traffic and *repolls* after a full output
//! (docs/algorithm.md §4).
//!
//! A cycle that ended because every ring ran empty, while the devices moved frames within
//! the last tick (at most `looks` cycles in a row since the last that moved frames found
//! none), with room left in the tick's `100 - user_frac` share for one more like it, arms
//! a look ([`Poller::take_look`]) at the next of `kern.polling.looks` points evenly spaced
//! between two ticks; the executor's timer fires there ([`Poller::look`]) and a cycle runs,
//! owing nothing to the clock. A frame then waits at most `1/((looks + 1) * hz)` for its
//! poll while traffic is light; a flood spends the budget first and an idle device moves
//! nothing, so neither looks.
//!
//! A cycle cut short by a full output asks to poll again before the next tick
//! ([`Poller::take_repoll`]), after a wait that keeps the cycle within its share of the
//! time to the next one, or when the output's transmit-ready line rises
//! ([`Poller::repoll_on_line`]).

use super::Poller;

/// The shortest wait before polling again after a cycle that met a full output.
pub(super) const MIN_REPOLL_NS: u64 = 5_000;

impl Poller {
    /// After a cycle cut short by a full output, the wait before polling again: long
    /// enough that the cycle's time stays within `100 - user_frac` percent of the time
    /// from its start to the next one, so the user's share holds however often it
    /// repeats. The wait is when the output drains (on veth, its NAPI thread runs).
    pub(super) fn repoll_gap(&mut self, now: u64) -> u64 {
        let tick_ns = self.tick_ns();
        self.repoll_backoff = if self.blocked_at_once {
            (self.repoll_backoff * 2).min(tick_ns)
        } else {
            (self.repoll_backoff / 2).max(MIN_REPOLL_NS)
        };
        let elapsed = now.saturating_sub(self.cycle_start);
        let user = self.knobs.user_frac as u64;
        (elapsed * user / (100 - user)).max(self.repoll_backoff)
    }

    /// After a cycle cut short by a full output, that output's transmit-ready line rose at
    /// `now`: a cycle starts now if one more like the last still fits in this tick's
    /// `100 - user_frac` share beside the cycles already run since the tick, else the
    /// next tick starts it. Either way no timer is needed (a timer wakeup is what the
    /// repoll costs). Returns whether a cycle was scheduled.
    pub fn repoll_on_line(&mut self, now: u64) -> bool {
        if self.table.is_empty() || !self.one_more_fits(now) {
            return false;
        }
        self.schedule_cycle(1)
    }

    /// Whether one more cycle like the last, started at `at`, fits in this tick's
    /// `100 - user_frac` share beside the cycles already run since the tick, and ends
    /// before the next tick (which owes a cycle of its own).
    pub(super) fn one_more_fits(&self, at: u64) -> bool {
        // The share less the thread's own cost per tick, of which the wakeups of looks
        // and repolls are part.
        let fits_share = self.tick_work_ns + self.last_cycle_ns <= self.cycle_share_ns();
        let ends_before_tick = at + self.last_cycle_ns <= self.last_tick + self.tick_ns();
        fits_share && ends_before_tick
    }

    /// After a cycle at light traffic that left every ring empty at `now`: arms a look at
    /// the next of the `looks` points evenly spaced between the last tick and the next,
    /// if one more cycle like it fits there (`one_more_fits`).
    pub(super) fn arm_look(&mut self, now: u64) {
        let looks = u64::from(self.knobs.looks);
        let gap = self.tick_ns() / (looks + 1);
        let k = now.saturating_sub(self.last_tick) / gap + 1;
        let at = self.last_tick + k * gap;
        if k <= looks && self.one_more_fits(at) {
            self.look_at = Some(at);
            self.look_tick = Some(self.last_tick);
        }
    }

    /// When to look at the devices before the next tick, once (a cycle emptied the rings
    /// while traffic is light): the executor arms a timer for it and
    /// calls [`Poller::look`] when it fires. Unlike a repoll, the tick stays where it is.
    pub fn take_look(&mut self) -> Option<u64> {
        self.look_at.take()
    }

    /// The look's timer fired at `now`: a cycle starts, owing nothing to the clock, if the
    /// look still belongs to this tick, no cycle is under way, and one more cycle like the
    /// last still fits (`one_more_fits`). Returns whether a cycle was scheduled.
    pub fn look(&mut self, now: u64) -> bool {
        let current = self.look_tick.take() == Some(self.last_tick);
        if !current || self.table.is_empty() || self.state.phase != 0 || !self.one_more_fits(now) {
            return false;
        }
        self.state.look_cycles += 1;
        self.schedule_cycle(1)
    }

    /// When to poll again before the next tick (a cycle met a full output), once: the
    /// executor moves its next tick there if that is earlier. That tick comes early by
    /// polld's own schedule, not the clock's fault: the short-tick detector takes it as its
    /// new reference without counting it.
    pub fn take_repoll(&mut self) -> Option<u64> {
        let at = self.repoll_at.take();
        if at.is_some() {
            self.prev_tick = None;
        }
        at
    }
}
