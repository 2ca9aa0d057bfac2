//! ARP for IPv4 over Ethernet (RFC 826).

use super::ethernet::{mac_at, MacAddr};
use super::{read_ipv4, read_u16, write_u16, WireError};
use std::net::Ipv4Addr;

/// ARP operation codes.
pub mod operation {
    pub const REQUEST: u16 = 1;
    pub const REPLY: u16 = 2;
}

const HTYPE_ETHERNET: u16 = 1;
const PTYPE_IPV4: u16 = 0x0800;

/// A view of an Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// The length of an Ethernet/IPv4 ARP packet.
    pub const LEN: usize = 28;

    /// Wraps `buffer` without checks; accessors panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        ArpPacket { buffer }
    }

    /// Wraps `buffer` after checking its length and that it is Ethernet/IPv4 ARP.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let buf = buffer.as_ref();
        if buf.len() < Self::LEN {
            return Err(WireError::Truncated);
        }
        if read_u16(buf, 0) != HTYPE_ETHERNET
            || read_u16(buf, 2) != PTYPE_IPV4
            || buf[4] != 6
            || buf[5] != 4
        {
            return Err(WireError::UnsupportedArp);
        }
        Ok(ArpPacket { buffer })
    }

    pub fn operation(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 6)
    }

    pub fn sender_hw_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 8)
    }

    pub fn sender_ip(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), 14)
    }

    pub fn target_hw_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 18)
    }

    pub fn target_ip(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Writes a whole Ethernet/IPv4 ARP packet.
    pub fn fill(&mut self, op: u16, sender: (MacAddr, Ipv4Addr), target: (MacAddr, Ipv4Addr)) {
        let buf = self.buffer.as_mut();
        write_u16(buf, 0, HTYPE_ETHERNET);
        write_u16(buf, 2, PTYPE_IPV4);
        buf[4] = 6;
        buf[5] = 4;
        write_u16(buf, 6, op);
        buf[8..14].copy_from_slice(&sender.0 .0);
        buf[14..18].copy_from_slice(&sender.1.octets());
        buf[18..24].copy_from_slice(&target.0 .0);
        buf[24..28].copy_from_slice(&target.1.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_read() {
        let mut buf = [0u8; 28];
        let us = (MacAddr([2, 0, 0, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1));
        let them = (MacAddr::ZERO, Ipv4Addr::new(10, 0, 0, 2));
        ArpPacket::new_unchecked(&mut buf[..]).fill(operation::REQUEST, us, them);
        let p = ArpPacket::new_checked(&buf[..]).unwrap();
        assert_eq!(p.operation(), operation::REQUEST);
        assert_eq!((p.sender_hw_addr(), p.sender_ip()), us);
        assert_eq!((p.target_hw_addr(), p.target_ip()), them);
    }

    #[test]
    fn rejects_short_and_foreign() {
        assert_eq!(
            ArpPacket::new_checked(&[0u8; 27][..]).unwrap_err(),
            WireError::Truncated
        );
        let mut buf = [0u8; 28];
        ArpPacket::new_unchecked(&mut buf[..]).fill(
            operation::REQUEST,
            (MacAddr::ZERO, Ipv4Addr::UNSPECIFIED),
            (MacAddr::ZERO, Ipv4Addr::UNSPECIFIED),
        );
        buf[5] = 16;
        assert_eq!(
            ArpPacket::new_checked(&buf[..]).unwrap_err(),
            WireError::UnsupportedArp
        );
    }
}
