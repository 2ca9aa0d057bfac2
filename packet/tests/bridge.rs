//! The learning bridge: learning, flooding, aging, capacity, rules, and conservation with
//! flood copies counted apart.

mod common;

use common::*;
use polld_core::{DropReason, PacketStage, Verdict};
use polld_packet::wire::arp::operation;
use polld_packet::wire::ethernet::ethertype;
use polld_packet::wire::MacAddr;
use polld_packet::{Bridge, PacketConfig, PacketDrop, Stage};
use proptest::prelude::*;

const PORTS: [&str; 3] = ["p0", "p1", "p2"];

fn config(extra: &str) -> PacketConfig {
    let text = format!(
        "mode = \"bridge\"\n{extra}\n[[interfaces]]\nname = \"p0\"\n[[interfaces]]\nname = \"p1\"\n[[interfaces]]\nname = \"p2\"\n"
    );
    toml::from_str(&text).unwrap()
}

struct Rig {
    bridge: Bridge,
    sent: Sent,
    calls: u64,
}

impl Rig {
    fn with(extra: &str) -> Rig {
        Rig {
            bridge: Bridge::new(&config(extra), &PORTS).unwrap(),
            sent: Sent::default(),
            calls: 0,
        }
    }

    /// A small UDP frame from station `src` to `dst` entering at `port`.
    fn send(&mut self, port: usize, src: MacAddr, dst: MacAddr) -> Verdict {
        let mut frame = Ip::udp("10.0.0.1", "10.0.0.2", 9, 8).frame(src, dst);
        self.process(port, &mut frame)
    }

    fn process(&mut self, port: usize, frame: &mut [u8]) -> Verdict {
        self.calls += 1;
        self.bridge.process(port, frame, &mut self.sent)
    }

    fn flooded_to(&mut self) -> Vec<usize> {
        self.sent.take().into_iter().map(|(port, _)| port).collect()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let c = self.bridge.counters();
        assert_eq!(c.received, self.calls);
        c.check_conservation().unwrap();
        assert_eq!(
            c.generated.flood_copies, self.sent.total,
            "every copy is counted"
        );
    }
}

fn station(n: u8) -> MacAddr {
    mac(n, 0)
}

#[test]
fn learns_then_forwards_to_the_learned_port() {
    let mut rig = Rig::with("");
    // B unknown: flooded to p1 (the verdict) and p2 (a copy).
    assert_eq!(
        rig.send(0, station(1), station(2)),
        Verdict::Forward { out: 1 }
    );
    assert_eq!(rig.flooded_to(), vec![2]);
    // B answers from p2: A was learned at p0.
    assert_eq!(
        rig.send(2, station(2), station(1)),
        Verdict::Forward { out: 0 }
    );
    assert!(rig.sent.take().is_empty());
    // Now B is known too.
    assert_eq!(
        rig.send(0, station(1), station(2)),
        Verdict::Forward { out: 2 }
    );
    assert!(rig.sent.take().is_empty());
    assert_eq!(rig.bridge.port_of(station(2)), Some(2));
    let c = rig.bridge.counters();
    assert_eq!(
        (c.received, c.forwarded, c.generated.flood_copies),
        (3, 3, 1)
    );
}

#[test]
fn broadcast_and_multicast_are_flooded() {
    let mut rig = Rig::with("");
    rig.send(2, station(2), station(1));
    rig.sent.take();
    for dst in [MacAddr::BROADCAST, MacAddr([1, 0, 0x5e, 0, 0, 9])] {
        assert_eq!(rig.send(1, station(1), dst), Verdict::Forward { out: 0 });
        assert_eq!(rig.flooded_to(), vec![2]);
    }
}

#[test]
fn station_moves_to_its_new_port() {
    let mut rig = Rig::with("");
    rig.send(0, station(1), MacAddr::BROADCAST);
    rig.send(1, station(1), MacAddr::BROADCAST);
    rig.sent.take();
    assert_eq!(
        rig.send(2, station(2), station(1)),
        Verdict::Forward { out: 1 }
    );
}

#[test]
fn destination_on_the_input_port_is_not_forwarded() {
    let mut rig = Rig::with("");
    rig.send(0, station(1), MacAddr::BROADCAST);
    rig.sent.take();
    assert_eq!(
        rig.send(0, station(3), station(1)),
        PacketDrop::NoRoute.verdict()
    );
    assert!(rig.sent.take().is_empty());
}

#[test]
fn stations_age_out() {
    let mut rig = Rig::with("[bridge]\nmax_age_ms = 1000\n");
    rig.send(2, station(2), MacAddr::BROADCAST);
    rig.sent.take();
    rig.bridge.set_now(SEC);
    assert_eq!(
        rig.send(0, station(1), station(2)),
        Verdict::Forward { out: 2 }
    );
    rig.bridge.set_now(SEC + 1);
    assert_eq!(
        rig.send(0, station(1), station(2)),
        Verdict::Forward { out: 1 },
        "flooded again"
    );
    assert_eq!(rig.flooded_to(), vec![2]);
}

#[test]
fn table_capacity_evicts_the_oldest() {
    let mut rig = Rig::with("[bridge]\ncapacity = 2\n");
    for (t, n) in [(1, 1u8), (2, 2), (3, 3)] {
        rig.bridge.set_now(t);
        rig.send(2, station(n), MacAddr::BROADCAST);
    }
    rig.sent.take();
    assert_eq!(rig.bridge.port_of(station(1)), None);
    assert_eq!(rig.bridge.port_of(station(3)), Some(2));
    assert_eq!(rig.bridge.stats().table.evictions, 1);
}

#[test]
fn invalid_frames() {
    let mut rig = Rig::with("");
    let mut short = vec![0u8; 10];
    assert_eq!(rig.process(0, &mut short), PacketDrop::Truncated.verdict());
    assert_eq!(
        rig.send(0, MacAddr::BROADCAST, station(1)),
        PacketDrop::Martian.verdict()
    );
    let mut tagged = eth_frame(station(1), station(2), ethertype::VLAN, &[0, 5, 8, 0]);
    assert_eq!(rig.process(0, &mut tagged), PacketDrop::Vlan.verdict());
    assert_eq!(
        rig.send(5, station(1), station(2)),
        Verdict::Drop(DropReason::LinkDown)
    );
}

#[test]
fn rules_apply_to_ipv4_only() {
    let mut rig = Rig::with(
        "default_action = \"deny\"\n[[rules]]\naction = \"allow\"\nproto = \"udp\"\ndst_ports = 9\n",
    );
    assert_eq!(
        rig.send(0, station(1), station(2)),
        Verdict::Forward { out: 1 }
    );
    rig.sent.take();
    let mut to_port_7 = Ip::udp("10.0.0.1", "10.0.0.2", 7, 8).frame(station(1), station(2));
    assert_eq!(
        rig.process(0, &mut to_port_7),
        PacketDrop::Filtered.verdict()
    );
    let mut arp = arp_frame(
        operation::REQUEST,
        MacAddr::BROADCAST,
        (station(1), ip("10.0.0.1")),
        (MacAddr::ZERO, ip("10.0.0.2")),
    );
    assert!(
        matches!(rig.process(0, &mut arp), Verdict::Forward { .. }),
        "ARP passes"
    );
    rig.sent.take();
    let mut broken = Ip::udp("10.0.0.1", "10.0.0.2", 9, 8).frame(station(1), station(2));
    broken[14] = 0x4F; // a 60-byte header in a 46-byte payload
    assert_eq!(
        rig.process(0, &mut broken),
        PacketDrop::BadIhl.verdict(),
        "rules need a valid header"
    );
    assert_eq!(rig.bridge.stats().rules.rules, vec![1]);
    assert_eq!(rig.bridge.stats().rules.default, 1);
}

#[test]
fn stage_builds_the_bridge_from_mode() {
    let stage = Stage::new(&config(""), &PORTS).unwrap();
    assert!(matches!(stage, Stage::Bridge(_)));
    let err = polld_packet::Forwarder::new(&config(""), &PORTS).unwrap_err();
    assert_eq!(err.field, "mode");
}

proptest! {
    /// Random frames on random ports never panic; each frame is counted once and every
    /// copy is counted as generated.
    #[test]
    fn random_frames_conserve(frames in proptest::collection::vec(
        (0usize..4, proptest::collection::vec(any::<u8>(), 0..80), 0u64..5), 1..60)
    ) {
        let mut rig = Rig::with("[bridge]\ncapacity = 4\nmax_age_ms = 2\n");
        for (port, mut frame, ms) in frames {
            rig.bridge.set_now(ms * 1_000_000);
            rig.process(port, &mut frame);
        }
        for (port, _) in rig.sent.take() {
            prop_assert!(port < 3);
        }
    }
}
