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

use std::ffi::CString;
use std::net::Ipv4Addr;
use std::num::NonZeroU32;
use std::ops::Range;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::{fmt, io};

use polld_core::{
    Capabilities, Device, HwStats, Lending, LinkState, Loan, PoolId, TxDrop, TxDrops, TxFull,
    TxReadyLine,
};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::busy_poll::{Attached, BusyPoll};
use crate::iface::{self, IfName};
use crate::xdp::{self, RedirectProgram, XdpError, XdpLink, XdpMode};

/// Descriptors one `sendto` kick sends in copy mode: the kernel's budget per call
/// (`TX_BATCH_SIZE` in `__xsk_generic_xmit`, net/xdp/xsk.c; a socket may raise it with
/// `XDP_MAX_TX_SKB_BUDGET` since Linux 6.17). The call answers EAGAIN when the budget runs
/// out with descriptors left, and stops early when the device pushes back (veth: the peer's
/// ring is full).
const KICK_BUDGET: usize = 32;

/// Received descriptors read off the rx ring before their frames are processed, so that
/// the frames' first cache lines load together.
const PREFETCH_BATCH: usize = 32;

/// Whether the socket shares frames with the driver (zero-copy) or the kernel copies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BindMode {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail with [`XdpError::ZeroCopyUnsupported`].
    ZeroCopy,
    /// Copy mode even where zero-copy would work.
    Copy,
}

/// Sizes and modes of an AF_XDP socket.
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    /// Bytes per UMEM frame: 2048 or 4096. In copy mode the kernel reserves the first 256
    /// bytes of a receive frame as XDP headroom, so 2048 carries frames up to 1792 bytes.
    pub frame_size: u32,
    /// Receive frames; also the size of the fill and rx rings. A power of two.
    pub rx_frames: u32,
    /// Transmit frames; also the size of the tx and completion rings. A power of two.
    pub tx_frames: u32,
    /// Where the redirect program runs.
    pub xdp_mode: XdpMode,
    pub bind_mode: BindMode,
    /// IPv4 packets and ARP addressed to the host's own IPv4 addresses (as configured when
    /// the socket opens) go to the kernel instead of the socket, so the host stays
    /// reachable on the interface. Everything else, IPv6 included, goes to the socket.
    pub pass_local: bool,
    /// Preferred busy polling where the socket's queue has a NAPI id (see
    /// [`crate::busy_poll`]), the socket of the `k`-th queue opened attached to
    /// [`BusyPoll::queue`]`(k)`; `None` leaves the receive work where the kernel puts it.
    pub busy_poll: Option<BusyPoll>,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
            xdp_mode: XdpMode::Auto,
            bind_mode: BindMode::Auto,
            pass_local: false,
            busy_poll: None,
        }
    }
}

impl AfXdpConfig {
    fn validate(&self) -> xdp::Result<()> {
        let bad = |what: String| {
            Err(XdpError::Os {
                action: "checking the AF_XDP configuration".into(),
                source: io::Error::new(io::ErrorKind::InvalidInput, what),
            })
        };
        if !matches!(self.frame_size, 2048 | 4096) {
            return bad(format!(
                "frame size {} must be 2048 or 4096 bytes",
                self.frame_size
            ));
        }
        for (name, frames) in [("rx", self.rx_frames), ("tx", self.tx_frames)] {
            if !frames.is_power_of_two() || !(64..=1 << 16).contains(&frames) {
                return bad(format!(
                    "{name} frame count {frames} must be a power of two from 64 to 65536"
                ));
            }
        }
        Ok(())
    }
}

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

/// The program and link shared by all sockets of one interface; detached with the last one.
#[derive(Debug)]
struct Attachment {
    program: RedirectProgram,
    link: XdpLink,
}

/// Anonymous memory backing a UMEM, unmapped on drop.
struct UmemArea {
    /// The mapping as made (unmapped on drop).
    map: NonNull<u8>,
    map_len: usize,
    /// The UMEM inside it: `len` bytes from `base`, aligned to a huge page.
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by one `UmemFrames`; each of its frames belongs to exactly
// one party at a time (a socket's lists, a ring, the kernel, the spare list), and only the
// party that owns a frame touches its bytes.
unsafe impl Send for UmemArea {}
// SAFETY: as above: shared references only hand out frames their caller owns.
unsafe impl Sync for UmemArea {}

/// Transparent huge pages on x86-64.
const HUGE_PAGE: usize = 2 << 20;

impl UmemArea {
    /// Maps `len` bytes aligned to a huge page and asks for transparent huge pages. Frames
    /// lie 2 or 4 KiB apart, so with 4 KiB pages a batch of frames touches as many pages
    /// (each TLB miss a two-level page walk in a guest); with 2 MiB ones the default 8 MiB
    /// UMEM takes four entries. Without THP (`never`, or no huge page free) the advice is
    /// ignored and the area is made of small pages, as before.
    fn new(len: usize) -> io::Result<UmemArea> {
        let map_len = len + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(ptr.cast::<u8>()).expect("mmap never returns NULL on success");
        let skip = (HUGE_PAGE - map.as_ptr() as usize % HUGE_PAGE) % HUGE_PAGE;
        // SAFETY: `skip` < HUGE_PAGE, and the mapping is `len + HUGE_PAGE` long.
        let base = unsafe { map.add(skip) };
        let area = UmemArea {
            map,
            map_len,
            base,
            len,
        };
        // SAFETY: advice on our own fresh mapping, then writing its bytes (`len` from
        // `base` lie inside it). MADV_HUGEPAGE failing (THP compiled out) only leaves small
        // pages. The pages are faulted in now, as MAP_POPULATE did, by a write where
        // MADV_POPULATE_WRITE is older than the kernel.
        unsafe {
            libc::madvise(base.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
            if libc::madvise(base.as_ptr().cast(), len, libc::MADV_POPULATE_WRITE) != 0 {
                std::ptr::write_bytes(base.as_ptr(), 0, len);
            }
        }
        Ok(area)
    }

    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.base, self.len)
    }

    /// Asks the CPU to start loading the cache line at `addr` (a hint: an address outside
    /// the UMEM is ignored, and nothing is read or written).
    fn prefetch(&self, addr: u64) {
        match usize::try_from(addr) {
            Ok(offset) if offset < self.len => {
                // `wrapping_add` stays in bounds here and needs no unsafe; a prefetch
                // never faults.
                crate::prefetch::read(self.base.as_ptr().wrapping_add(offset));
            }
            _ => {}
        }
    }

    /// The bytes `[addr, addr + len)` of the UMEM, or `None` if they do not fit.
    ///
    /// # Safety
    /// No other live reference may cover these bytes, and the kernel must not own the frame
    /// (it is in the rx ring, or in the free list of transmit frames): the caller owns it.
    #[allow(clippy::mut_from_ref)]
    unsafe fn frame_mut(&self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked above); exclusivity is the caller's promise.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(start), len) })
    }
}

impl Drop for UmemArea {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; the rings that referenced it
        // were dropped before (field order in `AfXdp`, the last member of a shared UMEM).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

/// Distinguishes the UMEMs of this process, as the pools devices lend frames from.
static NEXT_POOL: AtomicU64 = AtomicU64::new(1);

/// xdpilone's handle of a registered UMEM, kept to bind more sockets to it.
struct Registration(Umem);

// SAFETY: the handle holds the address of the area `UmemFrames` owns and the UMEM socket's
// fd; it is used only under the group's mutex, to create and bind sockets.
unsafe impl Send for Registration {}

/// One UMEM: its memory, its registration with the kernel (made when the first socket
/// binds, in that socket's namespace), and for a shared one the frames its members hand
/// each other.
struct UmemFrames {
    pool: PoolId,
    /// Whether the members lend frames to each other ([`SharedUmem`]).
    shared: bool,
    /// Frame size and ring sizes, the same for every member.
    sizes: AfXdpConfig,
    /// Sockets it has room for.
    members: u32,
    group: Mutex<Group>,
    // Last: unmapped after the registration above lets go of it.
    area: UmemArea,
}

/// What the members of one UMEM share, behind its mutex.
struct Group {
    registration: Option<Registration>,
    joined: u32,
    /// Receive frames the member that sent them returned, for any member's fill ring.
    spare: Vec<u64>,
}

impl UmemFrames {
    fn new(members: u32, shared: bool, sizes: &AfXdpConfig) -> xdp::Result<Arc<UmemFrames>> {
        sizes.validate()?;
        let len = members as usize
            * Self::frames_per_member(shared, sizes) as usize
            * sizes.frame_size as usize;
        let area = UmemArea::new(len)
            .map_err(|e| XdpError::os(format!("allocating an AF_XDP UMEM of {len} bytes"), e))?;
        Ok(Arc::new(UmemFrames {
            pool: PoolId(NEXT_POOL.fetch_add(1, Ordering::Relaxed)),
            shared,
            sizes: sizes.clone(),
            members,
            group: Mutex::new(Group {
                registration: None,
                joined: 0,
                spare: Vec::new(),
            }),
            area,
        }))
    }

    /// Receive frames, own transmit frames, and in a shared UMEM as many spare frames.
    fn frames_per_member(shared: bool, sizes: &AfXdpConfig) -> u32 {
        sizes.rx_frames + sizes.tx_frames * if shared { 2 } else { 1 }
    }

    fn group(&self) -> std::sync::MutexGuard<'_, Group> {
        // Nothing panics while holding it; a poisoned lock still holds consistent lists.
        self.group.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Member `index`'s receive frames and transmit frames (addresses), and its spare ones.
    fn region(&self, index: u32) -> (Vec<u64>, Range<u64>, Range<u64>) {
        let (rx, tx) = (
            u64::from(self.sizes.rx_frames),
            u64::from(self.sizes.tx_frames),
        );
        let size = u64::from(self.sizes.frame_size);
        let first = u64::from(index) * u64::from(Self::frames_per_member(self.shared, &self.sizes));
        let at = |frame: u64| frame * size;
        let receive = (first..first + rx).map(at).collect();
        let transmit = at(first + rx)..at(first + rx + tx);
        let spare = if self.shared {
            at(first + rx + tx)..at(first + rx + 2 * tx)
        } else {
            0..0
        };
        (receive, transmit, spare)
    }
}

/// A UMEM the AF_XDP sockets of several interfaces share, so that a frame received on one
/// leaves on another without a copy in user space (see the module doc). Open its members
/// with [`AfXdp::open_shared`]; they must be polled by one thread (one dataplane).
#[derive(Clone)]
pub struct SharedUmem(Arc<UmemFrames>);

impl SharedUmem {
    /// Memory for `members` sockets of `config`'s frame and ring sizes; the kernel
    /// registers it when the first member binds.
    pub fn new(members: u32, config: &AfXdpConfig) -> xdp::Result<SharedUmem> {
        UmemFrames::new(members.max(1), true, config).map(SharedUmem)
    }

    /// The pool its members lend from.
    pub fn pool(&self) -> PoolId {
        self.0.pool
    }
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

impl AfXdp {
    /// Opens an AF_XDP socket on `queue` of `ifname` and attaches polld's redirect program
    /// to the interface (detached again when the socket is dropped).
    pub fn open(ifname: &str, queue: u32, config: &AfXdpConfig) -> xdp::Result<AfXdp> {
        let mut sockets = AfXdp::open_queues(ifname, &[queue], config)?;
        Ok(sockets.remove(0))
    }

    /// Like [`open`](Self::open), with the socket bound to `umem`, which it shares with
    /// the other members: frames received on any of them can be sent on this one without
    /// a copy ([`Lending`]). `config`'s frame and ring sizes must be `umem`'s.
    pub fn open_shared(
        ifname: &str,
        queue: u32,
        config: &AfXdpConfig,
        umem: &SharedUmem,
    ) -> xdp::Result<AfXdp> {
        let sizes = &umem.0.sizes;
        if (config.frame_size, config.rx_frames, config.tx_frames)
            != (sizes.frame_size, sizes.rx_frames, sizes.tx_frames)
        {
            return Err(XdpError::Os {
                action: format!("opening `{ifname}` on a shared AF_XDP UMEM"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the sockets of a shared UMEM need the same frame size and ring sizes",
                ),
            });
        }
        let mut sockets = AfXdp::open_with(ifname, &[queue], config, || Ok(umem.0.clone()))?;
        Ok(sockets.remove(0))
    }

    /// Opens one socket per queue in `queues`, sharing one redirect program on `ifname`;
    /// the program stays attached until the last of them is dropped.
    pub fn open_queues(
        ifname: &str,
        queues: &[u32],
        config: &AfXdpConfig,
    ) -> xdp::Result<Vec<AfXdp>> {
        AfXdp::open_with(ifname, queues, config, || UmemFrames::new(1, false, config))
    }

    /// Opens one socket per queue, each bound to the UMEM `umem` returns.
    fn open_with(
        ifname: &str,
        queues: &[u32],
        config: &AfXdpConfig,
        umem: impl Fn() -> xdp::Result<Arc<UmemFrames>>,
    ) -> xdp::Result<Vec<AfXdp>> {
        config.validate()?;
        let name = IfName::new(ifname).map_err(XdpError::Open)?;
        let ifindex = xdp::ifindex(ifname)?;
        let map_size = queues.iter().max().map_or(1, |&q| q + 1);
        let program = if config.pass_local {
            let local = local_ipv4_addresses()
                .map_err(|e| XdpError::os("listing the host's IPv4 addresses", e))?;
            RedirectProgram::load_passing_local(map_size, &local)?
        } else {
            RedirectProgram::load(map_size)?
        };
        let link = program.attach(ifname, config.xdp_mode)?;
        let attachment = Arc::new(Attachment { program, link });
        queues
            .iter()
            .enumerate()
            .map(|(k, &queue)| {
                let busy_poll = config.busy_poll.as_ref().map(|b| b.queue(k));
                let socket = AfXdp::bind(
                    name.clone(),
                    ifindex,
                    queue,
                    config,
                    busy_poll,
                    attachment.clone(),
                    umem()?,
                )?;
                attachment
                    .program
                    .insert_socket(queue, socket.socket_fd())?;
                Ok(socket)
            })
            .collect()
    }

    fn bind(
        name: IfName,
        ifindex: u32,
        queue: u32,
        config: &AfXdpConfig,
        busy_poll: Option<BusyPoll>,
        attachment: Arc<Attachment>,
        frames: Arc<UmemFrames>,
    ) -> xdp::Result<AfXdp> {
        let ifname = name.as_str();
        let on_queue = |what: &str| format!("{what} for `{ifname}` queue {queue}");
        let mut group = frames.group();
        if group.joined == frames.members {
            return Err(XdpError::Os {
                action: on_queue("joining a shared AF_XDP UMEM"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the UMEM has room for {} sockets", frames.members),
                ),
            });
        }
        let first = group.registration.is_none();
        if first {
            let umem_config = UmemConfig {
                fill_size: frames.sizes.rx_frames,
                complete_size: frames.sizes.tx_frames,
                frame_size: frames.sizes.frame_size,
                headroom: 0,
                flags: 0,
            };
            // SAFETY: the area is page aligned (mmap) and outlives every ring: each member
            // holds the `UmemFrames` that owns it, and drops its rings first (field order).
            let umem =
                unsafe { Umem::new(umem_config, frames.area.as_slice_ptr()) }.map_err(|e| {
                    XdpError::os(on_queue("creating the AF_XDP socket and UMEM"), errno(e))
                })?;
            group.registration = Some(Registration(umem));
        }
        let result = AfXdp::bind_member(&name, ifindex, queue, config, &group, first);
        let (rx, tx, fill_completion, socket) = match result {
            Ok(rings) => rings,
            Err(e) => {
                // A first member that failed leaves no half-configured UMEM socket behind.
                if first {
                    group.registration = None;
                }
                return Err(e);
            }
        };
        let (to_fill, tx_range, spare) = frames.region(group.joined);
        group.joined += 1;
        let size = u64::from(frames.sizes.frame_size);
        group.spare.extend(spare.step_by(size as usize));
        drop(group);
        let tx_free: Vec<u64> = tx_range.clone().step_by(size as usize).collect();
        let sock_fd = socket.as_raw_fd();

        let zero_copy = socket_is_zero_copy(sock_fd)
            .map_err(|e| XdpError::os(on_queue("reading the AF_XDP socket options"), e))?;
        eprintln!(
            "polld: af_xdp: `{ifname}` queue {queue} bound in {} mode{}",
            if zero_copy { "zero-copy" } else { "copy" },
            if frames.shared {
                " on a shared UMEM"
            } else {
                ""
            }
        );
        // SAFETY: plain socket creation.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(XdpError::os(
                on_queue("opening a socket for interface ioctls"),
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        let ioctl_socket = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `socket` owns `sock_fd` and outlives this borrow.
        let tx_ready_fd = unsafe { BorrowedFd::borrow_raw(sock_fd) }
            .try_clone_to_owned()
            .map_err(|e| {
                XdpError::os(
                    on_queue("duplicating the AF_XDP socket for its transmit-ready line"),
                    e,
                )
            })?;

        // SAFETY: `socket` owns `sock_fd` and outlives this borrow.
        let busy_poll = busy_poll.map(|b| {
            b.attach(
                unsafe { BorrowedFd::borrow_raw(sock_fd) },
                ifname,
                ifindex,
                queue,
            )
        });
        // Only a link of one queue counts this socket's drops alone.
        let single_queue = iface::rx_queues(ifname).ok().flatten() == Some(1);
        let link_drops = single_queue
            .then(|| iface::LinkCounters::open(ifindex).ok())
            .flatten()
            .and_then(|mut counters| counters.tx_dropped().ok().map(|at| (counters, at)));
        let mut device = AfXdp {
            name,
            ifindex,
            link_drops,
            queue,
            zero_copy,
            config: config.clone(),
            rx,
            tx,
            fill_completion,
            socket,
            to_fill,
            tx_free,
            tx_range,
            tx_outstanding: 0,
            rx_owed: 0,
            to_spare: Vec::new(),
            tx_queued: Vec::with_capacity(config.tx_frames as usize),
            interrupt_armed: false,
            stats: AfXdpStats::default(),
            max_frame: 0,
            ioctl_socket,
            tx_ready_fd,
            busy_poll,
            attachment,
            frames,
        };
        device.read_mtu();
        device.refill();
        Ok(device)
    }

    /// Creates, sizes, maps and binds one socket on the UMEM `group` holds: the UMEM's own
    /// socket for its `first` member, a new one bound with `XDP_SHARED_UMEM` after it.
    fn bind_member(
        name: &IfName,
        ifindex: u32,
        queue: u32,
        config: &AfXdpConfig,
        group: &Group,
        first: bool,
    ) -> xdp::Result<(RingRx, RingTx, DeviceQueue, User)> {
        let ifname = name.as_str();
        let on_queue = |what: &str| format!("{what} for `{ifname}` queue {queue}");
        let umem = &group
            .registration
            .as_ref()
            .expect("the first member registers the UMEM")
            .0;
        let mut info = IfInfo::invalid();
        let c_name =
            CString::new(ifname).map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.from_name(&c_name)
            .map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.set_queue(queue);
        let sock = if first {
            Socket::with_shared(&info, umem)
        } else {
            Socket::new(&info)
        }
        .map_err(|e| XdpError::os(on_queue("preparing the AF_XDP socket"), errno(e)))?;
        debug_assert_eq!(ifindex, info.ifindex());
        let fill_completion = umem.fq_cq(&sock).map_err(|e| {
            XdpError::os(on_queue("mapping the fill and completion rings"), errno(e))
        })?;

        // `xsk_bind` refuses flags on an XDP_SHARED_UMEM bind: a later member inherits
        // the first one's copy or zero-copy mode and its need_wakeup.
        let bind_flags = match config.bind_mode {
            _ if !first => 0,
            BindMode::Auto => SocketConfig::XDP_BIND_NEED_WAKEUP,
            BindMode::ZeroCopy => {
                SocketConfig::XDP_BIND_NEED_WAKEUP | SocketConfig::XDP_BIND_ZEROCOPY
            }
            BindMode::Copy => SocketConfig::XDP_BIND_NEED_WAKEUP | SocketConfig::XDP_BIND_COPY,
        };
        let socket = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(config.rx_frames),
                    tx_size: NonZeroU32::new(config.tx_frames),
                    bind_flags,
                },
            )
            .map_err(|e| XdpError::os(on_queue("sizing the rx and tx rings"), errno(e)))?;
        let rx = socket
            .map_rx()
            .map_err(|e| XdpError::os(on_queue("mapping the rx ring"), errno(e)))?;
        let tx = socket
            .map_tx()
            .map_err(|e| XdpError::os(on_queue("mapping the tx ring"), errno(e)))?;

        bind_retrying_busy(umem, &socket).map_err(|source| match source.raw_os_error() {
            Some(libc::EOPNOTSUPP) if config.bind_mode == BindMode::ZeroCopy => {
                XdpError::ZeroCopyUnsupported {
                    ifname: ifname.to_string(),
                    queue,
                }
            }
            Some(libc::EINVAL) => XdpError::Os {
                action: on_queue("binding the AF_XDP socket"),
                source: io::Error::new(
                    source.kind(),
                    format!(
                        "{source} (does the interface have this queue? see `ethtool -l {ifname}`)"
                    ),
                ),
            },
            Some(libc::EBUSY) => XdpError::Os {
                action: on_queue("binding the AF_XDP socket"),
                source: io::Error::new(
                    source.kind(),
                    format!("{source} (another AF_XDP socket already owns this queue)"),
                ),
            },
            _ => XdpError::os(on_queue("binding the AF_XDP socket"), source),
        })?;
        Ok((rx, tx, fill_completion, socket))
    }

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

    fn socket_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the socket fd lives as long as `self.socket`, which `self` owns.
        unsafe { BorrowedFd::borrow_raw(self.socket.as_raw_fd()) }
    }

    /// Masks a UMEM address down to the start of its frame.
    fn frame_mask(&self) -> u64 {
        !(u64::from(self.config.frame_size) - 1)
    }

    /// Gives consumed receive frames back to the kernel, replacing lent ones from the
    /// shared UMEM's spare list.
    fn refill(&mut self) {
        if self.rx_owed > 0 {
            let mut group = self.frames.group();
            let n = self.rx_owed.min(group.spare.len());
            let from = group.spare.len() - n;
            self.to_fill.extend(group.spare.drain(from..));
            self.rx_owed -= n;
        }
        // Twice at most: the first reservation may see a stale view of the kernel's
        // consumer index and grant fewer slots; the second refreshes it.
        for _ in 0..2 {
            if self.to_fill.is_empty() {
                break;
            }
            let mut writer = self.fill_completion.fill(self.to_fill.len() as u32);
            let filled = writer.insert(self.to_fill.iter().copied()) as usize;
            writer.commit();
            drop(writer);
            self.to_fill.drain(..filled);
        }
        if self.fill_completion.needs_wakeup() {
            self.stats.fill_wakeups += 1;
            self.fill_completion.wake();
        }
    }

    /// Bounds `send` by the interface's MTU: the kernel drops a longer frame after
    /// completing its descriptor, and counts it nowhere this socket can read.
    fn read_mtu(&mut self) {
        let umem_frame = self.config.frame_size as usize;
        self.max_frame = match iface::mtu_on(self.ioctl_socket.as_raw_fd(), &self.name) {
            Some(mtu) => iface::max_frame(mtu).min(umem_frame),
            None => umem_frame,
        };
    }

    /// Takes transmitted frames back from the completion ring: its own to the free list,
    /// lent ones to the shared UMEM's spare list.
    fn reclaim(&mut self) {
        let frame_mask = self.frame_mask();
        let mut reader = self.fill_completion.complete(self.config.tx_frames);
        let mut completed = 0;
        for addr in reader.by_ref() {
            let addr = addr & frame_mask;
            if self.tx_range.contains(&addr) {
                self.tx_free.push(addr);
            } else {
                self.to_spare.push(addr);
            }
            completed += 1;
        }
        reader.release();
        drop(reader);
        self.tx_outstanding -= completed;
        self.stats.tx_completed += u64::from(completed);
        if !self.to_spare.is_empty() {
            self.frames.group().spare.append(&mut self.to_spare);
        }
    }

    /// Whether the tx ring can take another descriptor (reclaiming completed ones first
    /// when it looks full).
    fn tx_slot_free(&mut self) -> bool {
        if self.tx_outstanding == self.config.tx_frames {
            self.reclaim();
        }
        self.tx_outstanding < self.config.tx_frames
    }

    /// Queues a descriptor for `flush` to publish.
    fn queue_tx(&mut self, addr: u64, len: usize) {
        self.tx_queued.push(XdpDesc {
            addr,
            len: len as u32,
            options: 0,
        });
        self.tx_outstanding += 1;
        self.stats.tx_frames += 1;
    }

    /// Whether this socket shares its UMEM with other interfaces' sockets.
    pub fn shares_umem(&self) -> bool {
        self.frames.shared
    }

    /// Publishes the queued descriptors to the tx ring.
    fn publish_tx(&mut self) {
        if self.tx_queued.is_empty() {
            return;
        }
        let mut writer = self.tx.transmit(self.tx_queued.len() as u32);
        let published = writer.insert(self.tx_queued.iter().copied()) as usize;
        writer.commit();
        drop(writer);
        self.tx_queued.drain(..published);
    }

    /// Asks the kernel to transmit what the tx ring holds. In copy mode one `sendto` sends
    /// at most [`KICK_BUDGET`] frames and answers EAGAIN while more are left, and EBUSY
    /// when the device dropped the last frame it took: the device is full, and kicking on
    /// would drop one frame per call until its consumer runs, so the kicks stop there.
    fn kick_tx(&mut self) {
        while self.tx.needs_wakeup() && self.tx.pending() > 0 {
            let before = self.tx.pending();
            self.stats.tx_kicks += 1;
            // SAFETY: a zero-length sendto on our own socket is the documented tx kick.
            let rc = unsafe {
                libc::sendto(
                    self.socket.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            let errno = (rc < 0).then(|| io::Error::last_os_error().raw_os_error());
            if errno == Some(Some(libc::EBUSY)) {
                self.stats.tx_dropped += 1;
                break;
            }
            let retry = matches!(errno, None | Some(Some(libc::EAGAIN | libc::ENOBUFS)));
            // Stop when the kernel makes no progress: the next flush tries again.
            if !retry || self.tx.pending() >= before {
                break;
            }
        }
    }

    /// Hands up to `budget` received frames to `rx` with their UMEM address; a frame `rx`
    /// keeps (lent) is replaced in the fill ring from the spare list, the others go back.
    fn receive_frames(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], u64) -> bool,
    ) -> usize {
        let budget = u32::try_from(budget).unwrap_or(u32::MAX);
        if self.busy_poll.as_ref().is_some_and(Attached::polls_napi) {
            // Under preferred busy polling the device's interrupt stays masked: this
            // call runs the driver's NAPI poll (at most SO_BUSY_POLL_BUDGET frames) here.
            // SAFETY: a zero-length non-blocking recvfrom on our own socket.
            unsafe {
                libc::recvfrom(
                    self.socket.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
        let frame_mask = self.frame_mask();
        let mut reader = self.rx.receive(budget);
        let mut handed = 0;
        let mut batch = [XdpDesc::default(); PREFETCH_BATCH];
        loop {
            let mut n = 0;
            while n < PREFETCH_BATCH {
                let Some(desc) = reader.read() else { break };
                batch[n] = desc;
                n += 1;
            }
            if n == 0 {
                break;
            }
            // The receive thread wrote these frames while polld slept; by now they have
            // usually left the cache (and their pages the TLB). Asking for all the headers
            // at once overlaps those misses instead of paying them one frame at a time.
            for desc in &batch[..n] {
                self.frames.area.prefetch(desc.addr);
            }
            for desc in &batch[..n] {
                // SAFETY: the kernel passed this frame to us through the rx ring; no other
                // reference to it exists until it goes back to the fill ring, or, lent,
                // until the dataplane sends it or gives it back.
                let frame = unsafe { self.frames.area.frame_mut(desc.addr, desc.len as usize) };
                let kept = match frame {
                    Some(frame) => {
                        self.stats.rx_bytes += frame.len() as u64;
                        handed += 1;
                        rx(frame, desc.addr)
                    }
                    None => {
                        self.stats.rx_bad_descs += 1;
                        false
                    }
                };
                if kept {
                    self.rx_owed += 1;
                } else {
                    self.to_fill.push(desc.addr & frame_mask);
                }
            }
        }
        reader.release();
        drop(reader);
        self.stats.rx_frames += handed as u64;
        self.refill();
        handed
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
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            interrupt_fd: Some(self.socket.as_raw_fd()),
            tx_ready: (!self.zero_copy).then(|| TxReadyLine::Writable {
                fd: self.tx_ready_fd.as_raw_fd(),
                on_wakeup_only: true,
            }),
            tx_batch: KICK_BUDGET,
            pool: self.frames.shared.then_some(self.frames.pool),
        }
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
        let fd = self.ioctl_socket.as_raw_fd();
        match iface::index(fd, &self.name) {
            Some(index) if index == self.ifindex => {
                self.read_mtu();
                iface::link_state(fd, &self.name)
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
    fn hw_stats(&self, link_dropped: Option<u64>) -> HwStats {
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

impl Lending for AfXdp {
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        let pool = self.frames.pool;
        self.receive_frames(budget, &mut |frame, offset| {
            let len = frame.len() as u32;
            rx(frame, Loan { pool, offset, len })
        })
    }

    /// The descriptor goes on this socket's tx ring as it is: the frame already lies in
    /// the shared UMEM. One too long for this interface is accepted and dropped (counted
    /// as `send` counts it), its frame returned to the spare list.
    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull> {
        debug_assert_eq!(loan.pool, self.frames.pool);
        if loan.len as usize > self.max_frame {
            self.stats.tx_too_long += 1;
            let frame = self.frame_mask() & loan.offset;
            self.frames.group().spare.push(frame);
            return Ok(());
        }
        if !self.tx_slot_free() {
            self.stats.tx_full += 1;
            return Err(TxFull);
        }
        self.queue_tx(loan.offset, loan.len as usize);
        self.stats.tx_lent += 1;
        Ok(())
    }

    fn give_back(&mut self, loan: Loan) {
        let frame = self.frame_mask() & loan.offset;
        if self.rx_owed > 0 {
            // The fill ring is still owed a frame for the loan: this one pays it.
            self.to_fill.push(frame);
            self.rx_owed -= 1;
        } else {
            // A spare already took the loan's place in the fill ring at the end of the
            // receive batch: the frame is a spare now.
            self.frames.group().spare.push(frame);
        }
    }

    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8])) {
        // SAFETY: the caller holds the loan: until it sends or gives it back (or the tx
        // ring it was queued on is flushed), no other reference covers the frame, and the
        // kernel only reads it.
        if let Some(frame) = unsafe { self.frames.area.frame_mut(loan.offset, loan.len as usize) } {
            look(frame);
        }
    }
}

/// The IPv4 addresses of all interfaces in the calling thread's network namespace.
fn local_ipv4_addresses() -> io::Result<Vec<Ipv4Addr>> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut addrs = Vec::new();
    let mut entry = list;
    while !entry.is_null() {
        // SAFETY: `entry` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*entry };
        // SAFETY: an AF_INET ifa_addr points at a sockaddr_in.
        if !ifa.ifa_addr.is_null()
            && i32::from(unsafe { (*ifa.ifa_addr).sa_family }) == libc::AF_INET
        {
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            addrs.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
        }
        entry = ifa.ifa_next;
    }
    // SAFETY: frees the list getifaddrs allocated, once.
    unsafe { libc::freeifaddrs(list) };
    Ok(addrs)
}

/// Binds the socket, waiting out EBUSY for a while: the kernel releases a closed socket's
/// claim on its queue from a workqueue, so reopening a queue right after closing it can
/// find the queue still taken.
fn bind_retrying_busy(umem: &Umem, socket: &User) -> io::Result<()> {
    const ATTEMPTS: u32 = 100;
    for _ in 1..ATTEMPTS {
        match umem.bind(socket).map_err(errno) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return result,
        }
    }
    umem.bind(socket).map_err(errno)
}

/// Whether the kernel bound the socket in zero-copy mode (XDP_OPTIONS).
fn socket_is_zero_copy(fd: RawFd) -> io::Result<bool> {
    let mut options = libc::xdp_options { flags: 0 };
    let mut len = std::mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `options`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_OPTIONS,
            (&mut options as *mut libc::xdp_options).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_umem_area_starts_on_a_huge_page_and_all_its_bytes_are_usable() {
        let len = 3 * HUGE_PAGE + 4096;
        let area = UmemArea::new(len).expect("an anonymous mapping");
        assert_eq!(area.base.as_ptr() as usize % HUGE_PAGE, 0);
        let map_end = area.map.as_ptr() as usize + area.map_len;
        assert!(area.base.as_ptr() as usize + len <= map_end);
        // SAFETY: nothing else references the fresh area.
        let last = unsafe { area.frame_mut(len as u64 - 1, 1) }.expect("the last byte");
        last[0] = 7;
        // SAFETY: as above.
        assert!(unsafe { area.frame_mut(len as u64, 1) }.is_none());
    }

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
