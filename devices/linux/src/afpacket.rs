//! The AF_PACKET device: a TPACKET_V3 receive ring plus a `sendmmsg` transmit batch.
//!
//! Receive uses a block-based mmap ring (module `afpacket_rx`): the kernel fills whole
//! blocks and hands them over; we give a block back only once every frame in it was
//! handed to the caller, so the consumer index is published once per block, never per
//! frame. Transmit (module `afpacket_tx`) stages frames in a batch that `flush` pushes
//! with one `sendmmsg` on a second socket that bypasses the qdisc.
//!
//! Why `sendmmsg` and not PACKET_TX_RING: both were implemented (commit bf50ff9) and
//! measured with its `afpacket_tx` example (`cargo run --release -p polld-dev
//! --example afpacket_tx -- --batch 256`, then `--batch 64`; 60-byte frames into a veth
//! pair, sender pinned to CPU0, median (min–max) of 3 runs of 3 s, other jobs sharing
//! the machine so the sender got about half a core). With 256-frame batches `sendmmsg` accepted 638
//! (476–665) kpps, 1002 (892–1047) per second of sender CPU; the TX ring 648 (485–655)
//! kpps, 1003 (829–1019) per CPU-second. With 64-frame batches: 486 (475–566) against
//! 477 (467–483) kpps. With no speed to gain, the ring's extra mapping, its coarse
//! per-frame error reporting and the loss of in-flight frames on reopen were not worth
//! keeping.
//!
//! The interrupt is the receive socket's readiness: it becomes readable when the kernel
//! retires a block (full, or after the retire timeout). Masking it is the dataplane's job
//! (it stops waiting on the fd); the kernel side needs nothing.
//!
//! The transmit-ready line is the transmit socket's writability. Each frame `sendmmsg`
//! hands the kernel holds its skb's truesize against the socket's send buffer until the
//! driver frees it (on veth: once the peer's NAPI has taken it off its ring and delivered
//! it); with the buffer full `sendmmsg` answers EAGAIN. The kernel reports POLLOUT once at
//! most half the buffer is held (`sock_writeable`), and each free wakes the socket
//! (`sock_wfree` → `sk_write_space`): a transmit-complete interrupt. While the batch is
//! refused, [`Device::tx_room`] is 0 and interrupt work waits for that line. The send
//! buffer is the only backpressure the kernel gives an AF_PACKET socket, so its size
//! ([`AfPacketConfig::tx_send_buffer`]) bounds the frames in flight below the device's
//! queue: a frame the device's full queue refuses is dropped after the kernel built it
//! (ENOBUFS, counted as `tx_drops.nobufs`).
//!
//! If the interface is deleted, or replaced by a new one of the same name,
//! [`Device::check_status`] reports [`LinkState::Gone`]; reopening is an explicit action:
//! [`AfPacket::reopen`], or a new device opened off the poll thread (polld's runtime does
//! that).

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use polld_core::device::{Capabilities, Device, HwStats, LinkState, TxDrops, TxFull, TxReadyLine};
use rustix::fs::OFlags;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::addr::{SocketAddrArg, SocketAddrLen, SocketAddrOpaque};
use rustix::net::{AddressFamily, Protocol, SocketFlags, SocketType};

use crate::afpacket_rx::RxRing;
use crate::afpacket_tx::TxBatch;
use crate::error::OpenError;
use crate::iface::{self, IfName, Namespace};
use crate::sys;

/// Ring and batch geometry of an [`AfPacket`] device.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AfPacketConfig {
    /// Bytes per receive block; a multiple of the page size.
    pub block_size: usize,
    /// Number of receive blocks.
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not full, so that a
    /// trickle of frames is not held back (the block's "retire timeout").
    pub retire_timeout_ms: u32,
    /// Frames `send` stages before it reports [`TxFull`]; `flush` pushes them in one call.
    pub tx_batch: usize,
    /// The largest frame `send` accepts, in bytes (without FCS).
    pub tx_frame_size: usize,
    /// Joins this PACKET_FANOUT group (hash mode), so that several devices opened on the
    /// same interface share its frames, one poller per core.
    pub fanout_group: Option<u16>,
    /// The transmit socket's send buffer in bytes as the kernel accounts it (`SO_SNDBUF`
    /// is given half: the kernel doubles it), or `None` for the kernel's default
    /// (`net.core.wmem_default`, 212992 bytes here). It bounds the frames in flight in
    /// the kernel (see the module's header). The default, 128 KiB, is what keeps 64-byte
    /// frames from overflowing veth's 256-slot ring on the testbed (the README of commit
    /// b3d19df, "AF_PACKET's tx_ring_full in interrupt mode"); a capped `net.core.wmem_max` caps it too.
    pub tx_send_buffer: Option<usize>,
}

impl Default for AfPacketConfig {
    /// The geometry measured for docs/measuring.md §ref-rx: 64 blocks of 64 KiB, 1 ms timeout.
    fn default() -> Self {
        AfPacketConfig {
            block_size: 64 * 1024,
            block_count: 64,
            retire_timeout_ms: 1,
            tx_batch: 64,
            tx_frame_size: 2048,
            fanout_group: None,
            tx_send_buffer: Some(TX_SEND_BUFFER),
        }
    }
}

/// The default [`AfPacketConfig::tx_send_buffer`].
pub const TX_SEND_BUFFER: usize = 128 * 1024;

/// The smallest send buffer the kernel keeps (`SOCK_MIN_SNDBUF`, rounded up).
const MIN_SEND_BUFFER: usize = 4608;

impl AfPacketConfig {
    fn validate(&self, interface: &str) -> Result<(), OpenError> {
        let invalid = |detail: String| {
            Err(OpenError::InvalidConfig {
                interface: interface.to_string(),
                detail,
            })
        };
        let page = page_size();
        if self.block_size == 0 || !self.block_size.is_multiple_of(page) {
            return invalid(format!(
                "block_size {} must be a non-zero multiple of the page size ({page})",
                self.block_size
            ));
        }
        if u32::try_from(self.block_size).is_err() {
            return invalid(format!("block_size {} exceeds 4 GiB", self.block_size));
        }
        if self.block_count == 0 || u32::try_from(self.block_count).is_err() {
            return invalid(format!(
                "block_count {} must be between 1 and {}",
                self.block_count,
                u32::MAX
            ));
        }
        if self.tx_batch == 0 || self.tx_batch > 1024 {
            return invalid(format!(
                "tx_batch {} must be between 1 and 1024 (the sendmmsg limit)",
                self.tx_batch
            ));
        }
        if let Some(bytes) = self.tx_send_buffer {
            if !(MIN_SEND_BUFFER..=i32::MAX as usize).contains(&bytes) {
                return invalid(format!(
                    "tx_send_buffer {bytes} must be between {MIN_SEND_BUFFER} (the kernel's \
                     least) and {} bytes, or unset for the kernel's default",
                    i32::MAX
                ));
            }
        }
        if !(14..=65535).contains(&self.tx_frame_size) {
            return invalid(format!(
                "tx_frame_size {} must be between 14 (an Ethernet header) and 65535",
                self.tx_frame_size
            ));
        }
        Ok(())
    }
}

/// Transmit counters. Every frame `send` accepted is in exactly one of `sent`, `dropped`
/// or `pending`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxStats {
    /// Frames the kernel accepted for transmission.
    pub sent: u64,
    /// Frames refused, by reason: larger than `tx_frame_size` or the MTU (`too_long`), or
    /// rejected by the kernel (`nobufs` when the driver queue is full; `refused` for
    /// ENETDOWN, ...).
    pub drops: TxDrops,
    /// Frames staged and not yet accepted by the kernel.
    pub pending: u64,
    /// Times a flush stopped early because the socket send buffer was full (EAGAIN); its
    /// frames stayed staged for the next flush.
    pub pushbacks: u64,
}

impl TxStats {
    /// Frames dropped, whatever the reason.
    pub fn dropped(&self) -> u64 {
        self.drops.total()
    }
}

/// An AF_PACKET device bound to one interface.
pub struct AfPacket {
    name: IfName,
    config: AfPacketConfig,
    /// The network namespace the device was opened in, for reopening there.
    netns: Namespace,
    rx: RxRing,
    tx_socket: OwnedFd,
    tx: TxBatch,
    interrupt_armed: bool,
    rx_ring_full: u64,
    rx_discarded: u64,
}

impl AfPacket {
    /// Opens the device on interface `name` in the calling thread's network namespace.
    /// The device keeps working from any thread (and namespace) afterwards.
    pub fn open(name: &str, config: AfPacketConfig) -> Result<AfPacket, OpenError> {
        let name = IfName::new(name)?;
        config.validate(name.as_str())?;
        let netns = Namespace::of_this_thread(name.as_str())?;
        let (rx, tx_socket) = open_sockets(&name, &config)?;
        let tx = TxBatch::new(config.tx_batch, config.tx_frame_size);
        Ok(AfPacket {
            name,
            config,
            netns,
            rx,
            tx_socket,
            tx,
            interrupt_armed: true,
            rx_ring_full: 0,
            rx_discarded: 0,
        })
    }

    /// Opens `members` devices on interface `name` joined in one new PACKET_FANOUT group
    /// (hash mode: each flow stays on one member, so its frames keep their order). The
    /// kernel picks a group id no other socket of the namespace uses
    /// (`PACKET_FANOUT_FLAG_UNIQUEID`); every member's config carries it, so a member
    /// reopened later joins the same group again.
    pub fn open_fanout(
        name: &str,
        members: usize,
        config: AfPacketConfig,
    ) -> Result<Vec<AfPacket>, OpenError> {
        let mut first = AfPacket::open(
            name,
            AfPacketConfig {
                fanout_group: None,
                ..config
            },
        )?;
        let group = first.rx.join_new_fanout_group().map_err(|e| {
            OpenError::from_os(name, "create a PACKET_FANOUT group", "CAP_NET_RAW", e)
        })?;
        first.config.fanout_group = Some(group);
        let mut devices = vec![first];
        while devices.len() < members {
            devices.push(AfPacket::open(name, devices[0].config.clone())?);
        }
        Ok(devices)
    }

    /// Reopens both sockets and the receive ring on the interface that now has this
    /// device's name (after it was deleted and recreated), in the namespace the device
    /// was opened in. Frames still unread in the old ring are counted in
    /// [`AfPacket::rx_discarded`]; staged transmit frames are kept.
    pub fn reopen(&mut self) -> Result<(), OpenError> {
        let (rx, tx_socket) = self
            .netns
            .run(&self.name, || open_sockets(&self.name, &self.config))?;
        self.collect_ring_drops();
        self.rx_discarded += self.rx.unread_frames();
        self.rx = rx;
        self.tx_socket = tx_socket;
        Ok(())
    }

    pub fn config(&self) -> &AfPacketConfig {
        &self.config
    }

    /// Transmit counters; see [`TxStats`].
    pub fn tx_stats(&self) -> TxStats {
        self.tx.stats()
    }

    /// Received frames thrown away unread because the device was reopened.
    pub fn rx_discarded(&self) -> u64 {
        self.rx_discarded
    }

    /// Whether the dataplane should currently wait on [`Device::interrupt_fd`].
    pub fn interrupt_armed(&self) -> bool {
        self.interrupt_armed
    }

    /// Adds the kernel's ring-full drops since the last read (the counter resets on read).
    fn collect_ring_drops(&mut self) {
        if let Ok(drops) = self.rx.take_ring_drops() {
            self.rx_ring_full += drops;
        }
    }
}

impl Device for AfPacket {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The interrupt is the receive socket: readable when the kernel retires a block. After
    /// the link went down it also reports EPOLLERR (a pending ENETDOWN) until
    /// `check_status` reads the error, so a dataplane that sees EPOLLERR should run
    /// `check_status`. The transmit-ready line is the transmit socket: writable once at
    /// most half its send buffer is held. The batch: one `sendmmsg` takes all of it; `send`
    /// refuses a frame beyond it only while the kernel pushes back.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::new()
            .with_interrupt_fd(self.rx.socket())
            .with_tx_ready(TxReadyLine::Writable(self.tx_socket.as_fd()))
            .with_tx_batch(self.tx.capacity())
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        self.rx.receive(budget, rx)
    }

    fn rx_ready(&mut self) -> bool {
        self.rx.ready()
    }

    /// Stages `frame`; a full batch is pushed first, so `send` refuses only while the
    /// kernel holds a full batch back. Once the kernel refused, a full batch is not pushed
    /// again here (that would be a failing `sendmmsg` per frame): `tx_room` and the flush
    /// at the end of the work retry it.
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if self.tx.is_full() && !self.tx.refused() {
            self.flush();
        }
        self.tx.stage(frame)
    }

    /// A whole batch, or 0 while the kernel pushes back the frames staged (retried once
    /// here: frames held back after the last flush of a cycle or handler wait for this
    /// retry when no transmit-ready line is armed). `send` pushes full batches itself, so a
    /// batch is not a hard limit; it is how much interrupt work and polls take between two
    /// looks at the kernel's pushback.
    fn tx_room(&mut self) -> usize {
        if self.tx.refused() {
            self.flush();
        }
        if self.tx.refused() {
            0
        } else {
            self.tx.capacity()
        }
    }

    fn flush(&mut self) {
        self.tx.push(self.tx_socket.as_fd());
    }

    /// Reads the link flags. A deleted interface is `Gone`, and so is one recreated under
    /// the same name: this device is bound to the old one. Reopening is the caller's
    /// explicit action ([`AfPacket::reopen`], or a new device), never a status check's.
    fn check_status(&mut self) -> LinkState {
        // A link going down leaves ENETDOWN pending on the socket, which makes epoll
        // report it ready (EPOLLERR) until someone reads the error.
        self.rx.clear_socket_error();
        match iface::index(self.rx.socket(), &self.name) {
            Some(index) if index == self.rx.ifindex() => {
                iface::link_state(self.rx.socket(), &self.name)
            }
            _ => LinkState::Gone,
        }
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.interrupt_armed = armed;
    }

    fn hw_stats(&mut self) -> HwStats {
        self.collect_ring_drops();
        HwStats {
            rx_ring_full: self.rx_ring_full,
            tx_drops: self.tx.stats().drops,
            ..HwStats::default()
        }
    }
}

/// Opens the receive ring and the transmit socket on interface `name`.
fn open_sockets(name: &IfName, config: &AfPacketConfig) -> Result<(RxRing, OwnedFd), OpenError> {
    let rx = RxRing::open(name, config)?;
    let tx_socket = open_tx_socket(name, rx.ifindex(), config.tx_send_buffer)?;
    Ok((rx, tx_socket))
}

/// The size of a memory page, which ring blocks must be a multiple of.
pub(crate) fn page_size() -> usize {
    rustix::param::page_size()
}

/// Creates a non-blocking AF_PACKET raw socket with `protocol` (network byte order).
pub(crate) fn packet_socket(name: &IfName, protocol: u16) -> Result<OwnedFd, OpenError> {
    let protocol = std::num::NonZeroU32::new(u32::from(protocol)).map(Protocol::from_raw);
    rustix::net::socket_with(
        AddressFamily::PACKET,
        SocketType::RAW,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        protocol,
    )
    .map_err(|e| {
        OpenError::from_os(
            name.as_str(),
            "open an AF_PACKET socket",
            "CAP_NET_RAW",
            e.into(),
        )
    })
}

/// A packet socket's address (`struct sockaddr_ll`) as `bind` takes it: an interface and
/// a protocol.
struct LinkAddr(libc::sockaddr_ll);

// SAFETY: `with_sockaddr` passes a pointer to a whole, live `sockaddr_ll` and its length.
unsafe impl SocketAddrArg for LinkAddr {
    unsafe fn with_sockaddr<R>(
        &self,
        f: impl FnOnce(*const SocketAddrOpaque, SocketAddrLen) -> R,
    ) -> R {
        f(
            (&self.0 as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as SocketAddrLen,
        )
    }
}

/// Binds a packet socket to interface `ifindex` for `protocol` (network byte order; 0
/// means "transmit only": no frame is ever queued to the socket).
pub(crate) fn bind_packet_socket(
    fd: BorrowedFd<'_>,
    name: &IfName,
    ifindex: u32,
    protocol: u16,
) -> Result<(), OpenError> {
    let addr = LinkAddr(libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol,
        sll_ifindex: ifindex as i32,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    });
    rustix::net::bind(fd, &addr).map_err(|e| {
        OpenError::from_os(
            name.as_str(),
            "bind the AF_PACKET socket to the interface",
            "CAP_NET_RAW",
            e.into(),
        )
    })
}

/// A blocking AF_PACKET raw socket bound to interface `ifname` (in the calling thread's
/// namespace) that receives `protocol` frames (network byte order; 0: transmit only), for
/// tools and tests that send or capture raw frames outside a device.
pub fn raw_socket(ifname: &str, protocol: u16) -> Result<OwnedFd, OpenError> {
    let name = IfName::new(ifname)?;
    let socket = packet_socket(&name, protocol)?;
    let fd = socket.as_fd();
    if let Ok(flags) = rustix::fs::fcntl_getfl(fd) {
        let _ = rustix::fs::fcntl_setfl(fd, flags - OFlags::NONBLOCK);
    }
    let ifindex = iface::index(fd, &name).ok_or_else(|| OpenError::InterfaceNotFound {
        interface: ifname.to_string(),
    })?;
    bind_packet_socket(fd, &name, ifindex, protocol)?;
    Ok(socket)
}

/// The transmit socket: protocol 0 so the kernel never queues received frames on it,
/// and PACKET_QDISC_BYPASS so frames go straight to the driver (veth has no qdisc work
/// to do; docs/measuring.md §ref-gen measured bypass at least as fast), with a send
/// buffer of `send_buffer` bytes as the kernel counts them (`None`: its default).
fn open_tx_socket(
    name: &IfName,
    ifindex: u32,
    send_buffer: Option<usize>,
) -> Result<OwnedFd, OpenError> {
    let socket = packet_socket(name, 0)?;
    sys::set_packet_option(socket.as_fd(), libc::PACKET_QDISC_BYPASS, 1).map_err(|e| {
        OpenError::from_os(
            name.as_str(),
            "enable PACKET_QDISC_BYPASS",
            "CAP_NET_RAW",
            e,
        )
    })?;
    if let Some(bytes) = send_buffer {
        // Validated to fit; the kernel doubles what it is given.
        rustix::net::sockopt::set_socket_send_buffer_size(&socket, bytes / 2).map_err(|e| {
            OpenError::from_os(
                name.as_str(),
                "size the send buffer",
                "CAP_NET_RAW",
                e.into(),
            )
        })?;
    }
    bind_packet_socket(socket.as_fd(), name, ifindex, 0)?;
    Ok(socket)
}

/// A shared memory mapping of a packet ring, unmapped on drop.
pub(crate) struct RingMapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned memory (like a Box<[u8]>); moving it to another thread
// moves the only handle to it.
unsafe impl Send for RingMapping {}

impl RingMapping {
    /// Maps `len` bytes of the ring(s) set up on `fd`.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<RingMapping> {
        // SAFETY: a fresh shared mapping of the socket's ring, at an address the kernel
        // picks: no memory we use changes.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
                fd,
                0,
            )
        }?;
        let base =
            NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(RingMapping { base, len })
    }

    /// The address `offset` bytes into the mapping (callers stay within it; checked in
    /// debug builds).
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset < self.len);
        self.base.as_ptr().wrapping_add(offset)
    }
}

impl Drop for RingMapping {
    fn drop(&mut self) {
        // SAFETY: base/len describe a mapping we own and nobody uses after drop.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}
