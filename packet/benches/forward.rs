//! ns/packet of the forwarder's forward path: a 60-byte UDP frame routed via a gateway
//! with a static ARP entry, TTL decremented and MACs rewritten. Each iteration restores
//! the frame from a template (a 60-byte copy) so the TTL never runs out.
//!
//! Run: `cargo bench -p polld-packet --bench forward`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use polld_core::{PacketStage, Verdict};
use polld_packet::{Forwarder, PacketConfig};
use std::hint::black_box;
use std::net::Ipv4Addr;

#[path = "support/forwarding.rs"]
mod forwarding;
use forwarding::{udp_frame, Discard};

const CONFIG: &str = include_str!("../testdata/router.toml");

fn forward(c: &mut Criterion) {
    let config: PacketConfig = toml::from_str(CONFIG).unwrap();
    let mut fwd = Forwarder::new(&config, &["veth1", "veth2"]).unwrap();
    let template = udp_frame(Ipv4Addr::new(10, 9, 1, 1));
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
