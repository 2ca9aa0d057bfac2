//! The bench's charts, as SVG files.

use std::path::{Path, PathBuf};

use polld_core::Knobs;

use super::report::SeedsReport;
use crate::entries::kern_entry;
use crate::plot::{write_charts, LineChart, Series};
use crate::share::ShareRow;
use crate::TestbedError;

/// The charts of the steps that ran, as SVG files in `dir`.
pub(super) fn write_plots(report: &SeedsReport, dir: &Path) -> Result<Vec<PathBuf>, TestbedError> {
    let mut charts = Vec::new();
    if !report.curve.is_empty() {
        let series = |f: fn(&ShareRow) -> f64| {
            report
                .curve
                .iter()
                .map(|s| {
                    Series::new(
                        s.name.clone(),
                        s.points
                            .iter()
                            .map(|p| (p.offered_pps / 1e3, f(p)))
                            .collect(),
                    )
                })
                .collect()
        };
        charts.push((
            "livelock-curve.svg",
            LineChart {
                title: format!(
                    "polld on the {}: delivered against offered load",
                    report.testbed.split(':').next().unwrap_or("testbed")
                ),
                x_label: "offered (kpps, polld gen)".into(),
                y_label: "delivered to tap1 (kpps)".into(),
                series: series(|p| p.delivered_pps / 1e3),
            },
        ));
        // In the guest the device work is polld's and its ksoftirqd's.
        let in_guest = report.in_guest();
        charts.push((
            "livelock-cpu.svg",
            LineChart {
                title: "polld's CPU against offered load".into(),
                x_label: "offered (kpps, polld gen)".into(),
                y_label: match in_guest {
                    true => "polld and the guest's ksoftirqd (% of the vCPU)",
                    false => "polld poll thread (% of its CPU)",
                }
                .into(),
                series: series(|p| p.polld_cpu_percent + p.ksoftirqd_percent.unwrap_or(0.0)),
            },
        ));
    }
    let polling: Vec<(f64, f64)> = report
        .share
        .iter()
        .filter(|r| r.mode == "polling")
        .map(|r| (f64::from(r.user_frac), r.competitor_percent))
        .collect();
    if !polling.is_empty() {
        let xs: Vec<f64> = polling.iter().map(|p| p.0).collect();
        let mut series = vec![
            Series::new("competitor, polling", polling),
            Series::new(
                "user_frac (the promise)",
                xs.iter().map(|&x| (x, x)).collect(),
            ),
        ];
        if let Some(r) = report.share.iter().find(|r| r.mode == "interrupt") {
            series.push(Series::new(
                "competitor, interrupt mode",
                xs.iter().map(|&x| (x, r.competitor_percent)).collect(),
            ));
        }
        charts.push((
            "competitor-share.svg",
            LineChart {
                title: "A CPU-bound competitor's share of the poll CPU under a flood".into(),
                x_label: kern_entry(Knobs::USER_FRAC.name),
                y_label: "competitor (% of the CPU)".into(),
                series,
            },
        ));
    }
    write_charts(dir, charts)
}
