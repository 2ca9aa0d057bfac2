//! What the poll thread does besides the dataplane's work: the slow status round (link
//! checks, the transmit-ready watchdog, hardware drops, busy-poll settings, the devices'
//! interrupt counts), its scheduling policy while interfaces busy-poll, the log of link
//! changes, and the drain at a stop.

use std::io;

use polld_core::{Event, Mode};

use super::{PollThread, RealDataplane};
use crate::sys::now_ns;

/// At a stop, how long the outputs' devices may take to make room for what polld handed
/// them (in a guest under software emulation a full virtio-net queue drains in a few ms).
const DRAIN_TX_MS: u64 = 200;

impl PollThread {
    /// Link checks for interfaces the poller does not check (all of them while polling
    /// is quiet).
    pub(super) fn status_round(&mut self, dp: &mut RealDataplane) {
        for i in 0..dp.interfaces().len() {
            if !dp.poller().is_registered(i) || dp.poller().state().quiet {
                dp.check_status(i);
                // A check may have swapped in a reopened device: wait on its fds afresh.
                self.unwatch_all(dp, i);
            }
            // The watchdog: a transmit-ready wakeup that never came does not stall the
            // interrupt work waiting for it longer than a status period.
            if dp.tx_ready_armed(i) {
                dp.tx_ready_line(i, true);
            }
        }
        dp.sync_hw_drops();
        // A copy-mode socket learns its NAPI id from its first frame.
        for busy in self.info.iter().filter_map(|i| i.rx_owner.busy_poll()) {
            busy.refresh();
        }
        self.sync_busy_poll(dp, true);
        self.device_irqs.sample(now_ns());
    }

    /// A realtime poll thread spins at `SCHED_OTHER` while some interface is busy.
    pub(super) fn sync_policy(&mut self, dp: &RealDataplane) -> io::Result<()> {
        let spin = dp.busy_polls();
        if !self.daemon.realtime || spin == self.lowered {
            return Ok(());
        }
        if spin {
            crate::sys::make_ordinary()?;
        } else {
            crate::sys::make_realtime()?;
        }
        self.lowered = spin;
        Ok(())
    }

    /// Tells each AF_XDP interface's preferred busy polling whether the interface polls
    /// (polling, busy, auto while it polls): the device's interrupt is deferred then,
    /// and back to normal otherwise. Only changes are passed on, or all of them when
    /// `again` (a reopened socket starts not polling).
    pub(super) fn sync_busy_poll(&mut self, dp: &RealDataplane, again: bool) {
        for (i, info) in self.info.iter().enumerate() {
            let Some(busy) = info.rx_owner.busy_poll() else {
                continue;
            };
            let iface = &dp.interfaces()[i];
            let polls = iface.polls() || iface.mode() == Mode::Busy;
            if again || polls != self.busy_polling[i] {
                busy.set_polling(polls);
                self.busy_polling[i] = polls;
            }
        }
    }

    pub(super) fn log_events(&mut self, dp: &mut RealDataplane) {
        for event in dp.take_events() {
            match event {
                Event::Link { ifname, state } => {
                    log::info!("{ifname}: link {}", state.name())
                }
                Event::Gone { ifname } => log::warn!(
                    "{ifname}: interface gone; handler deregistered, waiting for it to return"
                ),
            }
        }
    }

    /// At a stop signal: ends running handlers and tasks, runs the owed poll cycles, the
    /// input queue and the outputs' flush ([`polld_core::Dataplane::finish`]), then kicks
    /// the outputs until their devices took what they hold, for at most [`DRAIN_TX_MS`].
    pub(super) fn drain(&mut self, dp: &mut RealDataplane) {
        dp.finish(now_ns());
        let deadline = now_ns() + DRAIN_TX_MS * 1_000_000;
        while dp.flush_outputs() && now_ns() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        dp.sync_hw_drops();
    }
}
