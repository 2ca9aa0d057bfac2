//! Transmit backpressure in interrupt work: FreeBSD's transmit-complete interrupt.
//!
//! A poll takes no more frames than the outputs can send (the poller's transmit-room
//! check). Interrupt work (a handler running to completion, an adaptive task) used to take
//! whatever the ring held, so a burst larger than an output could take at once (a
//! TPACKET_V3 block of about 320 frames against an AF_PACKET send buffer of about 160) was
//! received, processed and then dropped at transmit as `tx_ring_full`, after the CPU had
//! paid for it.
//!
//! Now interrupt work takes at most what the fullest output that raises a transmit-ready
//! line ([`crate::Capabilities::signals_tx_ready`]) can take. When that output can take nothing, the
//! work stops: its frames stay in the input's ring, the input's interrupt is masked, and
//! the input waits for that output's line (the executor watches the output's
//! [`crate::Capabilities::tx_ready_fd`] for POLLOUT; the simulated NIC raises it once its transmit ring
//! has drained to half). When the line rises ([`super::Due::TxReady`]) the output is
//! flushed, so the frames it held go out, and the work resumes where it stopped: the
//! handler runs again, the adaptive task is queued again. An output whose link goes down
//! releases its waiters.
//!
//! Polling uses the same line. A poll cycle cut short by a full output used to poll again
//! after a timer (the repoll, [`crate::poll::Poller::take_repoll`]), a timer wakeup that
//! costs about 8 µs of CPU in a VM (README, "Forwarding against the kernel"). When that
//! output raises a line, the next cycle waits for the line instead, or for the next tick
//! if that comes first. The cycles must still keep to `100 - user_frac`: a line starts a
//! cycle only if one more like the last fits in the tick's share beside the cycles already
//! run since the tick ([`crate::poll::Poller::repoll_on_line`]); otherwise the next tick
//! starts it. Neither needs a timer.
//!
//! As with the poller's check, every other interface with its link up counts as an output:
//! with two interfaces that is exact; with more, a full output holds back every input, as a
//! shared buffer would. Outputs without a line (a TAP, whose writes do not block) are not
//! waited for: a frame one refuses is dropped and counted as `tx_ring_full`, as before.

use crate::device::{Device, LinkState};
use crate::stage::PacketStage;

use super::{Dataplane, Devices, Mode};

impl<D: Device, S: PacketStage> Devices<D, S> {
    /// How many frames interrupt work on `i` may receive now: `budget`, or fewer when an
    /// output with a transmit-ready line has less room. `None` when one has no room at all:
    /// then `i` waits for that output's line.
    pub(super) fn interrupt_budget(&mut self, i: usize, budget: usize) -> Option<usize> {
        // Queued frames are sent later, by the input queue's drain, which cannot wait.
        if !self.fastforwarding {
            return Some(budget);
        }
        match self.fullest_output_besides(i, |f| f.tx_ready) {
            Some((out, 0)) => {
                self.wait_for_tx(i, out);
                None
            }
            Some((_, room)) => Some(budget.min(room)),
            None => Some(budget),
        }
    }

    /// The output that cut a poll cycle short, if it raises a transmit-ready line: the
    /// next cycle waits for it. Taken, so that it is asked of the devices only once.
    pub(super) fn full_output_with_line(&mut self) -> Option<usize> {
        let out = self.full_out.take()?;
        self.caps[out].tx_ready.then_some(out)
    }

    /// Stops interface `i`'s interrupt work until output `out` raises its line.
    fn wait_for_tx(&mut self, i: usize, out: usize) {
        let iface = &mut self.ifs[i];
        iface.tx_wait = Some(out);
        iface.counters.tx_waits += 1;
        iface.in_handler = false;
        iface.task_queued = false;
        iface.dev.set_interrupt(false);
    }

    /// Ends the wait of every interface waiting for output `out`: a handler runs again, an
    /// adaptive task is queued again, if the ring still holds frames; else the interrupt
    /// is re-armed.
    pub(super) fn release_tx_waiters(&mut self, out: usize) {
        for iface in self.ifs.iter_mut().filter(|f| f.tx_wait == Some(out)) {
            iface.tx_wait = None;
            let ready = iface.dev.rx_ready();
            match iface.mode {
                Mode::Adaptive => iface.task_queued = ready,
                Mode::Interrupt | Mode::Auto if !iface.polls() => iface.in_handler = ready,
                _ => {}
            }
            let armed = iface.interrupt_armed();
            iface.dev.set_interrupt(armed);
        }
    }
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Whether some interface's interrupt work, or the next poll cycle, waits for output
    /// `o`'s transmit-ready line: the executor watches the line only then.
    pub fn tx_ready_armed(&self, o: usize) -> bool {
        let polls_wait = self.repoll_line == Some(o) && self.devs.links[o] == LinkState::Up;
        polls_wait || self.devs.ifs.iter().any(|f| f.tx_wait == Some(o))
    }

    /// Output `o`'s transmit-ready line rose at `now`: what it held is flushed, the
    /// interrupt work that waited for it resumes, and a poll cycle that waited for it
    /// starts if it fits in the tick's share ([`crate::poll::Poller::repoll_on_line`]),
    /// else the next tick starts it. A line nobody waits for is ignored.
    pub(super) fn tx_ready(&mut self, o: usize, now: u64) {
        if !self.tx_ready_armed(o) {
            return;
        }
        let d = &mut self.devs;
        d.ifs[o].counters.tx_ready_interrupts += 1;
        d.ifs[o].dev.flush();
        d.unflushed[o] = None;
        d.release_tx_waiters(o);
        if self.repoll_line == Some(o) {
            self.repoll_line = None;
            self.poller.repoll_on_line(now);
        }
    }
}
