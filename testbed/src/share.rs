//! The seed's promise on real traffic: on the TAP testbed, under a flood from gen, a
//! CPU-bound competitor pinned to the poll CPU keeps `kern.polling.user_frac` percent of
//! it while polld polls, and is starved while polld takes interrupts.
//!
//! On TAP every bit of receive work happens inside polld's own `read()` and `write()`
//! (see `polld_dev::tap`), so polld's budget bounds all the device work, as `kern_poll`
//! does. [`measure_share`] runs one such trial: `polld run` realtime on the fwd CPU,
//! `polld gen --rate unlimited` on the gen CPU, a [`Competitor`] on the fwd CPU, and
//! measures over a window the competitor's and polld's CPU time (from their own
//! `/proc/PID/schedstat`, in ns), the delivered rate (tap1's receive counter), polld's
//! interrupts, and conservation on every interface at the end. `polld demo` and the
//! promise test both use it.

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::demo::{gen_command, last_json, wait_for, Process};
use crate::{polld_config, Devices, PolldSetup, Role, Testbed, TestbedError};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// A CPU-bound process pinned to one CPU (a shell spinning on `:`), killed on drop.
pub struct Competitor {
    child: Child,
}

impl Competitor {
    pub fn start(tb: &Testbed, cpu: usize) -> Result<Competitor, TestbedError> {
        let child = tb
            .command_in(Role::Fwd, Some(cpu), "sh")?
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting the competitor: {e}")))?;
        Ok(Competitor { child })
    }

    /// Its CPU time so far, in ns.
    pub fn cpu_ns(&self) -> u64 {
        task_cpu_ns(self.child.id(), self.child.id())
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of thread `tid` of process `pid` so far, in ns (`schedstat`'s first field);
/// 0 once it is gone.
fn task_cpu_ns(pid: u32, tid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One trial: polld's mode on both TAPs and `user_frac`.
#[derive(Clone, Debug)]
pub struct ShareTrial<'a> {
    pub mode: &'a str,
    pub user_frac: u32,
    /// Seconds of flood before the window opens (the controller settles).
    pub warm_up: f64,
    /// Seconds the shares are measured over.
    pub window: f64,
}

/// What a trial measured.
#[derive(Clone, Debug, Serialize)]
pub struct ShareRow {
    pub mode: String,
    pub user_frac: u32,
    /// `polld gen`'s sending rate over its whole run.
    pub offered_pps: f64,
    /// tap1's receive counter over the window: frames polld wrote towards sink.
    pub delivered_pps: f64,
    pub interrupts_per_sec: f64,
    /// polld's poll thread, percent of the fwd CPU over the window.
    pub polld_cpu_percent: f64,
    /// The competitor, percent of the fwd CPU over the window.
    pub competitor_percent: f64,
    /// tap0's drops over the window, by reason (rx_ring_full: the TAP's queue was full
    /// and the kernel dropped on gen's CPU).
    pub drops: Vec<(String, u64)>,
    /// rx = forwarded + local + consumed + queued + drops on every interface at the end.
    pub conserved: bool,
}

/// The knobs of a share trial. `burst_max` at FreeBSD's ceiling and the time controller,
/// so that what limits polld is `user_frac`, not a packet count: FreeBSD's default
/// `burst_max` of 150 would cap polling at 150 kpps (hz 1000).
fn knobs(user_frac: &str) -> [(&str, &str); 4] {
    [
        ("kern.polling.burst_max", "20000"),
        ("kern.polling.each_burst", "50"),
        ("kern.polling.controller", "time"),
        ("kern.polling.user_frac", user_frac),
    ]
}

/// Runs one trial on a TAP testbed. `dir` holds the trial's config and socket.
pub fn measure_share(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    cpus: (usize, usize),
    trial: &ShareTrial,
) -> Result<ShareRow, TestbedError> {
    let layout = tb.layout();
    if layout.devices != Devices::Tap {
        return Err(failed(
            "the share trial needs the TAP testbed (`polld testbed up --devices tap`)".into(),
        ));
    }
    let (gen_cpu, fwd_cpu) = cpus;
    let polld_str = polld.to_string_lossy().to_string();
    let socket = dir.join("polld.sock");
    let _ = std::fs::remove_file(&socket);
    let user_frac = trial.user_frac.to_string();
    let knobs = knobs(&user_frac);
    let config = polld_config(
        layout,
        &PolldSetup {
            backend: "tap",
            mode: trial.mode,
            socket: &socket,
            cpu: Some(fwd_cpu),
            realtime: true,
            knobs: &knobs,
        },
    );
    let config_path = dir.join("polld.toml");
    std::fs::write(&config_path, config)
        .map_err(|e| failed(format!("writing {}: {e}", config_path.display())))?;
    let mut daemon = Process::spawn(
        tb.command_in(Role::Fwd, None, &polld_str)?
            .args(["run", "--json", "-c"])
            .arg(&config_path),
        "polld run",
    )?;
    wait_for(&socket, &mut daemon)?;
    let flood_secs = (trial.warm_up + trial.window + 1.0).to_string();
    let gen = Process::spawn(
        &mut gen_command(tb, gen_cpu, &polld_str, "unlimited", &flood_secs)?,
        "polld gen",
    )?;
    let competitor = Competitor::start(tb, fwd_cpu)?;
    std::thread::sleep(Duration::from_secs_f64(trial.warm_up));

    let pid = daemon.pid();
    let sample = || -> Result<Sample, TestbedError> {
        Ok(Sample {
            at: Instant::now(),
            competitor_ns: competitor.cpu_ns(),
            polld_ns: task_cpu_ns(pid, pid),
            delivered: tb.counters(&layout.veth3.name)?.rx_packets,
            values: dev_values(&socket)?,
        })
    };
    let before = sample()?;
    std::thread::sleep(Duration::from_secs_f64(trial.window));
    let after = sample()?;
    drop(competitor);

    let mut gen = gen;
    let gen_out = gen.finish()?;
    let offered_pps = last_json(&gen_out)
        .and_then(|s| s["pps"].as_f64())
        .ok_or_else(|| failed(format!("polld gen printed no summary: {gen_out}")))?;
    let final_counters = daemon.finish()?;
    let interfaces: Value = serde_json::from_str(&final_counters)
        .map_err(|e| failed(format!("polld run --json printed {final_counters:?}: {e}")))?;

    let wall_ns = after.at.duration_since(before.at).as_nanos() as f64;
    let percent = |a: u64, b: u64| b.saturating_sub(a) as f64 * 100.0 / wall_ns;
    let per_sec = |a: u64, b: u64| b.saturating_sub(a) as f64 * 1e9 / wall_ns;
    let tap0 = &layout.veth1.name;
    let delta = |name: &str| per_sec(before.get(name), after.get(name));
    let drop_prefix = format!("dev.{tap0}.drops.");
    let drops = after
        .values
        .iter()
        .filter_map(|(n, v)| {
            let reason = n.strip_prefix(&drop_prefix)?;
            let d = v.saturating_sub(before.get(n));
            (d > 0).then(|| (reason.to_string(), d))
        })
        .collect();
    Ok(ShareRow {
        mode: trial.mode.to_string(),
        user_frac: trial.user_frac,
        offered_pps,
        delivered_pps: per_sec(before.delivered, after.delivered),
        interrupts_per_sec: delta(&format!("dev.{tap0}.interrupts")),
        polld_cpu_percent: percent(before.polld_ns, after.polld_ns),
        competitor_percent: percent(before.competitor_ns, after.competitor_ns),
        drops,
        conserved: conserved(&interfaces),
    })
}

struct Sample {
    at: Instant,
    competitor_ns: u64,
    polld_ns: u64,
    delivered: u64,
    values: Vec<(String, u64)>,
}

impl Sample {
    fn get(&self, name: &str) -> u64 {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }
}

/// polld's `dev.*` counters over the control socket.
fn dev_values(socket: &Path) -> Result<Vec<(String, u64)>, TestbedError> {
    let request = polld_control::proto::Request::List {
        prefix: "dev".into(),
    };
    match polld_control::client::request(socket, &request) {
        Ok(polld_control::proto::Response::Entries { entries }) => Ok(entries
            .into_iter()
            .filter_map(|e| Some((e.name, e.value.parse().ok()?)))
            .collect()),
        Ok(other) => Err(failed(format!("polld answered {other:?}"))),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// rx = forwarded + local + consumed + queued + every named drop but the frames the device
/// dropped before handing them up (rx_ring_full, fault_injected), on every interface of
/// `polld run --json`'s final report.
pub fn conserved(interfaces: &Value) -> bool {
    let Some(list) = interfaces.as_array() else {
        return false;
    };
    list.iter().all(|iface| {
        let Some(counters) = iface["counters"].as_array() else {
            return false;
        };
        let get = |name: &str| {
            counters
                .iter()
                .find(|c| c[0] == name)
                .and_then(|c| c[1].as_u64())
                .unwrap_or(0)
        };
        let drops: u64 = counters
            .iter()
            .filter(|c| {
                c[0].as_str().is_some_and(|n| {
                    n.starts_with("drops.")
                        && !["drops.rx_ring_full", "drops.fault_injected"].contains(&n)
                })
            })
            .filter_map(|c| c[1].as_u64())
            .sum();
        let out: u64 = ["forwarded", "local", "consumed", "queued"]
            .iter()
            .map(|n| get(n))
            .sum();
        get("rx_packets") == out + drops
    })
}
