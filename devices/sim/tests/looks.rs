//! Looks between two ticks on virtual time (`kern.polling.looks`, docs/algorithm.md §3):
//! at light load a cycle that emptied the rings looks again half-way to the next tick, so
//! a frame waits at most half a tick for its poll where it waited a tick; under a flood
//! and on an idle device nothing looks, and the share and the quiet spell are FreeBSD's
//! and polld's as without looks.

use polld_core::Mode;
use polld_sim::scenario::{check_conservation, report};
use polld_sim::{Arrivals, Scenario, Sim, UserTask};

mod common;
use common::{forwarding, user_percent_until};

const MS: u64 = 1_000_000;

/// `arrivals` on in0 forwarded to out0, both polling, with `knobs` over polld's defaults.
fn stream(arrivals: Arrivals, user: UserTask, knobs: &[(&str, &str)]) -> Scenario {
    let ff = [("net.inet.ip.fastforwarding", "1")];
    let knobs: Vec<_> = ff.iter().chain(knobs).copied().collect();
    forwarding("looks", arrivals, Mode::Polling, user, &knobs)
}

/// 10 kpps of Poisson arrivals for 300 ms beside a CPU-bound user task: every frame
/// accounted for and delivered. The output's latency counts from 10 ms on (the first
/// frames wait for the first tick's cycle: nothing moved before it, so nothing looked).
fn light_load(knobs: &[(&str, &str)]) -> Sim {
    let s = stream(Arrivals::Poisson { pps: 10_000.0 }, UserTask::Spin, knobs);
    let mut sim = s.build().unwrap();
    sim.run_until(10 * MS);
    let out = &mut sim.dataplane_mut().interface_mut(1).dev_mut().stats;
    (out.latency_max_ns, out.latency_sum_ns, out.stamped) = (0, 0, 0);
    sim.run_until(300 * MS);
    check_conservation(&sim).unwrap();
    let delivered = report(&s.name, &sim).delivered_pps;
    assert!(
        (delivered - 10_000.0).abs() < 500.0,
        "delivered {delivered}"
    );
    sim
}

#[test]
fn at_light_load_a_frame_waits_at_most_half_a_tick() {
    let sim = light_load(&[]);
    let out = sim.nic(1).stats;
    // Half a tick, and the path (a few µs a frame, `rizzo::DRIVER`).
    assert!(out.latency_max_ns < 600_000, "{out:?}");
    let state = *sim.dataplane().poller().state();
    assert!(
        state.look_cycles > sim.ticks * 9 / 10,
        "{} looks in {} ticks: one a tick",
        state.look_cycles,
        sim.ticks
    );
    assert_eq!((state.lost_polls, state.short_ticks), (0, 0));
    // FreeBSD's schedule polls at the ticks only: frames wait up to a tick.
    let ticks_only = light_load(&[("kern.polling.looks", "0")]);
    let out = ticks_only.nic(1).stats;
    assert!(out.latency_max_ns > 900_000, "{out:?}");
    assert_eq!(ticks_only.dataplane().poller().state().look_cycles, 0);
}

#[test]
fn under_a_flood_nothing_looks_and_user_frac_holds() {
    for uf in ["10", "50", "90"] {
        let knobs = [("kern.polling.user_frac", uf)];
        let s = stream(
            Arrivals::Constant { pps: 2_000_000.0 },
            UserTask::Spin,
            &knobs,
        );
        let mut sim = s.build().unwrap();
        sim.run_until(200 * MS);
        let looks_before = sim.dataplane().poller().state().look_cycles;
        let user = user_percent_until(&mut sim, 1_200 * MS);
        let want: f64 = uf.parse().unwrap();
        assert!(
            (user - want).abs() <= 5.0,
            "user_frac={uf}: user got {user:.1}%"
        );
        let looks = sim.dataplane().poller().state().look_cycles - looks_before;
        assert_eq!(looks, 0, "user_frac={uf}");
        check_conservation(&sim).unwrap();
    }
}

#[test]
fn an_idle_device_takes_no_look_and_polling_goes_quiet() {
    let s = stream(Arrivals::None, UserTask::None, &[]);
    let mut sim = s.build().unwrap();
    sim.run_until(500 * MS);
    let state = *sim.dataplane().poller().state();
    assert_eq!(state.look_cycles, 0);
    assert!(state.quiet, "{state:?}");
}
