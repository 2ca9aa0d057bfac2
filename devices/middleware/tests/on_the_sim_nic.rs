//! The middleware devices around simulated NICs in a real dataplane: the pcap file holds
//! exactly the frames the counters show, and injected faults keep conservation exact.

use std::cell::Cell;
use std::io::{self, Write};
use std::rc::Rc;

use polld_core::{
    Dataplane, Device, DropReason, Emit, Frozen, IfCounters, PacketStage, Poller, TxDrop, Verdict,
};
use polld_middleware::{FaultConfig, FaultInjector, PcapWriter};
use polld_sim::{Arrivals, NicConfig, SimNic};

mod common;

use common::Shared;

/// Interface 0 forwards everything to interface 1.
struct ToOne;

impl PacketStage for ToOne {
    fn process(&mut self, input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        match input {
            0 => Verdict::Forward { out: 1 },
            _ => Verdict::Consumed,
        }
    }
}

fn nic(name: &str, clock: &Rc<Cell<u64>>) -> SimNic {
    let mut cfg = NicConfig::new(name, Arrivals::None);
    cfg.rx_ring = 4096;
    cfg.tx_ring = 4096;
    cfg.line_pps = 1e9;
    SimNic::new(cfg, clock.clone(), 1)
}

/// Runs interface 0's interrupt handler until its ring is empty.
fn handle<D: Device>(dp: &mut Dataplane<D, ToOne>) {
    dp.interrupt_line(0, true);
    dp.step_accounted(&mut Frozen(0));
    dp.sync_hw_drops();
}

/// The (caught length, original length) of every record of a classic pcap file, after
/// checking its global header.
fn records(file: &[u8]) -> Vec<(u32, u32)> {
    let word = |at: usize| u32::from_ne_bytes(file[at..at + 4].try_into().unwrap());
    assert_eq!(word(0), 0xa1b2_c3d4, "magic");
    assert_eq!(
        &file[4..8],
        [2u16.to_ne_bytes(), 4u16.to_ne_bytes()].concat()
    );
    assert_eq!(word(16), 65_535, "snaplen");
    assert_eq!(word(20), 1, "LINKTYPE_ETHERNET");
    let mut at = 24;
    let mut out = Vec::new();
    while at < file.len() {
        let (caught, orig) = (word(at + 8), word(at + 12));
        out.push((caught, orig));
        at += 16 + caught as usize;
    }
    assert_eq!(at, file.len(), "the last record is whole");
    out
}

#[test]
fn the_pcap_files_hold_exactly_the_frames_received_and_sent() {
    let clock = Rc::new(Cell::new(1_700_000_000_123_456_789));
    let files = [Shared::default(), Shared::default()];
    let devices = ["in0", "out0"]
        .iter()
        .zip(&files)
        .map(|(name, file)| {
            let now = clock.clone();
            let time = Box::new(move || now.get());
            PcapWriter::new(nic(name, &clock), file.clone(), time).unwrap()
        })
        .collect();
    let mut dp = Dataplane::new(Poller::default(), devices, ToOne);
    dp.interface_mut(0).dev_mut().inner_mut().inject(300);
    handle(&mut dp);

    let counters: Vec<IfCounters> = dp.interfaces().iter().map(|i| i.counters()).collect();
    assert_eq!(counters[0].rx_packets, 300);
    assert_eq!(counters[1].tx_packets, 300);
    let received = records(&files[0].0.borrow());
    let sent = records(&files[1].0.borrow());
    assert_eq!(received.len() as u64, counters[0].rx_packets);
    assert_eq!(sent.len() as u64, counters[1].tx_packets);
    assert!(received
        .iter()
        .chain(&sent)
        .all(|&(c, o)| c == 60 && o == 60));
    // The first record's time is the clock's, in seconds and microseconds (the NIC's
    // driver costs moved the virtual clock on by a few hundred nanoseconds).
    let file = files[0].0.borrow();
    let word = |at: usize| u32::from_ne_bytes(file[at..at + 4].try_into().unwrap());
    assert_eq!(word(24), 1_700_000_000);
    assert!((123_456..123_460).contains(&word(28)), "{}", word(28));
    assert!(dp.interfaces().iter().all(|i| i.dev().error().is_none()));
}

/// A writer whose disk is full.
struct Full;

impl Write for Full {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::from_raw_os_error(28))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_pcap_writer_is_reported_and_the_device_keeps_working() {
    let clock = Rc::new(Cell::new(0));
    assert!(PcapWriter::new(nic("in0", &clock), Full, Box::new(|| 0)).is_err());
    let mut writer =
        PcapWriter::new(nic("in0", &clock), Shared::default(), Box::new(|| 0)).unwrap();
    writer.inner_mut().inject(2);
    let mut handed = 0;
    assert_eq!(writer.receive(8, &mut |_| handed += 1), 2);
    assert_eq!((handed, writer.stats().rx_records), (2, 2));
}

fn faulty(clock: &Rc<Cell<u64>>, rx: FaultConfig, tx: FaultConfig) -> Vec<FaultInjector<SimNic>> {
    vec![
        FaultInjector::new(nic("in0", clock), rx).unwrap(),
        FaultInjector::new(nic("out0", clock), tx).unwrap(),
    ]
}

/// Sends 2000 frames through seeded faults; returns the interfaces' counters and the
/// injectors' stats.
fn run_faults(seed: u64) -> (Vec<IfCounters>, Vec<polld_middleware::FaultStats>, u64) {
    let clock = Rc::new(Cell::new(0));
    let rx = FaultConfig {
        seed,
        rx_drop: 100,
        rx_truncate: 100,
        rx_corrupt: 100,
        rx_duplicate: 100,
        tx_fail: 0,
    };
    let tx = FaultConfig {
        seed: seed + 1,
        tx_fail: 200,
        ..FaultConfig::default()
    };
    let mut dp = Dataplane::new(Poller::default(), faulty(&clock, rx, tx), ToOne);
    for _ in 0..10 {
        dp.interface_mut(0).dev_mut().inner_mut().inject(200);
        handle(&mut dp);
    }
    let ifs = dp.interfaces();
    let wire = ifs[1].dev().inner().stats.tx_queued;
    (
        ifs.iter().map(|i| i.counters()).collect(),
        ifs.iter().map(|i| i.dev().stats()).collect(),
        wire,
    )
}

#[test]
fn injected_faults_are_counted_by_name_and_conservation_stays_exact() {
    let (counters, faults, queued_on_out) = run_faults(42);
    let (input, output) = (counters[0], counters[1]);
    let f = faults[0];
    // Every fault struck at about its rate (100 per mille of 2000 frames, give or take).
    for n in [
        f.rx_dropped,
        f.rx_truncated,
        f.rx_corrupted,
        f.rx_duplicated,
    ] {
        assert!((120..=290).contains(&n), "{f:?}");
    }
    // Received: what the NIC handed up, less the drops, plus the duplicates.
    assert_eq!(input.rx_packets, 2000 - f.rx_dropped + f.rx_duplicated);
    assert_eq!(input.drops.get(DropReason::FaultInjected), f.rx_dropped);
    assert_eq!(input.unaccounted(), 0, "{input:?}");
    assert_eq!(input.forwarded, input.rx_packets);
    // Transmit: everything handed to out0 left or was failed and counted as such.
    let failed = faults[1].tx_failed;
    assert!((250..=550).contains(&failed), "{failed}");
    assert_eq!(output.tx_packets, input.forwarded);
    assert_eq!(output.tx_drops.get(TxDrop::Fault), failed);
    assert_eq!(queued_on_out + failed, output.tx_packets);
}

#[test]
fn the_same_seed_injects_the_same_faults() {
    assert_eq!(run_faults(7), run_faults(7));
    assert_ne!(run_faults(7).1, run_faults(8).1);
}

#[test]
fn a_rate_over_1000_per_mille_is_refused_by_name() {
    let config = FaultConfig {
        rx_corrupt: 1001,
        ..FaultConfig::default()
    };
    let clock = Rc::new(Cell::new(0));
    let err = FaultInjector::new(nic("in0", &clock), config)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "fault.rx_corrupt = 1001: a rate is per mille, use 0 to 1000"
    );
}
