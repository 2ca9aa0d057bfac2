//! Seed 004 (em(4), 2006): a fast interrupt that masks the NIC and queues a task bounded
//! by `rx_processing_limit` ("adaptive polling") took fast forwarding from ~570 to ~750
//! kpps and removed over-saturation livelocks. polld's `adaptive` mode is that design
//! (docs/algorithm.md §7, `dev.IF.rx_process_limit`); this step runs it against
//! `interrupt` mode, each with `net.inet.ip.fastforwarding` 1 and 0, no competitor:
//! under a flood, in rounds through the four configurations (three, one with `--quick`;
//! the point is the round with the median delivered rate), then once at each of
//! [`LOWER_RATES`], around the knee of interrupts without fastforwarding: the highest
//! delivered rate of the three is the configuration's best. Whether a configuration livelocks is the curve's
//! definition ([`Livelock`]): the flood gets under 10 % of its best.

use super::plan::{Knobs, NO_FASTFORWARDING};
use super::report::{AdaptiveRow, CurveSeries, Livelock};
use super::seed;
use super::steps::Bench;
use crate::share::ShareRow;
use crate::TestbedError;

/// The lower loads: about where interrupts without fastforwarding have their best on TAP,
/// between 100k and 250k offered, and 200k already past it on a loaded machine
/// (docs/measuring.md §tb-knees).
const LOWER_RATES: [&str; 2] = ["100k", "200k"];

/// The flood's gain that counts as seed 004's faster forwarding: the seed's was 1.32x
/// (750 against 570 kpps); one flood trial on TAP moves by 10 % or more
/// (docs/measuring.md §tb-plateau).
const GAIN: f64 = 1.1;

impl AdaptiveRow {
    fn label(&self) -> String {
        format!(
            "{}, fastforwarding={}",
            self.mode,
            u8::from(self.fastforwarding)
        )
    }
}

/// The four configurations, in the table's order.
const CONFIGS: [(&str, bool); 4] = [
    ("interrupt", true),
    ("adaptive", true),
    ("interrupt", false),
    ("adaptive", false),
];

impl Bench<'_> {
    /// Seed 004: interrupt against adaptive mode, with and without fastforwarding, under
    /// a flood and at [`LOWER_RATES`].
    pub(super) fn adaptive(&mut self) -> Result<(), TestbedError> {
        let rounds = self.timing.adaptive_rounds;
        let mut floods: Vec<Vec<ShareRow>> = vec![Vec::new(); CONFIGS.len()];
        // In rounds through the configurations, so that what drifts on the machine falls
        // on each alike.
        for round in 1..=rounds {
            for (&(mode, ff), at) in CONFIGS.iter().zip(&mut floods) {
                at.push(self.adaptive_trial(mode, ff, "unlimited", (round, rounds))?);
            }
        }
        for (&(mode, ff), trials) in CONFIGS.iter().zip(floods) {
            let mut lower = Vec::new();
            for rate in LOWER_RATES {
                lower.push(self.adaptive_trial(mode, ff, rate, (1, 1))?);
            }
            let flood = CurveSeries::of_rounds(mode, vec![trials]);
            let flooded = flood.points[0].clone();
            let mut points = lower.clone();
            points.push(flooded.clone());
            let livelock = Livelock::of_points(&points)
                .ok_or_else(|| TestbedError::Failed("seed 004: no trial to judge".into()))?;
            self.report.adaptive.push(AdaptiveRow {
                mode: mode.into(),
                fastforwarding: ff,
                lower,
                flooded,
                flood_rounds: flood.rounds.into_iter().flatten().collect(),
                livelock,
            });
        }
        Ok(())
    }

    /// One trial of `mode` at `rate`: a trial of the curve's kind, its knobs but
    /// fastforwarding the curve's.
    fn adaptive_trial(
        &mut self,
        mode: &str,
        fastforwarding: bool,
        rate: &str,
        rounds: (usize, usize),
    ) -> Result<ShareRow, TestbedError> {
        let what = format!(
            "seed 004: {mode}, fastforwarding={}",
            u8::from(fastforwarding)
        );
        let knobs: Knobs = if fastforwarding {
            &[]
        } else {
            &NO_FASTFORWARDING
        };
        self.curve_trial(&what, mode, knobs, rate, rounds)
    }
}

/// Seed 004's table beside the seed's figures.
pub(super) fn render(rows: &[AdaptiveRow]) -> String {
    let mut text = format!("{:<32}", "configuration");
    for rate in LOWER_RATES {
        text.push_str(&format!(" {:>12}", format!("at {rate}")));
    }
    text.push_str(&format!(
        " {:>11} {:>11} {:>8} {:>10} {:>13} | {}\n",
        "flood/s", "delivered/s", "of best", "polld CPU", "interrupts/s", "seed"
    ));
    for r in rows {
        let f = &r.flooded;
        text.push_str(&format!("{:<32}", r.label()));
        for l in &r.lower {
            text.push_str(&format!(" {:>12.0}", l.delivered_pps));
        }
        text.push_str(&format!(
            " {:>11.0} {:>11.0} {:>7.1}% {:>9.1}% {:>13.0} | {}\n",
            f.offered_pps,
            f.delivered_pps,
            r.livelock.ratio * 100.0,
            f.polld_cpu_percent,
            f.interrupts_per_sec,
            seed::adaptive(&r.mode, r.fastforwarding)
        ));
    }
    if rows.iter().any(|r| r.flood_rounds.len() > 1) {
        let rounds: Vec<String> = rows
            .iter()
            .map(|r| {
                let k: Vec<String> = r
                    .flood_rounds
                    .iter()
                    .map(|d| format!("{:.0}", d / 1e3))
                    .collect();
                format!("{} {}", r.label(), k.join("/"))
            })
            .collect();
        text.push_str(&format!(
            "  flood: the round with the median delivered rate; every round's delivered, thousands/s, in the order they ran: {}\n",
            rounds.join("; ")
        ));
    }
    text.push_str(&format!(
        "  at {}: delivered/s at those polld gen rates; of best: the flood's delivered against the highest of the three (under 10 %: livelock, as the curve's verdict)\n",
        LOWER_RATES.join(", at ")
    ));
    text
}

/// Seed 004's verdict from its rows: adaptive's flood against interrupt mode's with and
/// without fastforwarding, and which configurations livelock.
pub(super) fn finding(rows: &[AdaptiveRow]) -> Option<String> {
    let at = |mode: &str, ff: bool| {
        rows.iter()
            .find(|r| r.mode == mode && r.fastforwarding == ff)
    };
    let gain = |ff: bool| -> Option<(f64, &AdaptiveRow, &AdaptiveRow)> {
        let (i, a) = (at("interrupt", ff)?, at("adaptive", ff)?);
        Some((
            a.flooded.delivered_pps / i.flooded.delivered_pps.max(1.0),
            i,
            a,
        ))
    };
    let (ff_gain, intr, adap) = gain(true)?;
    let (noff_gain, intr_noff, adap_noff) = gain(false)?;
    let kept = |r: &AdaptiveRow| {
        format!(
            "{:.1} % of its best ({})",
            r.livelock.ratio * 100.0,
            if r.livelock.reproduced() {
                "livelock"
            } else {
                "no livelock"
            }
        )
    };
    let faster = if ff_gain >= GAIN {
        format!("faster forwarding reproduced (at least {GAIN}x)")
    } else {
        format!("faster forwarding NOT reproduced (under {GAIN}x)")
    };
    let livelocks = match (
        intr_noff.livelock.reproduced(),
        adap.livelock.reproduced() || adap_noff.livelock.reproduced(),
    ) {
        (true, false) => "the livelock's removal reproduced",
        (false, false) => "the livelock's removal NOT shown (interrupt mode did not livelock)",
        (_, true) => "the livelock's removal NOT reproduced (adaptive mode livelocked)",
    };
    Some(format!(
        "Seed 004: under the flood adaptive mode forwarded {ff_gain:.2}x interrupt mode with fastforwarding=1 ({:.0} against {:.0} frames/s; seed: ~750 against ~570 kpps, {:.2}x) and {noff_gain:.2}x with fastforwarding=0 ({:.0} against {:.0}); without fastforwarding interrupt mode kept {}, adaptive {}: {faster}; {livelocks}.",
        adap.flooded.delivered_pps,
        intr.flooded.delivered_pps,
        seed::ADAPTIVE_KPPS.1 / seed::ADAPTIVE_KPPS.0,
        adap_noff.flooded.delivered_pps,
        intr_noff.flooded.delivered_pps,
        kept(intr_noff),
        kept(adap_noff),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration that delivered `lower` at 100k and 200k and `flood` flooded.
    fn row(mode: &str, ff: bool, lower: [f64; 2], flood: f64) -> AdaptiveRow {
        let lower = vec![
            ShareRow::point(100_000.0, lower[0]),
            ShareRow::point(200_000.0, lower[1]),
        ];
        let flooded = ShareRow::point(1_000_000.0, flood);
        let mut points = lower.clone();
        points.push(flooded.clone());
        AdaptiveRow {
            mode: mode.into(),
            fastforwarding: ff,
            livelock: Livelock::of_points(&points).unwrap(),
            lower,
            flooded,
            flood_rounds: vec![flood],
        }
    }

    #[test]
    fn the_verdict_compares_the_floods_and_judges_each_livelock_against_its_best() {
        let rows = [
            row("interrupt", true, [100_000.0, 200_000.0], 570_000.0),
            row("adaptive", true, [100_000.0, 200_000.0], 750_000.0),
            row("interrupt", false, [99_000.0, 98_000.0], 6_000.0),
            row("adaptive", false, [100_000.0, 200_000.0], 300_000.0),
        ];
        let line = finding(&rows).unwrap();
        assert!(
            line.contains("forwarded 1.32x interrupt mode with fastforwarding=1 (750000 against 570000 frames/s; seed: ~750 against ~570 kpps, 1.32x) and 50.00x with fastforwarding=0"),
            "{line}"
        );
        // The flood above the lower loads is its own best: 100 %.
        assert!(
            line.contains("interrupt mode kept 6.1 % of its best (livelock), adaptive 100.0 % of its best (no livelock): faster forwarding reproduced (at least 1.1x); the livelock's removal reproduced."),
            "{line}"
        );

        let rows = [
            row("interrupt", true, [100_000.0, 200_000.0], 700_000.0),
            row("adaptive", true, [100_000.0, 200_000.0], 720_000.0),
            // 15k is over 10 % of 100k, not of 190k: the best is the highest of the three.
            row("interrupt", false, [99_000.0, 190_000.0], 15_000.0),
            row("adaptive", false, [100_000.0, 150_000.0], 8_000.0),
        ];
        let line = finding(&rows).unwrap();
        assert!(
            line.contains("interrupt mode kept 7.9 % of its best (livelock), adaptive 5.3 % of its best (livelock): faster forwarding NOT reproduced (under 1.1x); the livelock's removal NOT reproduced (adaptive mode livelocked)."),
            "{line}"
        );
        assert!(finding(&rows[..3]).is_none());
    }
}
