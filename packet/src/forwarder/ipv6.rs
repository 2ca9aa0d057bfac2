//! The router's IPv6 path (RFC 8200, RFC 4291, RFC 4443), after the Ethernet checks:
//!
//! 1. Header: shorter than 40 bytes → `Truncated`; version other than 6 →
//!    `BadVersion`; payload length beyond the frame → `BadLength`.
//! 2. Addresses (RFC 4291): a multicast source → `MulticastSource`; `::1` as source or
//!    destination → `Loopback`; `::` as the source of a packet to a unicast
//!    destination → `UnspecifiedSource`; an IPv4-embedded address, or `::` as the
//!    destination, or one of polld's own addresses as the source → `Martian`.
//! 3. Extension headers walked ([`Ipv6Packet::walk`]), never past the payload: a chain
//!    past the payload, too long or out of order → `ExtHeaders`.
//! 4. The rules, on the upper-layer protocol and ports (`Filtered`, with an ICMPv6
//!    destination unreachable, administratively prohibited).
//! 5. Local delivery (`Local`): multicast destinations (neighbour discovery, MLD: polld
//!    is no multicast router) and polld's own addresses, its link-local address (from
//!    the MAC, EUI-64) included. Pings to them are answered by polld when
//!    `icmp.answer_echo` is set (`Consumed`). Neighbour solicitations for polld's
//!    addresses are answered with an advertisement (`Consumed`), as ARP requests are;
//!    other neighbour advertisements and solicitations on the way up teach the
//!    neighbour table (RFC 4861 §7.2.5, §7.2.3).
//! 6. Forwarding: a unicast destination received as link-layer multicast → `Martian`;
//!    a link-local destination not polld's → `LinkLocal`; a link-local source →
//!    `LinkLocal` + ICMPv6 destination unreachable, beyond scope of source address; a
//!    hop-by-hop options header → `HopByHop`; no route → `NoRoute` + ICMPv6 no route to
//!    destination; a route of a kind that forwards nothing → its reason, whatever the
//!    hop limit (the route before the hop limit, as in Linux); hop limit ≤ 1 →
//!    `TtlExceeded` + ICMPv6 time exceeded; larger than
//!    the output MTU → `Oversize` + ICMPv6 packet too big with the MTU (routers never
//!    fragment IPv6, RFC 8200 §5); next hop not in the neighbour table →
//!    `NeighbourUnknown` + ICMPv6 address unreachable (with the kernel's tables: handed
//!    to the kernel, `Kernel`, [`super::ToKernel`]); otherwise hop limit − 1 (IPv6 has
//!    no header checksum), MACs rewritten, link padding trimmed, `Forward { out }`.
//!
//! ICMPv6 errors (RFC 4443 §2.4) are never sent about an ICMPv6 error (or a packet
//! whose upper layer is unknown), to a multicast, unspecified or loopback source, or about a packet
//! received as link-layer multicast; they quote as much of the packet as fits in the
//! IPv6 minimum MTU, are sourced from the input interface's address (its link-local one
//! for a link-local source), and share the IPv4 errors' rate limit.

use std::net::IpAddr;

use super::to_kernel::Why;
use super::{Forwarder, ETH};
use crate::drops::PacketDrop;
use crate::frames::{self, IcmpHeader, ND_HOP_LIMIT, TTL};
use crate::net::Ipv6Class;
use crate::route::{flow_hash, NextHop, Reject};
use crate::rules::{Action, FiveTuple};
use crate::wire::icmpv6::{icmpv6_type, pseudo_header_sum, unreachable_code};
use crate::wire::ipv6::{next_header, Chain};
use crate::wire::{EthernetFrame, IcmpPacket, Ipv6Packet, MacAddr};
use polld_core::{Emit, Verdict};
use std::net::Ipv6Addr;

const HEADER: usize = Ipv6Packet::<&[u8]>::HEADER_LEN;
/// The IPv6 minimum MTU (RFC 8200 §5): an ICMPv6 error never exceeds it.
const MIN_MTU: usize = 1280;

impl Forwarder {
    fn is_own6(&self, ip: Ipv6Addr) -> bool {
        self.own_addresses6.contains(&ip)
    }

    pub(super) fn ipv6(
        &mut self,
        input: usize,
        frame: &mut [u8],
        link_group: bool,
        emit: &mut dyn Emit,
    ) -> Verdict {
        let ip = match Ipv6Packet::new_checked(&frame[ETH..]) {
            Ok(ip) => ip,
            Err(e) => return e.drop_reason().verdict(),
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let (src_class, dst_class) = (Ipv6Class::of(src), Ipv6Class::of(dst));
        match (src_class, dst_class) {
            (Ipv6Class::Multicast, _) => return PacketDrop::MulticastSource.verdict(),
            (Ipv6Class::Loopback, _) | (_, Ipv6Class::Loopback) => {
                return PacketDrop::Loopback.verdict()
            }
            (Ipv6Class::Unspecified, class) if class != Ipv6Class::Multicast => {
                return PacketDrop::UnspecifiedSource.verdict()
            }
            (Ipv6Class::Embedded, _) | (_, Ipv6Class::Embedded | Ipv6Class::Unspecified) => {
                return PacketDrop::Martian.verdict()
            }
            _ if self.is_own6(src) || src == self.interfaces[input].link_local => {
                return PacketDrop::Martian.verdict()
            }
            _ => {}
        }
        let chain = match ip.walk() {
            Ok(chain) => chain,
            Err(e) => return e.drop_reason().verdict(),
        };
        if !self.rules.allows_everything()
            && self.rules.evaluate(&FiveTuple::of_ipv6(&ip, &chain)) == Action::Deny
        {
            let code = unreachable_code::ADMIN_PROHIBITED;
            self.icmpv6_error(input, frame, &chain, unreachable(code), emit);
            return PacketDrop::Filtered.verdict();
        }
        if dst_class == Ipv6Class::Multicast {
            return self.neighbour_discovery(input, frame, &chain, emit);
        }
        if self.is_own6(dst) || dst == self.interfaces[input].link_local {
            return self.local6(input, frame, &chain, emit);
        }
        if link_group {
            return PacketDrop::Martian.verdict();
        }
        if dst_class == Ipv6Class::LinkLocal {
            return PacketDrop::LinkLocal.verdict();
        }
        if src_class == Ipv6Class::LinkLocal {
            let code = unreachable_code::BEYOND_SCOPE;
            self.icmpv6_error(input, frame, &chain, unreachable(code), emit);
            return PacketDrop::LinkLocal.verdict();
        }
        if chain.hop_by_hop {
            return PacketDrop::HopByHop.verdict();
        }
        let hop_limit = ip.hop_limit();
        let packet_len = ip.packet().len();
        // The route before the hop limit, as in the IPv4 path (Linux's order).
        let Some((_, &route)) = self.routes.lookup6(dst) else {
            let code = unreachable_code::NO_ROUTE;
            self.icmpv6_error(input, frame, &chain, unreachable(code), emit);
            return PacketDrop::NoRoute.verdict();
        };
        let route = self.routes.pick6(route, || {
            flow_hash(&FiveTuple::of_ipv6(&ip, &chain), chain.fragment)
        });
        match route.next_hop {
            NextHop::Reject(reject) if reject != Reject::Unpolled => {
                if let Some((_, code)) = reject.unreachable_codes() {
                    self.icmpv6_error(input, frame, &chain, unreachable(code), emit);
                }
                return reject.drop_reason().verdict();
            }
            _ if hop_limit <= 1 => {
                let header = IcmpHeader {
                    msg_type: icmpv6_type::TIME_EXCEEDED,
                    code: 0,
                    rest: 0,
                };
                self.icmpv6_error(input, frame, &chain, header, emit);
                return PacketDrop::TtlExceeded.verdict();
            }
            // Out of an interface polld does not poll: the kernel's, as in the IPv4 path.
            NextHop::Reject(reject) => {
                if let Some(verdict) = self.hand6(input, frame, &chain, Why::Unpolled, emit) {
                    return verdict;
                }
                return reject.drop_reason().verdict();
            }
            // A multipath route is one of its members once picked above.
            NextHop::Connected | NextHop::Gateway(_) | NextHop::Multipath(_) => {}
        }
        let out = &self.interfaces[route.out];
        let (out_mac, mtu) = (out.mac, out.mtu);
        if packet_len > usize::from(mtu) {
            self.counters.cantfrag += 1;
            let header = IcmpHeader {
                msg_type: icmpv6_type::PACKET_TOO_BIG,
                code: 0,
                rest: u32::from(mtu),
            };
            self.icmpv6_error(input, frame, &chain, header, emit);
            return PacketDrop::Oversize.verdict();
        }
        let next_hop = route.next_hop_addr(dst);
        let Some(next_hop_mac) = self.neighbours.lookup(next_hop, self.now_ns) else {
            if self.kernel {
                if self.neighbours.ask_due(next_hop, self.now_ns) {
                    self.ask_kernel(route.out, IpAddr::V6(next_hop));
                }
                if let Some(verdict) = self.hand6(input, frame, &chain, Why::Unresolved, emit) {
                    return verdict;
                }
            } else {
                let code = unreachable_code::ADDRESS;
                self.icmpv6_error(input, frame, &chain, unreachable(code), emit);
            }
            return PacketDrop::NeighbourUnknown.verdict();
        };
        let ip_end = ETH + packet_len;
        Ipv6Packet::new_unchecked(&mut frame[ETH..ip_end]).set_hop_limit(hop_limit - 1);
        let mut eth = EthernetFrame::new_unchecked(&mut *frame);
        eth.set_src_addr(out_mac);
        eth.set_dst_addr(next_hop_mac);
        if frame.len() > ip_end {
            self.counters.padding_trimmed += 1;
            emit.forward_part(route.out, &frame[..ip_end]);
            return Verdict::ForwardEmitted { out: route.out };
        }
        Verdict::Forward { out: route.out }
    }

    /// A packet for one of our addresses: answer it if it is a ping, else hand it up
    /// (after learning from it if it is neighbour discovery).
    fn local6(
        &mut self,
        input: usize,
        frame: &[u8],
        chain: &Chain,
        emit: &mut dyn Emit,
    ) -> Verdict {
        if self.neighbour_discovery(input, frame, chain, emit) == Verdict::Consumed {
            return Verdict::Consumed;
        }
        let ip = Ipv6Packet::new_unchecked(&frame[ETH..]);
        if !self.answer_echo || ip.next_header() != next_header::ICMPV6 {
            return Verdict::Local;
        }
        let request = match IcmpPacket::new_checked(ip.payload()) {
            Ok(m) if m.msg_type() == icmpv6_type::ECHO_REQUEST => m,
            _ => return Verdict::Local,
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let len = ip.payload().len() as u32;
        if !request.verify_checksum_over(pseudo_header_sum(src, dst, len)) {
            return PacketDrop::BadChecksum.verdict();
        }
        let link = self.reply_link(input, frame);
        let header = IcmpHeader {
            msg_type: icmpv6_type::ECHO_REPLY,
            code: 0,
            rest: request.rest_of_header(),
        };
        frames::icmpv6(
            &mut self.scratch,
            link,
            (dst, src),
            TTL,
            header,
            request.data(),
        );
        emit.emit(input, &self.scratch);
        self.counters.generated.icmp_echo_replies += 1;
        Verdict::Consumed
    }

    /// Neighbour discovery from the link (hop limit 255, a valid checksum): a
    /// solicitation for one of polld's addresses on the input interface is answered
    /// (`Consumed`); otherwise the link-layer address an advertisement (target) or a
    /// solicitation (source) carries is learned, when it names an address on one of the
    /// input interface's prefixes, and the message goes up (`Local`).
    fn neighbour_discovery(
        &mut self,
        input: usize,
        frame: &[u8],
        chain: &Chain,
        emit: &mut dyn Emit,
    ) -> Verdict {
        if self.kernel {
            return Verdict::Local;
        }
        let Some((target, option)) = self.neighbour_message(frame, chain) else {
            return Verdict::Local;
        };
        let ip = Ipv6Packet::new_unchecked(&frame[ETH..]);
        let (src, kind) = (ip.src_addr(), ip.payload()[0]);
        let iface = &self.interfaces[input];
        let address = match kind {
            icmpv6_type::NEIGHBOR_ADVERT => target,
            _ => src,
        };
        let on_link = iface.addresses6.iter().any(|n| n.contains(address));
        let ours =
            target == iface.link_local || iface.addresses6.iter().any(|n| n.addr() == target);
        if let Some(mac) = option.filter(|m| m.is_unicast()) {
            if on_link && !self.is_own6(address) {
                self.neighbours.learn(address, mac, self.now_ns);
            }
        }
        if kind == icmpv6_type::NEIGHBOR_SOLICIT && ours {
            return self.advertise(input, frame, target, emit);
        }
        Verdict::Local
    }

    /// Answers a solicitation for `target`, polld's, with a solicited advertisement
    /// carrying the input interface's MAC, or, for duplicate address detection (from
    /// `::`), an unsolicited one to all nodes (RFC 4861 §7.2.4).
    fn advertise(
        &mut self,
        input: usize,
        frame: &[u8],
        target: Ipv6Addr,
        emit: &mut dyn Emit,
    ) -> Verdict {
        let src = Ipv6Packet::new_unchecked(&frame[ETH..]).src_addr();
        let mac = self.interfaces[input].mac;
        const ROUTER: u32 = 1 << 31;
        const SOLICITED: u32 = 1 << 30;
        const OVERRIDE: u32 = 1 << 29;
        let (dst, rest, link) = if src.is_unspecified() {
            let all_nodes = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            let link = frames::Link {
                src: mac,
                dst: MacAddr([0x33, 0x33, 0, 0, 0, 1]),
            };
            (all_nodes, ROUTER | OVERRIDE, link)
        } else {
            (
                src,
                ROUTER | SOLICITED | OVERRIDE,
                self.reply_link(input, frame),
            )
        };
        let mut data = target.octets().to_vec();
        data.extend_from_slice(&[2, 1]);
        data.extend_from_slice(&mac.0);
        let header = IcmpHeader {
            msg_type: icmpv6_type::NEIGHBOR_ADVERT,
            code: 0,
            rest,
        };
        frames::icmpv6(
            &mut self.scratch,
            link,
            (target, dst),
            ND_HOP_LIMIT,
            header,
            &data,
        );
        emit.emit(input, &self.scratch);
        self.counters.generated.nd_adverts += 1;
        Verdict::Consumed
    }

    /// A neighbour solicitation or advertisement from the link, checked: its target and
    /// the link-layer address its option carries (source for a solicitation, target for
    /// an advertisement), if any.
    fn neighbour_message(
        &self,
        frame: &[u8],
        chain: &Chain,
    ) -> Option<(Ipv6Addr, Option<MacAddr>)> {
        let ip = Ipv6Packet::new_unchecked(&frame[ETH..]);
        if chain.protocol != next_header::ICMPV6
            || chain.upper_offset != Some(0)
            || ip.hop_limit() != ND_HOP_LIMIT
        {
            return None;
        }
        let message = IcmpPacket::new_checked(ip.payload()).ok()?;
        // Type, code, checksum, 4 reserved bytes, the 16-byte target, then options.
        const OPTIONS_AT: usize = 24;
        let wanted_option = match message.msg_type() {
            icmpv6_type::NEIGHBOR_SOLICIT => 1,
            icmpv6_type::NEIGHBOR_ADVERT => 2,
            _ => return None,
        };
        let len = ip.payload().len() as u32;
        if message.code() != 0
            || message.as_bytes().len() < OPTIONS_AT
            || !message.verify_checksum_over(pseudo_header_sum(ip.src_addr(), ip.dst_addr(), len))
        {
            return None;
        }
        let mut target = [0u8; 16];
        target.copy_from_slice(&message.as_bytes()[8..OPTIONS_AT]);
        let mut options = &message.as_bytes()[OPTIONS_AT..];
        let mut mac = None;
        while let [kind, units, ..] = *options {
            let len = usize::from(units) * 8;
            if len == 0 || len > options.len() {
                // RFC 4861 §7.1.1: an option of length 0 makes the message invalid.
                return None;
            }
            if kind == wanted_option && len == 8 {
                mac = Some(MacAddr(options[2..8].try_into().expect("6 bytes")));
            }
            options = &options[len..];
        }
        Some((Ipv6Addr::from(target), mac))
    }

    /// Sends an ICMPv6 error about `frame` (a checked IPv6 packet whose chain is
    /// `chain`) back where it came from, unless RFC 4443 §2.4 forbids it or the rate
    /// limit is exhausted.
    pub(super) fn icmpv6_error(
        &mut self,
        input: usize,
        frame: &[u8],
        chain: &Chain,
        header: IcmpHeader,
        emit: &mut dyn Emit,
    ) {
        let eth = EthernetFrame::new_unchecked(frame);
        let ip = Ipv6Packet::new_unchecked(eth.payload());
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let about_icmp_error = chain.protocol == next_header::ICMPV6
            && match chain.upper_offset.and_then(|at| ip.payload().get(at)) {
                Some(&t) => icmpv6_type::is_error(t),
                None => true,
            };
        let src_class = Ipv6Class::of(src);
        if about_icmp_error
            || eth.dst_addr().is_multicast()
            || Ipv6Class::of(dst) == Ipv6Class::Multicast
            || !matches!(src_class, Ipv6Class::Unicast | Ipv6Class::LinkLocal)
        {
            return;
        }
        let iface = &self.interfaces[input];
        let our_addr = if src_class == Ipv6Class::LinkLocal {
            Some(iface.link_local)
        } else {
            iface
                .addresses6
                .iter()
                .find(|n| n.contains(src))
                .or(iface.addresses6.first())
                .map(|n| n.addr())
                .or(self.own_addresses6.first().copied())
        };
        let Some(our_addr) = our_addr else {
            return;
        };
        if !self.icmp_limit.try_take(self.now_ns) {
            self.counters.icmp_rate_limited += 1;
            return;
        }
        let quoted_len = ip
            .packet()
            .len()
            .min(MIN_MTU - HEADER - IcmpPacket::<&[u8]>::HEADER_LEN);
        let link = self.reply_link(input, frame);
        frames::icmpv6(
            &mut self.scratch,
            link,
            (our_addr, src),
            TTL,
            header,
            &ip.packet()[..quoted_len],
        );
        emit.emit(input, &self.scratch);
        self.counters.generated.icmp_errors += 1;
    }
}

/// A destination unreachable header with `code`.
fn unreachable(code: u8) -> IcmpHeader {
    IcmpHeader {
        msg_type: icmpv6_type::DEST_UNREACHABLE,
        code,
        rest: 0,
    }
}
