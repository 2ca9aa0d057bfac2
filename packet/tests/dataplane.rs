//! The forwarder inside the dataplane: a datagram that leaves as several frames (its
//! fragments) or as a shorter one (padding trimmed) counts once, and the interface
//! counters still add up when the output refuses some of the frames.

mod common;

use common::*;
use polld_core::{Dataplane, Device, DropReason, LinkState, Poller, TxFull};
use polld_packet::{Forwarder, PacketConfig};
use std::collections::VecDeque;

const BASE: &str = include_str!("../testdata/router.toml");

/// A device fed from a queue; its transmit side keeps what it took and refuses the sends
/// whose number (from 1) is in `refuse`.
struct Memory {
    name: &'static str,
    rx: VecDeque<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    sends: u64,
    refuse: Vec<u64>,
    link: LinkState,
}

impl Memory {
    fn new(name: &'static str) -> Memory {
        Memory {
            name,
            rx: VecDeque::new(),
            sent: Vec::new(),
            sends: 0,
            refuse: Vec::new(),
            link: LinkState::Up,
        }
    }
}

impl Device for Memory {
    fn name(&self) -> &str {
        self.name
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let n = budget.min(self.rx.len());
        for mut frame in self.rx.drain(..n) {
            rx(&mut frame);
        }
        n
    }
    fn rx_ready(&mut self) -> bool {
        !self.rx.is_empty()
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        self.sends += 1;
        if self.refuse.contains(&self.sends) {
            return Err(TxFull);
        }
        self.sent.push(frame.to_vec());
        Ok(())
    }
    fn flush(&mut self) {}
    fn check_status(&mut self) -> LinkState {
        self.link
    }
    fn set_interrupt(&mut self, _armed: bool) {}
}

fn dataplane() -> Dataplane<Memory, Forwarder> {
    let config: PacketConfig = toml::from_str(BASE).unwrap();
    let fwd = Forwarder::new(&config, &["veth1", "veth2"]).unwrap();
    Dataplane::new(
        Poller::default(),
        vec![Memory::new("veth1"), Memory::new("veth2")],
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
    dp.run_accounted(0);

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
    dp.run_accounted(0);
    let input = dp.interfaces()[0].counters();
    assert_eq!(input.drops.get(DropReason::LinkDown), 1);
    assert_eq!(input.unaccounted(), 0);
    assert!(dp.interfaces()[1].dev().sent.is_empty());
    assert_eq!(dp.interfaces()[1].counters().tx_packets, 0);
}
