//! The longest-prefix-match routing table.
//!
//! One hash map per prefix length, probed from the longest length present down to the
//! shortest: a lookup costs one probe per distinct prefix length in the table (two or three
//! in a typical router config), independent of the number of routes.

use crate::fasthash::FastMap;
use crate::net::Ipv4Net;
use std::net::Ipv4Addr;

/// Where a route sends packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// The destination is on the output interface's link.
    Connected,
    /// Via this gateway on the output interface's link.
    Gateway(Ipv4Addr),
}

/// A route: the output interface (device index) and the next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub out: usize,
    pub next_hop: NextHop,
}

impl Route {
    /// The address to resolve with ARP for a packet to `dst`.
    pub fn next_hop_addr(&self, dst: Ipv4Addr) -> Ipv4Addr {
        match self.next_hop {
            NextHop::Connected => dst,
            NextHop::Gateway(gw) => gw,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    /// Index = prefix length; key = the network address as a u32.
    by_len: Vec<FastMap<u32, Route>>,
    /// Prefix lengths that hold routes, longest first.
    lengths: Vec<u8>,
}

impl RouteTable {
    pub fn new() -> Self {
        RouteTable {
            by_len: vec![FastMap::default(); 33],
            lengths: Vec::new(),
        }
    }

    /// Adds a route for `prefix` (host bits are ignored), replacing and returning any
    /// route for the same prefix.
    pub fn insert(&mut self, prefix: Ipv4Net, route: Route) -> Option<Route> {
        let len = prefix.prefix_len();
        let key = u32::from(prefix.network().addr());
        let previous = self.by_len[usize::from(len)].insert(key, route);
        if !self.lengths.contains(&len) {
            self.lengths.push(len);
            self.lengths.sort_unstable_by(|a, b| b.cmp(a));
        }
        previous
    }

    /// The most specific route covering `dst`, with its prefix.
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<(Ipv4Net, &Route)> {
        let dst = u32::from(dst);
        self.lengths.iter().find_map(|&len| {
            let key = dst & crate::net::mask(len);
            self.by_len[usize::from(len)].get(&key).map(|route| {
                let prefix = Ipv4Net::new(Ipv4Addr::from(key), len).expect("length <= 32");
                (prefix, route)
            })
        })
    }

    pub fn len(&self) -> usize {
        self.by_len.iter().map(FastMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn route(out: usize) -> Route {
        Route {
            out,
            next_hop: NextHop::Connected,
        }
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RouteTable::new();
        t.insert("0.0.0.0/0".parse().unwrap(), route(0));
        t.insert("10.0.0.0/8".parse().unwrap(), route(1));
        t.insert("10.1.0.0/16".parse().unwrap(), route(2));
        t.insert("10.1.2.3/32".parse().unwrap(), route(3));
        let out = |ip: [u8; 4]| t.lookup(ip.into()).unwrap().1.out;
        assert_eq!(out([192, 168, 0, 1]), 0);
        assert_eq!(out([10, 2, 0, 1]), 1);
        assert_eq!(out([10, 1, 9, 9]), 2);
        assert_eq!(out([10, 1, 2, 3]), 3);
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn no_default_means_no_route() {
        let mut t = RouteTable::new();
        t.insert("10.0.0.0/8".parse().unwrap(), route(1));
        assert!(t.lookup([11, 0, 0, 1].into()).is_none());
    }

    fn naive(routes: &[(u32, u8, usize)], dst: u32) -> Option<(u8, usize)> {
        // Later inserts replace earlier ones for the same prefix, as in the table.
        let mut best: Option<(u8, usize)> = None;
        for &(addr, len, out) in routes {
            let m = crate::net::mask(len);
            let longer = match best {
                None => true,
                Some((l, _)) => len >= l,
            };
            if dst & m == addr & m && longer {
                best = Some((len, out));
            }
        }
        best
    }

    proptest! {
        /// The table agrees with a linear scan for the longest matching prefix. Addresses
        /// come from a small space so that prefixes nest and collide often.
        #[test]
        fn lpm_matches_linear_scan(
            routes in proptest::collection::vec((0u32..16, 0u8..=32, 0usize..8), 0..40),
            probes in proptest::collection::vec(0u32..16, 1..40),
        ) {
            let spread = |x: u32| x.rotate_right(4) | (x & 3);
            let routes: Vec<(u32, u8, usize)> =
                routes.into_iter().map(|(a, l, o)| (spread(a), l, o)).collect();
            let mut table = RouteTable::new();
            for &(addr, len, out) in &routes {
                table.insert(Ipv4Net::new(addr.into(), len).unwrap(), route(out));
            }
            for p in probes {
                let dst = spread(p);
                let got = table.lookup(dst.into()).map(|(n, r)| (n.prefix_len(), r.out));
                prop_assert_eq!(got, naive(&routes, dst));
            }
        }
    }
}
