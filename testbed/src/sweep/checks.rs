//! What the sweep must show (issue 39), computed from one run's points: each rule is a
//! ratio of two figures of the same run, at one load, against a bound, and it holds or
//! does not hold by how far the ratio is past the bound. These are measurements: the
//! sweep prints them and never fails on them.
//!
//! - below interrupt mode's capacity (loads under 100 %): auto's p99 ≤ interrupt mode's,
//!   auto's CPU ≤ 1.1x interrupt mode's (the poll CPU's busy time), busy mode's p99 the
//!   lowest of polld's modes, polling's p99 ≤ 1/hz + 100 µs;
//! - at every load where the kernel and some mode of polld both deliver ≥ 99 % of what
//!   gen offered: the best such mode's p99 ≤ the kernel's;
//! - above capacity: polling at `user_frac` 10 delivers ≥ 0.9x interrupt mode.

use serde::Serialize;

use super::{low_user_frac_row, SweepPoint, KERNEL, MODES};

/// A rule the sweep must show.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    AutoP99,
    AutoCpu,
    BusyLowest,
    PollingBound,
    BestVsKernel,
    Overload,
}

impl Rule {
    /// The rule as a ratio against its bound.
    pub fn says(self) -> &'static str {
        match self {
            Rule::AutoP99 => "auto p99 / interrupt p99 <= 1",
            Rule::AutoCpu => "auto CPU / interrupt CPU <= 1.1",
            Rule::BusyLowest => "busy p99 / lowest other mode's p99 <= 1",
            Rule::PollingBound => "polling p99 / (1/hz + 100 µs) <= 1",
            Rule::BestVsKernel => "best polld mode's p99 / kernel p99 <= 1",
            Rule::Overload => "polling user_frac 10 delivered / interrupt delivered >= 0.9",
        }
    }

    /// The bound on the ratio, and whether the ratio must stay at or under it (else at
    /// or over it).
    fn bound(self) -> (f64, bool) {
        match self {
            Rule::AutoCpu => (1.1, true),
            Rule::Overload => (0.9, false),
            _ => (1.0, true),
        }
    }
}

/// One rule at one load.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    pub rule: Rule,
    /// The load, as a share of interrupt mode's capacity.
    pub load: f64,
    /// The two figures the ratio is made of, in words.
    pub figures: String,
    /// `None` when a figure was not measured (the sink timed no frame).
    pub ratio: Option<f64>,
    pub bound: f64,
    /// Whether the ratio is within its bound; `None` when it could not be judged.
    pub holds: Option<bool>,
    /// `holds`, `does not hold by X` (how far the ratio is past its bound), or why it
    /// was not judged.
    pub verdict: String,
}

impl Check {
    fn new(rule: Rule, load: f64, figures: String, ratio: Option<f64>) -> Check {
        let ratio = ratio.filter(|r| r.is_finite());
        let (bound, at_most) = rule.bound();
        let holds = ratio.map(|r| if at_most { r <= bound } else { r >= bound });
        let verdict = match (holds, ratio) {
            (Some(true), _) => "holds".into(),
            (Some(false), Some(r)) => format!("does not hold by {:.2}", (r - bound).abs()),
            _ => "not judged: a figure is missing".into(),
        };
        Check {
            rule,
            load,
            figures,
            ratio,
            bound,
            holds,
            verdict,
        }
    }
}

/// The point of `forwarder` at `load`.
fn at<'a>(points: &'a [SweepPoint], forwarder: &str, load: f64) -> Option<&'a SweepPoint> {
    points
        .iter()
        .find(|p| p.forwarder == forwarder && (p.load - load).abs() < 1e-9)
}

/// The share of deliveries at and above which a forwarder keeps up.
const KEEPS_UP: f64 = 0.99;

/// Every check on `points` (one testbed's), polling's bound from `hz`.
pub fn check(points: &[SweepPoint], hz: u32) -> Vec<Check> {
    let mut loads: Vec<f64> = points.iter().map(|p| p.load).collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} µs"));
    let ratio = |a: Option<f64>, b: Option<f64>| Some(a? / b?);
    let mut checks = Vec::new();
    for &load in &loads {
        let mode = |m: &str| at(points, m, load);
        let p99 = |m: &str| mode(m).and_then(|p| p.p99_us);
        if load < 1.0 {
            if let (Some(auto), Some(intr)) = (mode("auto"), mode("interrupt")) {
                checks.push(Check::new(
                    Rule::AutoP99,
                    load,
                    format!("auto {} / interrupt {}", us(auto.p99_us), us(intr.p99_us)),
                    ratio(auto.p99_us, intr.p99_us),
                ));
                checks.push(Check::new(
                    Rule::AutoCpu,
                    load,
                    format!(
                        "auto {:.1} % / interrupt {:.1} %",
                        auto.cpu_busy_percent, intr.cpu_busy_percent
                    ),
                    Some(auto.cpu_busy_percent / intr.cpu_busy_percent),
                ));
            }
            if mode("busy").is_some() {
                let lowest = MODES
                    .iter()
                    .filter(|m| **m != "busy")
                    .filter_map(|m| Some((*m, p99(m)?)))
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                checks.push(Check::new(
                    Rule::BusyLowest,
                    load,
                    format!(
                        "busy {} / {} {}",
                        us(p99("busy")),
                        lowest.map_or("-", |l| l.0),
                        us(lowest.map(|l| l.1))
                    ),
                    ratio(p99("busy"), lowest.map(|l| l.1)),
                ));
            }
            if mode("polling").is_some() {
                let bound_us = 1e6 / f64::from(hz.max(1)) + 100.0;
                checks.push(Check::new(
                    Rule::PollingBound,
                    load,
                    format!("polling {} / {bound_us:.0} µs", us(p99("polling"))),
                    ratio(p99("polling"), Some(bound_us)),
                ));
            }
        }
        if let Some(kernel) = mode(KERNEL).filter(|k| k.delivered_share() >= KEEPS_UP) {
            let best = MODES
                .iter()
                .filter_map(|m| mode(m))
                .filter(|p| p.delivered_share() >= KEEPS_UP)
                .filter_map(|p| Some((p.forwarder.as_str(), p.p99_us?)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((best, best_p99)) = best {
                checks.push(Check::new(
                    Rule::BestVsKernel,
                    load,
                    format!(
                        "{best} {} / kernel {}",
                        us(Some(best_p99)),
                        us(kernel.p99_us)
                    ),
                    ratio(Some(best_p99), kernel.p99_us),
                ));
            }
        }
        if load > 1.0 {
            if let (Some(low), Some(intr)) = (mode(&low_user_frac_row()), mode("interrupt")) {
                checks.push(Check::new(
                    Rule::Overload,
                    load,
                    format!(
                        "{:.0} / {:.0} frames/s",
                        low.delivered_pps, intr.delivered_pps
                    ),
                    Some(low.delivered_pps / intr.delivered_pps),
                ));
            }
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `forwarder` at `load`: `offered` and `delivered` frames/s, p99 (µs) and CPU busy %.
    fn point(
        forwarder: &str,
        load: f64,
        rates: [f64; 2],
        p99: Option<f64>,
        cpu: f64,
    ) -> SweepPoint {
        SweepPoint {
            forwarder: forwarder.into(),
            load,
            rate_pps: rates[0] as u64,
            offered_pps: rates[0],
            delivered_pps: rates[1],
            lost: Some(0),
            loss_percent: Some(0.0),
            p50_us: p99.map(|p| p / 2.0),
            p99_us: p99,
            p999_us: p99.map(|p| p * 2.0),
            cpu_busy_percent: cpu,
            polld_cpu_percent: cpu,
            interrupts_per_sec: None,
            auto: None,
            conserved: Some(true),
            tuned: false,
        }
    }

    fn find(checks: &[Check], rule: Rule, load: f64) -> &Check {
        checks
            .iter()
            .find(|c| c.rule == rule && c.load == load)
            .unwrap_or_else(|| panic!("no {rule:?} at {load}: {checks:?}"))
    }

    #[test]
    fn each_rule_is_a_ratio_of_the_same_runs_figures_against_its_bound() {
        let all = [1000.0, 1000.0];
        let points = vec![
            // Half load: everyone keeps up but adaptive (98 %).
            point(KERNEL, 0.5, all, Some(60.0), 30.0),
            point("interrupt", 0.5, all, Some(80.0), 20.0),
            point("adaptive", 0.5, [1000.0, 980.0], Some(30.0), 20.0),
            point("polling", 0.5, all, Some(1210.0), 25.0),
            point("auto", 0.5, all, Some(120.0), 21.0),
            point("busy", 0.5, all, Some(40.0), 100.0),
            // Above capacity: only the overload rule; the kernel and the sink fall behind.
            point(KERNEL, 1.2, [1200.0, 700.0], Some(900.0), 100.0),
            point("interrupt", 1.2, [1200.0, 1000.0], None, 100.0),
            point("polling, user_frac 10", 1.2, [1200.0, 850.0], None, 90.0),
        ];
        let checks = check(&points, 1000);

        let c = find(&checks, Rule::AutoP99, 0.5);
        assert_eq!(c.ratio, Some(1.5));
        assert_eq!(c.figures, "auto 120 µs / interrupt 80 µs");
        assert_eq!(c.verdict, "does not hold by 0.50");
        let c = find(&checks, Rule::AutoCpu, 0.5);
        assert!((c.ratio.unwrap() - 1.05).abs() < 1e-9, "{c:?}");
        assert_eq!(c.verdict, "holds");
        // Adaptive's 30 µs is lower than busy's 40: it counts though it lost 2 %.
        let c = find(&checks, Rule::BusyLowest, 0.5);
        assert_eq!(c.figures, "busy 40 µs / adaptive 30 µs");
        assert_eq!(c.holds, Some(false));
        // 1/hz + 100 µs = 1100 µs.
        let c = find(&checks, Rule::PollingBound, 0.5);
        assert!((c.ratio.unwrap() - 1.1).abs() < 1e-9, "{c:?}");
        assert_eq!(c.verdict, "does not hold by 0.10");
        // Best of the modes that delivered ≥ 99 %: busy (adaptive did not keep up).
        let c = find(&checks, Rule::BestVsKernel, 0.5);
        assert_eq!(c.figures, "busy 40 µs / kernel 60 µs");
        assert_eq!(c.holds, Some(true));
        // 850 / 1000 against 0.9.
        let c = find(&checks, Rule::Overload, 1.2);
        assert!((c.ratio.unwrap() - 0.85).abs() < 1e-9, "{c:?}");
        assert_eq!(c.verdict, "does not hold by 0.05");

        // No rule of the loads below capacity above it, and no kernel comparison where the
        // kernel fell behind.
        assert!(checks
            .iter()
            .filter(|c| c.load == 1.2)
            .all(|c| c.rule == Rule::Overload));
        assert_eq!(checks.len(), 6, "{checks:#?}");

        // A missing figure is said, not judged.
        let mut untimed = points.clone();
        untimed[4].p99_us = None;
        let c = find(&check(&untimed, 1000), Rule::AutoP99, 0.5).clone();
        assert_eq!((c.ratio, c.holds), (None, None));
        assert_eq!(c.verdict, "not judged: a figure is missing");
    }
}
