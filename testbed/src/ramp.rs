//! `polld bench ramp`: a load ramp (idle → rising steps → flood → falling steps → idle)
//! through polld on the TAP testbed, sampled every [`SAMPLE_EVERY`]: offered and
//! delivered packets/s, whether each interface polls, auto-mode switches, polld's and a
//! competitor's CPU share, interrupts/s. It shows `mode = "auto"` (docs/algorithm.md)
//! entering polling under load and leaving it when the load goes, and per step the
//! competitor's share against `user_frac` (the promise: at least `user_frac` - 5). The
//! trial itself — polld realtime on the fwd CPU with a CPU-bound competitor beside it — is
//! [`crate::share::TrialRun`]; this module steps gen's rate and plots the samples.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use polld_core::{IfCounters, Interface};
use serde::Serialize;

use crate::entries::{dev_entry, split_dev_entry};
use crate::plot::{write_charts, LineChart, Series};
use crate::share::{Sample, ShareTrial, TrialRun};
use crate::{NetDev, Testbed, TestbedError};

/// `dev.<if>.auto_polling`: whether an interface in auto mode polls now.
const AUTO_POLLING: &str = Interface::<()>::AUTO_POLLING.name;

/// `dev.<if>.interrupts`: an interface's wakeups.
const INTERRUPTS: &str = IfCounters::INTERRUPTS.name;

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// `polld bench ramp` options.
#[derive(clap::Args, Debug, Clone)]
pub struct RampArgs {
    /// Five 1-second steps (idle, 30 kpps, flood, 30 kpps, idle) instead of eleven.
    #[arg(long)]
    pub quick: bool,
    /// Seconds per step (default 2, or 1 with --quick).
    #[arg(long)]
    pub step_secs: Option<f64>,
    /// polld's mode for its interfaces: auto, polling or interrupt.
    #[arg(long, default_value = "auto", value_parser = ["auto", "polling", "interrupt"])]
    pub mode: String,
    /// Directory the SVG plots are written to.
    #[arg(long, default_value = "target/bench-ramp")]
    pub out: PathBuf,
    /// Namespace prefix of the bench's own TAP testbed (`{prefix}gen`, ...).
    #[arg(long, default_value = "bramp", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print every sample as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
}

/// gen's rate per step; `idle` runs no gen.
const FULL: [&str; 11] = [
    "idle",
    "10000",
    "30000",
    "100000",
    "300000",
    "unlimited",
    "300000",
    "100000",
    "30000",
    "10000",
    "idle",
];
const QUICK: [&str; 5] = ["idle", "30000", "unlimited", "30000", "idle"];
const IDLE: &str = "idle";

/// How often the ramp samples.
const SAMPLE_EVERY: Duration = Duration::from_millis(150);

/// `kern.polling.user_frac` of the ramp: FreeBSD's default.
const USER_FRAC: u32 = 50;

/// The promise's tolerance: at every step the competitor gets at least `user_frac` less
/// this many points of the CPU (more when polld needs less than its share).
const PROMISE_POINTS: f64 = 5.0;

/// Rates and CPU shares over an interval.
#[derive(Clone, Debug, Serialize)]
pub struct Rates {
    /// What gen handed tap0, per second: the frames the TAP queued for polld and those
    /// it dropped with its queue full (tap0's `tx_packets` + `tx_dropped` in gen).
    pub offered_pps: f64,
    /// tap1's receive rate in sink.
    pub delivered_pps: f64,
    pub polld_cpu_percent: f64,
    pub competitor_percent: f64,
    /// polld's interrupts on every interface, per second.
    pub interrupts_per_sec: f64,
}

/// One sample, over the [`SAMPLE_EVERY`] before `t`.
#[derive(Clone, Debug, Serialize)]
pub struct RampSample {
    /// Seconds since the first step began.
    pub t: f64,
    pub step: usize,
    pub rate: String,
    #[serde(flatten)]
    pub rates: Rates,
    /// 1 when the interface polls, 0 when it takes interrupts.
    pub polling: BTreeMap<String, u64>,
    /// `dev.<if>.auto_switches` so far, summed over the interfaces.
    pub auto_switches: u64,
}

/// One step's averages.
#[derive(Clone, Debug, Serialize)]
pub struct RampStep {
    pub step: usize,
    pub rate: String,
    #[serde(flatten)]
    pub rates: Rates,
    /// The share of the step's samples in which each interface polled.
    pub polling_fraction: BTreeMap<String, f64>,
    /// The competitor's share less `user_frac`, in points.
    pub competitor_over_user_frac: f64,
    /// The competitor got at least `user_frac` less [`PROMISE_POINTS`].
    pub promise_held: bool,
}

/// What `polld bench ramp --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct RampReport {
    pub mode: String,
    pub user_frac: u32,
    pub step_secs: f64,
    pub steps: Vec<RampStep>,
    pub samples: Vec<RampSample>,
    /// Conservation on every interface of polld's final `--json` counters.
    pub conserved: bool,
    pub svgs: Vec<PathBuf>,
}

/// The frames gen handed tap0 so far, and the sample of polld and the competitor.
struct Point {
    offered: u64,
    sample: Sample,
}

/// The interfaces polld reports, by their `dev.<if>.auto_polling` entries.
fn interfaces(sample: &Sample) -> Vec<String> {
    sample
        .values
        .iter()
        .filter_map(|(n, _)| {
            let (iface, leaf) = split_dev_entry(n)?;
            (leaf == AUTO_POLLING).then(|| iface.to_string())
        })
        .collect()
}

/// What happened between `a` and `b`.
fn between(mode: &str, a: &Point, b: &Point, t: f64, step: usize, rate: &str) -> RampSample {
    let (sa, sb) = (&a.sample, &b.sample);
    let wall_ns = sb.at.duration_since(sa.at).as_nanos().max(1) as f64;
    let per_sec = |x: u64, y: u64| y.saturating_sub(x) as f64 * 1e9 / wall_ns;
    let percent = |x: u64, y: u64| y.saturating_sub(x) as f64 * 100.0 / wall_ns;
    let ifaces = interfaces(sb);
    let sum =
        |s: &Sample, leaf: &str| -> u64 { ifaces.iter().map(|i| s.get(&dev_entry(i, leaf))).sum() };
    let polling = ifaces
        .iter()
        .map(|i| {
            let on = match mode {
                "polling" => 1,
                "interrupt" => 0,
                _ => sb.get(&dev_entry(i, AUTO_POLLING)),
            };
            (i.clone(), on)
        })
        .collect();
    RampSample {
        t,
        step,
        rate: rate.to_string(),
        rates: Rates {
            offered_pps: per_sec(a.offered, b.offered),
            delivered_pps: per_sec(sa.delivered, sb.delivered),
            polld_cpu_percent: percent(sa.polld_ns, sb.polld_ns),
            competitor_percent: percent(sa.competitor_ns, sb.competitor_ns),
            interrupts_per_sec: per_sec(sum(sa, INTERRUPTS), sum(sb, INTERRUPTS)),
        },
        polling,
        auto_switches: sum(sb, IfCounters::AUTO_SWITCHES.name),
    }
}

/// Runs the ramp; `polld` is the binary it runs. Results go to `out`, a progress line per
/// step to `progress`. Fails when conservation does not hold.
pub fn run_ramp(
    args: &RampArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<RampReport, TestbedError> {
    let rates: &[&str] = if args.quick { &QUICK } else { &FULL };
    let step_secs = args.step_secs.unwrap_or(if args.quick { 1.0 } else { 2.0 });
    if !(step_secs.is_finite() && (0.5..=60.0).contains(&step_secs)) {
        return Err(failed(format!(
            "--step-secs {step_secs} is out of range: give 0.5 to 60 seconds"
        )));
    }
    let trial = ShareTrial {
        rate: None,
        competitor: true,
        ..ShareTrial::flood(&args.mode, USER_FRAC, 0.0, 0.0)
    };
    let (samples, steps, conserved) = crate::bench::on_own_tap_testbed(
        "ramp",
        &args.prefix,
        progress,
        |tb, dir, cpus, progress| ramp(tb, polld, dir, cpus, &trial, rates, step_secs, progress),
    )?;
    let mut report = RampReport {
        mode: args.mode.clone(),
        user_frac: USER_FRAC,
        step_secs,
        steps,
        samples,
        conserved,
        svgs: Vec::new(),
    };
    report.svgs = write_plots(&report, &args.out)?;
    crate::bench::print_report(&report, args.json, out, write_text);
    if !conserved {
        return Err(failed(
            "conservation did not hold on polld's final counters: see polld run --json".into(),
        ));
    }
    Ok(report)
}

type Ramped = (Vec<RampSample>, Vec<RampStep>, bool);

#[allow(clippy::too_many_arguments)]
fn ramp(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    cpus: (usize, usize),
    trial: &ShareTrial,
    rates: &[&str],
    step_secs: f64,
    progress: &mut dyn Write,
) -> Result<Ramped, TestbedError> {
    let run = TrialRun::start(tb, polld, dir, cpus, trial)?;
    // gen's counters are read without a process, as sink's are in the sample: the ramp
    // starts none while it measures (it would run on any CPU, the measured one too).
    let gen = NetDev::open(&tb.layout().gen_ns)?;
    let tap0 = &tb.layout().veth0.name;
    let point = || -> Result<Point, TestbedError> {
        Ok(Point {
            offered: {
                let c = gen.counters(tap0)?;
                c.tx_packets + c.tx_dropped
            },
            sample: run.sample()?,
        })
    };
    let first = point()?;
    let start = first.sample.at;
    let mut last = point()?;
    let mut samples = Vec::new();
    let mut steps = Vec::new();
    for (step, &rate) in rates.iter().enumerate() {
        let mut gen = match rate {
            IDLE => None,
            _ => Some(run.start_gen(rate, step_secs)?),
        };
        let step_start = Instant::now();
        let from = samples.len();
        let step_first = point()?;
        while step_start.elapsed().as_secs_f64() < step_secs {
            std::thread::sleep(SAMPLE_EVERY);
            let now = point()?;
            let t = now.sample.at.duration_since(start).as_secs_f64();
            samples.push(between(trial.mode, &last, &now, t, step, rate));
            last = now;
        }
        if let Some(gen) = gen.as_mut() {
            run.end_gen(gen)?;
        }
        let whole = between(trial.mode, &step_first, &last, 0.0, step, rate);
        let row = step_row(whole, &samples[from..], trial.user_frac);
        let _ = writeln!(
            progress,
            "polld bench ramp: step {}/{} rate {rate}: offered {:.0}/s, delivered {:.0}/s, polld {:.0}%, competitor {:.0}%, polling {:?}",
            step + 1,
            rates.len(),
            row.rates.offered_pps,
            row.rates.delivered_pps,
            row.rates.polld_cpu_percent,
            row.rates.competitor_percent,
            row.polling_fraction
        );
        steps.push(row);
    }
    let share = run.finish(&first.sample, &last.sample)?;
    Ok((samples, steps, share.conserved))
}

/// A step's row: `whole`, its rates from its first point to its last, with the share of
/// its `samples` in which each interface polled and the promise's verdict.
fn step_row(whole: RampSample, samples: &[RampSample], user_frac: u32) -> RampStep {
    let polling_fraction = whole
        .polling
        .keys()
        .map(|i| {
            let on = samples
                .iter()
                .filter(|s| s.polling.get(i) == Some(&1))
                .count();
            (i.clone(), on as f64 / samples.len().max(1) as f64)
        })
        .collect();
    let over = whole.rates.competitor_percent - f64::from(user_frac);
    RampStep {
        step: whole.step,
        rate: whole.rate,
        rates: whole.rates,
        polling_fraction,
        competitor_over_user_frac: over,
        promise_held: over >= -PROMISE_POINTS,
    }
}

fn write_plots(report: &RampReport, dir: &Path) -> Result<Vec<PathBuf>, TestbedError> {
    let line = |name: &str, y: &dyn Fn(&RampSample) -> f64| {
        Series::new(name, report.samples.iter().map(|s| (s.t, y(s))).collect())
    };
    let x_label = "time (s)".to_string();
    let mut charts = vec![
        (
            "packets.svg",
            LineChart {
                title: format!("Load ramp through polld ({} mode)", report.mode),
                x_label: x_label.clone(),
                y_label: "packets/s".into(),
                series: vec![
                    line("offered (tap0 tx + tx_dropped in gen)", &|s| {
                        s.rates.offered_pps
                    }),
                    line("delivered (tap1 rx in sink)", &|s| s.rates.delivered_pps),
                ],
            },
        ),
        (
            "cpu.svg",
            LineChart {
                title: "CPU share on the poll CPU".into(),
                x_label: x_label.clone(),
                y_label: "% of one CPU".into(),
                series: vec![
                    line("polld", &|s| s.rates.polld_cpu_percent),
                    line("competitor", &|s| s.rates.competitor_percent),
                ],
            },
        ),
    ];
    let ifaces: Vec<String> = report
        .samples
        .last()
        .map(|s| s.polling.keys().cloned().collect())
        .unwrap_or_default();
    charts.push((
        "mode.svg",
        LineChart {
            title: "Mode per interface (0 interrupts, 1 polling)".into(),
            x_label,
            y_label: "polling".into(),
            series: ifaces
                .iter()
                .map(|i| line(i, &|s| s.polling.get(i).copied().unwrap_or(0) as f64))
                .collect(),
        },
    ));
    write_charts(dir, charts)
}

fn write_text(report: &RampReport, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "load ramp, {} mode, {} s per step, competitor and polld on the same CPU",
        report.mode, report.step_secs
    );
    let _ = writeln!(
        out,
        "{:>4} {:>10} {:>12} {:>12} {:>7} {:>11} {:>9} {:>6} {:>10}  polling",
        "step",
        "rate",
        "offered/s",
        "delivered/s",
        "polld%",
        "competitor%",
        "user_frac",
        "±",
        "intr/s"
    );
    for s in &report.steps {
        let polling: Vec<String> = s
            .polling_fraction
            .iter()
            .map(|(i, f)| format!("{i} {:.0}%", f * 100.0))
            .collect();
        let _ = writeln!(
            out,
            "{:>4} {:>10} {:>12.0} {:>12.0} {:>7.1} {:>11.1} {:>9} {:>+6.1} {:>10.0}  {}",
            s.step + 1,
            s.rate,
            s.rates.offered_pps,
            s.rates.delivered_pps,
            s.rates.polld_cpu_percent,
            s.rates.competitor_percent,
            report.user_frac,
            s.competitor_over_user_frac,
            s.rates.interrupts_per_sec,
            polling.join(", ")
        );
    }
    let missed: Vec<String> = report
        .steps
        .iter()
        .filter(|s| !s.promise_held)
        .map(|s| (s.step + 1).to_string())
        .collect();
    let floor = f64::from(report.user_frac) - PROMISE_POINTS;
    let _ = if missed.is_empty() {
        writeln!(
            out,
            "the competitor got at least user_frac - {PROMISE_POINTS} = {floor} % at every step"
        )
    } else {
        writeln!(
            out,
            "the competitor got less than user_frac - {PROMISE_POINTS} = {floor} % at step {}",
            missed.join(", ")
        )
    };
    let switches = report.samples.last().map_or(0, |s| s.auto_switches);
    let _ = writeln!(out, "auto_switches: {switches}");
    let _ = writeln!(
        out,
        "conservation: {}",
        if report.conserved {
            "holds"
        } else {
            "VIOLATED"
        }
    );
    for svg in &report.svgs {
        let _ = writeln!(out, "plot: {}", svg.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A point `ms` after `at`: gen's count, sink's, the two CPU times and polld's entries.
    fn point(at: Instant, ms: u64, counts: [u64; 4], values: &[(&str, u64)]) -> Point {
        Point {
            offered: counts[0],
            sample: Sample {
                at: at + Duration::from_millis(ms),
                delivered: counts[1],
                polld_ns: counts[2],
                competitor_ns: counts[3],
                values: values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
            },
        }
    }

    #[test]
    fn a_sample_is_the_rates_between_two_points_and_a_step_judges_its_shares() {
        let at = Instant::now();
        let a = point(
            at,
            0,
            [1000, 500, 0, 0],
            &[
                ("dev.tap0.auto_polling", 0),
                ("dev.tap0.interrupts", 10),
                ("dev.tap1.auto_polling", 0),
                ("dev.tap1.interrupts", 0),
            ],
        );
        // Half a second later: 15000 frames sent, 10000 received, polld 0.3 s of CPU, the
        // competitor 0.2 s; tap0 switched to polling.
        let b = point(
            at,
            500,
            [16_000, 10_500, 300_000_000, 200_000_000],
            &[
                ("dev.tap0.auto_polling", 1),
                ("dev.tap0.interrupts", 60),
                ("dev.tap0.auto_switches", 1),
                ("dev.tap1.auto_polling", 0),
                ("dev.tap1.interrupts", 100),
            ],
        );
        let s = between("auto", &a, &b, 0.5, 2, "unlimited");
        let close = |x: f64, want: f64| (x - want).abs() < 1e-6 * want.max(1.0);
        assert!(close(s.rates.offered_pps, 30_000.0), "{s:?}");
        assert!(close(s.rates.delivered_pps, 20_000.0), "{s:?}");
        assert!(close(s.rates.polld_cpu_percent, 60.0), "{s:?}");
        assert!(close(s.rates.competitor_percent, 40.0), "{s:?}");
        assert!(close(s.rates.interrupts_per_sec, 300.0), "{s:?}");
        let polling: Vec<(&str, u64)> = s.polling.iter().map(|(i, p)| (i.as_str(), *p)).collect();
        assert_eq!(polling, [("tap0", 1), ("tap1", 0)]);
        assert_eq!(s.auto_switches, 1);
        // Polling mode polls whatever auto_polling says.
        assert!(between("polling", &a, &b, 0.5, 2, "unlimited")
            .polling
            .values()
            .all(|&p| p == 1));

        // The competitor got 40 % against user_frac 50: 10 points short, so the promise
        // (user_frac - 5) did not hold; at user_frac 44 it did.
        let step = step_row(s.clone(), &[s.clone(), s.clone()], 50);
        assert_eq!((step.step, step.rate.as_str()), (2, "unlimited"));
        assert!(close(step.competitor_over_user_frac, -10.0), "{step:?}");
        assert!(!step.promise_held);
        assert!(step_row(s.clone(), &[], 44).promise_held);
        assert_eq!(step.polling_fraction["tap0"], 1.0);
        assert_eq!(step.polling_fraction["tap1"], 0.0);
    }
}
