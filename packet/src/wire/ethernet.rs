//! Ethernet II frames and MAC addresses.

use super::{read_u16, write_u16, WireError};
use std::fmt;
use std::str::FromStr;

/// Ethertypes polld looks at.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const IPV6: u16 = 0x86DD;
    /// 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag (Q-in-Q).
    pub const QINQ: u16 = 0x88A8;
    /// Pre-standard Q-in-Q tag still sent by some switches.
    pub const QINQ_LEGACY: u16 = 0x9100;
}

/// A 48-bit IEEE 802 MAC address, written `02:00:00:00:00:01`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xFF; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// Group address (broadcast included): the I/G bit is set.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }

    pub fn is_broadcast(self) -> bool {
        self == MacAddr::BROADCAST
    }

    /// An address one station owns: neither a group address nor all zeros.
    pub fn is_unicast(self) -> bool {
        !self.is_multicast() && self != MacAddr::ZERO
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{g:02x}")
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for MacAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("invalid MAC address {s:?}: write six hex bytes such as 02:00:00:00:00:01");
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for byte in &mut out {
            let part = parts.next().ok_or_else(bad)?;
            if part.is_empty() || part.len() > 2 {
                return Err(bad());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

crate::text::serde_via_str!(MacAddr);

/// A view of an Ethernet II frame: destination, source, ethertype, payload.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const HEADER_LEN: usize = 14;

    /// Wraps `buffer` without checking its length; accessors panic if it is shorter
    /// than [`Self::HEADER_LEN`].
    pub fn new_unchecked(buffer: T) -> Self {
        EthernetFrame { buffer }
    }

    /// Wraps `buffer` after checking that it holds a whole header.
    pub fn new_checked(buffer: T) -> Result<Self, WireError> {
        if buffer.as_ref().len() < Self::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn dst_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 0)
    }

    pub fn src_addr(&self) -> MacAddr {
        mac_at(self.buffer.as_ref(), 6)
    }

    /// The ethertype (or, below 0x0600, an 802.3 length field).
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), 12)
    }

    /// Whether the frame carries an 802.1Q/802.1ad VLAN tag.
    pub fn is_vlan_tagged(&self) -> bool {
        matches!(
            self.ethertype(),
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_LEGACY
        )
    }

    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[Self::HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn set_dst_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[0..6].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: MacAddr) {
        self.buffer.as_mut()[6..12].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, value: u16) {
        write_u16(self.buffer.as_mut(), 12, value);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[Self::HEADER_LEN..]
    }
}

pub(crate) fn mac_at(buf: &[u8], at: usize) -> MacAddr {
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&buf[at..at + 6]);
    MacAddr(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_buffer_is_truncated() {
        assert_eq!(
            EthernetFrame::new_checked(&[0u8; 13][..]).unwrap_err(),
            WireError::Truncated
        );
    }

    #[test]
    fn fields_round_trip() {
        let mut buf = [0u8; 20];
        let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
        f.set_dst_addr(MacAddr::BROADCAST);
        f.set_src_addr(MacAddr([2, 0, 0, 0, 0, 1]));
        f.set_ethertype(ethertype::VLAN);
        let f = EthernetFrame::new_checked(&buf[..]).unwrap();
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(f.src_addr().to_string(), "02:00:00:00:00:01");
        assert!(f.is_vlan_tagged());
        assert_eq!(f.payload().len(), 6);
    }

    #[test]
    fn mac_parse_rejects_garbage() {
        assert_eq!("02:00:00:00:00:0a".parse::<MacAddr>().unwrap().0[5], 10);
        for bad in [
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "02:00:00:00:00:zz",
            "020:0:0:0:0:0",
        ] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn mac_classes() {
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(!MacAddr::ZERO.is_unicast());
        assert!(MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(MacAddr([2, 0, 0, 0, 0, 1]).is_unicast());
    }
}
