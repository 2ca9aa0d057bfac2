//! ICMPv6 (RFC 4443): the message types and codes polld sends or looks at, and the
//! checksum over the IPv6 pseudo-header. The message layout is ICMP's (type, code,
//! checksum, 4 bytes, data), so [`super::IcmpPacket`] is the view for both.

use super::checksum;
use super::ipv6::next_header;
use std::net::Ipv6Addr;

/// ICMPv6 message types.
pub mod icmpv6_type {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAMETER_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
    pub const REDIRECT: u8 = 137;

    /// Whether `t` is an error message (types 0-127), about which no error is ever sent
    /// (RFC 4443 §2.4 (e.1)).
    pub fn is_error(t: u8) -> bool {
        t < 128
    }
}

/// Codes of destination-unreachable messages (RFC 4443 §3.1).
pub mod unreachable_code {
    pub const NO_ROUTE: u8 = 0;
    pub const ADMIN_PROHIBITED: u8 = 1;
    pub const BEYOND_SCOPE: u8 = 2;
    pub const ADDRESS: u8 = 3;
}

/// The one's-complement sum of the IPv6 pseudo-header of an ICMPv6 message of `len`
/// bytes (RFC 8200 §8.1), to combine with the message's own sum.
pub fn pseudo_header_sum(src: Ipv6Addr, dst: Ipv6Addr, len: u32) -> u16 {
    let mut header = [0u8; 40];
    header[..16].copy_from_slice(&src.octets());
    header[16..32].copy_from_slice(&dst.octets());
    header[32..36].copy_from_slice(&len.to_be_bytes());
    header[39] = next_header::ICMPV6;
    checksum::ones_sum(&header)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::IcmpPacket;

    #[test]
    fn checksum_covers_the_pseudo_header() {
        let (src, dst) = ("fe80::1".parse().unwrap(), "ff02::1".parse().unwrap());
        let mut buf = [0u8; 12];
        let mut m = IcmpPacket::new_unchecked(&mut buf[..]);
        m.set_msg_type(icmpv6_type::ECHO_REQUEST);
        m.set_rest_of_header(0x0001_0002);
        m.data_mut().copy_from_slice(b"ping");
        m.fill_checksum_over(pseudo_header_sum(src, dst, 12));
        let m = IcmpPacket::new_checked(&buf[..]).unwrap();
        assert!(m.verify_checksum_over(pseudo_header_sum(src, dst, 12)));
        assert!(!m.verify_checksum(), "the pseudo-header is part of the sum");
        let other = "fe80::2".parse().unwrap();
        assert!(!m.verify_checksum_over(pseudo_header_sum(other, dst, 12)));
        assert!(icmpv6_type::is_error(icmpv6_type::PACKET_TOO_BIG));
        assert!(!icmpv6_type::is_error(icmpv6_type::ECHO_REQUEST));
    }
}
