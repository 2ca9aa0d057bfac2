//! What an AF_XDP socket counts: its own counters, the kernel's XDP_STATISTICS, and how
//! they map to polld's drop reasons.

use std::io;

use polld_core::{HwStats, TxDrop, TxDrops};

use super::{errno, AfXdp};

/// What one socket counted itself, plus the kernel's XDP_STATISTICS for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct AfXdpStats {
    /// Frames handed to the `rx` callback, and their bytes.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames accepted by `send` and `send_loan`.
    pub tx_frames: u64,
    /// Of those, frames another member of the shared UMEM received and lent (no copy).
    pub tx_lent: u64,
    /// Sent frames whose UMEM frame the kernel gave back (completion ring).
    pub tx_completed: u64,
    /// `send` calls refused with [`TxFull`].
    pub tx_full: u64,
    /// Frames longer than a UMEM frame or than the MTU allows, dropped by `send`.
    pub tx_too_long: u64,
    /// `sendto` kicks issued because the tx ring asked for a wakeup.
    pub tx_kicks: u64,
    /// Frames the device dropped after a kick took them off the tx ring: the kick answered
    /// EBUSY (`NET_XMIT_DROP` in `__xsk_generic_xmit`, net/xdp/xsk.c; on veth, whose
    /// qdisc is `noqueue`, the peer's ring was full). Their UMEM frames complete as usual.
    pub tx_dropped: u64,
    /// `poll` calls issued because the fill ring asked for a wakeup.
    pub fill_wakeups: u64,
    /// Rx descriptors pointing outside the UMEM (a kernel bug if ever non-zero), dropped.
    pub rx_bad_descs: u64,
    /// Kernel: frames dropped because no fill-ring frame was free (copy mode), or a frame
    /// longer than a UMEM frame.
    pub rx_dropped: u64,
    /// Kernel: frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Kernel: times the kernel found the fill ring empty (each a dropped frame in copy
    /// mode; in zero-copy mode the driver tries again, so not a count of frames).
    pub fill_ring_empty: u64,
    /// Kernel: bad descriptors on the rx (fill) and tx rings.
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
}

impl AfXdp {
    /// This socket's counters, with the kernel's XDP_STATISTICS read now.
    pub fn stats(&mut self) -> io::Result<AfXdpStats> {
        let kernel = self.socket.statistics_v2().map_err(errno)?;
        self.stats.rx_dropped = kernel.rx_dropped;
        self.stats.rx_ring_full = kernel.rx_ring_full;
        self.stats.fill_ring_empty = kernel.rx_fill_ring_empty_descs;
        self.stats.rx_invalid_descs = kernel.rx_invalid_descs;
        self.stats.tx_invalid_descs = kernel.tx_invalid_descs;
        Ok(self.stats)
    }
}

impl AfXdpStats {
    /// polld's drop reasons from these counts; `link_dropped` is what the link counted as
    /// dropped on transmit since the socket opened, when it could be read.
    ///
    /// XDP_STATISTICS as net/xdp/xsk.c counts it: `rx_ring_full` is a full rx ring
    /// (`xs->rx_queue_full`); `rx_dropped` is a frame with no UMEM frame to copy it into
    /// (`xsk_buff_alloc` found the fill ring empty) or one longer than a UMEM frame, so it is
    /// [`DropReason::RxNoBuffer`](polld_core::DropReason::RxNoBuffer).
    /// `rx_fill_ring_empty_descs` counts the times the kernel found the fill ring empty, a
    /// drop in copy mode but only a delay in zero-copy mode (the driver retries): not a count
    /// of frames, so not added.
    pub(super) fn hw_stats(&self, link_dropped: Option<u64>) -> HwStats {
        let mut tx_drops = TxDrops::default();
        tx_drops.add(TxDrop::TooLong, self.tx_too_long);
        tx_drops.add(
            TxDrop::NoBufs,
            link_dropped.map_or(self.tx_dropped, |link| link.max(self.tx_dropped)),
        );
        // Descriptors the kernel found invalid were not sent.
        tx_drops.add(TxDrop::Refused, self.tx_invalid_descs);
        HwStats {
            rx_ring_full: self.rx_ring_full,
            rx_no_buffer: self.rx_dropped,
            tx_drops,
            ..HwStats::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_statistics_map_to_drop_reasons_each_under_its_own_name() {
        // A sample as read under the veth flood in copy mode: every input drop was a
        // fill-ring-empty one (rx_dropped = rx_fill_ring_empty_descs), the rx ring never full.
        let flood = AfXdpStats {
            rx_dropped: 364_027,
            fill_ring_empty: 364_027,
            rx_ring_full: 0,
            ..AfXdpStats::default()
        };
        let hw = flood.hw_stats(None);
        assert_eq!((hw.rx_no_buffer, hw.rx_ring_full), (364_027, 0));

        let both = AfXdpStats {
            rx_dropped: 5,
            fill_ring_empty: 9,
            rx_ring_full: 7,
            tx_too_long: 1,
            tx_dropped: 2,
            tx_invalid_descs: 3,
            ..AfXdpStats::default()
        };
        let hw = both.hw_stats(Some(4));
        // The empty-ring peeks are not frames: 9 is in neither count.
        assert_eq!((hw.rx_no_buffer, hw.rx_ring_full, hw.rx_fault), (5, 7, 0));
        assert_eq!(hw.tx_drops.get(TxDrop::TooLong), 1);
        assert_eq!(
            hw.tx_drops.get(TxDrop::NoBufs),
            4,
            "the link's count, larger"
        );
        assert_eq!(hw.tx_drops.get(TxDrop::Refused), 3);
        assert_eq!(both.hw_stats(None).tx_drops.get(TxDrop::NoBufs), 2);
    }
}
