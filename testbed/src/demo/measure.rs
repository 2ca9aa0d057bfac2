//! One trial of the demo ([`measure`]): a forwarder in fwd (polld, the kernel or testpmd),
//! a load from gen (`polld gen` or iperf3 TCP), and what it cost, read from polld's
//! counters over its control socket, from `/proc` and from the kernel's counters.

use std::path::Path;
use std::time::{Duration, Instant};

use polld_control::daemon::{daemon_entry, TickLateness};
use polld_core::IfCounters;
use polld_stat::sample::{clock_ticks, CpuTimes};
use serde_json::Value;

use super::{DemoRow, SinkLatency, TcpResult};
use crate::entries::{self, value_of};
use crate::ledger::{Ledger, Sent, StreamTrail};
use crate::process::{last_json, Process};
use crate::testpmd::Testpmd;
use crate::{polld_config, IpFamily, PolldSetup, Role, Testbed, TestbedError, UpOptions};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Who forwards in fwd during a trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Forwarder<'a> {
    /// `polld run` with this backend, mode and `[knobs]` on both interfaces.
    Polld {
        backend: &'a str,
        mode: &'a str,
        knobs: &'a [(&'a str, &'a str)],
    },
    /// The kernel's own IPv4 forwarding (`ip_forward=1`), no polld.
    Kernel,
    /// DPDK's testpmd (`program`, see [`crate::testpmd::program`]) in `mac` mode on
    /// `backend` (`af_xdp` or `af_packet`), see [`crate::testpmd`].
    Testpmd { program: &'a Path, backend: &'a str },
}

/// The forwarder of a trial, once started.
enum Running {
    Polld(Process),
    Testpmd(Box<Testpmd>),
    Kernel,
}

/// One measured run: a forwarder, and a load for `duration` seconds.
#[derive(Clone, Debug)]
pub struct Trial<'a> {
    pub label: String,
    pub forwarder: Forwarder<'a>,
    pub load: Load<'a>,
    pub duration: f64,
}

/// What goes through the forwarder during a trial.
#[derive(Clone, Copy, Debug)]
pub enum Load<'a> {
    /// `polld gen` from gen at `rate` (`200k`, `unlimited`, ...), its smallest frames of
    /// `family` (IPv6: to the layout's unowned IPv6 destination). With `sink`, delivered
    /// frames are counted (and timed) by `polld sink` in sink, end to end, though the sink
    /// needs CPU too; otherwise by the output's own rx counter, as the baseline did.
    Frames {
        rate: &'a str,
        sink: bool,
        family: IpFamily,
    },
    /// One iperf3 TCP stream from gen to sink (the server pinned to the sink CPU).
    Tcp,
}

/// Runs one trial on `tb` and measures it. `dir` holds the trial's config and socket.
pub fn measure(
    tb: &Testbed,
    options: &UpOptions,
    polld: &Path,
    dir: &Path,
    trial: &Trial,
) -> Result<DemoRow, TestbedError> {
    let polld_str = polld.to_string_lossy().to_string();
    let layout = tb.layout();
    let input = &layout.veth1.name;
    let kernel_forwarding = trial.forwarder == Forwarder::Kernel;
    set_ip_forward(tb, kernel_forwarding)?;
    let socket = dir.join("polld.sock");
    let running = match trial.forwarder {
        Forwarder::Polld {
            backend,
            mode,
            knobs,
        } => {
            let config = polld_config(
                tb.layout(),
                &PolldSetup {
                    backend,
                    mode,
                    socket: &socket,
                    cpu: Some(options.cpus.fwd),
                    // The tick must preempt the kernel's receive work on the same CPU,
                    // as a clock interrupt does.
                    realtime: true,
                    knobs,
                },
            );
            Running::Polld(crate::polld::start_polld(
                tb, &polld_str, dir, &config, &socket,
            )?)
        }
        Forwarder::Testpmd { program, backend } => Running::Testpmd(Box::new(Testpmd::start(
            tb,
            program,
            options.cpus.fwd,
            backend,
        )?)),
        Forwarder::Kernel => Running::Kernel,
    };
    let duration = trial.duration.to_string();
    let sink_duration = (trial.duration + 2.0).to_string();
    let mut sink = if matches!(trial.load, Load::Frames { sink: true, .. }) {
        Some(Process::spawn(
            tb.command_in(Role::Sink, Some(options.cpus.sink), &polld_str)?
                // AF_XDP: the sink sees each frame when the kernel delivers it, where
                // AF_PACKET's TPACKET_V3 holds it until its block retires (up to 1 ms).
                .args([
                    "sink",
                    &layout.veth3.name,
                    "--backend",
                    "af_xdp",
                    "--json",
                    "-i",
                    "0",
                    "--duration",
                    &sink_duration,
                ]),
            "polld sink",
        )?)
    } else {
        None
    };
    let mut tcp_server = match trial.load {
        Load::Tcp => Some(Process::spawn(
            tb.command_in(Role::Sink, Some(options.cpus.sink), "iperf3")?
                .args(["-s", "-1", "-p", TCP_PORT]),
            "iperf3 -s",
        )?),
        Load::Frames { .. } => None,
    };
    std::thread::sleep(Duration::from_millis(500));
    let snapshot = |running: &Running| match running {
        Running::Polld(d) => Snapshot::take(Some(&socket), d.pid(), options.cpus.fwd),
        Running::Testpmd(t) => Snapshot::take(None, t.pid(), options.cpus.fwd),
        Running::Kernel => Ok(Snapshot::cpu_only(options.cpus.fwd)),
    };
    let fwd_ifaces = interfaces_in(tb, &tb.layout().fwd_ns);
    let sink_ifaces = interfaces_in(tb, &tb.layout().sink_ns);
    let kernel_rx_before = kernel_rx_ns(&tb.layout().fwd_ns, &fwd_ifaces);
    let sink_rx_before = kernel_rx_ns(&tb.layout().sink_ns, &sink_ifaces);
    // The end-to-end ledger, when polld forwards frames from gen.
    let trail = match (&running, trial.load) {
        (Running::Polld(_), Load::Frames { .. }) => StreamTrail::start(layout)?,
        _ => None,
    };
    let before = snapshot(&running)?;
    let veth3_before = tb.counters(&layout.veth3.name)?.rx_packets;
    let traffic = match trial.load {
        Load::Frames { rate, family, .. } => {
            gen_command(tb, options.cpus.gen, &polld_str, rate, &duration)?
                .args(layout.gen_family_args(family))
                .output()
                .map_err(|e| failed(format!("polld gen: {e}")))?
        }
        Load::Tcp => tb
            .command_in(Role::Gen, Some(options.cpus.gen), "iperf3")?
            .args(["-c", &layout.veth3.addr.to_string(), "-p", TCP_PORT])
            .args(["-t", &duration, "-J"])
            .output()
            .map_err(|e| failed(format!("iperf3 -c: {e}")))?,
    };
    let after = snapshot(&running)?;
    let kernel_rx_after = kernel_rx_ns(&tb.layout().fwd_ns, &fwd_ifaces);
    let sink_rx_after = kernel_rx_ns(&tb.layout().sink_ns, &sink_ifaces);
    let veth3_after = tb.counters(&layout.veth3.name)?.rx_packets;
    let report = |what: &str| {
        let stdout = String::from_utf8_lossy(&traffic.stdout);
        match trial.load {
            Load::Frames { .. } => last_json(&stdout),
            Load::Tcp => serde_json::from_str::<Value>(&stdout).ok(),
        }
        .filter(|v| v["error"].is_null())
        .ok_or_else(|| {
            failed(format!(
                "{what} failed: {stdout} {}",
                String::from_utf8_lossy(&traffic.stderr)
            ))
        })
    };
    let (offered_pps, seconds, tcp, gen_ip_version) = match trial.load {
        Load::Frames { .. } => {
            let summary = report("polld gen")?;
            (
                summary["pps"].as_f64().unwrap_or(0.0),
                summary["seconds"].as_f64().unwrap_or(trial.duration),
                None,
                summary["ip_version"]
                    .as_u64()
                    .and_then(|v| u8::try_from(v).ok()),
            )
        }
        Load::Tcp => {
            let report = report("iperf3 -c")?;
            if let Some(server) = tcp_server.as_mut() {
                server.finish()?;
            }
            let end = &report["end"];
            let tcp = TcpResult {
                mbit_per_s: end["sum_received"]["bits_per_second"]
                    .as_f64()
                    .unwrap_or(0.0)
                    / 1e6,
                retransmits: end["sum_sent"]["retransmits"].as_u64().unwrap_or(0),
                mean_rtt_us: end["streams"][0]["sender"]["mean_rtt"]
                    .as_u64()
                    .unwrap_or(0),
            };
            (0.0, trial.duration, Some(tcp), None)
        }
    };
    let wall = after.at.duration_since(before.at).as_secs_f64();
    let (delivered_pps, latency) = match sink.as_mut() {
        Some(sink) => {
            let out = sink.finish()?;
            let summary = last_json(&out)
                .ok_or_else(|| failed(format!("polld sink printed no summary: {out}")))?;
            (
                summary["frames"].as_f64().unwrap_or(0.0) / seconds,
                SinkLatency::of(&summary),
            )
        }
        None => (veth3_after.saturating_sub(veth3_before) as f64 / wall, None),
    };
    let sent = match &trail {
        Some(trail) => {
            let sent = Sent::of(&report("polld gen")?);
            trail.drain(sent)?;
            trail.wait_for_polld(&socket)?;
            sent
        }
        None => Sent::default(),
    };
    let (ledger, conserved, testpmd) = match running {
        Running::Polld(mut d) => {
            let report = d.finish()?;
            let interfaces: Value = serde_json::from_str(&report)
                .map_err(|e| failed(format!("polld run --json printed {report:?}: {e}")))?;
            let ledger = match &trail {
                Some(trail) => Some(trail.ledger(sent, &interfaces)?),
                None => None,
            };
            let conserved =
                entries::conserved(&interfaces) && ledger.as_ref().is_none_or(Ledger::balanced);
            (ledger, Some(conserved), None)
        }
        Running::Testpmd(t) => (None, None, Some(t.finish(tb)?)),
        Running::Kernel => (None, None, None),
    };
    if kernel_forwarding {
        set_ip_forward(tb, false)?;
    }
    let delta = |name: &str| after.get(name).saturating_sub(before.get(name));
    let drops = after
        .values
        .iter()
        .filter_map(|(n, v)| {
            let reason = entries::drop_reason(n, input)?;
            Some((reason.to_string(), v.saturating_sub(before.get(n))))
        })
        .filter(|(_, v)| *v > 0)
        .collect();
    let cpu_busy = busy_percent(&before, &after);
    let steal_ticks = match (before.cpu_busy, after.cpu_busy) {
        (Some(b), Some(a)) => a.steal.saturating_sub(b.steal),
        _ => 0,
    };
    Ok(DemoRow {
        mode: trial.label.clone(),
        gen_ip_version,
        offered_pps,
        delivered_pps,
        seconds: wall,
        polld_cpu_percent: after.cpu_ns.saturating_sub(before.cpu_ns) as f64 / 1e9 / wall * 100.0,
        kernel_rx_cpu_percent: kernel_rx_after.saturating_sub(kernel_rx_before) as f64 / 1e9 / wall
            * 100.0,
        sink_rx_cpu_percent: sink_rx_after.saturating_sub(sink_rx_before) as f64 / 1e9 / wall
            * 100.0,
        fwd_cpu_busy_percent: cpu_busy,
        fwd_cpu_steal_ms: steal_ticks as f64 * 1000.0 / clock_ticks(),
        fwd_cpu_halts: after
            .halts
            .zip(before.halts)
            .map(|(a, b)| a.saturating_sub(b)),
        interrupts_per_sec: delta(&entries::dev_entry(input, IfCounters::INTERRUPTS.name)) as f64
            / wall,
        drops,
        polld_rss_kib: after.rss_kib,
        latency,
        tcp,
        polld_deltas: after
            .values
            .iter()
            .map(|(name, v)| (name.clone(), v.saturating_sub(before.get(name))))
            .collect(),
        tick_lateness: Some(TickLateness {
            wakeups: after.get(daemon_entry::TICK_WAKEUPS),
            p50_ns: after.get(daemon_entry::TICK_LATENESS_P50_NS),
            p99_ns: after.get(daemon_entry::TICK_LATENESS_P99_NS),
            max_ns: after.get(daemon_entry::TICK_LATENESS_MAX_NS),
        })
        .filter(|t| t.wakeups > 0),
        ledger,
        conserved,
        testpmd,
    })
}

/// The iperf3 port of TCP trials.
const TCP_PORT: &str = "5201";

/// `polld gen` from gen's first interface on `cpu`, at `rate` for `seconds`, printing its
/// summary as JSON.
pub(crate) fn gen_command(
    tb: &Testbed,
    cpu: usize,
    polld: &str,
    rate: &str,
    seconds: &str,
) -> Result<std::process::Command, TestbedError> {
    let mut command = tb.command_in(Role::Gen, Some(cpu), polld)?;
    command.args(["gen", &tb.layout().veth0.name, "--json", "-i", "0"]);
    command.args(["--rate", rate, "--duration", seconds]);
    Ok(command)
}

/// The testbed's interfaces in namespace `ns`.
fn interfaces_in(tb: &Testbed, ns: &str) -> Vec<String> {
    tb.layout()
        .ifaces()
        .iter()
        .filter(|i| i.ns == ns)
        .map(|i| i.name.clone())
        .collect()
}

/// The CPU time so far of the kernel threads doing the receive work of `ifnames` in
/// namespace `ns`, ns: found through their NAPI ids inside the namespace (the threads'
/// names cannot tell one namespace's veth1 from another's). 0 when there are none.
pub fn kernel_rx_ns(ns: &str, ifnames: &[String]) -> u64 {
    let ifnames = ifnames.to_vec();
    let works = polld_dev::netns::in_netns(ns, move || {
        ifnames
            .iter()
            .map(|name| polld_dev::kernel_rx::RxWork::find(name))
            .collect::<Vec<_>>()
    })
    .unwrap_or_default();
    polld_dev::kernel_rx::RxCpuTime::read(&works, None).total_ns
}

/// Turns the kernel's forwarding in fwd on (the kernel baseline) or off (polld forwards,
/// and `polld run` refuses AF_PACKET beside a kernel that forwards too): IPv4 and IPv6,
/// where the kernel has IPv6 (`-e`).
fn set_ip_forward(tb: &Testbed, on: bool) -> Result<(), TestbedError> {
    let on = on as u8;
    let value = format!("net.ipv4.ip_forward={on} net.ipv6.conf.all.forwarding={on}");
    let out = tb
        .command_in(Role::Fwd, None, "sysctl")?
        .arg("-qew")
        .args(value.split(' '))
        .output()
        .map_err(|e| failed(format!("sysctl {value} in fwd: {e}")))?;
    if !out.status.success() {
        return Err(failed(format!(
            "sysctl {value} in fwd: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The forwarder's counters (polld's), CPU time and memory, and the forwarder CPU's time,
/// at one moment.
struct Snapshot {
    at: Instant,
    values: Vec<(String, u64)>,
    /// The process's CPU time so far (its threads' scheduler run times), ns.
    cpu_ns: u64,
    rss_kib: u64,
    cpu_busy: Option<CpuTimes>,
    halts: Option<u64>,
}

impl Snapshot {
    /// Process `pid`'s CPU time and memory, and with a `socket`, polld's numeric entries
    /// (the interfaces' counters, the scheduler's and the daemon's own).
    fn take(socket: Option<&Path>, pid: u32, cpu: usize) -> Result<Snapshot, TestbedError> {
        let values = match socket {
            Some(socket) => entries::polld_values(socket, "")?,
            None => Vec::new(),
        };
        let rss_kib = crate::process::status_kib(pid, "VmRSS:");
        Ok(Snapshot {
            at: Instant::now(),
            values,
            cpu_ns: polld_dev::kernel_rx::process_cpu_ns(pid).unwrap_or(0),
            rss_kib,
            cpu_busy: CpuTimes::read(cpu),
            halts: crate::idle::halts(cpu),
        })
    }

    /// No forwarder process: only the time and the CPU's counters.
    fn cpu_only(cpu: usize) -> Snapshot {
        Snapshot {
            at: Instant::now(),
            values: Vec::new(),
            cpu_ns: 0,
            rss_kib: 0,
            cpu_busy: CpuTimes::read(cpu),
            halts: crate::idle::halts(cpu),
        }
    }

    fn get(&self, name: &str) -> u64 {
        value_of(&self.values, name)
    }
}

/// Busy percent of a CPU between two snapshots (the wall time it did not idle).
fn busy_percent(before: &Snapshot, after: &Snapshot) -> f64 {
    let (Some(b), Some(a)) = (before.cpu_busy, after.cpu_busy) else {
        return 0.0;
    };
    let wall_ns = after.at.duration_since(before.at).as_nanos() as u64;
    a.busy_percent_since(&b, wall_ns, 1).unwrap_or(0.0)
}
