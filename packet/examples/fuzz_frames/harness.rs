//! The frame-path fuzzer: mutates a seed corpus of IPv4 and IPv6 frames with a seeded
//! generator and feeds them to a three-port forwarder (a jumbo-MTU port, a 1500 one and a
//! 576 one, IPv4 only), checking after every frame that:
//! - nothing panics;
//! - every frame it emits parses (Ethernet, then ARP, IPv4 with a valid header checksum
//!   and ICMP with a valid checksum, or IPv6 with ICMPv6 whose checksum over the
//!   pseudo-header verifies, within the IPv6 minimum MTU);
//! - a forwarded IPv4 datagram leaves within the output MTU, without padding, with a
//!   valid header checksum; its fragments tile the input's payload exactly (8-byte
//!   offsets, MF on all but the last, which keeps the input's);
//! - a forwarded IPv6 packet leaves whole, unfragmented, within the output MTU, without
//!   padding, its hop limit one less and nothing else changed;
//! - the counters add up: one verdict per frame, every emitted frame counted.

use crate::common::{
    arp_frame, eth_frame, ip, mac, naive_checksum_ok, naive_icmpv6_checksum_ok, Ip, Ip6,
};
use polld_core::{Emit, PacketStage, Verdict};
use polld_packet::wire::arp::operation;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::icmp::icmp_type;
use polld_packet::wire::icmpv6::icmpv6_type;
use polld_packet::wire::ipv6::next_header;
use polld_packet::wire::{ArpPacket, EthernetFrame, IcmpPacket, Ipv4Packet, Ipv6Packet, MacAddr};
use polld_packet::{Forwarder, PacketConfig};
use polld_sim::nic::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};

const CONFIG: &str = r#"
[[interfaces]]
name = "jumbo0"
mac = "02:00:00:00:01:01"
addresses = ["10.0.1.1/24", "2001:db8:1::1/64"]
mtu = 9000

[[interfaces]]
name = "eth1"
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]
mtu = 1500

[[interfaces]]
name = "slow2"
mac = "02:00:00:00:03:01"
addresses = ["10.0.3.1/24"]
mtu = 576

[[routes]]
prefix = "10.9.0.0/16"
gateway = "10.0.2.2"

[[routes]]
prefix = "10.8.0.0/16"
gateway = "10.0.3.2"

[[routes]]
prefix = "2001:db8:9::/48"
gateway = "2001:db8:2::2"

[[static_arp]]
ip = "2001:db8:2::2"
mac = "02:00:00:00:02:02"

[[static_arp]]
ip = "10.0.2.2"
mac = "02:00:00:00:02:02"

[[static_arp]]
ip = "10.0.3.2"
mac = "02:00:00:00:03:02"

[icmp]
rate_per_sec = 1000000
burst = 1000

[[rules]]
action = "deny"
proto = "tcp"
dst_ports = 23
"#;

const MTU: [usize; 3] = [9000, 1500, 576];

/// What one run did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    pub inputs: u64,
    pub forwarded: u64,
    /// Of `forwarded`, the IPv6 packets.
    pub forwarded6: u64,
    pub fragments: u64,
    pub generated: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} inputs, {} forwarded ({} IPv6), {} extra fragments, {} generated",
            self.inputs, self.forwarded, self.forwarded6, self.fragments, self.generated
        )
    }
}

/// An input that broke an invariant: enough to replay it.
#[derive(Clone, Debug)]
pub struct Finding {
    pub seed: u64,
    pub iteration: u64,
    pub input: usize,
    pub frame: Vec<u8>,
    pub problem: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex: String = self.frame.iter().map(|b| format!("{b:02x}")).collect();
        write!(
            f,
            "seed {} iteration {}: {} (input port {}, frame {hex})",
            self.seed, self.iteration, self.problem, self.input
        )
    }
}

/// Frames in hand of one `process` call.
#[derive(Default)]
struct Caught {
    generated: Vec<(usize, Vec<u8>)>,
    parts: Vec<(usize, Vec<u8>)>,
    generated_total: u64,
}

impl Emit for Caught {
    fn emit(&mut self, out: usize, frame: &[u8]) {
        self.generated.push((out, frame.to_vec()));
        self.generated_total += 1;
    }
    fn forward_part(&mut self, out: usize, frame: &[u8]) {
        self.parts.push((out, frame.to_vec()));
    }
}

fn port_mac(port: u8) -> MacAddr {
    mac(1, port + 1)
}

/// Valid frames reaching every path: forwarding, fragmentation (DF clear and set, of
/// fragments too), options of every kind, padding, ICMP, ARP, broadcast, rules.
pub fn corpus() -> Vec<Vec<u8>> {
    let host = mac(2, 1);
    let to = |p: &Ip| p.frame(host, port_mac(0));
    let udp = |dst: &str, len: usize| Ip::udp("10.0.1.2", dst, 9, len);
    let with_options = |options: Vec<u8>, dst: &str, len: usize| Ip {
        options,
        ..udp(dst, len)
    };
    let mut seeds = vec![
        to(&udp("10.9.1.1", 32)),
        to(&udp("10.9.1.1", 2)),
        to(&udp("10.9.1.1", 8000)),
        to(&Ip {
            dont_fragment: true,
            ..udp("10.9.1.1", 3000)
        }),
        to(&Ip {
            more_fragments: true,
            frag_offset: 1480,
            ..udp("10.8.1.1", 1400)
        }),
        to(&Ip {
            frag_offset: 64000,
            ..udp("10.9.1.1", 2000)
        }),
        to(&with_options(
            vec![7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            "10.9.1.1",
            32,
        )),
        to(&with_options(
            vec![68, 12, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0],
            "10.8.1.1",
            900,
        )),
        to(&with_options(
            vec![68, 12, 5, 3, 10, 0, 1, 1, 0, 0, 0, 0],
            "10.9.1.1",
            40,
        )),
        to(&with_options(
            vec![68, 8, 13, 0xE0, 0, 0, 0, 0],
            "10.9.1.1",
            40,
        )),
        to(&with_options(
            vec![148, 4, 0, 0, 1, 130, 3, 0, 7, 7, 4, 0, 0, 0, 0, 0],
            "10.8.1.1",
            1200,
        )),
        to(&with_options(
            vec![131, 7, 4, 10, 9, 1, 1, 0],
            "10.9.1.1",
            8,
        )),
        to(&with_options(vec![7, 1, 0, 0], "10.9.1.1", 8)),
        to(&Ip {
            ttl: 1,
            ..udp("10.9.1.1", 32)
        }),
        to(&udp("10.7.7.7", 32)),
        to(&udp("10.0.2.99", 32)),
        to(&udp("255.255.255.255", 8)),
        to(&Ip::with_payload("10.0.1.2", "10.9.1.1", 6, {
            let mut tcp = vec![0u8; 20];
            tcp[2..4].copy_from_slice(&23u16.to_be_bytes());
            tcp
        })),
        to(&Ip::icmp(
            "10.0.1.2",
            "10.0.1.1",
            icmp_type::ECHO_REQUEST,
            7,
            &[1; 56],
        )),
        to(&Ip::icmp(
            "10.0.1.2",
            "10.9.1.1",
            icmp_type::DEST_UNREACHABLE,
            0,
            &[0x45; 28],
        )),
        arp_frame(
            operation::REQUEST,
            MacAddr::BROADCAST,
            (host, ip("10.0.1.2")),
            (MacAddr::ZERO, ip("10.0.1.1")),
        ),
        arp_frame(
            operation::REPLY,
            port_mac(1),
            (mac(9, 2), ip("10.0.2.99")),
            (port_mac(1), ip("10.0.2.1")),
        ),
    ];
    seeds.push(eth_frame(host, port_mac(0), ethertype::VLAN, &[0; 50]));
    seeds.extend(corpus6().iter().map(|p| p.frame(host, port_mac(0))));
    seeds
}

/// IPv6 packets from host A on port 0 reaching every IPv6 path: forwarding, extension
/// headers, fragments, too big, hop limit, echo, neighbour discovery, address rules.
fn corpus6() -> Vec<Ip6> {
    const A: &str = "2001:db8:1::2";
    let udp = |dst: &str, len: usize| Ip6::udp(A, dst, 9, len);
    let opts = [1, 4, 0, 0, 0, 0];
    let mut na_body = "2001:db8:1::7"
        .parse::<std::net::Ipv6Addr>()
        .unwrap()
        .octets()
        .to_vec();
    na_body.extend_from_slice(&[2, 1, 2, 0, 0, 0, 1, 7]);
    let mut na = Ip6::icmp(
        "2001:db8:1::7",
        "2001:db8:1::1",
        icmpv6_type::NEIGHBOR_ADVERT,
        0,
        &na_body,
    );
    na.hop_limit = 255;
    vec![
        udp("2001:db8:9::1", 32),
        udp("2001:db8:9::1", 2000),
        udp("2001:db8:2::2", 8),
        udp("2001:db8:2::99", 8),
        udp("2001:db8:1::7", 8),
        udp("2001:db8:7::1", 8),
        udp("2001:db8:9::1", 32).with_ext(next_header::DEST_OPTIONS, &opts),
        udp("2001:db8:9::1", 32)
            .with_ext(next_header::FRAGMENT, &[0, 1, 0, 0, 0, 5])
            .with_ext(next_header::ROUTING, &[0, 0, 0, 0, 0, 0]),
        udp("2001:db8:9::1", 32).with_ext(next_header::HOP_BY_HOP, &[5, 2, 0, 0, 1, 0]),
        udp("2001:db8:9::1", 32).with_ext(next_header::AUTH, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        Ip6 {
            hop_limit: 1,
            ..udp("2001:db8:9::1", 32)
        },
        Ip6::icmp(A, "2001:db8:1::1", icmpv6_type::ECHO_REQUEST, 1, &[7; 56]),
        Ip6::icmp(
            A,
            "2001:db8:9::1",
            icmpv6_type::PACKET_TOO_BIG,
            1280,
            &[0x60; 48],
        ),
        Ip6::icmp(
            "fe80::2",
            "fe80::ff:fe00:101",
            icmpv6_type::ECHO_REQUEST,
            1,
            &[7; 8],
        ),
        Ip6::udp("fe80::2", "2001:db8:9::1", 9, 8),
        Ip6::udp("::", "ff02::1:ff00:2", 9, 8),
        na,
    ]
}

/// Option-like byte strings the mutator writes into headers.
const OPTION_BYTES: [&[u8]; 8] = [
    &[0],
    &[1],
    &[7, 3, 4],
    &[7, 7, 4, 0, 0, 0, 0],
    &[68, 4, 5, 0xF0],
    &[68, 8, 5, 3],
    &[148, 4, 0, 0],
    &[137, 3, 4],
];

fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// One to four mutations of a copy of a seed, then, half the time, a header checksum
/// that verifies so that the deeper checks see the damage.
fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut frame = seeds[below(rng, seeds.len())].clone();
    for _ in 0..1 + below(rng, 4) {
        // Mostly the headers: Ethernet, IPv4 and its options, the transport header.
        let hot = 14 + below(rng, 60);
        let at = if below(rng, 4) == 0 {
            below(rng, frame.len())
        } else {
            hot
        };
        match below(rng, 10) {
            0 | 1 => {
                if let Some(b) = frame.get_mut(at) {
                    *b = rng.next_u64() as u8;
                }
            }
            2 => {
                if let Some(b) = frame.get_mut(at) {
                    *b ^= 1 << below(rng, 8);
                }
            }
            3 => frame.truncate(below(rng, frame.len() + 1)),
            4 => frame.extend((0..1 + below(rng, 40)).map(|_| rng.next_u64() as u8)),
            5 => {
                // IHL and total length, the fields every later offset hangs on.
                if frame.len() > 18 {
                    frame[14] = 0x40 | (rng.next_u64() as u8 & 0x0F);
                    let len = below(rng, frame.len() + 64) as u16;
                    frame[16..18].copy_from_slice(&len.to_be_bytes());
                }
            }
            6 => {
                let option = OPTION_BYTES[below(rng, OPTION_BYTES.len())];
                let at = 34 + below(rng, 20);
                for (i, &b) in option.iter().enumerate() {
                    if let Some(slot) = frame.get_mut(at + i) {
                        *slot = b;
                    }
                }
            }
            8 if is_ipv6(&frame) && frame.len() >= 54 => {
                // Payload length, next header, hop limit, or an extension header's
                // next-header and length bytes.
                let len = below(rng, frame.len() + 16) as u16;
                match below(rng, 4) {
                    0 => frame[18..20].copy_from_slice(&len.to_be_bytes()),
                    1 => frame[20] = NEXT_HEADERS[below(rng, NEXT_HEADERS.len())],
                    2 => frame[21] = below(rng, 3) as u8,
                    _ => {
                        if let Some(b) = frame.get_mut(54 + below(rng, 2)) {
                            *b = if below(rng, 2) == 0 {
                                NEXT_HEADERS[below(rng, NEXT_HEADERS.len())]
                            } else {
                                rng.next_u64() as u8
                            };
                        }
                    }
                }
            }
            7 => {
                // Flags and fragment offset.
                if frame.len() > 22 {
                    frame[20] = rng.next_u64() as u8;
                    frame[21] = rng.next_u64() as u8;
                }
            }
            _ => {
                let other = &seeds[below(rng, seeds.len())];
                let cut = below(rng, frame.len().min(other.len()));
                frame.truncate(cut);
                frame.extend_from_slice(&other[cut..]);
            }
        }
    }
    if below(rng, 2) == 0 {
        fix_checksums(&mut frame);
    }
    frame
}

/// Makes the checksum that guards the first checks verify (IPv4's header checksum, or
/// the checksum of an ICMPv6 message right after the IPv6 header), so that a mutated
/// frame reaches the checks past it.
pub fn fix_checksums(frame: &mut [u8]) {
    if is_ipv6(frame) {
        fix_icmpv6_checksum(frame);
    } else {
        fix_header_checksum(frame);
    }
}

/// Next-header values the mutator writes: every extension header and a few upper layers.
const NEXT_HEADERS: [u8; 9] = [
    next_header::HOP_BY_HOP,
    next_header::ROUTING,
    next_header::FRAGMENT,
    next_header::DEST_OPTIONS,
    next_header::AUTH,
    next_header::ESP,
    next_header::NO_NEXT_HEADER,
    next_header::ICMPV6,
    next_header::UDP,
];

fn is_ipv6(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == ethertype::IPV6.to_be_bytes()
}

/// Recomputes the checksum of an ICMPv6 message right after the fixed header, so that
/// the checks past it see the damage.
fn fix_icmpv6_checksum(frame: &mut [u8]) {
    let Ok(ip) = Ipv6Packet::new_checked(&frame[14..]) else {
        return;
    };
    if ip.next_header() != next_header::ICMPV6 || ip.payload().len() < 8 {
        return;
    }
    let (src, dst, len) = (ip.src_addr(), ip.dst_addr(), ip.payload().len());
    let mut message = IcmpPacket::new_unchecked(&mut frame[54..54 + len]);
    message.fill_checksum_over(polld_packet::wire::icmpv6::pseudo_header_sum(
        src, dst, len as u32,
    ));
}

fn fix_header_checksum(frame: &mut [u8]) {
    if frame.len() < 34 {
        return;
    }
    let header_len = usize::from(frame[14] & 0x0F) * 4;
    if header_len >= 20 && 14 + header_len <= frame.len() {
        let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..14 + header_len]);
        ip.fill_checksum();
    }
}

/// Checks one IPv4 frame polld sent: header, checksum, no padding past the total
/// length unless it is a generated frame padded to the Ethernet minimum.
fn check_ipv4(frame: &[u8], padded_ok: bool) -> Result<Ipv4Packet<&[u8]>, String> {
    let ip = Ipv4Packet::new_checked(&frame[14..]).map_err(|e| format!("emitted IPv4: {e}"))?;
    if !naive_checksum_ok(ip.header()) {
        return Err("emitted IPv4 header checksum does not verify".into());
    }
    let exact = frame.len() == 14 + usize::from(ip.total_len());
    if !(exact || padded_ok && frame.len() == 60) {
        return Err(format!(
            "emitted frame of {} bytes for IP total length {}",
            frame.len(),
            ip.total_len()
        ));
    }
    Ok(ip)
}

fn check_generated(out: usize, frame: &[u8]) -> Result<(), String> {
    if out >= MTU.len() {
        return Err(format!("generated frame on port {out}"));
    }
    let eth = EthernetFrame::new_checked(frame).map_err(|e| format!("generated: {e}"))?;
    if !(0..3).any(|p| eth.src_addr() == port_mac(p)) {
        return Err(format!("generated frame from {}", eth.src_addr()));
    }
    match eth.ethertype() {
        ethertype::ARP => ArpPacket::new_checked(eth.payload())
            .map(|_| ())
            .map_err(|e| format!("generated ARP: {e}")),
        ethertype::IPV6 => {
            let ip =
                Ipv6Packet::new_checked(eth.payload()).map_err(|e| format!("emitted IPv6: {e}"))?;
            let exact = frame.len() == 14 + ip.packet().len();
            if !(exact || frame.len() == 60) {
                return Err(format!("generated IPv6 frame of {} bytes", frame.len()));
            }
            if ip.next_header() != next_header::ICMPV6
                || !naive_icmpv6_checksum_ok(ip.src_addr(), ip.dst_addr(), ip.payload())
            {
                return Err("generated ICMPv6 without a valid checksum".into());
            }
            let icmp = IcmpPacket::new_checked(ip.payload()).map_err(|e| format!("ICMPv6: {e}"))?;
            if icmpv6_type::is_error(icmp.msg_type()) && ip.packet().len() > 1280 {
                return Err(format!("ICMPv6 error of {} bytes", ip.packet().len()));
            }
            Ok(())
        }
        ethertype::IPV4 => {
            let ip = check_ipv4(frame, true)?;
            let icmp = IcmpPacket::new_checked(ip.payload()).map_err(|e| format!("ICMP: {e}"))?;
            if !naive_checksum_ok(icmp.as_bytes()) {
                return Err("generated ICMP checksum does not verify".into());
            }
            if icmp_type::is_error(icmp.msg_type()) && icmp.data().len() > 60 + 8 {
                return Err(format!("ICMP error quoting {} bytes", icmp.data().len()));
            }
            Ok(())
        }
        other => Err(format!("generated ethertype {other:#06x}")),
    }
}

/// Checks the one frame a forwarded IPv6 packet left as against the input packet.
fn check_forwarded6(input: &[u8], out: usize, parts: &[&[u8]]) -> Result<(), String> {
    let original = Ipv6Packet::new_checked(&input[14..]).map_err(|e| format!("input: {e}"))?;
    let [part] = parts else {
        return Err(format!("IPv6 forwarded as {} frames", parts.len()));
    };
    let ip = Ipv6Packet::new_checked(&part[14..]).map_err(|e| format!("forwarded IPv6: {e}"))?;
    if part.len() != 14 + ip.packet().len() || ip.packet().len() > MTU[out] {
        return Err(format!("forwarded IPv6 frame of {} bytes", part.len()));
    }
    let mut expect = original.packet().to_vec();
    expect[7] = original.hop_limit().wrapping_sub(1);
    if original.hop_limit() <= 1 || ip.packet() != &expect[..] {
        return Err("forwarded IPv6 packet changed beyond its hop limit".into());
    }
    Ok(())
}

/// Checks the frames a forwarded datagram left as against the input datagram.
fn check_forwarded(input: &[u8], out: usize, parts: &[&[u8]]) -> Result<(), String> {
    if is_ipv6(input) {
        return check_forwarded6(input, out, parts);
    }
    let original = Ipv4Packet::new_checked(&input[14..]).map_err(|e| format!("input: {e}"))?;
    let mut data = Vec::new();
    for (n, part) in parts.iter().enumerate() {
        let ip = check_ipv4(part, false)?;
        if usize::from(ip.total_len()) > MTU[out] {
            return Err(format!(
                "{} bytes out of a {}-byte MTU",
                ip.total_len(),
                MTU[out]
            ));
        }
        if ip.ident() != original.ident() || ip.ttl() + 1 != original.ttl() {
            return Err("fragment ident or TTL".into());
        }
        if ip.frag_offset() != original.frag_offset() + data.len() {
            return Err(format!("fragment {n} at offset {}", ip.frag_offset()));
        }
        let last = n + 1 == parts.len();
        let expect_mf = !last || original.more_fragments();
        if ip.more_fragments() != expect_mf || (!last && ip.payload().len() % 8 != 0) {
            return Err(format!("fragment {n}: MF or 8-byte units"));
        }
        data.extend_from_slice(ip.payload());
    }
    if data != original.payload() {
        return Err("the fragments do not carry the input's payload".into());
    }
    Ok(())
}

/// The three-port forwarder under test and what it has done so far: checks one frame at
/// a time, so that the seeded loop ([`run`]) and a coverage-guided fuzzer (fuzz/, the
/// `frames` target) feed it the same way.
pub struct Checker {
    fwd: Forwarder,
    caught: Caught,
    now: u64,
    pub summary: Summary,
}

impl Default for Checker {
    fn default() -> Self {
        let config: PacketConfig = toml::from_str(CONFIG).expect("the fuzz config parses");
        Checker {
            fwd: Forwarder::new(&config, &["jumbo0", "eth1", "slow2"]).expect("valid"),
            caught: Caught::default(),
            now: 0,
            summary: Summary::default(),
        }
    }
}

impl Checker {
    /// Feeds `frame` on port `input` (0 to 3; 3 is no port of the forwarder's), `elapsed`
    /// ns after the previous frame, and checks every invariant of the module's doc: the
    /// problem found, if any (a panic included).
    pub fn check(&mut self, input: usize, frame: &[u8], elapsed: u64) -> Result<(), String> {
        self.now += elapsed;
        self.fwd.set_now(self.now);
        self.caught.generated.clear();
        self.caught.parts.clear();
        let mut buf = frame.to_vec();
        let (fwd, caught) = (&mut self.fwd, &mut self.caught);
        let verdict = catch_unwind(AssertUnwindSafe(|| fwd.process(input, &mut buf, caught)))
            .map_err(|panic| {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                format!("panic: {text}")
            })?;
        let summary = &mut self.summary;
        summary.inputs += 1;
        let parts: Vec<&[u8]> = self.caught.parts.iter().map(|(_, f)| &f[..]).collect();
        match verdict {
            Verdict::Forward { out } if parts.is_empty() => {
                check_forwarded(frame, out, &[&buf[..]])
            }
            Verdict::ForwardEmitted { out }
                if !parts.is_empty() && self.caught.parts.iter().all(|(o, _)| *o == out) =>
            {
                check_forwarded(frame, out, &parts)
            }
            Verdict::Forward { .. } | Verdict::ForwardEmitted { .. } => Err(format!(
                "verdict {verdict:?} with {} forwarded parts",
                parts.len()
            )),
            _ if !parts.is_empty() => Err(format!("verdict {verdict:?} with forwarded parts")),
            _ => Ok(()),
        }?;
        for (out, f) in &self.caught.generated {
            check_generated(*out, f)?;
        }
        if matches!(
            verdict,
            Verdict::Forward { .. } | Verdict::ForwardEmitted { .. }
        ) {
            summary.forwarded += 1;
            summary.forwarded6 += u64::from(is_ipv6(frame));
            summary.fragments += parts.len().saturating_sub(1) as u64;
        }
        let c = self.fwd.counters();
        if c.received != summary.inputs {
            return Err(format!(
                "received {} after {} frames",
                c.received, summary.inputs
            ));
        }
        c.check_conservation().map_err(|e| e.to_string())?;
        if c.generated.total() != self.caught.generated_total {
            return Err("an emitted frame went uncounted".into());
        }
        summary.generated = self.caught.generated_total;
        Ok(())
    }
}

/// Feeds `iterations` mutated frames, calling `progress` every million; stops at the
/// first finding.
pub fn run(
    seed: u64,
    iterations: u64,
    progress: &mut dyn FnMut(&Summary),
) -> Result<Summary, Finding> {
    let seeds = corpus();
    let mut rng = Rng::new(seed);
    let mut checker = Checker::default();
    for iteration in 0..iterations {
        let frame = mutate(&mut rng, &seeds);
        let input = if below(&mut rng, 8) == 0 {
            below(&mut rng, 4)
        } else {
            0
        };
        let elapsed = rng.next_u64() % 2_000_000;
        checker
            .check(input, &frame, elapsed)
            .map_err(|problem| Finding {
                seed,
                iteration,
                input,
                frame,
                problem,
            })?;
        if (iteration + 1) % 1_000_000 == 0 {
            progress(&checker.summary);
        }
    }
    Ok(checker.summary)
}
