//! Interface names, indexes and link flags, shared by the AF_PACKET and TAP devices.

use std::fs::File;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;

use polld_core::device::LinkState;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use rustix::thread::LinkNameSpaceType;

use crate::error::OpenError;

/// A validated interface name, ready for `ifreq`.
#[derive(Clone, Debug)]
pub(crate) struct IfName {
    text: String,
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
        Ok(IfName {
            text: name.to_string(),
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// An `ifreq` with only the name filled in.
    pub(crate) fn ifreq(&self) -> IfReq {
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: [0; IFREQ_DATA],
        };
        req.name[..self.text.len()].copy_from_slice(self.text.as_bytes());
        req
    }
}

/// The bytes of `struct ifreq` after the name: the union a request reads or answers.
const IFREQ_DATA: usize = size_of::<libc::ifreq>() - libc::IFNAMSIZ;

/// `struct ifreq`: the interface's name (NUL-padded), and the union a request reads or
/// answers, as bytes.
#[repr(C, align(8))]
pub(crate) struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: [u8; IFREQ_DATA],
}

const _: () = assert!(size_of::<IfReq>() == size_of::<libc::ifreq>());

impl IfReq {
    /// The union's first `int` (`ifr_mtu`).
    fn int(&self) -> i32 {
        i32::from_ne_bytes([self.data[0], self.data[1], self.data[2], self.data[3]])
    }

    /// The union's first `short` (`ifr_flags`).
    pub(crate) fn flags(&self) -> i16 {
        i16::from_ne_bytes([self.data[0], self.data[1]])
    }

    pub(crate) fn set_flags(&mut self, flags: i16) {
        self.data[..2].copy_from_slice(&flags.to_ne_bytes());
    }

    /// The address bytes of the union's `struct sockaddr` (`ifr_hwaddr.sa_data`).
    fn hardware_address(&self) -> &[u8] {
        &self.data[2..16]
    }
}

/// The `struct ifreq` ioctls polld makes. Each reads the name and at most the union of the
/// request, and writes nothing beyond the request; none follows a pointer in it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IfReqIoctl {
    GetMtu,
    GetFlags,
    SetFlags,
    GetHardwareAddress,
    /// `TUNSETIFF`, on a `/dev/net/tun` descriptor: attaches it to the TAP or TUN named.
    TunSetInterface,
}

/// Makes `request` with `req` on `fd` (a socket of the interface's namespace, or a
/// `/dev/net/tun` descriptor for [`IfReqIoctl::TunSetInterface`]).
pub(crate) fn ifreq_ioctl(
    fd: BorrowedFd<'_>,
    request: IfReqIoctl,
    req: &mut IfReq,
) -> io::Result<()> {
    let request = match request {
        IfReqIoctl::GetMtu => libc::SIOCGIFMTU,
        IfReqIoctl::GetFlags => libc::SIOCGIFFLAGS,
        IfReqIoctl::SetFlags => libc::SIOCSIFFLAGS,
        IfReqIoctl::GetHardwareAddress => libc::SIOCGIFHWADDR,
        IfReqIoctl::TunSetInterface => libc::TUNSETIFF,
    };
    // SAFETY: `req` is a whole, live `struct ifreq`, and no `IfReqIoctl` touches memory
    // beyond it.
    if unsafe { libc::ioctl(fd.as_raw_fd(), request, req as *mut IfReq) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The interface's index, looked up with SIOCGIFINDEX on socket `fd`: in the socket's
/// network namespace, which may differ from the calling thread's.
pub(crate) fn index(fd: BorrowedFd<'_>, name: &IfName) -> Option<u32> {
    rustix::net::netdevice::name_to_index(fd, name.as_str()).ok()
}

/// Reads the interface MTU with SIOCGIFMTU on any socket `fd`; `None` if the interface
/// is gone.
pub(crate) fn mtu_on(fd: BorrowedFd<'_>, name: &IfName) -> Option<u32> {
    let mut req = name.ifreq();
    ifreq_ioctl(fd, IfReqIoctl::GetMtu, &mut req).ok()?;
    Some(req.int() as u32)
}

/// The longest frame an interface of MTU `mtu` transmits: the MTU, the Ethernet header
/// and one VLAN tag (the kernel's `is_skb_forwardable` bound). Longer frames are dropped
/// by the kernel without a count polld could read, so the devices drop them first.
pub(crate) fn max_frame(mtu: u32) -> usize {
    mtu as usize + 14 + 4
}

/// Reads the interface flags with SIOCGIFFLAGS on any socket `fd`: up and running is
/// [`LinkState::Up`], a missing interface [`LinkState::Gone`], anything else `Down`.
pub(crate) fn link_state(fd: BorrowedFd<'_>, name: &IfName) -> LinkState {
    let mut req = name.ifreq();
    if let Err(e) = ifreq_ioctl(fd, IfReqIoctl::GetFlags, &mut req) {
        return match e.raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => LinkState::Gone,
            _ => LinkState::Down,
        };
    }
    let flags = i32::from(req.flags());
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
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            None, // NETLINK_ROUTE
        )?;
        Ok(LinkCounters {
            socket,
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
        rustix::net::send(&self.socket, &request, SendFlags::empty())?;
        // The kernel answers synchronously, before `send` returns; never wait for it.
        let (len, _) = rustix::net::recv(&self.socket, &mut self.reply[..], RecvFlags::DONTWAIT)?;
        parse_tx_dropped(&self.reply[..len])
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
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::DGRAM,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// The index of interface `name` in the calling thread's network namespace
/// (`if_nametoindex`).
pub fn index_here(name: &str) -> io::Result<u32> {
    Ok(rustix::net::netdevice::name_to_index(
        ioctl_socket()?,
        name,
    )?)
}

/// Whether interface `name` exists in the calling thread's network namespace.
pub fn exists(name: &str) -> Result<bool, OpenError> {
    let ifname = IfName::new(name)?;
    let socket = ioctl_socket().map_err(|source| OpenError::Os {
        interface: name.to_string(),
        action: "look the interface up",
        source,
    })?;
    Ok(index(socket.as_fd(), &ifname).is_some())
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
    let data = &mut channels as *mut EthtoolChannels as usize;
    req.data[..size_of::<usize>()].copy_from_slice(&data.to_ne_bytes());
    // SAFETY: SIOCETHTOOL reads the name from `req` and the command from the struct its
    // `ifr_data` points to, `channels`, and writes the answer there: a live
    // `struct ethtool_channels` of that command.
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
fn query(name: &str, request: IfReqIoctl, action: &'static str) -> Result<IfReq, OpenError> {
    let ifname = IfName::new(name)?;
    let os = |source| OpenError::Os {
        interface: name.to_string(),
        action,
        source,
    };
    let socket = ioctl_socket().map_err(os)?;
    let mut req = ifname.ifreq();
    ifreq_ioctl(socket.as_fd(), request, &mut req).map_err(os)?;
    Ok(req)
}

/// The MAC address of interface `name` in the calling thread's network namespace
/// (SIOCGIFHWADDR).
pub fn hardware_address(name: &str) -> Result<[u8; 6], OpenError> {
    let req = query(
        name,
        IfReqIoctl::GetHardwareAddress,
        "read the interface's MAC address",
    )?;
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&req.hardware_address()[..6]);
    Ok(mac)
}

/// The MTU of interface `name` in the calling thread's network namespace (SIOCGIFMTU).
pub fn mtu(name: &str) -> Result<u32, OpenError> {
    let req = query(name, IfReqIoctl::GetMtu, "read the interface's MTU")?;
    Ok(req.int() as u32)
}

/// The network namespace a device was opened in, so that it can be reopened there from
/// whatever thread (and namespace) runs it later. A namespace opened by name
/// ([`Namespace::named`], `netns = "gen"` in polld's config) also remembers the name, so
/// that a device can notice when `ip netns del` removed it.
pub struct Namespace {
    file: File,
    name: Option<String>,
}

/// Where `ip netns add` mounts a named namespace.
const NETNS_RUN_DIR: &str = "/var/run/netns";

/// A namespace file's identity: two opens of one namespace have the same device and inode.
fn identity(file: &File) -> Option<(u64, u64)> {
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

impl Namespace {
    /// The calling thread's namespace.
    pub fn of_this_thread(ifname: &str) -> Result<Namespace, OpenError> {
        File::open("/proc/thread-self/ns/net")
            .map(|file| Namespace { file, name: None })
            .map_err(|source| OpenError::Os {
                interface: ifname.to_string(),
                action: "open the network namespace of the calling thread",
                source,
            })
    }

    /// The namespace `ip netns add NAME` created.
    pub fn named(name: &str) -> Result<Namespace, OpenError> {
        let valid = !name.is_empty() && name != "." && name != ".." && !name.contains('/');
        let file = valid
            .then(|| File::open(format!("{NETNS_RUN_DIR}/{name}")).ok())
            .flatten()
            .ok_or_else(|| OpenError::NamespaceNotFound {
                namespace: name.to_string(),
            })?;
        Ok(Namespace {
            file,
            name: Some(name.to_string()),
        })
    }

    /// The name it was opened by, if any.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// For a namespace opened by name: whether that name still refers to it. `false`
    /// once `ip netns del` removed it (the namespace itself lives on while polld holds
    /// it, but nothing else can reach it), or the name now belongs to a new namespace.
    pub fn still_named(&self) -> bool {
        let Some(name) = &self.name else {
            return true;
        };
        let now = File::open(format!("{NETNS_RUN_DIR}/{name}"))
            .ok()
            .as_ref()
            .and_then(identity);
        now.is_some() && now == identity(&self.file)
    }

    /// Moves the calling thread into this namespace (`setns`).
    fn enter(&self) -> io::Result<()> {
        let kind = Some(LinkNameSpaceType::Network);
        Ok(rustix::thread::move_into_link_name_space(
            self.file.as_fd(),
            kind,
        )?)
    }

    fn is_current(&self) -> bool {
        let here = File::open("/proc/thread-self/ns/net")
            .ok()
            .as_ref()
            .and_then(identity);
        here.is_some() && here == identity(&self.file)
    }

    /// Runs `f` on the calling thread while it is inside this namespace, and returns the
    /// thread to its own namespace afterwards (needs CAP_SYS_ADMIN unless already there).
    /// For devices that cannot cross threads: sockets and fds keep the namespace they
    /// were opened in, so the device works from the original namespace afterwards.
    pub fn enter_while<T>(&self, ifname: &str, f: impl FnOnce() -> T) -> Result<T, OpenError> {
        if self.is_current() {
            return Ok(f());
        }
        let setns_error =
            |action, e: io::Error| OpenError::from_os(ifname, action, "CAP_SYS_ADMIN", e);
        let home = Namespace::of_this_thread(ifname)?;
        self.enter()
            .map_err(|e| setns_error("enter the interface's network namespace", e))?;
        let result = f();
        home.enter()
            .map_err(|e| setns_error("return from the interface's network namespace", e))?;
        Ok(result)
    }

    /// Runs `open` inside this namespace: directly if the calling thread is already there,
    /// else on a short-lived thread that enters it (needs CAP_SYS_ADMIN).
    pub(crate) fn run<T: Send, E: Send + From<OpenError>>(
        &self,
        name: &IfName,
        open: impl FnOnce() -> Result<T, E> + Send,
    ) -> Result<T, E> {
        if self.is_current() {
            return open();
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    if let Err(e) = self.enter() {
                        return Err(E::from(OpenError::from_os(
                            name.as_str(),
                            "enter the interface's network namespace",
                            "CAP_SYS_ADMIN",
                            e,
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
        let socket = ioctl_socket().unwrap();
        let fd = socket.as_fd();
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
    }
}
