//! A way into the kernel's own forwarding: raw IP sockets (`IPPROTO_RAW`, which implies
//! `IP_HDRINCL` and, for IPv6, `IPV6_HDRINCL`) of the namespace they were opened in.
//!
//! A packet sent on one leaves as the kernel's own: it is routed by the kernel's tables,
//! its next hop resolved by the kernel (which queues it while ARP or neighbour discovery
//! runs), and it passes the `OUTPUT` and `POSTROUTING` hooks, not `FORWARD`. The kernel
//! keeps the header as given: its source (no check that it is one of the box's, no
//! reverse-path filter on output), its TTL or hop limit (the caller's hop is not counted
//! again); it fills the IPv4 header checksum and, for an IPv4 datagram without DF and
//! an identification of 0, an identification. It does not fragment: a packet longer than
//! the MTU of its route is refused ([`SendError::TooBig`], with that MTU, read from a UDP
//! socket connected to the destination, `IP_MTU` / `IPV6_MTU`). Sends never block: a full
//! socket buffer (packets the kernel still holds, as those waiting for a neighbour) is an
//! error. Nothing is ever received on these sockets.
//!
//! IPv6 needs a source address of the kernel's for the route lookup of a packet it sends
//! (any address of the namespace will do, the packet keeps its own); without one, or with
//! IPv6 off in the kernel, IPv6 packets are refused.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
use std::os::fd::OwnedFd;

use rustix::io::Errno;
use rustix::net::{ipproto, AddressFamily, SendFlags, SocketType};

/// Why a packet was not sent.
#[derive(Debug)]
pub enum SendError {
    /// Longer than the MTU of the kernel's route for it, this MTU.
    TooBig(u32),
    /// Not an IPv4 or IPv6 packet, or refused by the kernel for this reason.
    Io(io::Error),
}

/// The raw IPv4 socket and, if the kernel has IPv6, the raw IPv6 socket of a namespace.
#[derive(Debug)]
pub struct RawIp {
    v4: OwnedFd,
    v6: Option<OwnedFd>,
}

impl RawIp {
    /// Opens the sockets in the calling thread's namespace (needs `CAP_NET_RAW`).
    pub fn open() -> io::Result<RawIp> {
        let raw = |family| {
            let flags = SocketType::RAW;
            rustix::net::socket_with(
                family,
                flags,
                rustix::net::SocketFlags::CLOEXEC,
                Some(ipproto::RAW),
            )
        };
        let v4 = raw(AddressFamily::INET)?;
        let v6 = match raw(AddressFamily::INET6) {
            Ok(fd) => Some(fd),
            Err(Errno::AFNOSUPPORT) => None,
            Err(e) => return Err(e.into()),
        };
        Ok(RawIp { v4, v6 })
    }

    /// Sends `packet`, an IPv4 or IPv6 packet from its IP header on, to its destination
    /// by the kernel's route.
    pub fn send(&self, packet: &[u8]) -> Result<(), SendError> {
        let invalid = || SendError::Io(io::Error::from(io::ErrorKind::InvalidInput));
        let flags = SendFlags::DONTWAIT;
        let sent = match packet.first().map(|b| b >> 4) {
            Some(4) if packet.len() >= 20 => {
                let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&packet[16..20]).expect("4 bytes"));
                let to = SocketAddrV4::new(dst, 0);
                rustix::net::sendto(&self.v4, packet, flags, &to).map_err(|e| (e, dst.into()))
            }
            Some(6) if packet.len() >= 40 => {
                let Some(v6) = &self.v6 else {
                    return Err(SendError::Io(Errno::AFNOSUPPORT.into()));
                };
                let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&packet[24..40]).expect("16 bytes"));
                let to = SocketAddrV6::new(dst, 0, 0, 0);
                rustix::net::sendto(v6, packet, flags, &to).map_err(|e| (e, dst.into()))
            }
            _ => return Err(invalid()),
        };
        match sent {
            Ok(_) => Ok(()),
            Err((Errno::MSGSIZE, dst)) => match route_mtu(dst) {
                Ok(mtu) => Err(SendError::TooBig(mtu)),
                Err(e) => Err(SendError::Io(e)),
            },
            Err((e, _)) => Err(SendError::Io(e.into())),
        }
    }
}

/// The MTU of the kernel's route to `dst`, as a UDP socket connected to it sees it.
fn route_mtu(dst: std::net::IpAddr) -> io::Result<u32> {
    let udp = |family| rustix::net::socket(family, SocketType::DGRAM, None);
    Ok(match dst {
        std::net::IpAddr::V4(dst) => {
            let fd = udp(AddressFamily::INET)?;
            rustix::net::connect(&fd, &SocketAddrV4::new(dst, 9))?;
            rustix::net::sockopt::ip_mtu(&fd)?
        }
        std::net::IpAddr::V6(dst) => {
            let fd = udp(AddressFamily::INET6)?;
            rustix::net::connect(&fd, &SocketAddrV6::new(dst, 9, 0, 0))?;
            rustix::net::sockopt::ipv6_mtu(&fd)?
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_neither_ipv4_nor_ipv6_is_refused_unsent() {
        polld_testsupport::require_root!("raw sockets need CAP_NET_RAW");
        let raw = RawIp::open().unwrap();
        for packet in [&[][..], &[0x45; 10], &[0x60; 39], &[0x50; 60]] {
            assert!(matches!(raw.send(packet), Err(SendError::Io(_))));
        }
    }
}
