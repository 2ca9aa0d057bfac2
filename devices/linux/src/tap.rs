//! The TAP device: a kernel network interface whose other side is a file descriptor.
//!
//! Frames the kernel transmits on the interface are read from the fd; frames written to
//! the fd arrive at the kernel as if received on the interface. All the receive work a
//! frame costs polld happens inside polld's own `read()`, and when polld does not read,
//! the interface's queue (txqueuelen frames) fills and the *sender* drops, on its own
//! CPU: exactly a NIC whose ring overflows. That makes TAP the device where polld's
//! budget bounds all the device work, as `kern_poll` does.
//!
//! `receive` is one `read` per frame into a reusable buffer, `send` one `write`. The tun
//! driver hands out one frame per `read`/`readv` and takes one per `write`, so the only
//! batching Linux offers is in the number of system calls: io_uring. Measured with
//! `examples/tap_rates.rs` (reader on CPU1, AF_XDP flood from CPU0, 60-byte frames,
//! 2026-11-24): glibc `read` 878 kpps, `syscall(SYS_read)` 899 kpps, io_uring with 8 and
//! 64 reads per `io_uring_enter` 871 and 920 kpps. Every candidate read what the
//! fastest single-core sender on this machine offered, and the plain reader still found
//! the queue empty on 71 % of its attempts: reading is not where a TAP forwarder runs
//! out of CPU, so polld keeps the plain `read` (no ring to set up and tear down on
//! reopen, no extra dependency). IFF_NAPI only changes the write side's delivery into
//! the stack and multi-queue spreads queues over CPUs; neither was measured. On the TAP
//! testbed polld forwarded 0.75–0.89 Mpps with this path (the README of commit b3d19df,
//! "TAP").
//! The fd is non-blocking and its readiness is the interrupt.
//!
//! A TAP can live in another network namespace than polld ([`Tap::open_in`]); the
//! device remembers it and reports itself gone when the interface or the namespace is
//! deleted (or replaced by a new one of the same name). Attaching to the new one is an
//! explicit action: a new device, which polld's runtime opens off the poll thread.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use polld_core::device::{Capabilities, Device, HwStats, LinkState, TxDrop, TxDrops, TxFull};
use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

use crate::error::OpenError;
use crate::iface::{self, IfName, IfReqIoctl, LinkCounters, Namespace};

const TUN_PATH: &str = "/dev/net/tun";

/// Large enough for any frame a TAP without offloads hands us (IP's 64 KiB limit plus
/// the Ethernet header).
const READ_BUFFER_SIZE: usize = 65536 + 18;

/// A TAP interface, created if it did not exist, attached to if it did.
pub struct Tap {
    name: IfName,
    /// The namespace the interface lives in, to notice when it is deleted.
    netns: Namespace,
    attached: Attachment,
    /// Whether polld created the interface (it goes away when polld closes it) rather
    /// than attaching to an existing persistent one.
    created: bool,
    buffer: Vec<u8>,
    interrupt_armed: bool,
    /// Writes the kernel refused, by reason.
    tx_drops: TxDrops,
}

/// The fd attached to one incarnation of the interface, and what reads its state.
struct Attachment {
    tun: File,
    /// A socket of the interface's namespace, for the interface-flags ioctls.
    control: OwnedFd,
    ifindex: u32,
    /// The interface's transmit drops: frames the kernel could not queue to us.
    counters: LinkCounters,
    /// Those drops when we attached, and the latest reading.
    drops_at_open: u64,
    drops_now: u64,
}

impl Attachment {
    fn drops(&self) -> u64 {
        self.drops_now.saturating_sub(self.drops_at_open)
    }
}

impl Tap {
    /// Creates the TAP interface `name` (up, and gone again when the device is dropped)
    /// or attaches to the existing one, in the calling thread's network namespace.
    pub fn open(name: &str) -> Result<Tap, OpenError> {
        Tap::open_in(Namespace::of_this_thread(name)?, name)
    }

    /// As [`Tap::open`], in network namespace `netns` (entered for the open only, which
    /// needs CAP_SYS_ADMIN when it is not the caller's).
    pub fn open_in(netns: Namespace, name: &str) -> Result<Tap, OpenError> {
        Tap::open_with(netns, name, Create::IfMissing)
    }

    /// Attaches to the existing TAP `name` in `netns`; never creates one (to take up an
    /// interface that was deleted and made again by whoever owns it).
    pub fn attach_in(netns: Namespace, name: &str) -> Result<Tap, OpenError> {
        Tap::open_with(netns, name, Create::Never)
    }

    fn open_with(netns: Namespace, name: &str, create: Create) -> Result<Tap, OpenError> {
        let name = IfName::new(name)?;
        let (attached, created) = netns.enter_while(name.as_str(), || attach(&name, create))??;
        Ok(Tap {
            name,
            netns,
            attached,
            created,
            buffer: vec![0; READ_BUFFER_SIZE],
            interrupt_armed: true,
            tx_drops: TxDrops::default(),
        })
    }

    /// Whether this device created its interface (rather than attaching to one).
    pub fn created(&self) -> bool {
        self.created
    }

    /// The network namespace the interface lives in, if it was opened by name.
    pub fn netns_name(&self) -> Option<&str> {
        self.netns.name()
    }

    /// Whether the dataplane should currently wait on [`Device::interrupt_fd`].
    pub fn interrupt_armed(&self) -> bool {
        self.interrupt_armed
    }

    /// The link state. The interface deleted, replaced by a new one of the same name, or
    /// unreachable because its namespace was deleted (`ip netns del`: polld's fds keep
    /// the namespace alive, but nothing else can reach it) is `Gone`: this fd belongs to
    /// the old one.
    fn link(&self) -> LinkState {
        if !self.netns.still_named() {
            return LinkState::Gone;
        }
        let control = self.attached.control.as_fd();
        match iface::index(control, &self.name) {
            Some(index) if index == self.attached.ifindex => iface::link_state(control, &self.name),
            _ => LinkState::Gone,
        }
    }
}

/// Whether opening a TAP that does not exist creates it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Create {
    IfMissing,
    Never,
}

/// Opens `/dev/net/tun` and attaches it to TAP `name` in the calling thread's
/// namespace, creating (and bringing up) the interface if it does not exist. Returns the
/// attachment and whether the interface was created.
fn attach(name: &IfName, create: Create) -> Result<(Attachment, bool), OpenError> {
    let interface = name.as_str();
    let control = iface::ioctl_socket()
        .map_err(|e| OpenError::from_os(interface, "open a control socket", "CAP_NET_ADMIN", e))?;
    let existed = iface::index(control.as_fd(), name).is_some();
    if !existed && create == Create::Never {
        return Err(OpenError::InterfaceNotFound {
            interface: interface.to_string(),
        });
    }
    let tun = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(TUN_PATH)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => OpenError::TunMissing,
            _ => OpenError::from_os(interface, "open /dev/net/tun", "CAP_NET_ADMIN", e),
        })?;
    let mut request = name.ifreq();
    request.set_flags((libc::IFF_TAP | libc::IFF_NO_PI) as i16);
    if let Err(e) = iface::ifreq_ioctl(tun.as_fd(), IfReqIoctl::TunSetInterface, &mut request) {
        return Err(match e.raw_os_error() {
            Some(libc::EINVAL) => OpenError::InvalidConfig {
                interface: interface.to_string(),
                detail: "it exists and is not a TAP interface (a TUN, or another kind of \
                         device); pick another name, or delete it with `ip link del`"
                    .into(),
            },
            Some(libc::EBUSY) => OpenError::InvalidConfig {
                interface: interface.to_string(),
                detail: "the TAP interface is already attached to another process; stop \
                         that process (`fuser -v /dev/net/tun` lists it) or use another TAP"
                    .into(),
            },
            _ => OpenError::from_os(
                interface,
                "create or attach the TAP interface",
                "CAP_NET_ADMIN",
                e,
            ),
        });
    }
    if !existed {
        set_up(control.as_fd(), name)?;
    }
    let ifindex =
        iface::index(control.as_fd(), name).ok_or_else(|| OpenError::InterfaceNotFound {
            interface: interface.to_string(),
        })?;
    let counter_error = |source| OpenError::Os {
        interface: interface.to_string(),
        action: "read the interface counters over rtnetlink",
        source,
    };
    let mut counters = LinkCounters::open(ifindex).map_err(counter_error)?;
    let drops_at_open = counters.tx_dropped().map_err(counter_error)?;
    Ok((
        Attachment {
            tun,
            control,
            ifindex,
            counters,
            drops_at_open,
            drops_now: drops_at_open,
        },
        !existed,
    ))
}

/// Sets IFF_UP on a TAP this device created: nobody else knows it exists.
fn set_up(control: BorrowedFd<'_>, name: &IfName) -> Result<(), OpenError> {
    let mut request = name.ifreq();
    iface::ifreq_ioctl(control, IfReqIoctl::GetFlags, &mut request)
        .and_then(|()| {
            request.set_flags(request.flags() | libc::IFF_UP as i16);
            iface::ifreq_ioctl(control, IfReqIoctl::SetFlags, &mut request)
        })
        .map_err(|e| {
            OpenError::from_os(
                name.as_str(),
                "bring the new TAP interface up",
                "CAP_NET_ADMIN",
                e,
            )
        })
}

impl Device for Tap {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The interrupt is the TUN fd's readability; no transmit-ready line (its writes do
    /// not block).
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::new().with_interrupt_fd(self.attached.tun.as_fd())
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let mut handed = 0;
        while handed < budget {
            let n = match rustix::io::read(&self.attached.tun, &mut self.buffer[..]) {
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                // EAGAIN: drained. Anything else (EBADFD once the interface is gone)
                // shows up in check_status.
                Err(_) => break,
            };
            rx(&mut self.buffer[..n]);
            handed += 1;
        }
        handed
    }

    /// A zero-timeout `poll`: there is no shared ring to look at.
    fn rx_ready(&mut self) -> bool {
        let mut pollfd = [PollFd::new(&self.attached.tun, PollFlags::IN)];
        let no_wait = rustix::event::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let ready = rustix::event::poll(&mut pollfd, Some(&no_wait));
        ready.is_ok_and(|n| n > 0) && pollfd[0].revents().contains(PollFlags::IN)
    }

    /// One `write`. A write that cannot go is never lost silently: EAGAIN is [`TxFull`]
    /// (the dataplane counts the frame `tx_ring_full` on its input interface); ENOBUFS (no
    /// buffer in the kernel) and any other refusal (EIO: the interface is down, EINVAL)
    /// are counted here as `tx_drops.nobufs` and `tx_drops.refused`.
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        loop {
            match rustix::io::write(&self.attached.tun, frame) {
                Ok(_) => return Ok(()),
                Err(Errno::INTR) => continue,
                Err(Errno::AGAIN) => return Err(TxFull),
                Err(Errno::NOBUFS) => self.tx_drops.add(TxDrop::NoBufs, 1),
                Err(_) => self.tx_drops.add(TxDrop::Refused, 1),
            }
            return Ok(());
        }
    }

    /// Writes are immediate: nothing is queued on our side.
    fn flush(&mut self) {}

    /// Reads the link flags: `Gone` once the interface or its namespace was deleted, also
    /// when a new one took the name (attaching to it is the caller's explicit action: a
    /// new device). Also reads the queue-full drops.
    fn check_status(&mut self) -> LinkState {
        let state = self.link();
        if let Ok(drops) = self.attached.counters.tx_dropped() {
            self.attached.drops_now = drops;
        }
        state
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.interrupt_armed = armed;
    }

    /// The kernel's transmit drops on the interface since we attached: frames that
    /// found the TAP's queue towards us full (its length is the interface's txqueuelen).
    /// As of the last status check: the dataplane asks after every poll, and reading
    /// the counter is an rtnetlink round trip that would cost more than the frames.
    fn hw_stats(&mut self) -> HwStats {
        HwStats {
            rx_ring_full: self.attached.drops(),
            tx_drops: self.tx_drops,
            ..HwStats::default()
        }
    }
}
