//! Transmit backpressure on virtual time: a flood forwarded into an output whose ring is
//! finite and drains at a fixed rate (the simulated NIC's tx ring, emptied at `line_pps`),
//! like veth3's 256-slot ring emptied by its NAPI thread on the testbed.
//!
//! A full output must end the input's share of the cycle (the frames stay in the input
//! ring, where dropping them costs the CPU nothing), the burst must not grow on cycles whose
//! output was full, and without backpressure the scheduler must behave as FreeBSD's.

use polld_core::{DropReason, Mode};
use polld_sim::scenario::check_conservation;
use polld_sim::{Arrivals, CpuCosts, DriverCosts, NicConfig, Scenario, Sim, UserTask};

const MS: u64 = 1_000_000;
const EACH_BURST: u64 = 50;
const BURST_MAX: u32 = 1000;
/// The output ring and its drain rate: 250 frames per 1 ms tick.
const OUT_RING: usize = 256;
const DRAIN_PPS: f64 = 250_000.0;

/// A 1 Mpps flood from in0 forwarded to out0, both polled at hz 1000, with costs cheap
/// enough that the CPU is never the limit: only the output ring is.
fn flood(controller: &str) -> Scenario {
    let cheap = DriverCosts {
        call_ns: 100,
        rx_ns: 100,
        tx_ns: 50,
        reclaim_ns: 10,
    };
    let mut input = NicConfig::new("in0", Arrivals::Constant { pps: 1_000_000.0 });
    input.rx_ring = 2048;
    input.costs = cheap;
    input.mode = Mode::Polling;
    input.route = Some("out0".into());
    let mut output = NicConfig::new("out0", Arrivals::None);
    output.tx_ring = OUT_RING;
    output.line_pps = DRAIN_PPS;
    output.costs = cheap;
    output.mode = Mode::Polling;
    let mut s = Scenario {
        name: format!("flood into a {OUT_RING}-slot output, {controller} controller"),
        duration_ms: 1400.0,
        seed: 3,
        user: UserTask::None,
        knobs: Default::default(),
        costs: CpuCosts {
            fwd_ns: 100,
            ..CpuCosts::default()
        },
        nics: vec![input, output],
    };
    for (k, v) in [
        ("kern.polling.burst_max", BURST_MAX.to_string()),
        ("kern.polling.each_burst", EACH_BURST.to_string()),
        ("kern.polling.controller", controller.to_string()),
    ] {
        s.knobs.insert(k.into(), toml::Value::String(v));
    }
    s
}

struct Outcome {
    delivered_pps: f64,
    tx_ring_full: u64,
    cycles: u64,
    max_burst: u32,
    device_ns: u64,
}

/// Runs 1 s to converge (the classic burst climbs by one a tick), then 400 ms measured,
/// recording the largest burst seen.
fn run(s: &Scenario) -> Outcome {
    let mut sim: Sim = s.build().unwrap();
    sim.run_until(1000 * MS);
    let wire0 = sim.nic(1).stats.tx_wire;
    let drops0 = sim.dataplane().interfaces()[0]
        .counters()
        .drops
        .get(DropReason::TxRingFull);
    let cycles0 = sim.dataplane().poller().state().cycles;
    let device0 = sim.split.device_ns();
    let mut max_burst = 0;
    for ms in 1001..=1400 {
        sim.run_until(ms * MS);
        max_burst = max_burst.max(sim.dataplane().poller().state().burst);
    }
    check_conservation(&sim).unwrap();
    Outcome {
        delivered_pps: (sim.nic(1).stats.tx_wire - wire0) as f64 / 0.4,
        tx_ring_full: sim.dataplane().interfaces()[0]
            .counters()
            .drops
            .get(DropReason::TxRingFull)
            - drops0,
        cycles: sim.dataplane().poller().state().cycles - cycles0,
        max_burst,
        device_ns: sim.split.device_ns() - device0,
    }
}

#[test]
fn a_full_output_ends_the_inputs_share_and_stops_the_burst_growing() {
    for controller in ["classic", "time"] {
        let o = run(&flood(controller));
        // The output drains at its rate: the forwarder keeps it busy.
        assert!(
            o.delivered_pps >= 0.97 * DRAIN_PPS,
            "{controller}: delivered {:.0}/s of {DRAIN_PPS}",
            o.delivered_pps
        );
        // At most the chunk that found the ring full is dropped at transmit, once per cycle.
        assert!(
            o.tx_ring_full <= EACH_BURST * o.cycles,
            "{controller}: {} tx_ring_full drops in {} cycles",
            o.tx_ring_full,
            o.cycles
        );
        // The burst settles near what the output takes per tick (ring + drain), well
        // below burst_max.
        let per_tick = OUT_RING as u32 + (DRAIN_PPS / 1000.0) as u32 + EACH_BURST as u32;
        assert!(
            o.max_burst <= per_tick,
            "{controller}: burst reached {} (output takes {per_tick} a tick)",
            o.max_burst
        );
        // Device work is about what the delivered frames cost, not what the dropped ones did.
        let ns_per_delivered = o.device_ns as f64 / (o.delivered_pps * 0.4);
        assert!(
            ns_per_delivered < 700.0,
            "{controller}: {ns_per_delivered:.0} ns of device work per delivered frame"
        );
    }
}

#[test]
fn without_backpressure_the_burst_still_climbs_to_burst_max() {
    // The same flood into an output that keeps up: FreeBSD's ±1 rule runs the burst up.
    let mut s = flood("classic");
    s.nics[1].line_pps = 10_000_000.0;
    s.nics[1].tx_ring = 4096;
    let o = run(&s);
    assert_eq!(o.tx_ring_full, 0);
    assert_eq!(o.max_burst, BURST_MAX);
}

/// Flushes of out0 per poll cycle, over 400 ms after 1 s of warm-up: (flushes, cycles,
/// frames out0 took).
fn flushes(s: &Scenario) -> (u64, u64, u64) {
    let mut sim: Sim = s.build().unwrap();
    sim.run_until(1000 * MS);
    let flushes0 = sim.nic(1).stats.tx_flushes;
    let sent0 = sim.nic(1).stats.tx_queued;
    let cycles0 = sim.dataplane().poller().state().cycles;
    sim.run_until(1400 * MS);
    check_conservation(&sim).unwrap();
    (
        sim.nic(1).stats.tx_flushes - flushes0,
        sim.dataplane().poller().state().cycles - cycles0,
        sim.nic(1).stats.tx_queued - sent0,
    )
}

#[test]
fn an_output_is_kicked_once_per_cycle_or_per_full_kick_not_per_chunk() {
    for controller in ["classic", "time"] {
        let mut s = flood(controller);
        // Small chunks of 16: about 16 chunks a cycle here.
        s.knobs.insert(
            "kern.polling.each_burst".into(),
            toml::Value::String("16".into()),
        );
        // A device without a kick limit is flushed once, when the cycle closes.
        let (n, cycles, sent) = flushes(&s);
        assert!(sent > 0 && cycles > 0, "{controller}: nothing forwarded");
        assert!(
            n <= cycles,
            "{controller}: {n} flushes in {cycles} cycles ({sent} frames)"
        );
        // One whose kick sends at most 32 frames is also flushed as each 32 wait.
        const KICK: u64 = 32;
        s.nics[1].tx_batch = Some(KICK as usize);
        let (n, cycles, sent) = flushes(&s);
        assert!(
            n <= cycles + sent / KICK,
            "{controller}: {n} flushes in {cycles} cycles for {sent} frames, kicks of {KICK}"
        );
        assert!(
            n >= sent / KICK,
            "{controller}: {n} flushes for {sent} frames: a kick takes at most {KICK}"
        );
    }
}

/// Over 400 ms of the flood, after 1 s of warm-up: cycles cut short, transmit-ready interrupts, delivered/s and
/// ticks judged short.
fn repolls(s: &Scenario) -> (u64, u64, f64, u64) {
    let mut sim: Sim = s.build().unwrap();
    sim.run_until(1000 * MS);
    let repolls0 = sim.dataplane().poller().state().repolls;
    let short0 = sim.dataplane().poller().state().short_ticks;
    let lines0 = sim.dataplane().interfaces()[1]
        .counters()
        .tx_ready_interrupts;
    let wire0 = sim.nic(1).stats.tx_wire;
    sim.run_until(1400 * MS);
    check_conservation(&sim).unwrap();
    (
        sim.dataplane().poller().state().repolls - repolls0,
        sim.dataplane().interfaces()[1]
            .counters()
            .tx_ready_interrupts
            - lines0,
        (sim.nic(1).stats.tx_wire - wire0) as f64 / 0.4,
        sim.dataplane().poller().state().short_ticks - short0,
    )
}

#[test]
fn a_cycle_cut_short_polls_again_when_the_outputs_transmit_ready_line_rises() {
    let mut s = flood("classic");
    // Without a line the repoll waits on a timer: no transmit-ready interrupt at all.
    let (timed, lines, _, _) = repolls(&s);
    assert!(timed > 1000, "only {timed} repolls");
    assert_eq!(lines, 0);
    // With one, the line (out0's ring drained to half: 128 frames, 512 µs at its rate)
    // starts the next cycle: the tick's cycle fills the ring, the line's cycle refills
    // it 512 µs later, and the next wait ends with the tick, 1 ms after the last one. Two
    // wakeups a tick, one of them the line's, where the timer's repolls (each a moved
    // tick) took about 1550/400.
    s.nics[1].tx_ready_line = true;
    let (cut_short, lines, delivered_pps, short_ticks) = repolls(&s);
    assert_eq!((cut_short, lines), (800, 400), "timer: {timed} repolls");
    // A cycle the line starts is not a clock tick.
    assert_eq!(short_ticks, 0);
    assert!(
        delivered_pps >= 0.97 * DRAIN_PPS,
        "delivered {delivered_pps:.0}/s of {DRAIN_PPS}"
    );
}

#[test]
fn a_transmit_ready_line_that_rises_early_does_not_start_a_cycle_before_its_share_allows() {
    // An output that drains at 1 Mpps raises its line 128 µs after a cycle filled it, and a
    // cycle refills it in about 90 µs. At user_frac 90 a second cycle does not fit in the
    // tick's 100 µs share: the next tick must start it. Started at every line, the cycles
    // took 25.9 % of the CPU (measured on the code that did).
    let mut s = flood("classic");
    s.knobs.insert(
        "kern.polling.user_frac".into(),
        toml::Value::String("90".into()),
    );
    s.nics[0].arrivals = Arrivals::Constant { pps: 2_000_000.0 };
    s.nics[1].line_pps = 1_000_000.0;
    s.nics[1].tx_ready_line = true;
    let mut sim: Sim = s.build().unwrap();
    sim.run_until(1000 * MS);
    let before = sim.split;
    let lines0 = sim.dataplane().interfaces()[1]
        .counters()
        .tx_ready_interrupts;
    sim.run_until(1400 * MS);
    check_conservation(&sim).unwrap();
    let lines = sim.dataplane().interfaces()[1]
        .counters()
        .tx_ready_interrupts
        - lines0;
    assert!(lines > 100, "the line rose only {lines} times");
    let polling = (sim.split.kernel_ns - before.kernel_ns) as f64 / (400 * MS) as f64;
    assert!(
        polling <= 0.105,
        "poll cycles took {:.1} % of the CPU at user_frac 90",
        polling * 100.0
    );
}
