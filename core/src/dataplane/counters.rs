//! The per-interface counters and the conservation rule they obey.

use crate::device::TxDrops;
use crate::stage::DropCounters;

/// Per-interface counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IfCounters {
    /// Interrupts (wakeups) taken.
    pub interrupts: u64,
    /// Poll handler calls (scheduler, idle and busy polls).
    pub polls: u64,
    /// Poll calls that found nothing.
    pub empty_polls: u64,
    /// Adaptive-mode task runs.
    pub tasks: u64,
    /// Auto mode: switches between interrupts and polling, either way.
    pub auto_switches: u64,
    /// Frames received from the device.
    pub rx_packets: u64,
    /// Frames handed to this device for transmission (accepted by its `send`).
    pub tx_packets: u64,
    /// Of those, frames the device dropped afterwards, by reason.
    pub tx_drops: TxDrops,
    /// Frames received here and transmitted on another interface.
    pub forwarded: u64,
    /// Frames received here for the box itself.
    pub local: u64,
    /// Frames received here and used up by polld (ARP).
    pub consumed: u64,
    /// Frames polld generated and sent here (ARP, ICMP).
    pub generated: u64,
    /// Generated frames that found the transmit ring full.
    pub generated_dropped: u64,
    /// Frames received here now waiting in the IP input queue.
    pub queued: u64,
    /// Drops of frames received here, by reason (rx_ring_full, fault_injected: dropped by
    /// the device before it handed them up).
    pub drops: DropCounters,
}

impl IfCounters {
    /// Frames received but not in any outcome counter: zero unless a frame was lost.
    pub fn unaccounted(&self) -> i64 {
        self.rx_packets as i64
            - (self.forwarded + self.local + self.consumed + self.queued) as i64
            - self.drops.after_rx() as i64
    }
}
