//! Test support: frame builders, an `Emit` that records, and an independent checksum.
#![allow(dead_code)] // each test binary uses a different part of this module

use polld_core::Emit;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::{ArpPacket, EthernetFrame, Ipv4Packet, MacAddr};
use std::net::Ipv4Addr;

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
        let len = 8 + data_len;
        let mut payload = vec![0u8; len];
        payload[0..2].copy_from_slice(&40000u16.to_be_bytes());
        payload[2..4].copy_from_slice(&dst_port.to_be_bytes());
        payload[4..6].copy_from_slice(&(len as u16).to_be_bytes());
        for (i, b) in payload[8..].iter_mut().enumerate() {
            *b = i as u8;
        }
        Ip::with_payload(src, dst, 17, payload)
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
