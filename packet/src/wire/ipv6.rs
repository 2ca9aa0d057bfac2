//! IPv6 headers (RFC 8200) and the walk over their extension headers.

use super::{read_u16, write_u16, WireError};
use std::net::Ipv6Addr;

/// Next-header values polld looks at.
pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AUTH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NO_NEXT_HEADER: u8 = 59;
    pub const DEST_OPTIONS: u8 = 60;
}

/// The most extension headers [`Ipv6Packet::walk`] follows before it gives up: more than
/// any legitimate packet carries (RFC 8200 §4.1 lists at most seven kinds, each once but
/// destination options twice).
pub const MAX_EXT_HEADERS: usize = 8;

/// A view of an IPv6 packet. The buffer may extend beyond the packet (Ethernet padding):
/// [`Ipv6Packet::packet`] and [`Ipv6Packet::payload`] stop at the payload length.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// What the extension-header chain of a packet says, once walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The upper-layer protocol (or `NO_NEXT_HEADER`, `ESP`, or the next header of a
    /// non-first fragment, whose chain stops at the fragment header).
    pub protocol: u8,
    /// Offset of the upper-layer header in the payload, when this packet carries it
    /// (not for a non-first fragment).
    pub upper_offset: Option<usize>,
    /// A hop-by-hop options header is present (first, as RFC 8200 requires).
    pub hop_by_hop: bool,
    /// A fragment header is present.
    pub fragment: bool,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    pub const HEADER_LEN: usize = 40;

    /// Wraps `buffer` without checks; accessors panic if it is shorter than the header
    /// or the payload length claims.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv6Packet { buffer }
    }

    /// Wraps `buffer` after checking a whole fixed header, version 6, and a payload
    /// length within the buffer.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let packet = Ipv6Packet { buffer };
        if packet.version() != 6 {
            return Err(WireError::BadVersion);
        }
        if Self::HEADER_LEN + usize::from(packet.payload_len()) > packet.buffer.as_ref().len() {
            return Err(WireError::BadLength);
        }
        Ok(packet)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        let b = self.buffer.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }

    pub fn flow_label(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([0, b[1] & 0x0F, b[2], b[3]])
    }

    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[6]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[7]
    }

    pub fn src_addr(&self) -> Ipv6Addr {
        read_ipv6(self.buffer.as_ref(), 8)
    }

    pub fn dst_addr(&self) -> Ipv6Addr {
        read_ipv6(self.buffer.as_ref(), 24)
    }

    /// The header and payload, without link padding.
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..Self::HEADER_LEN + usize::from(self.payload_len())]
    }

    /// Everything after the fixed header: extension headers and upper-layer data.
    pub fn payload(&self) -> &[u8] {
        &self.packet()[Self::HEADER_LEN..]
    }

    /// Follows the extension headers of a checked packet, never reading past the
    /// payload: a header that does not fit, a hop-by-hop header anywhere but first, a
    /// first fragment whose chain does not reach the upper-layer header (RFC 7112), or
    /// more than [`MAX_EXT_HEADERS`] headers is [`WireError::BadExtHeader`].
    pub fn walk(&self) -> Result<Chain, WireError> {
        let payload = self.payload();
        let mut chain = Chain {
            protocol: self.next_header(),
            upper_offset: None,
            hop_by_hop: false,
            fragment: false,
        };
        let mut at = 0usize;
        for n in 0..=MAX_EXT_HEADERS {
            let len = match chain.protocol {
                next_header::HOP_BY_HOP if n > 0 => return Err(WireError::BadExtHeader),
                next_header::HOP_BY_HOP | next_header::ROUTING | next_header::DEST_OPTIONS => {
                    chain.hop_by_hop |= chain.protocol == next_header::HOP_BY_HOP;
                    payload.get(at + 1).map(|&l| (usize::from(l) + 1) * 8)
                }
                next_header::AUTH => payload.get(at + 1).map(|&l| (usize::from(l) + 2) * 4),
                next_header::FRAGMENT => Some(8),
                _ => {
                    chain.upper_offset = Some(at);
                    return Ok(chain);
                }
            };
            let Some(len) = len.filter(|len| at + len <= payload.len()) else {
                return Err(WireError::BadExtHeader);
            };
            let next = payload[at];
            if chain.protocol == next_header::FRAGMENT {
                chain.fragment = true;
                let offset = read_u16(payload, at + 2) & !7;
                if offset != 0 {
                    // A later piece: its headers are in the first fragment.
                    chain.protocol = next;
                    return Ok(chain);
                }
            }
            chain.protocol = next;
            at += len;
        }
        Err(WireError::BadExtHeader)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Sets version 6, traffic class and flow label 0.
    pub fn set_version(&mut self) {
        self.buffer.as_mut()[..4].copy_from_slice(&[0x60, 0, 0, 0]);
    }

    pub fn set_payload_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 4, value);
    }

    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[6] = value;
    }

    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[7] = value;
    }

    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[8..24].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[24..40].copy_from_slice(&addr.octets());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = Self::HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

fn read_ipv6(buf: &[u8], at: usize) -> Ipv6Addr {
    let mut octets = [0u8; 16];
    octets.copy_from_slice(&buf[at..at + 16]);
    Ipv6Addr::from(octets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(next: u8, payload: &[u8]) -> Vec<u8> {
        let mut buf = vec![0u8; 40 + payload.len()];
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
        p.set_version();
        p.set_payload_len(payload.len() as u16);
        p.set_next_header(next);
        p.set_hop_limit(64);
        p.set_src_addr("2001:db8::1".parse().unwrap());
        p.set_dst_addr("2001:db8::2".parse().unwrap());
        p.payload_mut().copy_from_slice(payload);
        buf
    }

    #[test]
    fn fields_and_checks() {
        let buf = packet(next_header::UDP, &[0; 8]);
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0, 0));
        assert_eq!(
            (p.payload_len(), p.next_header(), p.hop_limit()),
            (8, 17, 64)
        );
        assert_eq!(p.src_addr().to_string(), "2001:db8::1");
        assert_eq!(p.dst_addr().to_string(), "2001:db8::2");
        assert_eq!(
            Ipv6Packet::new_checked(&buf[..39]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&buf[..47]).unwrap_err(),
            WireError::BadLength
        );
        let mut v4 = buf.clone();
        v4[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            WireError::BadVersion
        );
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0xEE; 6]);
        assert_eq!(
            Ipv6Packet::new_checked(&padded[..]).unwrap().packet(),
            &buf[..]
        );
    }

    #[test]
    fn walks_the_chain() {
        let walk =
            |next, payload: &[u8]| Ipv6Packet::new_unchecked(&packet(next, payload)[..]).walk();
        // Destination options (8 bytes), then a first fragment, then UDP.
        let mut chain = vec![next_header::FRAGMENT, 0, 1, 4, 0, 0, 0, 0];
        chain.extend_from_slice(&[next_header::UDP, 0, 0, 1, 0, 0, 0, 9]);
        chain.extend_from_slice(&[0; 8]);
        let c = walk(next_header::DEST_OPTIONS, &chain).unwrap();
        assert_eq!(
            c,
            Chain {
                protocol: next_header::UDP,
                upper_offset: Some(16),
                hop_by_hop: false,
                fragment: true
            }
        );
        // A later fragment stops the walk: its transport header is elsewhere.
        let later = [next_header::TCP, 0, 0, 8, 0, 0, 0, 9, 1, 2];
        let c = walk(next_header::FRAGMENT, &later).unwrap();
        assert_eq!((c.protocol, c.upper_offset), (next_header::TCP, None));
        // Hop-by-hop first is reported; anywhere else it is malformed.
        let hbh = [next_header::ICMPV6, 0, 5, 2, 0, 0, 1, 0];
        assert!(walk(next_header::HOP_BY_HOP, &hbh).unwrap().hop_by_hop);
        let late_hbh = [
            next_header::HOP_BY_HOP,
            0,
            1,
            4,
            0,
            0,
            0,
            0,
            58,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        assert_eq!(
            walk(next_header::DEST_OPTIONS, &late_hbh),
            Err(WireError::BadExtHeader)
        );
        // A header that claims more than the payload holds, or none at all.
        assert_eq!(
            walk(next_header::ROUTING, &[58, 1, 0, 0, 0, 0, 0, 0]),
            Err(WireError::BadExtHeader)
        );
        assert_eq!(
            walk(next_header::DEST_OPTIONS, &[]),
            Err(WireError::BadExtHeader)
        );
        assert_eq!(
            walk(next_header::FRAGMENT, &[58, 0, 0]),
            Err(WireError::BadExtHeader)
        );
        // A first fragment whose chain ends before the upper layer (RFC 7112).
        assert_eq!(
            walk(next_header::FRAGMENT, &[60, 0, 0, 1, 0, 0, 0, 1]),
            Err(WireError::BadExtHeader)
        );
        // Too many headers.
        let mut long = Vec::new();
        for _ in 0..=MAX_EXT_HEADERS {
            long.extend_from_slice(&[next_header::DEST_OPTIONS, 0, 1, 4, 0, 0, 0, 0]);
        }
        assert_eq!(
            walk(next_header::DEST_OPTIONS, &long),
            Err(WireError::BadExtHeader)
        );
        // No next header and ESP end the walk.
        assert_eq!(
            walk(next_header::NO_NEXT_HEADER, &[]).unwrap().upper_offset,
            Some(0)
        );
    }
}
