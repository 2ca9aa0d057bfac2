//! The bench's steps that run trials and read their rows: the curve, polling's plateau,
//! the competitor's share and seed 000's table. `screens` and `tcp` are in their own
//! files.

use std::io::Write;
use std::path::Path;

use super::plan::{Knobs, Timing, CURVE_USER_FRAC, DEFAULT_USER_FRAC, NO_FASTFORWARDING};
use super::report::{CurveSeries, Ipv6Row, SeedsReport, TableRow};
use super::{failed, seed};
use crate::plateau::{self, Plateau};
use crate::share::{measure_share_family, ShareRow, ShareTrial};
use crate::streams::ExtraStream;
use crate::{Devices, IpFamily, Testbed, TestbedError};

/// What the steps share.
pub(super) struct Bench<'a> {
    pub(super) tb: &'a Testbed,
    pub(super) polld: &'a Path,
    pub(super) dir: &'a Path,
    pub(super) cpus: (usize, usize),
    pub(super) timing: Timing,
    pub(super) progress: &'a mut dyn Write,
    pub(super) report: SeedsReport,
}

impl Bench<'_> {
    pub(super) fn say(&mut self, line: &str) {
        let _ = writeln!(self.progress, "polld bench seeds: {line}");
    }

    /// Runs one trial and books its conservation.
    pub(super) fn trial(
        &mut self,
        label: &str,
        trial: &ShareTrial,
    ) -> Result<ShareRow, TestbedError> {
        self.trial_family(label, trial, IpFamily::Ipv4)
    }

    /// [`Bench::trial`] flooding `family` (IPv6 on the TAP testbed only).
    fn trial_family(
        &mut self,
        label: &str,
        trial: &ShareTrial,
        family: IpFamily,
    ) -> Result<ShareRow, TestbedError> {
        let row = match (self.tb.layout().devices, family) {
            (Devices::Vm, IpFamily::Ipv4) => crate::vm::demo::trial(self.tb, self.polld, trial)?,
            (Devices::Vm, IpFamily::Ipv6) => {
                return Err(failed(
                    "the VM testbed's trials flood IPv4 only; IPv6 runs on the TAP testbed".into(),
                ))
            }
            _ => measure_share_family(self.tb, self.polld, self.dir, self.cpus, trial, family)?,
        };
        self.book(label, row.conserved);
        Ok(row)
    }

    pub(super) fn book(&mut self, label: &str, conserved: bool) {
        self.report.trials += 1;
        if !conserved {
            self.report.unconserved.push(label.to_string());
        }
    }

    pub(super) fn flood_trial<'t>(&self, mode: &'t str, user_frac: u32) -> ShareTrial<'t> {
        ShareTrial::flood(mode, user_frac, self.timing.warm_up, self.timing.window)
    }

    pub(super) fn curve(&mut self) -> Result<(), TestbedError> {
        let configs: [(&str, &str, Knobs); 3] = [
            ("interrupt", "interrupt", &[]),
            (
                "interrupt, fastforwarding=0",
                "interrupt",
                &NO_FASTFORWARDING,
            ),
            ("polling", "polling", &[]),
        ];
        let rounds = self.timing.rounds;
        for (name, mode, knobs) in configs {
            // In rounds through every load, so that what drifts over minutes on the
            // machine falls on every load alike.
            let mut trials: Vec<Vec<ShareRow>> = vec![Vec::new(); self.timing.rates.len()];
            for round in 1..=rounds {
                for (&rate, at_rate) in self.timing.rates.iter().zip(&mut trials) {
                    let what = format!("curve: {name}");
                    at_rate.push(self.curve_trial(&what, mode, knobs, rate, (round, rounds))?);
                }
            }
            if mode == "polling" {
                self.plateau(&trials)?;
            }
            self.report.curve.push(CurveSeries::of_rounds(name, trials));
        }
        Ok(())
    }

    /// One trial of the curve (no competitor, user_frac [`CURVE_USER_FRAC`]) at `rate`, in
    /// `round` (this one, of how many); `what` begins its progress lines.
    pub(super) fn curve_trial(
        &mut self,
        what: &str,
        mode: &str,
        knobs: Knobs,
        rate: &str,
        (round, rounds): (usize, usize),
    ) -> Result<ShareRow, TestbedError> {
        self.say(&format!(
            "{what}, polld gen --rate {rate} (round {round} of {rounds}) ..."
        ));
        let trial = ShareTrial {
            rate: Some(rate),
            competitor: false,
            knobs,
            ..self.flood_trial(mode, CURVE_USER_FRAC)
        };
        let row = self.trial(&format!("{what} {rate} round {round}"), &trial)?;
        self.say(&format!(
            "{what}: offered {:.0}/s, delivered {:.0}/s",
            row.offered_pps, row.delivered_pps
        ));
        Ok(row)
    }

    /// Polling's plateau: rounds of trials at the loads above its peak and its best, found
    /// from the curve's `trials` at each rate ([`crate::plateau`]).
    fn plateau(&mut self, trials: &[Vec<ShareRow>]) -> Result<(), TestbedError> {
        let mut loads = plateau::loads(self.timing.rates, trials);
        let rounds = self.timing.plateau_rounds;
        for round in 1..=rounds {
            for load in &mut loads {
                let row = self.curve_trial(
                    "plateau: polling",
                    "polling",
                    &[],
                    &load.rate,
                    (round, rounds),
                )?;
                load.offered.push(row.offered_pps);
                load.delivered.push(row.delivered_pps);
            }
        }
        self.report.plateau = Some(Plateau { rounds, loads });
        Ok(())
    }

    /// The competitor's share under an IPv4 flood at each user_frac and in interrupt
    /// mode; then, on the TAP testbed, polling at the default user_frac and interrupt mode
    /// again under an IPv6 flood, each beside its IPv4 trial ([`Ipv6Row`]).
    pub(super) fn share(&mut self) -> Result<(), TestbedError> {
        let ipv4 = [
            ("polling", 10),
            ("polling", 50),
            ("polling", 90),
            ("interrupt", DEFAULT_USER_FRAC),
        ]
        .map(|(mode, user_frac)| (mode, user_frac, IpFamily::Ipv4));
        let ipv6 = [
            ("polling", DEFAULT_USER_FRAC),
            ("interrupt", DEFAULT_USER_FRAC),
        ]
        .map(|(mode, user_frac)| (mode, user_frac, IpFamily::Ipv6));
        let on_tap = self.tb.layout().devices == Devices::Tap;
        let trials = ipv4.into_iter().chain(ipv6.into_iter().filter(|_| on_tap));
        for (mode, user_frac, family) in trials {
            let beside = match self.tb.layout().devices {
                Devices::Vm => "on the guest's vCPU".to_string(),
                _ => format!("on CPU{}", self.cpus.1),
            };
            let what = format!("share: {mode}, user_frac {user_frac}, {}", family.name());
            self.say(&format!("{what}, flood and a competitor {beside} ..."));
            let row = self.trial_family(
                &format!("share {mode} {user_frac} {}", family.name()),
                &ShareTrial {
                    warm_up: self.timing.warm_up.max(1.0),
                    ..self.flood_trial(mode, user_frac)
                },
                family,
            )?;
            self.say(&format!(
                "{what}: competitor {:.1} %, polld {:.1} %, delivered {:.0}/s",
                row.competitor_percent, row.polld_cpu_percent, row.delivered_pps
            ));
            match family {
                IpFamily::Ipv4 => self.report.share.push(row),
                IpFamily::Ipv6 => {
                    let beside_ipv4 = Ipv6Row::of(row, &self.report.share);
                    self.report.ipv6.push(beside_ipv4);
                }
            }
        }
        Ok(())
    }

    /// Seed 000's table, from the curve's and the share step's trials and one more.
    pub(super) fn table(&mut self) -> Result<(), TestbedError> {
        self.say("table: polling with fastforwarding=0 under a flood ...");
        let trial = ShareTrial {
            competitor: false,
            knobs: &NO_FASTFORWARDING,
            ..self.flood_trial("polling", CURVE_USER_FRAC)
        };
        let polling_no_ff = self.trial("table polling fastforwarding=0", &trial)?;
        let streams = self.streams()?;
        let flooded = |name: &str| {
            self.report
                .curve
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| {
                    s.points
                        .iter()
                        .max_by(|a, b| a.offered_pps.total_cmp(&b.offered_pps))
                })
                .cloned()
        };
        let (intr, intr_no_ff, poll) = (
            flooded("interrupt"),
            flooded("interrupt, fastforwarding=0"),
            flooded("polling"),
        );
        let share = |mode: &str| {
            self.report
                .share
                .iter()
                .find(|r| r.mode == mode && r.user_frac == DEFAULT_USER_FRAC)
                .cloned()
        };
        let kpps = |r: &Option<ShareRow>, f: fn(&ShareRow) -> f64| r.as_ref().map(|r| f(r) / 1e3);
        let rows = [
            (
                kpps(&intr, |r| r.offered_pps),
                kpps(&poll, |r| r.offered_pps),
                "kpps",
                "polld gen's sending rate on the gen CPU during the flooded forwarding runs: polld does not generate traffic, and its mode does not touch that CPU",
            ),
            (
                share("interrupt").map(|r| r.polld_cpu_percent),
                share("polling").map(|r| r.polld_cpu_percent),
                "%",
                "polld's poll thread under a flood with a CPU-bound competitor beside it (user_frac 50)",
            ),
            (
                kpps(&intr, |r| r.delivered_pps),
                kpps(&poll, |r| r.delivered_pps),
                "kpps",
                "delivered to tap1 under gen's flood, no competitor (polling: user_frac 10)",
            ),
            (
                kpps(&intr_no_ff, |r| r.delivered_pps),
                Some(polling_no_ff.delivered_pps / 1e3),
                "kpps",
                "as above, net.inet.ip.fastforwarding=0",
            ),
            (
                Some(streams[0].0 / 1e3),
                Some(streams[0].1 / 1e3),
                "kpps",
                "2 input TAPs (tap0, tap2) each flooded by its own polld gen on the gen CPU, each forwarded to its own output TAP; delivered summed (polling: user_frac 10)",
            ),
            (
                Some(streams[1].0 / 1e3),
                Some(streams[1].1 / 1e3),
                "kpps",
                "as above with 4 inputs (tap0, tap2, tap4, tap6)",
            ),
        ];
        for (i, (interrupt, polling, unit, note)) in rows.into_iter().enumerate() {
            let (test, seed_interrupt, seed_polling) = seed::TABLE[i];
            self.report.table.push(TableRow {
                test: test.into(),
                interrupt,
                polling,
                unit: unit.into(),
                seed_interrupt: seed_interrupt.into(),
                seed_polling: seed_polling.into(),
                note: note.into(),
            });
        }
        Ok(())
    }

    /// Seed 000's 2- and 4-stream rows: (interrupt, polling) delivered for 2, then 4
    /// streams, each input flooded by its own gen, no competitor.
    fn streams(&mut self) -> Result<[(f64, f64); 2], TestbedError> {
        let extra = ExtraStream::for_total(4);
        for stream in &extra {
            stream.create(self.tb)?;
        }
        let mut delivered = [(0.0, 0.0); 2];
        for (slot, n) in [2, 4].into_iter().enumerate() {
            for mode in ["interrupt", "polling"] {
                self.say(&format!(
                    "table: {n} streams, {mode}, each input flooded ..."
                ));
                let trial = ShareTrial {
                    competitor: false,
                    extra_streams: &extra[..n - 1],
                    ..self.flood_trial(mode, CURVE_USER_FRAC)
                };
                let row = self.trial(&format!("table {n} streams {mode}"), &trial)?;
                self.say(&format!(
                    "table: {n} streams, {mode}: offered {:.0}/s, delivered {:.0}/s",
                    row.offered_pps, row.delivered_pps
                ));
                match mode {
                    "interrupt" => delivered[slot].0 = row.delivered_pps,
                    _ => delivered[slot].1 = row.delivered_pps,
                }
            }
        }
        Ok(delivered)
    }

    /// Seed 003's sleeps, [`SLEEP_SAMPLES`] of each call in each setting.
    pub(super) fn sleep(&mut self) -> Result<(), TestbedError> {
        self.say("seed 003: timing usleep(1) and nanosleep(1)");
        self.report.sleep = crate::sleep::measure(SLEEP_SAMPLES).map_err(failed)?;
        Ok(())
    }
}

/// How many sleeps of each call in each setting: enough for a 99th percentile.
const SLEEP_SAMPLES: usize = 2000;
