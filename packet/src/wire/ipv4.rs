//! IPv4 headers (RFC 791).

use super::{checksum, read_ipv4, read_u16, write_u16, WireError};
use std::net::Ipv4Addr;

/// IP protocol numbers polld looks at.
pub mod protocol {
    pub const ICMP: u8 = 1;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
}

/// A view of an IPv4 packet. The buffer may extend beyond the packet (Ethernet padding):
/// [`Ipv4Packet::packet`] and [`Ipv4Packet::payload`] stop at the total length.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1FFF;

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// The length of a header without options.
    pub const HEADER_LEN: usize = 20;

    /// Wraps `buffer` without checks; accessors panic if the buffer is shorter than the
    /// header or the total length field claims.
    pub fn new_unchecked(buffer: T) -> Self {
        Ipv4Packet { buffer }
    }

    /// Wraps `buffer` after the RFC 1812 §5.2.2 structural checks: a whole fixed header,
    /// version 4, IHL at least 5 and within the buffer, total length covering the header
    /// and within the buffer. The header checksum is checked separately
    /// ([`Ipv4Packet::check_checksum`]).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        let buf = buffer.as_ref();
        if buf.len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let packet = Ipv4Packet { buffer };
        if packet.version() != 4 {
            return Err(WireError::BadVersion);
        }
        let header_len = packet.header_len();
        if header_len < Self::HEADER_LEN || header_len > packet.buffer.as_ref().len() {
            return Err(WireError::BadIhl);
        }
        let total = usize::from(packet.total_len());
        if total < header_len || total > packet.buffer.as_ref().len() {
            return Err(WireError::BadLength);
        }
        Ok(packet)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// The header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[0] & 0x0F) * 4
    }

    pub fn has_options(&self) -> bool {
        self.header_len() > Self::HEADER_LEN
    }

    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 4)
    }

    pub fn dont_fragment(&self) -> bool {
        read_u16(self.buffer.as_ref(), 6) & FLAG_DF != 0
    }

    pub fn more_fragments(&self) -> bool {
        read_u16(self.buffer.as_ref(), 6) & FLAG_MF != 0
    }

    /// The fragment offset in bytes.
    pub fn frag_offset(&self) -> usize {
        usize::from(read_u16(self.buffer.as_ref(), 6) & OFFSET_MASK) * 8
    }

    /// Part of a fragmented datagram (more fragments follow, or not the first piece).
    pub fn is_fragment(&self) -> bool {
        self.more_fragments() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[8]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[9]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 10)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), 12)
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        read_ipv4(self.buffer.as_ref(), 16)
    }

    /// The header, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// The packet up to its total length (no link-layer padding).
    pub fn packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.total_len())]
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// Whether the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::ones_sum(self.header()) == 0xFFFF
    }

    /// [`Ipv4Packet::verify_checksum`] as a `Result`.
    pub fn check_checksum(&self) -> Result<(), WireError> {
        if self.verify_checksum() {
            Ok(())
        } else {
            Err(WireError::BadChecksum)
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Sets version 4 and the IHL for a header of `header_len` bytes (a multiple of 4).
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[0] = 0x40 | ((header_len / 4) as u8 & 0x0F);
    }

    pub fn set_dscp_ecn(&mut self, value: u8) {
        self.buffer.as_mut()[1] = value;
    }

    pub fn set_total_len(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 2, value);
    }

    pub fn set_ident(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 4, value);
    }

    /// Sets the DF and MF flags and the fragment offset (in bytes, a multiple of 8).
    pub fn set_fragment(&mut self, dont_fragment: bool, more_fragments: bool, offset: usize) {
        let mut word = ((offset / 8) as u16) & OFFSET_MASK;
        if dont_fragment {
            word |= FLAG_DF;
        }
        if more_fragments {
            word |= FLAG_MF;
        }
        write_u16(self.buffer.as_mut(), 6, word);
    }

    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[8] = value;
    }

    pub fn set_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[9] = value;
    }

    pub fn set_checksum(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 10, value);
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[12..16].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[16..20].copy_from_slice(&addr.octets());
    }

    /// Computes the header checksum from scratch and stores it.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::checksum(self.header());
        self.set_checksum(sum);
    }

    /// Decrements the TTL (saturating at 0) and updates the header checksum
    /// incrementally (RFC 1624) instead of summing the header again.
    pub fn decrement_ttl(&mut self) {
        let ttl = self.ttl();
        let protocol = self.protocol();
        let old_word = u16::from_be_bytes([ttl, protocol]);
        let new_word = u16::from_be_bytes([ttl.saturating_sub(1), protocol]);
        let updated = checksum::update_word(self.checksum(), old_word, new_word);
        self.set_ttl(ttl.saturating_sub(1));
        self.set_checksum(updated);
    }

    /// The header, options included.
    pub fn header_mut(&mut self) -> &mut [u8] {
        let len = self.header_len();
        &mut self.buffer.as_mut()[..len]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let end = usize::from(self.total_len());
        &mut self.buffer.as_mut()[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header(ttl: u8, proto: u8) -> [u8; 20] {
        let mut buf = [0u8; 20];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version_and_header_len(20);
        p.set_total_len(20);
        p.set_ttl(ttl);
        p.set_protocol(proto);
        p.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.set_dst_addr(Ipv4Addr::new(10, 0, 1, 1));
        p.fill_checksum();
        buf
    }

    #[test]
    fn checked_errors_in_rfc1812_order() {
        let good = header(64, 17);
        assert!(Ipv4Packet::new_checked(&good[..]).is_ok());
        assert_eq!(
            Ipv4Packet::new_checked(&good[..19]).unwrap_err(),
            WireError::Truncated
        );
        let mut v6 = good;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            WireError::BadVersion
        );
        let mut short_ihl = good;
        short_ihl[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&short_ihl[..]).unwrap_err(),
            WireError::BadIhl
        );
        let mut long_ihl = good;
        long_ihl[0] = 0x46;
        assert_eq!(
            Ipv4Packet::new_checked(&long_ihl[..]).unwrap_err(),
            WireError::BadIhl
        );
        let mut long_total = good;
        long_total[3] = 21;
        assert_eq!(
            Ipv4Packet::new_checked(&long_total[..]).unwrap_err(),
            WireError::BadLength
        );
        let mut short_total = good;
        short_total[3] = 19;
        assert_eq!(
            Ipv4Packet::new_checked(&short_total[..]).unwrap_err(),
            WireError::BadLength
        );
    }

    #[test]
    fn padding_is_not_payload() {
        let mut buf = [0u8; 46];
        buf[..20].copy_from_slice(&header(64, 17));
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.packet().len(), 20);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn fragment_fields_round_trip() {
        let mut buf = header(64, 17);
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_fragment(true, true, 1480);
        assert!(p.dont_fragment() && p.more_fragments());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
    }

    proptest! {
        /// The incremental TTL update gives bit-for-bit the checksum of a full
        /// recomputation, for any header (options included) with a valid checksum.
        #[test]
        fn ttl_decrement_matches_full_recomputation(
            mut bytes in proptest::collection::vec(any::<u8>(), 20..=60),
            ttl in 1u8..=255,
        ) {
            let header_len = bytes.len() / 4 * 4;
            bytes.truncate(header_len);
            let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
            p.set_version_and_header_len(header_len);
            p.set_total_len(header_len as u16);
            p.set_ttl(ttl);
            p.fill_checksum();
            p.decrement_ttl();
            prop_assert_eq!(p.ttl(), ttl - 1);
            let incremental = p.checksum();
            p.fill_checksum();
            prop_assert_eq!(incremental, p.checksum());
            prop_assert!(p.verify_checksum());
        }
    }
}
