//! Scenarios: what to simulate, from a TOML file or built in code, and what came out.
//!
//! ```toml
//! name = "flood"
//! duration_ms = 1000
//! user = { kind = "spin" }            # none | spin | generator (with nic = N)
//! [knobs]
//! profile = "freebsd"                 # the knobs' defaults, as in polld run's config
//! "kern.polling.user_frac" = 50
//! "net.inet.ip.fastforwarding" = 0
//! [costs]                             # CPU costs in ns (see CpuCosts)
//! intr_ns = 2000
//! [[nic]]
//! name = "sim0"
//! arrivals = { kind = "poisson", pps = 300000 }
//! mode = "polling"
//! route = "sim1"
//! [[nic]]
//! name = "sim1"
//! ```

use std::collections::BTreeMap;

use polld_core::knobs::PROFILE_KEY;
use polld_core::{DropCounters, IfCounters, Mode, PollState, Poller, Profile, TxDrop};

use crate::cpu::{CpuCosts, CpuSplit, Sim, UserTask};
use crate::nic::{NicConfig, NicStats};

/// A scenario: NICs, routes, modes, knobs, costs, a user task and a duration.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    /// Virtual time to simulate.
    pub duration_ms: f64,
    /// Seed for Poisson arrivals.
    #[serde(default)]
    pub seed: u64,
    #[serde(default)]
    pub user: UserTask,
    /// Sysctl assignments applied before the start, by FreeBSD name, over the knob
    /// profile named by `profile` (polld's defaults without it).
    #[serde(default)]
    pub knobs: BTreeMap<String, toml::Value>,
    #[serde(default)]
    pub costs: CpuCosts,
    #[serde(rename = "nic")]
    pub nics: Vec<NicConfig>,
}

fn default_name() -> String {
    "scenario".to_string()
}

/// What one NIC saw and did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NicReport {
    pub name: String,
    pub mode: Mode,
    pub nic: NicStats,
    pub counters: IfCounters,
    /// Received frames per second.
    pub rx_pps: f64,
    /// Frames per second that left on the wire.
    pub tx_pps: f64,
    /// Mean and worst arrival-to-wire latency of forwarded frames, microseconds.
    pub latency_avg_us: f64,
    pub latency_max_us: f64,
}

/// The outcome of a scenario.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    pub scenario: String,
    /// Simulated (virtual) seconds: not wall-clock time.
    pub simulated_s: f64,
    pub nics: Vec<NicReport>,
    /// CPU split in percent.
    pub cpu_pct: CpuPct,
    pub cpu_ns: CpuSplit,
    /// Frames forwarded that left on the wire, per second, over all NICs.
    pub delivered_pps: f64,
    /// Frames the user generator sent per second.
    pub generated_pps: f64,
    pub poll: PollState,
    pub ticks: u64,
}

/// The CPU split in percent of the simulated time.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct CpuPct {
    pub interrupt: f64,
    pub kernel: f64,
    pub busy: f64,
    pub user: f64,
    pub idle_poll: f64,
    pub idle: f64,
}

impl Scenario {
    /// Parses a scenario file; errors name the file, the line and the field.
    pub fn from_toml(path: &str, text: &str) -> Result<Scenario, String> {
        let s: Scenario = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|sp| text[..sp.start].matches('\n').count() + 1)
                .map_or(String::new(), |l| format!(", line {l}"));
            format!("{path}{line}: {}", e.message())
        })?;
        s.validate().map_err(|e| format!("{path}: {e}"))?;
        Ok(s)
    }

    /// Checks the scenario as a whole: names, routes, knobs, the user task.
    pub fn validate(&self) -> Result<(), String> {
        if self.duration_ms.is_nan() || self.duration_ms <= 0.0 || self.duration_ms > 3_600_000.0 {
            return Err("duration_ms must be > 0 and at most one hour".into());
        }
        if self.nics.is_empty() {
            return Err("a scenario needs at least one [[nic]]".into());
        }
        for (i, nic) in self.nics.iter().enumerate() {
            nic.validate()?;
            if self.nics[..i].iter().any(|n| n.name == nic.name) {
                return Err(format!("nic '{}' is defined twice", nic.name));
            }
        }
        self.routes()?;
        if let UserTask::Generator { nic } = self.user {
            if nic >= self.nics.len() {
                return Err(format!(
                    "user generator sends on nic {nic}, but there are only {} nics (0-based)",
                    self.nics.len()
                ));
            }
        }
        self.build().map(drop)
    }

    /// Output NIC index for each NIC (`None` = local delivery).
    fn routes(&self) -> Result<Vec<Option<usize>>, String> {
        self.nics
            .iter()
            .map(|n| match n.route.as_deref() {
                None | Some("local") => Ok(None),
                Some(to) => self
                    .nics
                    .iter()
                    .position(|m| m.name == to)
                    .map(Some)
                    .ok_or_else(|| {
                        format!(
                            "nic '{}': route '{to}' names no nic (use a nic name or `local`)",
                            n.name
                        )
                    }),
            })
            .collect()
    }

    /// Builds the simulation: knobs applied over their profile, modes set.
    pub fn build(&self) -> Result<Sim, String> {
        let profile = match self.knobs.get(PROFILE_KEY) {
            None => Profile::default(),
            Some(v) => v.as_str().and_then(Profile::named).ok_or_else(|| {
                format!("[knobs] profile = {v}: not a profile (\"polld\" or \"freebsd\")")
            })?,
        };
        let mut sim = Sim::new(
            Poller::new(profile.knobs()),
            self.nics.clone(),
            self.routes()?,
            self.costs,
            self.user,
            self.seed,
        );
        let dp = sim.dataplane_mut();
        for (name, value) in self.knobs.iter().filter(|(n, _)| *n != PROFILE_KEY) {
            let v = match value {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            dp.sysctl_set(name, &v)
                .map_err(|e| format!("[knobs] {e}"))?;
        }
        for (i, nic) in self.nics.iter().enumerate() {
            dp.set_mode(i, nic.mode).map_err(|e| e.to_string())?;
        }
        Ok(sim)
    }

    /// Runs the scenario to the end and reports.
    pub fn run(&self) -> Result<Report, String> {
        let mut sim = self.build()?;
        sim.run_until((self.duration_ms * 1e6) as u64);
        Ok(report(&self.name, &sim))
    }
}

/// Builds the report of a simulation at its current time.
pub fn report(name: &str, sim: &Sim) -> Report {
    let secs = sim.now() as f64 / 1e9;
    let per_s = |n: u64| n as f64 / secs.max(1e-12);
    let nics: Vec<NicReport> = sim
        .dataplane()
        .interfaces()
        .iter()
        .map(|f| {
            let s = f.dev().stats;
            NicReport {
                name: f.dev().config().name.clone(),
                mode: f.mode(),
                nic: s,
                counters: f.counters(),
                rx_pps: per_s(s.received),
                tx_pps: per_s(s.tx_wire),
                latency_avg_us: s.latency_sum_ns as f64 / s.stamped.max(1) as f64 / 1e3,
                latency_max_us: s.latency_max_ns as f64 / 1e3,
            }
        })
        .collect();
    let wire: u64 = nics.iter().map(|n| n.nic.tx_wire).sum();
    let c = sim.split;
    Report {
        scenario: name.to_string(),
        simulated_s: secs,
        delivered_pps: per_s(wire.saturating_sub(sim.generated)),
        generated_pps: per_s(sim.generated),
        cpu_pct: CpuPct {
            interrupt: c.pct(c.intr_ns),
            kernel: c.pct(c.kernel_ns),
            busy: c.pct(c.busy_ns),
            user: c.pct(c.user_ns),
            idle_poll: c.pct(c.idle_poll_ns),
            idle: c.pct(c.idle_ns),
        },
        cpu_ns: c,
        nics,
        poll: *sim.dataplane().poller().state(),
        ticks: sim.ticks,
    }
}

/// Checks that every frame is accounted for, at the NIC and at the dataplane:
/// `arrived = rx_ring_full + received + in the ring`, `received = rx_packets`,
/// `rx_packets = forwarded + local + consumed + drops + queued`, and every frame taken by
/// a transmit side either left on the wire, is still in the ring, or was dropped as too
/// long and counted in the output's `tx_drops`.
pub fn check_conservation(sim: &Sim) -> Result<(), String> {
    let mut forwarded = 0;
    let mut tx_taken = 0;
    for f in sim.dataplane().interfaces() {
        let (s, c, name) = (f.dev().stats, f.counters(), &f.dev().config().name);
        if s.arrived != s.rx_ring_full + s.received + f.dev().rx_backlog() as u64 {
            return Err(format!(
                "{name}: arrived {} != ring drops + received + backlog",
                s.arrived
            ));
        }
        if s.received != c.rx_packets {
            return Err(format!(
                "{name}: NIC handed {} frames, dataplane counted {}",
                s.received, c.rx_packets
            ));
        }
        if c.unaccounted() != 0 {
            return Err(format!(
                "{name}: {} received frames unaccounted: {c:?}",
                c.unaccounted()
            ));
        }
        if c.drops.get(polld_core::DropReason::RxRingFull) != s.rx_ring_full {
            return Err(format!("{name}: ring drops not folded into the counters"));
        }
        if s.tx_queued != s.tx_wire + f.dev().tx_backlog() as u64 {
            return Err(format!("{name}: tx ring lost frames"));
        }
        if c.tx_drops.get(TxDrop::TooLong) != s.tx_too_long {
            return Err(format!(
                "{name}: the NIC dropped {} frames too long to send, the dataplane counted {}",
                s.tx_too_long,
                c.tx_drops.get(TxDrop::TooLong)
            ));
        }
        forwarded += c.forwarded;
        tx_taken += s.tx_queued + s.tx_too_long;
    }
    if tx_taken != forwarded + sim.generated {
        return Err(format!(
            "transmit sides took {tx_taken} frames (queued or dropped), but {forwarded} were forwarded and {} generated",
            sim.generated
        ));
    }
    Ok(())
}

/// Formats drop counters as `reason=n, ...` (or `-`). The simulator's stage declares no
/// drop reasons of its own, so only the dataplane's can be non-zero.
pub fn drops_line(d: &DropCounters) -> String {
    let parts: Vec<String> = d
        .nonzero(&[])
        .map(|(r, n)| format!("{}={n}", r.name()))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

impl Report {
    /// A human-readable table.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let _ = writeln!(
            o,
            "scenario {}: {:.3} s of SIMULATED time ({} ticks)",
            self.scenario, self.simulated_s, self.ticks
        );
        let _ = writeln!(
            o,
            "{:<8} {:<9} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8}  drops",
            "nic", "mode", "arrived", "rx pps", "tx pps", "intr/s", "polls/s", "lat us"
        );
        for n in &self.nics {
            let per_s = |v: u64| v as f64 / self.simulated_s;
            let _ = writeln!(
                o,
                "{:<8} {:<9} {:>10} {:>10.0} {:>10.0} {:>9.0} {:>9.0} {:>8.1}  {}",
                n.name,
                n.mode.name(),
                n.nic.arrived,
                n.rx_pps,
                n.tx_pps,
                per_s(n.counters.interrupts + n.nic.tx_interrupts),
                per_s(n.counters.polls),
                n.latency_avg_us,
                drops_line(&n.counters.drops)
            );
        }
        let c = &self.cpu_pct;
        let _ = writeln!(
            o,
            "cpu: interrupt {:.1}%  kernel {:.1}%  busy {:.1}%  user {:.1}%  idle-poll {:.1}%  idle {:.1}%",
            c.interrupt, c.kernel, c.busy, c.user, c.idle_poll, c.idle
        );
        let _ = writeln!(
            o,
            "delivered {:.0} pps, generated {:.0} pps; burst {} kern_load {}% lost_polls {} stalled {}",
            self.delivered_pps,
            self.generated_pps,
            self.poll.burst,
            self.poll.kern_load,
            self.poll.lost_polls,
            self.poll.stalled
        );
        o
    }
}
