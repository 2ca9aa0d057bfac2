//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).

use std::net::Ipv4Addr;

/// The one's-complement sum of `data` as big-endian 16-bit words (an odd last byte is
/// padded with zero), folded to 16 bits. Not complemented: combine sums with [`add`].
pub fn ones_sum(data: &[u8]) -> u16 {
    let mut words = data.chunks_exact(2);
    let mut sum: u64 = words
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = words.remainder() {
        sum += u64::from(*last) << 8;
    }
    fold(sum)
}

/// One's-complement addition of two partial sums.
pub fn add(a: u16, b: u16) -> u16 {
    fold(u64::from(a) + u64::from(b))
}

/// The checksum field value for `data`: the complement of its one's-complement sum.
pub fn checksum(data: &[u8]) -> u16 {
    !ones_sum(data)
}

/// The one's-complement sum of the TCP/UDP pseudo-header.
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = src.octets();
    let d = dst.octets();
    let words = [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        u16::from(protocol),
        length,
    ];
    fold(words.iter().map(|&w| u64::from(w)).sum())
}

/// The checksum after one 16-bit word of the covered data changed from `old` to `new`,
/// by RFC 1624 equation 3: `HC' = ~(~HC + ~m + m')`. Unlike equation 2 it never turns a
/// valid checksum into the 0xFFFF form that a full recomputation would not produce.
pub fn update_word(checksum: u16, old: u16, new: u16) -> u16 {
    !fold(u64::from(!checksum) + u64::from(!old) + u64::from(new))
}

fn fold(mut sum: u64) -> u16 {
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 section 3 example: the sum of these bytes is ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(ones_sum(&data), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_last_byte() {
        assert_eq!(ones_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn data_with_its_checksum_sums_to_all_ones() {
        let mut data = vec![0x45, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        data.extend_from_slice(&[0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let c = checksum(&data);
        data[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(ones_sum(&data), 0xFFFF);
    }
}
