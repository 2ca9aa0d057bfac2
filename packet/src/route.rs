//! The routing tables: IPv4 and IPv6 prefixes to routes, by longest-prefix match.
//!
//! Each family is a [`crate::lpm::Lpm`] multibit trie: a lookup reads at most 4 (IPv4)
//! or 16 (IPv6) nodes whatever the number of routes, and one route is added or removed in
//! place, so a control plane can follow route changes while the table serves lookups.
//!
//! A multipath route (the kernel's `nexthop via A dev X weight 1 nexthop via B dev Y
//! weight 2`) is one [`NextHop::Multipath`] value naming a [`Group`] of weighted next
//! hops. Each distinct group is stored once, however many prefixes share it, and freed
//! with the last; a lookup that ends at one picks the next hop of the packet's flow
//! ([`RouteTable::pick`]): by hash-threshold over the weights (RFC 2992, as Linux does),
//! of a hash of the flow's addresses, protocol and ports ([`flow_hash`], Linux's
//! `fib_multipath_hash_policy` 1), so that a flow stays on one next hop and the flows
//! spread in proportion to the weights. A route with one next hop costs nothing more.

use crate::fasthash::FastMap;
use crate::lpm::{Lpm, LpmKey, BATCH};
use crate::net::{Ipv4Net, Ipv6Net};
use crate::rules::FiveTuple;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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
    /// One of a group's next hops, by the packet's flow ([`RouteTable::pick`] says which);
    /// the route's `out` means nothing.
    Multipath(Group),
}

/// A multipath route's next hops in the [`RouteTable`] that holds them: made by
/// [`RouteTable::insert_multipath`], read by [`RouteTable::members`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Group(u32);

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
    /// The neighbour to resolve (ARP or neighbour table) for a packet to `dst`, on a
    /// route picked from its group ([`RouteTable::pick`]).
    pub fn next_hop_addr(&self, dst: A) -> A {
        match self.next_hop {
            NextHop::Connected | NextHop::Reject(_) | NextHop::Multipath(_) => dst,
            NextHop::Gateway(gw) => gw,
        }
    }
}

/// One next hop of a multipath route and its share of the flows.
pub type Member<A> = (Route<A>, u16);

/// A flow's hash, which spreads flows over a multipath route's next hops: the source
/// and destination addresses, the protocol and, for TCP and UDP, the ports, unless the
/// packet is a fragment (`fragment`: the later fragments carry no ports, and every
/// fragment of a datagram must take the same next hop). Linux's
/// `fib_multipath_hash_policy` 1.
pub fn flow_hash(flow: &FiveTuple, fragment: bool) -> u32 {
    let words = |ip: IpAddr| -> [u64; 2] {
        let bits = match ip {
            IpAddr::V4(ip) => u128::from(u32::from(ip)),
            IpAddr::V6(ip) => u128::from(ip),
        };
        [(bits >> 64) as u64, bits as u64]
    };
    let ports = match flow.ports {
        Some((src, dst)) if !fragment => u64::from(src) << 16 | u64::from(dst),
        _ => 0,
    };
    let [a, b] = words(flow.src);
    let [c, d] = words(flow.dst);
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for word in [a, b, c, d, u64::from(flow.protocol) << 32 | ports] {
        h = (h ^ word)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
            .rotate_left(31);
    }
    // murmur3's finalizer: every input bit reaches the high bits the pick uses.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    (h >> 32) as u32
}

/// The multipath groups of one family, each distinct list of members once, with the
/// number of prefixes holding it.
#[derive(Clone, Debug)]
struct Groups<A> {
    /// By [`Group`] index: the members and their holders (0: a free slot).
    slots: Vec<(Box<[Member<A>]>, u32)>,
    by_members: FastMap<Box<[Member<A>]>, u32>,
    free: Vec<u32>,
}

impl<A> Default for Groups<A> {
    fn default() -> Self {
        Groups {
            slots: Vec::new(),
            by_members: FastMap::default(),
            free: Vec::new(),
        }
    }
}

impl<A: Copy + Eq + std::hash::Hash> Groups<A> {
    /// The group of `members`, stored if new, with one more holder.
    fn hold(&mut self, members: &[Member<A>]) -> Group {
        if let Some(&g) = self.by_members.get(members) {
            self.slots[g as usize].1 += 1;
            return Group(g);
        }
        let members: Box<[Member<A>]> = members.into();
        let g = match self.free.pop() {
            Some(g) => {
                self.slots[g as usize] = (members.clone(), 1);
                g
            }
            None => {
                self.slots.push((members.clone(), 1));
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 groups")
            }
        };
        self.by_members.insert(members, g);
        Group(g)
    }

    /// A prefix whose route was `route` no longer holds it: its group, if it has one,
    /// loses a holder and is freed with the last.
    fn let_go(&mut self, route: Option<Route<A>>) {
        let Some(Route {
            next_hop: NextHop::Multipath(Group(g)),
            ..
        }) = route
        else {
            return;
        };
        let (members, holders) = &mut self.slots[g as usize];
        *holders -= 1;
        if *holders == 0 {
            self.by_members.remove(members);
            *members = Box::new([]);
            self.free.push(g);
        }
    }

    /// `route` itself, or the member of its group that `hash` falls on: member `i` takes
    /// the hashes whose share of the weights' total lands in its own span.
    fn pick(&self, route: Route<A>, hash: impl FnOnce() -> u32) -> Route<A> {
        let NextHop::Multipath(Group(g)) = route.next_hop else {
            return route;
        };
        let members = &self.slots[g as usize].0;
        let total: u64 = members.iter().map(|&(_, w)| u64::from(w)).sum();
        let point = (u64::from(hash()) * total) >> 32;
        let mut upto = 0;
        for &(member, weight) in members.iter() {
            upto += u64::from(weight);
            if point < upto {
                return member;
            }
        }
        unreachable!("a group has members of positive weights")
    }

    fn members(&self, g: Group) -> &[Member<A>] {
        &self.slots[g.0 as usize].0
    }

    /// The heap bytes held: the slots, each member list twice (slot and key), the map.
    fn bytes(&self) -> usize {
        let lists: usize = self.slots.iter().map(|(m, _)| m.len()).sum();
        self.slots.capacity() * std::mem::size_of::<(Box<[Member<A>]>, u32)>()
            + 2 * lists * std::mem::size_of::<Member<A>>()
            + self.by_members.capacity() * (std::mem::size_of::<(Box<[Member<A>]>, u32)>() + 1)
            + self.free.capacity() * 4
    }
}

/// The IPv4 and IPv6 routes.
#[derive(Clone, Debug, Default)]
pub struct RouteTable {
    v4: Lpm<u32, Route>,
    v6: Lpm<u128, Route<Ipv6Addr>>,
    groups: Groups<Ipv4Addr>,
    groups6: Groups<Ipv6Addr>,
}

/// Whether `route` has one next hop (or none): not a group's.
fn single<A>(route: &Route<A>) -> bool {
    !matches!(route.next_hop, NextHop::Multipath(_))
}

/// The members of a multipath route, checked: at least two (one is a plain route), each
/// of a positive weight and none itself multipath.
fn checked<A>(members: &[Member<A>]) -> &[Member<A>] {
    assert!(
        members.len() >= 2 && members.iter().all(|(r, w)| *w > 0 && single(r)),
        "a multipath route has two or more next hops of positive weights, none multipath"
    );
    members
}

impl RouteTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a route for `prefix` (host bits are ignored), replacing and returning any
    /// route for the same prefix (a [`NextHop::Multipath`] one names a group that may be
    /// gone). `route` is not multipath: [`RouteTable::insert_multipath`] adds those.
    pub fn insert(&mut self, prefix: Ipv4Net, route: Route) -> Option<Route> {
        assert!(single(&route), "RouteTable::insert of a multipath route");
        self.put(prefix, route)
    }

    fn put(&mut self, prefix: Ipv4Net, route: Route) -> Option<Route> {
        let old = self
            .v4
            .insert(u32::from(prefix.addr()), prefix.prefix_len(), route);
        self.groups.let_go(old);
        old
    }

    /// Adds a route for `prefix` that spreads flows over `members` by their weights
    /// (two or more next hops, each of weight 1 or more, none multipath: panics
    /// otherwise), replacing and returning any route for the same prefix.
    pub fn insert_multipath(
        &mut self,
        prefix: Ipv4Net,
        members: &[Member<Ipv4Addr>],
    ) -> Option<Route> {
        let group = self.groups.hold(checked(members));
        let route = Route {
            out: 0,
            next_hop: NextHop::Multipath(group),
        };
        self.put(prefix, route)
    }

    /// Removes the route for `prefix` (host bits are ignored).
    pub fn remove(&mut self, prefix: Ipv4Net) -> Option<Route> {
        let old = self
            .v4
            .remove(u32::from(prefix.addr()), prefix.prefix_len());
        self.groups.let_go(old);
        old
    }

    /// The most specific route covering `dst`, with its prefix; a multipath one is
    /// resolved to a next hop by [`RouteTable::pick`].
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

    /// The route a packet takes on `route`, a route of this table: `route` itself, or
    /// for a multipath route the member its flow's hash (`hash`, computed only then:
    /// [`flow_hash`]) falls on.
    pub fn pick(&self, route: Route, hash: impl FnOnce() -> u32) -> Route {
        self.groups.pick(route, hash)
    }

    /// The members of group `g` of this table's IPv4 routes, with their weights.
    pub fn members(&self, g: Group) -> &[Member<Ipv4Addr>] {
        self.groups.members(g)
    }

    /// [`RouteTable::insert`] for IPv6.
    pub fn insert6(&mut self, prefix: Ipv6Net, route: Route<Ipv6Addr>) -> Option<Route<Ipv6Addr>> {
        assert!(single(&route), "RouteTable::insert6 of a multipath route");
        self.put6(prefix, route)
    }

    fn put6(&mut self, prefix: Ipv6Net, route: Route<Ipv6Addr>) -> Option<Route<Ipv6Addr>> {
        let old = self
            .v6
            .insert(u128::from(prefix.addr()), prefix.prefix_len(), route);
        self.groups6.let_go(old);
        old
    }

    /// [`RouteTable::insert_multipath`] for IPv6.
    pub fn insert6_multipath(
        &mut self,
        prefix: Ipv6Net,
        members: &[Member<Ipv6Addr>],
    ) -> Option<Route<Ipv6Addr>> {
        let group = self.groups6.hold(checked(members));
        let route = Route {
            out: 0,
            next_hop: NextHop::Multipath(group),
        };
        self.put6(prefix, route)
    }

    /// [`RouteTable::remove`] for IPv6.
    pub fn remove6(&mut self, prefix: Ipv6Net) -> Option<Route<Ipv6Addr>> {
        let old = self
            .v6
            .remove(u128::from(prefix.addr()), prefix.prefix_len());
        self.groups6.let_go(old);
        old
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

    /// [`RouteTable::pick`] for IPv6.
    pub fn pick6(&self, route: Route<Ipv6Addr>, hash: impl FnOnce() -> u32) -> Route<Ipv6Addr> {
        self.groups6.pick(route, hash)
    }

    /// [`RouteTable::members`] for IPv6.
    pub fn members6(&self, g: Group) -> &[Member<Ipv6Addr>] {
        self.groups6.members(g)
    }

    /// Every IPv4 route with its prefix, in no particular order ([`Lpm::entries`]).
    pub fn entries(&self) -> impl Iterator<Item = (Ipv4Net, &Route)> + '_ {
        self.v4.entries().map(|(key, len, route)| {
            let prefix = Ipv4Net::new(Ipv4Addr::from(key), len).expect("length <= 32");
            (prefix, route)
        })
    }

    /// [`RouteTable::entries`] for IPv6.
    pub fn entries6(&self) -> impl Iterator<Item = (Ipv6Net, &Route<Ipv6Addr>)> + '_ {
        self.v6.entries().map(|(key, len, route)| {
            let prefix = Ipv6Net::new(Ipv6Addr::from(key), len).expect("length <= 128");
            (prefix, route)
        })
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

    /// The heap bytes both families' tables hold ([`Lpm::bytes`]) and their multipath
    /// groups.
    pub fn bytes(&self) -> usize {
        self.v4.bytes() + self.v6.bytes() + self.groups.bytes() + self.groups6.bytes()
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

    fn via(out: usize, gw: [u8; 4]) -> Route {
        Route {
            out,
            next_hop: NextHop::Gateway(gw.into()),
        }
    }

    fn flow(src: u32, sport: u16, dport: u16) -> FiveTuple {
        FiveTuple {
            protocol: 17,
            src: IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | src)),
            dst: IpAddr::V4([10, 9, 0, 1].into()),
            ports: Some((sport, dport)),
        }
    }

    #[test]
    fn flows_spread_over_a_multipath_route_by_weight_and_each_flow_keeps_its_next_hop() {
        let mut t = RouteTable::new();
        let members = [
            (via(1, [10, 0, 1, 2]), 1),
            (via(2, [10, 0, 2, 2]), 3),
            (via(3, [10, 0, 3, 2]), 4),
        ];
        t.insert_multipath("10.9.0.0/24".parse().unwrap(), &members);
        let (_, &route) = t.lookup([10, 9, 0, 1].into()).unwrap();
        let pick = |f: &FiveTuple| t.pick(route, || flow_hash(f, false)).out;
        let mut taken = [0u32; 4];
        let flows = 80_000;
        for i in 0..flows {
            let f = flow(i % 251, 1024 + (i / 251) as u16, 9);
            let out = pick(&f);
            taken[out] += 1;
            assert_eq!(pick(&f), out, "a flow keeps its next hop");
        }
        // Each member's share is its weight's (1/8, 3/8, 4/8), within 2% of all flows:
        // the hash is fixed, so this is one fixed outcome, not a chance.
        for (out, weight) in [(1, 1), (2, 3), (3, 4)] {
            let expected = flows * weight / 8;
            assert!(
                taken[out].abs_diff(expected) < flows / 50,
                "out {out} took {} of {flows} flows, its weight {expected}: {taken:?}",
                taken[out]
            );
        }
        // The ports spread flows of one pair of addresses too.
        let by_port: std::collections::HashSet<usize> =
            (0..64).map(|p| pick(&flow(1, 2000 + p, 53))).collect();
        assert_eq!(by_port.len(), 3, "{by_port:?}");
    }

    #[test]
    fn a_fragment_is_hashed_without_its_ports_and_ipv6_spreads_too() {
        let (a, b) = (flow(7, 1000, 53), flow(7, 4000, 80));
        assert_eq!(flow_hash(&a, true), flow_hash(&b, true));
        assert_ne!(flow_hash(&a, false), flow_hash(&b, false));
        let mut t = RouteTable::new();
        let hop = |out| Route::<Ipv6Addr> {
            out,
            next_hop: NextHop::Connected,
        };
        let prefix: Ipv6Net = "2001:db8:9::/48".parse().unwrap();
        t.insert6_multipath(prefix, &[(hop(1), 1), (hop(2), 1)]);
        let (_, &route) = t.lookup6("2001:db8:9::1".parse().unwrap()).unwrap();
        let outs: std::collections::HashSet<usize> = (0..64u16)
            .map(|p| {
                let f = FiveTuple {
                    protocol: 6,
                    src: "2001:db8:1::2".parse().unwrap(),
                    dst: "2001:db8:9::1".parse().unwrap(),
                    ports: Some((p, 443)),
                };
                t.pick6(route, || flow_hash(&f, false)).out
            })
            .collect();
        assert_eq!(outs.len(), 2, "{outs:?}");
    }

    #[test]
    fn a_group_is_stored_once_for_the_routes_sharing_it_and_freed_with_the_last() {
        let mut t = RouteTable::new();
        let members = [(via(1, [10, 0, 1, 2]), 1), (via(2, [10, 0, 2, 2]), 1)];
        for net in ["10.8.0.0/16", "10.9.0.0/16", "10.10.0.0/16"] {
            t.insert_multipath(net.parse().unwrap(), &members);
        }
        assert_eq!(t.groups.by_members.len(), 1);
        let (_, &route) = t.lookup([10, 9, 0, 1].into()).unwrap();
        let NextHop::Multipath(g) = route.next_hop else {
            panic!("{route:?}")
        };
        assert_eq!(t.members(g), members);
        // A single route replaces one, a removal another: the group stays for the third.
        t.insert("10.8.0.0/16".parse().unwrap(), via(1, [10, 0, 1, 2]));
        t.remove("10.9.0.0/16".parse().unwrap());
        assert_eq!((t.groups.by_members.len(), t.groups.free.len()), (1, 0));
        // The last goes: freed, and its slot is the next group's.
        t.remove("10.10.0.0/16".parse().unwrap());
        assert_eq!((t.groups.by_members.len(), t.groups.free.len()), (0, 1));
        let other = [(via(1, [10, 0, 1, 3]), 2), (via(2, [10, 0, 2, 3]), 1)];
        t.insert_multipath("10.11.0.0/16".parse().unwrap(), &other);
        assert_eq!((t.groups.slots.len(), t.groups.free.len()), (1, 0));
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
