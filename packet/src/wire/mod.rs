//! Zero-copy typed views over frame bytes, in the style of smoltcp: Ethernet, ARP, IPv4
//! and IPv6 (with its extension-header walk), UDP, ICMP and ICMPv6.
//!
//! Each view wraps a buffer `T: AsRef<[u8]>` (read) or `T: AsRef<[u8]> + AsMut<[u8]>`
//! (rewrite in place). `new_checked` validates lengths and the fields that the accessors
//! rely on, so that every accessor of a checked view is in bounds; `new_unchecked` is for
//! buffers the caller sized itself (building frames), where a too-short buffer panics.
//! Validation failures are a [`WireError`], which maps onto the [`PacketDrop`] the
//! stage's counters name.

pub mod arp;
pub mod checksum;
pub mod ethernet;
pub mod icmp;
pub mod icmpv6;
pub mod ipv4;
pub mod ipv6;
pub mod udp;

pub use arp::ArpPacket;
pub use ethernet::{EthernetFrame, MacAddr};
pub use icmp::IcmpPacket;
pub use ipv4::Ipv4Packet;
pub use ipv6::Ipv6Packet;
pub use udp::UdpPacket;

use crate::drops::PacketDrop;
use std::fmt;

/// Why a buffer is not a valid instance of the header it was checked as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the fixed header (or the length a header field claims).
    Truncated,
    /// IP version field other than the ethertype's (4 or 6).
    BadVersion,
    /// IPv4 IHL below 5, or a header longer than the buffer.
    BadIhl,
    /// A length field (IPv4 total length, UDP length) inconsistent with the buffer.
    BadLength,
    /// A checksum that does not verify.
    BadChecksum,
    /// ARP for a hardware/protocol pair other than Ethernet/IPv4.
    UnsupportedArp,
    /// An IPv6 extension-header chain that runs past the payload, is too long, or is
    /// out of order ([`Ipv6Packet::walk`]).
    BadExtHeader,
}

impl WireError {
    /// The drop counter this error is accounted under.
    pub fn drop_reason(self) -> PacketDrop {
        match self {
            WireError::Truncated => PacketDrop::Truncated,
            WireError::BadVersion => PacketDrop::BadVersion,
            WireError::BadIhl => PacketDrop::BadIhl,
            WireError::BadLength => PacketDrop::BadLength,
            WireError::BadChecksum => PacketDrop::BadChecksum,
            // An ARP variant polld does not speak is, like an unknown ethertype, a
            // protocol it does not handle.
            WireError::UnsupportedArp => PacketDrop::UnknownEthertype,
            WireError::BadExtHeader => PacketDrop::ExtHeaders,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            WireError::Truncated => "buffer shorter than the header",
            WireError::BadVersion => "IP version does not match the ethertype",
            WireError::BadIhl => "IPv4 IHL below 5 or beyond the buffer",
            WireError::BadLength => "length field inconsistent with the buffer",
            WireError::BadChecksum => "checksum does not verify",
            WireError::UnsupportedArp => "ARP is not Ethernet/IPv4",
            WireError::BadExtHeader => {
                "IPv6 extension headers past the payload, too many or out of order"
            }
        };
        f.write_str(text)
    }
}

impl std::error::Error for WireError {}

/// Reads a big-endian u16 at `at`.
pub(crate) fn read_u16(buf: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([buf[at], buf[at + 1]])
}

/// Writes a big-endian u16 at `at`.
pub(crate) fn write_u16(buf: &mut [u8], at: usize, value: u16) {
    buf[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// Reads an IPv4 address at `at`.
pub(crate) fn read_ipv4(buf: &[u8], at: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(buf[at], buf[at + 1], buf[at + 2], buf[at + 3])
}
