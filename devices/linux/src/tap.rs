//! The TAP device: a kernel network interface whose other side is a file descriptor.
//!
//! Frames the kernel transmits on the interface are read from the fd; frames written to
//! the fd arrive at the kernel as if received on the interface. There is no shared ring:
//! `receive` is one `read` per frame into a reusable buffer, `send` one `write`. The fd
//! is non-blocking and its readiness is the interrupt.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use polld_core::device::{Device, HwStats, LinkState, TxDrop, TxDrops, TxFull};

use crate::error::OpenError;
use crate::iface::{self, IfName, LinkCounters};

const TUN_PATH: &str = "/dev/net/tun";

/// Large enough for any frame a TAP without offloads hands us (IP's 64 KiB limit plus
/// the Ethernet header).
const READ_BUFFER_SIZE: usize = 65536 + 18;

/// A TAP interface, created if it did not exist, attached to if it did.
pub struct Tap {
    name: IfName,
    tun: File,
    /// Any socket of the namespace, for the interface-flags ioctl.
    control: OwnedFd,
    buffer: Vec<u8>,
    interrupt_armed: bool,
    tx_dropped: u64,
    /// The interface's transmit drops: frames the kernel could not queue to us.
    counters: LinkCounters,
    /// Those drops when we attached, and the latest reading.
    drops_at_open: u64,
    drops_now: u64,
}

impl Tap {
    /// Creates the TAP interface `name` (down, as the kernel creates it) or attaches to
    /// the existing one, in the caller's network namespace.
    pub fn open(name: &str) -> Result<Tap, OpenError> {
        let requested = IfName::new(name)?;
        let tun = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(TUN_PATH)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => OpenError::TunMissing,
                _ => OpenError::from_os(name, "open /dev/net/tun", "CAP_NET_ADMIN", e),
            })?;
        let mut request = requested.ifreq();
        request.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and updates the ifreq we pass.
        let rc = unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETIFF, &mut request) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINVAL) => OpenError::InvalidConfig {
                    interface: name.to_string(),
                    detail: "it exists and is not a TAP interface".into(),
                },
                Some(libc::EBUSY) => OpenError::InvalidConfig {
                    interface: name.to_string(),
                    detail: "the TAP interface is already attached to another process".into(),
                },
                _ => OpenError::from_os(
                    name,
                    "create or attach the TAP interface",
                    "CAP_NET_ADMIN",
                    e,
                ),
            });
        }
        // SAFETY: plain socket creation; the fd is owned below.
        let control =
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if control < 0 {
            return Err(OpenError::from_os(
                name,
                "open a control socket",
                "CAP_NET_ADMIN",
                io::Error::last_os_error(),
            ));
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let control = unsafe { OwnedFd::from_raw_fd(control) };
        let ifindex = iface::index(control.as_raw_fd(), &requested).ok_or_else(|| {
            OpenError::InterfaceNotFound {
                interface: name.to_string(),
            }
        })?;
        let counter_error = |source| OpenError::Os {
            interface: name.to_string(),
            action: "read the interface counters over rtnetlink",
            source,
        };
        let mut counters = LinkCounters::open(ifindex).map_err(counter_error)?;
        let drops_at_open = counters.tx_dropped().map_err(counter_error)?;
        Ok(Tap {
            name: requested,
            tun,
            control,
            buffer: vec![0; READ_BUFFER_SIZE],
            interrupt_armed: true,
            tx_dropped: 0,
            counters,
            drops_at_open,
            drops_now: drops_at_open,
        })
    }

    /// Frames `send` could not write for a reason other than a full queue (link down,
    /// malformed frame); they were counted here and not reported as [`TxFull`].
    pub fn tx_dropped(&self) -> u64 {
        self.tx_dropped
    }

    /// Whether the dataplane should currently wait on [`Device::interrupt_fd`].
    pub fn interrupt_armed(&self) -> bool {
        self.interrupt_armed
    }
}

impl Device for Tap {
    fn name(&self) -> &str {
        self.name.as_str()
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let mut handed = 0;
        while handed < budget {
            // SAFETY: reads into our own buffer, at most its length.
            let n = unsafe {
                libc::read(
                    self.tun.as_raw_fd(),
                    self.buffer.as_mut_ptr().cast(),
                    self.buffer.len(),
                )
            };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // EAGAIN: drained. Anything else (EBADFD once the interface is gone)
                // shows up in check_status.
                break;
            }
            rx(&mut self.buffer[..n as usize]);
            handed += 1;
        }
        handed
    }

    /// A zero-timeout `poll`: there is no shared ring to look at.
    fn rx_ready(&mut self) -> bool {
        let mut pollfd = libc::pollfd {
            fd: self.tun.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, no waiting.
        let rc = unsafe { libc::poll(&mut pollfd, 1, 0) };
        rc > 0 && pollfd.revents & libc::POLLIN != 0
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        loop {
            // SAFETY: writes `frame`, which is live for the call.
            let n =
                unsafe { libc::write(self.tun.as_raw_fd(), frame.as_ptr().cast(), frame.len()) };
            if n >= 0 {
                return Ok(());
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Err(TxFull),
                _ => {
                    self.tx_dropped += 1;
                    return Ok(());
                }
            }
        }
    }

    /// Writes are immediate: nothing is queued on our side.
    fn flush(&mut self) {}

    fn check_status(&mut self) -> LinkState {
        iface::link_state(self.control.as_raw_fd(), &self.name)
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.interrupt_armed = armed;
    }

    fn interrupt_fd(&self) -> Option<RawFd> {
        Some(self.tun.as_raw_fd())
    }

    /// The kernel's transmit drops on the interface since we attached: frames that
    /// found the TAP's queue towards us full (its length is the interface's txqueuelen).
    fn hw_stats(&mut self) -> HwStats {
        if let Ok(drops) = self.counters.tx_dropped() {
            self.drops_now = drops;
        }
        let mut tx_drops = TxDrops::default();
        tx_drops.add(TxDrop::Refused, self.tx_dropped);
        HwStats {
            rx_ring_full: self.drops_now.saturating_sub(self.drops_at_open),
            tx_drops,
            ..HwStats::default()
        }
    }
}
