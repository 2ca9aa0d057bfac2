//! `polld bench sweep`: every mode of polld across the whole load range, beside the
//! kernel's own forwarding, on the AF_XDP veth testbed and on TAP.
//!
//! On each testbed it first measures interrupt mode's capacity (what polld in interrupt
//! mode delivers under a flood of 60-byte frames to `polld sink`; and beside it, the same
//! flood with no sink process, counted by the output's interface as the demo counts, to
//! show what the sink costs the path), then for every forwarder (the kernel on
//! veth, where it can forward; polld in interrupt, adaptive, polling, auto and busy mode,
//! each with its defaults) runs `polld gen` at each load of [`LOADS`] (a share of that
//! capacity, from 1 % to 120 %) through it to `polld sink`, and records: offered and
//! delivered frames/s, the sink's loss and one-way latency (p50, p99, p99.9, from gen's
//! timestamps), the poll CPU's busy time (all work on the forwarder's CPU, by
//! `/proc/stat`), polld's own CPU and its interrupts/s. Above capacity it also runs
//! polling at `user_frac` [`LOW_USER_FRAC`], the seed's setting for a box that only
//! forwards. For auto mode it samples `dev.<input>.auto_polling` while the load runs, to
//! say where auto switched.
//!
//! Every point is one [`crate::demo::measure`] trial: polld realtime on the fwd CPU, the
//! sink on its CPU. At the light loads (up to [`TUNED_UP_TO`] of capacity) a point runs on
//! the path the latency bench tunes (`cargo bench --bench latency`), as a latency-tuned
//! host would: the fwd and sink CPUs held out of halt ([`crate::idle::IdleHold`]: a halted
//! vCPU takes the hypervisor's time to wake) and, on veth, fwd's receive kthreads at
//! `SCHED_FIFO` below polld's poll thread ([`crate::placement::RealtimeRx`]: at
//! `SCHED_OTHER` a woken one waits behind ordinary tasks). Above that the receive kthreads
//! stay as the testbed placed them: a realtime input thread with work to do starves the
//! sink on the same CPU. Where the kernel refuses the tuning, every point runs untuned and
//! the report says why. The must-show checks ([`checks`]) compare figures of the same run as
//! ratios and say whether each holds; they are measurements, never a reason to fail. The
//! run fails only when conservation failed in some polld run.

mod checks;
mod render;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use polld_core::dataplane::DEV_NODE;
use polld_core::{IfCounters, Interface, Knobs};
use serde::Serialize;

use crate::demo::{measure, DemoRow, Forwarder, Load, Trial};
use crate::entries::{dev_entry, kern_entry, polld_values, value_of};
use crate::idle::IdleHold;
use crate::placement::RealtimeRx;
use crate::{Devices, IpFamily, Role, Testbed, TestbedError, UpOptions, VmOptions};

pub use checks::{check, Check, Rule};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// The testbeds a sweep runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SweepDevices {
    /// The TAP testbed: polld joins tap0 and tap1; the kernel cannot forward there.
    Tap,
    /// The veth testbed: polld on AF_XDP, and the kernel's own forwarding as reference.
    Veth,
    /// veth, then TAP.
    Both,
}

impl SweepDevices {
    fn testbeds(self) -> Vec<Devices> {
        match self {
            SweepDevices::Tap => vec![Devices::Tap],
            SweepDevices::Veth => vec![Devices::Veth],
            SweepDevices::Both => vec![Devices::Veth, Devices::Tap],
        }
    }
}

/// `polld bench sweep` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Three loads (10, 50 and 120 % of interrupt mode's capacity) of half a second each,
    /// instead of eleven of 1.5 s.
    #[arg(long)]
    pub quick: bool,
    /// The testbeds to sweep.
    #[arg(long, value_enum, default_value_t = SweepDevices::Both)]
    pub devices: SweepDevices,
    /// Directory the SVG plots are written to (two per testbed).
    #[arg(long, default_value = "target/bench-sweep")]
    pub out: PathBuf,
    /// Namespace prefix of the bench's own testbeds (`{prefix}gen`, ...).
    #[arg(long, default_value = "bswp", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print the report as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
}

/// The loads of a full sweep, as shares of interrupt mode's capacity.
pub const LOADS: [f64; 11] = [0.01, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 1.0, 1.2];
/// The highest load, as a share of interrupt mode's capacity, run on the latency-tuned
/// path. Two full sweeps on the veth testbed (2-CPU Intel guest, kernel 6.18, one day,
/// one untuned and one tuned below capacity: figures of two runs, so a direction, not a
/// ratio) put the tuned p99 below the untuned one at 5 % (interrupt mode 447 against
/// 2398 µs, the kernel 107 against 1935) and above it at 20 % (interrupt mode 22.4 against
/// 3.2 ms, the kernel 3.8 against 0.14 ms: fwd's realtime receive kthread and polld left
/// the sink behind).
pub const TUNED_UP_TO: f64 = 0.1;

/// The loads of `--quick`.
pub const QUICK_LOADS: [f64; 3] = [0.1, 0.5, 1.2];

/// polld's modes, in the table's order.
pub const MODES: [&str; 5] = ["interrupt", "adaptive", "polling", "auto", "busy"];
/// The row of the kernel's own forwarding.
pub const KERNEL: &str = "kernel";
/// `kern.polling.user_frac` of the extra polling row above capacity.
pub const LOW_USER_FRAC: u32 = 10;

/// The name of the extra polling row.
fn low_user_frac_row() -> String {
    format!("polling, user_frac {LOW_USER_FRAC}")
}

/// How auto mode spent one point.
#[derive(Clone, Debug, Serialize)]
pub struct AutoSeen {
    /// The share of the samples taken while frames arrived in which the input polled
    /// (`dev.<input>.auto_polling`); `None` when no sample saw frames arrive.
    pub polling_share: Option<f64>,
    /// `dev.<input>.auto_switches` over the run, either way.
    pub switches: u64,
}

/// One forwarder at one load.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// `kernel`, a mode of polld, or `polling, user_frac 10`.
    pub forwarder: String,
    /// The load asked, as a share of interrupt mode's capacity.
    pub load: f64,
    /// The rate asked of `polld gen`, frames/s.
    pub rate_pps: u64,
    pub offered_pps: f64,
    /// Frames `polld sink` received, per second of gen's run.
    pub delivered_pps: f64,
    /// Frames gen sent that the sink never saw, and their share in percent.
    pub lost: Option<u64>,
    pub loss_percent: Option<f64>,
    /// One-way latency gen → sink, µs (`None` when the sink timed no frame).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// The poll CPU's busy time (everything on it: the forwarder, the kernel's receive
    /// work there, the sink when it shares it), percent.
    pub cpu_busy_percent: f64,
    /// polld's own CPU time, percent of one CPU (0 for the kernel).
    pub polld_cpu_percent: f64,
    /// polld's interrupts on its input, per second (`None` for the kernel).
    pub interrupts_per_sec: Option<f64>,
    /// Auto mode's states during the run (auto's rows only).
    pub auto: Option<AutoSeen>,
    /// Conservation in polld's run (`None` for the kernel).
    pub conserved: Option<bool>,
    /// Whether the point ran on the latency-tuned path.
    pub tuned: bool,
}

impl SweepPoint {
    fn of(
        forwarder: &str,
        load: f64,
        rate_pps: u64,
        row: &DemoRow,
        input: &str,
        tuned: bool,
    ) -> SweepPoint {
        let l = row.latency;
        let polld = row.conserved.is_some();
        SweepPoint {
            forwarder: forwarder.to_string(),
            load,
            rate_pps,
            offered_pps: row.offered_pps,
            delivered_pps: row.delivered_pps,
            lost: l.map(|l| l.lost),
            loss_percent: l.map(|l| l.loss_percent),
            p50_us: l.map(|l| l.p50_us),
            p99_us: l.map(|l| l.p99_us),
            p999_us: l.map(|l| l.p999_us),
            cpu_busy_percent: row.fwd_cpu_busy_percent,
            polld_cpu_percent: row.polld_cpu_percent,
            interrupts_per_sec: polld.then_some(row.interrupts_per_sec),
            auto: (forwarder == "auto").then(|| AutoSeen {
                polling_share: None,
                switches: row.polld_delta(&dev_entry(input, IfCounters::AUTO_SWITCHES.name)),
            }),
            conserved: row.conserved,
            tuned,
        }
    }

    /// Delivered over offered (0 when nothing was offered).
    pub fn delivered_share(&self) -> f64 {
        if self.offered_pps > 0.0 {
            self.delivered_pps / self.offered_pps
        } else {
            0.0
        }
    }
}

/// One testbed's sweep.
#[derive(Clone, Debug, Serialize)]
pub struct TestbedSweep {
    /// `veth` or `tap`.
    pub testbed: String,
    /// polld's backend on it.
    pub backend: String,
    /// Interrupt mode's delivered rate under a flood, frames/s: the loads' 100 %.
    pub capacity_pps: f64,
    /// Interrupt mode's rate under the same flood with no sink process (the demo's
    /// setup: delivered counted by the sink's interface), frames/s: what attaching the
    /// sink costs the path.
    pub capacity_without_sink_pps: f64,
    /// `kern.polling.hz` of every polld run (its default).
    pub hz: u32,
    pub points: Vec<SweepPoint>,
    /// The must-show checks on this testbed's figures.
    pub checks: Vec<Check>,
    /// Where auto mode polled, in a sentence.
    pub auto_switched: String,
    /// The polld runs in which conservation failed (`interrupt at 50 %`, the capacity's
    /// flood as `interrupt flood`); empty when it held in every one.
    pub not_conserved: Vec<String>,
    /// Why the points below capacity ran untuned; `None` when they ran tuned.
    pub tuning_refused: Option<String>,
    pub svgs: Vec<PathBuf>,
}

impl TestbedSweep {
    /// The forwarders of its rows, in the table's order.
    pub fn forwarders(&self) -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for p in &self.points {
            if !seen.contains(&p.forwarder) {
                seen.push(p.forwarder.clone());
            }
        }
        seen
    }
}

/// What `polld bench sweep --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// Seconds of load per point.
    pub duration_secs: f64,
    /// The loads, as shares of interrupt mode's capacity.
    pub loads: Vec<f64>,
    pub testbeds: Vec<TestbedSweep>,
    /// Conservation held in every polld run.
    pub conserved: bool,
    /// Every plot written.
    pub svgs: Vec<PathBuf>,
}

/// Runs the sweep on the testbeds `args` asks for, each its own; `polld` is the binary it
/// runs. The tables (or JSON) go to `out`, a progress line per point to `progress`. Fails
/// when conservation failed in some polld run.
pub fn run_sweep(
    args: &SweepArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<SweepReport, TestbedError> {
    let (loads, duration): (&[f64], f64) = if args.quick {
        (&QUICK_LOADS, 0.5)
    } else {
        (&LOADS, 1.5)
    };
    let mut testbeds = Vec::new();
    for devices in args.devices.testbeds() {
        let options = UpOptions {
            // As a NIC transmits without the forwarder's CPU: the sink's receive thread
            // above polld's (veth only: a TAP's receive work is polld's own write).
            sink_rx_realtime: devices == Devices::Veth,
            ..UpOptions::default()
        };
        let mut sweep = crate::bench::on_own_testbed_with(
            "sweep",
            &args.prefix,
            devices,
            &VmOptions::default(),
            &options,
            progress,
            |tb, dir, _, progress| {
                let bed = Bed {
                    tb,
                    options: &options,
                    polld,
                    dir,
                    duration,
                };
                bed.sweep(loads, progress)
            },
        )?;
        sweep.svgs = render::write_plots(&sweep, &args.out)?;
        testbeds.push(sweep);
    }
    let not_conserved: Vec<String> = testbeds
        .iter()
        .flat_map(|t| {
            t.not_conserved
                .iter()
                .map(|run| format!("{}: {run}", t.testbed))
        })
        .collect();
    let conserved = not_conserved.is_empty();
    let report = SweepReport {
        duration_secs: duration,
        loads: loads.to_vec(),
        svgs: testbeds.iter().flat_map(|t| t.svgs.clone()).collect(),
        testbeds,
        conserved,
    };
    crate::bench::print_report(&report, args.json, out, render::write_text);
    if !conserved {
        return Err(failed(format!(
            "conservation did not hold in {}: see `conserved` in --json",
            not_conserved.join(", ")
        )));
    }
    Ok(report)
}

/// A row of the table: who forwards.
struct Row<'k> {
    label: String,
    /// polld's mode; `None`: the kernel forwards.
    mode: Option<&'static str>,
    /// Knobs polld sets besides its defaults.
    knobs: &'k [(&'k str, &'k str)],
}

impl<'k> Row<'k> {
    fn kernel() -> Row<'k> {
        Row {
            label: KERNEL.into(),
            mode: None,
            knobs: &[],
        }
    }

    fn polld(label: String, mode: &'static str, knobs: &'k [(&'k str, &'k str)]) -> Row<'k> {
        Row {
            label,
            mode: Some(mode),
            knobs,
        }
    }
}

/// One testbed and what every point on it runs with.
struct Bed<'a> {
    tb: &'a Testbed,
    options: &'a UpOptions,
    polld: &'a Path,
    dir: &'a Path,
    duration: f64,
}

impl Bed<'_> {
    fn devices(&self) -> Devices {
        self.tb.layout().devices
    }

    fn backend(&self) -> &'static str {
        match self.devices() {
            Devices::Tap => "tap",
            Devices::Veth | Devices::Vm => "af_xdp",
        }
    }

    /// polld's input interface (veth1, or tap0 as polld names it).
    fn input(&self) -> String {
        self.tb.layout().veth1.name.clone()
    }

    /// Capacity first, then every forwarder at every load.
    fn sweep(&self, loads: &[f64], progress: &mut dyn Write) -> Result<TestbedSweep, TestbedError> {
        let name = self.devices().name();
        let _ = writeln!(
            progress,
            "polld bench sweep: {name}: interrupt mode's capacity, a flood for {} s ...",
            self.duration
        );
        let flood = self.point("interrupt", &[], "unlimited")?;
        let bare = self.trial(
            Forwarder::Polld {
                backend: self.backend(),
                mode: "interrupt",
                knobs: &[],
            },
            "unlimited",
            false,
        )?;
        let capacity_pps = flood.delivered_pps;
        if capacity_pps < 100.0 {
            return Err(failed(format!(
                "interrupt mode delivered {capacity_pps:.0} frames/s under a flood on {name}: \
                 nothing to sweep; see `polld demo --devices {name}`"
            )));
        }
        let user_frac = format!("{LOW_USER_FRAC}");
        let user_frac_knob = kern_entry(Knobs::USER_FRAC.name);
        let low = [(user_frac_knob.as_str(), user_frac.as_str())];
        let mut rows = Vec::new();
        if self.devices() == Devices::Veth {
            rows.push(Row::kernel());
        }
        rows.extend(MODES.map(|mode| Row::polld(mode.into(), mode, &[])));
        rows.push(Row::polld(low_user_frac_row(), "polling", &low));
        let input = self.input();
        let mut tuning_refused = None;
        let mut points = Vec::new();
        for row in &rows {
            // The extra polling row runs above capacity only.
            let extra = !row.knobs.is_empty();
            for &load in loads.iter().filter(|&&load| !extra || load > 1.0) {
                let rate = ((load * capacity_pps).round() as u64).max(1);
                let label = &row.label;
                let _ = writeln!(
                    progress,
                    "polld bench sweep: {name}: {label} at {:.0} % ({rate}/s), {} s ...",
                    load * 100.0,
                    self.duration
                );
                let rate_arg = rate.to_string();
                let tuning = (load <= TUNED_UP_TO && tuning_refused.is_none())
                    .then(|| {
                        self.tune().map_err(|e| {
                            let _ = writeln!(
                                progress,
                                "polld bench sweep: {name}: {e}; every point runs untuned"
                            );
                            tuning_refused = Some(e.to_string());
                        })
                    })
                    .and_then(Result::ok);
                let (measured, share) = self.watched(label == "auto", || match row.mode {
                    Some(mode) => self.point(mode, row.knobs, &rate_arg),
                    None => self.kernel(&rate_arg),
                })?;
                let tuned = tuning.is_some();
                drop(tuning);
                let mut point = SweepPoint::of(label, load, rate, &measured, &input, tuned);
                if let Some(auto) = point.auto.as_mut() {
                    auto.polling_share = share;
                }
                points.push(point);
            }
        }
        let not_conserved = (flood.conserved == Some(false))
            .then(|| "interrupt flood".to_string())
            .into_iter()
            .chain(
                points
                    .iter()
                    .filter(|p| p.conserved == Some(false))
                    .map(|p| format!("{} at {:.0} %", p.forwarder, p.load * 100.0)),
            )
            .collect();
        let hz = Knobs::default().hz;
        let checks = check(&points, hz);
        let auto_switched = render::auto_sentence(&points, &input);
        Ok(TestbedSweep {
            testbed: name.to_string(),
            backend: self.backend().to_string(),
            capacity_pps,
            capacity_without_sink_pps: bare.delivered_pps,
            hz,
            points,
            checks,
            auto_switched,
            not_conserved,
            tuning_refused,
            svgs: Vec::new(),
        })
    }

    /// The latency-tuned path (see the module docs) for as long as it lives: the fwd and
    /// sink CPUs out of halt; on veth, fwd's receive kthreads realtime below polld.
    fn tune(&self) -> Result<(IdleHold, Option<RealtimeRx>), TestbedError> {
        let cpus = self.options.cpus;
        let idle = IdleHold::poll(&[cpus.fwd, cpus.sink])?;
        let rx = match self.devices() {
            Devices::Veth => Some(RealtimeRx::raise(self.tb.layout(), &[Role::Fwd])?),
            Devices::Tap | Devices::Vm => None,
        };
        Ok((idle, rx))
    }

    /// polld in `mode` with `knobs` at `rate` through to the sink.
    fn point(
        &self,
        mode: &str,
        knobs: &[(&str, &str)],
        rate: &str,
    ) -> Result<DemoRow, TestbedError> {
        self.trial(
            Forwarder::Polld {
                backend: self.backend(),
                mode,
                knobs,
            },
            rate,
            true,
        )
    }

    /// The kernel's own forwarding at `rate`.
    fn kernel(&self, rate: &str) -> Result<DemoRow, TestbedError> {
        self.trial(Forwarder::Kernel, rate, true)
    }

    /// `forwarder` at `rate`; with `sink`, counted and timed by `polld sink`, else by the
    /// sink's interface.
    fn trial(&self, forwarder: Forwarder, rate: &str, sink: bool) -> Result<DemoRow, TestbedError> {
        let trial = Trial {
            label: String::new(),
            forwarder,
            load: Load::Frames {
                rate,
                sink,
                family: IpFamily::Ipv4,
            },
            duration: self.duration,
        };
        measure(self.tb, self.options, self.polld, self.dir, &trial)
    }

    /// Runs `run`; with `watch`, samples polld's input meanwhile (every
    /// [`WATCH_EVERY`]) and returns the share of the samples that saw frames arrive in
    /// which it polled.
    fn watched(
        &self,
        watch: bool,
        run: impl FnOnce() -> Result<DemoRow, TestbedError>,
    ) -> Result<(DemoRow, Option<f64>), TestbedError> {
        if !watch {
            return run().map(|row| (row, None));
        }
        let socket = self.dir.join("polld.sock");
        let input = self.input();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            let watcher = s.spawn(|| watch_auto(&socket, &input, &done));
            let row = run();
            done.store(true, Ordering::Relaxed);
            let share = watcher.join().unwrap_or(None);
            row.map(|row| (row, share))
        })
    }
}

/// How often auto's state is sampled while a point runs.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Samples `dev.<input>.auto_polling` and `rx_packets` over polld's `socket` until `done`;
/// returns the share of the samples after which the input had received frames in which
/// it polled (`None`: no such sample). A sample polld does not answer (not started yet,
/// or stopped) is skipped.
fn watch_auto(socket: &Path, input: &str, done: &AtomicBool) -> Option<f64> {
    let polling = dev_entry(input, Interface::<()>::AUTO_POLLING.name);
    let rx = dev_entry(input, IfCounters::RX_PACKETS.name);
    let mut last_rx: Option<u64> = None;
    let mut seen: BTreeMap<bool, u64> = BTreeMap::new();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(WATCH_EVERY);
        let Ok(values) = polld_values(socket, DEV_NODE) else {
            last_rx = None;
            continue;
        };
        let now = value_of(&values, &rx);
        if last_rx.is_some_and(|before| now > before) {
            *seen.entry(value_of(&values, &polling) == 1).or_default() += 1;
        }
        last_rx = Some(now);
    }
    let all: u64 = seen.values().sum();
    (all > 0).then(|| seen.get(&true).copied().unwrap_or(0) as f64 / all as f64)
}
