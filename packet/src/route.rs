//! The routing tables: IPv4 and IPv6 prefixes to routes, by longest-prefix match.
//!
//! Each family is a [`crate::lpm::Lpm`] multibit trie: a lookup reads at most 4 (IPv4)
//! or 16 (IPv6) nodes whatever the number of routes, and one route is added or removed in
//! place, so a control plane can follow route changes while the table serves lookups.

use crate::lpm::{Lpm, LpmKey, BATCH};
use crate::net::{Ipv4Net, Ipv6Net};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Where a route sends packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NextHop<A = Ipv4Addr> {
    /// The destination is on the output interface's link.
    Connected,
    /// Via this gateway on the output interface's link.
    Gateway(A),
    /// Nowhere polld sends them: the packet is dropped by the [`Reject`]'s reason (the
    /// route's `out` means nothing).
    Reject(Reject),
}

/// What a route that forwards nothing does with a packet, as the kernel's route types
/// (`ip route add blackhole|unreachable|prohibit PREFIX`) and the routes out of an
/// interface polld does not poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// Dropped silently.
    Blackhole,
    /// Dropped with ICMP host unreachable (ICMPv6 no route to destination).
    Unreachable,
    /// Dropped with ICMP (ICMPv6) administratively prohibited.
    Prohibit,
    /// The route leaves by an interface polld does not poll: the kernel's traffic,
    /// handed to the kernel (or dropped where there is no way to it).
    Unpolled,
}

/// A route: the output interface (device index) and the next hop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Route<A = Ipv4Addr> {
    pub out: usize,
    pub next_hop: NextHop<A>,
}

impl<A: Copy> Route<A> {
    /// The neighbour to resolve (ARP or neighbour table) for a packet to `dst`.
    pub fn next_hop_addr(&self, dst: A) -> A {
        match self.next_hop {
            NextHop::Connected | NextHop::Reject(_) => dst,
            NextHop::Gateway(gw) => gw,
        }
    }
}

/// The IPv4 and IPv6 routes.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    v4: Lpm<u32, Route>,
    v6: Lpm<u128, Route<Ipv6Addr>>,
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route for `prefix` (host bits are ignored), replacing and returning any
    /// route for the same prefix.
    pub fn insert(&mut self, prefix: Ipv4Net, route: Route) -> Option<Route> {
        self.v4
            .insert(u32::from(prefix.addr()), prefix.prefix_len(), route)
    }

    /// Removes the route for `prefix` (host bits are ignored).
    pub fn remove(&mut self, prefix: Ipv4Net) -> Option<Route> {
        self.v4
            .remove(u32::from(prefix.addr()), prefix.prefix_len())
    }

    /// The most specific route covering `dst`, with its prefix.
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<(Ipv4Net, &Route)> {
        self.v4.lookup(u32::from(dst)).map(|(key, len, route)| {
            let prefix = Ipv4Net::new(Ipv4Addr::from(key), len).expect("length <= 32");
            (prefix, route)
        })
    }

    /// [`RouteTable::lookup`] of each of `dsts`, handed to `each` with its index in
    /// `dsts`, in order: the walks of a batch interleaved ([`Lpm::lookup_batch`]).
    pub fn lookup_batch<'a>(
        &'a self,
        dsts: &[Ipv4Addr],
        mut each: impl FnMut(usize, Option<(Ipv4Net, &'a Route)>),
    ) {
        batch(&self.v4, dsts, |i, found| {
            each(
                i,
                found.map(|(key, len, route)| {
                    let prefix = Ipv4Net::new(Ipv4Addr::from(key), len).expect("length <= 32");
                    (prefix, route)
                }),
            )
        });
    }

    /// [`RouteTable::insert`] for IPv6.
    pub fn insert6(&mut self, prefix: Ipv6Net, route: Route<Ipv6Addr>) -> Option<Route<Ipv6Addr>> {
        self.v6
            .insert(u128::from(prefix.addr()), prefix.prefix_len(), route)
    }

    /// [`RouteTable::remove`] for IPv6.
    pub fn remove6(&mut self, prefix: Ipv6Net) -> Option<Route<Ipv6Addr>> {
        self.v6
            .remove(u128::from(prefix.addr()), prefix.prefix_len())
    }

    /// [`RouteTable::lookup`] for IPv6.
    pub fn lookup6(&self, dst: Ipv6Addr) -> Option<(Ipv6Net, &Route<Ipv6Addr>)> {
        self.v6.lookup(u128::from(dst)).map(|(key, len, route)| {
            let prefix = Ipv6Net::new(Ipv6Addr::from(key), len).expect("length <= 128");
            (prefix, route)
        })
    }

    /// [`RouteTable::lookup_batch`] for IPv6.
    pub fn lookup_batch6<'a>(
        &'a self,
        dsts: &[Ipv6Addr],
        mut each: impl FnMut(usize, Option<(Ipv6Net, &'a Route<Ipv6Addr>)>),
    ) {
        batch(&self.v6, dsts, |i, found| {
            each(
                i,
                found.map(|(key, len, route)| {
                    let prefix = Ipv6Net::new(Ipv6Addr::from(key), len).expect("length <= 128");
                    (prefix, route)
                }),
            )
        });
    }

    /// IPv4 routes held.
    pub fn len(&self) -> usize {
        self.v4.len()
    }

    /// IPv6 routes held.
    pub fn len6(&self) -> usize {
        self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    /// The heap bytes both families' tables hold ([`Lpm::bytes`]).
    pub fn bytes(&self) -> usize {
        self.v4.bytes() + self.v6.bytes()
    }
}

/// [`Lpm::lookup_batch`] of the addresses `dsts` as keys, each batch's keys converted
/// on the stack.
fn batch<'a, A: Copy + Into<K>, K: LpmKey + Default, R: Clone + Eq + std::hash::Hash>(
    table: &'a Lpm<K, R>,
    dsts: &[A],
    mut each: impl FnMut(usize, Option<(K, u8, &'a R)>),
) {
    for (c, chunk) in dsts.chunks(BATCH).enumerate() {
        let mut keys = [K::default(); BATCH];
        for (key, &dst) in keys.iter_mut().zip(chunk) {
            *key = dst.into();
        }
        table.lookup_batch(&keys[..chunk.len()], |i, found| each(c * BATCH + i, found));
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
    fn ipv6_routes_and_removal_in_place() {
        let mut t = RouteTable::new();
        let net = |s: &str| s.parse::<Ipv6Net>().unwrap();
        let route6 = |out| Route::<Ipv6Addr> {
            out,
            next_hop: NextHop::Connected,
        };
        t.insert6(net("::/0"), route6(0));
        t.insert6(net("2001:db8::/32"), route6(1));
        t.insert6(net("2001:db8:9::/48"), route6(2));
        let out = |t: &RouteTable, ip: &str| t.lookup6(ip.parse().unwrap()).unwrap().1.out;
        assert_eq!(out(&t, "2001:db8:9::1"), 2);
        assert_eq!(out(&t, "2001:db8:8::1"), 1);
        assert_eq!(out(&t, "2001:db9::1"), 0);
        assert_eq!(t.remove6(net("2001:db8:9::/48")), Some(route6(2)));
        assert_eq!(out(&t, "2001:db8:9::1"), 1);
        assert_eq!((t.len(), t.len6()), (0, 2));
        assert!(
            t.lookup([10, 0, 0, 1].into()).is_none(),
            "the families are apart"
        );
        t.insert("10.0.0.0/8".parse().unwrap(), route(3));
        assert_eq!(t.remove("10.0.0.0/8".parse().unwrap()), Some(route(3)));
        assert!(t.lookup([10, 0, 0, 1].into()).is_none());
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
            // The same routes in IPv6 as the top 32 bits of their prefixes.
            let v6 = |addr: u32| Ipv6Addr::from(u128::from(addr) << 96);
            let mut table = RouteTable::new();
            for &(addr, len, out) in &routes {
                table.insert(Ipv4Net::new(addr.into(), len).unwrap(), route(out));
                let next_hop = NextHop::Connected;
                table.insert6(Ipv6Net::new(v6(addr), len).unwrap(), Route { out, next_hop });
            }
            let dsts: Vec<u32> = probes.into_iter().map(spread).collect();
            for &dst in &dsts {
                let got = table.lookup(dst.into()).map(|(n, r)| (n.prefix_len(), r.out));
                prop_assert_eq!(got, naive(&routes, dst));
            }
            // Batched, over more than one batch.
            let expected: Vec<_> = dsts.iter().enumerate().map(|(i, &d)| (i, naive(&routes, d))).collect();
            let addrs: Vec<Ipv4Addr> = dsts.iter().map(|&d| d.into()).collect();
            let mut got = Vec::new();
            table.lookup_batch(&addrs, |i, hit| got.push((i, hit.map(|(n, r)| (n.prefix_len(), r.out)))));
            prop_assert_eq!(&got, &expected);
            let addrs6: Vec<Ipv6Addr> = dsts.iter().map(|&d| v6(d)).collect();
            got.clear();
            table.lookup_batch6(&addrs6, |i, hit| got.push((i, hit.map(|(n, r)| (n.prefix_len(), r.out)))));
            prop_assert_eq!(&got, &expected);
        }
    }
}
