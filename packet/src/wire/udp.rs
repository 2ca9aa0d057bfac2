//! UDP datagrams (RFC 768).

use super::{checksum, read_u16, write_u16, WireError};
use crate::wire::ipv4::protocol;
use std::net::Ipv4Addr;

/// A view of a UDP datagram; the buffer may extend beyond the UDP length.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checks; accessors panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        UdpPacket { buffer }
    }

    /// Wraps `buffer` after checking for a whole header and a length field between the
    /// header size and the buffer size.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let len = buffer.as_ref().len();
        if len < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let packet = UdpPacket { buffer };
        let claimed = usize::from(packet.len());
        if claimed < Self::HEADER_LEN || claimed > len {
            return Err(WireError::BadLength);
        }
        Ok(packet)
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 0)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// The UDP length field: header plus payload.
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    /// Whether the length field claims no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= Self::HEADER_LEN
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 6)
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..usize::from(self.len())]
    }

    /// Whether the checksum verifies over the pseudo-header; a zero checksum means the
    /// sender did not compute one and always verifies.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let datagram = &self.buffer.as_ref()[..usize::from(self.len())];
        let pseudo = checksum::pseudo_header_sum(src, dst, protocol::UDP, self.len());
        checksum::add(pseudo, checksum::ones_sum(datagram)) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn set_src_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 0, value);
    }

    pub fn set_dst_port(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 2, value);
    }

    pub fn set_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 4, value);
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 6, value);
    }

    /// Computes the checksum over pseudo-header, header and payload; a result of zero is
    /// sent as 0xFFFF (RFC 768), since zero means "no checksum".
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let pseudo = checksum::pseudo_header_sum(src, dst, protocol::UDP, len);
        let sum = checksum::add(
            pseudo,
            checksum::ones_sum(&self.buffer.as_ref()[..usize::from(len)]),
        );
        let value = match !sum {
            0 => 0xFFFF,
            v => v,
        };
        self.set_checksum(value);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[Self::HEADER_LEN..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_lengths() {
        assert_eq!(
            UdpPacket::new_checked(&[0u8; 7][..]).unwrap_err(),
            WireError::Truncated
        );
        let mut buf = [0u8; 12];
        buf[5] = 13;
        assert_eq!(
            UdpPacket::new_checked(&buf[..]).unwrap_err(),
            WireError::BadLength
        );
        buf[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&buf[..]).unwrap_err(),
            WireError::BadLength
        );
        buf[5] = 12;
        assert_eq!(UdpPacket::new_checked(&buf[..]).unwrap().payload().len(), 4);
    }

    #[test]
    fn checksum_fills_and_verifies() {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1));
        let mut buf = [0u8; 13];
        let mut u = UdpPacket::new_unchecked(&mut buf[..]);
        u.set_src_port(1234);
        u.set_dst_port(9);
        u.set_len(13);
        u.payload_mut().copy_from_slice(b"hello");
        u.fill_checksum(src, dst);
        assert!(u.verify_checksum(src, dst));
        assert!(!u.verify_checksum(src, Ipv4Addr::new(10, 0, 1, 2)));
    }
}
