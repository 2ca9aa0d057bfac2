//! The router: FreeBSD's `ether_input` → `ip_input` → `ip_tryforward` on one frame, with
//! ARP and the ICMP messages a router owes its neighbours (RFC 1812). IPv6 takes its own
//! path ([`ipv6`](self::ipv6): RFC 8200, RFC 4291, RFC 4443) after the Ethernet checks.
//!
//! The path of a frame, and the verdict at each exit:
//!
//! 1. Ethernet: truncated → `Truncated`; a group or zero source MAC, or a unicast frame
//!    for another station (seen in promiscuous capture) → `Martian`; 802.1Q/802.1ad tag
//!    → `Vlan`; IPv6 → its own path; neither IPv4, IPv6 nor ARP → `UnknownEthertype`.
//! 2. ARP is handled entirely here (verdict `Consumed`): requests for the input
//!    interface's addresses are answered; the sender is learned when the packet is for us,
//!    and refreshed (RFC 826 merge) when it already has an entry. No proxy ARP.
//! 3. IPv4 header checks of RFC 1812 §5.2.2 (`Truncated`, `BadVersion`, `BadIhl`,
//!    `BadLength`, `BadChecksum`), then martian addresses (§5.3.7, `Martian`): a source in
//!    0/8, 127/8, multicast, class E, one of our own addresses or a directed broadcast of
//!    ours; a destination in 0/8, 127/8 or class E.
//! 4. The rules (`Filtered`), for local and forwarded traffic alike.
//! 5. Local delivery (`Local`): our addresses, the limited broadcast, directed broadcasts
//!    of our networks, multicast (polld is no multicast router). Pings to our addresses
//!    are answered by polld itself when `icmp.answer_echo` is set (`Consumed`), so that a
//!    router without a host path still answers ping.
//! 6. Forwarding: a unicast IP packet received as link-layer broadcast → `Martian`
//!    (§5.3.4); IP options checked ([`crate::options`]): a malformed list →
//!    `IpOptions` with an ICMP parameter problem pointing at the fault, a source route
//!    → `IpOptions`;
//!    fragments that defeat port filtering (RFC 1858) → `Fragment`; no route →
//!    `NoRoute` + ICMP net unreachable; a route of a kind that forwards nothing → its
//!    reason (see the kernel's tables below), whatever the TTL, as Linux looks the route
//!    up before it checks the TTL; TTL ≤ 1 → `TtlExceeded` + ICMP time exceeded;
//!    larger than the output MTU with DF set → `Oversize` + ICMP fragmentation needed
//!    with the MTU (RFC 1191); next hop not resolved → `Unresolved` (with the kernel's
//!    tables: handed to the kernel, `Kernel`); otherwise record
//!    route and timestamp entries added, TTL − 1 (an incremental checksum update, or a
//!    full one when options changed), MACs rewritten, and `Forward { out }` — or
//!    `ForwardEmitted { out }` when the datagram leaves as fragments, or without the
//!    link-layer padding or trailer it arrived with.
//!
//! Decisions worth knowing:
//! - **Fragments are forwarded.** IP leaves reassembly to the destination host (RFC 791,
//!   RFC 1812): a router forwards a fragment like any other packet, and so does polld. Only the RFC 1858 attack shapes are
//!   dropped as `Fragment`: a first fragment too short to hold the 8-byte transport
//!   header, and a TCP fragment at offset 8 (which can overwrite the TCP flags). Rules
//!   with port conditions never match non-first fragments (their ports are unknown).
//! - **Fragmentation** (DF clear, larger than the output MTU) follows RFC 791 in Linux's
//!   layout: every fragment carries the input's header length, the options that are not
//!   copied turned into NOPs after the first fragment; data in multiples of 8 bytes;
//!   offsets and the last MF flag continue those of an input that was itself a
//!   fragment. The datagram counts once as forwarded; `ofragments` counts the pieces.
//!   One whose fragments would end past 65535 bytes is dropped as `Fragment`.
//! - **Unresolved next hop: drop, not queue.** The frame is borrowed from the device
//!   ring for the duration of the call, so holding it would mean copying; instead the
//!   frame is dropped as `Unresolved` and an ARP request goes out (at most one per
//!   `arp.retry_ms` per next hop). The first packets of a flow to a new neighbour are
//!   lost, as with FreeBSD's one-packet `la_hold` under a burst. With the kernel's
//!   tables the kernel holds them instead (see below).
//! - **ICMP goes back to the previous hop.** Errors and echo replies are sent on the input
//!   interface to the offending frame's source MAC, sourced from the input interface's
//!   address on the sender's network (or its first address). This needs neither a route
//!   lookup nor ARP; in asymmetric topologies the previous hop routes it on.
//! - **ICMP errors** (RFC 1812 §4.3.2.7) are never sent about ICMP errors, non-first
//!   fragments, link-layer or IP broadcasts and multicasts, or martian sources; they quote
//!   the original IP header plus the first 8 bytes of its payload (RFC 792) and are
//!   rate-limited by a token bucket (`icmp.rate_per_sec`, `icmp.burst`). No redirects.
//! - **The kernel's tables** (`tables = "kernel"`): the addresses, routes and neighbours
//!   are put in place by a control plane that mirrors the kernel's
//!   ([`Forwarder::add_address`], [`Forwarder::routes_mut`], [`Forwarder::set_neighbour`]),
//!   none come from the file, and ARP and neighbour discovery are the kernel's: ARP
//!   frames and neighbour discovery messages go up untouched (`Local`), polld sends no
//!   ARP request, answers no solicitation and no ping (the kernel does), and a next hop
//!   without a neighbour entry is handed to the kernel ([`Verdict::Kernel`], see
//!   [`ToKernel`]), which queues it while it resolves the next hop, and asked of the
//!   kernel ([`Forwarder::take_kernel_asks`]); once the kernel's entry appears polld
//!   forwards the next frames itself. So is a packet whose route leaves by an interface
//!   polld does not poll ([`Reject::Unpolled`]), once its TTL is checked (the kernel
//!   forwarding it would). Either, when the kernel does not take it,
//!   is dropped without an ICMP error as `Unresolved` (IPv4), `NeighbourUnknown` (IPv6)
//!   or `UnpolledRoute`. A route of another kind that forwards nothing ([`Reject`]) drops
//!   by its reason: `Blackhole` silently, `Unreachable` with ICMP host unreachable
//!   (ICMPv6 no route), `Prohibited` with administratively prohibited.
//! - **Multipath routes** spread flows over their next hops by a hash of each flow's
//!   addresses, protocol and ports ([`crate::route`], as Linux's L4 multipath hash); the
//!   hash is computed only for a packet whose route is multipath.
//! - **Time** comes from [`Forwarder::set_now`], set by the dataplane before each piece of work.

use crate::arp_cache::ArpCache;
use crate::config::{ConfigError, Mode, PacketConfig};
use crate::counters::{StageCounters, StageStats};
use crate::drops::PacketDrop;
use crate::frames::{self, IcmpHeader, Link};
use crate::neighbours::Neighbours;
use crate::net::{
    is_martian_destination, is_martian_source, link_local_of, IpNet, Ipv4Net, Ipv6Net,
};
use crate::options::{self, Malformed, Recorder};
use crate::ratelimit::TokenBucket;
use crate::route::Reject;
use crate::route::{flow_hash, NextHop, Route, RouteTable};
use crate::rules::{Action, FiveTuple, RuleSet};
use crate::wire::arp::operation;
use crate::wire::ethernet::ethertype;
use crate::wire::icmp::{icmp_type, unreachable_code};
use crate::wire::ipv4::protocol;
use crate::wire::{ArpPacket, EthernetFrame, IcmpPacket, Ipv4Packet, MacAddr};
use polld_core::sysctl::read;
use polld_core::{DropReason, Emit, PacketStage, Reading, StageDrop, Verdict};
use std::net::Ipv4Addr;
use std::net::{IpAddr, Ipv6Addr};

const ETH: usize = EthernetFrame::<&[u8]>::HEADER_LEN;
/// Bytes of the offending packet's payload an ICMP error quotes after its header.
const QUOTED_PAYLOAD: usize = 8;
const NS_PER_MS: u64 = 1_000_000;
/// The largest IPv4 datagram: where the last fragment must end.
const MAX_DATAGRAM: usize = 65_535;

mod ipv6;
mod to_kernel;

use to_kernel::Why;
pub use to_kernel::{Refused, ToKernel};

/// A configured interface, stored at its device index.
#[derive(Clone, Debug)]
struct Interface {
    mac: MacAddr,
    addresses: Vec<Ipv4Net>,
    addresses6: Vec<Ipv6Net>,
    /// The interface's IPv6 link-local address, from its MAC.
    link_local: Ipv6Addr,
    mtu: u16,
}

impl Interface {
    /// The address to source packets to `peer` from: the one on the peer's network, else
    /// the first.
    fn source_for(&self, peer: Ipv4Addr) -> Option<Ipv4Addr> {
        self.addresses
            .iter()
            .find(|n| n.contains(peer))
            .or(self.addresses.first())
            .map(|n| n.addr())
    }

    fn owns(&self, ip: Ipv4Addr) -> bool {
        self.addresses.iter().any(|n| n.addr() == ip)
    }
}

/// The IPv4 and IPv6 router stage.
#[derive(Debug)]
pub struct Forwarder {
    interfaces: Vec<Interface>,
    routes: RouteTable,
    arp: ArpCache,
    neighbours: Neighbours,
    rules: RuleSet,
    icmp_limit: TokenBucket,
    answer_echo: bool,
    own_addresses: Vec<Ipv4Addr>,
    /// The global IPv6 addresses of every interface (link-local ones are per interface).
    own_addresses6: Vec<Ipv6Addr>,
    directed_broadcasts: Vec<Ipv4Addr>,
    /// The tables are the kernel's, and so are ARP and neighbour discovery.
    kernel: bool,
    now_ns: u64,
    /// Wall-clock minus monotonic time, for timestamp options.
    utc_offset_ns: Option<u64>,
    next_ident: u16,
    scratch: Vec<u8>,
    /// With the kernel's tables: next hops without a neighbour entry whose resolution
    /// the kernel is to be asked for ([`Forwarder::take_kernel_asks`]), by output.
    kernel_asks: Vec<(usize, IpAddr)>,
    /// With the kernel's tables: where the packets the kernel forwards are handed.
    to_kernel: Option<Box<dyn ToKernel>>,
    counters: StageCounters,
}

impl Forwarder {
    /// Builds the forwarder for the dataplane's devices, named in device-index order;
    /// every device needs an `[[interfaces]]` entry of the same name and vice versa.
    pub fn new(config: &PacketConfig, devices: &[&str]) -> Result<Self, ConfigError> {
        if config.mode != Mode::Router {
            return Err(ConfigError {
                field: "mode".into(),
                message: "is \"bridge\"; build a Bridge, or set mode = \"router\"".into(),
            });
        }
        config.validate()?;
        let binding = config.bind(devices)?;
        let interfaces: Vec<Interface> = binding
            .iter()
            .map(|&i| {
                let c = &config.interfaces[i];
                let mac = c.mac.expect("validated: router interfaces have a MAC");
                Interface {
                    mac,
                    addresses: c.addresses.iter().filter_map(|a| a.v4()).collect(),
                    addresses6: c.addresses.iter().filter_map(|a| a.v6()).collect(),
                    link_local: link_local_of(mac.0),
                    mtu: c.mtu,
                }
            })
            .collect();
        let mut routes = RouteTable::new();
        for (out, iface) in interfaces.iter().enumerate() {
            for net in &iface.addresses {
                let route = Route {
                    out,
                    next_hop: NextHop::Connected,
                };
                routes.insert(net.network(), route);
            }
            for net in &iface.addresses6 {
                let route = Route {
                    out,
                    next_hop: NextHop::Connected,
                };
                routes.insert6(net.network(), route);
            }
        }
        let device_on_link = |ip: IpAddr| {
            interfaces
                .iter()
                .position(|f| match ip {
                    IpAddr::V4(ip) => f.addresses.iter().any(|n| n.contains(ip)),
                    IpAddr::V6(ip) => f.addresses6.iter().any(|n| n.contains(ip)),
                })
                .expect("validated: gateways are on a connected network")
        };
        for r in &config.routes {
            let out = device_on_link(r.gateway);
            match (r.prefix, r.gateway) {
                (IpNet::V4(prefix), IpAddr::V4(gw)) => {
                    let next_hop = NextHop::Gateway(gw);
                    routes.insert(prefix, Route { out, next_hop });
                }
                (IpNet::V6(prefix), IpAddr::V6(gw)) => {
                    let next_hop = NextHop::Gateway(gw);
                    routes.insert6(prefix, Route { out, next_hop });
                }
                _ => unreachable!("validated: a route's gateway is of its prefix's family"),
            }
        }
        let mut arp = ArpCache::new(
            config.arp.capacity,
            config.arp.max_age_ms.saturating_mul(NS_PER_MS),
            config.arp.retry_ms.saturating_mul(NS_PER_MS),
        );
        let mut neighbours = Neighbours::new(
            config.arp.capacity,
            config.arp.max_age_ms.saturating_mul(NS_PER_MS),
            config.arp.retry_ms.saturating_mul(NS_PER_MS),
        );
        for entry in &config.static_arp {
            match entry.ip {
                IpAddr::V4(ip) => arp.add_static(ip, entry.mac),
                IpAddr::V6(ip) => neighbours.add_static(ip, entry.mac),
            }
        }
        let nets = || interfaces.iter().flat_map(|f| f.addresses.iter());
        let own_addresses = nets().map(|n| n.addr()).collect();
        let own_addresses6 = interfaces
            .iter()
            .flat_map(|f| f.addresses6.iter().map(|n| n.addr()))
            .collect();
        let directed_broadcasts = nets().filter_map(|n| n.broadcast()).collect();
        let kernel = config.kernel_tables();
        Ok(Forwarder {
            routes,
            arp,
            neighbours,
            rules: RuleSet::new(config.rules.clone(), config.default_action),
            icmp_limit: TokenBucket::new(config.icmp.rate_per_sec, config.icmp.burst),
            answer_echo: config.icmp.answer_echo && !kernel,
            kernel,
            own_addresses,
            own_addresses6,
            directed_broadcasts,
            interfaces,
            now_ns: 0,
            utc_offset_ns: None,
            next_ident: 0,
            scratch: Vec::with_capacity(2048),
            kernel_asks: Vec::new(),
            to_kernel: None,
            counters: StageCounters::default(),
        })
    }

    /// Sets the time used for ARP aging and rate limits (monotonic nanoseconds); the
    /// dataplane calls it once per batch.
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    /// Sets the wall clock as an offset from `set_now`'s clock (nanoseconds since the
    /// Unix epoch minus monotonic nanoseconds), for the timestamps of IP options.
    pub fn set_utc_offset(&mut self, offset_ns: u64) {
        self.utc_offset_ns = Some(offset_ns);
    }

    pub fn counters(&self) -> &StageCounters {
        &self.counters
    }

    pub fn stats(&self) -> StageStats {
        StageStats {
            counters: self.counters,
            rules: self.rules.hits().clone(),
            table: {
                let (arp, nd) = (self.arp.stats(), self.neighbours.stats());
                crate::table::TableStats {
                    entries: arp.entries + nd.entries,
                    evictions: arp.evictions + nd.evictions,
                }
            },
        }
    }

    /// The MAC the ARP cache holds for `ip` now.
    pub fn arp_lookup(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.arp.lookup(ip, self.now_ns)
    }

    /// The route `dst` takes, with the matched prefix.
    pub fn route(&self, dst: Ipv4Addr) -> Option<(Ipv4Net, Route)> {
        self.routes.lookup(dst).map(|(net, r)| (net, *r))
    }

    /// The IPv6 route `dst` takes, with the matched prefix.
    pub fn route6(&self, dst: Ipv6Addr) -> Option<(Ipv6Net, Route<Ipv6Addr>)> {
        self.routes.lookup6(dst).map(|(net, r)| (net, *r))
    }

    /// The routing tables.
    pub fn routes(&self) -> &RouteTable {
        &self.routes
    }

    /// The IPv4 and IPv6 neighbours with a MAC now, each with whether it is static (the
    /// config's, or the kernel's with `tables = "kernel"`), and the interface whose
    /// network holds it (`None` for one on no network of an interface's addresses).
    pub fn neighbour_entries(
        &self,
    ) -> impl Iterator<Item = (IpAddr, MacAddr, bool, Option<usize>)> + '_ {
        let on = move |ip: IpAddr| {
            self.interfaces.iter().position(|f| match ip {
                IpAddr::V4(ip) => f.addresses.iter().any(|n| n.contains(ip)),
                IpAddr::V6(ip) => f.addresses6.iter().any(|n| n.contains(ip)),
            })
        };
        let v4 = self
            .arp
            .entries(self.now_ns)
            .map(|(ip, mac, s)| (IpAddr::V4(ip), mac, s));
        let v6 = self
            .neighbours
            .entries(self.now_ns)
            .map(|(ip, mac, s)| (IpAddr::V6(ip), mac, s));
        v4.chain(v6).map(move |(ip, mac, s)| (ip, mac, s, on(ip)))
    }

    /// The routing table, for a control plane that adds and removes routes in place.
    pub fn routes_mut(&mut self) -> &mut RouteTable {
        &mut self.routes
    }

    /// The IPv6 neighbour table, for a control plane that mirrors the host's.
    pub fn neighbours_mut(&mut self) -> &mut Neighbours {
        &mut self.neighbours
    }

    /// Adds `net` to interface `dev`'s addresses (a control plane mirroring the
    /// kernel's: no connected route comes with it, the kernel has its own). Returns
    /// false if `dev` is no interface.
    pub fn add_address(&mut self, dev: usize, net: IpNet) -> bool {
        let Some(iface) = self.interfaces.get_mut(dev) else {
            return false;
        };
        match net {
            IpNet::V4(n) if !iface.addresses.contains(&n) => iface.addresses.push(n),
            IpNet::V6(n) if !iface.addresses6.contains(&n) => iface.addresses6.push(n),
            _ => {}
        }
        self.own_changed();
        true
    }

    /// Removes `net` from interface `dev`'s addresses.
    pub fn remove_address(&mut self, dev: usize, net: IpNet) {
        if let Some(iface) = self.interfaces.get_mut(dev) {
            iface.addresses.retain(|n| IpNet::V4(*n) != net);
            iface.addresses6.retain(|n| IpNet::V6(*n) != net);
            self.own_changed();
        }
    }

    /// The next hops the kernel is to be asked to resolve, since the last call: with the
    /// kernel's tables a frame to a next hop without a neighbour entry is dropped
    /// (`unresolved`, `neighbour_unknown`) and its next hop asked for once per `arp.retry_ms`,
    /// as polld asks ARP itself with the file's tables; the control plane asks the kernel
    /// (`ip neigh ... use`), whose entry, once resolved, forwards the next frames.
    pub fn take_kernel_asks(&mut self) -> std::vec::Drain<'_, (usize, IpAddr)> {
        self.kernel_asks.drain(..)
    }

    /// Queues a next hop for [`Forwarder::take_kernel_asks`]; a full queue drops it (it is
    /// asked for again after the retry interval).
    fn ask_kernel(&mut self, out: usize, next_hop: IpAddr) {
        const MAX_ASKS: usize = 64;
        if self.kernel_asks.len() < MAX_ASKS {
            self.kernel_asks.push((out, next_hop));
        }
    }

    /// Whether the tables are the kernel's (`tables = "kernel"`).
    pub fn kernel_tables(&self) -> bool {
        self.kernel
    }

    /// The interface addresses, by device index.
    pub fn addresses(&self) -> Vec<Vec<IpNet>> {
        self.interfaces
            .iter()
            .map(|f| {
                let v4 = f.addresses.iter().map(|&n| IpNet::V4(n));
                v4.chain(f.addresses6.iter().map(|&n| IpNet::V6(n)))
                    .collect()
            })
            .collect()
    }

    /// The own addresses and directed broadcasts again, after an interface's changed.
    fn own_changed(&mut self) {
        let nets = || self.interfaces.iter().flat_map(|f| f.addresses.iter());
        self.own_addresses = nets().map(|n| n.addr()).collect();
        self.directed_broadcasts = nets().filter_map(|n| n.broadcast()).collect();
        self.own_addresses6 = self
            .interfaces
            .iter()
            .flat_map(|f| f.addresses6.iter().map(|n| n.addr()))
            .collect();
    }

    /// Sets the permanent neighbour entry of `ip` (ARP for IPv4, the neighbour table
    /// for IPv6) to `mac`, or removes it with `None`.
    pub fn set_neighbour(&mut self, ip: IpAddr, mac: Option<MacAddr>) {
        match (ip, mac) {
            (IpAddr::V4(ip), Some(mac)) => self.arp.add_static(ip, mac),
            (IpAddr::V4(ip), None) => drop(self.arp.remove_static(ip)),
            (IpAddr::V6(ip), Some(mac)) => self.neighbours.add_static(ip, mac),
            (IpAddr::V6(ip), None) => drop(self.neighbours.remove_static(ip)),
        }
    }

    /// Empties the tables a control plane fills: the routes, the addresses and the
    /// permanent neighbour entries, to fill them again from a fresh copy.
    pub fn clear_tables(&mut self) {
        self.routes = RouteTable::new();
        self.arp.clear_statics();
        self.neighbours.clear_statics();
        for iface in &mut self.interfaces {
            iface.addresses.clear();
            iface.addresses6.clear();
        }
        self.own_changed();
    }

    /// The MAC the IPv6 neighbour table holds for `ip` now.
    pub fn neighbour_lookup(&self, ip: Ipv6Addr) -> Option<MacAddr> {
        self.neighbours.lookup(ip, self.now_ns)
    }

    fn is_own(&self, ip: Ipv4Addr) -> bool {
        self.own_addresses.contains(&ip)
    }

    fn is_broadcast(&self, ip: Ipv4Addr) -> bool {
        ip == Ipv4Addr::BROADCAST || self.directed_broadcasts.contains(&ip)
    }

    fn decide(&mut self, input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict {
        let Some(iface) = self.interfaces.get(input) else {
            // Not a configured device: the dataplane and the config disagree.
            return Verdict::Drop(DropReason::LinkDown);
        };
        let eth = match EthernetFrame::new_checked(&*frame) {
            Ok(eth) => eth,
            Err(e) => return e.drop_reason().verdict(),
        };
        let dst_mac = eth.dst_addr();
        if !eth.src_addr().is_unicast() || (dst_mac.is_unicast() && dst_mac != iface.mac) {
            return PacketDrop::Martian.verdict();
        }
        let link_group = dst_mac.is_multicast();
        match eth.ethertype() {
            ethertype::IPV4 => self.ipv4(input, frame, link_group, emit),
            ethertype::IPV6 => self.ipv6(input, frame, link_group, emit),
            ethertype::ARP => self.arp(input, frame, emit),
            _ if eth.is_vlan_tagged() => PacketDrop::Vlan.verdict(),
            _ => PacketDrop::UnknownEthertype.verdict(),
        }
    }

    fn arp(&mut self, input: usize, frame: &[u8], emit: &mut dyn Emit) -> Verdict {
        if self.kernel {
            return Verdict::Local;
        }
        let arp = match ArpPacket::new_checked(&frame[ETH..]) {
            Ok(arp) => arp,
            Err(e) => return e.drop_reason().verdict(),
        };
        let (sender_mac, sender_ip, target_ip) =
            (arp.sender_hw_addr(), arp.sender_ip(), arp.target_ip());
        if !sender_mac.is_unicast() {
            return PacketDrop::Martian.verdict();
        }
        let iface = &self.interfaces[input];
        let for_us = iface.owns(target_ip);
        let on_link = iface.addresses.iter().any(|n| n.contains(sender_ip));
        if on_link && !self.is_own(sender_ip) {
            self.arp.learn(sender_ip, sender_mac, self.now_ns, for_us);
        }
        if arp.operation() == operation::REQUEST && for_us {
            frames::arp(
                &mut self.scratch,
                operation::REPLY,
                sender_mac,
                (iface.mac, target_ip),
                (sender_mac, sender_ip),
            );
            emit.emit(input, &self.scratch);
            self.counters.generated.arp_replies += 1;
        }
        Verdict::Consumed
    }

    fn ipv4(
        &mut self,
        input: usize,
        frame: &mut [u8],
        link_group: bool,
        emit: &mut dyn Emit,
    ) -> Verdict {
        let ip = match Ipv4Packet::new_checked(&frame[ETH..]) {
            Ok(ip) => ip,
            Err(e) => return e.drop_reason().verdict(),
        };
        if let Err(e) = ip.check_checksum() {
            return e.drop_reason().verdict();
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if is_martian_source(src)
            || self.is_own(src)
            || self.is_broadcast(src)
            || is_martian_destination(dst)
        {
            return PacketDrop::Martian.verdict();
        }
        if !self.rules.allows_everything()
            && self.rules.evaluate(&FiveTuple::of(&ip)) == Action::Deny
        {
            return PacketDrop::Filtered.verdict();
        }
        if self.is_broadcast(dst) || dst.is_multicast() {
            return Verdict::Local;
        }
        if self.is_own(dst) {
            return self.local(input, frame, emit);
        }
        if link_group {
            return PacketDrop::Martian.verdict();
        }
        let mut records = false;
        if ip.has_options() {
            match options::check(ip.header(), &mut self.counters.options) {
                Err(Malformed { pointer }) => {
                    let header = IcmpHeader {
                        msg_type: icmp_type::PARAMETER_PROBLEM,
                        code: 0,
                        rest: (pointer as u32) << 24,
                    };
                    self.icmp_error(input, frame, header, emit);
                    return PacketDrop::IpOptions.verdict();
                }
                Ok(found) if found.source_route => return PacketDrop::IpOptions.verdict(),
                Ok(found) => records = found.records,
            }
        }
        if defeats_port_filtering(&ip) {
            return PacketDrop::Fragment.verdict();
        }
        let (ttl, total_len, dont_fragment) = (ip.ttl(), ip.total_len(), ip.dont_fragment());
        // The route before the TTL, in Linux's order (`ip_route_input`, then
        // `ip_forward`): a destination the table refuses gets the route's answer at any
        // TTL, so traceroute sees the refusal at the router's own hop.
        let Some((_, &route)) = self.routes.lookup(dst) else {
            let header = IcmpHeader {
                msg_type: icmp_type::DEST_UNREACHABLE,
                code: unreachable_code::NET,
                rest: 0,
            };
            self.icmp_error(input, frame, header, emit);
            return PacketDrop::NoRoute.verdict();
        };
        let route = self.routes.pick(route, || {
            let piece = ip.more_fragments() || ip.frag_offset() != 0;
            flow_hash(&FiveTuple::of(&ip), piece)
        });
        match route.next_hop {
            NextHop::Reject(reject) if reject != Reject::Unpolled => {
                if let Some((code, _)) = reject.unreachable_codes() {
                    let header = IcmpHeader {
                        msg_type: icmp_type::DEST_UNREACHABLE,
                        code,
                        rest: 0,
                    };
                    self.icmp_error(input, frame, header, emit);
                }
                return reject.drop_reason().verdict();
            }
            _ if ttl <= 1 => {
                let header = IcmpHeader {
                    msg_type: icmp_type::TIME_EXCEEDED,
                    code: 0,
                    rest: 0,
                };
                self.icmp_error(input, frame, header, emit);
                return PacketDrop::TtlExceeded.verdict();
            }
            // Out of an interface polld does not poll: handed to the kernel one hop on,
            // the TTL checked above as the kernel forwarding it would; dropped by its
            // reason when the kernel does not take it.
            NextHop::Reject(reject) => {
                if let Some(verdict) = self.hand4(input, frame, Why::Unpolled, emit) {
                    return verdict;
                }
                return reject.drop_reason().verdict();
            }
            // A multipath route is one of its members once picked above.
            NextHop::Connected | NextHop::Gateway(_) | NextHop::Multipath(_) => {}
        }
        let out = &self.interfaces[route.out];
        let (out_mac, mtu) = (out.mac, out.mtu);
        let fragment = total_len > mtu;
        if fragment && dont_fragment {
            self.counters.cantfrag += 1;
            let header = IcmpHeader {
                msg_type: icmp_type::DEST_UNREACHABLE,
                code: unreachable_code::FRAG_NEEDED,
                rest: u32::from(mtu),
            };
            self.icmp_error(input, frame, header, emit);
            return PacketDrop::Oversize.verdict();
        }
        if fragment && ip.frag_offset() + ip.payload().len() > MAX_DATAGRAM {
            // Its last fragment's offset would not fit the 13-bit field.
            self.counters.cantfrag += 1;
            return PacketDrop::Fragment.verdict();
        }
        let next_hop = route.next_hop_addr(dst);
        let resolution = self.arp.resolve(next_hop, self.now_ns);
        if resolution.send_request {
            if self.kernel {
                self.ask_kernel(route.out, IpAddr::V4(next_hop));
            } else {
                self.arp_request(route.out, next_hop, emit);
            }
        }
        let Some(next_hop_mac) = resolution.mac else {
            let handed = self.hand4(input, frame, Why::Unresolved, emit);
            return handed.unwrap_or(PacketDrop::Unresolved.verdict());
        };
        let ip_end = ETH + usize::from(total_len);
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH..ip_end]);
        if records {
            // Routes only lead to interfaces with addresses, and a frame from a martian
            // source never gets here: the fallbacks are never used.
            let address = |i: usize, peer| {
                self.interfaces[i]
                    .source_for(peer)
                    .unwrap_or(Ipv4Addr::UNSPECIFIED)
            };
            let by = Recorder {
                out_addr: address(route.out, next_hop),
                in_addr: address(input, src),
                own: &self.own_addresses,
                timestamp: self.timestamp(),
            };
            options::record(ip.header_mut(), &by);
            ip.set_ttl(ttl - 1);
            ip.fill_checksum();
        } else {
            ip.decrement_ttl();
        }
        let mut eth = EthernetFrame::new_unchecked(&mut *frame);
        eth.set_src_addr(out_mac);
        eth.set_dst_addr(next_hop_mac);
        if fragment {
            self.fragment(route.out, &frame[..ip_end], mtu, emit);
            return Verdict::ForwardEmitted { out: route.out };
        }
        if frame.len() > ip_end {
            self.counters.padding_trimmed += 1;
            emit.forward_part(route.out, &frame[..ip_end]);
            return Verdict::ForwardEmitted { out: route.out };
        }
        Verdict::Forward { out: route.out }
    }

    /// Sends `frame`, a datagram rewritten for output `out` and larger than its `mtu`,
    /// as fragments (RFC 791 §3.2, in Linux's layout): each carries the whole header,
    /// with the options not to be copied turned into NOPs after the first, and as many
    /// 8-byte units of data as fit; offsets continue the input's, and the last fragment
    /// keeps the input's MF flag.
    fn fragment(&mut self, out: usize, frame: &[u8], mtu: u16, emit: &mut dyn Emit) {
        let ip = Ipv4Packet::new_unchecked(&frame[ETH..]);
        let header_end = ETH + ip.header_len();
        let (base, more_after) = (ip.frag_offset(), ip.more_fragments());
        // The config's MTU floor (68) leaves at least 8 bytes past a 60-byte header.
        let step = (usize::from(mtu) + ETH - header_end) & !7;
        let data = ip.payload();
        self.scratch.clear();
        self.scratch.extend_from_slice(&frame[..header_end]);
        for (n, chunk) in data.chunks(step).enumerate() {
            let offset = n * step;
            self.scratch.truncate(header_end);
            self.scratch.extend_from_slice(chunk);
            let mut piece = Ipv4Packet::new_unchecked(&mut self.scratch[ETH..]);
            if n == 1 {
                options::blank_uncopied(piece.header_mut());
            }
            let more = more_after || offset + chunk.len() < data.len();
            piece.set_total_len((header_end - ETH + chunk.len()) as u16);
            piece.set_fragment(false, more, base + offset);
            piece.fill_checksum();
            emit.forward_part(out, &self.scratch);
            self.counters.ofragments += 1;
        }
        self.counters.fragmented += 1;
    }

    /// The value of a timestamp option entry: milliseconds since midnight UT once the
    /// wall clock is known ([`Forwarder::set_utc_offset`]); until then milliseconds of
    /// the monotonic clock with the high-order bit set, which RFC 791 allows for a time
    /// not relative to midnight UT.
    fn timestamp(&self) -> u32 {
        const MS_PER_DAY: u64 = 86_400_000;
        match self.utc_offset_ns {
            Some(offset) => ((self.now_ns.wrapping_add(offset) / NS_PER_MS) % MS_PER_DAY) as u32,
            None => ((self.now_ns / NS_PER_MS) as u32) | 0x8000_0000,
        }
    }

    /// A packet for one of our addresses: answer it if it is a ping, else hand it up.
    fn local(&mut self, input: usize, frame: &[u8], emit: &mut dyn Emit) -> Verdict {
        let ip = Ipv4Packet::new_unchecked(&frame[ETH..]);
        if !self.answer_echo
            || ip.protocol() != protocol::ICMP
            || ip.is_fragment()
            || ip.has_options()
        {
            return Verdict::Local;
        }
        let request = match IcmpPacket::new_checked(ip.payload()) {
            Ok(m) if m.msg_type() == icmp_type::ECHO_REQUEST => m,
            _ => return Verdict::Local,
        };
        if !request.verify_checksum() {
            return PacketDrop::BadChecksum.verdict();
        }
        let link = self.reply_link(input, frame);
        let header = IcmpHeader {
            msg_type: icmp_type::ECHO_REPLY,
            code: 0,
            rest: request.rest_of_header(),
        };
        self.next_ident = self.next_ident.wrapping_add(1);
        let addrs = (ip.dst_addr(), ip.src_addr());
        frames::icmp(
            &mut self.scratch,
            link,
            addrs,
            self.next_ident,
            header,
            request.data(),
        );
        emit.emit(input, &self.scratch);
        self.counters.generated.icmp_echo_replies += 1;
        Verdict::Consumed
    }

    /// The link-layer addressing of a message answering `frame`, received on `input`:
    /// back to its sender from the input interface.
    fn reply_link(&self, input: usize, frame: &[u8]) -> Link {
        Link {
            src: self.interfaces[input].mac,
            dst: EthernetFrame::new_unchecked(frame).src_addr(),
        }
    }

    /// Sends an ICMP error about `frame` (already validated as IPv4) back where it came
    /// from, unless RFC 1812 §4.3.2.7 forbids it or the rate limit is exhausted.
    fn icmp_error(&mut self, input: usize, frame: &[u8], header: IcmpHeader, emit: &mut dyn Emit) {
        let eth = EthernetFrame::new_unchecked(frame);
        let ip = Ipv4Packet::new_unchecked(eth.payload());
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        // An ICMP message too short to show its type counts as an error: stay silent.
        let about_icmp_error = ip.protocol() == protocol::ICMP
            && match ip.payload().first() {
                Some(&t) => icmp_type::is_error(t),
                None => true,
            };
        if about_icmp_error
            || ip.frag_offset() != 0
            || eth.dst_addr().is_multicast()
            || self.is_broadcast(dst)
            || dst.is_multicast()
            || is_martian_source(src)
            || self.is_broadcast(src)
        {
            return;
        }
        let iface = &self.interfaces[input];
        let Some(our_addr) = iface.source_for(src) else {
            return;
        };
        if !self.icmp_limit.try_take(self.now_ns) {
            self.counters.icmp_rate_limited += 1;
            return;
        }
        let quoted_len = (ip.header_len() + QUOTED_PAYLOAD).min(ip.packet().len());
        let link = self.reply_link(input, frame);
        self.next_ident = self.next_ident.wrapping_add(1);
        frames::icmp(
            &mut self.scratch,
            link,
            (our_addr, src),
            self.next_ident,
            header,
            &ip.packet()[..quoted_len],
        );
        emit.emit(input, &self.scratch);
        self.counters.generated.icmp_errors += 1;
    }

    fn arp_request(&mut self, out: usize, next_hop: Ipv4Addr, emit: &mut dyn Emit) {
        let iface = &self.interfaces[out];
        let Some(our_addr) = iface.source_for(next_hop) else {
            return;
        };
        frames::arp(
            &mut self.scratch,
            operation::REQUEST,
            MacAddr::BROADCAST,
            (iface.mac, our_addr),
            (MacAddr::ZERO, next_hop),
        );
        emit.emit(out, &self.scratch);
        self.counters.generated.arp_requests += 1;
    }
}

impl Reject {
    /// The reason a packet this kind of route matches is dropped.
    fn drop_reason(self) -> PacketDrop {
        match self {
            Reject::Blackhole => PacketDrop::Blackhole,
            Reject::Unreachable => PacketDrop::Unreachable,
            Reject::Prohibit => PacketDrop::Prohibited,
            Reject::Unpolled => PacketDrop::UnpolledRoute,
        }
    }

    /// The codes of the destination unreachable it answers with, ICMP's and ICMPv6's, as
    /// the kernel's: none for a route that drops silently.
    fn unreachable_codes(self) -> Option<(u8, u8)> {
        use crate::wire::icmpv6::unreachable_code as v6;
        match self {
            Reject::Unreachable => Some((unreachable_code::HOST, v6::NO_ROUTE)),
            Reject::Prohibit => Some((unreachable_code::ADMIN_PROHIBITED, v6::ADMIN_PROHIBITED)),
            Reject::Blackhole | Reject::Unpolled => None,
        }
    }
}

/// The fragment shapes RFC 1858 warns about: a first fragment too short to hold the
/// 8-byte transport header (its ports could be supplied by a later fragment), and a TCP
/// fragment at offset 8 (it can rewrite the TCP flags of the first).
fn defeats_port_filtering<T: AsRef<[u8]>>(ip: &Ipv4Packet<T>) -> bool {
    let tiny_first = ip.more_fragments() && ip.frag_offset() == 0 && ip.payload().len() < 8;
    let tcp_overlap = ip.protocol() == protocol::TCP && ip.frag_offset() == 8;
    tiny_first || tcp_overlap
}

impl PacketStage for Forwarder {
    fn set_now(&mut self, now_ns: u64) {
        Forwarder::set_now(self, now_ns)
    }

    fn process(&mut self, input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict {
        let verdict = self.decide(input, frame, emit);
        self.counters.record(verdict);
        verdict
    }

    fn drop_reasons(&self) -> &'static [StageDrop] {
        &PacketDrop::TABLE
    }

    fn readings(&self, node: &str) -> Vec<Reading> {
        read(node, &self.counters, &StageCounters::OIDS).collect()
    }
}
