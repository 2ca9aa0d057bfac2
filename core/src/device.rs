//! The device interface: what the scheduler and the interface modes need from a NIC.
//!
//! Every backend implements [`Device`]: the simulated NIC on virtual time, AF_PACKET
//! (TPACKET_V3), AF_XDP and TAP. The trait mirrors what a FreeBSD driver offers
//! `kern_poll`: receive at most `count` frames (`*_poll`), a status check
//! (`POLL_AND_CHECK_STATUS`), transmit, and an interrupt that can be masked.
//!
//! On Linux user space an *interrupt* is a readiness notification (epoll on the ring's fd,
//! the AF_XDP need_wakeup protocol, an eventfd); *masking* it means not waiting on it.

use std::os::fd::RawFd;

use crate::stage::{Counts, Reason};

/// Link state reported by a status check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub enum LinkState {
    #[default]
    Up,
    /// Administratively or physically down: the handler skips work (FreeBSD's !RUNNING).
    Down,
    /// The interface no longer exists; the dataplane deregisters it.
    Gone,
}

impl LinkState {
    pub const ALL: [LinkState; 3] = [LinkState::Up, LinkState::Down, LinkState::Gone];

    /// The name `dev.<if>.link` shows: `up`, `down` or `gone`.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Gone => "gone",
        }
    }
}

/// The transmit ring had no free slot for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFull;

/// Why a device dropped a frame that [`Device::send`] had accepted. A transmit drop the
/// device discovers later (at [`Device::flush`], or in the kernel) cannot be charged to
/// the frame's input interface, so it is counted on the output interface by this reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum TxDrop {
    /// Longer than the device's transmit frame (AF_PACKET slot, AF_XDP UMEM frame, MTU).
    TooLong,
    /// The kernel had no buffer for it (ENOBUFS: a full driver queue).
    NoBufs,
    /// The kernel refused it for another reason (ENETDOWN, EMSGSIZE, EIO, ...).
    Refused,
    /// A fault injector failed it on purpose (a test tool).
    Fault,
}

impl TxDrop {
    /// Every reason, in counter order.
    pub const ALL: [TxDrop; 4] = [
        TxDrop::TooLong,
        TxDrop::NoBufs,
        TxDrop::Refused,
        TxDrop::Fault,
    ];

    /// The counter name: `dev.<if>.tx_drops.<name>`.
    pub fn name(self) -> &'static str {
        match self {
            TxDrop::TooLong => "too_long",
            TxDrop::NoBufs => "nobufs",
            TxDrop::Refused => "refused",
            TxDrop::Fault => "fault",
        }
    }
}

impl Reason for TxDrop {
    const ALL: &'static [TxDrop] = &TxDrop::ALL;
    fn name(self) -> &'static str {
        TxDrop::name(self)
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Transmit drops, one counter per [`TxDrop`].
pub type TxDrops = Counts<TxDrop, { TxDrop::ALL.len() }>;

/// Counters the device itself keeps, outside polld's view (kernel or hardware drops).
/// Every field is a running total since the device was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HwStats {
    /// Frames the device dropped because its receive ring was full.
    pub rx_ring_full: u64,
    /// Received frames a fault injector dropped before handing them up (a test tool).
    pub rx_fault: u64,
    /// Frames `send` accepted and the device then dropped, by reason.
    pub tx_drops: TxDrops,
}

/// A network device as the polling scheduler sees it.
///
/// The contract follows FreeBSD's em/fxp poll handlers: `receive` processes at most
/// `budget` frames and its cost should be about linear in the number it returns;
/// the ring's consumer index is published once per call, not per frame.
pub trait Device {
    /// The interface name (`veth1`, `sim0`).
    fn name(&self) -> &str;

    /// Hands up to `budget` received frames to `rx`, in arrival order, and returns how
    /// many it handed. `rx` may rewrite a frame in place (TTL, checksum, MACs).
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize;

    /// Whether received frames are waiting. Cheap: no system call where the ring
    /// is shared memory.
    fn rx_ready(&mut self) -> bool;

    /// Copies `frame` into the transmit ring, or reports that the ring is full. A frame
    /// accepted here and dropped later (too long, refused by the kernel) is counted in
    /// [`HwStats::tx_drops`], never lost silently.
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull>;

    /// Frames the device can usefully take now, as far as it knows (reclaiming completed
    /// ones first): what `send` would accept, or 0 while frames it already holds wait on
    /// the kernel (an AF_XDP ring the kernel refused), so the scheduler stops the input
    /// instead of queueing more behind them; `usize::MAX` if it cannot tell.
    fn tx_room(&mut self) -> usize {
        usize::MAX
    }

    /// Pushes queued transmit frames out (a kick) and reclaims completed ones. The
    /// dataplane calls it once [`Device::tx_batch`] frames wait, and when its work is done
    /// (the poll cycle closed, the handler returned) for what is left.
    fn flush(&mut self);

    /// The most frames one [`Device::flush`] pushes out at once: what one kick sends (an
    /// AF_XDP `sendto` in copy mode sends at most the socket's TX budget, an AF_PACKET
    /// `sendmmsg` its batch). The dataplane flushes an output as soon as this many frames
    /// wait on it, so each kick goes out full instead of one per receive chunk. The
    /// default, no limit, flushes only when the work is done.
    fn tx_batch(&self) -> usize {
        usize::MAX
    }

    /// The periodic status check (`POLL_AND_CHECK_STATUS` every `reg_frac` cycles).
    fn check_status(&mut self) -> LinkState;

    /// Arms (`true`) or masks (`false`) the device's interrupt.
    fn set_interrupt(&mut self, armed: bool);

    /// The file descriptor whose readiness is this device's interrupt, if it has one.
    fn interrupt_fd(&self) -> Option<RawFd> {
        None
    }

    /// Drops the device counted itself.
    fn hw_stats(&mut self) -> HwStats {
        HwStats::default()
    }
}

/// A boxed device is a device, so one dataplane can mix backends (`Box<dyn Device>`).
impl<T: Device + ?Sized> Device for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        (**self).receive(budget, rx)
    }
    fn rx_ready(&mut self) -> bool {
        (**self).rx_ready()
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        (**self).send(frame)
    }
    fn tx_room(&mut self) -> usize {
        (**self).tx_room()
    }
    fn flush(&mut self) {
        (**self).flush()
    }
    fn tx_batch(&self) -> usize {
        (**self).tx_batch()
    }
    fn check_status(&mut self) -> LinkState {
        (**self).check_status()
    }
    fn set_interrupt(&mut self, armed: bool) {
        (**self).set_interrupt(armed)
    }
    fn interrupt_fd(&self) -> Option<RawFd> {
        (**self).interrupt_fd()
    }
    fn hw_stats(&mut self) -> HwStats {
        (**self).hw_stats()
    }
}
