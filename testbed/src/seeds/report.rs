//! Everything the bench measured ([`SeedsReport`]), the sentences its numbers decide and
//! its verdict.

use std::path::PathBuf;

use serde::Serialize;

use super::Machine;
use crate::plateau::Plateau;
use crate::share::ShareRow;
use crate::sleep::{Call, Setting, SleepRow};
use crate::TestbedError;

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// One line of the curve: a configuration's points, in offered order.
#[derive(Clone, Debug, Serialize)]
pub struct CurveSeries {
    pub name: String,
    /// At each load, the trial whose delivered rate was the median of its rounds.
    pub points: Vec<ShareRow>,
    /// At each load (as `points`), every round's delivered rate, frames/s, in the order
    /// they ran.
    pub rounds: Vec<Vec<f64>>,
}

impl CurveSeries {
    /// The series of a configuration from its trials at each load: each point the trial
    /// with the median delivered rate, in offered order.
    pub(super) fn of_rounds(name: &str, trials: Vec<Vec<ShareRow>>) -> CurveSeries {
        let mut at_loads: Vec<(ShareRow, Vec<f64>)> = trials
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(|mut t| {
                let rounds = t.iter().map(|r| r.delivered_pps).collect();
                t.sort_by(|a, b| a.delivered_pps.total_cmp(&b.delivered_pps));
                (t.swap_remove(t.len() / 2), rounds)
            })
            .collect();
        at_loads.sort_by(|a, b| a.0.offered_pps.total_cmp(&b.0.offered_pps));
        let (points, rounds) = at_loads.into_iter().unzip();
        CurveSeries {
            name: name.to_string(),
            points,
            rounds,
        }
    }
}

/// A row of seed 000's table.
#[derive(Clone, Debug, Serialize)]
pub struct TableRow {
    pub test: String,
    pub interrupt: Option<f64>,
    pub polling: Option<f64>,
    pub unit: String,
    pub seed_interrupt: String,
    pub seed_polling: String,
    /// What polld's figures are, where the seed's test cannot be repeated as it was.
    pub note: String,
}

/// Seed 001's screen, once per mode.
#[derive(Clone, Debug, Serialize)]
pub struct Screen {
    pub mode: String,
    /// tap0's interrupts/s as the screen shows them.
    pub interrupts_per_sec: f64,
    /// The poll CPU's idle percent as the screen shows it.
    pub idle_percent: f64,
    /// polld's poll thread, percent of its CPU, as the screen shows it.
    pub polld_thread_percent: f64,
    pub text: String,
}

/// Seed 002's test, once per mode and bitrate.
#[derive(Clone, Debug, Serialize)]
pub struct TcpRow {
    pub mode: String,
    /// iperf3's `-b` in Mbit/s; `None`: unlimited.
    pub target_mbit: Option<f64>,
    pub mbit_per_sec: f64,
    /// polld's poll thread, percent of the fwd CPU during the transfer.
    pub polld_cpu_percent: f64,
    /// Every thread on the path, percent of one CPU: both iperf3s (their own
    /// `cpu_utilization_percent`, which includes the kernel's TCP work they ran), all of
    /// polld's threads and the ksoftirqd threads.
    pub path_cpu_percent: f64,
    pub interrupts_per_sec: f64,
    pub conserved: bool,
}

/// IPv6 against IPv4 in one mode of the share step: the flood with the competitor
/// beside polld, once with IPv4 frames and once with IPv6 ones, in the same run.
#[derive(Clone, Debug, Serialize)]
pub struct Ipv6Row {
    pub mode: String,
    pub user_frac: u32,
    /// The share step's IPv4 trial of this mode and user_frac (`None`: it did not run).
    pub ipv4: Option<ShareRow>,
    pub ipv6: ShareRow,
    /// IPv6's delivered frames/s over IPv4's, each family's smallest frames (`None`:
    /// no IPv4 trial, or it delivered nothing).
    pub ratio: Option<f64>,
}

impl Ipv6Row {
    /// The row of IPv6 trial `ipv6`, beside the IPv4 trial of its mode and user_frac in
    /// `share`.
    pub(super) fn of(ipv6: ShareRow, share: &[ShareRow]) -> Ipv6Row {
        let ipv4 = share
            .iter()
            .find(|r| r.mode == ipv6.mode && r.user_frac == ipv6.user_frac)
            .cloned();
        let ratio = ipv4
            .as_ref()
            .filter(|r| r.delivered_pps > 0.0)
            .map(|r| ipv6.delivered_pps / r.delivered_pps);
        Ipv6Row {
            mode: ipv6.mode.clone(),
            user_frac: ipv6.user_frac,
            ipv4,
            ratio,
            ipv6,
        }
    }
}

/// What the competitor got under the flood against the promise, in words: starved (under
/// 15 %) in interrupt mode, within 5 points of user_frac polling.
fn share_verdict(r: &ShareRow) -> &'static str {
    match r.mode.as_str() {
        "interrupt" if r.competitor_percent < 15.0 => "under 15 %: starved",
        "interrupt" => "NOT under 15 %",
        _ if (r.competitor_percent - f64::from(r.user_frac)).abs() <= 5.0 => "within 5 points",
        _ => "NOT within 5 points",
    }
}

/// Everything the bench measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SeedsReport {
    pub machine: Option<Machine>,
    /// Where it ran: the testbed, and where polld and polld gen ran.
    pub testbed: String,
    pub quick: bool,
    pub curve: Vec<CurveSeries>,
    /// Polling's trials above its peak, if the curve ran: its verdict's.
    pub plateau: Option<Plateau>,
    pub table: Vec<TableRow>,
    pub screens: Vec<Screen>,
    pub tcp: Vec<TcpRow>,
    pub share: Vec<ShareRow>,
    /// The share step's IPv6 trials beside its IPv4 ones (TAP testbed).
    pub ipv6: Vec<Ipv6Row>,
    /// Seed 003: how long a sleep of 1 µs and of 1 ns lasted.
    pub sleep: Vec<SleepRow>,
    /// Seed 003 on packets: a passive reader against active polling.
    pub passive: Vec<PassiveRow>,
    /// Seed 003's time merge: two inputs into one output, by reader.
    pub merge: Vec<MergeRow>,
    /// Seed 004: interrupt against adaptive mode, with and without fastforwarding.
    pub adaptive: Vec<AdaptiveRow>,
    /// The curve's livelock, if the curve ran: the bench fails when it did not reproduce.
    pub livelock: Option<Livelock>,
    /// Sentences decided by the numbers above.
    pub findings: Vec<String>,
    pub svgs: Vec<PathBuf>,
    /// Trials run, and those whose counters did not add up.
    pub trials: usize,
    pub unconserved: Vec<String>,
}

impl SeedsReport {
    /// Whether its trials ran in the guest: their rows carry its `ksoftirqd/0`.
    pub(super) fn in_guest(&self) -> bool {
        let curve = self.curve.iter().flat_map(|s| &s.points);
        curve
            .chain(&self.share)
            .any(|r| r.ksoftirqd_percent.is_some())
    }

    /// The bench's verdict, once its report is printed (and its results page written): an
    /// error when the livelock did not reproduce, polling's plateau declined beyond the
    /// machine's noise ([`crate::plateau::Holding::declines`]), an IPv6 trial flooded
    /// another IP version, or a trial's counters did not add up.
    pub fn verdict(&self) -> Result<(), TestbedError> {
        if let Some(l) = self.livelock.as_ref().filter(|l| !l.reproduced()) {
            return Err(failed(format!(
                "the livelock did not reproduce: interrupt mode without fastforwarding delivered \
                 {:.1} % of its best under the flood (seed 000: almost 0; the bench's verdict \
                 needs under 10 %)",
                l.ratio * 100.0
            )));
        }
        if let Some(h) = self
            .plateau
            .as_ref()
            .and_then(Plateau::holding)
            .filter(|h| h.declines())
        {
            return Err(failed(format!(
                "polling did not hold its peak: at {} it delivered {:.1} % of its best \
                 (standard error {:.1} %; seed 000: it \"roughly remains there\"; the bench's \
                 verdict needs 95 %, and fails below it by more than two standard errors)",
                h.worst.0.rate,
                h.ratio * 100.0,
                h.ratio_se * 100.0
            )));
        }
        if let Some(r) = self.ipv6.iter().find(|r| r.ipv6.gen_ip_version != Some(6)) {
            return Err(failed(format!(
                "the IPv6 trial of {} mode did not flood IPv6: polld gen's summary says IP \
                 version {:?}",
                r.mode, r.ipv6.gen_ip_version
            )));
        }
        if !self.unconserved.is_empty() {
            return Err(failed(format!(
                "conservation did not hold in {}: see polld run --json",
                self.unconserved.join(", ")
            )));
        }
        Ok(())
    }
}

/// The curve's livelock: interrupt mode without fastforwarding under the flood (the
/// curve's last point) against its best point.
#[derive(Clone, Debug, Serialize)]
pub struct Livelock {
    pub best_pps: f64,
    pub best_offered_pps: f64,
    pub flooded_pps: f64,
    pub flooded_offered_pps: f64,
    /// Flooded over best.
    pub ratio: f64,
}

impl Livelock {
    /// The seed's phenomenon ("rapidly decays to almost 0"): the flood gets under 10 % of
    /// the best.
    pub fn reproduced(&self) -> bool {
        self.ratio < 0.10
    }

    pub(super) fn of(curve: &[CurveSeries]) -> Option<Livelock> {
        let s = curve
            .iter()
            .find(|s| s.name == "interrupt, fastforwarding=0")?;
        Livelock::of_points(&s.points)
    }

    /// From one configuration's trials in offered order, the flood last: its best
    /// delivered rate against the flood's.
    pub(super) fn of_points(points: &[ShareRow]) -> Option<Livelock> {
        let best = points
            .iter()
            .max_by(|a, b| a.delivered_pps.total_cmp(&b.delivered_pps))?;
        let flooded = points.last()?;
        Some(Livelock {
            best_pps: best.delivered_pps,
            best_offered_pps: best.offered_pps,
            flooded_pps: flooded.delivered_pps,
            flooded_offered_pps: flooded.offered_pps,
            ratio: flooded.delivered_pps / best.delivered_pps.max(1.0),
        })
    }
}

/// Seed 000's two phenomena: the livelock, answered from the curve's points, and
/// polling's plateau, from its own trials.
fn curve_findings(curve: &[CurveSeries], plateau: Option<&Plateau>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(l) = Livelock::of(curve) {
        let verdict = if l.reproduced() {
            "under 10 % of its best: livelock reproduced"
        } else {
            "NOT under 10 % of its best: livelock NOT reproduced"
        };
        lines.push(format!(
            "Interrupts without fastforwarding: best {:.0}/s at {:.0}/s offered; flooded ({:.0}/s offered) {:.0}/s, {:.1} % of its best, {verdict}.",
            l.best_pps, l.best_offered_pps, l.flooded_offered_pps, l.flooded_pps, l.ratio * 100.0
        ));
    }
    lines.extend(plateau.map(Plateau::finding));
    lines
}

pub(super) fn findings(report: &SeedsReport) -> Vec<String> {
    let mut lines = curve_findings(&report.curve, report.plateau.as_ref());
    lines.extend(sleep_finding(&report.sleep));
    for r in &report.share {
        let held = share_verdict(r);
        let line = match r.mode.as_str() {
            "interrupt" => format!(
                "Interrupt mode under a flood: the competitor got {:.1} % ({held}).",
                r.competitor_percent,
            ),
            _ => format!(
                "Polling, user_frac {}: the competitor got {:.1} % ({held}).",
                r.user_frac, r.competitor_percent,
            ),
        };
        lines.push(line);
    }
    lines.extend(report.ipv6.iter().map(ipv6_finding));
    if let [intr, poll] = &report.screens[..] {
        lines.push(format!(
            "After `polld ifconfig tap0 polling`: interrupts/s {:.0} -> {:.0}, idle on the poll CPU {:.1} % -> {:.1} % ({}), polld's thread {:.1} % -> {:.1} %.",
            intr.interrupts_per_sec,
            poll.interrupts_per_sec,
            intr.idle_percent,
            poll.idle_percent,
            if poll.idle_percent > intr.idle_percent { "rising, as in the seed" } else { "NOT rising, unlike the seed" },
            intr.polld_thread_percent,
            poll.polld_thread_percent
        ));
    }
    lines.push(if report.unconserved.is_empty() {
        format!(
            "Conservation held on every interface in all {} trials (rx = forwarded + local + consumed + queued + named drops).",
            report.trials
        )
    } else {
        format!(
            "CONSERVATION VIOLATED in {} of {} trials: {}.",
            report.unconserved.len(),
            report.trials,
            report.unconserved.join(", ")
        )
    });
    lines
}

/// IPv6 against IPv4 in one mode: the rate ratio against the promise (IPv6 at 0.95x
/// IPv4 or more), and whether the competitor's share held with IPv6 frames.
fn ipv6_finding(r: &Ipv6Row) -> String {
    let mode = match r.mode.as_str() {
        "interrupt" => "Interrupt mode".to_string(),
        _ => format!("Polling, user_frac {}", r.user_frac),
    };
    let ratio = match r.ratio {
        Some(x) if x >= 0.95 => format!("{x:.2}x IPv4's (at least 0.95x)"),
        Some(x) => format!("{x:.2}x IPv4's (below 0.95x)"),
        None => "not compared (no IPv4 frames delivered)".to_string(),
    };
    let held = share_verdict(&r.ipv6);
    format!(
        "{mode} with IPv6 frames under a flood: delivered {:.0}/s, {ratio}; the competitor got {:.1} % ({held}).",
        r.ipv6.delivered_pps, r.ipv6.competitor_percent
    )
}

/// Seed 003's finding: a sleep of 1 µs at the default timer slack lasts tens of µs, so a
/// passive poller that sleeps between empty reads lets hundreds of frames of a 10 Gbit/s
/// link pass; reproduced when it lasts at least ten times what was asked.
fn sleep_finding(rows: &[SleepRow]) -> Option<String> {
    let at = |setting| {
        rows.iter()
            .find(|r| r.setting == setting && r.call == Call::Usleep1)
    };
    let default = at(Setting::DefaultSlack)?;
    let reproduced = default.mean_us >= 10.0;
    Some(format!(
        "Seed 003: usleep(1) lasted {:.1} us on average at the default timer slack (seed: {:.1} us), {} with a 1-ns slack, {} under SCHED_FIFO; sleeping 1 us between empty reads lets {:.0} frames of a 10 Gbit/s link pass: {}.",
        default.mean_us,
        Call::Usleep1.seed_us(),
        at(Setting::Slack1ns).map_or("-".into(), |r| format!("{:.1} us", r.mean_us)),
        at(Setting::Fifo).map_or("-".into(), |r| format!("{:.1} us", r.mean_us)),
        default.frames_at_10g,
        if reproduced {
            "reproduced (a sleep of 1 us lasts at least 10 us)"
        } else {
            "NOT reproduced (a sleep of 1 us lasted under 10 us)"
        }
    ))
}

/// One configuration of seed 004's table.
#[derive(Clone, Debug, Serialize)]
pub struct AdaptiveRow {
    /// `interrupt` or `adaptive`, on both TAPs.
    pub mode: String,
    /// `net.inet.ip.fastforwarding`.
    pub fastforwarding: bool,
    /// The trials at lower loads (`adaptive::LOWER_RATES`), in their order.
    pub lower: Vec<ShareRow>,
    /// The flood's trial with the median delivered rate of its rounds.
    pub flooded: ShareRow,
    /// Every flood round's delivered rate, frames/s, in the order they ran.
    pub flood_rounds: Vec<f64>,
    /// The flood against the configuration's best.
    pub livelock: Livelock,
}

/// One reader of seed 003's packet table.
#[derive(Clone, Debug, Serialize)]
pub struct PassiveRow {
    pub reader: String,
    pub mode: String,
    /// `kern.polling.hz` in polling mode.
    pub hz: Option<u32>,
    pub offered_pps: f64,
    pub delivered_pps: f64,
    /// Frames gen sent (its summary).
    pub sent: u64,
    /// The frames the kernel dropped at tap0's full queue: the reader's loss.
    pub lost_at_queue: u64,
    /// `lost_at_queue`, percent of what gen sent.
    pub loss_percent: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    /// polld's poll thread, percent of its CPU.
    pub polld_cpu_percent: f64,
}

/// One reader of seed 003's time merge.
#[derive(Clone, Debug, Serialize)]
pub struct MergeRow {
    pub reader: String,
    pub mode: String,
    /// `kern.polling.hz` in polling mode.
    pub hz: Option<u32>,
    /// Frames both generators sent (their summaries).
    pub sent: u64,
    /// Our frames the sink received.
    pub received: u64,
    /// Of those, the frames that arrived after a frame sent later.
    pub out_of_send_order: u64,
    /// `out_of_send_order`, percent of `received`.
    pub out_of_order_percent: f64,
    pub p99_us: f64,
    /// polld's CPU time over the trial, percent of one CPU.
    pub polld_cpu_percent: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plateau::PlateauLoad;

    fn series(name: &str, points: &[(f64, f64)]) -> CurveSeries {
        CurveSeries {
            name: name.into(),
            points: points.iter().map(|&(o, d)| ShareRow::point(o, d)).collect(),
            rounds: points.iter().map(|&(_, d)| vec![d]).collect(),
        }
    }

    #[test]
    fn the_livelock_is_decided_from_the_points_and_the_plateau_from_its_trials() {
        let plateau = Plateau {
            rounds: 2,
            loads: vec![PlateauLoad {
                rate: "unlimited".into(),
                above_peak: true,
                offered: vec![900.0, 900.0],
                delivered: vec![187.0, 187.0],
            }],
        };
        let lines = curve_findings(
            &[series(
                "interrupt, fastforwarding=0",
                &[(100.0, 100.0), (200.0, 150.0), (900.0, 10.0)],
            )],
            Some(&plateau),
        );
        assert!(
            lines[0].contains("6.7 % of its best, under 10 % of its best: livelock reproduced"),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1], plateau.finding());
        let lines = curve_findings(
            &[series(
                "interrupt, fastforwarding=0",
                &[(100.0, 100.0), (900.0, 50.0)],
            )],
            None,
        );
        assert!(
            lines[0].contains("NOT under 10 % of its best: livelock NOT reproduced"),
            "{}",
            lines[0]
        );
        assert_eq!(lines.len(), 1);
    }

    #[test]
    fn a_point_is_the_median_round_and_the_points_go_in_offered_order() {
        let s = CurveSeries::of_rounds(
            "polling",
            vec![
                vec![
                    ShareRow::point(900.0, 300.0),
                    ShareRow::point(880.0, 250.0),
                    ShareRow::point(910.0, 330.0),
                ],
                vec![
                    ShareRow::point(100.0, 100.0),
                    ShareRow::point(101.0, 99.0),
                    ShareRow::point(99.0, 98.0),
                ],
            ],
        );
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (p.offered_pps, p.delivered_pps))
            .collect();
        // The median trial whole (its offered with its delivered), not a mix of rounds.
        assert_eq!(points, [(101.0, 99.0), (900.0, 300.0)]);
        assert_eq!(
            s.rounds,
            [vec![100.0, 99.0, 98.0], vec![300.0, 250.0, 330.0]]
        );
    }

    #[test]
    fn an_ipv6_trial_is_read_beside_the_ipv4_one_of_its_mode_and_user_frac() {
        let trial = |user_frac, delivered, competitor, version| ShareRow {
            user_frac,
            competitor_percent: competitor,
            gen_ip_version: Some(version),
            ..ShareRow::point(1000.0, delivered)
        };
        let share = [trial(10, 500.0, 10.0, 4), trial(50, 400.0, 50.0, 4)];
        let row = Ipv6Row::of(trial(50, 360.0, 58.0, 6), &share);
        assert_eq!(row.ipv4.as_ref().map(|r| r.user_frac), Some(50));
        assert_eq!(row.ratio, Some(0.9));
        let line = ipv6_finding(&row);
        assert!(line.contains("0.90x IPv4's (below 0.95x)"), "{line}");
        assert!(line.contains("58.0 % (NOT within 5 points)"), "{line}");
        let report = SeedsReport {
            ipv6: vec![row],
            ..SeedsReport::default()
        };
        assert!(report.verdict().is_ok());
        let row = Ipv6Row::of(trial(50, 400.0, 52.0, 6), &share);
        assert!(ipv6_finding(&row).contains("1.00x IPv4's (at least 0.95x)"));
        // A trial that flooded IPv4 is no IPv6 row.
        let report = SeedsReport {
            ipv6: vec![Ipv6Row::of(trial(50, 400.0, 50.0, 4), &share)],
            ..SeedsReport::default()
        };
        let err = report.verdict().unwrap_err().to_string();
        assert!(err.contains("did not flood IPv6"), "{err}");
        assert_eq!(Ipv6Row::of(trial(90, 1.0, 90.0, 6), &share).ratio, None);
    }
}
