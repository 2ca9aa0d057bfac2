//! `polld demo`: polld forwarding real traffic on the testbed, in interrupt mode and then
//! in polling mode, with what each costs.
//!
//! On the TAP testbed (the default, `--devices tap`) it shows the seed's promise: a flood
//! from gen, polld realtime on the fwd CPU and a CPU-bound competitor pinned there too
//! ([`crate::share`]); interrupt mode against polling at `user_frac` 50, with interrupts/s,
//! the delivered rate and each one's share of the CPU, and sentences computed from those
//! numbers. On veth (`--devices veth`):
//!
//! It brings the testbed up, and for each mode starts `polld run` in fwd (poll thread on
//! the fwd CPU), `polld sink` in sink and `polld gen` in gen (on the gen CPU) at a fixed
//! rate; it reads polld's counters over the control socket and its CPU time from
//! `/proc`, prints one row per mode, and tears the testbed down.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use polld_control::daemon::{daemon_entry, TickLateness};
use polld_stat::sample::{clock_ticks, CpuTimes};
use rustix::process::Signal;
use serde_json::Value;

use crate::ledger::{Ledger, Sent, StreamTrail};
use crate::share::{measure_share, value_of, ShareRow, ShareTrial};
use crate::testpmd::{Testpmd, TestpmdCounters};
use crate::{
    polld_config, Accel, Devices, Layout, PolldSetup, Role, Testbed, TestbedError, UpOptions,
    VmOptions,
};

/// `polld demo` options.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// The testbed: TAPs only polld joins (the competitor demo), veth pairs, or a qemu
    /// guest with virtio-net NICs and polld inside (the competitor demo on a driver, the
    /// guest's device work at interrupt priority, or at Linux's fair share in the one row
    /// marked "fair").
    #[arg(long, value_enum, default_value_t = Devices::Tap)]
    pub devices: Devices,
    /// `kern.polling.user_frac` of the polling run on TAP.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=99))]
    pub user_frac: u32,
    /// Backend polld uses on both fwd interfaces (veth).
    #[arg(long, default_value = "af_xdp", value_parser = ["af_xdp", "af_packet"])]
    pub backend: String,
    /// Offered load in frames per second (64-byte frames; veth: on TAP gen floods).
    #[arg(long, default_value = "200k")]
    pub rate: String,
    /// Seconds of traffic per mode.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Namespace prefix (the testbed is `{prefix}gen`, `{prefix}fwd`, `{prefix}sink`).
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What one mode did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoRow {
    /// The mode, or what forwarded (`kernel`, `polld af_xdp polling`).
    pub mode: String,
    pub offered_pps: f64,
    pub delivered_pps: f64,
    /// The measured window, s.
    pub seconds: f64,
    /// The forwarder's CPU time over the run (polld's, or testpmd's: its threads' run
    /// times as the scheduler measured them, /proc/PID/task/*/schedstat), percent of one
    /// CPU (0 for the kernel).
    pub polld_cpu_percent: f64,
    /// CPU time of the kernel threads doing fwd's interfaces' receive work (threaded
    /// NAPI), percent of one CPU: outside polld's budget.
    pub kernel_rx_cpu_percent: f64,
    /// CPU time of the kernel threads doing the sink's interfaces' receive work, percent of
    /// one CPU: where the forwarded frames go, and where the kernel completes polld's
    /// AF_XDP sends. The scheduler charges part of it to polld when polld's wakeup
    /// preempts that thread (docs/measuring.md), so read the sum over all three.
    pub sink_rx_cpu_percent: f64,
    /// Busy time of the forwarder's CPU (all work on it: the wall time it did not idle, by
    /// /proc/stat), percent.
    pub fwd_cpu_busy_percent: f64,
    /// Time the hypervisor ran something else while the forwarder's CPU had work, ms
    /// (`/proc/stat` steal, in its 10 ms ticks).
    pub fwd_cpu_steal_ms: f64,
    /// How many times the forwarder's CPU halted when idle ([`crate::idle::halts`]);
    /// `None` without cpuidle.
    pub fwd_cpu_halts: Option<u64>,
    pub interrupts_per_sec: f64,
    /// Drops at the input (`dev.veth1.*`, `dev.tap0.*` on TAP) during the run, by reason.
    pub drops: Vec<(String, u64)>,
    /// polld's resident memory at the end of the run, KiB.
    pub polld_rss_kib: u64,
    /// Loss and latency at `polld sink`, when the trial ran one.
    pub latency: Option<SinkLatency>,
    /// The TCP stream's rate, in a TCP trial.
    pub tcp: Option<TcpResult>,
    /// Growth over the run of each of polld's numeric entries (counters; a gauge's
    /// change), by name: empty when polld did not forward.
    pub polld_deltas: Vec<(String, u64)>,
    /// How late polld's tick timer woke its poll thread, from start to the end of the run
    /// (`None`: no ticks, as in interrupt mode, or polld did not forward).
    pub tick_lateness: Option<TickLateness>,
    /// Where every frame `polld gen` sent went, from gen through polld to the sink's
    /// interface, each hop's losses named ([`Ledger::of_stream`]); `None` when polld did
    /// not forward, or the load was TCP (iperf3's retransmissions are its own).
    pub ledger: Option<Ledger>,
    /// Conservation on every interface in polld's final report, and the ledger balanced
    /// (`None`: the kernel or testpmd forwarded).
    pub conserved: Option<bool>,
    /// testpmd's forward statistics and the veths' counters, when testpmd forwarded.
    pub testpmd: Option<TestpmdCounters>,
}

impl DemoRow {
    /// How much polld's entry `name` grew over the run (0 if it has none).
    pub fn polld_delta(&self, name: &str) -> u64 {
        value_of(&self.polld_deltas, name)
    }

    /// The growth over the run of `dev.<if>.<leaf>`, summed over polld's interfaces.
    pub fn polld_delta_all_ifs(&self, leaf: &str) -> u64 {
        self.polld_deltas
            .iter()
            .filter(|(n, _)| {
                n.strip_prefix("dev.")
                    .and_then(|rest| rest.split_once('.'))
                    .is_some_and(|(_, l)| l == leaf)
            })
            .map(|(_, v)| v)
            .sum()
    }

    /// CPU of every thread on the frames' path, percent of one CPU: the forwarder and the
    /// kernel's receive threads in fwd and sink. A charge a wakeup moves between them
    /// stays inside the sum (docs/measuring.md).
    pub fn path_cpu_percent(&self) -> f64 {
        self.polld_cpu_percent + self.kernel_rx_cpu_percent + self.sink_rx_cpu_percent
    }
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
    /// `polld gen` from gen at `rate` (`200k`, `unlimited`, ...). With `sink`, delivered
    /// frames are counted (and timed) by `polld sink` in sink, end to end, though the sink
    /// needs CPU too; otherwise by the output's own rx counter, as the baseline did.
    Frames { rate: &'a str, sink: bool },
    /// One iperf3 TCP stream from gen to sink (the server pinned to the sink CPU).
    Tcp,
}

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Runs the demo; `polld` is the path of the polld binary to run.
pub fn run_demo(args: &DemoArgs, polld: &Path, out: &mut dyn Write) -> Result<(), TestbedError> {
    let layout = Layout::with_devices(&args.prefix, args.devices);
    let options = UpOptions::default();
    let joined = match args.devices {
        Devices::Veth => "joined by veth pairs",
        Devices::Tap => "tap0 in gen and tap1 in sink, joined only by polld",
        Devices::Vm => "a qemu guest's virtio-net NICs on tap0 in gen and tap1 in sink",
    };
    writeln!(
        out,
        "polld demo: bringing up the testbed ({}, {}, {}: {joined})",
        layout.gen_ns, layout.fwd_ns, layout.sink_ns
    )
    .ok();
    // On the VM testbed the guest runs this same polld.
    let vm = VmOptions {
        polld: polld.to_path_buf(),
        accel: Accel::Auto,
    };
    let tb = Testbed::up_vm(&layout, &options, &vm)?;
    let dir = scratch_dir()?;
    let run = DemoRun {
        args,
        tb: &tb,
        options: &options,
        polld,
        dir: &dir,
    };
    let result = match args.devices {
        Devices::Veth => veth_demo(&run, out),
        Devices::Tap => tap_demo(&run, out),
        Devices::Vm => crate::vm::demo::run(args, &tb, polld, out),
    };
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    writeln!(out, "polld demo: testbed removed").ok();
    result
}

/// What a demo's runs share.
#[derive(Clone, Copy)]
struct DemoRun<'a> {
    args: &'a DemoArgs,
    tb: &'a Testbed,
    options: &'a UpOptions,
    polld: &'a Path,
    /// Holds the trials' configs and sockets.
    dir: &'a Path,
}

/// The directory for a demo's configs and sockets.
fn scratch_dir() -> Result<PathBuf, TestbedError> {
    let dir = std::env::temp_dir().join(format!("polld-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

fn write_json(rows: &impl serde::Serialize, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(rows).unwrap_or_default()
    );
}

/// The demo on veth: `polld gen` at `args.rate` through polld in interrupt mode, then in
/// polling mode.
fn veth_demo(run: &DemoRun, out: &mut dyn Write) -> Result<(), TestbedError> {
    let (args, options) = (run.args, run.options);
    let mut rows = Vec::new();
    for mode in ["interrupt", "polling"] {
        writeln!(
            out,
            "polld demo: {mode} mode, {} frames/s for {} s ...",
            args.rate, args.duration
        )
        .ok();
        let trial = Trial {
            label: mode.to_string(),
            forwarder: Forwarder::Polld {
                backend: &args.backend,
                mode,
                // polld's defaults: what `polld run` does with no [knobs].
                knobs: &[],
            },
            load: Load::Frames {
                rate: &args.rate,
                sink: true,
            },
            duration: args.duration,
        };
        rows.push(measure(run.tb, options, run.polld, run.dir, &trial)?);
    }
    if args.json {
        write_json(&rows, out);
    } else {
        write_table(&rows, &format!("polld on {}", args.backend), options, out);
        let _ = writeln!(out, "{}", veth_findings(&rows[0], &rows[1]));
    }
    Ok(())
}

/// What the veth demo's two rows show, from their numbers: the wakeups polling saves, the
/// receive work the kernel's NAPI threads did outside polld's budget, and all the work on
/// the frames' path (the one figure the scheduler's charging cannot shift).
fn veth_findings(interrupt: &DemoRow, polling: &DemoRow) -> String {
    format!(
        "Interrupt mode: polld took {:.0} interrupts/s and was charged {:.1} % of a CPU; polling: {:.0} \
         interrupts/s and {:.1} % (it wakes at kern.polling.hz and polls a bounded burst).\n\
         The kernel's NAPI threads did the receive work for polld's interfaces outside polld's \
         budget: {:.1} % and {:.1} % of a CPU (`polld ifconfig` says which interfaces).\n\
         All the work on the frames' path, polld and the kernel's receive threads in fwd and \
         sink: {:.1} % and {:.1} % of a CPU (read the sum: when polld's tick preempts a NAPI \
         thread mid-poll, the scheduler charges polld for the rest of that poll).",
        interrupt.interrupts_per_sec,
        interrupt.polld_cpu_percent,
        polling.interrupts_per_sec,
        polling.polld_cpu_percent,
        interrupt.kernel_rx_cpu_percent,
        polling.kernel_rx_cpu_percent,
        interrupt.path_cpu_percent(),
        polling.path_cpu_percent(),
    )
}

/// The demo on TAP: interrupt mode, then polling at `args.user_frac`, each with a flood
/// from gen and a competitor on the fwd CPU.
fn tap_demo(run: &DemoRun, out: &mut dyn Write) -> Result<(), TestbedError> {
    let (args, options) = (run.args, run.options);
    let (gen_cpu, fwd_cpu) = (options.cpus.gen, options.cpus.fwd);
    let mut rows = Vec::new();
    for mode in ["interrupt", "polling"] {
        writeln!(
            out,
            "polld demo: {mode} mode; polld gen floods tap0 from CPU{gen_cpu}, a CPU-bound competitor runs on CPU{fwd_cpu} beside polld; measuring {} s ...",
            args.duration
        )
        .ok();
        let trial = ShareTrial::flood(mode, args.user_frac, 1.0, args.duration);
        rows.push(measure_share(
            run.tb,
            run.polld,
            run.dir,
            (gen_cpu, fwd_cpu),
            &trial,
        )?);
    }
    if args.json {
        write_json(&rows, out);
    } else {
        write_share_table(&rows, gen_cpu, fwd_cpu, out);
    }
    Ok(())
}

/// The TAP demo's table and what it shows, every claim computed from the rows.
fn write_share_table(rows: &[ShareRow], gen_cpu: usize, fwd_cpu: usize, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "\npolld on TAP, 60-byte frames flooded by polld gen on CPU{gen_cpu}; polld (SCHED_FIFO) and a CPU-bound competitor on CPU{fwd_cpu}; {}",
        machine()
    );
    let _ = writeln!(
        out,
        "{:<22} {:>11} {:>12} {:>13} {:>10} {:>11}  drops at tap0",
        "polld mode", "offered/s", "delivered/s", "interrupts/s", "polld CPU", "competitor"
    );
    for r in rows {
        let label = match r.mode.as_str() {
            "polling" => format!("polling, user_frac {}", r.user_frac),
            other => other.to_string(),
        };
        let drops: Vec<String> = r.drops.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(
            out,
            "{:<22} {:>11.0} {:>12.0} {:>13.0} {:>9.1}% {:>10.1}%  {}",
            label,
            r.offered_pps,
            r.delivered_pps,
            r.interrupts_per_sec,
            r.polld_cpu_percent,
            r.competitor_percent,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(", ")
            }
        );
    }
    for line in share_findings(rows, fwd_cpu) {
        let _ = writeln!(out, "{line}");
    }
}

/// Sentences about the rows, each one decided by the numbers in them.
fn share_findings(rows: &[ShareRow], cpu: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let interrupt = rows.iter().find(|r| r.mode == "interrupt");
    let polling = rows.iter().find(|r| r.mode == "polling");
    if let Some(r) = interrupt {
        let fate = if r.competitor_percent < 15.0 {
            "was starved"
        } else {
            "was not starved"
        };
        lines.push(format!(
            "Interrupt mode: polld took {:.0} interrupts/s and {:.1} % of CPU{cpu}; the competitor {fate}: it got {:.1} %.",
            r.interrupts_per_sec, r.polld_cpu_percent, r.competitor_percent
        ));
    }
    if let Some(r) = polling {
        let off = r.competitor_percent - f64::from(r.user_frac);
        let verdict = if off.abs() <= 5.0 {
            "within 5 points of it"
        } else {
            "more than 5 points away from it"
        };
        let wakeups = if r.interrupts_per_sec == 0.0 {
            "took no interrupts".to_string()
        } else {
            format!("took {:.0} interrupts/s", r.interrupts_per_sec)
        };
        lines.push(format!(
            "Polling: polld {wakeups} and used {:.1} % of CPU{cpu}; the competitor got {:.1} % against kern.polling.user_frac = {}, {verdict}.",
            r.polld_cpu_percent, r.competitor_percent, r.user_frac
        ));
    }
    if let (Some(i), Some(p)) = (interrupt, polling) {
        let per_cpu = |r: &ShareRow| r.delivered_pps / (r.polld_cpu_percent / 100.0).max(1e-9);
        let (ip, pp) = (per_cpu(i), per_cpu(p));
        // Runs of a few seconds differ by a few percent: within 2 % is "the same".
        let ratio = pp / ip.max(1e-9);
        let comparison = if ratio >= 0.98 {
            format!(
                "polling forwarded {:.2}x as much per second of CPU as interrupts did, so its rate is what its share of the CPU allows",
                ratio
            )
        } else {
            format!(
                "polling forwarded only {:.2}x as much per second of CPU as interrupts did",
                ratio
            )
        };
        lines.push(format!(
            "Forwarding: {:.0} frames/s with interrupts, {:.0} polling; per second of polld's CPU {:.0} and {:.0}: {comparison}.",
            i.delivered_pps, p.delivered_pps, ip, pp
        ));
    }
    for r in rows {
        if let Some(ledger) = &r.ledger {
            lines.push(format!("Every frame gen sent, {}: {ledger}.", r.mode));
        }
    }
    if rows.iter().any(|r| !r.conserved) {
        lines.push(
            "CONSERVATION VIOLATED: a frame no hop names, or an interface whose counters do not add up (see `polld run --json`)."
                .into(),
        );
    } else {
        lines.push(
            "Every frame is accounted for: end to end, and on each interface of polld (rx = forwarded + local + consumed + queued + named drops)."
                .into(),
        );
    }
    lines
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
    let input_drops = format!("dev.{input}.drops.");
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
            Running::Polld(crate::share::start_polld(
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
        Load::Frames { rate, .. } => {
            gen_command(tb, options.cpus.gen, &polld_str, rate, &duration)?
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
    let (offered_pps, seconds, tcp) = match trial.load {
        Load::Frames { .. } => {
            let summary = report("polld gen")?;
            (
                summary["pps"].as_f64().unwrap_or(0.0),
                summary["seconds"].as_f64().unwrap_or(trial.duration),
                None,
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
            (0.0, trial.duration, Some(tcp))
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
            let conserved = crate::share::conserved(&interfaces)
                && ledger.as_ref().is_none_or(Ledger::balanced);
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
        .filter(|(n, _)| n.starts_with(&input_drops))
        .map(|(n, v)| {
            (
                n.trim_start_matches(&input_drops).to_string(),
                v.saturating_sub(before.get(n)),
            )
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
        interrupts_per_sec: delta(&format!("dev.{input}.interrupts")) as f64 / wall,
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

/// What one iperf3 TCP stream achieved through the forwarder.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TcpResult {
    /// Received by the server, averaged over the run.
    pub mbit_per_s: f64,
    /// Segments the sender retransmitted.
    pub retransmits: u64,
    /// The sender's mean smoothed round-trip time over the run (iperf3's `mean_rtt`), µs.
    pub mean_rtt_us: u64,
}

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

/// What `polld sink` measured end to end: loss and one-way latency.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SinkLatency {
    /// Frames the generator sent that never arrived (its end-of-run record counts them).
    pub lost: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl SinkLatency {
    /// From `polld sink --json`'s summary; `None` when it timed nothing.
    fn of(summary: &Value) -> Option<SinkLatency> {
        let analysis = &summary["analysis"];
        let latency = &analysis["latency"];
        let us = |name: &str| latency[name].as_f64().map(|ns| ns / 1000.0);
        Some(SinkLatency {
            lost: analysis["sequence"]["lost"].as_u64()?,
            p50_us: us("p50_ns")?,
            p99_us: us("p99_ns")?,
            max_us: us("max_ns")?,
        })
    }
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

/// Turns the kernel's forwarding in fwd on or off.
fn set_ip_forward(tb: &Testbed, on: bool) -> Result<(), TestbedError> {
    let value = format!("net.ipv4.ip_forward={}", on as u8);
    let out = tb
        .command_in(Role::Fwd, None, "sysctl")?
        .args(["-qw", &value])
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

/// The rows as a table, under a line saying what ran, the placement and the machine.
pub fn write_table(rows: &[DemoRow], what: &str, options: &UpOptions, out: &mut dyn Write) {
    let fwd = options.cpus.fwd;
    let _ = writeln!(
        out,
        "\n{what} ({} placement), 64-byte frames; gen on CPU{}, the forwarder and its receive work on CPU{fwd}; {}",
        options.placement.name(),
        options.cpus.gen,
        machine()
    );
    let _ = writeln!(
        out,
        "{:<24} {:>11} {:>12} {:>10} {:>10} {:>10} {:>10} {:>13} {:>9}  drops at veth1",
        "forwarder",
        "offered/s",
        "delivered/s",
        "polld CPU",
        "kernel rx",
        "sink rx",
        format!("CPU{fwd} busy"),
        "interrupts/s",
        "polld RSS"
    );
    for r in rows {
        let drops: Vec<String> = r.drops.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let rss = if r.polld_rss_kib > 0 {
            format!("{:.1} MiB", r.polld_rss_kib as f64 / 1024.0)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "{:<24} {:>11.0} {:>12.0} {:>9.1}% {:>9.1}% {:>9.1}% {:>9.1}% {:>13.0} {:>9}  {}",
            r.mode,
            r.offered_pps,
            r.delivered_pps,
            r.polld_cpu_percent,
            r.kernel_rx_cpu_percent,
            r.sink_rx_cpu_percent,
            r.fwd_cpu_busy_percent,
            r.interrupts_per_sec,
            rss,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(", ")
            }
        );
    }
}

fn machine() -> String {
    let m = crate::results::Machine::this();
    format!("{} CPUs, {}", m.cpus, m.cpu_model)
}

pub(crate) fn last_json(text: &str) -> Option<Value> {
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
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
            Some(socket) => crate::share::polld_values(socket, "")?,
            None => Vec::new(),
        };
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
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

/// A child process stopped with SIGINT (and killed if it does not stop) on finish/drop.
pub(crate) struct Process {
    child: Option<Child>,
    what: &'static str,
}

impl Process {
    pub(crate) fn spawn(
        command: &mut std::process::Command,
        what: &'static str,
    ) -> Result<Process, TestbedError> {
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("starting {what}: {e}")))?;
        Ok(Process {
            child: Some(child),
            what,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// SIGINT, wait up to 10 s; returns its standard output.
    pub(crate) fn finish(&mut self) -> Result<String, TestbedError> {
        self.end(true)
    }

    /// As [`Process::finish`], for a process that must still be running: a flood that had
    /// to last through a measured window. An error if it already ended by itself.
    pub(crate) fn finish_running(&mut self) -> Result<String, TestbedError> {
        if let Some(status) = self.exited() {
            return Err(failed(format!(
                "{} ended ({status}) before the measured window closed, so the window \
                 counted time without its load; its --duration is too short for the window",
                self.what
            )));
        }
        self.finish()
    }

    /// How it exited, if it has.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits up to 10 s for it to exit by itself; returns its standard output.
    pub(crate) fn wait(&mut self) -> Result<String, TestbedError> {
        self.end(false)
    }

    fn end(&mut self, interrupt: bool) -> Result<String, TestbedError> {
        let Some(mut child) = self.child.take() else {
            return Ok(String::new());
        };
        if interrupt {
            crate::sys::signal(child.id(), Signal::INT);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child
            .wait()
            .map_err(|e| failed(format!("{}: {e}", self.what)))?;
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut stdout);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut stderr);
        }
        if !status.success() {
            return Err(failed(format!(
                "{} exited with {status}: {}",
                self.what,
                stderr.trim()
            )));
        }
        Ok(stdout)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until polld's control socket exists, or reports why polld exited.
pub(crate) fn wait_for(socket: &Path, daemon: &mut Process) -> Result<(), TestbedError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        if daemon.exited().is_some() || Instant::now() > deadline {
            let err = daemon
                .finish()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "it did not start in 20 s".into());
            return Err(failed(format!("polld run: {err}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The polld binary to run: this very executable.
pub fn current_polld() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("polld"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Process {
        Process::spawn(
            std::process::Command::new("sh").args(["-c", script]),
            "the load",
        )
        .expect("sh starts")
    }

    #[test]
    fn a_load_that_ended_before_the_window_closed_is_an_error_and_one_still_running_is_stopped() {
        let mut ended = shell("echo sent");
        while ended.exited().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let err = ended.finish_running().unwrap_err().to_string();
        assert!(
            err.contains("the load ended") && err.contains("before the measured window closed"),
            "{err}"
        );

        // Stopped only once its SIGINT handler is in place (it says so with a file).
        let ready = std::env::temp_dir().join(format!("polld-demo-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let mut running = shell(&format!(
            "trap 'echo stopped; exit 0' INT; touch {}; while :; do sleep 0.05; done",
            ready.display()
        ));
        while !ready.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&ready);
        assert_eq!(
            running.finish_running().expect("still running").trim(),
            "stopped"
        );
    }
}
