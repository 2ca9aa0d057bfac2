//! The PACKET_TX_RING transmit path (TPACKET_V2 frames in a ring shared with the kernel).
//!
//! `send` copies a frame into the next free slot and marks it `TP_STATUS_SEND_REQUEST`;
//! `flush` kicks the kernel with one zero-length `sendto`, which transmits every marked
//! slot in ring order. The kernel sets a slot back to `TP_STATUS_AVAILABLE` when the
//! frame's buffer is released (after the driver is done with it), so a full ring means
//! frames still in flight.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};

use polld_core::device::TxFull;

use crate::afpacket::{page_size, set_packet_option, AfPacketConfig, RingMapping, TxStats};
use crate::error::OpenError;
use crate::iface::IfName;

/// Where frame data starts in a V2 transmit slot: right after the aligned header.
const DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();

pub(crate) struct TxRing {
    ring: RingMapping,
    block_size: usize,
    slot_size: usize,
    slots_per_block: usize,
    slot_count: usize,
    /// The next slot `send` fills.
    next: usize,
    /// The oldest slot marked for sending that we have not yet seen taken by the kernel.
    oldest_marked: usize,
    marked: usize,
    stats: TxStats,
}

impl TxRing {
    /// Sets up a TX ring of at least `tx_batch` slots on the (unbound) socket `fd`.
    pub(crate) fn open(
        fd: RawFd,
        name: &IfName,
        config: &AfPacketConfig,
    ) -> Result<TxRing, OpenError> {
        let os_error = |action, e| OpenError::from_os(name.as_str(), action, "CAP_NET_RAW", e);
        set_packet_option(
            fd,
            libc::PACKET_VERSION,
            &(libc::tpacket_versions::TPACKET_V2 as i32),
        )
        .map_err(|e| os_error("select TPACKET_V2 for the transmit ring", e))?;
        let slot_size = (config.tx_frame_size + DATA_OFFSET).next_power_of_two();
        let block_size = slot_size.max(page_size());
        let slots_per_block = block_size / slot_size;
        let block_count = config.tx_batch.div_ceil(slots_per_block);
        let slot_count = block_count * slots_per_block;
        let request = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: block_count as u32,
            tp_frame_size: slot_size as u32,
            tp_frame_nr: slot_count as u32,
        };
        let ring_error = |source| OpenError::RingAllocation {
            interface: name.as_str().to_string(),
            ring: "transmit",
            block_size,
            block_count,
            source,
        };
        set_packet_option(fd, libc::PACKET_TX_RING, &request).map_err(ring_error)?;
        let ring = RingMapping::map(fd, block_size * block_count).map_err(ring_error)?;
        Ok(TxRing {
            ring,
            block_size,
            slot_size,
            slots_per_block,
            slot_count,
            next: 0,
            oldest_marked: 0,
            marked: 0,
            stats: TxStats::default(),
        })
    }

    fn slot(&self, index: usize) -> *mut u8 {
        let offset = (index / self.slots_per_block) * self.block_size
            + (index % self.slots_per_block) * self.slot_size;
        self.ring.at(offset)
    }

    fn status(&self, index: usize) -> &AtomicU32 {
        let header = self.slot(index).cast::<libc::tpacket2_hdr>();
        // SAFETY: tp_status is an aligned u32 in the mapping, shared with the kernel and
        // only accessed atomically.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*header).tp_status)) }
    }

    pub(crate) fn stats(&self) -> TxStats {
        TxStats {
            pending: self.marked as u64,
            ..self.stats
        }
    }

    pub(crate) fn stage(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if frame.len() > self.slot_size - DATA_OFFSET {
            self.stats.dropped += 1;
            return Ok(());
        }
        self.reap();
        if self.status(self.next).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
            return Err(TxFull);
        }
        let slot = self.slot(self.next);
        // SAFETY: the slot is ours while AVAILABLE; the frame fits behind the header.
        unsafe {
            std::ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(DATA_OFFSET), frame.len());
            let header = &mut *slot.cast::<libc::tpacket2_hdr>();
            header.tp_len = frame.len() as u32;
        }
        // Release: the frame bytes are visible before the kernel sees the request.
        self.status(self.next)
            .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.next = (self.next + 1) % self.slot_count;
        self.marked += 1;
        Ok(())
    }

    /// Counts marked slots the kernel has taken since the last look.
    fn reap(&mut self) {
        while self.marked > 0 {
            match self.status(self.oldest_marked).load(Ordering::Acquire) {
                libc::TP_STATUS_SEND_REQUEST => break,
                libc::TP_STATUS_WRONG_FORMAT => {
                    self.stats.dropped += 1;
                    self.status(self.oldest_marked)
                        .store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
                }
                _ => self.stats.sent += 1,
            }
            self.oldest_marked = (self.oldest_marked + 1) % self.slot_count;
            self.marked -= 1;
        }
    }

    /// Kicks the kernel to transmit every marked slot.
    pub(crate) fn push(&mut self, fd: RawFd) {
        if self.marked == 0 {
            return;
        }
        // SAFETY: a zero-length send on our socket; the kernel reads the ring.
        let rc = unsafe {
            libc::sendto(
                fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => self.stats.pushbacks += 1,
                _ => self.stats.dropped += 1,
            }
        }
        self.reap();
    }
}
