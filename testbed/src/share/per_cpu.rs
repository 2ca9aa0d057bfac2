//! The promise on several poll CPUs ([`measure_per_cpu_shares`]): one TAP pair and one
//! competitor per CPU, each CPU with its own `user_frac`.

use std::path::Path;
use std::time::{Duration, Instant};

use polld_core::dataplane::DEV_NODE;
use polld_core::ifpoll::per_cpu_name;
use polld_core::{DropReason, IfCounters, Knobs};
use serde::Serialize;
use serde_json::Value;

use super::{failed, task_cpu_ns, Competitor};
use crate::entries::{
    conserved, dev_entry, drops_leaf, final_counter, kern_entry, polld_values, value_of,
};
use crate::polld::start_polld;
use crate::process::{last_json, Process};
use crate::{Layout, PolldSetup, Role, Testbed, TestbedError};

/// A trial on several poll CPUs: one TAP pair per CPU, each with its own `user_frac`.
#[derive(Clone, Debug)]
pub struct PerCpuTrial {
    /// Each poll CPU with the TAP pair it polls and its `net.ifpoll.N.rx.user_frac`.
    pub cpus: Vec<(usize, Layout, u32)>,
    /// Seconds of flood that fill each TAP's queue before the competitors start.
    pub fill: f64,
    pub warm_up: f64,
    pub window: f64,
}

/// What one CPU of a [`PerCpuTrial`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct PerCpuRow {
    pub cpu: usize,
    pub user_frac: u32,
    /// The competitor on this CPU, percent of it over the window.
    pub competitor_percent: f64,
    /// This CPU's poll thread, percent of it over the window.
    pub polld_cpu_percent: f64,
    /// Frames polld forwarded from this CPU's gen-side TAP per second of the window.
    pub forwarded_pps: f64,
    /// Frames still queued in the gen-side TAP when the window closed: more than zero
    /// means polld had frames waiting all through the window.
    pub backlog_left: i64,
    /// Conservation on this CPU's interfaces at the end.
    pub conserved: bool,
}

/// When, each CPU's competitor and poll thread CPU time (ns), and polld's `dev.*` counters.
type PerCpuSample = (Instant, Vec<(u64, u64)>, Vec<(String, u64)>);

/// The TAP queue length of a [`PerCpuTrial`]: the flood is queued there first.
const TAP_QUEUE: &str = "400000";

/// Runs polld on every CPU of `trial` (`[daemon] cpus`), each CPU polling its own TAP
/// pair. The generators on both CPUs first fill the gen-side TAPs' queues (every CPU of
/// a 2-CPU machine also polls, so a generator running through the window would share
/// the competitor's part of the CPU, and the competitor could not get `user_frac`), then
/// a competitor starts on each CPU and the window measures each competitor's and each
/// poll thread's CPU time while polld works through the queued flood.
pub fn measure_per_cpu_shares(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    trial: &PerCpuTrial,
) -> Result<Vec<PerCpuRow>, TestbedError> {
    let polld_str = polld.to_string_lossy().to_string();
    let socket = dir.join("polld.sock");
    let _ = std::fs::remove_file(&socket);
    // `net.ifpoll.N.rx.user_frac`: each poll CPU's copy of `kern.polling.user_frac`.
    let user_frac = kern_entry(Knobs::USER_FRAC.name);
    let fracs: Vec<(String, String)> = trial
        .cpus
        .iter()
        .map(|(cpu, _, uf)| {
            (
                per_cpu_name(*cpu, &user_frac).expect("user_frac has a copy per poll CPU"),
                uf.to_string(),
            )
        })
        .collect();
    let all_knobs: Vec<(&str, &str)> = fracs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let pairs: Vec<(&Layout, usize)> = trial.cpus.iter().map(|(c, l, _)| (l, *c)).collect();
    let config = crate::polld::polld_config_per_cpu(
        &pairs,
        &PolldSetup {
            backend: "tap",
            mode: "polling",
            socket: &socket,
            cpu: None,
            realtime: true,
            knobs: &all_knobs,
        },
    );
    for (_, layout, _) in &trial.cpus {
        let tap = &layout.veth0;
        polld_dev::netns::ip(&[
            "-n",
            &tap.ns,
            "link",
            "set",
            &tap.name,
            "txqueuelen",
            TAP_QUEUE,
        ])
        .map_err(|e| failed(format!("txqueuelen of {}: {e}", tap.name)))?;
    }
    let mut daemon = start_polld(tb, &polld_str, dir, &config, &socket)?;
    let mut gens = Vec::new();
    for (cpu, layout, _) in &trial.cpus {
        gens.push(flood(tb, &polld_str, layout, *cpu, trial.fill)?);
    }
    let mut sent = Vec::new();
    for gen in &mut gens {
        let out = gen.wait()?;
        let frames = last_json(&out)
            .and_then(|s| s["frames"].as_u64())
            .ok_or_else(|| failed(format!("polld gen printed no summary: {out}")))?;
        sent.push(frames);
    }
    let competitors = trial
        .cpus
        .iter()
        .map(|(cpu, _, _)| Competitor::start(tb, *cpu))
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::sleep(Duration::from_secs_f64(trial.warm_up));
    let pid = daemon.pid();
    let threads: Vec<u32> = trial
        .cpus
        .iter()
        .map(|(cpu, _, _)| thread_named(pid, &format!("polld-cpu{cpu}")))
        .collect::<Result<_, _>>()?;
    let sample = || -> Result<PerCpuSample, TestbedError> {
        let at = Instant::now();
        let ns = competitors
            .iter()
            .zip(&threads)
            .map(|(c, tid)| (c.cpu_ns(), task_cpu_ns(*tid)))
            .collect();
        Ok((at, ns, polld_values(&socket, DEV_NODE)?))
    };
    let before = sample()?;
    std::thread::sleep(Duration::from_secs_f64(trial.window));
    let after = sample()?;
    drop(competitors);
    let final_counters = daemon.finish()?;
    let interfaces: Value = serde_json::from_str(&final_counters)
        .map_err(|e| failed(format!("polld run --json printed {final_counters:?}: {e}")))?;

    let wall_ns = after.0.duration_since(before.0).as_nanos() as f64;
    let percent = |a: u64, b: u64| b.saturating_sub(a) as f64 * 100.0 / wall_ns;
    let final_of = |ifname: &str, counter: &str| -> u64 {
        interfaces
            .as_array()
            .and_then(|l| l.iter().find(|i| i["name"] == ifname))
            .map_or(0, |i| final_counter(i, counter))
    };
    Ok(trial
        .cpus
        .iter()
        .enumerate()
        .map(|(k, (cpu, layout, user_frac))| {
            let rx = &layout.veth1.name;
            let forwarded = dev_entry(rx, IfCounters::FORWARDED.name);
            let received = value_of(&after.2, &dev_entry(rx, IfCounters::RX_PACKETS.name));
            let dropped = final_of(rx, &drops_leaf(DropReason::RxRingFull.name()));
            let mine: Vec<Value> = interfaces
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter(|i| i["name"] == *rx || i["name"] == layout.veth2.name)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            PerCpuRow {
                cpu: *cpu,
                user_frac: *user_frac,
                competitor_percent: percent(before.1[k].0, after.1[k].0),
                polld_cpu_percent: percent(before.1[k].1, after.1[k].1),
                forwarded_pps: (value_of(&after.2, &forwarded) - value_of(&before.2, &forwarded))
                    as f64
                    * 1e9
                    / wall_ns,
                backlog_left: sent[k] as i64 - dropped as i64 - received as i64,
                conserved: mine.len() == 2 && conserved(&Value::Array(mine)),
            }
        })
        .collect())
}

/// The thread of process `pid` named `name` (its `comm`).
fn thread_named(pid: u32, name: &str) -> Result<u32, TestbedError> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| failed(format!("listing polld's threads: {e}")))?;
    tasks
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.trim() == name)
        })
        .ok_or_else(|| failed(format!("polld has no thread {name}")))
}

/// `polld gen --rate unlimited` from `cpu` for `seconds`, from gen's TAP of `layout`'s pair
/// to the unowned destination behind it.
fn flood(
    tb: &Testbed,
    polld: &str,
    layout: &Layout,
    cpu: usize,
    seconds: f64,
) -> Result<Process, TestbedError> {
    let (src, rx) = (&layout.veth0, &layout.veth1);
    let (src_ip, dst_ip) = (src.addr.to_string(), layout.unowned_dst.to_string());
    Process::spawn(
        tb.command_ahead_in(Role::Gen, Some(cpu), polld)?.args([
            "gen",
            &src.name,
            "--json",
            "-i",
            "0",
            "--rate",
            "unlimited",
            "--duration",
            &seconds.to_string(),
            "--src-mac",
            &src.mac,
            "--dst-mac",
            &rx.mac,
            "--src-ip",
            &src_ip,
            "--dst-ip",
            &dst_ip,
        ]),
        "polld gen",
    )
}
