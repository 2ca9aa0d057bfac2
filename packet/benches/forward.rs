//! ns/packet of the forwarder's forward path: a 60-byte UDP frame routed via a gateway
//! with a static ARP entry, TTL decremented and MACs rewritten. Each iteration restores
//! the frame from a template (a 60-byte copy) so the TTL never runs out.
//!
//! Run: `cargo bench -p polld-packet --bench forward`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use polld_core::{Emit, PacketStage, Verdict};
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::{EthernetFrame, Ipv4Packet, MacAddr};
use polld_packet::{Forwarder, PacketConfig};
use std::hint::black_box;
use std::net::Ipv4Addr;

const CONFIG: &str = include_str!("../testdata/router.toml");

struct Discard;

impl Emit for Discard {
    fn emit(&mut self, _out: usize, _frame: &[u8]) {}
    fn forward_part(&mut self, _out: usize, _frame: &[u8]) {}
}

fn udp_frame() -> [u8; 60] {
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
    ip.set_dst_addr(Ipv4Addr::new(10, 9, 1, 1));
    ip.fill_checksum();
    frame[14 + 20 + 4..14 + 20 + 6].copy_from_slice(&26u16.to_be_bytes());
    frame
}

fn forward(c: &mut Criterion) {
    let config: PacketConfig = toml::from_str(CONFIG).unwrap();
    let mut fwd = Forwarder::new(&config, &["veth1", "veth2"]).unwrap();
    let template = udp_frame();
    let mut frame = template;
    assert_eq!(
        fwd.process(0, &mut frame, &mut Discard),
        Verdict::Forward { out: 1 }
    );
    let mut group = c.benchmark_group("forwarder");
    group.throughput(Throughput::Elements(1));
    group.bench_function("udp_via_gateway", |b| {
        b.iter(|| {
            frame = template;
            black_box(fwd.process(0, black_box(&mut frame), &mut Discard))
        })
    });
    group.finish();
}

criterion_group!(benches, forward);
criterion_main!(benches);
