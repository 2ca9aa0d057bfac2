//! What the forward bench and the `lpm_scale` example feed the forwarder: a 60-byte UDP
//! frame from 10.0.1.2 on the first port of `testdata/router.toml`, and an output that
//! discards what it is given.

use polld_core::Emit;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::{EthernetFrame, Ipv4Packet, MacAddr};
use std::net::Ipv4Addr;

/// The frame to `dst`, checksummed, TTL 64.
pub fn udp_frame(dst: Ipv4Addr) -> [u8; 60] {
    let mut frame = [0u8; 60];
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.set_dst_addr(MacAddr([2, 0, 0, 0, 1, 1]));
    eth.set_src_addr(MacAddr([2, 0, 0, 0, 1, 2]));
    eth.set_ethertype(ethertype::IPV4);
    let mut ip = Ipv4Packet::new_unchecked(&mut frame[14..]);
    ip.set_version_and_header_len(20);
    ip.set_total_len(46);
    ip.set_ttl(64);
    ip.set_protocol(17);
    ip.set_src_addr(Ipv4Addr::new(10, 0, 1, 2));
    ip.set_dst_addr(dst);
    ip.fill_checksum();
    frame[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&26u16.to_be_bytes());
    frame
}

/// An output that drops every frame.
pub struct Discard;

impl Emit for Discard {
    fn emit(&mut self, _out: usize, _frame: &[u8]) {}
    fn forward_part(&mut self, _out: usize, _frame: &[u8]) {}
}
