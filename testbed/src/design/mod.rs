//! `polld bench design`: the measurements behind polld's own defaults, each an A/B on the
//! TAP testbed in one run. For every setting whose default docs/algorithm.md §10 justifies
//! by a figure, it runs polld once with the default and once with the alternative the
//! default was chosen against, under the load that tells them apart, and prints per
//! figure: the setting, what was measured, the default's figure, the alternative's, and
//! their ratio. Both sides of a row come from the same run on the same machine; the rule
//! a row supports is stated in docs/algorithm.md §10, which cites docs/results/design.md.
//!
//! The steps ([`Step`]; `--steps` chooses, in this order):
//! - `quiet_cycles`: polld idle, both interfaces polling, no traffic; polld's CPU and its
//!   tick wakeups with the default against 0 (polling never goes quiet);
//! - `burst_max`: a flood at `user_frac` 50 with a CPU-bound competitor beside polld; the
//!   delivered rate and the competitor's share with the default against FreeBSD's 150;
//! - `looks`: 10 kpps while polling; the sink's one-way latency with the default against
//!   0 (no look between ticks);
//! - `auto_window_ticks`: 10 kpps in auto mode; the switches between interrupts and
//!   polling with the default against a window of 1 tick;
//! - `idle_wakeups`: `idle_poll` 1 at half of interrupt mode's flood rate (measured first);
//!   polld's CPU per forwarded packet with the default against 0 (no limit).
//!
//! Every side is a [`crate::share::TrialRun`] (or a [`crate::demo::measure`] trial, for
//! latency, with `polld sink` on tap1): polld realtime on the fwd CPU with only the
//! knobs named. The run fails if conservation failed in any polld run, never on a figure.

mod render;
mod steps;

use std::fmt;
use std::io::Write;
use std::path::Path;

use clap::builder::PossibleValue;
use polld_core::Knobs;
use serde::Serialize;

use crate::entries::kern_entry;
use crate::TestbedError;

/// `polld bench design` options.
#[derive(clap::Args, Debug, Clone)]
pub struct DesignArgs {
    /// 1-second windows after half a second of warm-up, instead of 3 after 1.
    #[arg(long)]
    pub quick: bool,
    /// The comparisons to run, by knob (comma-separated); they run in the order listed
    /// under `--help`.
    #[arg(long, value_delimiter = ',', default_values_t = Step::ALL)]
    pub steps: Vec<Step>,
    /// Namespace prefix of the bench's own TAP testbed (`{prefix}gen`, ...).
    #[arg(long, default_value = "bdsgn", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print the report as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
}

/// One comparison: a knob's default against the alternative it was chosen over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    QuietCycles,
    BurstMax,
    Looks,
    AutoWindowTicks,
    IdleWakeups,
}

impl Step {
    /// Every step, in the order a run takes them.
    pub const ALL: [Step; 5] = [
        Step::QuietCycles,
        Step::BurstMax,
        Step::Looks,
        Step::AutoWindowTicks,
        Step::IdleWakeups,
    ];

    /// The knob's name under `kern.polling`, which names the step too.
    pub fn knob(self) -> &'static str {
        match self {
            Step::QuietCycles => Knobs::QUIET_CYCLES.name,
            Step::BurstMax => Knobs::BURST_MAX.name,
            Step::Looks => Knobs::LOOKS.name,
            Step::AutoWindowTicks => Knobs::AUTO_WINDOW_TICKS.name,
            Step::IdleWakeups => Knobs::IDLE_WAKEUPS.name,
        }
    }

    /// The knob's default, as `polld run` starts with it.
    pub fn default_value(self) -> String {
        let k = Knobs::default();
        match self {
            Step::QuietCycles => k.quiet_cycles,
            Step::BurstMax => k.burst_max,
            Step::Looks => k.looks,
            Step::AutoWindowTicks => k.auto_window_ticks,
            Step::IdleWakeups => k.idle_wakeups,
        }
        .to_string()
    }

    /// The value the default is measured against.
    pub fn alternative(self) -> String {
        match self {
            // Never quiet, no looks, no limit on the idle poller's wakeups.
            Step::QuietCycles | Step::Looks | Step::IdleWakeups => 0,
            Step::BurstMax => polld_core::knobs::FREEBSD_BURST_MAX,
            Step::AutoWindowTicks => 1,
        }
        .to_string()
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.knob())
    }
}

impl clap::ValueEnum for Step {
    fn value_variants<'a>() -> &'a [Self] {
        &Step::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.knob()))
    }
}

impl Serialize for Step {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.knob())
    }
}

/// A knob's value and the figure polld measured with it.
#[derive(Clone, Debug, Serialize)]
pub struct Side {
    pub value: String,
    pub figure: f64,
}

/// One figure of a comparison, both sides measured in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct DesignRow {
    pub step: Step,
    /// The knob's full name (`kern.polling.quiet_cycles`).
    pub setting: String,
    /// What was measured, and under which load, with its unit.
    pub measured: String,
    pub default: Side,
    pub alternative: Side,
    /// The alternative's figure over the default's; `None` when the default's is 0.
    pub ratio: Option<f64>,
}

impl DesignRow {
    /// `step`'s row for `measured`: `figures` are the default's, then the alternative's.
    pub fn new(step: Step, measured: String, figures: [f64; 2]) -> DesignRow {
        let [default, alternative] = figures;
        DesignRow {
            step,
            setting: kern_entry(step.knob()),
            measured,
            default: Side {
                value: step.default_value(),
                figure: default,
            },
            alternative: Side {
                value: step.alternative(),
                figure: alternative,
            },
            ratio: (default != 0.0).then(|| alternative / default),
        }
    }
}

/// What `polld bench design --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct DesignReport {
    /// Seconds of load before each side's window opens.
    pub warm_up_secs: f64,
    /// Seconds each side is measured over.
    pub window_secs: f64,
    pub steps: Vec<Step>,
    pub rows: Vec<DesignRow>,
    /// Conservation held in every polld run: on every interface, and end to end.
    pub conserved: bool,
}

/// Runs the steps `args` asks for on a TAP testbed of its own; `polld` is the binary it
/// runs. The table (or JSON) goes to `out`, a progress line per side to `progress`. Fails
/// when conservation failed in some polld run.
pub fn run_design(
    args: &DesignArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<DesignReport, TestbedError> {
    let (warm_up_secs, window_secs) = if args.quick { (0.5, 1.0) } else { (1.0, 3.0) };
    let mut chosen = args.steps.clone();
    chosen.sort_unstable();
    chosen.dedup();
    let (rows, conserved) = crate::bench::on_own_tap_testbed(
        "design",
        &args.prefix,
        progress,
        |tb, dir, cpus, progress| {
            let bench = steps::Bench::new(tb, polld, dir, cpus, warm_up_secs, window_secs);
            let mut rows = Vec::new();
            for &step in &chosen {
                rows.extend(bench.run(step, progress)?);
            }
            Ok((rows, bench.conserved()))
        },
    )?;
    let report = DesignReport {
        warm_up_secs,
        window_secs,
        steps: chosen,
        rows,
        conserved,
    };
    crate::bench::print_report(&report, args.json, out, render::write_text);
    if !conserved {
        return Err(TestbedError::Failed(
            "conservation did not hold in some polld run: see its progress line".into(),
        ));
    }
    Ok(report)
}
