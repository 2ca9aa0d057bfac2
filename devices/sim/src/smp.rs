//! Several virtual CPUs, as `polld run` with `[daemon] cpus` runs one poll thread per real
//! CPU (DragonFly's ifpoll, docs/algorithm.md §8).
//!
//! Each CPU is a [`Sim`] of its own: its NICs (its queues), its own [`polld_core::Poller`]
//! with its own tick, burst and `user_frac` accounting, its own user task. polld's poll
//! threads share nothing (no frame is handed between CPUs), so the machine is the CPUs
//! side by side on the same span of virtual time, and each is run to the end on its own
//! clock.
//!
//! # The cost model
//!
//! Every CPU pays the single-CPU costs of [`crate::CpuCosts`] and [`crate::DriverCosts`]:
//! per interrupt, tick, poll call, descriptor, forwarded frame. Nothing is shared, so
//! nothing costs more with more CPUs: no lock, no cache line bouncing between CPUs, no
//! memory bandwidth limit, and the flows spread evenly over the queues (an ideal RSS
//! hash). Under this model a CPU's share and throughput do not depend on the other CPUs;
//! what the [`scaling`] table shows is how a fixed offered load divides over more CPUs.
//!
//! Knobs: `kern.polling.*` applies to every CPU, `net.ifpoll.N.*` to CPU N only.

use polld_core::ifpoll::kern_name;

use crate::cpu::{CpuCosts, Sim, UserTask};
use crate::nic::{Arrivals, DriverCosts, NicConfig};
use crate::scenario::{check_conservation, report, Report, Scenario};

/// The output port's line rate in the scaling table: 10 Gbit/s of 64-byte frames.
const LINE_PPS: f64 = 14_880_952.0;

/// What each CPU of a multi-CPU run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SmpReport {
    pub cpus: Vec<Report>,
}

/// Applies `name = value` as polld does with several poll CPUs: `net.ifpoll.N.*` to CPU
/// N as its `kern.polling.*`, anything else to every CPU.
pub fn set_knob(cpus: &mut [Scenario], name: &str, value: &str) -> Result<(), String> {
    let value = toml::Value::String(value.to_string());
    match kern_name(name) {
        Some((cpu, kern)) => {
            let n = cpus.len();
            let scenario = cpus.get_mut(cpu).ok_or_else(|| {
                format!(
                    "{name}: CPU {cpu} is not simulated; the CPUs are 0..{}",
                    n - 1
                )
            })?;
            scenario.knobs.insert(kern, value);
        }
        None => {
            for scenario in cpus {
                scenario.knobs.insert(name.to_string(), value.clone());
            }
        }
    }
    Ok(())
}

/// Runs every CPU's scenario to its end; fails naming the CPU whose accounting does not
/// hold (`scenario::check_conservation`).
pub fn run(cpus: &[Scenario]) -> Result<SmpReport, String> {
    let reports = cpus
        .iter()
        .enumerate()
        .map(|(k, scenario)| {
            let sim = run_cpu(scenario).map_err(|e| format!("CPU {k}: {e}"))?;
            Ok(report(&format!("CPU{k} {}", scenario.name), &sim))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(SmpReport { cpus: reports })
}

fn run_cpu(scenario: &Scenario) -> Result<Sim, String> {
    scenario.validate()?;
    let mut sim = scenario.build()?;
    sim.run_until((scenario.duration_ms * 1e6) as u64);
    check_conservation(&sim)?;
    Ok(sim)
}

/// One CPU of the scaling table: an input queue at `pps` forwarding to an output, polled,
/// beside a CPU-bound user process, with `user_frac`.
fn scaling_cpu(pps: f64, user_frac: u32, duration_ms: f64) -> Scenario {
    let mut input = NicConfig::new("rx", Arrivals::Constant { pps });
    input.route = Some("tx".into());
    input.mode = polld_core::Mode::Polling;
    let mut output = NicConfig::new("tx", Arrivals::None);
    output.mode = polld_core::Mode::Polling;
    // A 10 Gbit/s port (the default is 100 Mbit/s): the CPU, not the wire, is the limit.
    output.line_pps = LINE_PPS;
    // Forwarding in the poll handler, so all of a frame's work is inside the budget; the
    // time controller, which reaches its budget within a few ticks (the classic one
    // climbs by one frame a tick, and the climb would be most of a short run).
    let knobs = [
        ("kern.polling.user_frac", user_frac.to_string()),
        ("kern.polling.burst_max", "1000".to_string()),
        ("kern.polling.controller", "time".to_string()),
        ("net.inet.ip.fastforwarding", "1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), toml::Value::String(v)))
    .collect();
    Scenario {
        name: format!("{pps:.0} pps"),
        duration_ms,
        seed: 1,
        user: UserTask::Spin,
        knobs,
        costs: CpuCosts::default(),
        nics: vec![input, output],
    }
}

/// One row of the scaling table.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ScalingRow {
    pub cpus: usize,
    /// Offered to each CPU's queue, frames per second.
    pub offered_per_cpu: f64,
    /// Forwarded to the wire over all CPUs, frames per second.
    pub delivered: f64,
    /// The user process's share of its CPU: the lowest and the highest over the CPUs.
    pub user_min: f64,
    pub user_max: f64,
    /// Device work's share of its CPU, the highest over the CPUs.
    pub device_max: f64,
    /// Frames dropped at the input rings (not polled in time), per second, all CPUs.
    pub ring_drops: f64,
}

/// The scaling table: `total_pps` spread evenly over 1, 2, 4, 8 and 16 CPUs (one queue
/// each), every CPU with `user_frac` and a user process.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Scaling {
    pub total_pps: f64,
    pub user_frac: u32,
    pub simulated_ms: f64,
    pub costs: CpuCosts,
    pub driver: DriverCosts,
    pub rows: Vec<ScalingRow>,
}

/// The CPU counts of the scaling table.
pub const SCALING_CPUS: [usize; 5] = [1, 2, 4, 8, 16];

/// Runs the scaling table (module docs for the cost model).
pub fn scaling(total_pps: f64, user_frac: u32, duration_ms: f64) -> Result<Scaling, String> {
    let rows = SCALING_CPUS
        .iter()
        .map(|&n| {
            let per_cpu = total_pps / n as f64;
            let cpus: Vec<Scenario> = (0..n)
                .map(|_| scaling_cpu(per_cpu, user_frac, duration_ms))
                .collect();
            let r = run(&cpus)?;
            let users = r.cpus.iter().map(|c| c.cpu_pct.user);
            let device = |c: &Report| 100.0 - c.cpu_pct.user - c.cpu_pct.idle;
            let secs = duration_ms / 1e3;
            let ring_drops: u64 = r
                .cpus
                .iter()
                .flat_map(|c| c.nics.iter().map(|n| n.nic.rx_ring_full))
                .sum();
            Ok(ScalingRow {
                cpus: n,
                offered_per_cpu: per_cpu,
                delivered: r.cpus.iter().map(|c| c.delivered_pps).sum(),
                user_min: users.clone().fold(f64::INFINITY, f64::min),
                user_max: users.fold(0.0, f64::max),
                device_max: r.cpus.iter().map(device).fold(0.0, f64::max),
                ring_drops: ring_drops as f64 / secs,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Scaling {
        total_pps,
        user_frac,
        simulated_ms: duration_ms,
        costs: CpuCosts::default(),
        driver: DriverCosts::default(),
        rows,
    })
}

impl Scaling {
    /// The table for people, with the cost model it assumes.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let c = &self.costs;
        let d = &self.driver;
        let _ = writeln!(
            o,
            "{:.0} pps offered in all, spread evenly over one queue per CPU; every CPU polls its queue \
             with user_frac {} beside a CPU-bound process, forwarding to a 10 Gbit/s port; {:.0} ms of SIMULATED time per CPU",
            self.total_pps, self.user_frac, self.simulated_ms
        );
        let _ = writeln!(
            o,
            "cost model, per CPU and the same on every CPU (nothing shared: no locks, no cache or memory \
             contention, an even RSS spread): tick {} ns, forwarding {} ns/frame, driver {} ns per \
             poll call + {} ns per frame received + {} ns per frame sent + {} ns per descriptor reclaimed",
            c.tick_ns, c.fwd_ns, d.call_ns, d.rx_ns, d.tx_ns, d.reclaim_ns
        );
        let _ = writeln!(
            o,
            "{:>4} {:>14} {:>14} {:>18} {:>12} {:>14}",
            "cpus", "offered/cpu", "delivered", "user % (min-max)", "device % max", "ring drops/s"
        );
        for r in &self.rows {
            let _ = writeln!(
                o,
                "{:>4} {:>14.0} {:>14.0} {:>18} {:>12.1} {:>14.0}",
                r.cpus,
                r.offered_per_cpu,
                r.delivered,
                format!("{:.1}-{:.1}", r.user_min, r.user_max),
                r.device_max,
                r.ring_drops
            );
        }
        o
    }
}
