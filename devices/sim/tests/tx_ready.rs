//! Transmit backpressure in interrupt work, on virtual time: bursts forwarded by interrupt
//! (and adaptive) mode into an output whose transmit ring is small and drains at line rate.
//!
//! It is the testbed's AF_PACKET case in miniature: a TPACKET_V3 block brings a burst of
//! about 320 frames per wakeup, and the transmit socket takes about 160 before it refuses.
//! A handler that ran to completion received the whole burst and dropped what the output
//! refused (`tx_ring_full`), even at half the output's rate. Now the handler stops on the
//! full output, the frames wait in the input ring, and the output's transmit-ready line
//! resumes it: nothing is lost at half load.

use polld_core::{DropReason, LinkState, Mode};
use polld_sim::scenario::check_conservation;
use polld_sim::{Arrivals, CpuCosts, DriverCosts, NicConfig, Scenario, Sim, UserTask};

const MS: u64 = 1_000_000;
/// The output's line rate; the bursts average half of it.
const LINE_PPS: f64 = 320_000.0;
/// The output's transmit ring: a tenth of a burst.
const OUT_RING: usize = 32;
/// Bursts of 320 frames (2 Mpps for 160 µs) every 2 ms: 160 kpps on average.
const BURST: Arrivals = Arrivals::OnOff {
    pps: 2_000_000.0,
    on_ms: 0.16,
    off_ms: 1.84,
};

/// in0 forwards to out0, in `mode`; the CPU forwards faster than out0 sends, so only
/// out0's ring limits a burst.
fn bursts(mode: Mode) -> Scenario {
    let cheap = DriverCosts {
        call_ns: 100,
        rx_ns: 200,
        tx_ns: 100,
        reclaim_ns: 10,
    };
    let mut input = NicConfig::new("in0", BURST);
    input.rx_ring = 1024;
    input.costs = cheap;
    input.mode = mode;
    input.route = Some("out0".into());
    let mut output = NicConfig::new("out0", Arrivals::None);
    output.tx_ring = OUT_RING;
    output.line_pps = LINE_PPS;
    output.costs = cheap;
    output.mode = mode;
    output.tx_ready_line = true;
    Scenario {
        name: format!("bursts into a {OUT_RING}-slot output, {}", mode.name()),
        duration_ms: 200.0,
        seed: 5,
        user: UserTask::None,
        knobs: Default::default(),
        costs: CpuCosts {
            fwd_ns: 500,
            ..CpuCosts::default()
        },
        nics: vec![input, output],
    }
}

/// What a run did at in0 and out0.
struct Outcome {
    arrived: u64,
    rx_ring_full: u64,
    tx_ring_full: u64,
    forwarded: u64,
    wire: u64,
    /// The most frames seen waiting in in0's ring, sampled every 10 µs.
    max_backlog: usize,
    tx_waits: u64,
    tx_ready_interrupts: u64,
}

fn run(s: &Scenario) -> (Sim, Outcome) {
    let mut sim: Sim = s.build().unwrap();
    let mut max_backlog = 0;
    let end = (s.duration_ms * MS as f64) as u64;
    let mut t = 0;
    while t < end {
        t += 10_000;
        sim.run_until(t);
        max_backlog = max_backlog.max(sim.nic(0).rx_backlog());
    }
    // The last burst drains: no arrival after the end, 2 ms to spare.
    check_conservation(&sim).unwrap();
    let input = sim.dataplane().interfaces()[0].counters();
    let output = sim.dataplane().interfaces()[1].counters();
    let outcome = Outcome {
        arrived: sim.nic(0).stats.arrived,
        rx_ring_full: input.drops.get(DropReason::RxRingFull),
        tx_ring_full: input.drops.get(DropReason::TxRingFull),
        forwarded: input.forwarded,
        wire: sim.nic(1).stats.tx_wire,
        max_backlog,
        tx_waits: input.tx_waits,
        tx_ready_interrupts: output.tx_ready_interrupts,
    };
    (sim, outcome)
}

#[test]
fn at_half_load_interrupt_work_waits_for_a_full_output_and_loses_nothing() {
    for mode in [Mode::Interrupt, Mode::Adaptive, Mode::Auto] {
        let (sim, o) = run(&bursts(mode));
        let name = mode.name();
        assert!(
            o.arrived > 15_000,
            "{name}: only {} frames arrived",
            o.arrived
        );
        assert_eq!(o.rx_ring_full, 0, "{name}: the input ring overflowed");
        assert_eq!(
            o.tx_ring_full, 0,
            "{name}: {} of {} frames received and dropped at the full output",
            o.tx_ring_full, o.arrived
        );
        // Every frame that arrived was forwarded, but those of a burst still in flight.
        let in_flight = sim.nic(0).rx_backlog() as u64;
        assert_eq!(o.forwarded + in_flight, o.arrived, "{name}");
        assert!(
            o.wire + OUT_RING as u64 >= o.forwarded,
            "{name}: forwarded {} but {} left on the wire",
            o.forwarded,
            o.wire
        );
        // The output was full at every burst: the work waited, the frames queued in the
        // input's ring (deeper than the output's), and the output's line resumed it.
        assert!(o.tx_waits >= 90, "{name}: waited {} times", o.tx_waits);
        assert_eq!(o.tx_ready_interrupts, o.tx_waits, "{name}");
        assert!(
            o.max_backlog > 4 * OUT_RING,
            "{name}: at most {} frames waited in the input ring",
            o.max_backlog
        );
        assert_eq!(sim.dataplane().interfaces()[0].tx_wait(), None, "{name}");
    }
}

#[test]
fn an_output_without_the_line_is_not_waited_for_and_drops_as_before() {
    // The 2002 drivers' behaviour, and polld's before the line: the handler runs to
    // completion and the frames the output refuses are dropped after being received.
    let mut s = bursts(Mode::Interrupt);
    s.nics[1].tx_ready_line = false;
    let (_, o) = run(&s);
    assert_eq!(o.tx_waits, 0);
    assert!(
        o.tx_ring_full > o.arrived / 2,
        "{} of {} dropped at the output",
        o.tx_ring_full,
        o.arrived
    );
}

#[test]
fn without_a_small_output_ring_interrupt_work_never_waits() {
    let mut s = bursts(Mode::Interrupt);
    s.nics[1].tx_ring = 1024;
    let (_, o) = run(&s);
    assert_eq!((o.tx_waits, o.tx_ring_full, o.rx_ring_full), (0, 0, 0));
}

#[test]
fn an_output_going_down_releases_the_input_waiting_for_it() {
    // A flood into the small output: the input waits for it most of the time.
    let mut s = bursts(Mode::Interrupt);
    s.nics[0].arrivals = Arrivals::Constant { pps: 1_000_000.0 };
    let mut sim: Sim = s.build().unwrap();
    let mut t = 0;
    while sim.dataplane().interfaces()[0].tx_wait().is_none() {
        t += 1_000;
        sim.run_until(t);
        assert!(t < 10 * MS, "the input never waited for the output");
    }
    assert!(!sim.dataplane().interrupt_armed(0), "masked while it waits");
    sim.dataplane_mut()
        .interface_mut(1)
        .dev_mut()
        .set_link(LinkState::Down);
    sim.dataplane_mut().check_status(1);
    assert_eq!(sim.dataplane().interfaces()[0].tx_wait(), None);
    assert!(!sim.dataplane().tx_ready_armed(1));
    // The handler goes on, and counts what it cannot forward.
    sim.run_until(t + 2 * MS);
    let input = sim.dataplane().interfaces()[0].counters();
    assert!(input.drops.get(DropReason::LinkDown) > 1000);
    check_conservation(&sim).unwrap();
}
