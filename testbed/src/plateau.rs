//! Whether polling holds its peak above it (seed 000: polling's rate "roughly remains there
//! when the incoming traffic increases"), judged on means over many interleaved trials.
//!
//! On a shared machine one trial of polling under overload moves by more than the 5 % the
//! verdict allows (the host takes the forwarding CPU for a while, as its steal time shows;
//! docs/measuring.md §tb-plateau): the median of a few trials at each load above the peak
//! would judge a flat plateau "NOT at least 95 %" in most runs. So the verdict has its
//! own trials: the loads above the peak (the loads `polld gen` could not reach are one
//! load, the flood) and the curve's best load, in rounds through all of them so that what
//! drifts over minutes falls on every load alike; each load's mean, and the ratio's
//! standard error beside it.

use polld_traffic::rate::{parse_rate, Rate};
use serde::Serialize;

use crate::share::ShareRow;

/// Polling's trials at the loads the verdict compares.
#[derive(Clone, Debug, Serialize)]
pub struct Plateau {
    /// Rounds through the loads.
    pub rounds: usize,
    /// In offered order.
    pub loads: Vec<PlateauLoad>,
}

/// One load of the plateau and its trials.
#[derive(Clone, Debug, Serialize)]
pub struct PlateauLoad {
    /// `polld gen --rate`.
    pub rate: String,
    /// Whether the curve found it above polling's peak (polling delivered under 95 % of
    /// it); the other load is the curve's best.
    pub above_peak: bool,
    /// Each trial's offered and delivered frames/s, in the order they ran.
    pub offered: Vec<f64>,
    pub delivered: Vec<f64>,
}

/// A load counts as carried when polling delivered at least this share of what was
/// offered; from the first it did not, every load is above the peak.
const CARRIED: f64 = 0.95;
/// The verdict: the worst mean above the peak at least this share of the best mean.
const HOLDS: f64 = 0.95;

/// The loads to measure again, from the curve's polling trials at each of `rates` (a
/// `polld gen --rate` each, in the curve's order, the last one the flood): the first load
/// polling did not carry and every one above it, those `polld gen` could not reach (it
/// offered under 95 % of the rate) counted once, as the flood; and the load of the curve's
/// best median if it is below them; none when polling carried every load. Each with no
/// trials yet.
pub fn loads(rates: &[&str], trials: &[Vec<ShareRow>]) -> Vec<PlateauLoad> {
    let median = |t: &[ShareRow], f: fn(&ShareRow) -> f64| {
        let mut v: Vec<f64> = t.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let at: Vec<(&str, f64, f64)> = rates
        .iter()
        .zip(trials)
        .map(|(&r, t)| {
            (
                r,
                median(t, |r| r.offered_pps),
                median(t, |r| r.delivered_pps),
            )
        })
        .collect();
    let Some(first) = at.iter().position(|&(_, o, d)| d < CARRIED * o) else {
        return Vec::new();
    };
    let flood = rates.last().copied().unwrap_or("unlimited");
    let reached = |&(rate, offered, _): &(&str, f64, f64)| {
        rate == flood || matches!(parse_rate(rate), Ok(Rate::Pps(pps)) if offered >= CARRIED * pps)
    };
    let load = |rate: &str, above_peak| PlateauLoad {
        rate: rate.to_string(),
        above_peak,
        offered: Vec::new(),
        delivered: Vec::new(),
    };
    let mut chosen: Vec<PlateauLoad> = at[first..]
        .iter()
        .filter(|l| reached(l))
        .map(|l| load(l.0, true))
        .collect();
    let best = at
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .2.total_cmp(&b.1 .2));
    if let Some((_, (rate, _, _))) = best.filter(|&(i, _)| i < first) {
        chosen.insert(0, load(rate, false));
    }
    chosen
}

/// A load's mean and its standard error.
fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}

/// The verdict's numbers: the best load's mean, the worst mean above the peak, their ratio
/// and its standard error.
#[derive(Clone, Debug)]
pub struct Holding<'a> {
    pub best: (&'a PlateauLoad, f64),
    pub worst: (&'a PlateauLoad, f64),
    pub ratio: f64,
    pub ratio_se: f64,
}

impl Holding<'_> {
    /// At least 95 % of the best.
    pub fn holds(&self) -> bool {
        self.ratio >= HOLDS
    }

    /// Under 95 % by more than two standard errors: a decline the machine's noise does not
    /// explain.
    pub fn declines(&self) -> bool {
        self.ratio + 2.0 * self.ratio_se < HOLDS
    }
}

impl Plateau {
    /// The best mean and the worst mean above the peak; `None` without a load above it.
    pub fn holding(&self) -> Option<Holding<'_>> {
        let means: Vec<(&PlateauLoad, (f64, f64))> = self
            .loads
            .iter()
            .map(|l| (l, mean_se(&l.delivered)))
            .collect();
        let by_mean = |a: &&(&PlateauLoad, (f64, f64)), b: &&(&PlateauLoad, (f64, f64))| {
            a.1 .0.total_cmp(&b.1 .0)
        };
        let best = means.iter().max_by(by_mean)?;
        let worst = means.iter().filter(|m| m.0.above_peak).min_by(by_mean)?;
        let ((b, b_se), (w, w_se)) = (best.1, worst.1);
        let ratio = w / b.max(1.0);
        let rel = |se: f64, m: f64| se / m.max(1.0);
        Some(Holding {
            best: (best.0, b),
            worst: (worst.0, w),
            ratio,
            ratio_se: ratio * (rel(b_se, b).powi(2) + rel(w_se, w).powi(2)).sqrt(),
        })
    }

    /// The finding's sentence.
    pub fn finding(&self) -> String {
        let Some(h) = self.holding() else {
            return "Polling: delivered at least 95 % of every offered load: none overloaded it."
                .into();
        };
        if std::ptr::eq(h.best.0, h.worst.0) {
            return format!(
                "Polling above its peak ({} rounds; means): {:.0}/s at {}, its only load above its peak and its best: at least 95 % of its best at every load above its peak.",
                self.rounds, h.best.1, h.best.0.rate
            );
        }
        let verdict = if h.holds() {
            "at least 95 % of its best at every load above its peak"
        } else if h.declines() {
            "NOT at least 95 % of its best at every load above its peak, by more than two standard errors"
        } else {
            "NOT at least 95 % of its best at every load above its peak, within two standard errors of it"
        };
        let above: Vec<&str> = self
            .loads
            .iter()
            .filter(|l| l.above_peak)
            .map(|l| l.rate.as_str())
            .collect();
        format!(
            "Polling above its peak ({} rounds at {}; means): best {:.0}/s (at {}), at worst {:.0}/s (at {}), {:.1} % of its best (standard error {:.1} %): {verdict}.",
            self.rounds,
            above.join(", "),
            h.best.1,
            h.best.0.rate,
            h.worst.1,
            h.worst.0.rate,
            h.ratio * 100.0,
            h.ratio_se * 100.0
        )
    }

    /// Its table: each load's trials, mean, standard deviation and range.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<10} {:>10} {:>7} {:>12} {:>8} {:>10} {:>10}\n",
            "load", "offered/s", "trials", "delivered/s", "sd", "lowest", "highest"
        );
        for l in &self.loads {
            let (mean, se) = mean_se(&l.delivered);
            let sd = se * (l.delivered.len() as f64).sqrt();
            let lowest = l.delivered.iter().copied().fold(f64::INFINITY, f64::min);
            let highest = l.delivered.iter().copied().fold(0.0, f64::max);
            out.push_str(&format!(
                "{:<10} {:>10.0} {:>7} {:>12.0} {:>7.1}% {:>10.0} {:>10.0}{}\n",
                l.rate,
                mean_se(&l.offered).0,
                l.delivered.len(),
                mean,
                sd / mean.max(1.0) * 100.0,
                lowest,
                highest,
                if l.above_peak {
                    ""
                } else {
                    "  (the curve's best, below its peak)"
                }
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(rate: &str, above_peak: bool, delivered: &[f64]) -> PlateauLoad {
        PlateauLoad {
            rate: rate.into(),
            above_peak,
            offered: vec![1e6; delivered.len()],
            delivered: delivered.to_vec(),
        }
    }

    fn pairs(loads: Vec<PlateauLoad>) -> Vec<(String, bool)> {
        loads.into_iter().map(|l| (l.rate, l.above_peak)).collect()
    }

    #[test]
    fn the_loads_are_those_above_the_peak_the_unreached_ones_as_the_flood_and_the_best() {
        let rates = ["100k", "250k", "350k", "1M", "2M", "unlimited"];
        let trials: Vec<Vec<ShareRow>> = [
            (100e3, 100e3),
            (250e3, 249e3),
            (350e3, 300e3),
            // polld gen reached 680k and 700k, not 1M and 2M: the flood, as unlimited.
            (680e3, 290e3),
            (700e3, 280e3),
            (720e3, 240e3),
        ]
        .iter()
        .map(|&(o, d)| {
            vec![
                ShareRow::point(o, d),
                ShareRow::point(o, d * 0.9),
                ShareRow::point(o, d * 1.01),
            ]
        })
        .collect();
        assert_eq!(
            pairs(loads(&rates, &trials)),
            [("350k".to_string(), true), ("unlimited".to_string(), true)]
        );
        // The best below the peak joins them.
        let mut low = trials.clone();
        for (at, delivered) in [(2, 200e3), (3, 210e3), (4, 205e3), (5, 200e3)] {
            let offered = low[at][0].offered_pps;
            low[at] = vec![ShareRow::point(offered, delivered)];
        }
        assert_eq!(
            pairs(loads(&rates, &low)),
            [
                ("250k".to_string(), false),
                ("350k".to_string(), true),
                ("unlimited".to_string(), true)
            ]
        );
        // Every load carried: nothing to measure.
        let carried: Vec<Vec<ShareRow>> = [100e3, 250e3]
            .iter()
            .map(|&o| vec![ShareRow::point(o, o)])
            .collect();
        assert!(loads(&rates[..2], &carried).is_empty());
    }

    #[test]
    fn the_verdict_compares_means_and_says_when_a_miss_is_beyond_the_noise() {
        // Flat within noise: means 300 and 295, 98.3 %.
        let flat = Plateau {
            rounds: 4,
            loads: vec![
                load("350k", true, &[280.0, 320.0, 300.0, 300.0]),
                load("unlimited", true, &[270.0, 320.0, 290.0, 300.0]),
            ],
        };
        let h = flat.holding().unwrap();
        assert_eq!(
            (h.best.0.rate.as_str(), h.worst.0.rate.as_str()),
            ("350k", "unlimited")
        );
        assert!((h.ratio - 295.0 / 300.0).abs() < 1e-9 && h.holds());
        assert!(
            flat.finding().contains("98.3 % of its best"),
            "{}",
            flat.finding()
        );
        assert!(
            flat.finding().contains(": at least 95 %"),
            "{}",
            flat.finding()
        );

        // A drop to 90 % with spread that large: a miss, but within two standard errors.
        let noisy = Plateau {
            rounds: 3,
            loads: vec![
                load("350k", true, &[250.0, 350.0, 300.0]),
                load("unlimited", true, &[220.0, 320.0, 270.0]),
            ],
        };
        let h = noisy.holding().unwrap();
        assert!(!h.holds() && !h.declines(), "{h:?}");
        assert!(noisy.finding().contains("within two standard errors"));

        // The same drop with little spread: a decline.
        let declining = Plateau {
            rounds: 3,
            loads: vec![
                load("250k", false, &[249.0, 250.0, 251.0]),
                load("350k", true, &[240.0, 241.0, 242.0]),
                load("unlimited", true, &[224.0, 225.0, 226.0]),
            ],
        };
        let h = declining.holding().unwrap();
        assert_eq!(h.best.0.rate, "250k");
        assert!(h.declines(), "{h:?}");
        assert!(declining.finding().contains("90.0 % of its best"));
        assert!(declining
            .finding()
            .contains("by more than two standard errors"));

        // One load, above the peak and the best.
        let one = Plateau {
            rounds: 2,
            loads: vec![load("unlimited", true, &[300.0, 310.0])],
        };
        assert!(one.holding().unwrap().holds());
        assert!(
            one.finding()
                .contains("305/s at unlimited, its only load above its peak and its best"),
            "{}",
            one.finding()
        );

        // Nothing above the peak.
        let none = Plateau {
            rounds: 0,
            loads: vec![],
        };
        assert!(none.holding().is_none());
        assert!(none.finding().contains("none overloaded it"));
    }
}
