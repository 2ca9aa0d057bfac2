//! `auto` mode: Rizzo's open question, "turn on polling only when overloaded, and use
//! interrupts otherwise", answered with the CPU share rather than an interrupt rate, so the
//! threshold does not depend on the machine (docs/algorithm.md §7).
//!
//! - On interrupts, overload is measured from the CPU the poll thread really used: in
//!   windows of at least `kern.polling.auto_window_ticks` ticks (4 by default, so one late
//!   batch does not switch) [`Dataplane::step`] reads the thread's CPU clock once, from the
//!   executor's [`super::Clocks`] ([`Dataplane::close_auto_window`]; the simulator gives
//!   its virtual CPU time). That CPU includes what no timing around a handler sees: the wakeup before it
//!   (the context switch, `epoll_wait`, the kernel's readiness work), which on a TAP costs
//!   more than the handler itself. The work that is not interrupt work of `auto`
//!   interfaces (ticks, poll cycles, other modes' handlers), timed around each piece on the
//!   executor's clock ([`Dataplane::ran`], from the step; [`Dataplane::ran_outside`]: status
//!   checks and control requests), is taken out; what is left over
//!   `100 - kern.polling.user_frac` percent of the window switches every `auto` interface
//!   that took interrupts in it to polling.
//! - A preemption is not CPU the thread used, so it never counts as interrupt work, with or
//!   without `realtime`. What does count, untimed: the wakeups for the tick, the status
//!   timer, control requests and transmit-ready lines (about `hz` a second), a few µs each,
//!   or 10-30 µs more when one lands in a NAPI thread's poll, whose rest the kernel charges to
//!   the thread it woke (docs/measuring.md): an overestimate that leans towards polling.
//! - Polling, an `auto` interface goes back to interrupts after
//!   `kern.polling.auto_empty_polls` polls in a row found its ring empty, or when the load
//!   fell so far that interrupts would fit: at the close of a window, the frames the `auto`
//!   interfaces polled in it times the interrupt work per frame last measured on interrupts
//!   (the interrupt work of a window over the frames received in it) is under half of
//!   `100 - user_frac` percent of the window; or, once after each such window, times the
//!   interrupt work per frame of the last window that carried its interrupts (was not
//!   overloaded). One window overestimated (CPU the kernel charged to the thread that was
//!   not its interrupt work) switches a light load to polling at a cost per frame that
//!   would keep it there, where no run of empty polls comes to end it; the cost it really
//!   had on interrupts sends it back at the next window's close.
//!
//! Up over the threshold, down under half of it: that gap is the hysteresis. The cost per
//! frame measured under a flood is the cheapest (one wakeup serves many frames); if it lets
//! a load go back that interrupts cannot carry, the next window overloads, measures the cost
//! at that load, and the estimate from then on keeps it polled. A switch moves no
//! frame: what the device accepted stays in its ring for the new mode.

use crate::device::Device;
use crate::stage::PacketStage;

use super::{Dataplane, Due, Mode};

/// The current measurement window.
#[derive(Default)]
pub(super) struct AutoWindow {
    /// Where the window began, on the executor's clock (ns).
    start: u64,
    /// The poll thread's CPU clock when the window began (ns).
    cpu_start: u64,
    /// Work in the window that is not interrupt work of `auto` interfaces, ns of the
    /// executor's clock.
    other_ns: u64,
    /// Interrupt work per frame received, ns, in the last window with frames received on
    /// interrupts by `auto` interfaces.
    frame_ns: Option<u64>,
    /// The same, in the last such window that carried its interrupts (not overloaded);
    /// taken when it sends a load back.
    carried_ns: Option<u64>,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// How long `due` took, in ns of the executor's clock: the interfaces whose interrupt
    /// work it was are marked, the rest is taken out of the window's CPU. Told by
    /// [`Dataplane::step`]; public, as the window's other parts, for tests that drive the
    /// window on their own.
    pub fn ran(&mut self, due: Due, ns: u64) {
        let auto_interrupt = match due {
            Due::Interrupt(i) | Due::Handler(i) => {
                let iface = &mut self.devs.ifs[i];
                let on_interrupts = iface.mode == Mode::Auto && !iface.auto_polling;
                iface.auto_interrupted |= on_interrupts;
                on_interrupts
            }
            // The protocol work the handlers queued (net.inet.ip.fastforwarding=0).
            Due::InputQueue => self.devs.ifs.iter().any(|f| f.auto_interrupted),
            _ => false,
        };
        if !auto_interrupt {
            self.auto.other_ns += ns;
        }
    }

    /// The executor's own work between the pieces it runs (reading its events: timers,
    /// status checks, control requests), `ns` of its clock: not interrupt work either.
    pub fn ran_outside(&mut self, ns: u64) {
        self.auto.other_ns += ns;
    }

    /// Whether the poll thread's CPU clock is read now and passed to
    /// [`Dataplane::close_auto_window`] (by [`Dataplane::step`]): some interface is in
    /// `auto` mode and the window has run `auto_window_ticks` ticks. (At most one clock
    /// read per window, none without `auto`.)
    pub fn auto_window_due(&self, now: u64) -> bool {
        let knobs = self.poller.knobs();
        let window_ns = 1_000_000_000 / knobs.hz as u64 * knobs.auto_window_ticks as u64;
        now.saturating_sub(self.auto.start) >= window_ns
            && self.devs.ifs.iter().any(|f| f.mode == Mode::Auto)
    }

    /// Closes the window at `now` (the executor's clock), when the poll thread's CPU clock
    /// read `cpu_ns`: interrupt work over `100 - user_frac` percent of the window switches
    /// the `auto` interfaces that did it to polling; the frames polled, at the interrupt
    /// work per frame last measured, under half of it send the polling ones back.
    pub fn close_auto_window(&mut self, now: u64, cpu_ns: u64) {
        let elapsed = now.saturating_sub(self.auto.start);
        let used = cpu_ns.saturating_sub(self.auto.cpu_start);
        let interrupt_work = used.saturating_sub(self.auto.other_ns);
        let limit = elapsed * (100 - self.poller.knobs().user_frac as u64) / 100;
        let overloaded = interrupt_work > limit;
        let (mut interrupted, mut polled) = (0, 0);
        for iface in self.devs.ifs.iter_mut().filter(|f| f.mode == Mode::Auto) {
            let rx = iface.counters.rx_packets;
            let frames = rx - std::mem::replace(&mut iface.auto_rx_mark, rx);
            if iface.auto_polling {
                polled += frames;
            } else if iface.auto_interrupted {
                interrupted += frames;
            }
        }
        if let Some(ns) = interrupt_work.checked_div(interrupted) {
            self.auto.frame_ns = Some(ns);
            if !overloaded {
                self.auto.carried_ns = Some(ns);
            }
        }
        let fits_at = |ns: Option<u64>| {
            polled > 0 && ns.is_some_and(|ns| polled.saturating_mul(ns).saturating_mul(2) < limit)
        };
        // At the cost per frame of the last window, or at that of the last window that
        // carried its interrupts, which one overestimated window cannot keep a light load
        // polled with; the latter once (a load that overloads again on interrupts is
        // judged at its own cost from then on).
        let fits = fits_at(self.auto.frame_ns)
            || (fits_at(self.auto.carried_ns) && self.auto.carried_ns.take().is_some());
        for i in 0..self.devs.ifs.len() {
            let iface = &mut self.devs.ifs[i];
            let worked = std::mem::take(&mut iface.auto_interrupted);
            let polling = iface.mode == Mode::Auto && iface.auto_polling;
            if overloaded && worked {
                self.auto_switch(i, true);
            } else if fits && polling {
                self.auto_switch(i, false);
            }
        }
        self.auto = AutoWindow {
            start: now,
            cpu_start: cpu_ns,
            other_ns: 0,
            frame_ns: self.auto.frame_ns,
            carried_ns: self.auto.carried_ns,
        };
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
        // A handler cut short, or waiting for an output, leaves its frames in the ring for
        // the new mode.
        iface.in_handler = false;
        iface.tx_wait = None;
        iface.counters.auto_switches += 1;
        iface.dev.set_interrupt(!poll);
        // Back on interrupts, it looks at the outputs as a handler does before it receives:
        // an output still holding frames it refused (a pushed-back AF_PACKET batch, which
        // polls retried at every tick) is waited for on its transmit-ready line, whose
        // rise flushes it. Otherwise, with no frame arriving to start a handler, nothing
        // would flush those frames again, forwarded and never sent.
        if !poll {
            let _ = self.devs.interrupt_budget(i, 0);
        }
    }
}
