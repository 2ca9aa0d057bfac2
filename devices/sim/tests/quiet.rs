//! Quiet polling on virtual time: with every ring empty for `kern.polling.quiet_cycles`
//! cycles the tick stops; the first frame wakes polling at once, through the device's
//! interrupt, and is forwarded without waiting for a tick.

use polld_core::{Knobs, Mode, Poller};
use polld_sim::scenario::check_conservation;
use polld_sim::{Arrivals, CpuCosts, NicConfig, Sim, UserTask};

const MS: u64 = 1_000_000;

fn idle_pair(quiet_cycles: &str) -> Sim {
    pair(quiet_cycles, Arrivals::None)
}

/// Polling on FreeBSD's knobs (the `freebsd` profile: the classic controller, whose
/// burst the quiet spell's wakeup restores) with burst_max 1000.
fn pair(quiet_cycles: &str, arrivals: Arrivals) -> Sim {
    let mut poller = Poller::new(Knobs::freebsd());
    poller
        .set_knob("kern.polling.quiet_cycles", quiet_cycles)
        .unwrap();
    poller.set_knob("kern.polling.burst_max", "1000").unwrap();
    let nics = vec![
        NicConfig::new("in0", arrivals),
        NicConfig::new("out0", Arrivals::None),
    ];
    let mut sim = Sim::new(
        poller,
        nics,
        vec![Some(1), None],
        CpuCosts::default(),
        UserTask::None,
        1,
    );
    for i in 0..2 {
        sim.dataplane_mut().set_mode(i, Mode::Polling).unwrap();
    }
    sim
}

#[test]
fn an_idle_poller_stops_ticking_and_the_first_frame_wakes_it_at_once() {
    let mut sim = idle_pair("100");
    sim.run_until(500 * MS);
    let state = *sim.dataplane().poller().state();
    assert!(state.quiet);
    assert_eq!(sim.ticks, 100, "ticks stop after 100 empty cycles");
    let cpu = sim.split;
    assert!(
        cpu.pct(cpu.device_ns() + cpu.intr_ns) < 0.1,
        "an idle quiet poller costs nothing: {cpu:?}"
    );
    // Ten frames arrive between ticks: an interrupt wakes polling and they leave within
    // microseconds, not at the next tick.
    sim.run_until(500 * MS + 300_000);
    sim.dataplane_mut().interface_mut(0).dev_mut().inject(10);
    sim.run_until(500 * MS + 400_000);
    let out = sim.nic(1).stats;
    assert_eq!(out.tx_wire, 10, "forwarded before the next tick");
    assert!(out.latency_max_ns < 100_000, "{out:?}");
    let state = *sim.dataplane().poller().state();
    assert!(!state.quiet);
    assert_eq!(state.quiet_wakeups, 1);
    assert_eq!(sim.dataplane().interfaces()[0].counters().interrupts, 0);
    // 100 empty cycles later it is quiet again.
    sim.run_until(700 * MS);
    assert!(sim.dataplane().poller().state().quiet);
    assert!((200..=202).contains(&sim.ticks), "ticks {}", sim.ticks);
    check_conservation(&sim).unwrap();
}

#[test]
fn quiet_cycles_zero_ticks_forever_as_freebsd() {
    let mut sim = idle_pair("0");
    sim.run_until(500 * MS);
    assert!(!sim.dataplane().poller().state().quiet);
    assert_eq!(sim.ticks, 500);
}

/// A flood after a quiet spell is served as FreeBSD's ever-ticking poller serves it: the
/// wakeup grows the burst by the ticks the spell skipped, as FreeBSD's empty cycles did,
/// instead of ramping up by one a cycle from the burst the spell froze while the ring
/// overflows.
#[test]
fn a_flood_after_a_quiet_spell_starts_at_the_burst_freebsd_would_have() {
    // 100 ms of 150 kpps each second: 150 frames a tick at hz 1000, which the first flood's
    // ramp from the initial burst of 5 does not reach, nor its 10 empty cycles after.
    let flood = Arrivals::OnOff {
        pps: 150_000.0,
        on_ms: 100.0,
        off_ms: 900.0,
    };
    let second_flood = |quiet_cycles: &str| {
        let mut sim = pair(quiet_cycles, flood);
        sim.run_until(1000 * MS);
        let state = *sim.dataplane().poller().state();
        let (out, input) = (sim.nic(1).stats, sim.nic(0).stats);
        sim.run_until(1100 * MS);
        check_conservation(&sim).unwrap();
        (
            state,
            sim.nic(1).stats.tx_wire - out.tx_wire,
            sim.nic(0).stats.rx_ring_full - input.rx_ring_full,
        )
    };
    let (freebsd, freebsd_out, freebsd_lost) = second_flood("0");
    let (quiet, quiet_out, quiet_lost) = second_flood("10");
    assert!(quiet.quiet && !freebsd.quiet);
    assert_eq!(
        freebsd.burst, 1000,
        "the idle ticks grew FreeBSD's burst to its max"
    );
    assert_eq!(freebsd_lost, 0, "{freebsd_out} forwarded");
    assert_eq!(
        quiet_lost, 0,
        "{quiet_out} forwarded against FreeBSD's {freebsd_out}"
    );
    assert!(
        quiet_out >= freebsd_out,
        "quiet {quiet_out} < FreeBSD {freebsd_out}"
    );
}
