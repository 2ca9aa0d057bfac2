//! *Quiet*: after `quiet_cycles` cycles in a row that moved no frame, the poller is
//! `quiet`: the executor stops the tick and waits on the polled devices' interrupts, and
//! the first one that fires ([`Poller::wake`]) counts as a tick and resumes polling.
//! `quiet_cycles=0` ticks forever, as FreeBSD.
//!
//! Contracts: `quiet` implies `quiet_cycles > 0`; any knob write and any registration end
//! a quiet spell. Under the classic controller the wakeup first grows `burst` by one per
//! tick the spell skipped (up to `burst_max`), as FreeBSD's empty cycles would have.

use crate::knobs::Controller;

use super::Poller;

impl Poller {
    /// Counts empty cycles and enters or leaves the quiet state at the close of a cycle.
    pub(super) fn note_quiet(&mut self, now: u64) {
        if self.cycle_packets > 0 || self.cycle_blocked {
            self.leave_quiet();
            return;
        }
        self.empty_cycles = self.empty_cycles.saturating_add(1);
        let limit = self.knobs.quiet_cycles;
        if limit > 0 && self.empty_cycles >= limit && !self.state.quiet {
            self.state.quiet = true;
            self.quiet_since = now;
        }
    }

    pub(super) fn leave_quiet(&mut self) {
        self.empty_cycles = 0;
        self.state.quiet = false;
    }

    /// A registered device signalled work while polling was quiet: polling resumes, and
    /// the wakeup counts as a tick. Returns whether a cycle was scheduled.
    pub fn wake(&mut self, now: u64) -> bool {
        if !self.state.quiet {
            return false;
        }
        self.leave_quiet();
        self.state.quiet_wakeups += 1;
        if self.knobs.controller == Controller::Classic {
            // FreeBSD ticks on through an idle spell, and each of those empty cycles grows
            // the burst by one: the flood that ends the spell meets the burst FreeBSD's
            // would have, not the one the spell froze (from which +1 a cycle would take a
            // tick per packet of burst to reach the flood's rate).
            let skipped = now.saturating_sub(self.quiet_since) / self.tick_ns();
            let grown = u64::from(self.state.burst).saturating_add(skipped);
            self.state.burst = grown.min(u64::from(self.knobs.burst_max)) as u32;
        }
        self.hardclock(now, 1)
    }
}
