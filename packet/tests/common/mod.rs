//! Test support: frame builders, an `Emit` that records, a two-port router rig, and an
//! independent checksum.
#![allow(dead_code)] // each test binary uses a different part of this module

use polld_core::{Emit, PacketStage, Verdict};
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::{ArpPacket, EthernetFrame, Ipv4Packet, Ipv6Packet, MacAddr};
use polld_packet::{Forwarder, PacketConfig, PacketDrop};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const SEC: u64 = 1_000_000_000;

/// Records emitted frames, generated ones and forwarded parts apart.
#[derive(Default)]
pub struct Sent {
    frames: Vec<(usize, Vec<u8>)>,
    parts: Vec<(usize, Vec<u8>)>,
    /// Frames generated since the start, taken or not.
    pub total: u64,
}

impl Emit for Sent {
    fn emit(&mut self, out: usize, frame: &[u8]) {
        self.frames.push((out, frame.to_vec()));
        self.total += 1;
    }

    fn forward_part(&mut self, out: usize, frame: &[u8]) {
        self.parts.push((out, frame.to_vec()));
    }
}

impl Sent {
    /// The frames generated since the last take, with their output device.
    pub fn take(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.frames)
    }

    /// The parts of forwarded datagrams (fragments, trimmed frames) since the last take.
    pub fn take_parts(&mut self) -> Vec<(usize, Vec<u8>)> {
        std::mem::take(&mut self.parts)
    }
}

pub fn mac(last: u8, iface: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, iface, last])
}

// A two-port router's MACs; host A sits behind port 0, gateway G behind port 1.
pub fn r1() -> MacAddr {
    mac(1, 1)
}
pub fn host_a() -> MacAddr {
    mac(2, 1)
}
pub fn r2() -> MacAddr {
    mac(1, 2)
}
pub fn gw() -> MacAddr {
    mac(2, 2)
}

/// A packet that can be put in an Ethernet frame.
pub trait Framed {
    fn frame(&self, src: MacAddr, dst: MacAddr) -> Vec<u8>;
}

impl Framed for Ip {
    fn frame(&self, src: MacAddr, dst: MacAddr) -> Vec<u8> {
        Ip::frame(self, src, dst)
    }
}

impl Framed for Ip6 {
    fn frame(&self, src: MacAddr, dst: MacAddr) -> Vec<u8> {
        Ip6::frame(self, src, dst)
    }
}

/// A forwarder on devices `veth1` and `veth2` with what it emitted; on drop it checks
/// that its counters add up.
pub struct Rig {
    pub fwd: Forwarder,
    pub sent: Sent,
    pub calls: u64,
}

impl Rig {
    pub fn of(config: &str) -> Rig {
        let config: PacketConfig = toml::from_str(config).unwrap();
        Rig {
            fwd: Forwarder::new(&config, &["veth1", "veth2"]).unwrap(),
            sent: Sent::default(),
            calls: 0,
        }
    }

    pub fn process(&mut self, input: usize, frame: &mut [u8]) -> Verdict {
        self.calls += 1;
        self.fwd.process(input, frame, &mut self.sent)
    }

    /// Sends `packet` from host A into port 0; returns the verdict and the frame as the
    /// forwarder left it.
    pub fn send_from_a(&mut self, packet: &impl Framed) -> (Verdict, Vec<u8>) {
        let mut frame = packet.frame(host_a(), r1());
        let verdict = self.process(0, &mut frame);
        (verdict, frame)
    }

    pub fn verdict_from_a(&mut self, packet: &impl Framed) -> Verdict {
        self.send_from_a(packet).0
    }

    pub fn drop_from_a(&mut self, packet: &impl Framed) -> PacketDrop {
        match self.verdict_from_a(packet) {
            Verdict::Drop(reason) => PacketDrop::try_from(reason)
                .unwrap_or_else(|r| panic!("expected a stage reason, got {r:?}")),
            other => panic!("expected a drop, got {other:?}"),
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let c = self.fwd.counters();
        assert_eq!(c.received, self.calls, "every frame is counted once");
        c.check_conservation().unwrap();
        assert_eq!(
            c.generated.total(),
            self.sent.total,
            "every emitted frame is counted"
        );
    }
}

pub fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// The RFC 1071 sum written the slow, obvious way, to check our checksums against.
pub fn naive_checksum_ok(data: &[u8]) -> bool {
    let mut sum: u32 = 0;
    for pair in data.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&b| u32::from(b));
        sum += hi | lo;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum == 0xFFFF
}

/// A UDP header from port 40000 to `dst_port` and `data_len` bytes of counting data,
/// checksum left zero.
fn udp_datagram(dst_port: u16, data_len: usize) -> Vec<u8> {
    let len = 8 + data_len;
    let mut payload = vec![0u8; len];
    payload[0..2].copy_from_slice(&40000u16.to_be_bytes());
    payload[2..4].copy_from_slice(&dst_port.to_be_bytes());
    payload[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    for (i, b) in payload[8..].iter_mut().enumerate() {
        *b = i as u8;
    }
    payload
}

/// An IPv4 packet to build.
#[derive(Clone, Debug)]
pub struct Ip {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    pub protocol: u8,
    pub options: Vec<u8>,
    pub dont_fragment: bool,
    pub more_fragments: bool,
    pub frag_offset: usize,
    pub payload: Vec<u8>,
}

impl Ip {
    /// A UDP datagram with `data_len` bytes of data, checksum left zero.
    pub fn udp(src: &str, dst: &str, dst_port: u16, data_len: usize) -> Ip {
        Ip::with_payload(src, dst, 17, udp_datagram(dst_port, data_len))
    }

    /// An ICMP message with a valid checksum.
    pub fn icmp(src: &str, dst: &str, msg_type: u8, rest: u32, data: &[u8]) -> Ip {
        let mut payload = vec![msg_type, 0, 0, 0];
        payload.extend_from_slice(&rest.to_be_bytes());
        payload.extend_from_slice(data);
        let sum = polld_packet::wire::checksum::checksum(&payload);
        payload[2..4].copy_from_slice(&sum.to_be_bytes());
        Ip::with_payload(src, dst, 1, payload)
    }

    pub fn with_payload(src: &str, dst: &str, protocol: u8, payload: Vec<u8>) -> Ip {
        Ip {
            src: ip(src),
            dst: ip(dst),
            ttl: 64,
            protocol,
            options: Vec::new(),
            dont_fragment: false,
            more_fragments: false,
            frag_offset: 0,
            payload,
        }
    }

    /// The IP packet bytes, header checksum filled in.
    pub fn bytes(&self) -> Vec<u8> {
        let header_len = 20 + self.options.len();
        let mut buf = vec![0u8; header_len + self.payload.len()];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version_and_header_len(header_len);
        p.set_total_len((header_len + self.payload.len()) as u16);
        p.set_ident(0x1234);
        p.set_fragment(self.dont_fragment, self.more_fragments, self.frag_offset);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        buf[20..header_len].copy_from_slice(&self.options);
        buf[header_len..].copy_from_slice(&self.payload);
        Ipv4Packet::new_unchecked(&mut buf[..]).fill_checksum();
        buf
    }

    /// The packet in an Ethernet frame from `src` to `dst`, padded to 60 bytes.
    pub fn frame(&self, src: MacAddr, dst: MacAddr) -> Vec<u8> {
        eth_frame(src, dst, ethertype::IPV4, &self.bytes())
    }
}

pub fn eth_frame(src: MacAddr, dst: MacAddr, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; (14 + payload.len()).max(60)];
    let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
    f.set_src_addr(src);
    f.set_dst_addr(dst);
    f.set_ethertype(ethertype);
    buf[14..14 + payload.len()].copy_from_slice(payload);
    buf
}

pub fn arp_frame(
    op: u16,
    eth_dst: MacAddr,
    sender: (MacAddr, Ipv4Addr),
    target: (MacAddr, Ipv4Addr),
) -> Vec<u8> {
    let mut body = [0u8; 28];
    ArpPacket::new_unchecked(&mut body[..]).fill(op, sender, target);
    eth_frame(sender.0, eth_dst, ethertype::ARP, &body)
}

pub fn ip6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The ICMPv6 checksum of `message` (checksum field included) from `src` to `dst`,
/// summed the slow, obvious way: true when it verifies.
pub fn naive_icmpv6_checksum_ok(src: Ipv6Addr, dst: Ipv6Addr, message: &[u8]) -> bool {
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(message.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, 58]);
    pseudo.extend_from_slice(message);
    naive_checksum_ok(&pseudo)
}

/// An IPv6 packet to build: the fixed header, then `ext` (extension headers, already
/// encoded, the first of type `next_header`) and the upper-layer `payload`.
#[derive(Clone, Debug)]
pub struct Ip6 {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub hop_limit: u8,
    pub next_header: u8,
    pub ext: Vec<u8>,
    pub payload: Vec<u8>,
}

impl Ip6 {
    /// A UDP datagram with `data_len` bytes of data, checksum left zero.
    pub fn udp(src: &str, dst: &str, dst_port: u16, data_len: usize) -> Ip6 {
        Ip6::with_payload(src, dst, 17, udp_datagram(dst_port, data_len))
    }

    /// An ICMPv6 message with a valid checksum.
    pub fn icmp(src: &str, dst: &str, msg_type: u8, rest: u32, data: &[u8]) -> Ip6 {
        let mut payload = vec![msg_type, 0, 0, 0];
        payload.extend_from_slice(&rest.to_be_bytes());
        payload.extend_from_slice(data);
        let mut p = Ip6::with_payload(src, dst, 58, payload);
        p.fix_icmp_checksum();
        p
    }

    /// Recomputes the ICMPv6 checksum of a payload that is an ICMPv6 message.
    pub fn fix_icmp_checksum(&mut self) {
        self.payload[2..4].copy_from_slice(&[0, 0]);
        let sum = polld_packet::wire::checksum::add(
            polld_packet::wire::icmpv6::pseudo_header_sum(
                self.src,
                self.dst,
                self.payload.len() as u32,
            ),
            polld_packet::wire::checksum::ones_sum(&self.payload),
        );
        self.payload[2..4].copy_from_slice(&(!sum).to_be_bytes());
    }

    pub fn with_payload(src: &str, dst: &str, next_header: u8, payload: Vec<u8>) -> Ip6 {
        Ip6 {
            src: ip6(src),
            dst: ip6(dst),
            hop_limit: 64,
            next_header,
            ext: Vec::new(),
            payload,
        }
    }

    /// Puts an extension header of type `kind` (its next header is the current one)
    /// with `body` (its length a multiple of 8, minus 2) in front of the chain.
    pub fn with_ext(mut self, kind: u8, body: &[u8]) -> Ip6 {
        let mut header = vec![self.next_header, ((body.len() + 2) / 8 - 1) as u8];
        header.extend_from_slice(body);
        header.extend_from_slice(&self.ext);
        self.ext = header;
        self.next_header = kind;
        self
    }

    pub fn bytes(&self) -> Vec<u8> {
        let payload_len = self.ext.len() + self.payload.len();
        let mut buf = vec![0u8; 40 + payload_len];
        let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
        p.set_version();
        p.set_payload_len(payload_len as u16);
        p.set_next_header(self.next_header);
        p.set_hop_limit(self.hop_limit);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        buf[40..40 + self.ext.len()].copy_from_slice(&self.ext);
        buf[40 + self.ext.len()..].copy_from_slice(&self.payload);
        buf
    }

    /// The packet in an Ethernet frame from `src` to `dst`, padded to 60 bytes.
    pub fn frame(&self, src: MacAddr, dst: MacAddr) -> Vec<u8> {
        eth_frame(src, dst, ethertype::IPV6, &self.bytes())
    }
}
