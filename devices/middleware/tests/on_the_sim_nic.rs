//! The middleware devices around simulated NICs in a real dataplane: the pcap file holds
//! exactly the frames the counters show, and injected faults keep conservation exact.

use std::cell::Cell;
use std::io::{self, Write};
use std::rc::Rc;

use polld_core::{
    Dataplane, Device, DropReason, Emit, Frozen, IfCounters, Mode, PacketStage, Poller, TxDrop,
    Verdict,
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
        wakeup_loss: 0,
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

/// What [`lose_wakeups`] saw.
struct Stranded {
    /// The longest a frame waited from its arrival to its forwarding, ns.
    longest_wait: u64,
    /// Frames never forwarded.
    left: usize,
    input: IfCounters,
    wakeups_lost: u64,
}

/// One frame arrives on interface 0 every `gap` ns, `frames` of them, through an injector
/// that loses `loss` per mille of its wakeups; the dataplane runs interface 0 in `mode`
/// with `kern.polling.wakeup_watchdog_ms` at `watchdog_ms`, on virtual time: an event
/// loop over the arrivals and the one-shot timer the steps ask for
/// ([`polld_core::Step::look`]), raising interface 0's line whenever its NIC asserts it.
fn lose_wakeups(mode: Mode, loss: u16, watchdog_ms: u32, frames: usize, gap: u64) -> Stranded {
    let clock = Rc::new(Cell::new(0));
    let rx = FaultConfig {
        seed: 3,
        wakeup_loss: loss,
        ..FaultConfig::default()
    };
    let mut poller = Poller::default();
    poller
        .set_knob("wakeup_watchdog_ms", &watchdog_ms.to_string())
        .unwrap();
    let mut dp = Dataplane::new(poller, faulty(&clock, rx, FaultConfig::default()), ToOne);
    dp.set_mode(0, mode).unwrap();
    let period = u64::from(watchdog_ms) * 1_000_000;
    let end = frames as u64 * gap + 2 * period;
    let (mut arrivals, mut waiting) = (0, std::collections::VecDeque::new());
    let (mut timer, mut longest_wait) = (None::<u64>, 0);
    loop {
        let next_arrival = (arrivals < frames).then(|| arrivals as u64 * gap);
        let Some(now) = [next_arrival, timer].into_iter().flatten().min() else {
            break;
        };
        if now > end {
            break;
        }
        clock.set(now);
        if next_arrival == Some(now) {
            dp.interface_mut(0).dev_mut().inner_mut().inject(1);
            waiting.push_back(now);
            arrivals += 1;
        }
        if timer.is_some_and(|at| at <= now) {
            timer = None;
            dp.raise_look();
        }
        let asserted = dp.interfaces()[0].dev().inner().interrupt_asserted();
        dp.interrupt_line(0, asserted);
        while let Some(due) = dp.next_due().filter(|d| !d.spins()) {
            if let Some(at) = dp.step(due, &mut Frozen(now)).look {
                timer = Some(at);
            }
        }
        let forwarded = dp.interfaces()[0].counters().forwarded as usize;
        while arrivals - waiting.len() < forwarded {
            longest_wait = longest_wait.max(now - waiting.pop_front().unwrap());
        }
    }
    let input = dp.interfaces()[0].counters();
    Stranded {
        longest_wait,
        left: waiting.len(),
        input,
        wakeups_lost: dp.interfaces()[0].dev().stats().wakeups_lost,
    }
}

/// Modes that wait for a device's wakeup.
const WAKEUP_MODES: [Mode; 3] = [Mode::Interrupt, Mode::Adaptive, Mode::Auto];

#[test]
fn a_device_that_loses_every_wakeup_is_served_by_the_watchdog_within_its_period() {
    for mode in WAKEUP_MODES {
        let s = lose_wakeups(mode, 1000, 100, 40, 37_000_000);
        assert_eq!(s.left, 0, "{mode:?}: every frame forwarded");
        assert!(
            s.longest_wait <= 100_000_000,
            "{mode:?}: {}",
            s.longest_wait
        );
        // A frame that arrives just after a look waits most of a period.
        assert!(s.longest_wait > 50_000_000, "{mode:?}: {}", s.longest_wait);
        assert!(s.wakeups_lost > 0);
        assert_eq!(s.input.watchdog_frames, 40, "{mode:?}: {:?}", s.input);
        assert_eq!(s.input.interrupts, 0, "{mode:?}");
        assert_eq!(s.input.unaccounted(), 0);
    }
}

#[test]
fn without_the_watchdog_a_lost_wakeup_strands_its_frames() {
    for mode in WAKEUP_MODES {
        let s = lose_wakeups(mode, 1000, 0, 40, 37_000_000);
        // The NIC raises no new wakeup while its ring holds the frames of the lost one.
        assert_eq!(s.left, 40, "{mode:?}");
        assert_eq!(s.input.rx_packets, 0, "{mode:?}");
        assert_eq!(s.wakeups_lost, 1, "{mode:?}");
    }
}

#[test]
fn with_one_wakeup_in_100_lost_no_frame_waits_longer_than_the_watchdog_period() {
    for mode in WAKEUP_MODES {
        let s = lose_wakeups(mode, 10, 20, 2000, 3_000_000);
        assert_eq!(s.left, 0, "{mode:?}");
        assert!(s.longest_wait <= 20_000_000, "{mode:?}: {}", s.longest_wait);
        assert!(
            (5..=60).contains(&s.wakeups_lost),
            "{mode:?}: {}",
            s.wakeups_lost
        );
        // The frames of a lost wakeup, and those that came behind them while the NIC
        // raised no wakeup, were found by the watchdog; each other frame by its interrupt.
        assert!(s.input.watchdog_frames >= s.wakeups_lost, "{mode:?}");
        assert_eq!(
            s.input.interrupts + s.input.watchdog_frames,
            2000,
            "{mode:?}: {:?}",
            s.input
        );
    }
}
