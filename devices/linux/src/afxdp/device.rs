//! An AF_XDP socket as a polld [`Device`]: receive, send, flush, the status check, its
//! capabilities (interrupt, transmit-ready line, kick size, pool).

use std::os::fd::AsFd;

use polld_core::{Capabilities, Device, HwStats, Lending, LinkState, TxFull, TxReadyLine};

use super::rings::KICK_BUDGET;
use super::AfXdp;
use crate::busy_poll::{Attached, BusyPoll};
use crate::iface;
use crate::xdp::XdpMode;

impl AfXdp {
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket shares frames with the driver (zero-copy) rather than copying.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The socket's preferred busy polling, if asked for.
    pub fn busy_poll(&self) -> Option<&BusyPoll> {
        self.busy_poll.as_ref().map(Attached::busy_poll)
    }

    /// Where the redirect program runs: native or generic XDP.
    pub fn xdp_mode(&self) -> XdpMode {
        self.attachment.link.mode()
    }

    /// Whether this socket shares its UMEM with other interfaces' sockets.
    pub fn shares_umem(&self) -> bool {
        self.frames.shared
    }

    /// Bounds `send` by the interface's MTU: the kernel drops a longer frame after
    /// completing its descriptor, and counts it nowhere this socket can read.
    pub(super) fn read_mtu(&mut self) {
        let umem_frame = self.config.frame_size as usize;
        self.max_frame = match iface::mtu_on(self.ioctl_socket.as_fd(), &self.name) {
            Some(mtu) => iface::max_frame(mtu).min(umem_frame),
            None => umem_frame,
        };
    }
}

impl Device for AfXdp {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The interrupt is the socket's readability. The transmit-ready line, in copy mode
    /// only, is its writability through a second descriptor, and only a wakeup is a rise:
    /// the socket polls writable while its tx ring is at most half full, which in copy mode
    /// says nothing about the device (see the module's header). The batch is what one kick
    /// sends, so that each `sendto` carries a full budget. The pool, on a shared UMEM.
    fn capabilities(&self) -> Capabilities<'_> {
        let mut caps = Capabilities::new()
            .with_interrupt_fd(self.socket_fd())
            .with_tx_batch(KICK_BUDGET);
        if !self.zero_copy {
            caps = caps.with_tx_ready(TxReadyLine::WakeupOnly(self.tx_ready_fd.as_fd()));
        }
        if self.frames.shared {
            caps = caps.with_pool(self.frames.pool);
        }
        caps
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        self.receive_frames(budget, &mut |frame, _| {
            rx(frame);
            false
        })
    }

    fn rx_ready(&mut self) -> bool {
        self.rx.available() > 0
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if frame.len() > self.max_frame {
            self.stats.tx_too_long += 1;
            return Ok(());
        }
        if self.tx_free.is_empty() {
            self.reclaim();
        }
        let addr = match self.tx_free.pop() {
            Some(addr) if self.tx_slot_free() => addr,
            popped => {
                self.tx_free.extend(popped);
                self.stats.tx_full += 1;
                return Err(TxFull);
            }
        };
        // SAFETY: `addr` came from the free list, so neither the kernel nor a queued
        // descriptor uses this frame; it lies inside the UMEM by construction.
        let buf = unsafe { self.frames.area.frame_mut(addr, frame.len()) }
            .expect("transmit frames lie inside the UMEM");
        buf.copy_from_slice(frame);
        self.queue_tx(addr, frame.len());
        Ok(())
    }

    /// Free transmit frames, or 0 while the kernel refuses what the tx ring holds. In copy
    /// mode a kick sends synchronously until the device pushes back (on veth: the peer's
    /// ring is full until its NAPI thread runs), so descriptors still on the ring after a
    /// kick wait for that. Frames polled meanwhile would only deepen a queue that no tick
    /// bounds (TCP filled it to 1,900 frames, 30 ms, at hz 1000); at 0 the scheduler
    /// stops the input and repolls once the output drains.
    fn tx_room(&mut self) -> usize {
        self.reclaim();
        if !self.zero_copy && self.tx.needs_wakeup() && self.tx.pending() > 0 {
            self.kick_tx();
            if self.tx.pending() > 0 {
                return 0;
            }
        }
        let slots = (self.config.tx_frames - self.tx_outstanding) as usize;
        slots.min(self.tx_free.len())
    }

    fn flush(&mut self) {
        self.publish_tx();
        self.kick_tx();
        self.reclaim();
    }

    /// Reads the link flags. A deleted interface is `Gone`, and so is one recreated under
    /// the same name: this socket is bound to the old one. Reopening (program, UMEM,
    /// socket, bind retries) is too slow for a status check on the poll thread: the
    /// caller opens a new device elsewhere and swaps it in.
    fn check_status(&mut self) -> LinkState {
        // Both ioctls go through a socket of the device's namespace, whatever namespace
        // the calling thread is in.
        match iface::index(self.ioctl_socket.as_fd(), &self.name) {
            Some(index) if index == self.ifindex => {
                self.read_mtu();
                iface::link_state(self.ioctl_socket.as_fd(), &self.name)
            }
            _ => LinkState::Gone,
        }
    }

    fn set_interrupt(&mut self, armed: bool) {
        // Before sleeping on the fd, make sure the kernel has frames to receive into.
        if armed && !self.interrupt_armed {
            self.refill();
        }
        self.interrupt_armed = armed;
    }

    fn lending(&mut self) -> Option<&mut dyn Lending> {
        if self.frames.shared {
            Some(self)
        } else {
            None
        }
    }

    fn hw_stats(&mut self) -> HwStats {
        // Should the kernel refuse XDP_STATISTICS, the last counts read still hold.
        let stats = self.stats().unwrap_or(self.stats);
        // Dropped by the device after the kernel took them (its queue was full): the link
        // counts every one, the kicks' EBUSY only some.
        let link_dropped = self.link_drops.as_mut().and_then(|(counters, at_open)| {
            counters
                .tx_dropped()
                .ok()
                .map(|now| now.saturating_sub(*at_open))
        });
        stats.hw_stats(link_dropped)
    }
}
