//! `polld bench seeds`: the seeds' experiments (docs/sources.md: Rizzo 2002, the polling
//! how-to, the nixCraft tutorial) on real traffic, on a TAP testbed of the bench's own, each
//! printed beside the seed's figure.
//!
//! Steps, each one or more [`crate::share`] trials (polld realtime on the fwd CPU, `polld
//! gen` on the gen CPU, both TAPs in the same mode):
//! - `curve`: delivered against offered load (gen's rate in steps, then unlimited) for
//!   interrupt, interrupt with `net.inet.ip.fastforwarding=0`, and polling; no competitor.
//!   Three rounds through the steps (one with `--quick`); each point is the round with the
//!   median delivered rate, so that one trial spoiled by other work on the machine does not
//!   make the best or the worst point. Then polling's plateau ([`crate::plateau`]): 25 more
//!   rounds at the loads above its peak and at its best, whose means its verdict compares.
//! - `table`: Rizzo's table from the curve's flooded points, one more flood polling with
//!   `fastforwarding=0`, 2 and 4 streams (more input TAPs, [`crate::streams`]) in both
//!   modes, and the receive CPU load from the `share` step.
//! - `screens`: `polld stat --once` in interrupt mode at a moderate rate, then
//!   `polld ifconfig tap0 polling` (and tap1) and `polld stat --once` again.
//! - `tcp`: iperf3 TCP from gen to sink through polld, interrupt against polling: unlimited,
//!   then at a fixed bitrate both modes carry (a quarter of the slower mode's unlimited
//!   rate, as the seed's 10 Mbit/s link was well under its box's capacity), with the CPU of
//!   every thread on the path.
//! - `share`: the CPU-bound competitor's share at user_frac 10, 50 and 90, and in
//!   interrupt mode, under a flood; then polling at user_frac 50 and interrupt mode under
//!   an IPv6 flood (`polld gen --ipv6`), each beside its IPv4 trial: IPv6's delivered
//!   rate over IPv4's and the competitor's share with IPv6 frames (TAP testbed).
//! - `adaptive`: seed 004, interrupt against adaptive mode (the fast interrupt and its task
//!   bounded by `rx_process_limit`), each with fastforwarding 1 and 0, under a flood and
//!   at a lower load: the forwarding rate and whether each livelocks.
//! - `sleep`: seed 003's `usleep(1)` and `nanosleep(1)`, timed at the default timer slack,
//!   a 1-ns slack and SCHED_FIFO ([`crate::sleep`]); no testbed traffic.
//! - `passive`: seed 003 on packets: a reader that sleeps as long as `usleep(1)` did
//!   between reads against busy polling, polling at the highest hz and interrupts,
//!   through a small queue: loss, one-way p99 and CPU (`polld sink`); then the same
//!   readers merging two inputs into one output: the frames released out of send order
//!   ([`merge`]).
//!
//! `--devices vm` runs the curve and the share steps on the VM testbed instead: polld in a
//! qemu guest between two virtio-net NICs, a polld of its own for each trial, `polld gen`
//! in the host's gen namespace, the competitor on the guest's vCPU, the loads scaled to
//! what the guest forwards, the guest's device work (`ksoftirqd/0`) at interrupt
//! priority as FreeBSD's ([`crate::vm::demo::trial`]).
//!
//! Every trial checks conservation on every interface from polld's final counters; the
//! bench fails if one does not hold. The figures go to `--out` as SVG ([`crate::plot`]).
//!
//! Here the bench's options and its order of steps; the steps in `steps` (`screens` and
//! `tcp` beside it), what each trial runs in `plan`, the report and its verdict in
//! `report`, its text in `render` and its charts in `plots`.

mod adaptive;
mod merge;
mod passive;
mod plan;
mod plots;
mod render;
mod report;
mod screens;
mod seed;
mod steps;
mod tcp;

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::bench::{on_own_testbed, print_report};
use crate::{Accel, Devices, TestbedError, VmOptions};
use plan::{FULL, FULL_VM, QUICK, QUICK_VM};
use steps::Bench;

pub use crate::results::Machine;
pub use report::{
    AdaptiveRow, CurveSeries, Ipv6Row, Livelock, MergeRow, PassiveRow, Screen, SeedsReport,
    TableRow, TcpRow,
};

/// `polld bench seeds` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SeedsArgs {
    /// Shorter windows, four load steps, one round of the curve instead of three and two
    /// rounds of polling's plateau instead of 25.
    #[arg(long)]
    pub quick: bool,
    /// Run only these steps (comma-separated); all of them by default. `table` also runs
    /// `curve` and `share`, whose figures it shows, and `passive` runs `sleep`, whose
    /// `usleep(1)` sets its passive reader's period.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub steps: Vec<Step>,
    /// Directory the SVG plots are written to.
    #[arg(long, default_value = "target/bench-seeds")]
    pub out: PathBuf,
    /// Namespace prefix of the bench's own TAP testbed (`{prefix}gen`, ...).
    #[arg(long, default_value = "bseeds", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print the results as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
    /// The testbed: TAPs only polld joins, or a qemu guest with polld between its two
    /// virtio-net NICs (a driver, its NAPI and its interrupts), where the bench runs the
    /// curve and the share steps (`polld demo --devices vm` has the guest's screens and
    /// TCP).
    #[arg(long, value_enum, default_value = "tap")]
    pub devices: SeedsDevices,
}

/// Where `polld bench seeds` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SeedsDevices {
    /// The TAP testbed: polld on the host between two TAPs, polld gen on another CPU.
    Tap,
    /// The VM testbed: polld in a 1-vCPU qemu guest between two virtio-net NICs.
    Vm,
}

impl SeedsDevices {
    fn devices(self) -> Devices {
        match self {
            SeedsDevices::Tap => Devices::Tap,
            SeedsDevices::Vm => Devices::Vm,
        }
    }

    /// The steps that run here.
    fn steps(self) -> &'static [Step] {
        match self {
            SeedsDevices::Tap => &[
                Step::Curve,
                Step::Table,
                Step::Screens,
                Step::Tcp,
                Step::Share,
                Step::Adaptive,
                Step::Sleep,
                Step::Passive,
            ],
            SeedsDevices::Vm => &[Step::Curve, Step::Share],
        }
    }
}

/// One experiment of the bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Curve,
    Table,
    Screens,
    Tcp,
    Share,
    Adaptive,
    Sleep,
    Passive,
}

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Runs the bench; `polld` is the binary the trials run. Results go to `out`, a
/// progress line per step to `progress`.
pub fn run_seeds(
    args: &SeedsArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<SeedsReport, TestbedError> {
    let here = args.devices.steps();
    let mut steps = if args.steps.is_empty() {
        here.to_vec()
    } else {
        args.steps.clone()
    };
    if let Some(step) = steps.iter().find(|s| !here.contains(s)) {
        let name = |s: &Step| format!("{s:?}").to_lowercase();
        return Err(failed(format!(
            "`polld bench seeds --devices {}` runs {}, not {}: `polld demo --devices vm` has the guest's screens and TCP",
            format!("{:?}", args.devices).to_lowercase(),
            here.iter().map(name).collect::<Vec<_>>().join(" and "),
            name(step)
        )));
    }
    if steps.contains(&Step::Table) {
        steps.extend([Step::Curve, Step::Share]);
    }
    if steps.contains(&Step::Passive) {
        steps.push(Step::Sleep);
    }
    let timing = match (args.devices, args.quick) {
        (SeedsDevices::Tap, false) => FULL,
        (SeedsDevices::Tap, true) => QUICK,
        (SeedsDevices::Vm, false) => FULL_VM,
        (SeedsDevices::Vm, true) => QUICK_VM,
    };
    // On the VM testbed the guest runs this same polld.
    let vm = VmOptions {
        polld: polld.to_path_buf(),
        accel: Accel::Auto,
    };
    let mut report = on_own_testbed(
        "seeds",
        &args.prefix,
        args.devices.devices(),
        &vm,
        progress,
        |tb, dir, cpus, progress| {
            let testbed = match &tb.report().guest {
                Some(g) => format!(
                    "VM testbed: polld in a qemu guest ({}, kernel {}, 1 vCPU) between two virtio-net NICs, polld gen in the host's gen namespace; the guest's ksoftirqd/0 at {} (SCHED_FIFO {}, above polld)",
                    g.accel,
                    g.kernel,
                    crate::vm::guest::DeviceWork::InterruptPriority.name(),
                    crate::vm::guest::INTERRUPT_PRIORITY
                ),
                None => format!(
                    "TAP testbed: polld realtime on CPU{}, polld gen on CPU{}",
                    cpus.1, cpus.0
                ),
            };
            let mut bench = Bench {
                tb,
                polld,
                dir,
                cpus,
                timing,
                progress,
                report: SeedsReport {
                    machine: Some(Machine::this()),
                    testbed,
                    quick: args.quick,
                    ..SeedsReport::default()
                },
            };
            // In this order: the table reads the curve's and the share step's trials, the
            // passive readers the sleep step's usleep(1).
            for step in [
                Step::Curve,
                Step::Share,
                Step::Table,
                Step::Screens,
                Step::Tcp,
                Step::Adaptive,
                Step::Sleep,
                Step::Passive,
            ] {
                if !steps.contains(&step) {
                    continue;
                }
                match step {
                    Step::Curve => bench.curve()?,
                    Step::Share => bench.share()?,
                    Step::Table => bench.table()?,
                    Step::Screens => bench.screens()?,
                    Step::Tcp => bench.tcp()?,
                    Step::Adaptive => bench.adaptive()?,
                    Step::Sleep => bench.sleep()?,
                    Step::Passive => bench.passive()?,
                }
            }
            Ok(bench.report)
        },
    )?;
    report.livelock = Livelock::of(&report.curve);
    let mut findings = report::findings(&report);
    findings.extend(passive::finding(&report.passive));
    findings.extend(merge::finding(&report.merge));
    findings.extend(adaptive::finding(&report.adaptive));
    report.findings = findings;
    report.svgs = plots::write_plots(&report, &args.out)?;
    print_report(&report, args.json, out, render::write_text);
    Ok(report)
}
