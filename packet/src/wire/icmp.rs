//! ICMP messages (RFC 792); the view serves ICMPv6 too ([`super::icmpv6`]).

use super::{checksum, read_u16, write_u16, WireError};

/// ICMP message types polld generates or looks at.
pub mod icmp_type {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const SOURCE_QUENCH: u8 = 4;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAMETER_PROBLEM: u8 = 12;

    /// Whether `t` is an error message (which must never cause another ICMP error,
    /// RFC 1812 §4.3.2.7) rather than a query.
    pub fn is_error(t: u8) -> bool {
        matches!(
            t,
            DEST_UNREACHABLE | SOURCE_QUENCH | REDIRECT | TIME_EXCEEDED | PARAMETER_PROBLEM
        )
    }
}

/// Codes of destination-unreachable messages polld sends.
pub mod unreachable_code {
    pub const NET: u8 = 0;
    pub const HOST: u8 = 1;
    /// Fragmentation needed and DF set; the next-hop MTU is in the low 16 bits of the
    /// rest-of-header word (RFC 1191).
    pub const FRAG_NEEDED: u8 = 4;
    /// Communication administratively prohibited (RFC 1812 §5.2.7.1).
    pub const ADMIN_PROHIBITED: u8 = 13;
}

/// A view of an ICMP message: type, code, checksum, the 4-byte rest of header, data.
#[derive(Debug, Clone)]
pub struct IcmpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> IcmpPacket<T> {
    pub const HEADER_LEN: usize = 8;

    /// Wraps `buffer` without checks; accessors panic on a short buffer.
    pub fn new_unchecked(buffer: T) -> Self {
        IcmpPacket { buffer }
    }

    /// Wraps `buffer` after checking that it holds the 8-byte header. The whole buffer
    /// is the message (pass the IPv4 payload, which excludes link padding).
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IcmpPacket { buffer })
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 2)
    }

    /// Bytes 4..8: identifier and sequence number for echo, the pointer for parameter
    /// problem, the next-hop MTU for fragmentation needed, zero otherwise.
    pub fn rest_of_header(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[4], b[5], b[6], b[7]])
    }

    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }

    pub fn verify_checksum(&self) -> bool {
        self.verify_checksum_over(0)
    }

    /// Whether the message's checksum verifies with a pseudo-header of sum `pseudo`
    /// (ICMPv6, [`super::icmpv6::pseudo_header_sum`]; 0 for ICMP, which has none).
    pub fn verify_checksum_over(&self, pseudo: u16) -> bool {
        checksum::add(pseudo, checksum::ones_sum(self.buffer.as_ref())) == 0xFFFF
    }

    /// The whole message.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpPacket<T> {
    pub fn set_msg_type(&mut self, value: u8) {
        self.buffer.as_mut()[0] = value;
    }

    pub fn set_code(&mut self, value: u8) {
        self.buffer.as_mut()[1] = value;
    }

    pub fn set_rest_of_header(&mut self, value: u32) {
        self.buffer.as_mut()[4..8].copy_from_slice(&value.to_be_bytes());
    }

    /// Computes the checksum over the whole buffer and stores it.
    pub fn fill_checksum(&mut self) {
        self.fill_checksum_over(0);
    }

    /// Computes the checksum with a pseudo-header of sum `pseudo` and stores it.
    pub fn fill_checksum_over(&mut self, pseudo: u16) {
        write_u16(self.buffer.as_mut(), 2, 0);
        let sum = !checksum::add(pseudo, checksum::ones_sum(self.buffer.as_ref()));
        write_u16(self.buffer.as_mut(), 2, sum);
    }

    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_is_truncated() {
        assert_eq!(
            IcmpPacket::new_checked(&[8u8; 7][..]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn checksum_round_trip() {
        let mut buf = [0u8; 12];
        let mut m = IcmpPacket::new_unchecked(&mut buf[..]);
        m.set_msg_type(icmp_type::ECHO_REQUEST);
        m.set_rest_of_header(0x0001_0002);
        m.data_mut().copy_from_slice(b"ping");
        m.fill_checksum();
        let m = IcmpPacket::new_checked(&buf[..]).unwrap();
        assert!(m.verify_checksum());
        assert_eq!(m.rest_of_header(), 0x0001_0002);
        let mut corrupt = buf;
        corrupt[9] ^= 1;
        assert!(!IcmpPacket::new_checked(&corrupt[..])
            .unwrap()
            .verify_checksum());
    }

    #[test]
    fn error_types() {
        assert!(icmp_type::is_error(icmp_type::TIME_EXCEEDED));
        assert!(!icmp_type::is_error(icmp_type::ECHO_REQUEST));
    }
}
