//! The wakeup watchdog, and the one-shot timer it shares with the poller's looks.
//!
//! In the modes that wait for a device's wakeup (interrupt, adaptive, `auto` on
//! interrupts) a frame is served only once its device raises a wakeup. A device or driver
//! that fails to raise one strands the frames in its ring until it raises the next (for a
//! NIC that raises none until its ring is serviced: for ever). FreeBSD's drivers kept a
//! timer for that (em(4)'s local timer); polld's is `kern.polling.wakeup_watchdog_ms`:
//! every period the watchdog looks at the ring of each interface whose interrupt is armed
//! and whose line is not raised, and serves what it finds as the mode serves a wakeup (the
//! handler runs to completion, the adaptive task is queued), its frames counted in
//! `dev.<if>.watchdog_frames`. So a frame whose wakeup was lost waits at most a period.
//!
//! The executor has one one-shot timer besides its tick ([`super::Step::look`],
//! [`super::Executor::look_at`]); the poller's looks and the watchdog share it: it is
//! armed for the earlier of the two, and when it fires ([`super::Due::Look`]) whichever is
//! due runs and the timer is armed again for what is left. While some interface waits for
//! a wakeup and the watchdog is not armed, [`super::Due::Watchdog`] arms it; nothing else
//! changes for an executor. While every interface polls, the watchdog is not armed: an
//! idle box that polls keeps its quiet spells, and one that waits for wakeups takes one
//! timer wakeup a period. A quiet poller (`kern.polling.quiet_cycles`) sleeps on its
//! devices' wakeups too and is not watched: its near-zero idle cost is what quiet polling
//! is for, and `quiet_cycles = 0` keeps it ticking.
//!
//! A write of the knob takes effect at the next decision: a new period (or 0) no longer
//! matches the one the watchdog was armed with, so [`super::Due::Watchdog`] arms it again
//! from then (or not at all); the poller's knob handler has nothing to do for it.

use crate::device::Device;
use crate::stage::PacketStage;

use super::{Dataplane, Mode};

/// The deadlines behind the executor's one-shot timer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Timer {
    /// The poller's look, not yet run ([`crate::Poller::take_look`]).
    look: Option<u64>,
    /// The watchdog's next look, and the period it was armed with.
    watchdog: Option<(u64, u64)>,
    /// What the executor's timer is armed for.
    armed: Option<u64>,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// The watchdog's period in ns, while it is on and some interface waits for a wakeup.
    fn watchdog_period(&self) -> Option<u64> {
        let ms = u64::from(self.poller.knobs().wakeup_watchdog_ms);
        let waits = (0..self.devs.ifs.len()).any(|i| self.interrupt_armed(i));
        (ms > 0 && waits).then_some(ms * 1_000_000)
    }

    /// Whether [`super::Due::Watchdog`] is due: the watchdog is wanted and not armed with
    /// the period the knob now says.
    pub(super) fn watchdog_unarmed(&self) -> bool {
        match self.watchdog_period() {
            Some(period) => self.timer.watchdog.map(|(_, p)| p) != Some(period),
            None => false,
        }
    }

    /// Arms the watchdog a period after `now`.
    pub(super) fn arm_watchdog(&mut self, now: u64) {
        self.timer.watchdog = self.watchdog_period().map(|period| (now + period, period));
    }

    /// The one-shot timer fired at `now`: the poller's look runs if it is due, and the
    /// watchdog's.
    pub(super) fn timer_fired(&mut self, now: u64) {
        self.timer.armed = None;
        if self.timer.look.is_some_and(|at| at <= now) {
            self.timer.look = None;
            self.poller.look(now);
        }
        if self.timer.watchdog.is_some_and(|(at, _)| at <= now) {
            // Armed before the knob went to 0 (or the last waiting interface to
            // polling): no look then.
            if self.watchdog_period().is_some() {
                self.watchdog_look();
            }
            self.arm_watchdog(now);
        }
    }

    /// Looks at the ring of every interface that waits for a wakeup, and starts the mode's
    /// work on it: one receive call finds whether frames wait (an empty ring costs just
    /// that), the frames it finds being counted as found by the watchdog. A line raised
    /// meanwhile is served by this work: a device whose wakeups are lost may hold its
    /// line raised (a readable fd) while it says its ring is empty.
    fn watchdog_look(&mut self) {
        for i in 0..self.devs.ifs.len() {
            if !self.interrupt_armed(i) {
                continue;
            }
            self.pending.lower(i);
            let iface = &mut self.devs.ifs[i];
            iface.watchdog_run = true;
            match iface.mode {
                Mode::Adaptive => {
                    iface.task_queued = true;
                    iface.task_left = None;
                    iface.dev.set_interrupt(false);
                }
                _ => iface.in_handler = true,
            }
        }
    }

    /// When to arm the executor's one-shot timer after a step, if that changed: `look`, a
    /// look the poller asked for now, replaces the one before it.
    pub(super) fn rearm_timer(&mut self, look: Option<u64>) -> Option<u64> {
        if look.is_some() {
            self.timer.look = look;
        }
        let t = &mut self.timer;
        let earliest = [t.look, t.watchdog.map(|(at, _)| at)]
            .into_iter()
            .flatten()
            .min()?;
        if look.is_some() || t.armed.is_none_or(|armed| earliest < armed) {
            t.armed = Some(earliest);
            return Some(earliest);
        }
        None
    }
}
