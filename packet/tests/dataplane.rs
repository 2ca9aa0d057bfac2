//! The forwarder inside the dataplane: a datagram that leaves as several frames (its
//! fragments) or as a shorter one (padding trimmed) counts once, and the interface
//! counters still add up when the output refuses some of the frames.

mod common;

use common::*;
use polld_core::{Dataplane, DropReason, Frozen, LinkState, Poller};
use polld_packet::{Forwarder, PacketConfig};
use polld_testsupport::TestDevice;

const BASE: &str = include_str!("../testdata/router.toml");

fn dataplane() -> Dataplane<TestDevice, Forwarder> {
    let config: PacketConfig = toml::from_str(BASE).unwrap();
    let fwd = Forwarder::new(&config, &["veth1", "veth2"]).unwrap();
    Dataplane::new(
        Poller::default(),
        vec![TestDevice::new("veth1"), TestDevice::new("veth2")],
        fwd,
    )
}

fn from_a(packet: &Ip) -> Vec<u8> {
    packet.frame(mac(2, 1), mac(1, 1))
}

#[test]
fn fragments_count_once_and_a_refused_one_loses_the_datagram() {
    let mut dp = dataplane();
    let big = Ip::udp("10.0.1.2", "10.9.1.1", 9, 3000); // 3 fragments at MTU 1400
    let padded = Ip::udp("10.0.1.2", "10.9.1.1", 9, 4); // 46-byte frame in 60
    let plain = Ip::udp("10.0.1.2", "10.9.1.1", 9, 100);
    // Sends 1-3: the first datagram's fragments; 4: padded; 5: plain; 6-8: the second
    // big datagram, whose middle fragment the device refuses.
    dp.interface_mut(1).dev_mut().refuse = vec![7];
    let rx = &mut dp.interface_mut(0).dev_mut().rx;
    rx.extend([from_a(&big), from_a(&padded), from_a(&plain), from_a(&big)]);
    dp.interrupt_line(0, true);
    dp.step_accounted(&mut Frozen(0));

    let input = dp.interfaces()[0].counters();
    assert_eq!(input.rx_packets, 4);
    assert_eq!(input.forwarded, 3, "one per datagram, however many frames");
    assert_eq!(input.drops.get(DropReason::TxRingFull), 1);
    assert_eq!(input.unaccounted(), 0);
    let output = &dp.interfaces()[1];
    assert_eq!(
        output.counters().tx_packets,
        7,
        "every frame the device took"
    );
    let sizes: Vec<usize> = output.dev().sent.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1410, 1410, 14 + 276, 14 + 32, 14 + 128, 1410, 290]);
    let c = dp.stage().counters();
    assert_eq!((c.fragmented, c.ofragments, c.padding_trimmed), (2, 6, 1));
    c.check_conservation().unwrap();
}

#[test]
fn fragments_for_a_link_that_is_down_are_not_sent() {
    let mut dp = dataplane();
    dp.interface_mut(1).dev_mut().link = LinkState::Down;
    dp.check_status(1);
    let big = Ip::udp("10.0.1.2", "10.9.1.1", 9, 3000);
    dp.interface_mut(0).dev_mut().rx.push_back(from_a(&big));
    dp.interrupt_line(0, true);
    dp.step_accounted(&mut Frozen(0));
    let input = dp.interfaces()[0].counters();
    assert_eq!(input.drops.get(DropReason::LinkDown), 1);
    assert_eq!(input.unaccounted(), 0);
    assert!(dp.interfaces()[1].dev().sent.is_empty());
    assert_eq!(dp.interfaces()[1].counters().tx_packets, 0);
}
