//! The per-interface counters and the conservation rule they obey.

use crate::device::TxDrops;
use crate::stage::{DropCounters, DropReason};
use crate::sysctl::Oid;
use crate::sysctl_struct;

sysctl_struct! {
    /// Per-interface counters (`dev.<if>.*`), each declared once; the drops by reason are
    /// listed by the sysctl tree, one entry per reason.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
    pub struct IfCounters {
        /// Interrupts (wakeups) taken.
        interrupts: u64 = 0, INTERRUPTS: Counter "Interrupts (wakeups) taken";
        /// Poll handler calls (scheduler, idle and busy polls).
        polls: u64 = 0, POLLS: Counter "Poll handler calls";
        /// Poll calls that found nothing.
        empty_polls: u64 = 0, EMPTY_POLLS: Counter "Poll calls that found nothing";
        /// Adaptive-mode task runs.
        tasks: u64 = 0, TASKS: Counter "Adaptive task runs";
        /// Times interrupt work on this interface stopped because an output was full, to
        /// wait for that output's transmit-ready line (the frames stay in the ring).
        tx_waits: u64 = 0, TX_WAITS: Counter
            "Times interrupt work stopped on a full output to wait for it";
        /// Transmit-ready interrupts taken: this output's line rose while interrupt work,
        /// or a poll cycle cut short by it, waited for it (or the status timer's watchdog
        /// raised it, at most once a status period).
        tx_ready_interrupts: u64 = 0, TX_READY_INTERRUPTS: Counter
            "Transmit-ready interrupts taken as an output (the status timer's included)";
        /// Auto mode: switches between interrupts and polling, either way.
        auto_switches: u64 = 0, AUTO_SWITCHES: Counter
            "Auto mode: switches between interrupts and polling";
        /// Frames the wakeup watchdog found in the ring and served, the device having
        /// raised no wakeup for them (`kern.polling.wakeup_watchdog_ms`).
        watchdog_frames: u64 = 0, WATCHDOG_FRAMES: Counter "Frames found by the watchdog";
        /// Frames received from the device.
        rx_packets: u64 = 0, RX_PACKETS: Counter "Frames received";
        /// Bytes of those frames, each as long as the device handed it up. Not part of
        /// conservation.
        rx_bytes: u64 = 0, RX_BYTES: Counter "Bytes of the frames received";
        /// Frames handed to this device for transmission (accepted by its `send`).
        tx_packets: u64 = 0, TX_PACKETS: Counter "Frames transmitted";
        /// Bytes of those frames, each as long as it was handed to the device.
        tx_bytes: u64 = 0, TX_BYTES: Counter "Bytes of the frames transmitted";
        /// Of those, frames the device dropped afterwards, by reason.
        tx_drops: TxDrops = TxDrops::default();
        /// Frames received here and transmitted on another interface.
        forwarded: u64 = 0, FORWARDED: Counter "Frames received here and forwarded";
        /// Of those, frames the output sent from this interface's receive buffer, without
        /// a copy (a shared AF_XDP UMEM, [`crate::device::Lending`]).
        lent: u64 = 0, LENT: Counter "Of the forwarded frames, those sent without a copy (shared UMEM)";
        /// Frames received here for the box itself.
        local: u64 = 0, LOCAL: Counter "Frames received here for the box";
        /// Frames received here and used up by polld (ARP).
        consumed: u64 = 0, CONSUMED: Counter "Frames used up by polld (ARP)";
        /// Frames received here and handed to the kernel, which forwards them (a route
        /// out of an interface polld does not poll, a next hop the kernel is resolving).
        to_kernel: u64 = 0, TO_KERNEL: Counter "Frames received here and handed to the kernel to forward";
        /// Frames polld generated and sent here (ARP, ICMP).
        generated: u64 = 0, GENERATED: Counter "Frames polld generated here (ARP, ICMP)";
        /// Generated frames that found the transmit ring full.
        generated_dropped: u64 = 0, GENERATED_DROPPED: Counter
            "Generated frames dropped, tx ring full";
        /// Frames received here now waiting in the IP input queue.
        queued: u64 = 0, QUEUED: Gauge "Frames received here waiting in the input queue";
        /// Drops of frames received here, by reason (rx_ring_full, rx_no_buffer,
        /// fault_injected: dropped by the device before it handed them up).
        drops: DropCounters = DropCounters::default();
    }
}

impl IfCounters {
    /// Counts a frame of `len` bytes the device handed up.
    pub(crate) fn count_rx(&mut self, len: usize) {
        self.rx_packets += 1;
        self.rx_bytes += len as u64;
    }

    /// Counts a frame of `len` bytes the device took for transmission.
    pub(crate) fn count_tx(&mut self, len: usize) {
        self.tx_packets += 1;
        self.tx_bytes += len as u64;
    }

    /// Adds `other`'s counters: the totals of an interface polled as several queues.
    pub fn add(&mut self, other: &IfCounters) {
        // Destructured, so that a new counter cannot be left out.
        let IfCounters {
            interrupts,
            polls,
            empty_polls,
            tasks,
            tx_waits,
            tx_ready_interrupts,
            auto_switches,
            watchdog_frames,
            rx_packets,
            rx_bytes,
            tx_packets,
            tx_bytes,
            tx_drops,
            forwarded,
            lent,
            local,
            consumed,
            to_kernel,
            generated,
            generated_dropped,
            queued,
            drops,
        } = other;
        self.interrupts += interrupts;
        self.polls += polls;
        self.empty_polls += empty_polls;
        self.tasks += tasks;
        self.tx_waits += tx_waits;
        self.tx_ready_interrupts += tx_ready_interrupts;
        self.auto_switches += auto_switches;
        self.watchdog_frames += watchdog_frames;
        self.rx_packets += rx_packets;
        self.rx_bytes += rx_bytes;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        self.tx_drops.add_all(tx_drops);
        self.forwarded += forwarded;
        self.lent += lent;
        self.local += local;
        self.consumed += consumed;
        self.to_kernel += to_kernel;
        self.generated += generated;
        self.generated_dropped += generated_dropped;
        self.queued += queued;
        self.drops.add_all(drops);
    }

    /// What a received frame ends as when it is not dropped: with the drops after rx
    /// ([`DropCounters::after_rx`]), these add up to `rx_packets`.
    const OUTCOMES: [Oid<IfCounters>; 5] = [
        IfCounters::FORWARDED,
        IfCounters::LOCAL,
        IfCounters::CONSUMED,
        IfCounters::TO_KERNEL,
        IfCounters::QUEUED,
    ];

    /// Frames received but not in any outcome counter: zero unless a frame was lost.
    pub fn unaccounted(&self) -> i64 {
        let outcomes = IfCounters::OUTCOMES
            .iter()
            .map(|oid| (oid.get)(self).int().unwrap_or(0))
            .sum::<i64>();
        balance(self.rx_packets, outcomes as u64, self.drops.after_rx())
    }

    /// [`IfCounters::unaccounted`] on one interface's counters by name, as `polld ctl` and
    /// `polld run --json` list them: the drops are `drops.<reason>`
    /// ([`DropReason::is_drop_after_rx`]), a counter not listed is 0.
    pub fn unaccounted_named<'a>(counters: impl IntoIterator<Item = (&'a str, u64)>) -> i64 {
        let (mut rx, mut outcomes, mut drops) = (0, 0, 0);
        for (name, n) in counters {
            if name == IfCounters::RX_PACKETS.name {
                rx += n;
            } else if IfCounters::OUTCOMES.iter().any(|oid| oid.name == name) {
                outcomes += n;
            } else if DropReason::is_drop_after_rx(name) {
                drops += n;
            }
        }
        balance(rx, outcomes, drops)
    }
}

/// The conservation rule: every frame received is in an outcome counter or dropped after
/// rx; the difference is what was lost (or counted twice, negative).
fn balance(rx: u64, outcomes: u64, drops_after_rx: u64) -> i64 {
    rx as i64 - outcomes as i64 - drops_after_rx as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_the_same_on_the_struct_and_on_counters_by_name() {
        let mut c = IfCounters {
            rx_packets: 11,
            forwarded: 4,
            local: 1,
            consumed: 1,
            to_kernel: 1,
            queued: 1,
            ..IfCounters::default()
        };
        c.drops.add(DropReason::IntrQueueFull, 2);
        // Dropped by the device before it handed them up: never in rx_packets.
        c.drops.add(DropReason::RxRingFull, 5);
        let named = [
            ("rx_packets", 11),
            ("tx_packets", 9),
            ("forwarded", 4),
            ("lent", 4),
            ("local", 1),
            ("consumed", 1),
            ("to_kernel", 1),
            ("queued", 1),
            ("drops.intr_queue_full", 2),
            ("drops.rx_ring_full", 5),
        ];
        assert_eq!(c.unaccounted(), 1);
        assert_eq!(IfCounters::unaccounted_named(named), 1);
        c.drops.add(DropReason::IntrQueueFull, 1);
        assert_eq!(c.unaccounted(), 0);
        let named = named.map(|(k, v)| (k, if k == "drops.intr_queue_full" { 3 } else { v }));
        assert_eq!(IfCounters::unaccounted_named(named), 0);
    }
}
