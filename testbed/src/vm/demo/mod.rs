//! `polld demo --devices vm`: the seed's experiment on a NIC driver. polld forwards in the
//! guest (1 vCPU) between its virtio-net NICs beside a CPU-bound competitor on the same
//! vCPU, in interrupt mode and in polling, under a flood from gen and at half of what
//! interrupt mode delivered under it.
//!
//! The device work the guest's interrupts leave over runs in `ksoftirqd/0`. Each row says
//! where ([`DeviceWork`]): at interrupt priority, above polld, as FreeBSD runs interrupt
//! handlers (the seeds' interrupt mode: every row), or at Linux's default fair share (CFS),
//! NAPI's defence against a flood (one interrupt-mode row under the flood, for comparison).
//!
//! Each row is measured over a window after a warm-up: frames sink's tap1 received per
//! second of host time; in the guest, by its own clock (`/proc/uptime`), eth0's receive
//! interrupts (`virtio0-input.0`) per second, polld's and `ksoftirqd/0`'s CPU time and the
//! competitor's user time (its system time is device work,
//! [`TaskTicks`](crate::vm::guest::TaskTicks)) from their own `/proc/PID/stat`, as a
//! percentage of the ticks the vCPU accounted; and whether polld says eth0's receive work
//! is in its budget (`polld ifconfig`), which needs preferred busy polling. The guest's
//! clock under software emulation is not the host's; each rate is taken on the clock of the
//! side it counts.
//!
//! Each row runs a polld of its own in the guest, so that its final counters are the row's:
//! with them, gen's count and the kernel's counters of the host's TAPs and the guest's
//! NICs, the row's [`Ledger`](crate::ledger::Ledger) follows every frame gen sent to sink's
//! tap1 or to a named drop, and the demo fails if one does not balance.

mod render;
mod report;
mod row;
mod tcp;

use std::io::Write;
use std::path::Path;

use polld_core::Knobs;

use crate::demo::say::say;
use crate::entries::{kern_entry, FASTFORWARDING};
use crate::share::{ShareRow, ShareTrial};
use crate::vm::guest::{self, DeviceWork};
use crate::{Testbed, TestbedError};
use row::{measure, start_polld};

pub use report::{Livelock, TcpRow, VmDemo, VmRow, LIVELOCK_PERCENT, TCP_FIXED_MBIT};

/// Seconds of load before each window.
const WARM_UP: f64 = 1.0;

/// `kern.polling.hz` in a guest under software emulation, the knob's lowest: each tick
/// costs the poll thread a fixed time outside its cycles (its wakeup and timer path, and
/// the transmit completions the kernel charges it for: `kern.polling.tick_overhead_ns`),
/// which the time controller takes out of the devices' share; the fewer the ticks, the
/// more of the vCPU is left to the cycles (docs/measuring.md §tb-vm).
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
        let measuring = |out: &mut dyn Write, what: String| {
            let secs = args.duration;
            say(
                args.json,
                out,
                format_args!("{what}; measuring {secs} s ..."),
            );
        };
        // The device work at interrupt priority in every row, and once at the kernel's
        // default for comparison under the flood.
        for work in [DeviceWork::InterruptPriority, DeviceWork::Fair] {
            measuring(
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
            measuring(
                out,
                format!("interrupt mode without fastforwarding at {what}"),
            );
            let work = DeviceWork::InterruptPriority;
            livelock.push(row("interrupt", &seed000, rate, work)?);
        }
        // Seed 001's screen.
        measuring(out, format!("interrupt mode at {half:.0} frames/s (half of what it delivered with the device work at a fair share)"));
        rows.push(row(
            "interrupt",
            &knobs,
            Some(half),
            DeviceWork::InterruptPriority,
        )?);
        measuring(
            out,
            "polling mode under a flood from gen, the device work at interrupt priority".into(),
        );
        rows.push(row("polling", &knobs, None, DeviceWork::InterruptPriority)?);
        measuring(out, format!("polling mode at {half:.0} frames/s"));
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
    let tcp = tcp::tcp(tb, polld, args.duration, args.json, out);
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
        render::write_table(&demo, out);
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
/// work at interrupt priority, a polld of its own in the guest in the trial's mode, at its
/// `user_frac` (at [`TCG_HZ`] under software emulation) with its knobs, `gen_polld gen` at
/// its rate from gen, and a competitor in the guest if it asks for one; the row as the TAP
/// trials give it, with the NIC's receive interrupts per second as its interrupts. A row
/// whose polld's counters or ledger do not add up is an error.
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
        // The guest's row does not read gen's summary for it.
        gen_ip_version: None,
        drops: Vec::new(),
        ledger: Some(row.ledger),
        conserved: true,
    })
}
