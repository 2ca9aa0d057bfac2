//! One row of the VM demo ([`measure`]): a polld of its own in the guest, gen's load
//! through it, the window sampled in the guest, and the frames on the way let through
//! before the row's ledger is booked.

use std::path::Path;
use std::time::{Duration, Instant};

use super::report::VmRow;
use crate::entries::{dev_entry, dev_node, drops_leaf};
use crate::ledger::{Ledger, PathCounters, Sent, StreamPath};
use crate::process::{last_json, Process};
use crate::share::GEN_SLACK_S;
use crate::vm::guest::{self, DeviceWork, NetDevCounters, TaskTicks, ETH0_RX_IRQ};
use crate::{counters, IfCounters, Layout, PolldSetup, TestbedError};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Seconds of load before the window of a polld that polls: started into a running flood,
/// polld learns its queue's NAPI id only from the first frame its socket receives (copy
/// mode), and until it busy polls, the driver's NAPI runs in `ksoftirqd/0` at interrupt
/// priority, above polld's thread. The warm-up outlasts that takeover, so that the window
/// measures polld's polling, not the kernel's work before it (docs/measuring.md
/// §tb-vm).
const TAKEOVER_S: f64 = 5.0;

/// Seconds the frames still on the way after gen stopped may take to drain: long enough
/// for polld at the highest `user_frac` under software emulation to empty its socket's
/// full ring (docs/measuring.md §tb-vm).
const DRAIN_S: f64 = 30.0;

/// polld in the guest on eth0 and eth1 in `mode` with `knobs`; its pid.
pub(super) fn start_polld(
    layout: &Layout,
    mode: &str,
    knobs: &[(&str, &str)],
) -> Result<u32, TestbedError> {
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
pub(super) fn measure(
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
