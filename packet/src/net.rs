//! IPv4 prefixes and the address classes RFC 1812 treats specially.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 address with a prefix length, written `10.0.1.1/24`. As an interface address
/// the host bits name the interface's address; as a route or rule the host bits are zero.
/// `any` is accepted for `0.0.0.0/0`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Ipv4Net {
    addr: Ipv4Addr,
    len: u8,
}

impl Ipv4Net {
    /// Everything: `0.0.0.0/0`.
    pub const ANY: Ipv4Net = Ipv4Net {
        addr: Ipv4Addr::UNSPECIFIED,
        len: 0,
    };

    /// `None` if `len` is above 32.
    pub fn new(addr: Ipv4Addr, len: u8) -> Option<Self> {
        (len <= 32).then_some(Ipv4Net { addr, len })
    }

    pub fn addr(self) -> Ipv4Addr {
        self.addr
    }

    pub fn prefix_len(self) -> u8 {
        self.len
    }

    pub fn mask(self) -> u32 {
        mask(self.len)
    }

    /// The prefix with the host bits cleared.
    pub fn network(self) -> Ipv4Net {
        Ipv4Net {
            addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()),
            len: self.len,
        }
    }

    /// Whether the host bits are zero (a well-formed route or rule prefix).
    pub fn is_network(self) -> bool {
        self.network().addr == self.addr
    }

    /// The directed broadcast address, for prefixes that have one (length 30 or less;
    /// /31 links have none, RFC 3021).
    pub fn broadcast(self) -> Option<Ipv4Addr> {
        (self.len <= 30).then(|| Ipv4Addr::from(u32::from(self.addr) | !self.mask()))
    }

    pub fn contains(self, ip: Ipv4Addr) -> bool {
        (u32::from(ip) ^ u32::from(self.addr)) & self.mask() == 0
    }

    /// Whether the two prefixes share any address.
    pub fn overlaps(self, other: Ipv4Net) -> bool {
        let shorter = if self.len <= other.len { self } else { other };
        let longer = if self.len <= other.len { other } else { self };
        shorter.contains(longer.addr)
    }
}

/// The netmask for a prefix length of at most 32.
pub(crate) fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        n => u32::MAX << (32 - u32::from(n.min(32))),
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Ipv4Net {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s == "any" {
            return Ok(Ipv4Net::ANY);
        }
        let bad = |why: &str| {
            format!("invalid prefix {s:?}: {why}; write a.b.c.d/len such as 10.0.1.0/24")
        };
        let (addr, len) = s.split_once('/').ok_or_else(|| bad("missing /len"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| bad("bad address"))?;
        let len: u8 = len.parse().map_err(|_| bad("bad prefix length"))?;
        Ipv4Net::new(addr, len).ok_or_else(|| bad("prefix length above 32"))
    }
}

crate::text::serde_via_str!(Ipv4Net);

/// Addresses that are never a valid source of a forwarded packet (RFC 1812 §5.3.7,
/// RFC 6890): this network (0/8), loopback, multicast, and the reserved class E block
/// including the limited broadcast.
pub fn is_martian_source(ip: Ipv4Addr) -> bool {
    let first = ip.octets()[0];
    first == 0 || first == 127 || first >= 224
}

/// Addresses that are never a valid destination (RFC 1812 §5.3.7): this network (0/8),
/// loopback, and class E except the limited broadcast. Multicast is valid (delivered
/// locally, never routed: polld is no multicast router).
pub fn is_martian_destination(ip: Ipv4Addr) -> bool {
    let first = ip.octets()[0];
    first == 0 || first == 127 || (first >= 240 && ip != Ipv4Addr::BROADCAST)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap()
    }

    #[test]
    fn parse_and_show() {
        assert_eq!(net("10.0.1.1/24").to_string(), "10.0.1.1/24");
        assert_eq!(net("any"), Ipv4Net::ANY);
        for bad in ["10.0.1.1", "10.0.1/24", "10.0.1.1/33", "10.0.1.1/x"] {
            let err = bad.parse::<Ipv4Net>().unwrap_err();
            assert!(err.contains("a.b.c.d/len"), "{err}");
        }
    }

    #[test]
    fn prefix_arithmetic() {
        let n = net("10.0.1.7/24");
        assert_eq!(n.network(), net("10.0.1.0/24"));
        assert!(!n.is_network());
        assert_eq!(n.broadcast(), Some(Ipv4Addr::new(10, 0, 1, 255)));
        assert_eq!(net("10.0.0.0/31").broadcast(), None);
        assert!(n.contains(Ipv4Addr::new(10, 0, 1, 200)));
        assert!(!n.contains(Ipv4Addr::new(10, 0, 2, 1)));
        assert!(Ipv4Net::ANY.contains(Ipv4Addr::new(1, 2, 3, 4)));
        assert!(net("10.0.0.0/8").overlaps(net("10.9.0.0/16")));
        assert!(net("10.9.0.0/16").overlaps(net("10.0.0.0/8")));
        assert!(!net("10.0.1.0/24").overlaps(net("10.0.2.0/24")));
    }

    #[test]
    fn martians() {
        for ip in [
            "0.1.2.3",
            "127.0.0.1",
            "224.0.0.5",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(is_martian_source(ip.parse().unwrap()), "{ip}");
        }
        assert!(!is_martian_source(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(is_martian_destination(Ipv4Addr::new(240, 0, 0, 1)));
        assert!(!is_martian_destination(Ipv4Addr::BROADCAST));
        assert!(!is_martian_destination(Ipv4Addr::new(224, 0, 0, 5)));
    }
}
