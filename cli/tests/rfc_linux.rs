//! polld's forwarder against Linux's on the same topology, frame for frame: the same
//! crafted frames (fragmentation with DF clear and set, a fragment fragmented again, IP
//! options, link-layer padding and trailers, malformed options and lengths) go through
//! the kernel's forwarding, then through `polld run`, and what reaches the far side and
//! the ICMP that comes back are compared. Linux is the reference where the RFCs leave a
//! choice; where polld differs on purpose, the case says so and checks polld's side.
//!
//! Topology (namespaces of this test's own): gen `a0` (MTU 9000) — fwd `r0` (MTU 9000)
//! | fwd `r1` (MTU 1500) — sink `b0` (MTU 1500). Frames go from gen to 10.0.2.100, an
//! address on sink's network that fwd resolves statically to `b0` and that sink does not
//! own, so sink answers nothing. Raw AF_PACKET sockets inject on `a0` and capture on
//! `a0` (ICMP from the router) and `b0`.

// The frame builders of the packet tests.
mod common;
#[path = "../../packet/tests/common/mod.rs"]
mod frames;

use std::os::fd::OwnedFd;
use std::time::Duration;

use common::{Dir, Line, Polld};
use frames::{naive_checksum_ok, Ip};
use polld_dev::afpacket::raw_socket;
use polld_dev::netns::{in_netns, Netns};
use polld_packet::options::kind;
use polld_packet::wire::icmp::icmp_type;
use polld_packet::wire::{EthernetFrame, IcmpPacket, Ipv4Packet, MacAddr};
use polld_testsupport::{ConfigFile, Interface};
use rustix::net::{recv, send, RecvFlags, SendFlags};

const A0_MAC: &str = "02:00:00:00:01:01";
const R0_MAC: &str = "02:00:00:00:01:02";
const R1_MAC: &str = "02:00:00:00:02:01";
const B0_MAC: &str = "02:00:00:00:02:02";
const DST: &str = "10.0.2.100";

fn topology() -> Line {
    // No IPv6 chatter (router solicitations, DAD) on the captures.
    let no_ipv6 = [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ];
    let t = Line::create("prf", &no_ipv6, [A0_MAC, R0_MAC, R1_MAC, B0_MAC]);
    t.gen.ip(&["link", "set", "a0", "mtu", "9000"]).unwrap();
    t.fwd.ip(&["link", "set", "r0", "mtu", "9000"]).unwrap();
    for (ns, dev, ip, mac) in [
        (&t.fwd, "r1", DST, B0_MAC),
        (&t.fwd, "r0", "10.0.1.2", A0_MAC),
    ] {
        ns.ip(&[
            "neigh",
            "replace",
            ip,
            "lladdr",
            mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ])
        .unwrap();
    }
    t
}

/// Raw sockets on `a0` (inject, and catch the router's ICMP) and `b0` (catch what
/// crossed), opened inside their namespaces and used from here.
struct Wires {
    gen: OwnedFd,
    sink: OwnedFd,
}

fn wires(t: &Line) -> Wires {
    let all = (libc::ETH_P_ALL as u16).to_be();
    let open = |ns: &Netns, dev: &'static str| {
        in_netns(ns.name(), move || raw_socket(dev, all))
            .unwrap()
            .unwrap()
    };
    Wires {
        gen: open(&t.gen, "a0"),
        sink: open(&t.sink, "b0"),
    }
}

/// The IPv4 packets (without padding) waiting on `fd` that `keep` accepts.
fn drain(fd: &OwnedFd, keep: &dyn Fn(&Ipv4Packet<&[u8]>) -> bool) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 65_536];
    let mut out = Vec::new();
    loop {
        let n = match recv(fd, &mut buf[..], RecvFlags::DONTWAIT) {
            Ok((n, _)) if n > 0 => n,
            _ => return out,
        };
        let frame = &buf[..n];
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            continue;
        };
        if eth.ethertype() != 0x0800 {
            continue;
        }
        if let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) {
            if keep(&ip) {
                out.push(ip.packet().to_vec());
            }
        }
    }
}

/// What one frame caused: the packets that reached sink, the ICMP the router sent back.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    crossed: Vec<Vec<u8>>,
    icmp: Vec<Vec<u8>>,
}

fn send_and_collect(w: &Wires, frame: &[u8]) -> Outcome {
    let from_gen = |ip: &Ipv4Packet<&[u8]>| ip.src_addr() == frames::ip("10.0.1.2");
    let from_router =
        |ip: &Ipv4Packet<&[u8]>| ip.src_addr() == frames::ip("10.0.1.1") && ip.protocol() == 1;
    drain(&w.sink, &from_gen);
    drain(&w.gen, &from_router);
    let sent = send(&w.gen, frame, SendFlags::empty())
        .unwrap_or_else(|e| panic!("inject: {}", std::io::Error::from(e)));
    assert_eq!(sent, frame.len(), "inject");
    std::thread::sleep(Duration::from_millis(150));
    Outcome {
        crossed: drain(&w.sink, &from_gen),
        icmp: drain(&w.gen, &from_router),
    }
}

fn mac(s: &str) -> MacAddr {
    s.parse().unwrap()
}

fn to_router(packet: &Ip) -> Vec<u8> {
    packet.frame(mac(A0_MAC), mac(R0_MAC))
}

fn udp(data_len: usize) -> Ip {
    Ip::udp("10.0.1.2", DST, 9, data_len)
}

/// The crafted frames, by name.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let with_options = |options: Vec<u8>, data_len: usize| Ip {
        options,
        ..udp(data_len)
    };
    let mut padded = to_router(&udp(4));
    padded.extend_from_slice(&[0xEE; 4]); // a trailer after the Ethernet padding
    let mut too_long = to_router(&udp(4));
    too_long[16..18].copy_from_slice(&200u16.to_be_bytes());
    Ipv4Packet::new_unchecked(&mut too_long[14..34]).fill_checksum();
    vec![
        ("plain", to_router(&udp(100))),
        ("padded with a trailer", padded),
        ("total length beyond the frame", too_long),
        ("jumbo, DF clear", to_router(&udp(4000))),
        (
            "jumbo, DF set",
            to_router(&Ip {
                dont_fragment: true,
                ..udp(4000)
            }),
        ),
        (
            "a fragment, fragmented again",
            to_router(&Ip {
                more_fragments: true,
                frag_offset: 1480,
                ..udp(3000)
            }),
        ),
        (
            "record route",
            to_router(&with_options(vec![7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0], 20)),
        ),
        (
            "record route, full",
            to_router(&with_options(vec![7, 7, 8, 10, 9, 9, 9, 0], 20)),
        ),
        (
            "router alert, NOP, security, unknown",
            to_router(&with_options(
                vec![148, 4, 0, 0, 1, 130, 3, 0, 25, 2, 0, 0],
                20,
            )),
        ),
        (
            "jumbo with router alert and record route",
            to_router(&with_options(
                vec![148, 4, 0, 0, 7, 7, 4, 0, 0, 0, 0, 0],
                3000,
            )),
        ),
        (
            "timestamp only",
            to_router(&with_options(
                vec![68, 12, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                20,
            )),
        ),
        (
            "timestamp with address",
            to_router(&with_options(
                vec![68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0],
                20,
            )),
        ),
        (
            "timestamp prespecified",
            to_router(&with_options(
                vec![
                    68, 20, 5, 3, 10, 0, 1, 1, 0, 0, 0, 0, 10, 9, 9, 9, 0, 0, 0, 0,
                ],
                20,
            )),
        ),
        (
            "timestamp full",
            to_router(&with_options(vec![68, 8, 13, 0x10, 0, 0, 0, 0], 20)),
        ),
        (
            "malformed option length",
            to_router(&with_options(vec![7, 1, 0, 0], 20)),
        ),
        (
            "timestamp overflow count at 15",
            to_router(&with_options(vec![68, 4, 5, 0xF0], 20)),
        ),
        (
            "loose source route",
            to_router(&with_options(
                vec![kind::LOOSE_SOURCE_ROUTE, 7, 4, 10, 0, 2, 100, 0],
                20,
            )),
        ),
    ]
}

fn run_all(w: &Wires) -> Vec<Outcome> {
    cases()
        .iter()
        .map(|(_, frame)| send_and_collect(w, frame))
        .collect()
}

/// Where the time values of a timestamp option are in `header`: they differ between
/// two runs.
fn timestamp_fields(header: &[u8]) -> Vec<usize> {
    let mut at = 20;
    let mut fields = Vec::new();
    while at + 1 < header.len() {
        match header[at] {
            kind::END_OF_LIST => break,
            kind::NOP => at += 1,
            k => {
                let len = usize::from(header[at + 1]).max(2);
                if k == kind::TIMESTAMP && len >= 4 {
                    let step = if header[at + 3] & 0x0F == 0 { 4 } else { 8 };
                    let mut entry = at + 4;
                    while entry + step <= (at + len).min(header.len()) {
                        fields.push(entry + step - 4);
                        entry += step;
                    }
                }
                at += len;
            }
        }
    }
    fields
}

/// `packet` with its timestamp values and header checksum zeroed (after checking that
/// the checksum verifies), and the time values found (ms since midnight UT).
fn without_times(packet: &[u8]) -> (Vec<u8>, Vec<u32>) {
    let ip = Ipv4Packet::new_checked(packet).unwrap();
    assert!(naive_checksum_ok(ip.header()), "header checksum");
    let mut p = packet.to_vec();
    let mut times = Vec::new();
    for at in timestamp_fields(ip.header()) {
        times.push(u32::from_be_bytes(p[at..at + 4].try_into().unwrap()));
        p[at..at + 4].fill(0);
    }
    p[10..12].fill(0);
    (p, times)
}

/// polld's counters after the run: every frame from gen accounted for on r0 under the
/// verdict the cases call for, one transmit per frame that crossed on r1.
fn check_counters(interfaces: &[serde_json::Value], ours: &[Outcome]) {
    let get = |dev: &str, name: &str| {
        let iface = interfaces.iter().find(|i| i["name"] == dev).unwrap();
        let counters = iface["counters"].as_array().unwrap();
        let counter = counters.iter().find(|c| c[0] == name);
        counter.map_or(0, |c| c[1].as_u64().unwrap())
    };
    let rx = get("r0", "rx_packets");
    assert_eq!(
        rx,
        cases().len() as u64,
        "r0 received the crafted frames: {interfaces:?}"
    );
    let crossed = ours.iter().filter(|o| !o.crossed.is_empty()).count() as u64;
    assert_eq!(
        get("r0", "forwarded"),
        crossed,
        "one forwarded per datagram"
    );
    let drops = [("ip_options", 3), ("oversize", 1), ("bad_length", 1)];
    for (reason, n) in drops {
        assert_eq!(get("r0", &format!("drops.{reason}")), n, "drops.{reason}");
    }
    assert_eq!(rx, crossed + 5, "conservation on r0: {interfaces:?}");
    let frames: usize = ours.iter().map(|o| o.crossed.len()).sum();
    assert_eq!(get("r1", "tx_packets"), frames as u64, "each fragment sent");
}

#[test]
fn polld_forwards_crafted_frames_as_linux_does() {
    polld_testsupport::require_root!("needs root to create network namespaces");
    let t = topology();
    let w = wires(&t);

    t.fwd.sysctl("net.ipv4.ip_forward=1").unwrap();
    let linux = run_all(&w);

    // polld in fwd on AF_PACKET, with the interfaces' MTUs taken from the kernel. The
    // kernel there still sees every frame: without forwarding and without addresses it
    // neither forwards them nor answers them.
    t.fwd.sysctl("net.ipv4.ip_forward=0").unwrap();
    for dev in ["r0", "r1"] {
        t.fwd.ip(&["addr", "flush", "dev", dev]).unwrap();
    }
    let dir = Dir::new("rfc-linux");
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    let text = ConfigFile::new()
        .socket(&socket)
        .interface(Interface::new("r0").mac(R0_MAC).address("10.0.1.1/24"))
        .interface(Interface::new("r1").mac(R1_MAC).address("10.0.2.1/24"))
        .static_arp(DST, B0_MAC)
        .static_arp("10.0.1.2", A0_MAC)
        .to_toml();
    std::fs::write(&config, text).unwrap();
    let polld = Polld::start_in(t.fwd.name(), &config, &socket, &[]);
    let ours = run_all(&w);
    let names = [
        "fragmented",
        "ofragments",
        "cantfrag",
        "padding_trimmed",
        "options_datagrams",
        "options_malformed",
        "options_source_route",
    ]
    .map(|n| format!("net.inet.ip.{n}"));
    let values: Vec<u64> = polld
        .ok(&[&["ctl", "-n"][..], &names.each_ref().map(String::as_str)].concat())
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    // 3 datagrams in 9 fragments; DF set; the trailer; 11 with options, of which 2
    // malformed and 1 source-routed.
    assert_eq!(values, [3, 9, 1, 1, 11, 2, 1], "{names:?}");
    let interfaces: Vec<serde_json::Value> = serde_json::from_str(&polld.stop()).unwrap();
    check_counters(&interfaces, &ours);

    let mut report = String::new();
    for (((name, _), linux), ours) in cases().iter().zip(&linux).zip(&ours) {
        let line = format!(
            "{name}: linux {} crossed + {} ICMP, polld {} crossed + {} ICMP\n",
            linux.crossed.len(),
            linux.icmp.len(),
            ours.crossed.len(),
            ours.icmp.len()
        );
        report.push_str(&line);
        assert_eq!(
            linux.crossed.len(),
            ours.crossed.len(),
            "{name}: packets that crossed\n{report}"
        );
        for (l, o) in linux.crossed.iter().zip(&ours.crossed) {
            let ((l, l_times), (o, o_times)) = (without_times(l), without_times(o));
            assert_eq!(l, o, "{name}: the packet as it crossed\n{report}");
            for (lt, ot) in l_times.iter().zip(&o_times) {
                // Both are milliseconds since midnight UT: a few seconds apart at most.
                let apart = (i64::from(*lt) - i64::from(*ot)).abs();
                assert!(
                    !(60_000..=86_340_000).contains(&apart),
                    "{name}: {lt} vs {ot} ms"
                );
            }
        }
        assert_eq!(
            linux.icmp.len(),
            ours.icmp.len(),
            "{name}: ICMP errors\n{report}"
        );
        for (l, o) in linux.icmp.iter().zip(&ours.icmp) {
            let (l, o) = (
                Ipv4Packet::new_checked(&l[..]).unwrap(),
                Ipv4Packet::new_checked(&o[..]).unwrap(),
            );
            let (l, o) = (
                IcmpPacket::new_checked(l.payload()).unwrap(),
                IcmpPacket::new_checked(o.payload()).unwrap(),
            );
            assert!(naive_checksum_ok(o.as_bytes()), "{name}: ICMP checksum");
            assert_eq!(
                (l.msg_type(), l.code(), l.rest_of_header()),
                (o.msg_type(), o.code(), o.rest_of_header()),
                "{name}: ICMP type, code, MTU or pointer\n{report}"
            );
            // Linux quotes as much of the datagram as fits in 576 bytes; polld quotes
            // the header and 8 bytes of payload, the minimum RFC 792 and 1812 ask.
            let quoted = o.data().len();
            assert!(l.data().len() >= quoted, "{name}: quotes");
            assert_eq!(
                l.data()[..quoted],
                o.data()[..],
                "{name}: the quoted datagram"
            );
            assert!(
                [icmp_type::PARAMETER_PROBLEM, icmp_type::DEST_UNREACHABLE].contains(&o.msg_type()),
                "{name}: {}",
                o.msg_type()
            );
        }
    }
    eprintln!("{report}");
}
