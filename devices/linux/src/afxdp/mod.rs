//! The AF_XDP backend: one XDP socket per (interface, queue), with its own UMEM or one
//! shared with the sockets of the other interfaces polld forwards between ([`SharedUmem`]).
//!
//! Frames reach the socket through polld's [`RedirectProgram`], attached with a `bpf_link`
//! and shared by all queues of an interface. A socket's frames are split in two pools:
//! - receive frames circulate fill ring → kernel → rx ring → `rx` callback → fill ring.
//!   [`Device::receive`] hands frames to the callback in place, then releases the rx ring
//!   and refills the fill ring once per batch. It refills on *every* call: the baseline
//!   lost packets when a process blocked in `poll()` while the fill ring ran empty.
//! - transmit frames circulate free list → [`Device::send`] (copy) → tx ring (published in
//!   [`Device::flush`]) → kernel → completion ring → free list.
//!
//! Zero-copy is attempted first where the driver allows it ([`BindMode::Auto`]), and the
//! socket falls back to copy mode (the only mode veth offers). The XDP_USE_NEED_WAKEUP
//! protocol keeps system calls off the fast path: `flush` kicks the kernel with `sendto`
//! only when the tx ring asks for it.
//!
//! The device's *interrupt* is the socket's readiness: its fd polls readable when the rx
//! ring holds frames. Its *transmit-ready line* is the same socket's POLLOUT, through a
//! second descriptor of it ([`Capabilities::tx_ready_fd`]) so that the executor can wait for it
//! edge-triggered beside the level-triggered interrupt. `xsk_poll` (net/xdp/xsk.c) reports
//! POLLOUT while at most half the tx ring is unconsumed (`xsk_tx_writeable`), and in copy
//! mode first drives the transmission itself (`xsk_xmit`, as a `sendto` kick would). In
//! copy mode nothing but those kicks consumes the tx ring, so the ring's level says
//! nothing about the device: the event that matters is the wakeup, which comes when an skb
//! the socket sent is freed (`sock_wfree` → `sk_write_space`, once at most half the send
//! buffer is held), i.e. when veth's peer has taken frames off its full ring. In zero-copy
//! mode the driver consumes the ring and wakes the socket as it does (`xsk_tx_release`),
//! but completes the frames later without a wakeup, so there POLLOUT is no transmit-complete
//! signal and the device offers no line (interrupt work does not wait for it).
//!
//! # A shared UMEM: forwarding without a user-space copy
//!
//! Sockets opened into one [`SharedUmem`] are bound with `XDP_SHARED_UMEM` to the first
//! one's UMEM, each on its own interface and queue with its own fill and completion rings
//! (Linux ≥ 5.10: `xsk_bind` creates a buffer pool per device over the shared UMEM). Such a
//! socket offers [`Lending`]: a received frame is lent to the dataplane as its UMEM address
//! and length, rewritten in place by the stage, and another member puts that descriptor on
//! its own tx ring, with no copy in user space (on veth's copy mode the kernel still copies
//! into and out of the UMEM). The member that sent it gets the frame back on its completion
//! ring and returns it to the group's spare list; a member whose lent frames left refills
//! its fill ring from that list. Each member carves its region from the group: its
//! receive frames, its own transmit frames (for copies: frames of another pool, generated
//! ARP and ICMP), and as many spare frames again, which stand in for receive frames that
//! wait in another member's tx ring. A frame a member did not send goes back to its fill
//! ring at once ([`Lending::give_back`]). Frames in the rings of a member that is dropped
//! (an interface that went away) stay with its closed socket; a reopened interface gets a
//! UMEM of its own, and the group forwards to it by copy.
//!
//! One file per part: [`config`] (sizes and modes), [`umem`] (the memory and its
//! registration), [`shared`] (a UMEM shared by several interfaces), [`socket`] (opening and
//! binding), [`rings`] (the fill, rx, tx and completion rings), [`device`] (the
//! [`Device`] interface), [`lending`] (forwarding without a copy), [`local`] (the host's
//! addresses that `pass_local` passes to the kernel, followed as they change) and [`stats`].

use std::fmt;
use std::io;
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, RingRx, RingTx, User};

#[cfg(doc)]
use polld_core::{Device, Lending};

use crate::busy_poll::Attached;
use crate::iface::{self, IfName};
use crate::xdp::{RedirectProgram, XdpLink};

mod config;
mod device;
mod lending;
mod local;
mod rings;
mod shared;
mod socket;
mod stats;
mod umem;

pub use config::{AfXdpConfig, BindMode};
pub use shared::SharedUmem;
pub use stats::AfXdpStats;

use umem::UmemFrames;

/// The program and link shared by all sockets of one interface; detached with the last one.
#[derive(Debug)]
struct Attachment {
    /// With `pass_local`: the thread that keeps the program's addresses the host's,
    /// held to be stopped when the last socket goes.
    _local: Option<local::Follower>,
    program: RedirectProgram,
    link: XdpLink,
}

/// An AF_XDP socket on one queue of one interface, as a polld [`Device`].
pub struct AfXdp {
    name: IfName,
    ifindex: u32,
    /// The link's transmit-drop counter and its value at open. veth drops a frame its
    /// peer's full ring cannot take; a kick that took it answers EBUSY, but the transmit
    /// `xsk_poll` drives by itself in copy mode (when polld polls or waits on the socket)
    /// answers nobody, so only the link's counter sees those. None if it cannot be read,
    /// or if the link has several queues (the counter is the whole link's).
    link_drops: Option<(iface::LinkCounters, u64)>,
    queue: u32,
    zero_copy: bool,
    /// What it was opened with, to reopen it the same way.
    config: AfXdpConfig,
    // Ring handles first: they must be dropped before the memory they point into.
    rx: RingRx,
    tx: RingTx,
    /// The fill and completion rings.
    fill_completion: DeviceQueue,
    /// The bound socket, kept for XDP_STATISTICS.
    socket: User,
    /// Receive frames consumed from the rx ring and not yet back in the fill ring.
    to_fill: Vec<u64>,
    /// Transmit frames owned by user space.
    tx_free: Vec<u64>,
    /// This socket's own transmit frames; any other frame it completes is a receive frame
    /// of the shared UMEM, returned to the group's spare list.
    tx_range: Range<u64>,
    /// Descriptors queued, on the tx ring or awaiting completion: at most `tx_frames`, so
    /// neither the tx nor the completion ring overflows.
    tx_outstanding: u32,
    /// Receive frames lent and not yet replaced in `to_fill` (taken from the spare list).
    rx_owed: usize,
    /// Completed frames for the spare list, handed over once per reclaim.
    to_spare: Vec<u64>,
    /// Descriptors queued by `send`, published to the tx ring by `flush`.
    tx_queued: Vec<XdpDesc>,
    interrupt_armed: bool,
    stats: AfXdpStats,
    /// A datagram socket for interface-flag ioctls (an XDP socket does not take them).
    ioctl_socket: OwnedFd,
    /// A second descriptor of the XDP socket, waited on for POLLOUT (the transmit-ready
    /// line) apart from the socket's own, waited on for POLLIN.
    tx_ready_fd: OwnedFd,
    /// The longest frame `send` takes: the smaller of a UMEM frame and what the MTU
    /// allows (read at open and at every status check).
    max_frame: usize,
    /// Whether receive calls run the queue's NAPI poll in polld's thread.
    busy_poll: Option<Attached>,
    attachment: Arc<Attachment>,
    /// Last: its memory outlives the rings above.
    frames: Arc<UmemFrames>,
}

impl fmt::Debug for AfXdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfXdp")
            .field("ifname", &self.name.as_str())
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
            .field("shared_umem", &self.frames.shared)
            .field("xdp_mode", &self.attachment.link.mode())
            .finish_non_exhaustive()
    }
}

fn errno(e: xdpilone::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.get_raw().abs())
}
