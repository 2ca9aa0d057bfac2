//! Idle polling on virtual time: the idle poller serves frames that arrive while the CPU
//! idles at once, not at the next tick, and sleeps on the devices' interrupts when its pass
//! finds every ring empty instead of polling empty rings again (docs/algorithm.md §5); the
//! interrupts wake it at most `kern.polling.idle_wakeups` times between two ticks; with
//! the cycles finding nothing left, polling goes quiet as without idle polling.

use polld_core::Mode;
use polld_sim::scenario::{check_conservation, report};
use polld_sim::{Arrivals, Scenario, Sim, UserTask};

mod common;
use common::forwarding;

const MS: u64 = 1_000_000;

/// `arrivals` on in0 forwarded to out0, both polling at hz 1000 with idle polling on and
/// `idle_wakeups` interrupt wakeups a tick, nothing else on the CPU.
fn stream(arrivals: Arrivals, idle_wakeups: &str) -> Scenario {
    let knobs = [
        ("kern.polling.hz", "1000"),
        ("kern.polling.idle_poll", "1"),
        ("kern.polling.idle_wakeups", idle_wakeups),
        ("net.inet.ip.fastforwarding", "1"),
    ];
    forwarding("idle poll", arrivals, Mode::Polling, UserTask::None, &knobs)
}

/// Poisson arrivals at `pps` through [`stream`] for 300 ms: every frame accounted for, and
/// the rate delivered within 5 %.
fn run_poisson(pps: f64, idle_wakeups: &str) -> Sim {
    let s = stream(Arrivals::Poisson { pps }, idle_wakeups);
    let mut sim = s.build().unwrap();
    sim.run_until(300 * MS);
    check_conservation(&sim).unwrap();
    let delivered = report(&s.name, &sim).delivered_pps;
    assert!(
        (delivered - pps).abs() < pps / 20.0,
        "delivered {delivered}"
    );
    sim
}

#[test]
fn without_a_limit_the_idle_poller_serves_arrivals_at_once_and_sleeps_on_empty_rings() {
    let sim = run_poisson(10_000.0, "0");
    // Served while the CPU idled, not at the next 1 ms tick.
    let out = sim.nic(1).stats;
    assert!(out.latency_max_ns < 100_000, "{out:?}");
    // An idle poller that polled empty rings again would fill every idle moment; this one
    // makes one pass a frame (less than its each_burst: the ring is empty after it), about
    // 5 µs (`rizzo::DRIVER`).
    let cpu = sim.split;
    assert!(cpu.pct(cpu.idle_ns) > 60.0, "the CPU hardly idled: {cpu:?}");
    let state = *sim.dataplane().poller().state();
    // Woken once a frame, less the frames the tick's cycle took.
    assert!(
        state.idlepoll_wakeups > 2 * sim.ticks,
        "{} wakeups in {} ticks",
        state.idlepoll_wakeups,
        sim.ticks
    );
    // Each cycle ends once the rings run empty, not after burst / each_burst empty chunks.
    assert!(
        state.chunks < 2 * state.cycles,
        "{} chunks in {} cycles",
        state.chunks,
        state.cycles
    );
}

#[test]
fn the_interrupts_wake_the_idle_poller_once_a_tick_then_it_rests_until_the_tick() {
    // 50 frames a tick: unbounded (idle_wakeups 0, the rule before the limit) the idle
    // poller is woken for ~36 of them a tick (10,803 wakeups in 300 ticks).
    let sim = run_poisson(50_000.0, "1");
    let state = *sim.dataplane().poller().state();
    assert!(
        state.idlepoll_wakeups <= sim.ticks && state.idlepoll_wakeups > sim.ticks * 9 / 10,
        "{} wakeups in {} ticks: one a tick",
        state.idlepoll_wakeups,
        sim.ticks
    );
    // The rest wait for the tick: no frame waits longer than one.
    let out = sim.nic(1).stats;
    assert!(out.latency_max_ns < 1_100_000, "{out:?}");
    let cpu = sim.split;
    assert!(cpu.pct(cpu.idle_ns) > 50.0, "the CPU hardly idled: {cpu:?}");
}

#[test]
fn with_idle_polling_and_no_traffic_polling_goes_quiet() {
    let s = stream(Arrivals::None, "1");
    let mut sim = s.build().unwrap();
    sim.run_until(500 * MS);
    let state = *sim.dataplane().poller().state();
    assert!(state.quiet && state.idlepoll_sleeping, "{state:?}");
    assert_eq!(sim.ticks, 100, "ticks stop after 100 empty cycles");
    let cpu = sim.split;
    assert!(cpu.pct(cpu.idle_ns) > 99.9, "{cpu:?}");
}
