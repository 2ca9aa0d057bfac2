//! The IPv4 forwarder, frame by frame: one test per malformed class, ARP, ICMP, rules,
//! and fuzz properties. Every rig checks on drop that its counters add up.

mod common;

use common::*;
use polld_core::{DropReason, Verdict};
use polld_packet::wire::arp::operation;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::icmp::icmp_type;
use polld_packet::wire::{ArpPacket, EthernetFrame, IcmpPacket, Ipv4Packet, MacAddr};
use polld_packet::PacketDrop;
use proptest::prelude::*;
use std::net::Ipv4Addr;

const BASE: &str = include_str!("../testdata/router.toml");

impl Rig {
    fn new() -> Rig {
        Rig::with("")
    }

    /// The base config with `extra` TOML before it (top-level keys and tables of
    /// their own).
    fn with(extra: &str) -> Rig {
        Rig::of(&format!("{extra}\n{BASE}"))
    }

    /// An ARP reply from `who` at `mac` on port `input` (answering a request of ours).
    fn arp_reply_from(&mut self, input: usize, who: Ipv4Addr, who_mac: MacAddr) -> Verdict {
        let (our_mac, our_ip) = if input == 0 {
            (r1(), ip("10.0.1.1"))
        } else {
            (r2(), ip("10.0.2.1"))
        };
        let mut frame = arp_frame(operation::REPLY, our_mac, (who_mac, who), (our_mac, our_ip));
        self.process(input, &mut frame)
    }
}

fn udp_to_net9() -> Ip {
    Ip::udp("10.0.1.2", "10.9.1.1", 9, 32)
}

/// An emitted ICMP frame, parsed: Ethernet, IPv4 and ICMP views.
type IcmpFrame<'a> = (
    EthernetFrame<&'a [u8]>,
    Ipv4Packet<&'a [u8]>,
    IcmpPacket<&'a [u8]>,
);

/// Parses an emitted ICMP frame, checking both checksums from scratch.
fn parse_icmp(frame: &[u8]) -> IcmpFrame<'_> {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), ethertype::IPV4);
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert!(naive_checksum_ok(ip.header()), "emitted IP header checksum");
    assert_eq!(ip.protocol(), 1);
    let message = &frame[14 + ip.header_len()..14 + usize::from(ip.total_len())];
    let icmp = IcmpPacket::new_checked(message).unwrap();
    assert!(naive_checksum_ok(icmp.as_bytes()), "emitted ICMP checksum");
    (eth, ip, icmp)
}

// ---- forwarding ------------------------------------------------------------------------

#[test]
fn forwards_with_rewritten_macs_ttl_and_valid_checksum() {
    let mut rig = Rig::new();
    let packet = udp_to_net9();
    let original = packet.frame(host_a(), r1());
    let (verdict, frame) = rig.send_from_a(&packet);
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r2(), gw()));
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.ttl(), 63);
    assert!(
        naive_checksum_ok(ip.header()),
        "the forwarded header verifies from scratch"
    );
    // Apart from TTL and checksum, the IP packet and its padding are untouched.
    let mut expected = original[14..].to_vec();
    expected[8] = 63;
    expected[10..12].copy_from_slice(&frame[24..26]);
    assert_eq!(&frame[14..], &expected[..]);
    assert!(rig.sent.take().is_empty());
    assert_eq!(rig.fwd.counters().forwarded, 1);
}

#[test]
fn connected_destination_needs_arp_then_forwards() {
    let mut rig = Rig::new();
    let host_b = ip("10.0.2.77");
    let packet = Ip::udp("10.0.1.2", "10.0.2.77", 9, 32);
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::Unresolved);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1, "one ARP request");
    let (out, request) = &sent[0];
    assert_eq!(*out, 1);
    let eth = EthernetFrame::new_checked(&request[..]).unwrap();
    assert_eq!(
        (eth.dst_addr(), eth.src_addr(), eth.ethertype()),
        (MacAddr::BROADCAST, r2(), ethertype::ARP)
    );
    let arp = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!(arp.operation(), operation::REQUEST);
    assert_eq!(
        (arp.sender_hw_addr(), arp.sender_ip()),
        (r2(), ip("10.0.2.1"))
    );
    assert_eq!(arp.target_ip(), host_b);

    // Rate-limited per next hop: no second request within the retry interval.
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::Unresolved);
    assert!(rig.sent.take().is_empty());
    rig.fwd.set_now(SEC);
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::Unresolved);
    assert_eq!(rig.sent.take().len(), 1, "a new request after retry_ms");

    let host_b_mac = mac(77, 2);
    assert_eq!(rig.arp_reply_from(1, host_b, host_b_mac), Verdict::Consumed);
    let (verdict, frame) = rig.send_from_a(&packet);
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        host_b_mac
    );
    assert_eq!(rig.fwd.counters().dropped(PacketDrop::Unresolved), 3);
}

#[test]
fn unknown_input_device_is_link_down() {
    let mut rig = Rig::new();
    let mut frame = udp_to_net9().frame(host_a(), r1());
    assert_eq!(
        rig.process(7, &mut frame),
        Verdict::Drop(DropReason::LinkDown)
    );
}

// ---- one test per malformed class ----------------------------------------------------

#[test]
fn truncated_ethernet() {
    let mut rig = Rig::new();
    let mut frame = udp_to_net9().frame(host_a(), r1());
    assert_eq!(
        rig.process(0, &mut frame[..13]),
        PacketDrop::Truncated.verdict()
    );
}

#[test]
fn truncated_ip() {
    let mut rig = Rig::new();
    let mut frame = udp_to_net9().frame(host_a(), r1());
    assert_eq!(
        rig.process(0, &mut frame[..14 + 19]),
        PacketDrop::Truncated.verdict()
    );
}

#[test]
fn bad_version() {
    let mut rig = Rig::new();
    let mut frame = udp_to_net9().frame(host_a(), r1());
    frame[14] = 0x65;
    assert_eq!(rig.process(0, &mut frame), PacketDrop::BadVersion.verdict());
}

#[test]
fn bad_ihl() {
    let mut rig = Rig::new();
    for ihl_byte in [0x44, 0x4F] {
        let mut frame = Ip::udp("10.0.1.2", "10.9.1.1", 9, 0).frame(host_a(), r1());
        frame[14] = ihl_byte; // IHL 4 is below 5; IHL 15 (60 bytes) is beyond the 46-byte payload
        assert_eq!(
            rig.process(0, &mut frame),
            PacketDrop::BadIhl.verdict(),
            "{ihl_byte:#x}"
        );
    }
}

#[test]
fn bad_total_length() {
    let mut rig = Rig::new();
    let packet = udp_to_net9();
    for total in [19u16, 200] {
        let mut frame = packet.frame(host_a(), r1());
        frame[16..18].copy_from_slice(&total.to_be_bytes());
        assert_eq!(
            rig.process(0, &mut frame),
            PacketDrop::BadLength.verdict(),
            "total {total}"
        );
    }
}

#[test]
fn bad_checksum() {
    let mut rig = Rig::new();
    let mut frame = udp_to_net9().frame(host_a(), r1());
    frame[14 + 10] ^= 0x01;
    assert_eq!(
        rig.process(0, &mut frame),
        PacketDrop::BadChecksum.verdict()
    );
    assert!(rig.sent.take().is_empty(), "no ICMP about a corrupt header");
}

#[test]
fn ttl_1_is_exceeded_with_icmp() {
    let mut rig = Rig::new();
    let packet = Ip {
        ttl: 1,
        ..udp_to_net9()
    };
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::TtlExceeded);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1);
    let (_, icmp_ip, icmp) = parse_icmp(&sent[0].1);
    assert_eq!(icmp_ip.dst_addr(), ip("10.0.1.2"));
    assert_eq!(
        (icmp.msg_type(), icmp.code()),
        (icmp_type::TIME_EXCEEDED, 0)
    );
}

#[test]
fn ttl_0_is_exceeded() {
    let mut rig = Rig::new();
    let packet = Ip {
        ttl: 0,
        ..udp_to_net9()
    };
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::TtlExceeded);
}

/// Forwards `packet` from host A, expecting it in place on port 1; returns the IP bytes.
fn forwarded_in_place(rig: &mut Rig, packet: &Ip) -> Vec<u8> {
    let (verdict, frame) = rig.send_from_a(packet);
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
    assert!(naive_checksum_ok(ip.header()), "forwarded header checksum");
    ip.packet().to_vec()
}

#[test]
fn record_route_gets_the_output_address() {
    let mut rig = Rig::new();
    // Room for two addresses, then end-of-list padding.
    let packet = Ip {
        options: vec![7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        ..udp_to_net9()
    };
    let out = forwarded_in_place(&mut rig, &packet);
    assert_eq!(out[20..32], [7, 11, 8, 10, 0, 2, 1, 0, 0, 0, 0, 0]);
    assert_eq!(out[8], 63, "TTL");
    assert_eq!(out[32..], packet.bytes()[32..], "payload untouched");
    // Full: forwarded untouched.
    let full = Ip {
        options: vec![7, 7, 8, 9, 9, 9, 9, 0],
        ..udp_to_net9()
    };
    assert_eq!(
        forwarded_in_place(&mut rig, &full)[20..28],
        full.options[..]
    );
    let c = rig.fwd.counters().options;
    assert_eq!(
        (c.datagrams, c.record_route, c.record_route_full),
        (2, 2, 1)
    );
}

#[test]
fn timestamps_in_all_three_forms() {
    let mut rig = Rig::new();
    rig.fwd.set_now(5 * SEC);
    // The wall clock is 3 days, 1.5 s past midnight UT at monotonic 5 s.
    rig.fwd
        .set_utc_offset(3 * 86_400 * SEC + 1_500_000_000 - 5 * SEC);
    let ms = 1500u32.to_be_bytes();
    let with = |options: Vec<u8>| Ip {
        options,
        ..udp_to_net9()
    };
    let only = forwarded_in_place(&mut rig, &with(vec![68, 8, 5, 0, 0, 0, 0, 0]));
    assert_eq!(only[20..24], [68, 8, 9, 0]);
    assert_eq!(only[24..28], ms);
    let addressed = forwarded_in_place(&mut rig, &with(vec![68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0]));
    assert_eq!(
        addressed[20..28],
        [68, 12, 13, 1, 10, 0, 1, 1],
        "the input's address"
    );
    assert_eq!(addressed[28..32], ms);
    // Prespecified: only the listed router (10.0.1.1, ours) stamps; 10.9.9.9 is not us.
    let listed = vec![
        68, 20, 5, 3, 10, 0, 1, 1, 0, 0, 0, 0, 10, 9, 9, 9, 0, 0, 0, 0,
    ];
    let stamped = forwarded_in_place(&mut rig, &with(listed.clone()));
    assert_eq!(stamped[22], 13);
    assert_eq!(stamped[28..32], ms);
    let mut not_us = listed;
    not_us[2] = 13;
    let skipped = forwarded_in_place(&mut rig, &with(not_us.clone()));
    assert_eq!(skipped[20..40], not_us[..], "not ours: untouched");
    // Full: the overflow count goes from 1 to 2.
    let full = forwarded_in_place(&mut rig, &with(vec![68, 8, 13, 0x10, 0, 0, 0, 0]));
    assert_eq!(full[20..24], [68, 8, 13, 0x20]);
    let c = rig.fwd.counters().options;
    assert_eq!((c.timestamp, c.timestamp_overflow), (5, 1));
}

#[test]
fn malformed_options_get_parameter_problem() {
    let mut rig = Rig::new();
    for (options, pointer) in [
        (vec![7, 1, 0, 0], 20),                // option length below 2
        (vec![68, 8, 5, 0xF0, 0, 0, 0, 0], 0), // fine: pointer 5 has room
        (vec![68, 4, 5, 0xF0], 23),            // full, and the overflow count is at 15
        (vec![148, 2, 0, 0], 21),              // router alert shorter than 4
    ] {
        let packet = Ip {
            options,
            ..udp_to_net9()
        };
        if pointer == 0 {
            forwarded_in_place(&mut rig, &packet);
            continue;
        }
        assert_eq!(rig.drop_from_a(&packet), PacketDrop::IpOptions);
        let sent = rig.sent.take();
        assert_eq!(sent.len(), 1, "{packet:?}");
        let (_, _, icmp) = parse_icmp(&sent[0].1);
        assert_eq!(
            (icmp.msg_type(), icmp.code()),
            (icmp_type::PARAMETER_PROBLEM, 0)
        );
        assert_eq!(icmp.rest_of_header() >> 24, pointer, "{packet:?}");
    }
    assert_eq!(rig.fwd.counters().options.malformed, 3);
}

#[test]
fn source_routes_are_refused_silently() {
    let mut rig = Rig::new();
    for kind in [131, 137] {
        let packet = Ip {
            options: vec![kind, 7, 4, 10, 9, 1, 1, 0],
            ..udp_to_net9()
        };
        assert_eq!(rig.drop_from_a(&packet), PacketDrop::IpOptions);
    }
    assert!(
        rig.sent.take().is_empty(),
        "as Linux with accept_source_route=0"
    );
    assert_eq!(rig.fwd.counters().options.source_route, 2);
}

#[test]
fn router_alert_nop_eol_and_unknown_options_pass_through() {
    let mut rig = Rig::new();
    let options = vec![148, 4, 0, 0, 1, 130, 3, 0, 25, 2, 0, 0];
    let packet = Ip {
        options: options.clone(),
        ..udp_to_net9()
    };
    let out = forwarded_in_place(&mut rig, &packet);
    assert_eq!(out[20..32], options[..]);
    let c = rig.fwd.counters().options;
    assert_eq!(
        (c.router_alert, c.nop, c.other, c.end_of_list),
        (1, 1, 2, 1)
    );
}

/// The fragments `parts` put back together: (first header, payload), checking each
/// fragment's checksum, size, 8-byte alignment and that they tile without gaps.
fn reassemble(parts: &[(usize, Vec<u8>)], mtu: usize) -> (Vec<u8>, Vec<u8>) {
    let mut data = Vec::new();
    let mut first_header = Vec::new();
    for (n, (out, frame)) in parts.iter().enumerate() {
        assert_eq!(*out, 1);
        let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
        assert_eq!(frame.len(), 14 + usize::from(ip.total_len()), "no padding");
        assert!(naive_checksum_ok(ip.header()), "fragment {n} checksum");
        assert!(
            usize::from(ip.total_len()) <= mtu,
            "fragment {n} fits the MTU"
        );
        let last = n + 1 == parts.len();
        if !last {
            assert!(ip.more_fragments(), "fragment {n}: MF");
            assert_eq!(ip.payload().len() % 8, 0, "fragment {n}: 8-byte units");
        }
        if n == 0 {
            first_header = ip.header().to_vec();
        }
        let base = Ipv4Packet::new_unchecked(&parts[0].1[14..]).frag_offset();
        assert_eq!(ip.frag_offset(), base + data.len(), "fragment {n} offset");
        data.extend_from_slice(ip.payload());
    }
    (first_header, data)
}

#[test]
fn larger_than_the_mtu_with_df_clear_is_fragmented() {
    let mut rig = Rig::new();
    let big = Ip::udp("10.0.1.2", "10.9.1.1", 9, 3000);
    assert_eq!(rig.verdict_from_a(&big), Verdict::ForwardEmitted { out: 1 });
    let parts = rig.sent.take_parts();
    assert_eq!(parts.len(), 3, "3008 bytes of UDP in 1376-byte pieces");
    let (header, data) = reassemble(&parts, 1400);
    assert_eq!(data, big.payload);
    assert_eq!(header[8], 63, "TTL");
    let offsets: Vec<usize> = parts
        .iter()
        .map(|(_, f)| Ipv4Packet::new_unchecked(&f[14..]).frag_offset())
        .collect();
    assert_eq!(offsets, [0, 1376, 2752]);
    let eth = EthernetFrame::new_checked(&parts[2].1[..]).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r2(), gw()));
    let c = rig.fwd.counters();
    assert_eq!((c.forwarded, c.fragmented, c.ofragments), (1, 1, 3));
    assert!(rig.sent.take().is_empty(), "no ICMP");
}

#[test]
fn fragmenting_a_fragment_continues_its_offset_and_mf() {
    let mut rig = Rig::new();
    let middle = Ip {
        more_fragments: true,
        frag_offset: 800,
        ..Ip::udp("10.0.1.2", "10.9.1.1", 9, 2000)
    };
    rig.verdict_from_a(&middle);
    let parts = rig.sent.take_parts();
    let (_, data) = reassemble(&parts, 1400);
    assert_eq!(data, middle.payload);
    for (n, (_, f)) in parts.iter().enumerate() {
        let ip = Ipv4Packet::new_unchecked(&f[14..]);
        assert!(
            ip.more_fragments(),
            "fragment {n}: more of the datagram follows"
        );
        assert_eq!(ip.frag_offset(), 800 + n * 1376);
    }
}

#[test]
fn only_copied_options_go_into_later_fragments() {
    let mut rig = Rig::new();
    // Router alert (copied), record route with room (not copied), end of list.
    let options = vec![148, 4, 0, 0, 7, 7, 4, 0, 0, 0, 0, 0];
    let big = Ip {
        options,
        ..Ip::udp("10.0.1.2", "10.9.1.1", 9, 2000)
    };
    rig.verdict_from_a(&big);
    let parts = rig.sent.take_parts();
    let (first, data) = reassemble(&parts, 1400);
    assert_eq!(data, big.payload);
    assert_eq!(first[20..32], [148, 4, 0, 0, 7, 7, 8, 10, 0, 2, 1, 0]);
    let second = Ipv4Packet::new_checked(&parts[1].1[14..]).unwrap();
    assert_eq!(
        second.header()[20..32],
        [148, 4, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0]
    );
}

#[test]
fn fragments_ending_past_the_largest_datagram_are_dropped() {
    let mut rig = Rig::new();
    let late = Ip {
        frag_offset: 65528 - 8 * 8,
        ..Ip::udp("10.0.1.2", "10.9.1.1", 9, 1500)
    };
    assert_eq!(rig.drop_from_a(&late), PacketDrop::Fragment);
    assert_eq!(rig.fwd.counters().cantfrag, 1);
}

#[test]
fn link_padding_is_trimmed() {
    let mut rig = Rig::new();
    let small = Ip::udp("10.0.1.2", "10.9.1.1", 9, 4);
    let mut frame = small.frame(host_a(), r1());
    frame.extend_from_slice(&[0xEE; 4]); // a trailer after the padding
    assert_eq!(
        rig.process(0, &mut frame),
        Verdict::ForwardEmitted { out: 1 }
    );
    let parts = rig.sent.take_parts();
    assert_eq!(parts.len(), 1);
    assert_eq!(parts[0].1.len(), 14 + 32);
    assert_eq!(parts[0].1[..], frame[..14 + 32], "the rewritten frame, cut");
    assert_eq!(rig.fwd.counters().padding_trimmed, 1);
}

#[test]
fn ip_options_to_us_are_delivered() {
    let mut rig = Rig::new();
    let packet = Ip {
        options: vec![7, 3, 4, 0],
        ..Ip::udp("10.0.1.2", "10.0.1.1", 9, 4)
    };
    assert_eq!(rig.verdict_from_a(&packet), Verdict::Local);
}

#[test]
fn fragments_are_forwarded() {
    let mut rig = Rig::new();
    let first = Ip {
        more_fragments: true,
        ..udp_to_net9()
    };
    assert_eq!(rig.verdict_from_a(&first), Verdict::Forward { out: 1 });
    let later = Ip {
        frag_offset: 40,
        ..Ip::udp("10.0.1.2", "10.9.1.1", 9, 32)
    };
    assert_eq!(rig.verdict_from_a(&later), Verdict::Forward { out: 1 });
}

#[test]
fn fragments_that_defeat_port_filtering_are_dropped() {
    let mut rig = Rig::new();
    let tiny_first = Ip {
        more_fragments: true,
        ..Ip::with_payload("10.0.1.2", "10.9.1.1", 17, vec![0x9c, 0x40, 0, 22])
    };
    assert_eq!(rig.drop_from_a(&tiny_first), PacketDrop::Fragment);
    let tcp_at_8 = Ip {
        frag_offset: 8,
        ..Ip::with_payload("10.0.1.2", "10.9.1.1", 6, vec![0; 16])
    };
    assert_eq!(rig.drop_from_a(&tcp_at_8), PacketDrop::Fragment);
}

#[test]
fn vlan_tagged_frames_are_dropped() {
    let mut rig = Rig::new();
    let mut tagged = vec![0u8; 4];
    tagged[1] = 5; // VLAN 5, then the inner ethertype
    tagged[2..4].copy_from_slice(&ethertype::IPV4.to_be_bytes());
    tagged.extend_from_slice(&udp_to_net9().bytes());
    let mut frame = eth_frame(host_a(), r1(), ethertype::VLAN, &tagged);
    assert_eq!(rig.process(0, &mut frame), PacketDrop::Vlan.verdict());
}

#[test]
fn oversize_with_df_gets_frag_needed() {
    let mut rig = Rig::new();
    let big = Ip {
        dont_fragment: true,
        ..Ip::udp("10.0.1.2", "10.9.1.1", 9, 1401 - 28)
    };
    assert_eq!(rig.drop_from_a(&big), PacketDrop::Oversize);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1);
    let (_, _, icmp) = parse_icmp(&sent[0].1);
    assert_eq!(
        (icmp.msg_type(), icmp.code()),
        (icmp_type::DEST_UNREACHABLE, 4)
    );
    assert_eq!(icmp.rest_of_header(), 1400, "next-hop MTU (RFC 1191)");

    assert_eq!(rig.fwd.counters().cantfrag, 1);
    let fits = Ip::udp("10.0.1.2", "10.9.1.1", 9, 1400 - 28);
    assert_eq!(rig.verdict_from_a(&fits), Verdict::Forward { out: 1 });
}

#[test]
fn unknown_ethertype() {
    let mut rig = Rig::new();
    let mut frame = eth_frame(host_a(), r1(), 0x88CC, &[0; 46]);
    assert_eq!(
        rig.process(0, &mut frame),
        PacketDrop::UnknownEthertype.verdict()
    );
}

#[test]
fn martian_sources() {
    let mut rig = Rig::new();
    let sources = [
        "0.0.0.0",
        "127.0.0.1",
        "224.0.0.5",
        "240.0.0.1",
        "255.255.255.255",
        "10.0.2.1",
        "10.0.2.255",
    ];
    for src in sources {
        let packet = Ip::udp(src, "10.9.1.1", 9, 8);
        assert_eq!(
            rig.drop_from_a(&packet),
            PacketDrop::Martian,
            "source {src}"
        );
    }
    assert!(rig.sent.take().is_empty(), "no ICMP to martians");
}

#[test]
fn martian_destinations() {
    let mut rig = Rig::new();
    for dst in ["0.0.0.0", "127.0.0.1", "240.0.0.1"] {
        let packet = Ip::udp("10.0.1.2", dst, 9, 8);
        assert_eq!(
            rig.drop_from_a(&packet),
            PacketDrop::Martian,
            "destination {dst}"
        );
    }
}

#[test]
fn martian_link_addressing() {
    let mut rig = Rig::new();
    let packet = udp_to_net9();
    // Unicast IP in a link-layer broadcast (RFC 1812 5.3.4).
    let mut frame = packet.frame(host_a(), MacAddr::BROADCAST);
    assert_eq!(rig.process(0, &mut frame), PacketDrop::Martian.verdict());
    // A frame for another station, as seen in promiscuous capture.
    let mut frame = packet.frame(host_a(), mac(9, 1));
    assert_eq!(rig.process(0, &mut frame), PacketDrop::Martian.verdict());
    // A group source MAC.
    let mut frame = packet.frame(MacAddr([1, 0, 0x5e, 0, 0, 1]), r1());
    assert_eq!(rig.process(0, &mut frame), PacketDrop::Martian.verdict());
}

/// No route, whatever the TTL: Linux looks the route up before it checks the TTL.
#[test]
fn no_route_sends_net_unreachable() {
    for ttl in [64, 1] {
        let mut rig = Rig::new();
        let packet = Ip {
            ttl,
            ..Ip::udp("10.0.1.2", "192.168.7.7", 9, 8)
        };
        assert_eq!(rig.drop_from_a(&packet), PacketDrop::NoRoute, "TTL {ttl}");
        let sent = rig.sent.take();
        let (_, _, icmp) = parse_icmp(&sent[0].1);
        assert_eq!(
            (icmp.msg_type(), icmp.code()),
            (icmp_type::DEST_UNREACHABLE, 0),
            "TTL {ttl}"
        );
    }
}

/// The kinds that forward nothing answer by their kind whatever the TTL, as in Linux
/// (traceroute shows `!H`, `!X`, or nothing for a blackhole, at the router's own hop);
/// a route out of an interface polld does not poll is the kernel's to forward: the TTL
/// first.
#[test]
fn reject_routes_answer_by_their_kind_at_any_ttl() {
    use polld_packet::route::{NextHop, Reject, Route};
    let mut rig = Rig::new();
    let prefix = "10.9.0.0/16".parse().unwrap();
    for ttl in [64, 1] {
        for (reject, reason, code) in [
            (Reject::Blackhole, PacketDrop::Blackhole, None),
            (Reject::Unreachable, PacketDrop::Unreachable, Some(1)),
            (Reject::Prohibit, PacketDrop::Prohibited, Some(13)),
            (Reject::Unpolled, PacketDrop::UnpolledRoute, None),
        ] {
            let next_hop = NextHop::Reject(reject);
            rig.fwd
                .routes_mut()
                .insert(prefix, Route { out: 0, next_hop });
            let packet = Ip {
                ttl,
                ..udp_to_net9()
            };
            let (reason, icmp) = match (reject, ttl) {
                (Reject::Unpolled, 1) => (PacketDrop::TtlExceeded, Some((11, 0))),
                _ => (reason, code.map(|code| (3, code))),
            };
            let what = format!("{reject:?}, TTL {ttl}");
            assert_eq!(rig.drop_from_a(&packet), reason, "{what}");
            let sent = rig.sent.take();
            match icmp {
                Some(header) => {
                    assert_eq!(sent.len(), 1, "{what}: one ICMP message");
                    let (_, _, m) = parse_icmp(&sent[0].1);
                    assert_eq!((m.msg_type(), m.code()), header, "{what}");
                }
                None => assert!(sent.is_empty(), "{what}: no ICMP"),
            }
        }
    }
}

// ---- local delivery --------------------------------------------------------------------

#[test]
fn local_and_broadcast_destinations_are_delivered() {
    let mut rig = Rig::new();
    for dst in [
        "10.0.1.1",
        "10.0.2.1",
        "10.0.1.255",
        "255.255.255.255",
        "224.0.0.5",
    ] {
        let packet = Ip::udp("10.0.1.2", dst, 9, 8);
        let mut frame = packet.frame(
            host_a(),
            if dst == "10.0.1.1" {
                r1()
            } else {
                MacAddr::BROADCAST
            },
        );
        assert_eq!(rig.process(0, &mut frame), Verdict::Local, "{dst}");
    }
}

#[test]
fn echo_request_is_answered() {
    let mut rig = Rig::new();
    let ping = Ip::icmp(
        "10.0.1.2",
        "10.0.2.1",
        icmp_type::ECHO_REQUEST,
        0x0042_0007,
        b"abcdefgh",
    );
    assert_eq!(rig.verdict_from_a(&ping), Verdict::Consumed);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 0, "back out of the input port");
    let (eth, ip_hdr, icmp) = parse_icmp(&sent[0].1);
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r1(), host_a()));
    assert_eq!(
        (ip_hdr.src_addr(), ip_hdr.dst_addr()),
        (ip("10.0.2.1"), ip("10.0.1.2"))
    );
    assert_eq!(
        (icmp.msg_type(), icmp.rest_of_header()),
        (icmp_type::ECHO_REPLY, 0x0042_0007)
    );
    assert_eq!(icmp.data(), b"abcdefgh");
    assert_eq!(rig.fwd.counters().generated.icmp_echo_replies, 1);
}

#[test]
fn echo_request_with_bad_icmp_checksum_is_dropped() {
    let mut rig = Rig::new();
    let mut ping = Ip::icmp("10.0.1.2", "10.0.1.1", icmp_type::ECHO_REQUEST, 1, b"x");
    ping.payload[8] ^= 0xFF;
    assert_eq!(rig.drop_from_a(&ping), PacketDrop::BadChecksum);
}

#[test]
fn echo_answering_can_be_disabled() {
    let mut rig = Rig::with("[icmp]\nanswer_echo = false\n");
    let ping = Ip::icmp("10.0.1.2", "10.0.1.1", icmp_type::ECHO_REQUEST, 1, b"x");
    assert_eq!(rig.verdict_from_a(&ping), Verdict::Local);
    assert!(rig.sent.take().is_empty());
}

// ---- ICMP errors -----------------------------------------------------------------------

#[test]
fn icmp_error_quotes_header_and_8_bytes() {
    let mut rig = Rig::new();
    let packet = Ip {
        ttl: 1,
        ..udp_to_net9()
    };
    let original = packet.bytes();
    rig.verdict_from_a(&packet);
    let sent = rig.sent.take();
    assert_eq!(sent[0].0, 0);
    let (eth, ip_hdr, icmp) = parse_icmp(&sent[0].1);
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r1(), host_a()));
    assert_eq!(
        ip_hdr.src_addr(),
        ip("10.0.1.1"),
        "from the input interface's address"
    );
    assert_eq!(ip_hdr.dst_addr(), ip("10.0.1.2"));
    assert_eq!(ip_hdr.ttl(), 64);
    assert_eq!(icmp.rest_of_header(), 0);
    assert_eq!(
        icmp.data(),
        &original[..28],
        "the original header (TTL 1) plus 8 bytes"
    );
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut rig = Rig::with("[icmp]\nrate_per_sec = 1\nburst = 2\n");
    let expired = Ip {
        ttl: 1,
        ..udp_to_net9()
    };
    for _ in 0..5 {
        assert_eq!(rig.drop_from_a(&expired), PacketDrop::TtlExceeded);
    }
    assert_eq!(rig.sent.take().len(), 2, "the burst");
    assert_eq!(rig.fwd.counters().icmp_rate_limited, 3);
    rig.fwd.set_now(SEC / 2);
    rig.drop_from_a(&expired);
    assert!(rig.sent.take().is_empty());
    rig.fwd.set_now(SEC);
    rig.drop_from_a(&expired);
    assert_eq!(rig.sent.take().len(), 1, "one token per second");
}

#[test]
fn no_icmp_error_about_icmp_errors_or_later_fragments() {
    let mut rig = Rig::new();
    let error = Ip {
        ttl: 1,
        ..Ip::icmp(
            "10.0.1.2",
            "10.9.1.1",
            icmp_type::DEST_UNREACHABLE,
            0,
            &[0; 28],
        )
    };
    assert_eq!(rig.drop_from_a(&error), PacketDrop::TtlExceeded);
    let later_fragment = Ip {
        ttl: 1,
        frag_offset: 64,
        ..udp_to_net9()
    };
    assert_eq!(rig.drop_from_a(&later_fragment), PacketDrop::TtlExceeded);
    assert!(rig.sent.take().is_empty());
    // A query does get one.
    let ping = Ip {
        ttl: 1,
        ..Ip::icmp("10.0.1.2", "10.9.1.1", icmp_type::ECHO_REQUEST, 0, b"")
    };
    assert_eq!(rig.drop_from_a(&ping), PacketDrop::TtlExceeded);
    assert_eq!(rig.sent.take().len(), 1);
}

// ---- ARP -------------------------------------------------------------------------------

#[test]
fn arp_request_for_us_is_answered_and_learned() {
    let mut rig = Rig::new();
    let mut request = arp_frame(
        operation::REQUEST,
        MacAddr::BROADCAST,
        (host_a(), ip("10.0.1.2")),
        (MacAddr::ZERO, ip("10.0.1.1")),
    );
    assert_eq!(rig.process(0, &mut request), Verdict::Consumed);
    let sent = rig.sent.take();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, 0);
    let eth = EthernetFrame::new_checked(&sent[0].1[..]).unwrap();
    assert_eq!((eth.src_addr(), eth.dst_addr()), (r1(), host_a()));
    let reply = ArpPacket::new_checked(eth.payload()).unwrap();
    assert_eq!(reply.operation(), operation::REPLY);
    assert_eq!(
        (reply.sender_hw_addr(), reply.sender_ip()),
        (r1(), ip("10.0.1.1"))
    );
    assert_eq!(
        (reply.target_hw_addr(), reply.target_ip()),
        (host_a(), ip("10.0.1.2"))
    );
    // RFC 826: the requester is learned, so traffic to it needs no request of ours.
    assert_eq!(rig.fwd.arp_lookup(ip("10.0.1.2")), Some(host_a()));
    let mut to_a = Ip::udp("10.0.2.2", "10.0.1.2", 9, 32).frame(gw(), r2());
    assert_eq!(rig.process(1, &mut to_a), Verdict::Forward { out: 0 });
}

#[test]
fn arp_for_other_hosts_is_consumed_silently() {
    let mut rig = Rig::new();
    let mut request = arp_frame(
        operation::REQUEST,
        MacAddr::BROADCAST,
        (host_a(), ip("10.0.1.2")),
        (MacAddr::ZERO, ip("10.0.1.3")),
    );
    assert_eq!(rig.process(0, &mut request), Verdict::Consumed);
    assert!(rig.sent.take().is_empty());
    assert_eq!(
        rig.fwd.arp_lookup(ip("10.0.1.2")),
        None,
        "not for us: no new entry"
    );
    // Our address on the other interface: no proxy ARP.
    let mut request = arp_frame(
        operation::REQUEST,
        MacAddr::BROADCAST,
        (host_a(), ip("10.0.1.2")),
        (MacAddr::ZERO, ip("10.0.2.1")),
    );
    assert_eq!(rig.process(0, &mut request), Verdict::Consumed);
    assert!(rig.sent.take().is_empty());
}

#[test]
fn arp_entries_age_out() {
    let mut rig = Rig::with("[arp]\nmax_age_ms = 10000\n");
    let packet = Ip::udp("10.0.1.2", "10.0.2.77", 9, 32);
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::Unresolved);
    rig.arp_reply_from(1, ip("10.0.2.77"), mac(77, 2));
    rig.sent.take();
    rig.fwd.set_now(10 * SEC);
    assert_eq!(rig.verdict_from_a(&packet), Verdict::Forward { out: 1 });
    assert_eq!(
        rig.sent.take().len(),
        1,
        "an old entry is refreshed while still in use"
    );
    rig.fwd.set_now(10 * SEC + 1);
    assert_eq!(rig.drop_from_a(&packet), PacketDrop::Unresolved, "aged out");
}

#[test]
fn arp_cache_capacity_evicts_the_oldest() {
    let mut rig = Rig::with("[arp]\ncapacity = 2\n");
    for (t, host) in [(1, 11u8), (2, 12), (3, 13)] {
        rig.fwd.set_now(t * SEC);
        let addr = Ipv4Addr::new(10, 0, 1, host);
        let mut request = arp_frame(
            operation::REQUEST,
            MacAddr::BROADCAST,
            (mac(host, 1), addr),
            (MacAddr::ZERO, ip("10.0.1.1")),
        );
        assert_eq!(rig.process(0, &mut request), Verdict::Consumed);
    }
    assert_eq!(rig.fwd.arp_lookup(ip("10.0.1.11")), None, "evicted");
    assert_eq!(rig.fwd.arp_lookup(ip("10.0.1.12")), Some(mac(12, 1)));
    assert_eq!(rig.fwd.arp_lookup(ip("10.0.1.13")), Some(mac(13, 1)));
    let stats = rig.fwd.stats();
    assert_eq!(stats.table.evictions, 1);
    assert_eq!(
        stats.table.entries,
        2 + 1,
        "two learned plus the static entry"
    );
}

#[test]
fn static_arp_entries_never_age_nor_change() {
    let mut rig = Rig::with("[arp]\nmax_age_ms = 1000\n");
    rig.fwd.set_now(3600 * SEC);
    assert_eq!(
        rig.arp_reply_from(1, ip("10.0.2.2"), mac(66, 2)),
        Verdict::Consumed
    );
    let (verdict, frame) = rig.send_from_a(&udp_to_net9());
    assert_eq!(verdict, Verdict::Forward { out: 1 });
    assert_eq!(
        EthernetFrame::new_checked(&frame[..]).unwrap().dst_addr(),
        gw()
    );
    assert!(
        rig.sent.take().is_empty(),
        "no ARP request for a static entry"
    );
}

// ---- rules -----------------------------------------------------------------------------

#[test]
fn rules_filter_first_match_and_count() {
    let mut rig = Rig::with(
        r#"
        default_action = "allow"
        [[rules]]
        action = "allow"
        proto = "udp"
        dst_ports = "53"
        [[rules]]
        action = "deny"
        proto = "udp"
        dst = "10.9.0.0/16"
        [[rules]]
        action = "deny"
        proto = "icmp"
        dst = "10.0.1.1/32"
        "#,
    );
    assert_eq!(
        rig.verdict_from_a(&Ip::udp("10.0.1.2", "10.9.1.1", 53, 32)),
        Verdict::Forward { out: 1 }
    );
    assert_eq!(
        rig.drop_from_a(&Ip::udp("10.0.1.2", "10.9.1.1", 80, 32)),
        PacketDrop::Filtered
    );
    let ping = Ip::icmp("10.0.1.2", "10.0.1.1", icmp_type::ECHO_REQUEST, 1, b"");
    assert_eq!(
        rig.drop_from_a(&ping),
        PacketDrop::Filtered,
        "rules apply to local traffic"
    );
    assert_eq!(
        rig.verdict_from_a(&Ip::udp("10.0.1.2", "10.0.2.2", 80, 32)),
        Verdict::Forward { out: 1 }
    );
    let stats = rig.fwd.stats();
    assert_eq!(stats.rules.rules, vec![1, 1, 1]);
    assert_eq!(stats.rules.default, 1);
    assert!(rig.sent.take().is_empty(), "denied packets get no ICMP");
}

#[test]
fn default_deny() {
    let mut rig = Rig::with("default_action = \"deny\"\n");
    assert_eq!(rig.drop_from_a(&udp_to_net9()), PacketDrop::Filtered);
    let mut arp = arp_frame(
        operation::REQUEST,
        MacAddr::BROADCAST,
        (host_a(), ip("10.0.1.2")),
        (MacAddr::ZERO, ip("10.0.1.1")),
    );
    assert_eq!(
        rig.process(0, &mut arp),
        Verdict::Consumed,
        "ARP is not subject to rules"
    );
    rig.sent.take();
}

#[test]
fn stats_serialize_with_named_drops() {
    let mut rig = Rig::new();
    rig.drop_from_a(&Ip::udp("10.0.1.2", "192.168.7.7", 9, 8));
    let json = serde_json::to_value(rig.fwd.stats()).unwrap();
    assert_eq!(json["counters"]["drops"]["no_route"], 1);
    assert_eq!(json["counters"]["generated"]["icmp_errors"], 1);
    assert_eq!(json["counters"]["received"], 1);
}

// ---- fuzz ------------------------------------------------------------------------------

fn check_emitted(sent: &[(usize, Vec<u8>)]) -> Result<(), TestCaseError> {
    for (out, frame) in sent {
        prop_assert!(*out < 2);
        let eth = EthernetFrame::new_checked(&frame[..]).unwrap();
        prop_assert!(eth.src_addr() == r1() || eth.src_addr() == r2());
        if eth.ethertype() == ethertype::IPV4 {
            parse_icmp(frame);
        } else {
            prop_assert_eq!(eth.ethertype(), ethertype::ARP);
            ArpPacket::new_checked(eth.payload()).unwrap();
        }
    }
    Ok(())
}

proptest! {
    /// Arbitrary bytes never panic, and every frame gets exactly one verdict.
    #[test]
    fn random_bytes_never_panic(frames in proptest::collection::vec(
        (0usize..3, proptest::collection::vec(any::<u8>(), 0..120)), 1..30)
    ) {
        let mut rig = Rig::new();
        for (input, mut frame) in frames {
            rig.process(input, &mut frame);
        }
        check_emitted(&rig.sent.take())?;
    }

    /// Valid frames with random bytes overwritten exercise the deeper paths.
    #[test]
    fn mutated_frames_never_panic(
        mutations in proptest::collection::vec(
            (0usize..4, proptest::collection::vec((0usize..80, any::<u8>()), 0..4), 0u64..3), 1..40)
    ) {
        let mut rig = Rig::new();
        let ping = Ip::icmp("10.0.1.2", "10.0.1.1", icmp_type::ECHO_REQUEST, 1, &[7; 20]);
        let arp = arp_frame(operation::REQUEST, MacAddr::BROADCAST, (host_a(), ip("10.0.1.2")), (MacAddr::ZERO, ip("10.0.1.1")));
        let seeds = [
            udp_to_net9().frame(host_a(), r1()),
            Ip::udp("10.0.1.2", "10.0.2.9", 9, 30).frame(host_a(), r1()),
            ping.frame(host_a(), r1()),
            arp,
        ];
        for (seed, writes, seconds) in mutations {
            rig.fwd.set_now(seconds * SEC);
            let mut frame = seeds[seed].clone();
            for (at, byte) in writes {
                if let Some(b) = frame.get_mut(at) {
                    *b = byte;
                }
            }
            rig.process(0, &mut frame);
        }
        check_emitted(&rig.sent.take())?;
    }
}
