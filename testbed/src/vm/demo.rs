//! `polld demo --devices vm`: the seed's experiment on a NIC driver. polld forwards in
//! the guest (1 vCPU) between its virtio-net NICs beside a CPU-bound competitor on the
//! same vCPU, in interrupt mode and in polling, under a flood from gen and at half of
//! what interrupt mode delivered under it.
//!
//! The device work the guest's interrupts leave over runs in `ksoftirqd/0`. Each row says
//! where ([`DeviceWork`]): at interrupt priority, above polld, as FreeBSD runs interrupt
//! handlers (the seeds' interrupt mode: every row), or at Linux's default fair share
//! (CFS), NAPI's defence against a flood (one interrupt-mode row under the flood, for
//! comparison).
//!
//! Each row is measured over a window after a warm-up: frames sink's tap1 received per
//! second of host time; in the guest, by its own clock (`/proc/uptime`), eth0's receive
//! interrupts (`virtio0-input.0`) per second, polld's and `ksoftirqd/0`'s CPU time and the
//! competitor's user time (its system time is device work, [`TaskTicks`]) from their own
//! `/proc/PID/stat`, as a percentage of the ticks the vCPU accounted; and whether polld
//! says eth0's receive work is in its budget (`polld ifconfig`), which needs preferred busy
//! polling. The guest's clock under software emulation is not the host's; each rate is
//! taken on the clock of the side it counts.
//!
//! Each row runs a polld of its own in the guest, so that its final counters are the
//! row's: with them, gen's count and the kernel's counters of the host's TAPs and the
//! guest's NICs, the row's [`Ledger`] follows every frame gen sent to sink's tap1 or to a
//! named drop, and the demo fails if one does not balance.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use polld_core::Knobs;
use serde::Serialize;

use super::guest::{self, DeviceWork, NetDevCounters, TaskTicks, ETH0_RX_IRQ};
use crate::entries::{dev_entry, dev_node, drops_leaf, kern_entry, FASTFORWARDING};
use crate::ledger::{Ledger, PathCounters, Sent, StreamPath};
use crate::process::{last_json, Process};
use crate::share::{ShareRow, ShareTrial, GEN_SLACK_S};
use crate::{counters, IfCounters, Layout, PolldSetup, Role, Testbed, TestbedError};

/// Seconds of load before each window.
const WARM_UP: f64 = 1.0;

/// Seconds of load before the window of a polld that polls: started into a running flood,
/// polld learns its queue's NAPI id only from the first frame its socket receives (copy
/// mode), and until it busy polls, the driver's NAPI runs in `ksoftirqd/0` at interrupt
/// priority, above polld's thread. In a 6.1 guest under software emulation, with a
/// second of warm-up `ksoftirqd/0` still had 19.8 to 87.8 % of the vCPU in the window (the
/// first second to the fourth) in 8 of 15 trials by hand; with five, at most 3.8 % in all
/// 8.
const TAKEOVER_S: f64 = 5.0;

/// Seconds the frames still on the way after gen stopped may take to drain: polld at
/// user_frac 90 under software emulation takes about 100 frames/s, and its socket's ring
/// can hold 1,500 of them when the flood stops.
const DRAIN_S: f64 = 30.0;

/// `kern.polling.hz` in a guest under software emulation, the knob's lowest. There the
/// poll thread spends 1.5-2 ms of the vCPU per tick outside its cycles (its wakeup and
/// timer path, and the transmit completions the kernel charges it for:
/// `kern.polling.tick_overhead_ns`): at hz 250 that was a third of the vCPU under a flood,
/// which the time controller takes out of the devices' share, leaving cycles of a frame
/// or two; at 100, a fifth.
const TCG_HZ: &str = "100";

/// The full names of the knobs every row sets.
struct KnobNames {
    user_frac: String,
    hz: String,
}

impl KnobNames {
    fn new() -> KnobNames {
        KnobNames {
            user_frac: kern_entry(Knobs::USER_FRAC.name),
            hz: kern_entry(Knobs::HZ.name),
        }
    }
}

/// One mode at one load.
#[derive(Clone, Debug, Serialize)]
pub struct VmRow {
    pub mode: String,
    /// `flood` (gen unlimited) or `half` (half of interrupt mode's delivered rate under
    /// the flood, with the device work at a fair share).
    pub load: String,
    /// Where the guest ran the device work its interrupts left over (`ksoftirqd/0`).
    pub device_work: DeviceWork,
    pub offered_pps: f64,
    pub delivered_pps: f64,
    pub device_interrupts_per_s: f64,
    pub polld_cpu_percent: f64,
    /// The guest's `ksoftirqd/0`: the driver's work the kernel left over from its
    /// interrupts (its NAPI's receive, its transmit completions), percent of the vCPU. The
    /// softirqs run on the way out of an interrupt count in the time of whichever task the
    /// interrupt came upon (the 6.1 guest has no IRQ_TIME_ACCOUNTING).
    pub ksoftirqd_percent: f64,
    /// The competitor's user time, percent of the vCPU: what it got (see [`TaskTicks`]).
    pub competitor_percent: f64,
    /// polld's word on eth0's receive work: in its budget only with preferred busy
    /// polling.
    pub rx_work_in_budget: bool,
    /// Where that work runs, and why it is not in the budget (`polld ifconfig --json`).
    pub rx_work: serde_json::Value,
    /// Where every frame gen sent went, host and guest.
    pub ledger: Ledger,
}

/// The demo's report.
#[derive(Clone, Debug, Serialize)]
pub struct VmDemo {
    pub accel: String,
    pub kernel: String,
    pub user_frac: u32,
    pub window_s: f64,
    pub rows: Vec<VmRow>,
    /// Interrupt mode without fastforwarding (seed 000).
    pub livelock: Livelock,
    /// iperf3 TCP through the guest, without the competitor (seed 002): unlimited in
    /// each mode, then at [`TCP_FIXED_MBIT`].
    pub tcp: Vec<TcpRow>,
}

/// The fixed TCP bitrate, Mbit/s: seed 002's box routed a 10 Mbit/s WAN.
pub const TCP_FIXED_MBIT: u32 = 10;

/// One iperf3 transfer from gen to sink through polld in the guest.
#[derive(Clone, Debug, Serialize)]
pub struct TcpRow {
    pub mode: String,
    /// iperf3's `-b`, Mbit/s; `None`: unlimited.
    pub target_mbit: Option<u32>,
    /// What sink received, Mbit/s.
    pub mbit_per_s: f64,
    /// The vCPU's time not idle over the transfer (all of it: polld, the driver's
    /// interrupts and softirqs), percent, by the guest's clock.
    pub guest_cpu_percent: f64,
    /// polld's own CPU time, percent of the vCPU.
    pub polld_cpu_percent: f64,
    /// eth0's receive interrupts a second: in interrupt mode, how many TCP segments NAPI
    /// takes per interrupt.
    pub device_interrupts_per_s: f64,
}

/// Seed 000 in the guest: interrupt mode with `net.inet.ip.fastforwarding=0`, at half load
/// and under the flood, beside the same competitor.
#[derive(Clone, Debug, Serialize)]
pub struct Livelock {
    /// At half load, then flooded.
    pub rows: Vec<VmRow>,
    /// The most it delivered, at either load, frames/s.
    pub best_pps: f64,
    /// Flooded, as a percentage of its best.
    pub flooded_percent_of_best: f64,
    /// Under [`LIVELOCK_PERCENT`] of its best when flooded.
    pub reproduced: bool,
}

/// Flooded, interrupt mode without fastforwarding delivers less than this percentage of
/// its best: receive livelock.
pub const LIVELOCK_PERCENT: f64 = 10.0;

impl Livelock {
    fn of(rows: Vec<VmRow>) -> Livelock {
        let best_pps = rows.iter().map(|r| r.delivered_pps).fold(0.0, f64::max);
        let flooded = rows.last().map_or(0.0, |r| r.delivered_pps);
        let flooded_percent_of_best = if best_pps > 0.0 {
            100.0 * flooded / best_pps
        } else {
            0.0
        };
        Livelock {
            rows,
            best_pps,
            flooded_percent_of_best,
            reproduced: flooded_percent_of_best < LIVELOCK_PERCENT,
        }
    }
}

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// What `polld demo --devices vm` asks of the demo.
#[derive(Clone, Copy, Debug)]
pub struct VmDemoArgs {
    /// `kern.polling.user_frac` of every row.
    pub user_frac: u32,
    /// Seconds of each row's window.
    pub duration: f64,
    /// Print the report as JSON.
    pub json: bool,
}

/// Runs the demo on the guest testbed `tb`; `polld` sends from gen.
pub fn run(
    args: VmDemoArgs,
    tb: &Testbed,
    polld: &Path,
    out: &mut dyn Write,
) -> Result<(), TestbedError> {
    let layout = tb.layout();
    let prefix = &layout.prefix;
    let guest_state = tb
        .report()
        .guest
        .clone()
        .ok_or_else(|| failed("the VM demo needs the VM testbed".into()))?;
    let user_frac = args.user_frac.to_string();
    let names = KnobNames::new();
    let mut knobs = vec![(names.user_frac.as_str(), user_frac.as_str())];
    if guest_state.accel == "tcg" {
        knobs.push((names.hz.as_str(), TCG_HZ));
    }
    let gen = polld;
    let competitor = start_competitor(prefix)?;
    let measured = (|| {
        let mut rows = Vec::new();
        let row = |mode: &str, knobs: &[(&str, &str)], rate: Option<f64>, work: DeviceWork| {
            let (load, rate) = match rate {
                Some(r) => ("half", format!("{}", r.max(1.0).round())),
                None => ("flood", "unlimited".to_string()),
            };
            let window = (WARM_UP, args.duration);
            let row = measure(
                layout,
                gen,
                (mode, work),
                knobs,
                &rate,
                window,
                Some(competitor),
            )?;
            Ok::<_, TestbedError>(VmRow {
                load: load.to_string(),
                ..row
            })
        };
        let say = |out: &mut dyn Write, what: String| {
            let _ = writeln!(out, "polld demo: {what}; measuring {} s ...", args.duration);
        };
        // The device work at interrupt priority in every row, and once at the kernel's
        // default for comparison under the flood.
        for work in [DeviceWork::InterruptPriority, DeviceWork::Fair] {
            say(
                out,
                format!(
                    "interrupt mode under a flood from gen, the device work at {}",
                    work.name()
                ),
            );
            rows.push(row("interrupt", &knobs, None, work)?);
        }
        // Half of what interrupt mode forwards when the kernel keeps the device work to a
        // fair share (at interrupt priority it forwards next to nothing under the flood).
        let half = rows[1].delivered_pps / 2.0;
        // Seed 000 on the driver: interrupt mode with the IP input queue between the
        // interrupt and the forwarding, at half load and flooded.
        let seed000: Vec<(&str, &str)> = knobs
            .iter()
            .copied()
            .chain([(FASTFORWARDING, "0")])
            .collect();
        let mut livelock = Vec::new();
        for rate in [Some(half), None] {
            let what = rate.map_or("a flood".to_string(), |r| format!("{r:.0} frames/s"));
            say(
                out,
                format!("interrupt mode without fastforwarding at {what}"),
            );
            let work = DeviceWork::InterruptPriority;
            livelock.push(row("interrupt", &seed000, rate, work)?);
        }
        // Seed 001's screen.
        say(out, format!("interrupt mode at {half:.0} frames/s (half of what it delivered with the device work at a fair share)"));
        rows.push(row(
            "interrupt",
            &knobs,
            Some(half),
            DeviceWork::InterruptPriority,
        )?);
        say(
            out,
            "polling mode under a flood from gen, the device work at interrupt priority".into(),
        );
        rows.push(row("polling", &knobs, None, DeviceWork::InterruptPriority)?);
        say(out, format!("polling mode at {half:.0} frames/s"));
        rows.push(row(
            "polling",
            &knobs,
            Some(half),
            DeviceWork::InterruptPriority,
        )?);
        Ok::<_, TestbedError>((rows, livelock))
    })();
    let _ = guest::sh(prefix, &format!("kill {competitor}"), "");
    let (rows, livelock) = measured?;
    guest::set_device_work(prefix, DeviceWork::InterruptPriority)?;
    let polld = start_polld(layout, "interrupt", &knobs)?;
    let tcp = tcp(tb, polld, args.duration, out);
    let report = guest::stop_polld(prefix, polld)?;
    let tcp = tcp?;
    if !crate::entries::conserved(&report) {
        return Err(failed(format!(
            "polld's counters in the guest do not add up: {report}"
        )));
    }
    let demo = VmDemo {
        accel: guest_state.accel,
        kernel: guest_state.kernel,
        user_frac: args.user_frac,
        window_s: args.duration,
        livelock: Livelock::of(livelock),
        rows,
        tcp,
    };
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&demo).unwrap_or_default()
        );
    } else {
        write_table(&demo, out);
    }
    Ok(())
}

/// A CPU-bound competitor in the guest; its pid.
fn start_competitor(prefix: &str) -> Result<u32, TestbedError> {
    guest::sh(
        prefix,
        "sh -c 'while :; do :; done' >/dev/null 2>&1 & echo $!",
        "",
    )?
    .trim()
    .parse()
    .map_err(|_| failed("starting the competitor in the guest".into()))
}

/// A trial of `polld bench` ([`ShareTrial`]) on the guest testbed `tb`: the guest's device
/// work at interrupt priority, a polld of its own in the guest in the trial's mode, at
/// its `user_frac` (at [`TCG_HZ`] under software emulation) with its knobs, `gen_polld gen` at its rate from gen, and a competitor in
/// the guest if it asks for one; the row as the TAP trials give it, with the NIC's
/// receive interrupts per second as its interrupts. A row whose polld's counters or
/// ledger do not add up is an error.
pub fn trial(tb: &Testbed, gen_polld: &Path, trial: &ShareTrial) -> Result<ShareRow, TestbedError> {
    let layout = tb.layout();
    let rate = trial
        .rate
        .ok_or_else(|| failed("a trial in the guest needs polld gen's traffic".into()))?;
    let user_frac = trial.user_frac.to_string();
    let names = KnobNames::new();
    let mut knobs = vec![(names.user_frac.as_str(), user_frac.as_str())];
    if tb.report().guest.as_ref().is_some_and(|g| g.accel == "tcg") {
        knobs.push((names.hz.as_str(), TCG_HZ));
    }
    knobs.extend(trial.knobs.iter().copied());
    let competitor = match trial.competitor {
        true => Some(start_competitor(&layout.prefix)?),
        false => None,
    };
    let window = (trial.warm_up, trial.window);
    let work = DeviceWork::InterruptPriority;
    let row = measure(
        layout,
        gen_polld,
        (trial.mode, work),
        &knobs,
        rate,
        window,
        competitor,
    );
    if let Some(pid) = competitor {
        let _ = guest::sh(&layout.prefix, &format!("kill {pid}"), "");
    }
    let row = row?;
    Ok(ShareRow {
        mode: trial.mode.to_string(),
        user_frac: trial.user_frac,
        offered_pps: row.offered_pps,
        delivered_pps: row.delivered_pps,
        interrupts_per_sec: row.device_interrupts_per_s,
        polld_cpu_percent: row.polld_cpu_percent,
        competitor_percent: row.competitor_percent,
        ksoftirqd_percent: Some(row.ksoftirqd_percent),
        drops: Vec::new(),
        ledger: Some(row.ledger),
        conserved: true,
    })
}

/// polld in the guest on eth0 and eth1 in `mode` with `knobs`; its pid.
fn start_polld(layout: &Layout, mode: &str, knobs: &[(&str, &str)]) -> Result<u32, TestbedError> {
    guest::start_polld(
        layout,
        &PolldSetup {
            backend: "af_xdp",
            mode,
            socket: Path::new(guest::POLLD_SOCKET),
            cpu: None,
            realtime: true,
            knobs,
        },
    )
}

/// One row: the guest's device work as `work` says, a polld of its own in `mode` with
/// `knobs`, `gen_polld gen --rate rate` from before the warm-up until the window closed
/// (`window`: the warm-up, at least [`TAKEOVER_S`] unless in interrupt mode, and the
/// window, s), the window sampled in the guest beside the `competitor` if there is one;
/// then the frames on the way let through and the row's ledger booked from polld's final
/// counters. Its `load` is the caller's to name.
fn measure(
    layout: &Layout,
    gen_polld: &Path,
    (mode, work): (&str, DeviceWork),
    knobs: &[(&str, &str)],
    rate: &str,
    (warm_up, window): (f64, f64),
    competitor: Option<u32>,
) -> Result<VmRow, TestbedError> {
    let prefix = &layout.prefix;
    let warm_up = match mode {
        "interrupt" => warm_up,
        _ => warm_up.max(TAKEOVER_S),
    };
    guest::set_device_work(prefix, work)?;
    let polld = start_polld(layout, mode, knobs)?;
    let measured = (|| {
        let start = path_counters(layout)?;
        let mut gen = Process::spawn(
            guest::gen_through_guest(gen_polld, layout, rate)
                .args(["--duration", &(warm_up + window + GEN_SLACK_S).to_string()]),
            "polld gen",
        )?;
        let sampled = (|| {
            std::thread::sleep(Duration::from_secs_f64(warm_up));
            let softirq = guest::ksoftirqd_pid(prefix)?;
            let pids: Vec<u32> = [Some(polld), Some(softirq), competitor]
                .into_iter()
                .flatten()
                .collect();
            let (tap1_ns, tap1) = (&layout.veth3.ns, &layout.veth3.name);
            let (host_before, sink_before) = (Instant::now(), counters(tap1_ns, tap1)?.rx_packets);
            let (before, after) = guest::window(prefix, ETH0_RX_IRQ, &pids, window)?;
            let (host_after, sink_after) = (Instant::now(), counters(tap1_ns, tap1)?.rx_packets);
            let host_s = host_after.duration_since(host_before).as_secs_f64();
            Ok::<_, TestbedError>((before, after, (sink_after - sink_before) as f64 / host_s))
        })();
        let (before, after, delivered_pps) = sampled?;
        let output = gen.finish_running()?;
        // Asked once the flood is off: a polld in interrupt mode, starved by the device
        // work at interrupt priority, does not answer its control socket under a flood.
        let (in_budget, rx_work) = guest::rx_work(prefix, "eth0")?;
        let sampled = (before, after, delivered_pps, in_budget, rx_work);
        let summary =
            last_json(&output).ok_or_else(|| failed("polld gen printed no summary".into()))?;
        settled(layout, &start, true)?;
        Ok::<_, TestbedError>((sampled, summary, start))
    })();
    let report = guest::stop_polld(prefix, polld);
    let ((before, after, delivered_pps, in_budget, rx_work), summary, start) = measured?;
    let report = report?;
    // polld flushed its outputs as it stopped: what its NICs' queues held went out then.
    let grew = settled(layout, &start, false)?;
    if !crate::entries::conserved(&report) {
        return Err(failed(format!(
            "polld's counters in the guest do not add up ({mode}): {report}"
        )));
    }
    let ledger = Ledger::of_stream(
        &StreamPath::through(layout),
        Sent::of(&summary),
        &grew,
        &report,
    )?;
    if !ledger.balanced() {
        return Err(failed(format!(
            "not every frame gen sent is accounted for ({mode}): {ledger}"
        )));
    }
    let offered_pps = summary["pps"]
        .as_f64()
        .ok_or_else(|| failed(format!("polld gen's summary has no pps: {summary}")))?;
    let guest_s = after.uptime - before.uptime;
    // No competitor: 0.
    let percent = |i: usize, of: fn(TaskTicks) -> u64| after.percent_since(&before, i, of);
    Ok(VmRow {
        mode: mode.to_string(),
        load: String::new(),
        device_work: work,
        offered_pps,
        delivered_pps,
        device_interrupts_per_s: (after.interrupts - before.interrupts) as f64 / guest_s,
        polld_cpu_percent: percent(0, TaskTicks::total),
        ksoftirqd_percent: percent(1, TaskTicks::total),
        // A shell loop: its system time is device work that ran on it (TaskTicks).
        competitor_percent: percent(2, |t| t.user),
        rx_work_in_budget: in_budget,
        rx_work,
        ledger,
    })
}

/// The stream's counters: the host's TAPs (gen's tap0, sink's tap1) and the guest's NICs.
fn path_counters(layout: &Layout) -> Result<PathCounters, TestbedError> {
    let nic = |c: NetDevCounters| IfCounters {
        rx_packets: c.rx_packets,
        rx_dropped: c.rx_drop,
        tx_packets: c.tx_packets,
        tx_dropped: c.tx_drop,
        ..IfCounters::default()
    };
    Ok(PathCounters {
        gen: counters(&layout.veth0.ns, &layout.veth0.name)?,
        fwd_in: nic(guest::net_dev(&layout.prefix, &layout.veth1.name)?),
        fwd_out: nic(guest::net_dev(&layout.prefix, &layout.veth2.name)?),
        sink: counters(&layout.veth3.ns, &layout.veth3.name)?,
    })
}

/// After gen stopped: the counters' growth since `start` once no counter on the path
/// moved between two readings (the host's TAP queue, the guest's rings and polld's output
/// drained) and, while polld `runs`, it has taken every frame eth0's driver handed up (its
/// `rx_packets` and drops before rx reach eth0's `rx_packets`: a frame still in its
/// socket's ring moves no counter, and is purged uncounted when polld closes it); or
/// after [`DRAIN_S`], when what is still on the way shows as unaccounted.
fn settled(
    layout: &Layout,
    start: &PathCounters,
    runs: bool,
) -> Result<PathCounters, TestbedError> {
    let deadline = Instant::now() + Duration::from_secs_f64(DRAIN_S);
    let input = &layout.veth1.name;
    let node = dev_node(input);
    let polld_took = || -> Result<(u64, u64), TestbedError> {
        let text = guest::sh(
            &layout.prefix,
            &format!("polld ctl --socket {} {node}", guest::POLLD_SOCKET),
            "",
        )?;
        let value = |leaf: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(&dev_entry(input, leaf))?.strip_prefix(": "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let before_rx: u64 = polld_core::DropReason::before_rx_reasons()
            .map(|r| value(&drops_leaf(r.name())))
            .sum();
        Ok((value(polld_core::IfCounters::RX_PACKETS.name), before_rx))
    };
    let mut last = path_counters(layout)?;
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let next = path_counters(layout)?;
        let grew = next.since(start);
        // eth0 drops in rx_dropped what polld's socket had no room for, and counts
        // (here as on veth) every frame it took off its ring in rx_packets.
        let taken = !runs || {
            let (rx, before_rx) = polld_took()?;
            let unseen = grew.fwd_in.rx_dropped.saturating_sub(before_rx);
            rx + before_rx >= grew.fwd_in.rx_packets.saturating_sub(unseen)
        };
        if (taken && next == last) || Instant::now() > deadline {
            return Ok(grew);
        }
        last = next;
    }
}

/// Seed 002 through the guest: iperf3 TCP from gen to sink, unlimited in both modes, then
/// at [`TCP_FIXED_MBIT`].
fn tcp(
    tb: &Testbed,
    polld: u32,
    secs: f64,
    out: &mut dyn Write,
) -> Result<Vec<TcpRow>, TestbedError> {
    let mut rows = Vec::new();
    for target in [None, Some(TCP_FIXED_MBIT)] {
        for mode in ["interrupt", "polling"] {
            let rate = target.map_or("unlimited".to_string(), |m| format!("at {m} Mbit/s"));
            let _ = writeln!(
                out,
                "polld demo: iperf3 TCP {rate} through the guest in {mode} mode; {secs} s ..."
            );
            guest::set_mode(&tb.layout().prefix, mode)?;
            rows.push(transfer(tb, mode, target, secs, polld)?);
        }
    }
    Ok(rows)
}

/// One iperf3 transfer at `target` Mbit/s (unlimited: `None`), with the guest sampled
/// around it.
fn transfer(
    tb: &Testbed,
    mode: &str,
    target: Option<u32>,
    secs: f64,
    polld: u32,
) -> Result<TcpRow, TestbedError> {
    let layout = tb.layout();
    let mut server = tb
        .command_in(Role::Sink, None, "iperf3")?
        .args(["-s", "-1", "-p", "5399"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("starting iperf3 -s in {}: {e}", layout.sink_ns)))?;
    std::thread::sleep(Duration::from_millis(300));
    let mut client = tb.command_in(Role::Gen, None, "iperf3")?;
    client.args(["-c", &layout.veth3.addr.to_string(), "-p", "5399", "-J"]);
    client.args(["-t", &format!("{}", secs.ceil().max(1.0))]);
    if let Some(mbit) = target {
        client.args(["-b", &format!("{mbit}M")]);
    }
    let before = guest::sample(&layout.prefix, ETH0_RX_IRQ, &[polld]);
    let output = client.output();
    let after = guest::sample(&layout.prefix, ETH0_RX_IRQ, &[polld]);
    let _ = server.kill();
    let _ = server.wait();
    let (before, after) = (before?, after?);
    let output = output.map_err(|e| failed(format!("iperf3 -c in {}: {e}", layout.gen_ns)))?;
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let bits = report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .filter(|_| output.status.success())
        .ok_or_else(|| {
            failed(format!(
                "iperf3 TCP through the guest failed: {} {}",
                report["error"],
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        })?;
    let guest_s = (after.uptime - before.uptime).max(0.01);
    Ok(TcpRow {
        mode: mode.to_string(),
        target_mbit: target,
        mbit_per_s: bits / 1e6,
        guest_cpu_percent: 100.0 * (1.0 - (after.idle - before.idle) / guest_s).max(0.0),
        polld_cpu_percent: after.percent_since(&before, 0, TaskTicks::total),
        device_interrupts_per_s: (after.interrupts - before.interrupts) as f64 / guest_s,
    })
}

fn write_table(demo: &VmDemo, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "\npolld in a qemu guest ({}, kernel {}, 1 vCPU) between two virtio-net NICs, a CPU-bound competitor on the vCPU; user_frac {}; {} s windows",
        demo.accel, demo.kernel, demo.user_frac, demo.window_s
    );
    let _ = writeln!(
        out,
        "{:<21} {:<6} {:>10} {:>12} {:>14} {:>10} {:>10} {:>11}  rx work in polld's budget",
        "mode",
        "load",
        "offered/s",
        "delivered/s",
        "eth0 irqs/s",
        "polld CPU",
        "ksoftirqd",
        "competitor"
    );
    let label = |r: &VmRow, ff: &str| VmRow {
        mode: match r.device_work {
            DeviceWork::Fair => format!("{}{ff}, fair", r.mode),
            DeviceWork::InterruptPriority => format!("{}{ff}", r.mode),
        },
        ..r.clone()
    };
    let rows: Vec<VmRow> = (demo.rows.iter().map(|r| label(r, "")))
        .chain(demo.livelock.rows.iter().map(|r| label(r, ", ff=0")))
        .collect();
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<21} {:<6} {:>10.0} {:>12.0} {:>14.0} {:>9.1}% {:>9.1}% {:>10.1}%  {}",
            r.mode,
            r.load,
            r.offered_pps,
            r.delivered_pps,
            r.device_interrupts_per_s,
            r.polld_cpu_percent,
            r.ksoftirqd_percent,
            r.competitor_percent,
            if r.rx_work_in_budget {
                "yes".to_string()
            } else {
                format!(
                    "no: {}",
                    r.rx_work["why_not"]
                        .as_str()
                        .unwrap_or("polld does not say")
                )
            }
        );
    }
    let _ = writeln!(
        out,
        "The guest's ksoftirqd/0 (the device work its interrupts leave over) runs at {}: SCHED_FIFO {}, above polld's poll thread, as FreeBSD runs its interrupt handlers; \"fair\": at SCHED_OTHER, Linux's default, where CFS gives it a fair share.",
        DeviceWork::InterruptPriority.name(),
        guest::INTERRUPT_PRIORITY
    );
    let _ = writeln!(out);
    for r in &rows {
        let _ = writeln!(
            out,
            "Every frame gen sent, {} {}: {}",
            r.mode, r.load, r.ledger
        );
    }
    let _ = writeln!(
        out,
        "Every frame is accounted for: host TAPs, guest NICs and polld (rx = forwarded + local + consumed + queued + named drops)."
    );
    let l = &demo.livelock;
    let _ = writeln!(
        out,
        "\ninterrupt mode without fastforwarding (ff=0): best {:.0}/s; flooded {:.0} % of its best: {}",
        l.best_pps,
        l.flooded_percent_of_best,
        if l.reproduced {
            "livelock reproduced"
        } else {
            "NOT under 10 % of its best: no livelock here"
        }
    );
    if demo.tcp.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\niperf3 TCP from gen to sink through the guest, no competitor; CPU is the vCPU's, by the guest's clock"
    );
    let _ = writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "mode", "target", "Mbit/s", "guest CPU", "polld CPU", "eth0 irqs/s"
    );
    for r in &demo.tcp {
        let target = r
            .target_mbit
            .map_or("unlimited".to_string(), |m| format!("{m} Mbit/s"));
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>10.1} {:>9.1}% {:>9.1}% {:>12.0}",
            r.mode,
            target,
            r.mbit_per_s,
            r.guest_cpu_percent,
            r.polld_cpu_percent,
            r.device_interrupts_per_s
        );
    }
    let pair = |target: Option<u32>| {
        let find = |mode: &str| {
            demo.tcp
                .iter()
                .find(|r| r.mode == mode && r.target_mbit == target)
        };
        find("interrupt").zip(find("polling"))
    };
    if let Some((i, p)) = pair(None) {
        let _ = writeln!(
            out,
            "unlimited: polling carried {:.2}x what interrupt mode did",
            p.mbit_per_s / i.mbit_per_s.max(1e-9)
        );
    }
    if let Some((i, p)) = pair(Some(TCP_FIXED_MBIT)) {
        let _ = writeln!(
            out,
            "at {TCP_FIXED_MBIT} Mbit/s: polling carried {:.1} against interrupt mode's {:.1} Mbit/s on {:.2}x its guest CPU (seed 002: 34 % against 73 %, 0.47x)",
            p.mbit_per_s,
            i.mbit_per_s,
            p.guest_cpu_percent / i.guest_cpu_percent.max(1e-9)
        );
    }
}
