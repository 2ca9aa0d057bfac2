//! Frames the stages make up themselves: ARP requests and replies, ICMP and ICMPv6
//! messages.
//! Each builder writes a whole Ethernet frame into a reused buffer, so emitting does not
//! allocate once the buffer has grown to the largest frame.

use crate::wire::ethernet::ethertype;
use crate::wire::icmpv6::pseudo_header_sum;
use crate::wire::ipv4::protocol;
use crate::wire::ipv6::next_header;
use crate::wire::{ArpPacket, EthernetFrame, IcmpPacket, Ipv4Packet, Ipv6Packet, MacAddr};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The minimum Ethernet frame without FCS; shorter frames are zero-padded.
pub(crate) const MIN_FRAME_LEN: usize = 60;
const ETH: usize = EthernetFrame::<&[u8]>::HEADER_LEN;
const IP: usize = Ipv4Packet::<&[u8]>::HEADER_LEN;
const IP6: usize = Ipv6Packet::<&[u8]>::HEADER_LEN;
/// TTL and hop limit of the packets polld originates (the Linux and FreeBSD default).
pub(crate) const TTL: u8 = 64;

/// Link-layer addressing of a generated frame.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Link {
    pub src: MacAddr,
    pub dst: MacAddr,
}

fn start(buf: &mut Vec<u8>, len: usize, link: Link, ethertype: u16) {
    buf.clear();
    buf.resize(len.max(MIN_FRAME_LEN), 0);
    let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
    eth.set_dst_addr(link.dst);
    eth.set_src_addr(link.src);
    eth.set_ethertype(ethertype);
}

/// An ARP packet; the Ethernet source is the sender's MAC.
pub(crate) fn arp(
    buf: &mut Vec<u8>,
    op: u16,
    eth_dst: MacAddr,
    sender: (MacAddr, Ipv4Addr),
    target: (MacAddr, Ipv4Addr),
) {
    let link = Link {
        src: sender.0,
        dst: eth_dst,
    };
    start(buf, ETH + ArpPacket::<&[u8]>::LEN, link, ethertype::ARP);
    ArpPacket::new_unchecked(&mut buf[ETH..]).fill(op, sender, target);
}

/// The ICMP header fields of a generated message.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IcmpHeader {
    pub msg_type: u8,
    pub code: u8,
    pub rest: u32,
}

/// An IPv4/ICMP packet carrying `data` after the 8-byte ICMP header.
pub(crate) fn icmp(
    buf: &mut Vec<u8>,
    link: Link,
    (src, dst): (Ipv4Addr, Ipv4Addr),
    ident: u16,
    header: IcmpHeader,
    data: &[u8],
) {
    let icmp_len = IcmpPacket::<&[u8]>::HEADER_LEN + data.len();
    start(buf, ETH + IP + icmp_len, link, ethertype::IPV4);
    let mut ip = Ipv4Packet::new_unchecked(&mut buf[ETH..]);
    ip.set_version_and_header_len(IP);
    ip.set_total_len((IP + icmp_len) as u16);
    ip.set_ident(ident);
    ip.set_ttl(TTL);
    ip.set_protocol(protocol::ICMP);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    let mut message = IcmpPacket::new_unchecked(&mut buf[ETH + IP..ETH + IP + icmp_len]);
    message.set_msg_type(header.msg_type);
    message.set_code(header.code);
    message.set_rest_of_header(header.rest);
    message.data_mut().copy_from_slice(data);
    message.fill_checksum();
}

/// The hop limit of neighbour discovery messages (RFC 4861), which proves to the
/// receiver that they come from the link.
pub(crate) const ND_HOP_LIMIT: u8 = 255;

/// An IPv6/ICMPv6 packet carrying `data` after the 8-byte ICMPv6 header, with the
/// originating hop limit (or [`ND_HOP_LIMIT`] for neighbour discovery).
pub(crate) fn icmpv6(
    buf: &mut Vec<u8>,
    link: Link,
    (src, dst): (Ipv6Addr, Ipv6Addr),
    hop_limit: u8,
    header: IcmpHeader,
    data: &[u8],
) {
    let icmp_len = IcmpPacket::<&[u8]>::HEADER_LEN + data.len();
    start(buf, ETH + IP6 + icmp_len, link, ethertype::IPV6);
    let mut ip = Ipv6Packet::new_unchecked(&mut buf[ETH..]);
    ip.set_version();
    ip.set_payload_len(icmp_len as u16);
    ip.set_next_header(next_header::ICMPV6);
    ip.set_hop_limit(hop_limit);
    ip.set_src_addr(src);
    ip.set_dst_addr(dst);
    let mut message = IcmpPacket::new_unchecked(&mut buf[ETH + IP6..ETH + IP6 + icmp_len]);
    message.set_msg_type(header.msg_type);
    message.set_code(header.code);
    message.set_rest_of_header(header.rest);
    message.data_mut().copy_from_slice(data);
    message.fill_checksum_over(pseudo_header_sum(src, dst, icmp_len as u32));
}
