//! The router's IPv6 path, rule by rule (RFC 8200, RFC 4291, RFC 4443), and a malformed
//! corpus run through it. Every rig checks on drop that its counters add up.

mod common;

use common::*;
use polld_core::Verdict;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::icmpv6::{icmpv6_type, unreachable_code};
use polld_packet::wire::ipv6::next_header;
use polld_packet::wire::{EthernetFrame, IcmpPacket, Ipv6Packet, MacAddr};
use polld_packet::PacketDrop;
use std::net::Ipv6Addr;

/// Host A (2001:db8:1::2) behind port 0; gateway G (2001:db8:2::2) behind port 1, MTU
/// 1400, leading to 2001:db8:9::/48.
const CONFIG: &str = r#"
[[interfaces]]
name = "veth1"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]

[[interfaces]]
name = "veth2"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]
mtu = 1400

[[routes]]
prefix = "2001:db8:9::/48"
gateway = "2001:db8:2::2"

[[routes]]
prefix = "10.9.0.0/16"
gateway = "10.0.2.2"

[[static_arp]]
ip = "2001:db8:2::2"
mac = "02:00:00:00:02:02"

[[static_arp]]
ip = "10.0.2.2"
mac = "02:00:00:00:02:02"
"#;

const A: &str = "2001:db8:1::2";
const FAR: &str = "2001:db8:9::7";
/// polld's link-local address on port 0 (EUI-64 of 02:00:00:00:01:01).
const OUR_LL: &str = "fe80::ff:fe00:101";

impl Rig {
    fn new() -> Rig {
        Rig::with("")
    }

    fn with(extra: &str) -> Rig {
        Rig::of(&format!("{extra}\n{CONFIG}"))
    }

    /// The one ICMPv6 message the last frame caused, checked and parsed.
    fn icmp(&mut self) -> Icmp6 {
        let sent = self.sent.take();
        assert_eq!(sent.len(), 1, "one generated frame: {sent:?}");
        let (out, frame) = sent.into_iter().next().unwrap();
        assert_eq!(out, 0, "ICMPv6 goes back out of the input port");
        parse_icmp6(&frame)
    }

    fn no_icmp(&mut self) {
        assert!(self.sent.take().is_empty(), "no ICMPv6 message");
    }
}

/// An emitted ICMPv6 message: addressing and fields.
#[derive(Debug)]
struct Icmp6 {
    eth_src: MacAddr,
    eth_dst: MacAddr,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    msg_type: u8,
    code: u8,
    rest: u32,
    data: Vec<u8>,
}

/// Parses an emitted ICMPv6 frame, checking its length and its checksum from scratch.
fn parse_icmp6(frame: &[u8]) -> Icmp6 {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), ethertype::IPV6);
    let ip = Ipv6Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(ip.next_header(), next_header::ICMPV6);
    assert!(ip.packet().len() <= 1280, "within the IPv6 minimum MTU");
    assert!(
        naive_icmpv6_checksum_ok(ip.src_addr(), ip.dst_addr(), ip.payload()),
        "emitted ICMPv6 checksum"
    );
    let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
    Icmp6 {
        eth_src: eth.src_addr(),
        eth_dst: eth.dst_addr(),
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        hop_limit: ip.hop_limit(),
        msg_type: icmp.msg_type(),
        code: icmp.code(),
        rest: icmp.rest_of_header(),
        data: icmp.data().to_vec(),
    }
}

fn udp_far() -> Ip6 {
    Ip6::udp(A, FAR, 9, 32)
}

/// Checks an ICMPv6 error: from polld's port-0 address to A's MAC and address, quoting
/// the offending packet.
fn assert_error(m: &Icmp6, msg_type: u8, code: u8, rest: u32, about: &Ip6) {
    assert_eq!(
        (m.msg_type, m.code, m.rest),
        (msg_type, code, rest),
        "{m:?}"
    );
    assert_eq!((m.eth_src, m.eth_dst), (r1(), host_a()));
    assert_eq!((m.src, m.dst), (ip6("2001:db8:1::1"), about.src));
    assert_eq!(m.hop_limit, 64);
    assert_eq!(
        m.data,
        about.bytes(),
        "the whole offending packet, it being short"
    );
}

// ---- forwarding ------------------------------------------------------------------------

#[test]
fn forwards_with_rewritten_macs_and_hop_limit() {
    let mut rig = Rig::new();
    let packet = Ip6::udp(A, FAR, 9, 100);
    let (verdict, frame) = rig.send_from_a(&packet);
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r2(), gw()));
    let ip = Ipv6Packet::new_checked(&frame[14..]).unwrap();
    assert_eq!(ip.hop_limit(), 63);
    let mut expect = packet.bytes();
    expect[7] = 63;
    assert_eq!(ip.packet(), &expect[..], "nothing else changes");
    assert_eq!(rig.fwd.counters().forwarded, 1);
    rig.no_icmp();
}

#[test]
fn link_padding_is_trimmed() {
    let mut rig = Rig::new();
    let packet = Ip6::with_payload(A, FAR, next_header::NO_NEXT_HEADER, Vec::new());
    let (verdict, _) = rig.send_from_a(&packet);
    assert_eq!(verdict, Verdict::ForwardEmitted { out: 1 });
    let parts = rig.sent.take_parts();
    assert_eq!(parts.len(), 1);
    assert_eq!(
        parts[0].1.len(),
        14 + 40,
        "the 60-byte frame leaves without padding"
    );
    assert_eq!(rig.fwd.counters().padding_trimmed, 1);
}

#[test]
fn ipv4_and_ipv6_share_the_ports() {
    let mut rig = Rig::new();
    let v4 = Ip::udp("10.0.1.2", "10.9.1.1", 9, 32);
    let mut frame = v4.frame(host_a(), r1());
    assert_eq!(rig.process(0, &mut frame), Verdict::Forward { out: 1 });
    assert_eq!(rig.verdict_from_a(&udp_far()), Verdict::Forward { out: 1 });
    assert_eq!(rig.fwd.counters().forwarded, 2);
}

#[test]
fn routes_and_neighbours_change_in_place() {
    let mut rig = Rig::new();
    let prefix = "2001:db8:9::/48".parse().unwrap();
    let old = rig.fwd.routes_mut().remove6(prefix).unwrap();
    assert_eq!(
        rig.verdict_from_a(&udp_far()),
        PacketDrop::NoRoute.verdict()
    );
    rig.icmp();
    rig.fwd.routes_mut().insert6(prefix, old);
    let moved = ip6("2001:db8:2::3");
    rig.fwd.neighbours_mut().add_static(moved, mac(3, 2));
    rig.fwd.routes_mut().insert6(
        "2001:db8:9:1::/64".parse().unwrap(),
        polld_packet::route::Route {
            out: 1,
            next_hop: polld_packet::route::NextHop::Gateway(moved),
        },
    );
    let (verdict, frame) = rig.send_from_a(&Ip6::udp(A, "2001:db8:9:1::5", 9, 8));
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        mac(3, 2)
    );
    assert_eq!(rig.verdict_from_a(&udp_far()), Verdict::Forward { out: 1 });
}

/// The kinds that forward nothing answer by their kind whatever the hop limit: Linux
/// looks the route up before it checks the hop limit, so traceroute shows the refusal
/// (`!N`, `!X`, or nothing for a blackhole) at the router's own hop. A route out of an
/// interface polld does not poll is the kernel's to forward: the hop limit first.
#[test]
fn reject_routes_drop_by_their_reason_with_the_kernels_icmpv6_errors() {
    use polld_packet::route::{NextHop, Reject, Route};
    let mut rig = Rig::new();
    let prefix = "2001:db8:9::/48".parse().unwrap();
    for hop_limit in [64, 1] {
        for (reject, reason, code) in [
            (Reject::Blackhole, PacketDrop::Blackhole, None),
            (Reject::Unreachable, PacketDrop::Unreachable, Some(0)),
            (Reject::Prohibit, PacketDrop::Prohibited, Some(1)),
            (Reject::Unpolled, PacketDrop::UnpolledRoute, None),
        ] {
            let next_hop = NextHop::Reject(reject);
            rig.fwd
                .routes_mut()
                .insert6(prefix, Route { out: 0, next_hop });
            let packet = Ip6 {
                hop_limit,
                ..udp_far()
            };
            let (reason, icmp) = match (reject, hop_limit) {
                (Reject::Unpolled, 1) => (PacketDrop::TtlExceeded, Some((3, 0))),
                _ => (reason, code.map(|code| (1, code))),
            };
            let what = format!("{reject:?}, hop limit {hop_limit}");
            assert_eq!(rig.verdict_from_a(&packet), reason.verdict(), "{what}");
            match icmp {
                Some(header) => {
                    let m = rig.icmp();
                    assert_eq!((m.msg_type, m.code), header, "{what}");
                }
                None => rig.no_icmp(),
            }
        }
    }
}

// ---- RFC 8200: header, hop limit, extension headers, no fragmentation -------------------

#[test]
fn truncated_header_bad_version_and_bad_payload_length() {
    let mut rig = Rig::new();
    let mut short = eth_frame(host_a(), r1(), ethertype::IPV6, &udp_far().bytes()[..39]);
    short.truncate(14 + 39);
    assert_eq!(rig.process(0, &mut short), PacketDrop::Truncated.verdict());
    let mut v4 = udp_far().frame(host_a(), r1());
    v4[14] = 0x45;
    assert_eq!(rig.process(0, &mut v4), PacketDrop::BadVersion.verdict());
    let mut long = udp_far().frame(host_a(), r1());
    long[18..20].copy_from_slice(&1000u16.to_be_bytes());
    assert_eq!(rig.process(0, &mut long), PacketDrop::BadLength.verdict());
    rig.no_icmp();
}

#[test]
fn hop_limit_1_and_0_are_exceeded_with_time_exceeded() {
    for hop_limit in [1, 0] {
        let mut rig = Rig::new();
        let packet = Ip6 {
            hop_limit,
            ..udp_far()
        };
        assert_eq!(
            rig.verdict_from_a(&packet),
            PacketDrop::TtlExceeded.verdict()
        );
        let m = rig.icmp();
        assert_error(&m, icmpv6_type::TIME_EXCEEDED, 0, 0, &packet);
    }
    let mut rig = Rig::new();
    let two = Ip6 {
        hop_limit: 2,
        ..udp_far()
    };
    assert_eq!(rig.verdict_from_a(&two), Verdict::Forward { out: 1 });
}

#[test]
fn extension_headers_are_walked_and_forwarded() {
    let mut rig = Rig::new();
    let packet = udp_far()
        .with_ext(next_header::DEST_OPTIONS, &[1, 4, 0, 0, 0, 0])
        .with_ext(next_header::ROUTING, &[0, 0, 0, 0, 0, 0]);
    assert_eq!(rig.verdict_from_a(&packet), Verdict::Forward { out: 1 });
    // A first fragment and a later one: routers forward fragments untouched.
    let first = udp_far().with_ext(next_header::FRAGMENT, &[0, 1, 0, 0, 0, 9]);
    assert_eq!(rig.verdict_from_a(&first), Verdict::Forward { out: 1 });
    let later = udp_far().with_ext(next_header::FRAGMENT, &[0, 0x08, 0, 0, 0, 9]);
    assert_eq!(rig.verdict_from_a(&later), Verdict::Forward { out: 1 });
}

#[test]
fn extension_header_chains_past_the_payload_are_dropped() {
    let mut rig = Rig::new();
    // A destination options header claiming 16 bytes in an 8-byte payload.
    let mut past = Ip6::with_payload(
        A,
        FAR,
        next_header::DEST_OPTIONS,
        vec![59, 1, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(rig.verdict_from_a(&past), PacketDrop::ExtHeaders.verdict());
    // The same with link padding after the packet: the walk stops at the payload length.
    past.payload.truncate(2);
    let mut frame = past.frame(host_a(), r1());
    assert!(frame.len() > 14 + 42);
    assert_eq!(rig.process(0, &mut frame), PacketDrop::ExtHeaders.verdict());
    // Hop-by-hop not first.
    let late = Ip6::udp(A, FAR, 9, 8)
        .with_ext(next_header::HOP_BY_HOP, &[1, 4, 0, 0, 0, 0])
        .with_ext(next_header::DEST_OPTIONS, &[1, 4, 0, 0, 0, 0]);
    assert_eq!(rig.verdict_from_a(&late), PacketDrop::ExtHeaders.verdict());
    // Nine headers.
    let mut long = udp_far();
    for _ in 0..9 {
        long = long.with_ext(next_header::DEST_OPTIONS, &[1, 4, 0, 0, 0, 0]);
    }
    assert_eq!(rig.verdict_from_a(&long), PacketDrop::ExtHeaders.verdict());
    rig.no_icmp();
    assert_eq!(rig.fwd.counters().dropped(PacketDrop::ExtHeaders), 4);
}

#[test]
fn hop_by_hop_is_dropped_when_forwarding_and_handed_up_when_local() {
    let mut rig = Rig::new();
    let hbh = udp_far().with_ext(next_header::HOP_BY_HOP, &[5, 2, 0, 0, 1, 0]);
    assert_eq!(rig.verdict_from_a(&hbh), PacketDrop::HopByHop.verdict());
    rig.no_icmp();
    // An MLD report (router alert in hop-by-hop) to a multicast group is the host's.
    let mut mld = Ip6::icmp("fe80::2", "ff02::16", 143, 0, &[0; 20])
        .with_ext(next_header::HOP_BY_HOP, &[5, 2, 0, 0, 1, 0]);
    mld.hop_limit = 1;
    let mut frame = mld.frame(host_a(), MacAddr([0x33, 0x33, 0, 0, 0, 0x16]));
    assert_eq!(rig.process(0, &mut frame), Verdict::Local);
}

#[test]
fn too_big_is_never_fragmented_and_tells_the_mtu() {
    let mut rig = Rig::new();
    let big = Ip6::udp(A, FAR, 9, 1400 - 48 + 1);
    assert_eq!(big.bytes().len(), 1401);
    assert_eq!(rig.verdict_from_a(&big), PacketDrop::Oversize.verdict());
    let m = rig.icmp();
    assert_eq!(
        (m.msg_type, m.code, m.rest),
        (icmpv6_type::PACKET_TOO_BIG, 0, 1400)
    );
    assert_eq!(
        m.data,
        big.bytes()[..1280 - 48],
        "quoted up to the minimum MTU"
    );
    assert_eq!(rig.fwd.counters().cantfrag, 1);
    let fits = Ip6::udp(A, FAR, 9, 1400 - 48);
    assert_eq!(rig.verdict_from_a(&fits), Verdict::Forward { out: 1 });
}

// ---- RFC 4291: addresses ---------------------------------------------------------------

#[test]
fn multicast_unspecified_and_loopback_sources() {
    let mut rig = Rig::new();
    let from = |src: &str| Ip6::udp(src, FAR, 9, 8);
    assert_eq!(
        rig.verdict_from_a(&from("ff02::1")),
        PacketDrop::MulticastSource.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&from("::")),
        PacketDrop::UnspecifiedSource.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&from("::1")),
        PacketDrop::Loopback.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&Ip6::udp(A, "::1", 9, 8)),
        PacketDrop::Loopback.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&Ip6::udp(A, "::", 9, 8)),
        PacketDrop::Martian.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&from("::ffff:10.0.1.2")),
        PacketDrop::Martian.verdict()
    );
    assert_eq!(
        rig.verdict_from_a(&from("2001:db8:2::1")),
        PacketDrop::Martian.verdict(),
        "our own address"
    );
    rig.no_icmp();
    // Duplicate address detection: from :: to a solicited-node group, for the host.
    let dad = Ip6::icmp(
        "::",
        "ff02::1:ff00:2",
        icmpv6_type::NEIGHBOR_SOLICIT,
        0,
        &[0; 16],
    );
    let mut frame = dad.frame(host_a(), MacAddr([0x33, 0x33, 0xff, 0, 0, 2]));
    assert_eq!(rig.process(0, &mut frame), Verdict::Local);
}

#[test]
fn link_local_sources_and_destinations_stay_on_their_link() {
    let mut rig = Rig::new();
    let from_ll = Ip6::udp("fe80::2", FAR, 9, 8);
    assert_eq!(
        rig.verdict_from_a(&from_ll),
        PacketDrop::LinkLocal.verdict()
    );
    let m = rig.icmp();
    assert_eq!(
        (m.msg_type, m.code),
        (
            icmpv6_type::DEST_UNREACHABLE,
            unreachable_code::BEYOND_SCOPE
        )
    );
    assert_eq!(
        (m.src, m.dst),
        (ip6(OUR_LL), ip6("fe80::2")),
        "link-local to link-local"
    );
    let to_other_ll = Ip6::udp(A, "fe80::99", 9, 8);
    assert_eq!(
        rig.verdict_from_a(&to_other_ll),
        PacketDrop::LinkLocal.verdict()
    );
    rig.no_icmp();
    // polld's own link-local address is polld's.
    let to_us = Ip6::udp("fe80::2", OUR_LL, 9, 8);
    assert_eq!(rig.verdict_from_a(&to_us), Verdict::Local);
    let ping = Ip6::icmp(
        "fe80::2",
        OUR_LL,
        icmpv6_type::ECHO_REQUEST,
        0x0007_0001,
        b"hi",
    );
    assert_eq!(rig.verdict_from_a(&ping), Verdict::Consumed);
    let m = rig.icmp();
    assert_eq!(
        (m.msg_type, m.src, m.dst),
        (icmpv6_type::ECHO_REPLY, ip6(OUR_LL), ip6("fe80::2"))
    );
}

#[test]
fn unicast_destination_in_a_link_layer_multicast_is_martian() {
    let mut rig = Rig::new();
    let mut frame = udp_far().frame(host_a(), MacAddr([0x33, 0x33, 0, 0, 0, 1]));
    assert_eq!(rig.process(0, &mut frame), PacketDrop::Martian.verdict());
    rig.no_icmp();
}

// ---- RFC 4443: errors, echo, limits ---------------------------------------------------

/// No route, whatever the hop limit (the route before the hop limit, as in Linux).
#[test]
fn no_route_is_unreachable_no_route() {
    for hop_limit in [64, 1] {
        let mut rig = Rig::new();
        let packet = Ip6 {
            hop_limit,
            ..Ip6::udp(A, "2001:db8:7::1", 9, 8)
        };
        assert_eq!(rig.verdict_from_a(&packet), PacketDrop::NoRoute.verdict());
        let m = rig.icmp();
        assert_error(
            &m,
            icmpv6_type::DEST_UNREACHABLE,
            unreachable_code::NO_ROUTE,
            0,
            &packet,
        );
    }
}

#[test]
fn a_deny_rule_is_administratively_prohibited() {
    let mut rig = Rig::with(
        "[[rules]]\naction = \"deny\"\nproto = \"udp\"\ndst = \"2001:db8:9::/48\"\ndst_ports = 9\n",
    );
    let packet = udp_far();
    assert_eq!(rig.verdict_from_a(&packet), PacketDrop::Filtered.verdict());
    let m = rig.icmp();
    assert_error(
        &m,
        icmpv6_type::DEST_UNREACHABLE,
        unreachable_code::ADMIN_PROHIBITED,
        0,
        &packet,
    );
    // The port is read past extension headers; another port passes.
    let behind = Ip6::udp(A, FAR, 9, 8).with_ext(next_header::DEST_OPTIONS, &[1, 4, 0, 0, 0, 0]);
    assert_eq!(rig.verdict_from_a(&behind), PacketDrop::Filtered.verdict());
    rig.icmp();
    assert_eq!(
        rig.verdict_from_a(&Ip6::udp(A, FAR, 10, 8)),
        Verdict::Forward { out: 1 }
    );
    assert_eq!(rig.fwd.stats().rules.rules, vec![2]);
}

#[test]
fn unknown_neighbour_is_address_unreachable_until_learned() {
    let mut rig = Rig::new();
    let neighbour = "2001:db8:2::99";
    let packet = Ip6::udp(A, neighbour, 9, 8);
    assert_eq!(
        rig.verdict_from_a(&packet),
        PacketDrop::NeighbourUnknown.verdict()
    );
    let m = rig.icmp();
    assert_error(
        &m,
        icmpv6_type::DEST_UNREACHABLE,
        unreachable_code::ADDRESS,
        0,
        &packet,
    );
    // The host's neighbour discovery: the advertisement answering it passes polld on
    // its way up, with the target's link-layer address (option 2).
    let mut body = ip6(neighbour).octets().to_vec();
    body.extend_from_slice(&[2, 1, 2, 0, 0, 0, 2, 0x99]);
    let mut na = Ip6::icmp(
        neighbour,
        "2001:db8:2::1",
        icmpv6_type::NEIGHBOR_ADVERT,
        0x6000_0000,
        &body,
    );
    na.hop_limit = 255;
    let mut frame = na.frame(mac(0x99, 2), r2());
    assert_eq!(rig.process(1, &mut frame), Verdict::Local);
    assert_eq!(rig.fwd.neighbour_lookup(ip6(neighbour)), Some(mac(0x99, 2)));
    let (verdict, frame) = rig.send_from_a(&packet);
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        mac(0x99, 2)
    );
}

#[test]
fn solicitations_for_our_addresses_are_answered_and_teach_the_sender() {
    let mut rig = Rig::new();
    let target = "2001:db8:1::1";
    let mut body = ip6(target).octets().to_vec();
    body.extend_from_slice(&[1, 1, 2, 0, 0, 0, 1, 2]); // source link-layer address: A
    let mut ns = Ip6::icmp(A, "ff02::1:ff00:1", icmpv6_type::NEIGHBOR_SOLICIT, 0, &body);
    ns.hop_limit = 255;
    let mut frame = ns.frame(host_a(), MacAddr([0x33, 0x33, 0xff, 0, 0, 1]));
    assert_eq!(rig.process(0, &mut frame), Verdict::Consumed);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1);
    let m = parse_icmp6(&sent[0].1);
    assert_eq!((m.msg_type, m.code), (icmpv6_type::NEIGHBOR_ADVERT, 0));
    assert_eq!(m.rest, 0xE000_0000, "router, solicited, override");
    assert_eq!((m.src, m.dst, m.hop_limit), (ip6(target), ip6(A), 255));
    assert_eq!((m.eth_src, m.eth_dst), (r1(), host_a()));
    let mut expect = ip6(target).octets().to_vec();
    expect.extend_from_slice(&[2, 1]);
    expect.extend_from_slice(&r1().0);
    assert_eq!(m.data, expect, "the target and our MAC");
    assert_eq!(rig.fwd.neighbour_lookup(ip6(A)), Some(host_a()));
    assert_eq!(rig.fwd.counters().generated.nd_adverts, 1);
    // Duplicate address detection of our address: defended to all nodes.
    let mut dad = Ip6::icmp(
        "::",
        "ff02::1:ff00:1",
        icmpv6_type::NEIGHBOR_SOLICIT,
        0,
        &body[..16],
    );
    dad.hop_limit = 255;
    let mut frame = dad.frame(host_a(), MacAddr([0x33, 0x33, 0xff, 0, 0, 1]));
    assert_eq!(rig.process(0, &mut frame), Verdict::Consumed);
    let m = parse_icmp6(&rig.sent.take()[0].1);
    assert_eq!((m.dst, m.rest), (ip6("ff02::1"), 0xA000_0000));
    assert_eq!(m.eth_dst, MacAddr([0x33, 0x33, 0, 0, 0, 1]));
    // A solicitation for someone else goes up.
    let mut other = body.clone();
    other[15] = 9;
    let mut ns = Ip6::icmp(
        A,
        "ff02::1:ff00:9",
        icmpv6_type::NEIGHBOR_SOLICIT,
        0,
        &other,
    );
    ns.hop_limit = 255;
    let mut frame = ns.frame(host_a(), MacAddr([0x33, 0x33, 0xff, 0, 0, 9]));
    assert_eq!(rig.process(0, &mut frame), Verdict::Local);
    rig.no_icmp();
}

#[test]
fn neighbour_messages_off_link_or_forwarded_teach_nothing() {
    let mut rig = Rig::new();
    let neighbour = "2001:db8:2::98";
    let mut body = ip6(neighbour).octets().to_vec();
    body.extend_from_slice(&[2, 1, 2, 0, 0, 0, 2, 0x98]);
    // Hop limit below 255: not from the link.
    let na = Ip6::icmp(
        neighbour,
        "2001:db8:2::1",
        icmpv6_type::NEIGHBOR_ADVERT,
        0,
        &body,
    );
    let mut frame = na.frame(mac(0x98, 2), r2());
    assert_eq!(rig.process(1, &mut frame), Verdict::Local);
    // On the wrong port: the target is not on port 0's prefix.
    let na = Ip6 {
        hop_limit: 255,
        ..na
    };
    let mut frame = na.frame(host_a(), r1());
    assert_eq!(rig.process(0, &mut frame), Verdict::Local);
    // A bad checksum.
    let mut bad = na.clone();
    bad.payload[30] ^= 1;
    let mut frame = bad.frame(mac(0x98, 2), r2());
    assert_eq!(rig.process(1, &mut frame), Verdict::Local);
    assert_eq!(rig.fwd.neighbour_lookup(ip6(neighbour)), None);
}

#[test]
fn echo_to_our_addresses_is_answered() {
    let mut rig = Rig::new();
    let data: Vec<u8> = (0..56).collect();
    for dst in ["2001:db8:1::1", "2001:db8:2::1"] {
        let ping = Ip6::icmp(A, dst, icmpv6_type::ECHO_REQUEST, 0x1234_0001, &data);
        assert_eq!(rig.verdict_from_a(&ping), Verdict::Consumed);
        let m = rig.icmp();
        assert_eq!(
            (m.msg_type, m.code, m.rest),
            (icmpv6_type::ECHO_REPLY, 0, 0x1234_0001)
        );
        assert_eq!((m.src, m.dst), (ip6(dst), ip6(A)));
        assert_eq!((m.eth_src, m.eth_dst), (r1(), host_a()));
        assert_eq!(m.data, data);
    }
    let mut bad = Ip6::icmp(A, "2001:db8:1::1", icmpv6_type::ECHO_REQUEST, 1, &data);
    bad.payload[9] ^= 1;
    assert_eq!(rig.verdict_from_a(&bad), PacketDrop::BadChecksum.verdict());
    let other = Ip6::udp(A, "2001:db8:1::1", 22, 8);
    assert_eq!(
        rig.verdict_from_a(&other),
        Verdict::Local,
        "the host's traffic"
    );
    rig.no_icmp();
    assert_eq!(rig.fwd.counters().generated.icmp_echo_replies, 2);
}

#[test]
fn echo_is_handed_up_when_polld_does_not_answer() {
    let mut rig = Rig::with("[icmp]\nanswer_echo = false\n");
    let ping = Ip6::icmp(A, "2001:db8:1::1", icmpv6_type::ECHO_REQUEST, 1, b"x");
    assert_eq!(rig.verdict_from_a(&ping), Verdict::Local);
    rig.no_icmp();
}

#[test]
fn no_error_about_an_error_and_only_about_queries() {
    let mut rig = Rig::new();
    let error = Ip6::icmp(
        A,
        "2001:db8:7::1",
        icmpv6_type::DEST_UNREACHABLE,
        0,
        &[0x60; 48],
    );
    assert_eq!(rig.verdict_from_a(&error), PacketDrop::NoRoute.verdict());
    rig.no_icmp();
    let too_big = Ip6 {
        hop_limit: 1,
        ..Ip6::icmp(A, FAR, icmpv6_type::PACKET_TOO_BIG, 1280, &[0x60; 48])
    };
    assert_eq!(
        rig.verdict_from_a(&too_big),
        PacketDrop::TtlExceeded.verdict()
    );
    rig.no_icmp();
    // An error behind extension headers is still an error.
    let hidden = Ip6::icmp(
        A,
        "2001:db8:7::1",
        icmpv6_type::TIME_EXCEEDED,
        0,
        &[0x60; 48],
    )
    .with_ext(next_header::DEST_OPTIONS, &[1, 4, 0, 0, 0, 0]);
    assert_eq!(rig.verdict_from_a(&hidden), PacketDrop::NoRoute.verdict());
    rig.no_icmp();
    // An echo request is a query: it gets its error.
    let query = Ip6::icmp(A, "2001:db8:7::1", icmpv6_type::ECHO_REQUEST, 0, &[1; 8]);
    assert_eq!(rig.verdict_from_a(&query), PacketDrop::NoRoute.verdict());
    rig.icmp();
}

#[test]
fn errors_are_rate_limited_with_the_ipv4_ones() {
    let mut rig = Rig::with("[icmp]\nrate_per_sec = 1\nburst = 2\n");
    let packet = Ip6::udp(A, "2001:db8:7::1", 9, 8);
    let v4 = Ip::udp("10.0.1.2", "10.7.0.1", 9, 8);
    let mut frame = v4.frame(host_a(), r1());
    assert_eq!(rig.process(0, &mut frame), PacketDrop::NoRoute.verdict());
    assert_eq!(rig.sent.take().len(), 1);
    assert_eq!(rig.verdict_from_a(&packet), PacketDrop::NoRoute.verdict());
    rig.icmp();
    assert_eq!(rig.verdict_from_a(&packet), PacketDrop::NoRoute.verdict());
    rig.no_icmp();
    assert_eq!(rig.fwd.counters().icmp_rate_limited, 1);
    rig.fwd.set_now(SEC);
    assert_eq!(rig.verdict_from_a(&packet), PacketDrop::NoRoute.verdict());
    rig.icmp();
}

// ---- a malformed corpus ---------------------------------------------------------------

/// Malformed and unforwardable IPv6 frames, each with the reason it must be dropped
/// for (or `None` when handed up), run through one rig: every frame is accounted for.
#[test]
fn malformed_corpus_is_dropped_by_reason() {
    let mut rig = Rig::new();
    let at = |p: &Ip6| p.frame(host_a(), r1());
    let good = udp_far().frame(host_a(), r1());
    let mut corpus: Vec<(&str, Vec<u8>, Option<PacketDrop>)> = Vec::new();
    for len in [0, 1, 20, 39] {
        let mut f = good[..14 + len].to_vec();
        f.resize(f.len().max(14), 0);
        corpus.push(("truncated header", f, Some(PacketDrop::Truncated)));
    }
    for payload_len in [41u16, 1000, 65535] {
        let mut f = good.clone();
        f[18..20].copy_from_slice(&payload_len.to_be_bytes());
        corpus.push((
            "payload length past the frame",
            f,
            Some(PacketDrop::BadLength),
        ));
    }
    for version in [0u8, 4, 7, 15] {
        let mut f = good.clone();
        f[14] = version << 4;
        corpus.push(("version", f, Some(PacketDrop::BadVersion)));
    }
    for (kind, body) in [
        (next_header::HOP_BY_HOP, vec![59, 200]),
        (next_header::ROUTING, vec![59, 1, 0, 0, 0, 0, 0, 0]),
        (next_header::DEST_OPTIONS, vec![59]),
        (next_header::FRAGMENT, vec![59, 0, 0]),
        (next_header::AUTH, vec![59, 4, 0, 0, 0, 0, 0, 0]),
    ] {
        let p = Ip6::with_payload(A, FAR, kind, body);
        corpus.push((
            "chain past the payload",
            at(&p),
            Some(PacketDrop::ExtHeaders),
        ));
    }
    for hop_limit in [0, 1] {
        let p = Ip6 {
            hop_limit,
            ..udp_far()
        };
        corpus.push(("hop limit", at(&p), Some(PacketDrop::TtlExceeded)));
    }
    for src in ["ff02::1", "ff0e::1", "ff05::2"] {
        corpus.push((
            "multicast source",
            at(&Ip6::udp(src, FAR, 9, 8)),
            Some(PacketDrop::MulticastSource),
        ));
    }
    corpus.push((
        "unspecified source",
        at(&Ip6::udp("::", FAR, 9, 8)),
        Some(PacketDrop::UnspecifiedSource),
    ));
    for dst in ["fe80::1", "fe80::ff:fe00:201", "febf::1"] {
        corpus.push((
            "link-local destination",
            at(&Ip6::udp(A, dst, 9, 8)),
            Some(PacketDrop::LinkLocal),
        ));
    }
    corpus.push((
        "link-local source",
        at(&Ip6::udp("fe80::5", FAR, 9, 8)),
        Some(PacketDrop::LinkLocal),
    ));
    corpus.push((
        "loopback",
        at(&Ip6::udp("::1", FAR, 9, 8)),
        Some(PacketDrop::Loopback),
    ));
    corpus.push((
        "multicast destination",
        at(&Ip6::udp(A, "ff02::1", 9, 8)),
        None,
    ));
    let mut expected_drops = 0;
    for (what, mut frame, expected) in corpus {
        let verdict = rig.process(0, &mut frame);
        match expected {
            Some(reason) => {
                expected_drops += 1;
                assert_eq!(verdict, reason.verdict(), "{what}: {frame:02x?}");
            }
            None => assert_eq!(verdict, Verdict::Local, "{what}"),
        }
        for (_, f) in rig.sent.take() {
            let m = parse_icmp6(&f);
            assert!(icmpv6_type::is_error(m.msg_type), "{what}: only errors");
        }
    }
    let c = rig.fwd.counters();
    assert_eq!(c.drops.after_rx(), expected_drops);
    assert_eq!(c.local, 1);
}
