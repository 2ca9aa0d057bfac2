//! What the simulator's tests share: one stream forwarded between two simulated NICs, and
//! the user task's share of the CPU over a window.

// Each test binary uses its own part of this module.
#![allow(dead_code)]

use polld_core::Mode;
use polld_sim::{rizzo, Arrivals, NicConfig, Scenario, Sim, UserTask};

/// `arrivals` on in0 forwarded to out0 (a 10 Mpps line), both NICs in `mode` with the seed
/// driver's costs, beside `user`, with `knobs` over polld's defaults; 300 ms, seed 7.
pub fn forwarding(
    name: &str,
    arrivals: Arrivals,
    mode: Mode,
    user: UserTask,
    knobs: &[(&str, &str)],
) -> Scenario {
    let mut input = NicConfig::new("in0", arrivals);
    input.costs = rizzo::DRIVER;
    input.route = Some("out0".into());
    input.mode = mode;
    let mut output = NicConfig::new("out0", Arrivals::None);
    output.costs = rizzo::DRIVER;
    output.line_pps = 10_000_000.0;
    output.mode = mode;
    let mut s = Scenario {
        name: name.into(),
        duration_ms: 300.0,
        seed: 7,
        user,
        knobs: Default::default(),
        costs: rizzo::CPU,
        nics: vec![input, output],
    };
    for (k, v) in knobs {
        s.knobs
            .insert(k.to_string(), toml::Value::String(v.to_string()));
    }
    s
}

/// Runs `sim` on to `until` ns and returns the user task's share of the CPU over that
/// window, percent.
pub fn user_percent_until(sim: &mut Sim, until: u64) -> f64 {
    let before = sim.split;
    sim.run_until(until);
    (sim.split.user_ns - before.user_ns) as f64 * 100.0
        / (sim.split.total() - before.total()) as f64
}
