//! Interface names, indexes and link flags, shared by the AF_PACKET and TAP devices.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

use polld_core::device::LinkState;

use crate::error::OpenError;

/// A validated interface name, ready for `ifreq`.
#[derive(Clone, Debug)]
pub(crate) struct IfName {
    text: String,
    c_name: CString,
}

impl IfName {
    pub(crate) fn new(name: &str) -> Result<IfName, OpenError> {
        let invalid = |reason| OpenError::InvalidName {
            interface: name.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.len() >= libc::IFNAMSIZ {
            return Err(invalid("longer than 15 bytes"));
        }
        if name
            .bytes()
            .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
        {
            return Err(invalid("contains '/', a NUL or whitespace"));
        }
        let c_name = CString::new(name).map_err(|_| invalid("contains a NUL"))?;
        Ok(IfName {
            text: name.to_string(),
            c_name,
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// An `ifreq` with only the name filled in.
    pub(crate) fn ifreq(&self) -> libc::ifreq {
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(self.c_name.as_bytes()) {
            *dst = *src as libc::c_char;
        }
        req
    }
}

/// The interface's index, looked up with SIOCGIFINDEX on socket `fd`: in the socket's
/// network namespace, which may differ from the calling thread's.
pub(crate) fn index(fd: RawFd, name: &IfName) -> Option<u32> {
    let mut req = name.ifreq();
    // SAFETY: SIOCGIFINDEX reads the name from and writes the index into `req`.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFINDEX, &mut req) };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success the kernel filled the ifindex member of the union.
    Some(unsafe { req.ifr_ifru.ifru_ifindex } as u32)
}

/// Reads the interface MTU with SIOCGIFMTU on any socket `fd`; `None` if the interface
/// is gone.
pub(crate) fn mtu_on(fd: RawFd, name: &IfName) -> Option<u32> {
    let mut req = name.ifreq();
    // SAFETY: SIOCGIFMTU reads the name from and writes the MTU into `req`.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU, &mut req) };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success the kernel filled the mtu member of the union.
    Some(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// The longest frame an interface of MTU `mtu` transmits: the MTU, the Ethernet header
/// and one VLAN tag (the kernel's `is_skb_forwardable` bound). Longer frames are dropped
/// by the kernel without a count polld could read, so the devices drop them first.
pub(crate) fn max_frame(mtu: u32) -> usize {
    mtu as usize + 14 + 4
}

/// Reads the interface flags with SIOCGIFFLAGS on any socket `fd`: up and running is
/// [`LinkState::Up`], a missing interface [`LinkState::Gone`], anything else `Down`.
pub(crate) fn link_state(fd: RawFd, name: &IfName) -> LinkState {
    let mut req = name.ifreq();
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) };
    if rc != 0 {
        return match io::Error::last_os_error().raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => LinkState::Gone,
            _ => LinkState::Down,
        };
    }
    // SAFETY: the kernel filled the flags member of the union.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    let up_and_running = libc::IFF_UP | libc::IFF_RUNNING;
    if flags & up_and_running == up_and_running {
        LinkState::Up
    } else {
        LinkState::Down
    }
}

/// Reads an interface's kernel counters over rtnetlink (RTM_GETLINK), through a socket
/// opened once in the interface's network namespace.
pub(crate) struct LinkCounters {
    socket: OwnedFd,
    ifindex: u32,
    reply: Vec<u8>,
    sequence: u32,
}

/// `rtnl_link_stats64.tx_dropped`: the eighth u64 of the IFLA_STATS64 attribute.
const TX_DROPPED_OFFSET: usize = 7 * 8;

impl LinkCounters {
    pub(crate) fn open(ifindex: u32) -> io::Result<LinkCounters> {
        // SAFETY: plain socket creation; the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(LinkCounters {
            // SAFETY: a fresh descriptor nobody else owns.
            socket: unsafe { OwnedFd::from_raw_fd(fd) },
            ifindex,
            // Room for a full RTM_NEWLINK reply with all its attributes.
            reply: vec![0; 32 * 1024],
            sequence: 0,
        })
    }

    /// Frames the interface dropped on transmit (for a TAP: the queue towards the
    /// reader was full).
    pub(crate) fn tx_dropped(&mut self) -> io::Result<u64> {
        self.sequence = self.sequence.wrapping_add(1);
        // nlmsghdr (16 bytes) + ifinfomsg (16 bytes) selecting the interface by index.
        let mut request = [0u8; 32];
        request[0..4].copy_from_slice(&32u32.to_ne_bytes());
        request[4..6].copy_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
        request[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
        request[8..12].copy_from_slice(&self.sequence.to_ne_bytes());
        request[20..24].copy_from_slice(&(self.ifindex as i32).to_ne_bytes());
        let fd = self.socket.as_raw_fd();
        // SAFETY: sends our request buffer.
        if unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel answers synchronously, before `send` returns; never wait for it.
        // SAFETY: receives into our reply buffer, at most its length.
        let len = unsafe {
            libc::recv(
                fd,
                self.reply.as_mut_ptr().cast(),
                self.reply.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if len < 0 {
            return Err(io::Error::last_os_error());
        }
        parse_tx_dropped(&self.reply[..len as usize])
    }
}

/// Finds `tx_dropped` in an RTM_NEWLINK reply, or the error an NLMSG_ERROR reply carries.
fn parse_tx_dropped(reply: &[u8]) -> io::Result<u64> {
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed RTM_NEWLINK reply");
    let u16_at = |at: usize| {
        reply
            .get(at..at + 2)
            .map(|b| u16::from_ne_bytes([b[0], b[1]]))
    };
    let message_type = u16_at(4).ok_or_else(malformed)?;
    if message_type == libc::NLMSG_ERROR as u16 {
        let errno = reply
            .get(16..20)
            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(malformed)?;
        return Err(io::Error::from_raw_os_error(-errno));
    }
    if message_type != libc::RTM_NEWLINK {
        return Err(malformed());
    }
    // Attributes follow the 16-byte nlmsghdr and the 16-byte ifinfomsg, 4-byte aligned.
    let mut at = 32;
    while let (Some(attr_len), Some(attr_type)) = (u16_at(at), u16_at(at + 2)) {
        let attr_len = usize::from(attr_len);
        if attr_len < 4 {
            break;
        }
        if attr_type & libc::NLA_TYPE_MASK as u16 == libc::IFLA_STATS64 {
            let field = at + 4 + TX_DROPPED_OFFSET;
            let bytes = reply.get(field..field + 8).ok_or_else(malformed)?;
            return Ok(u64::from_ne_bytes(
                bytes.try_into().map_err(|_| malformed())?,
            ));
        }
        at += attr_len.div_ceil(4) * 4;
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "no IFLA_STATS64 in the RTM_NEWLINK reply",
    ))
}

/// A datagram socket for interface ioctls in the calling thread's network namespace
/// (unlike /sys/class/net, sockets follow `setns`).
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the result is checked and owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether interface `name` exists in the calling thread's network namespace.
pub fn exists(name: &str) -> Result<bool, OpenError> {
    let ifname = IfName::new(name)?;
    let socket = ioctl_socket().map_err(|source| OpenError::Os {
        interface: name.to_string(),
        action: "look the interface up",
        source,
    })?;
    Ok(index(socket.as_raw_fd(), &ifname).is_some())
}

/// `struct ethtool_channels` of linux/ethtool.h.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// How many receive queues interface `name` has (ETHTOOL_GCHANNELS: receive-only plus
/// combined channels), in the calling thread's namespace; `None` when its driver does
/// not report channels. Needs no privilege.
pub fn rx_queues(name: &str) -> Result<Option<u32>, OpenError> {
    let ifname = IfName::new(name)?;
    let os = |source| OpenError::Os {
        interface: name.to_string(),
        action: "read the interface's channels (ETHTOOL_GCHANNELS)",
        source,
    };
    let socket = ioctl_socket().map_err(os)?;
    let mut channels = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    let mut req = ifname.ifreq();
    req.ifr_ifru.ifru_data = (&mut channels as *mut EthtoolChannels).cast();
    // SAFETY: SIOCETHTOOL reads the command from and writes the channels into `channels`,
    // which outlives the call.
    if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCETHTOOL, &mut req) } != 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(None),
            Some(libc::ENODEV) => Err(OpenError::InterfaceNotFound {
                interface: name.to_string(),
            }),
            _ => Err(os(e)),
        };
    }
    let queues = channels.rx_count + channels.combined_count;
    Ok((queues > 0).then_some(queues))
}

/// Asks the kernel about interface `name` in the calling thread's network namespace
/// with the `SIOCGIF*` ioctl `request` (unlike /sys/class/net it follows `setns`);
/// `action` says what for, in the error.
fn query(name: &str, request: libc::Ioctl, action: &'static str) -> Result<libc::ifreq, OpenError> {
    let ifname = IfName::new(name)?;
    let os = |source| OpenError::Os {
        interface: name.to_string(),
        action,
        source,
    };
    let socket = ioctl_socket().map_err(os)?;
    let mut req = ifname.ifreq();
    // SAFETY: a SIOCGIF* request reads the name from and writes its answer into `req`.
    if unsafe { libc::ioctl(socket.as_raw_fd(), request, &mut req) } != 0 {
        return Err(os(io::Error::last_os_error()));
    }
    Ok(req)
}

/// The MAC address of interface `name` in the calling thread's network namespace
/// (SIOCGIFHWADDR).
pub fn hardware_address(name: &str) -> Result<[u8; 6], OpenError> {
    let req = query(
        name,
        libc::SIOCGIFHWADDR,
        "read the interface's MAC address",
    )?;
    // SAFETY: on success the kernel filled the hwaddr member of the union.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (dst, src) in mac.iter_mut().zip(data) {
        *dst = src as u8;
    }
    Ok(mac)
}

/// The MTU of interface `name` in the calling thread's network namespace (SIOCGIFMTU).
pub fn mtu(name: &str) -> Result<u32, OpenError> {
    let req = query(name, libc::SIOCGIFMTU, "read the interface's MTU")?;
    // SAFETY: on success the kernel filled the mtu member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_mtu } as u32)
}

/// The network namespace a device was opened in, so that it can be reopened there from
/// whatever thread (and namespace) runs it later.
pub(crate) struct Namespace(File);

impl Namespace {
    /// The calling thread's namespace.
    pub(crate) fn of_this_thread(ifname: &str) -> Result<Namespace, OpenError> {
        File::open("/proc/thread-self/ns/net")
            .map(Namespace)
            .map_err(|source| OpenError::Os {
                interface: ifname.to_string(),
                action: "open the network namespace of the calling thread",
                source,
            })
    }

    /// Runs `open` inside this namespace: directly if the calling thread is already there,
    /// else on a short-lived thread that enters it (needs CAP_SYS_ADMIN).
    pub(crate) fn run<T: Send, E: Send + From<OpenError>>(
        &self,
        name: &IfName,
        open: impl FnOnce() -> Result<T, E> + Send,
    ) -> Result<T, E> {
        let identity = |m: std::fs::Metadata| (m.dev(), m.ino());
        let here = std::fs::metadata("/proc/thread-self/ns/net").map(identity);
        if here.is_ok() && here.ok() == self.0.metadata().map(identity).ok() {
            return open();
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    // SAFETY: setns on a namespace fd we own; affects only this new thread.
                    if unsafe { libc::setns(self.0.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                        return Err(E::from(OpenError::from_os(
                            name.as_str(),
                            "enter the interface's network namespace",
                            "CAP_SYS_ADMIN",
                            io::Error::last_os_error(),
                        )));
                    }
                    open()
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_with_the_reason() {
        assert!(IfName::new("veth1").is_ok());
        for bad in ["", "a-name-far-too-long", "a/b", "a b"] {
            let err = IfName::new(bad).unwrap_err().to_string();
            assert!(err.contains("not a valid interface name"), "{bad}: {err}");
        }
    }

    #[test]
    fn loopback_mtu_and_a_missing_name() {
        assert_eq!(mtu("lo").unwrap(), 65536);
        let err = mtu("polld-nosuch0").unwrap_err().to_string();
        assert!(err.contains("polld-nosuch0"), "{err}");
    }

    #[test]
    fn loopback_is_up_and_a_missing_name_is_gone() {
        // SAFETY: plain socket creation; closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        assert_eq!(link_state(fd, &IfName::new("lo").unwrap()), LinkState::Up);
        let missing = IfName::new("polld-nosuch0").unwrap();
        assert_eq!(link_state(fd, &missing), LinkState::Gone);
        assert_eq!(index(fd, &missing), None);
        assert_eq!(index(fd, &IfName::new("lo").unwrap()), Some(1));
        assert!(LinkCounters::open(1).unwrap().tx_dropped().is_ok());
        let missing_index = LinkCounters::open(u32::MAX >> 1).unwrap().tx_dropped();
        assert_eq!(
            missing_index.unwrap_err().raw_os_error(),
            Some(libc::ENODEV)
        );
        // SAFETY: fd is ours and not used after this.
        unsafe { libc::close(fd) };
    }
}
