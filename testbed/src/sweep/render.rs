//! The sweep's table per testbed, where auto switched, the checks' verdicts, and the two
//! plots per testbed (p99 and CPU against load, one line per forwarder).

use std::io::Write;
use std::path::{Path, PathBuf};

use polld_core::Interface;

use super::{SweepPoint, SweepReport, TestbedSweep, WATCH_EVERY};
use crate::entries::dev_entry;
use crate::plot::{write_charts, LineChart, Series};
use crate::TestbedError;

/// A load as a percentage.
fn percent(load: f64) -> String {
    format!("{:.0} %", load * 100.0)
}

/// Where auto polled on `input`, point by point, in one sentence.
pub(super) fn auto_sentence(points: &[SweepPoint], input: &str) -> String {
    let auto: Vec<&SweepPoint> = points.iter().filter(|p| p.auto.is_some()).collect();
    if auto.is_empty() {
        return "auto mode was not run".into();
    }
    let each: Vec<String> = auto
        .iter()
        .filter_map(|p| {
            let seen = p.auto.as_ref()?;
            let share = seen
                .polling_share
                .map_or("-".to_string(), |s| format!("{:.0} %", s * 100.0));
            Some(format!(
                "{} {share} ({} switches)",
                percent(p.load),
                seen.switches
            ))
        })
        .collect();
    let first = auto
        .iter()
        .find(|p| p.auto.as_ref().and_then(|a| a.polling_share).unwrap_or(0.0) > 0.0);
    let verdict = match first {
        Some(p) => format!(
            "auto first polled at {} of capacity ({}/s)",
            percent(p.load),
            p.rate_pps
        ),
        None => "auto never polled".into(),
    };
    format!(
        "{verdict}; share of the time it polled ({}, sampled every {} ms while frames \
         arrived) at each load: {}",
        dev_entry(input, Interface::<()>::AUTO_POLLING.name),
        WATCH_EVERY.as_millis(),
        each.join(", ")
    )
}

/// The table, auto's sentence and the checks of one testbed.
fn write_testbed(t: &TestbedSweep, duration: f64, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "\nsweep on {} (polld on {}, realtime on the fwd CPU, its defaults), 60-byte frames, \
         {duration} s per point; interrupt mode's capacity {:.0} frames/s is the loads' 100 %",
        t.testbed, t.backend, t.capacity_pps
    );
    let _ = writeln!(out, "{}", capacity_sentence(t));
    let path = match &t.tuning_refused {
        None => format!(
            "loads up to {} on the latency-tuned path (fwd and sink CPUs held out of halt; on \
             veth fwd's receive kthreads SCHED_FIFO below polld), as the latency bench; the \
             higher loads as the testbed placed them",
            percent(super::TUNED_UP_TO)
        ),
        Some(why) => format!("every load untuned: the kernel refused the latency tuning ({why})"),
    };
    let _ = writeln!(out, "{path}");
    if !t.forwarders().iter().any(|f| f == super::KERNEL) {
        let _ = writeln!(
            out,
            "no kernel row on {}: nothing but polld joins its interfaces",
            t.testbed
        );
    }
    let _ = writeln!(
        out,
        "{:<22} {:>5} {:>10} {:>11} {:>6} {:>7} {:>7} {:>8} {:>7} {:>7} {:>8} {:>6}",
        "forwarder",
        "load",
        "offered/s",
        "delivered/s",
        "loss%",
        "p50 µs",
        "p99 µs",
        "p99.9 µs",
        "CPU%",
        "polld%",
        "intr/s",
        "polls"
    );
    let opt =
        |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
    for p in &t.points {
        let polls = p.auto.as_ref().map_or("".to_string(), |a| {
            a.polling_share
                .map_or("-".into(), |s| format!("{:.0}%", s * 100.0))
        });
        let _ = writeln!(
            out,
            "{:<22} {:>4.0}% {:>10.0} {:>11.0} {:>6} {:>7} {:>7} {:>8} {:>7.1} {:>7.1} {:>8} {:>6}",
            p.forwarder,
            p.load * 100.0,
            p.offered_pps,
            p.delivered_pps,
            opt(p.loss_percent, 2),
            opt(p.p50_us, 0),
            opt(p.p99_us, 0),
            opt(p.p999_us, 0),
            p.cpu_busy_percent,
            p.polld_cpu_percent,
            opt(p.interrupts_per_sec, 0),
            polls
        );
    }
    let _ = writeln!(
        out,
        "CPU%: the poll CPU's busy time (the forwarder, the kernel's receive work and the \
         sink's there); polls: the share of the time auto polled"
    );
    let _ = writeln!(out, "{}", t.auto_switched);
    let _ = writeln!(
        out,
        "must-show checks on {}, each a ratio of this run's figures:",
        t.testbed
    );
    for c in &t.checks {
        let ratio = c.ratio.map_or("-".to_string(), |r| format!("{r:.2}"));
        let _ = writeln!(
            out,
            "  at {:>5}: {}: {} = {ratio}: {}",
            percent(c.load),
            c.rule.says(),
            c.figures,
            c.verdict
        );
    }
    for svg in &t.svgs {
        let _ = writeln!(out, "plot: {}", svg.display());
    }
}

/// The whole report as text.
pub(super) fn write_text(report: &SweepReport, out: &mut dyn Write) {
    for t in &report.testbeds {
        write_testbed(t, report.duration_secs, out);
    }
    crate::bench::write_conservation(report.conserved, out);
}

/// `sweep-{testbed}-p99.svg` and `sweep-{testbed}-cpu.svg` in `dir`.
pub(super) fn write_plots(t: &TestbedSweep, dir: &Path) -> Result<Vec<PathBuf>, TestbedError> {
    let line = |forwarder: &str, y: &dyn Fn(&SweepPoint) -> Option<f64>| {
        let points = t
            .points
            .iter()
            .filter(|p| p.forwarder == forwarder)
            .filter_map(|p| Some((p.load * 100.0, y(p)?)))
            .collect();
        Series::new(forwarder, points)
    };
    let x_label = format!(
        "offered load (% of interrupt mode's capacity, {:.0} frames/s)",
        t.capacity_pps
    );
    let forwarders = t.forwarders();
    let chart = |title: String, y_label: &str, y: &dyn Fn(&SweepPoint) -> Option<f64>| LineChart {
        title,
        x_label: x_label.clone(),
        y_label: y_label.into(),
        series: forwarders.iter().map(|f| line(f, y)).collect(),
    };
    let p99 = format!("sweep-{}-p99.svg", t.testbed);
    let cpu = format!("sweep-{}-cpu.svg", t.testbed);
    write_charts(
        dir,
        vec![
            (
                p99.as_str(),
                chart(
                    format!("One-way p99 latency against load ({})", t.testbed),
                    "p99 (µs)",
                    &|p| p.p99_us,
                ),
            ),
            (
                cpu.as_str(),
                chart(
                    format!("Poll CPU busy against load ({})", t.testbed),
                    "% of the poll CPU",
                    &|p| Some(p.cpu_busy_percent),
                ),
            ),
        ],
    )
}

/// The capacity with the sink against without it: on a path where the sink's receive
/// work runs in the forwarder's writes (a TAP), attaching the sink lowers what polld
/// forwards.
fn capacity_sentence(t: &TestbedSweep) -> String {
    let bare = t.capacity_without_sink_pps;
    let ratio = if bare > 0.0 {
        t.capacity_pps / bare
    } else {
        0.0
    };
    format!(
        "capacity: interrupt mode under a flood delivered {:.0} frames/s to polld sink, {bare:.0} \
         frames/s with no sink process on the output (counted by its interface, as the demo \
         does): {ratio:.2}x",
        t.capacity_pps
    )
}
