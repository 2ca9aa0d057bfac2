//! The AF_XDP backend: one XDP socket per (interface, queue), each with its own UMEM.
//!
//! Frames reach the socket through polld's [`RedirectProgram`], attached with a `bpf_link`
//! and shared by all queues of an interface. The UMEM is split in two pools:
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
//! ring holds frames.

use std::ffi::CString;
use std::net::Ipv4Addr;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::Arc;
use std::{fmt, io};

use polld_core::{Device, HwStats, LinkState, TxDrop, TxDrops, TxFull};
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use crate::busy_poll::{BusyPoll, BusyPollConfig};
use crate::iface::{self, IfName};
use crate::xdp::{self, RedirectProgram, XdpError, XdpLink, XdpMode};

/// Descriptors one `sendto` kick sends in copy mode: the kernel's budget per call
/// (`TX_BATCH_SIZE` in `__xsk_generic_xmit`, net/xdp/xsk.c; a socket may raise it with
/// `XDP_MAX_TX_SKB_BUDGET` since Linux 6.17). The call answers EAGAIN when the budget runs
/// out with descriptors left, and stops early when the device pushes back (veth: the peer's
/// ring is full).
const KICK_BUDGET: usize = 32;

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
    /// [`crate::busy_poll`]); `None` leaves the receive work where the kernel puts it.
    pub busy_poll: Option<BusyPollConfig>,
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
    /// Frames accepted by `send`.
    pub tx_frames: u64,
    /// Sent frames whose UMEM frame the kernel gave back (completion ring).
    pub tx_completed: u64,
    /// `send` calls refused with [`TxFull`].
    pub tx_full: u64,
    /// Frames longer than a UMEM frame or than the MTU allows, dropped by `send`.
    pub tx_too_long: u64,
    /// `sendto` kicks issued because the tx ring asked for a wakeup.
    pub tx_kicks: u64,
    /// `poll` calls issued because the fill ring asked for a wakeup.
    pub fill_wakeups: u64,
    /// Rx descriptors pointing outside the UMEM (a kernel bug if ever non-zero), dropped.
    pub rx_bad_descs: u64,
    /// Kernel: frames dropped because no fill-ring frame was free (or a frame too long).
    pub rx_dropped: u64,
    /// Kernel: frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Kernel: times the kernel found the fill ring empty.
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
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned exclusively by one `AfXdp`; only that owner touches it.
unsafe impl Send for UmemArea {}

impl UmemArea {
    fn new(len: usize) -> io::Result<UmemArea> {
        // SAFETY: a fresh private anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast()).expect("mmap never returns NULL on success");
        Ok(UmemArea { base, len })
    }

    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.base, self.len)
    }

    /// The bytes `[addr, addr + len)` of the UMEM, or `None` if they do not fit.
    ///
    /// # Safety
    /// No other live reference may cover these bytes, and the kernel must not own the frame
    /// (it is in the rx ring, or in the free list of transmit frames).
    unsafe fn frame_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
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
        // were dropped before (field order in `AfXdp`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// An AF_XDP socket on one queue of one interface, as a polld [`Device`].
pub struct AfXdp {
    name: IfName,
    ifindex: u32,
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
    /// Descriptors queued by `send`, published to the tx ring by `flush`.
    tx_queued: Vec<XdpDesc>,
    interrupt_armed: bool,
    stats: AfXdpStats,
    /// A datagram socket for interface-flag ioctls (an XDP socket does not take them).
    ioctl_socket: OwnedFd,
    /// The longest frame `send` takes: the smaller of a UMEM frame and what the MTU
    /// allows (read at open and at every status check).
    max_frame: usize,
    /// Whether receive calls run the queue's NAPI poll in polld's thread.
    busy_poll: BusyPoll,
    attachment: Arc<Attachment>,
    umem_area: UmemArea,
}

impl fmt::Debug for AfXdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfXdp")
            .field("ifname", &self.name.as_str())
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
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

    /// Opens one socket per queue in `queues`, sharing one redirect program on `ifname`;
    /// the program stays attached until the last of them is dropped.
    pub fn open_queues(
        ifname: &str,
        queues: &[u32],
        config: &AfXdpConfig,
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
            .map(|&queue| {
                let socket = AfXdp::bind(name.clone(), ifindex, queue, config, attachment.clone())?;
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
        attachment: Arc<Attachment>,
    ) -> xdp::Result<AfXdp> {
        let ifname = name.as_str();
        let on_queue = |what: &str| format!("{what} for `{ifname}` queue {queue}");
        let frames = config.rx_frames + config.tx_frames;
        let umem_area = UmemArea::new(frames as usize * config.frame_size as usize)
            .map_err(|e| XdpError::os(on_queue("allocating the AF_XDP UMEM"), e))?;
        let umem_config = UmemConfig {
            fill_size: config.rx_frames,
            complete_size: config.tx_frames,
            frame_size: config.frame_size,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: the area is page aligned (mmap) and outlives every ring (field order).
        let umem = unsafe { Umem::new(umem_config, umem_area.as_slice_ptr()) }
            .map_err(|e| XdpError::os(on_queue("creating the AF_XDP socket and UMEM"), errno(e)))?;
        let mut info = IfInfo::invalid();
        let c_name =
            CString::new(ifname).map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.from_name(&c_name)
            .map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.set_queue(queue);
        let sock = Socket::with_shared(&info, &umem)
            .map_err(|e| XdpError::os(on_queue("preparing the AF_XDP socket"), errno(e)))?;
        let fill_completion = umem.fq_cq(&sock).map_err(|e| {
            XdpError::os(on_queue("mapping the fill and completion rings"), errno(e))
        })?;

        let mode_flags = match config.bind_mode {
            BindMode::Auto => 0,
            BindMode::ZeroCopy => SocketConfig::XDP_BIND_ZEROCOPY,
            BindMode::Copy => SocketConfig::XDP_BIND_COPY,
        };
        let socket = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(config.rx_frames),
                    tx_size: NonZeroU32::new(config.tx_frames),
                    bind_flags: SocketConfig::XDP_BIND_NEED_WAKEUP | mode_flags,
                },
            )
            .map_err(|e| XdpError::os(on_queue("sizing the rx and tx rings"), errno(e)))?;
        let rx = socket
            .map_rx()
            .map_err(|e| XdpError::os(on_queue("mapping the rx ring"), errno(e)))?;
        let tx = socket
            .map_tx()
            .map_err(|e| XdpError::os(on_queue("mapping the tx ring"), errno(e)))?;

        // Receive frames are [0, rx_frames), transmit frames follow.
        let frame_size = u64::from(config.frame_size);
        let rx_frames = u64::from(config.rx_frames);
        let to_fill: Vec<u64> = (0..rx_frames).map(|i| i * frame_size).collect();
        let tx_free: Vec<u64> = (rx_frames..rx_frames + u64::from(config.tx_frames))
            .map(|i| i * frame_size)
            .collect();

        bind_retrying_busy(&umem, &socket).map_err(|source| match source.raw_os_error() {
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
        let zero_copy = socket_is_zero_copy(sock.as_raw_fd())
            .map_err(|e| XdpError::os(on_queue("reading the AF_XDP socket options"), e))?;
        eprintln!(
            "polld: af_xdp: `{ifname}` queue {queue} bound in {} mode",
            if zero_copy { "zero-copy" } else { "copy" }
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

        let busy_poll = match &config.busy_poll {
            Some(wanted) => {
                let busy_poll = BusyPoll::enable(sock.as_raw_fd(), wanted);
                eprintln!(
                    "polld: af_xdp: `{ifname}` queue {queue}: {}{}",
                    busy_poll.describe(),
                    if busy_poll.is_active() {
                        ""
                    } else {
                        "; its receive work runs in the kernel, outside polld's budget"
                    }
                );
                busy_poll
            }
            None => BusyPoll::Unavailable("not asked for".to_string()),
        };
        // The rings now live on in the socket; `umem` only held the setup state.
        drop(umem);
        let mut device = AfXdp {
            name,
            ifindex,
            queue,
            zero_copy,
            config: config.clone(),
            rx,
            tx,
            fill_completion,
            socket,
            to_fill,
            tx_free,
            tx_queued: Vec::with_capacity(config.tx_frames as usize),
            interrupt_armed: false,
            stats: AfXdpStats::default(),
            max_frame: 0,
            ioctl_socket,
            busy_poll,
            attachment,
            umem_area,
        };
        device.read_mtu();
        device.refill();
        Ok(device)
    }

    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket shares frames with the driver (zero-copy) rather than copying.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether receive calls run the queue's NAPI poll in polld's thread.
    pub fn busy_poll(&self) -> &BusyPoll {
        &self.busy_poll
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

    /// Gives consumed receive frames back to the kernel.
    fn refill(&mut self) {
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

    /// Takes transmitted frames back from the completion ring.
    fn reclaim(&mut self) {
        let mut reader = self.fill_completion.complete(self.config.tx_frames);
        let before = self.tx_free.len();
        self.tx_free.extend(
            reader
                .by_ref()
                .map(|addr| addr & !(u64::from(self.config.frame_size) - 1)),
        );
        reader.release();
        self.stats.tx_completed += (self.tx_free.len() - before) as u64;
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
    /// at most [`KICK_BUDGET`] frames and answers EAGAIN while more are left.
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
            let retry = rc >= 0
                || matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS)
                );
            // Stop when the kernel makes no progress: the next flush tries again.
            if !retry || self.tx.pending() >= before {
                break;
            }
        }
    }
}

impl Device for AfXdp {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let budget = u32::try_from(budget).unwrap_or(u32::MAX);
        if self.busy_poll.is_active() {
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
        let frame_mask = !(u64::from(self.config.frame_size) - 1);
        let mut reader = self.rx.receive(budget);
        let mut handed = 0;
        while let Some(desc) = reader.read() {
            // SAFETY: the kernel passed this frame to us through the rx ring; no other
            // reference to it exists until it goes back to the fill ring below.
            match unsafe { self.umem_area.frame_mut(desc.addr, desc.len as usize) } {
                Some(frame) => {
                    self.stats.rx_bytes += frame.len() as u64;
                    rx(frame);
                    handed += 1;
                }
                None => self.stats.rx_bad_descs += 1,
            }
            self.to_fill.push(desc.addr & frame_mask);
        }
        reader.release();
        drop(reader);
        self.stats.rx_frames += handed as u64;
        self.refill();
        handed
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
        let Some(addr) = self.tx_free.pop() else {
            self.stats.tx_full += 1;
            return Err(TxFull);
        };
        // SAFETY: `addr` came from the free list, so neither the kernel nor a queued
        // descriptor uses this frame; it lies inside the UMEM by construction.
        let buf = unsafe { self.umem_area.frame_mut(addr, frame.len()) }
            .expect("transmit frames lie inside the UMEM");
        buf.copy_from_slice(frame);
        self.tx_queued.push(XdpDesc {
            addr,
            len: frame.len() as u32,
            options: 0,
        });
        self.stats.tx_frames += 1;
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
        self.tx_free.len()
    }

    fn flush(&mut self) {
        self.publish_tx();
        self.kick_tx();
        self.reclaim();
    }

    /// What one kick sends, so that each `sendto` carries a full budget.
    fn tx_batch(&self) -> usize {
        KICK_BUDGET
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

    fn interrupt_fd(&self) -> Option<RawFd> {
        Some(self.socket.as_raw_fd())
    }

    fn hw_stats(&mut self) -> HwStats {
        // Should the kernel refuse XDP_STATISTICS, the last counts read still hold.
        let stats = self.stats().unwrap_or(self.stats);
        // Frames the kernel could not put on the rx ring: no free fill-ring frame (or one
        // too small for the frame), or a full rx ring.
        let mut tx_drops = TxDrops::default();
        tx_drops.add(TxDrop::TooLong, stats.tx_too_long);
        // Descriptors the kernel found invalid were not sent.
        tx_drops.add(TxDrop::Refused, stats.tx_invalid_descs);
        HwStats {
            rx_ring_full: stats.rx_dropped + stats.rx_ring_full,
            tx_drops,
            ..HwStats::default()
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
