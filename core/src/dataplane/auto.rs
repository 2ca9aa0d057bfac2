//! `auto` mode: Rizzo's open question, "turn on polling only when overloaded, and use
//! interrupts otherwise", answered with the CPU share rather than an interrupt rate, so the
//! threshold does not depend on the machine (docs/algorithm.md §7).
//!
//! - On interrupts, the executor reports how long each piece of interrupt-driven work took
//!   ([`Dataplane::ran`]: the handler's batches, and the input queue it feeds), measured with
//!   the same clock as the poll cycles. The time is summed over windows of one tick
//!   (`1/kern.polling.hz`); a window in which it exceeds `100 - kern.polling.user_frac`
//!   percent switches every `auto` interface that took interrupts in it to polling.
//! - Polling, an `auto` interface goes back to interrupts after
//!   `kern.polling.auto_empty_polls` polls in a row found its ring empty.
//!
//! The two tests differ (a share up, an empty ring down), which is the hysteresis: a load
//! that overloads interrupts keeps the polls busy, so it stays polled. A switch moves no
//! frame: what the device accepted stays in its ring for the new mode.

use crate::device::Device;
use crate::stage::PacketStage;

use super::{Dataplane, Due, Mode};

/// The current measurement window of interrupt-driven work.
#[derive(Default)]
pub(super) struct AutoWindow {
    /// Where the window began (ns of the executor's clock).
    start: u64,
    /// Interrupt-driven work of `auto` interfaces in the window, ns.
    busy_ns: u64,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// The executor's measure of how long `due` took, in ns of the clock it passes to
    /// [`Dataplane::run`]: interrupt-driven work of `auto` interfaces on interrupts is
    /// summed to detect overload.
    pub fn ran(&mut self, due: Due, ns: u64) {
        match due {
            Due::Interrupt(i) | Due::Handler(i) => {
                let iface = &mut self.devs.ifs[i];
                if iface.mode == Mode::Auto && !iface.auto_polling {
                    iface.intr_ns += ns;
                    self.auto.busy_ns += ns;
                }
            }
            // The protocol work the handlers queued (net.inet.ip.fastforwarding=0).
            Due::InputQueue if self.devs.ifs.iter().any(|f| f.intr_ns > 0) => {
                self.auto.busy_ns += ns;
            }
            _ => {}
        }
    }

    /// Closes the window once a tick has passed: over `100 - user_frac` percent of it in
    /// interrupt work switches the `auto` interfaces that did that work to polling.
    pub(super) fn auto_check_overload(&mut self, now: u64) {
        let knobs = self.poller.knobs();
        let tick_ns = 1_000_000_000 / knobs.hz as u64;
        let elapsed = now.saturating_sub(self.auto.start);
        if elapsed < tick_ns {
            return;
        }
        let limit = elapsed * (100 - knobs.user_frac as u64) / 100;
        let overloaded = self.auto.busy_ns > limit;
        for i in 0..self.devs.ifs.len() {
            let worked = std::mem::take(&mut self.devs.ifs[i].intr_ns) > 0;
            if overloaded && worked {
                self.auto_switch(i, true);
            }
        }
        self.auto.start = now;
        self.auto.busy_ns = 0;
    }

    /// Sends the `auto` interfaces whose polls came back empty `auto_empty_polls` times in a
    /// row back to interrupts.
    pub(super) fn auto_check_idle(&mut self) {
        let limit = self.poller.knobs().auto_empty_polls;
        for i in 0..self.devs.ifs.len() {
            let iface = &self.devs.ifs[i];
            if iface.mode == Mode::Auto && iface.auto_polling && iface.empty_streak >= limit {
                self.auto_switch(i, false);
            }
        }
    }

    /// Moves `auto` interface `i` to polling (`true`) or back to interrupts. A full poller
    /// table keeps it on interrupts.
    fn auto_switch(&mut self, i: usize, poll: bool) {
        if poll {
            if self.poller.register(i).is_err() {
                return;
            }
        } else {
            let _ = self.poller.deregister(i);
        }
        self.pending.lower(i);
        let iface = &mut self.devs.ifs[i];
        iface.auto_polling = poll;
        iface.empty_streak = 0;
        // A handler cut short leaves its frames in the ring for the poller.
        iface.in_handler = false;
        iface.counters.auto_switches += 1;
        iface.dev.set_interrupt(!poll);
    }
}
