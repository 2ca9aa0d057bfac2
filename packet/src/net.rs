//! IPv4 and IPv6 prefixes, and the address classes RFC 1812 (IPv4) and RFC 4291 (IPv6)
//! treat specially.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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

/// An IPv6 address with a prefix length, written `2001:db8::1/64`; host bits as for
/// [`Ipv4Net`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Ipv6Net {
    addr: Ipv6Addr,
    len: u8,
}

impl Ipv6Net {
    /// `None` if `len` is above 128.
    pub fn new(addr: Ipv6Addr, len: u8) -> Option<Self> {
        (len <= 128).then_some(Ipv6Net { addr, len })
    }

    pub fn addr(self) -> Ipv6Addr {
        self.addr
    }

    pub fn prefix_len(self) -> u8 {
        self.len
    }

    pub fn mask(self) -> u128 {
        mask6(self.len)
    }

    /// The prefix with the host bits cleared.
    pub fn network(self) -> Ipv6Net {
        Ipv6Net {
            addr: Ipv6Addr::from(u128::from(self.addr) & self.mask()),
            len: self.len,
        }
    }

    pub fn is_network(self) -> bool {
        self.network().addr == self.addr
    }

    pub fn contains(self, ip: Ipv6Addr) -> bool {
        (u128::from(ip) ^ u128::from(self.addr)) & self.mask() == 0
    }

    pub fn overlaps(self, other: Ipv6Net) -> bool {
        let (shorter, longer) = if self.len <= other.len {
            (self, other)
        } else {
            (other, self)
        };
        shorter.contains(longer.addr)
    }
}

/// The netmask for an IPv6 prefix length of at most 128.
pub(crate) fn mask6(len: u8) -> u128 {
    match len {
        0 => 0,
        n => u128::MAX << (128 - u32::from(n.min(128))),
    }
}

impl fmt::Display for Ipv6Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Ipv6Net {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("invalid prefix {s:?}: {why}; write address/len such as 2001:db8:1::/64")
        };
        let (addr, len) = s.split_once('/').ok_or_else(|| bad("missing /len"))?;
        let addr: Ipv6Addr = addr.parse().map_err(|_| bad("bad address"))?;
        let len: u8 = len.parse().map_err(|_| bad("bad prefix length"))?;
        Ipv6Net::new(addr, len).ok_or_else(|| bad("prefix length above 128"))
    }
}

crate::text::serde_via_str!(Ipv6Net);

/// A prefix of either family, as interface addresses, routes and rules take them: IPv6
/// when the text holds a `:`, IPv4 otherwise (`any` included).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum IpNet {
    V4(Ipv4Net),
    V6(Ipv6Net),
}

impl IpNet {
    pub fn addr(self) -> IpAddr {
        match self {
            IpNet::V4(n) => n.addr().into(),
            IpNet::V6(n) => n.addr().into(),
        }
    }

    pub fn prefix_len(self) -> u8 {
        match self {
            IpNet::V4(n) => n.prefix_len(),
            IpNet::V6(n) => n.prefix_len(),
        }
    }

    /// The prefix length of one host of this family (32 or 128).
    pub fn host_len(self) -> u8 {
        match self {
            IpNet::V4(_) => 32,
            IpNet::V6(_) => 128,
        }
    }

    pub fn network(self) -> IpNet {
        match self {
            IpNet::V4(n) => IpNet::V4(n.network()),
            IpNet::V6(n) => IpNet::V6(n.network()),
        }
    }

    pub fn is_network(self) -> bool {
        self.network() == self
    }

    /// Whether `ip` is in the prefix; an address of the other family never is.
    pub fn contains(self, ip: impl Into<IpAddr>) -> bool {
        match (self, ip.into()) {
            (IpNet::V4(n), IpAddr::V4(ip)) => n.contains(ip),
            (IpNet::V6(n), IpAddr::V6(ip)) => n.contains(ip),
            _ => false,
        }
    }

    /// Whether the two prefixes share any address (never across families).
    pub fn overlaps(self, other: IpNet) -> bool {
        match (self, other) {
            (IpNet::V4(a), IpNet::V4(b)) => a.overlaps(b),
            (IpNet::V6(a), IpNet::V6(b)) => a.overlaps(b),
            _ => false,
        }
    }

    pub fn v4(self) -> Option<Ipv4Net> {
        match self {
            IpNet::V4(n) => Some(n),
            IpNet::V6(_) => None,
        }
    }

    pub fn v6(self) -> Option<Ipv6Net> {
        match self {
            IpNet::V6(n) => Some(n),
            IpNet::V4(_) => None,
        }
    }
}

impl From<Ipv4Net> for IpNet {
    fn from(n: Ipv4Net) -> IpNet {
        IpNet::V4(n)
    }
}

impl From<Ipv6Net> for IpNet {
    fn from(n: Ipv6Net) -> IpNet {
        IpNet::V6(n)
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpNet::V4(n) => n.fmt(f),
            IpNet::V6(n) => n.fmt(f),
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.contains(':') {
            s.parse().map(IpNet::V6)
        } else {
            s.parse().map(IpNet::V4)
        }
    }
}

crate::text::serde_via_str!(IpNet);

/// Why an IPv6 address may not appear where it does (RFC 4291), as the forwarder
/// names its drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ipv6Class {
    /// An ordinary unicast (global, unique-local, documentation) address.
    Unicast,
    /// `::`.
    Unspecified,
    /// `::1`.
    Loopback,
    /// `fe80::/10`.
    LinkLocal,
    /// `ff00::/8`.
    Multicast,
    /// IPv4-mapped `::ffff:0:0/96` and IPv4-compatible `::/96` addresses, which never
    /// appear on the wire as IPv6 addresses (RFC 4291 §2.5.5).
    Embedded,
}

impl Ipv6Class {
    pub fn of(ip: Ipv6Addr) -> Ipv6Class {
        let bits = u128::from(ip);
        if bits == 0 {
            Ipv6Class::Unspecified
        } else if bits == 1 {
            Ipv6Class::Loopback
        } else if bits >> 120 == 0xFF {
            Ipv6Class::Multicast
        } else if bits >> 118 == 0xFE80 >> 6 {
            Ipv6Class::LinkLocal
        } else if bits >> 32 == 0xFFFF || bits >> 32 == 0 {
            Ipv6Class::Embedded
        } else {
            Ipv6Class::Unicast
        }
    }
}

/// The link-local address of an interface with MAC `mac` (RFC 4291 Appendix A, modified
/// EUI-64): `fe80::` with the MAC split around `ff:fe` and its universal/local bit
/// flipped, as Linux forms it by default.
pub fn link_local_of(mac: [u8; 6]) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac;
    Ipv6Addr::from([
        0xFE,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        a ^ 0x02,
        b,
        c,
        0xFF,
        0xFE,
        d,
        e,
        f,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_prefixes_and_classes() {
        let n: IpNet = "2001:db8:1::1/64".parse().unwrap();
        assert_eq!(n.to_string(), "2001:db8:1::1/64");
        assert_eq!(n.network().to_string(), "2001:db8:1::/64");
        assert!(!n.is_network());
        assert!(n.contains("2001:db8:1::ffff".parse::<Ipv6Addr>().unwrap()));
        assert!(!n.contains("2001:db8:2::1".parse::<Ipv6Addr>().unwrap()));
        assert!(!n.contains(Ipv4Addr::new(10, 0, 0, 1)));
        assert!(n.overlaps("2001:db8::/32".parse().unwrap()));
        assert!(!n.overlaps("10.0.0.0/8".parse().unwrap()));
        assert!("10.0.1.1/24".parse::<IpNet>().unwrap().v4().is_some());
        let err = "2001:db8::/129".parse::<IpNet>().unwrap_err();
        assert!(err.contains("above 128"), "{err}");
        let class = |s: &str| Ipv6Class::of(s.parse().unwrap());
        assert_eq!(class("::"), Ipv6Class::Unspecified);
        assert_eq!(class("::1"), Ipv6Class::Loopback);
        assert_eq!(class("fe80::1"), Ipv6Class::LinkLocal);
        assert_eq!(class("febf::1"), Ipv6Class::LinkLocal);
        assert_eq!(class("fec0::1"), Ipv6Class::Unicast);
        assert_eq!(class("ff02::1"), Ipv6Class::Multicast);
        assert_eq!(class("::ffff:10.0.0.1"), Ipv6Class::Embedded);
        assert_eq!(class("::10.0.0.1"), Ipv6Class::Embedded);
        assert_eq!(class("2001:db8::1"), Ipv6Class::Unicast);
        assert_eq!(class("fd00::1"), Ipv6Class::Unicast);
        assert_eq!(
            link_local_of([0x02, 0, 0, 0, 1, 1]).to_string(),
            "fe80::ff:fe00:101"
        );
    }

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
