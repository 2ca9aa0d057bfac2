//! The idle poller (`kern.polling.idle_poll`, FreeBSD's `poll_idle`): an idle-priority
//! pass that polls every handler with `each_burst` whenever the CPU would otherwise idle,
//! not accounted (docs/algorithm.md §5).
//!
//! polld's departure: a pass (or a cycle) that leaves every ring empty puts the idle
//! poller to sleep on the devices' interrupts ([`Poller::idle_wake`]) instead of polling
//! empty rings again, for each pass costs a Linux thread two context switches. The
//! interrupts wake it at most `kern.polling.idle_wakeups` times between two ticks (0: no
//! limit); after that it rests until the tick, so a half-loaded CPU does not wake it per
//! batch the kernel hands over (which would cost what interrupt mode costs per packet).
//!
//! Contract: while idle polling is off (`idle_poll` 0, or no handler registered) the idle
//! poller sleeps (`idlepoll_sleeping`).

use super::{PollCmd, PollHandlers, Poller};

impl Poller {
    /// One pass of the idle poller (`poll_idle`): every handler gets `each_burst`, nothing
    /// is accounted. Returns the frames processed. A pass that found every ring empty (and
    /// no output full) puts the idle poller to sleep (`idlepoll_sleeping`) until a
    /// device signals a frame ([`Poller::idle_wake`]) or a poll cycle moves one: FreeBSD's
    /// idle loop polls empty rings for free, a Linux thread pays two context switches a
    /// pass, so it sleeps on the devices' interrupts instead.
    pub fn idle_poll(&mut self, handlers: &mut dyn PollHandlers) -> u32 {
        self.update_idle_sleep();
        if self.state.idlepoll_sleeping {
            return 0;
        }
        let each = self.knobs.each_burst;
        let mut done = 0;
        let mut drained = true;
        for i in 0..self.table.len() {
            let id = self.table[i];
            let got = handlers.poll(id, PollCmd::PollOnly, each);
            done += got;
            if handlers.take_output_full(id) || got >= each {
                drained = false;
            }
        }
        if drained {
            self.idle_rest();
        }
        done
    }

    /// Every ring was left empty: the idle poller sleeps on the devices' interrupts, or,
    /// when they woke it `idle_wakeups` times since the last tick, until the next tick.
    pub(super) fn idle_rest(&mut self) {
        if !self.idle_poll_active() {
            return;
        }
        let limit = self.knobs.idle_wakeups;
        self.state.idlepoll_sleeping = true;
        self.idle_parked = limit != 0 && self.idle_wakeups_since_tick >= limit;
    }

    /// Whether idle polling is on (`kern.polling.idle_poll` and a registered handler).
    pub(super) fn idle_poll_active(&self) -> bool {
        self.knobs.idle_poll != 0 && !self.table.is_empty()
    }

    /// Whether the idle poller wants a pass once the CPU idles: it is on and not asleep
    /// on empty rings.
    pub fn idle_poll_wanted(&self) -> bool {
        self.idle_poll_active() && !self.state.idlepoll_sleeping
    }

    /// Whether the idle poller sleeps on empty rings and the devices' interrupts wake it
    /// (not when it rests until the next tick).
    pub fn idle_poll_resting(&self) -> bool {
        self.idle_poll_active() && self.state.idlepoll_sleeping && !self.idle_parked
    }

    /// A registered device signalled a frame while the idle poller rested on empty rings:
    /// it wakes, and its next pass may run once the CPU idles.
    pub fn idle_wake(&mut self) {
        if self.idle_poll_resting() {
            self.idle_wakeups_since_tick = self.idle_wakeups_since_tick.saturating_add(1);
            self.state.idlepoll_wakeups += 1;
        }
        self.update_idle_sleep();
    }

    pub(super) fn update_idle_sleep(&mut self) {
        self.state.idlepoll_sleeping = !self.idle_poll_active();
        self.idle_parked = false;
    }
}
