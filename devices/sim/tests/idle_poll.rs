//! Idle polling on virtual time: the idle poller serves frames that arrive while the CPU
//! idles at once, not at the next tick, and sleeps on the devices' interrupts when its pass
//! finds every ring empty instead of polling empty rings again (docs/algorithm.md §5); with
//! the cycles finding nothing left, polling goes quiet as without idle polling.

use polld_core::Mode;
use polld_sim::scenario::{check_conservation, report};
use polld_sim::{rizzo, Arrivals, NicConfig, Scenario, UserTask};

const MS: u64 = 1_000_000;

/// `arrivals` on in0 forwarded to out0, both polling at hz 1000 with idle polling on,
/// nothing else on the CPU.
fn stream(arrivals: Arrivals) -> Scenario {
    let mut input = NicConfig::new("in0", arrivals);
    input.costs = rizzo::DRIVER;
    input.route = Some("out0".into());
    input.mode = Mode::Polling;
    let mut output = NicConfig::new("out0", Arrivals::None);
    output.costs = rizzo::DRIVER;
    output.line_pps = 10_000_000.0;
    output.mode = Mode::Polling;
    let mut s = Scenario {
        name: "idle poll".into(),
        duration_ms: 300.0,
        seed: 7,
        user: UserTask::None,
        knobs: Default::default(),
        costs: rizzo::CPU,
        nics: vec![input, output],
    };
    for (k, v) in [
        ("kern.polling.hz", "1000"),
        ("kern.polling.idle_poll", "1"),
        ("net.inet.ip.fastforwarding", "1"),
    ] {
        s.knobs.insert(k.into(), toml::Value::String(v.into()));
    }
    s
}

#[test]
fn the_idle_poller_serves_arrivals_at_once_and_sleeps_on_empty_rings() {
    let s = stream(Arrivals::Poisson { pps: 10_000.0 });
    let mut sim = s.build().unwrap();
    sim.run_until(300 * MS);
    check_conservation(&sim).unwrap();
    let r = report(&s.name, &sim);
    assert!(
        (r.delivered_pps - 10_000.0).abs() < 1_000.0,
        "delivered {}",
        r.delivered_pps
    );
    // Served while the CPU idled, not at the next 1 ms tick.
    let out = sim.nic(1).stats;
    assert!(out.latency_max_ns < 100_000, "{out:?}");
    // An idle poller that polled empty rings again would fill every idle moment; this one
    // makes two passes a frame (the one that serves it, the one that finds the ring
    // empty), about 5 µs for the one that serves a frame and under 1 µs for an empty one
    // (`rizzo::DRIVER`).
    let cpu = sim.split;
    assert!(cpu.pct(cpu.idle_ns) > 60.0, "the CPU hardly idled: {cpu:?}");
    let state = *sim.dataplane().poller().state();
    // Each cycle ends once the rings run empty, not after burst / each_burst empty chunks.
    assert!(
        state.chunks < 2 * state.cycles,
        "{} chunks in {} cycles",
        state.chunks,
        state.cycles
    );
}

#[test]
fn with_idle_polling_and_no_traffic_polling_goes_quiet() {
    let s = stream(Arrivals::None);
    let mut sim = s.build().unwrap();
    sim.run_until(500 * MS);
    let state = *sim.dataplane().poller().state();
    assert!(state.quiet && state.idlepoll_sleeping, "{state:?}");
    assert_eq!(sim.ticks, 100, "ticks stop after 100 empty cycles");
    let cpu = sim.split;
    assert!(cpu.pct(cpu.idle_ns) > 99.9, "{cpu:?}");
}
