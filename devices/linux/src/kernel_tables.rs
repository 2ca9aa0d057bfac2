//! The kernel's own tables, read over rtnetlink: the IPv4 and IPv6 routes, the interface
//! addresses and the neighbours of a network namespace, dumped once and then followed as
//! they change (`ip route`, `ip -6 route`, `ip addr`, `ip neigh`, and the routing daemons
//! that drive them).
//!
//! [`KernelTables::open`] joins the route, address and neighbour multicast groups of the
//! namespace the calling thread is in, then [`KernelTables::dump`] reads the whole tables
//! on a socket of its own, opened in that namespace too (a dump made later, from a
//! thread in another namespace, still reads the first's): a change made between the two reaches the caller twice, once in
//! the dump and once as a [`Change`], and applying a change is idempotent. A change that
//! arrives after the dump is read by [`KernelTables::changes`], without blocking; the
//! socket's fd ([`AsFd`]) becomes readable when one is waiting. When the kernel had to drop
//! notifications because the socket's buffer was full (`ENOBUFS`), `changes` says
//! [`Change::Overrun`]: what the caller holds may be stale, and it must dump again.
//!
//! Parsing ([`parse`]) is apart from the sockets, so that it can be tested and fuzzed on
//! bytes: a message it does not understand is skipped, never a panic.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REPLACE, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteHeader, RouteMessage, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// The multicast groups followed (`RTNLGRP_*` of linux/rtnetlink.h): neighbours, IPv4
/// and IPv6 addresses, IPv4 and IPv6 routes.
const GROUPS: [u32; 5] = [
    3,  // RTNLGRP_NEIGH
    5,  // RTNLGRP_IPV4_IFADDR
    7,  // RTNLGRP_IPV4_ROUTE
    9,  // RTNLGRP_IPV6_IFADDR
    11, // RTNLGRP_IPV6_ROUTE
];

/// The main routing table, where `ip route` puts a route that names none.
pub const MAIN_TABLE: u32 = 254;

/// How many times a dump the kernel marked interrupted (`NLM_F_DUMP_INTR`: the table
/// changed while it was read) is read again before giving up.
const DUMP_TRIES: usize = 5;

/// An address and a prefix length: a route's destination, an interface's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// The prefix, if its length fits its address (at most 32 bits for IPv4, 128 for
    /// IPv6): a message that says otherwise is not the kernel's, and is skipped.
    pub fn valid(self) -> Option<Prefix> {
        let bits = if self.addr.is_ipv4() { 32 } else { 128 };
        (self.len <= bits).then_some(self)
    }
}

/// What the kernel does with a packet a route matches (`ip route`'s type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// Forward to the next hops.
    Unicast,
    /// Drop silently.
    Blackhole,
    /// Drop with ICMP destination unreachable (host unreachable; ICMPv6 no route).
    Unreachable,
    /// Drop with ICMP communication administratively prohibited.
    Prohibit,
    /// Deliver to the box (local, broadcast, anycast routes of the local table).
    Local,
    /// Any other kernel type (multicast, throw, nat, ...), by its number.
    Other(u8),
}

/// One next hop of a route: through a gateway or directly out of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHop {
    /// The gateway; `None` for a directly connected destination.
    pub gateway: Option<IpAddr>,
    /// The output interface's index.
    pub ifindex: u32,
    /// Its share of a multipath route's flows (the kernel's `weight`, 1 to 256).
    pub weight: u16,
}

/// One route of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub dest: Prefix,
    pub table: u32,
    pub kind: RouteKind,
    /// The route's metric (`ip route ... metric N`); the lowest wins among equal prefixes.
    pub metric: u32,
    /// Empty for a route with no next hop (blackhole, unreachable, prohibit).
    pub next_hops: Vec<NextHop>,
}

/// An address of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Address {
    pub ifindex: u32,
    pub prefix: Prefix,
}

/// A neighbour entry (ARP for IPv4, neighbour discovery for IPv6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    pub ifindex: u32,
    pub ip: IpAddr,
    /// Its link-layer address, when the entry has one and it is usable (reachable, stale,
    /// delay, probe, permanent or noarp); `None` while it resolves or after it failed.
    pub mac: Option<[u8; 6]>,
}

/// One change of the kernel's tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Route(Route),
    RouteGone(Route),
    Address(Address),
    AddressGone(Address),
    Neighbour(Neighbour),
    NeighbourGone(Neighbour),
    /// Notifications were lost (`ENOBUFS`): dump again.
    Overrun,
}

/// The whole tables at one time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub routes: Vec<Route>,
    pub addresses: Vec<Address>,
    pub neighbours: Vec<Neighbour>,
}

/// The kernel's tables of the namespace the opening thread was in.
pub struct KernelTables {
    events: Socket,
    /// Where dumps are asked for and read.
    requests: Socket,
    buf: Vec<u8>,
}

impl KernelTables {
    /// Follows the route, address and neighbour changes of the calling thread's network
    /// namespace. `receive_buffer` is the socket's buffer, bytes: the notifications a burst
    /// of changes may queue before they are read (the kernel doubles it, and may cap it
    /// at `net.core.rmem_max`).
    pub fn open(receive_buffer: usize) -> io::Result<KernelTables> {
        let mut events = Socket::new(NETLINK_ROUTE)?;
        events.bind(&SocketAddr::new(0, 0))?;
        events.set_rx_buf_sz(receive_buffer)?;
        for group in GROUPS {
            events.add_membership(group)?;
        }
        events.set_non_blocking(true)?;
        Ok(KernelTables {
            events,
            requests: Socket::new(NETLINK_ROUTE)?,
            buf: vec![0; 1 << 16],
        })
    }

    /// Reads the whole tables: every route of every table (IPv4 and IPv6), every address
    /// and every neighbour entry.
    pub fn dump(&self) -> io::Result<Snapshot> {
        let mut snapshot = Snapshot::default();
        for request in [
            RouteNetlinkMessage::GetRoute(RouteMessage::default()),
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            RouteNetlinkMessage::GetNeighbour(NeighbourMessage::default()),
        ] {
            let changes = dump_one(&self.requests, request)?;
            for change in changes {
                match change {
                    Change::Route(r) => snapshot.routes.push(r),
                    Change::Address(a) => snapshot.addresses.push(a),
                    Change::Neighbour(n) => snapshot.neighbours.push(n),
                    _ => {}
                }
            }
        }
        Ok(snapshot)
    }

    /// Asks the kernel to resolve `ip` on interface `ifindex` (ARP, neighbour discovery) as
    /// its own traffic to it would: `ip neigh replace IP dev IF use` (`NTF_USE`), which
    /// creates the entry if there is none and starts resolving it unless it is already
    /// usable. The entry that results reaches the caller as a [`Change`]. Returns at once:
    /// the kernel handles the request as it is sent, and answers before `send` returns.
    pub fn resolve(&self, ifindex: u32, ip: IpAddr) -> io::Result<()> {
        let mut neighbour = NeighbourMessage::default();
        neighbour.header.family = match ip {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        neighbour.header.ifindex = ifindex;
        neighbour.header.flags = NeighbourFlags::Use;
        neighbour.header.state = NeighbourState::None;
        neighbour
            .attributes
            .push(NeighbourAttribute::Destination(NeighbourAddress::from(ip)));
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
        let payload = NetlinkPayload::from(RouteNetlinkMessage::NewNeighbour(neighbour));
        let mut message = NetlinkMessage::new(header, payload);
        message.finalize();
        let mut out = vec![0; message.buffer_len()];
        message.serialize(&mut out);
        self.requests.send_to(&out, &SocketAddr::new(0, 0), 0)?;
        let mut buf = [0u8; 1024];
        let n = self.requests.recv(&mut &mut buf[..], 0)?;
        match parse(&buf[..n]).error {
            Some(errno) => Err(io::Error::from_raw_os_error(errno)),
            None => Ok(()),
        }
    }

    /// The changes waiting, in the order the kernel made them; empty when none waits.
    /// [`Change::Overrun`] ends the list when notifications were lost.
    pub fn changes(&mut self) -> io::Result<Vec<Change>> {
        let mut changes = Vec::new();
        loop {
            match self.events.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => changes.extend(parse(&self.buf[..n]).changes),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(changes),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    // The kernel dropped notifications: drain what is queued (it predates
                    // the dump the caller now makes) and say so.
                    while self.events.recv(&mut &mut self.buf[..], 0).is_ok() {}
                    changes.push(Change::Overrun);
                    return Ok(changes);
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsFd for KernelTables {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }
}

/// Sends a dump `request` on `socket` and reads its answer; read again while the kernel
/// marks it interrupted.
fn dump_one(socket: &Socket, request: RouteNetlinkMessage) -> io::Result<Vec<Change>> {
    let mut buf = vec![0; 1 << 16];
    'tries: for _ in 0..DUMP_TRIES {
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut message = NetlinkMessage::new(header, NetlinkPayload::from(request.clone()));
        message.finalize();
        let mut out = vec![0; message.buffer_len()];
        message.serialize(&mut out);
        socket.send_to(&out, &SocketAddr::new(0, 0), 0)?;
        let mut changes = Vec::new();
        loop {
            let n = socket.recv(&mut &mut buf[..], 0)?;
            let parsed = parse(&buf[..n]);
            if let Some(errno) = parsed.error {
                return Err(io::Error::from_raw_os_error(errno));
            }
            changes.extend(parsed.changes);
            if parsed.done {
                if parsed.interrupted {
                    continue 'tries;
                }
                return Ok(changes);
            }
        }
    }
    Err(io::Error::other(format!(
        "the kernel's tables changed during each of {DUMP_TRIES} dumps"
    )))
}

/// What one datagram of rtnetlink messages said.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub changes: Vec<Change>,
    /// A dump's last message (`NLMSG_DONE`) was among them.
    pub done: bool,
    /// The kernel marked the dump interrupted (`NLM_F_DUMP_INTR`).
    pub interrupted: bool,
    /// The kernel answered an error (its errno).
    pub error: Option<i32>,
}

/// Parses one datagram, which may hold several messages; a message that does not parse,
/// or that is not a route, address or neighbour, is skipped.
pub fn parse(mut bytes: &[u8]) -> Parsed {
    let mut parsed = Parsed::default();
    while bytes.len() >= 16 {
        let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if len < 16 || len > bytes.len() {
            break;
        }
        let (one, rest) = bytes.split_at(len.next_multiple_of(4).min(bytes.len()));
        bytes = rest;
        let Ok(message) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&one[..len]) else {
            continue;
        };
        if message.header.flags & NLM_F_DUMP_INTR != 0 {
            parsed.interrupted = true;
        }
        match message.payload {
            NetlinkPayload::Done(_) => parsed.done = true,
            NetlinkPayload::Error(e) => {
                if let Some(code) = e.code {
                    parsed.error = Some(-code.get());
                }
            }
            NetlinkPayload::InnerMessage(inner) => parsed.changes.extend(change_of(inner)),
            _ => {}
        }
    }
    parsed
}

fn change_of(message: RouteNetlinkMessage) -> Option<Change> {
    Some(match message {
        RouteNetlinkMessage::NewRoute(m) => Change::Route(route_of(&m)?),
        RouteNetlinkMessage::DelRoute(m) => Change::RouteGone(route_of(&m)?),
        RouteNetlinkMessage::NewAddress(m) => Change::Address(address_of(&m)?),
        RouteNetlinkMessage::DelAddress(m) => Change::AddressGone(address_of(&m)?),
        RouteNetlinkMessage::NewNeighbour(m) => Change::Neighbour(neighbour_of(&m)?),
        RouteNetlinkMessage::DelNeighbour(m) => Change::NeighbourGone(neighbour_of(&m)?),
        _ => return None,
    })
}

fn ip_of(address: &RouteAddress) -> Option<IpAddr> {
    match address {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// The unspecified address of a route's family: the destination of a default route.
fn any_of(header: &RouteHeader) -> Option<IpAddr> {
    match header.address_family {
        AddressFamily::Inet => Some(IpAddr::from([0u8; 4])),
        AddressFamily::Inet6 => Some(IpAddr::from([0u8; 16])),
        _ => None,
    }
}

fn route_of(m: &RouteMessage) -> Option<Route> {
    let header = &m.header;
    let mut dest = any_of(header)?;
    let mut table = u32::from(header.table);
    let (mut gateway, mut oif, mut metric) = (None, 0, 0);
    let mut next_hops = Vec::new();
    for attribute in &m.attributes {
        match attribute {
            RouteAttribute::Destination(a) => dest = ip_of(a)?,
            RouteAttribute::Gateway(a) => gateway = ip_of(a),
            RouteAttribute::Oif(i) => oif = *i,
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::MultiPath(hops) => {
                for hop in hops {
                    let gateway = hop.attributes.iter().find_map(|a| match a {
                        RouteAttribute::Gateway(g) => ip_of(g),
                        _ => None,
                    });
                    next_hops.push(NextHop {
                        gateway,
                        ifindex: hop.interface_index,
                        weight: u16::from(hop.hops) + 1,
                    });
                }
            }
            _ => {}
        }
    }
    let kind = match header.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable => RouteKind::Unreachable,
        RouteType::Prohibit => RouteKind::Prohibit,
        RouteType::Local | RouteType::Broadcast | RouteType::Anycast => RouteKind::Local,
        other => RouteKind::Other(u8::from(other)),
    };
    if next_hops.is_empty() && (oif != 0 || gateway.is_some()) {
        next_hops.push(NextHop {
            gateway,
            ifindex: oif,
            weight: 1,
        });
    }
    let dest = Prefix {
        addr: dest,
        len: header.destination_prefix_length,
    }
    .valid()?;
    if dest.addr.is_ipv4() != (header.address_family == AddressFamily::Inet) {
        return None;
    }
    Some(Route {
        dest,
        table,
        kind,
        metric,
        next_hops,
    })
}

fn address_of(m: &AddressMessage) -> Option<Address> {
    // IFA_LOCAL is the interface's own address on a point-to-point link, where
    // IFA_ADDRESS is the peer's; elsewhere the two are the same.
    let local = m.attributes.iter().find_map(|a| match a {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    let address = m.attributes.iter().find_map(|a| match a {
        AddressAttribute::Address(ip) => Some(*ip),
        _ => None,
    });
    Some(Address {
        ifindex: m.header.index,
        prefix: Prefix {
            addr: local.or(address)?,
            len: m.header.prefix_len,
        }
        .valid()?,
    })
}

fn neighbour_of(m: &NeighbourMessage) -> Option<Neighbour> {
    let ip = m.attributes.iter().find_map(|a| match a {
        NeighbourAttribute::Destination(NeighbourAddress::Inet(ip)) => Some(IpAddr::V4(*ip)),
        NeighbourAttribute::Destination(NeighbourAddress::Inet6(ip)) => Some(IpAddr::V6(*ip)),
        _ => None,
    })?;
    let usable = matches!(
        m.header.state,
        NeighbourState::Reachable
            | NeighbourState::Stale
            | NeighbourState::Delay
            | NeighbourState::Probe
            | NeighbourState::Permanent
            | NeighbourState::Noarp
    );
    let mac = m
        .attributes
        .iter()
        .find_map(|a| match a {
            NeighbourAttribute::LinkLayerAddress(mac) => <[u8; 6]>::try_from(&mac[..]).ok(),
            _ => None,
        })
        .filter(|_| usable);
    Some(Neighbour {
        ifindex: m.header.ifindex,
        ip,
        mac,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use netlink_packet_route::route::RouteNextHop;

    fn bytes(message: RouteNetlinkMessage, flags: u16) -> Vec<u8> {
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        let mut m = NetlinkMessage::new(header, NetlinkPayload::from(message));
        m.finalize();
        let mut out = vec![0; m.buffer_len()];
        m.serialize(&mut out);
        out
    }

    fn route(
        family: AddressFamily,
        kind: RouteType,
        attributes: Vec<RouteAttribute>,
    ) -> RouteMessage {
        let mut m = RouteMessage::default();
        m.header.address_family = family;
        m.header.destination_prefix_length = 24;
        m.header.table = 254;
        m.header.kind = kind;
        m.attributes = attributes;
        m
    }

    #[test]
    fn a_datagram_of_a_unicast_a_multipath_and_a_blackhole_route_parses_to_each() {
        let gw: IpAddr = "10.0.0.1".parse().unwrap();
        let unicast = route(
            AddressFamily::Inet,
            RouteType::Unicast,
            vec![
                RouteAttribute::Destination(RouteAddress::Inet("192.0.2.0".parse().unwrap())),
                RouteAttribute::Gateway(RouteAddress::Inet("10.0.0.1".parse().unwrap())),
                RouteAttribute::Oif(3),
                RouteAttribute::Priority(20),
            ],
        );
        let hop = |ifindex, gw: &str, hops| {
            let mut h = RouteNextHop::default();
            h.interface_index = ifindex;
            h.hops = hops;
            h.attributes = vec![RouteAttribute::Gateway(RouteAddress::Inet6(
                gw.parse().unwrap(),
            ))];
            h
        };
        let multipath = route(
            AddressFamily::Inet6,
            RouteType::Unicast,
            vec![
                RouteAttribute::Destination(RouteAddress::Inet6("2001:db8::".parse().unwrap())),
                RouteAttribute::MultiPath(vec![hop(2, "fe80::1", 0), hop(4, "fe80::2", 2)]),
            ],
        );
        let blackhole = route(AddressFamily::Inet, RouteType::BlackHole, vec![]);
        let mut datagram = bytes(RouteNetlinkMessage::NewRoute(unicast), 0);
        datagram.extend(bytes(RouteNetlinkMessage::NewRoute(multipath), 0));
        datagram.extend(bytes(RouteNetlinkMessage::DelRoute(blackhole), 0));
        let parsed = parse(&datagram);
        assert_eq!(parsed.changes.len(), 3, "{parsed:?}");
        let Change::Route(r) = &parsed.changes[0] else {
            panic!("{parsed:?}")
        };
        assert_eq!(
            r.dest,
            Prefix {
                addr: "192.0.2.0".parse().unwrap(),
                len: 24
            }
        );
        assert_eq!(
            (r.kind, r.metric, r.table),
            (RouteKind::Unicast, 20, MAIN_TABLE)
        );
        assert_eq!(
            r.next_hops,
            [NextHop {
                gateway: Some(gw),
                ifindex: 3,
                weight: 1
            }]
        );
        let Change::Route(r) = &parsed.changes[1] else {
            panic!("{parsed:?}")
        };
        assert_eq!(r.next_hops.len(), 2);
        assert_eq!((r.next_hops[1].ifindex, r.next_hops[1].weight), (4, 3));
        let Change::RouteGone(r) = &parsed.changes[2] else {
            panic!("{parsed:?}")
        };
        assert_eq!(r.kind, RouteKind::Blackhole);
        // A blackhole route without a destination attribute is the default route.
        assert_eq!(r.dest.addr, IpAddr::from([0u8; 4]));
        assert!(r.next_hops.is_empty());
    }

    #[test]
    fn a_neighbour_has_a_mac_only_while_its_entry_is_usable() {
        let entry = |state| {
            let mut m = NeighbourMessage::default();
            m.header.family = AddressFamily::Inet;
            m.header.ifindex = 7;
            m.header.state = state;
            m.attributes = vec![
                NeighbourAttribute::Destination(NeighbourAddress::Inet(
                    "10.0.0.2".parse().unwrap(),
                )),
                NeighbourAttribute::LinkLayerAddress(vec![2, 0, 0, 0, 0, 1]),
            ];
            parse(&bytes(RouteNetlinkMessage::NewNeighbour(m), 0)).changes
        };
        let Change::Neighbour(n) = &entry(NeighbourState::Reachable)[0] else {
            panic!()
        };
        assert_eq!(n.mac, Some([2, 0, 0, 0, 0, 1]));
        let Change::Neighbour(n) = &entry(NeighbourState::Failed)[0] else {
            panic!()
        };
        assert_eq!((n.ifindex, n.mac), (7, None));
    }

    #[test]
    fn truncated_and_foreign_bytes_are_skipped_without_a_panic() {
        let m = route(
            AddressFamily::Inet,
            RouteType::Unicast,
            vec![RouteAttribute::Oif(1)],
        );
        let whole = bytes(RouteNetlinkMessage::NewRoute(m), 0);
        for cut in 0..whole.len() {
            let _ = parse(&whole[..cut]);
        }
        let mut lying = whole.clone();
        lying[0] = 0xff; // a length past the datagram
        assert_eq!(parse(&lying), Parsed::default());
        assert_eq!(parse(&[0u8; 40]).changes, []);
    }

    #[test]
    fn a_route_whose_prefix_does_not_fit_its_family_is_skipped() {
        let mut m = route(
            AddressFamily::Inet,
            RouteType::Unicast,
            vec![RouteAttribute::Oif(1)],
        );
        m.header.destination_prefix_length = 33;
        assert_eq!(
            parse(&bytes(RouteNetlinkMessage::NewRoute(m), 0)).changes,
            []
        );
        let v6_in_v4 = route(
            AddressFamily::Inet,
            RouteType::Unicast,
            vec![RouteAttribute::Destination(RouteAddress::Inet6(
                "2001:db8::".parse().unwrap(),
            ))],
        );
        assert_eq!(
            parse(&bytes(RouteNetlinkMessage::NewRoute(v6_in_v4), 0)).changes,
            []
        );
    }

    #[test]
    fn a_dump_marked_interrupted_and_its_end_are_seen() {
        let m = route(
            AddressFamily::Inet,
            RouteType::Unicast,
            vec![RouteAttribute::Oif(1)],
        );
        let parsed = parse(&bytes(RouteNetlinkMessage::NewRoute(m), NLM_F_DUMP_INTR));
        assert!(parsed.interrupted && !parsed.done);
    }
}
