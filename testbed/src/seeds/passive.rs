//! Seed 003 on packets: what a reader that sleeps between reads costs against one that
//! polls actively, through a small queue.
//!
//! The reader is polld on tap0, whose queue (its `txqueuelen`, the frames the kernel holds
//! for the reader) is cut to [`SMALL_RING`] for the step. At [`LOAD`], one trial each,
//! `polld sink` (on gen's CPU: busy polling takes all of polld's) timing every frame one
//! way:
//! - `busy`: active polling, the seed's `pfcount -a`: the reader never sleeps;
//! - `polling` at [`MAX_HZ`], the highest rate polld's tick takes, without looks between
//!   the ticks (`kern.polling.looks` 0), as the passive reader;
//! - the passive reader: `polling` at the rate whose period is what `usleep(1)` lasted on
//!   this machine at the default timer slack (the `sleep` step's mean), so that between two
//!   reads it sleeps as long as the seed's `while (<no packet>) usleep(1)` does. A cycle
//!   drains the queue, so each sleep follows a read that found it empty. polld's tick runs
//!   `SCHED_FIFO`, whose timers no slack delays: the period is the sleep's mean, not its
//!   tail;
//! - `interrupt`: the seed's `pfring_poll()`, a reader asleep until a frame wakes it.
//!
//! Each row: delivered, the frames sent and those dropped at tap0's full queue (the
//! reader's loss, from the trial's ledger: the sink's own count of the lost needs gen's
//! end-of-run record, which that queue may drop too), the sink's one-way p50 and p99, and
//! polld's CPU. Conservation is booked on every trial.
//! The seed's second claim, that time-merging two adapters needs active polling, is
//! measured by the same readers in [`super::merge`].

use polld_core::knobs::MAX_HZ;
use polld_core::Knobs;

use super::plan::CURVE_USER_FRAC;
use super::report::PassiveRow;
use super::steps::Bench;
use crate::demo::{measure, Forwarder, Load, Trial};
use crate::entries::kern_entry;
use crate::placement::CpuPlan;
use crate::sleep::{Call, Setting, SleepRow};
use crate::{IpFamily, TestbedError, UpOptions};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// `polld gen --rate` of every trial: well below polling's knee on TAP (docs/measuring.md
/// §tb-knees), so that what is lost is the reader's sleep's, not the CPU's, and one the
/// sink takes beside gen on gen's CPU.
const LOAD: &str = "50k";

/// tap0's queue during the step, frames: fewer than arrive at [`LOAD`] while `usleep(1)`
/// sleeps at the default timer slack (50 kpps for 84 µs is 4.2 frames, docs/results/seeds.md).
const SMALL_RING: u32 = 4;

/// The rate of the passive reader's tick: one period per `usleep(1)` as it lasted at the
/// default slack, within the knob's range.
fn passive_hz(sleep: &[SleepRow]) -> Option<u32> {
    let usleep = sleep
        .iter()
        .find(|r| r.setting == Setting::DefaultSlack && r.call == Call::Usleep1)?;
    let hz = (1e6 / usleep.mean_us.max(1e-3)).round();
    Some(hz.clamp(f64::from(polld_core::knobs::MIN_HZ), f64::from(MAX_HZ)) as u32)
}

/// One reader of seed 003's tables: its label, polld's mode and, when polling, its hz.
pub(super) struct Reader {
    pub label: String,
    pub mode: &'static str,
    pub hz: Option<u32>,
}

/// The readers of seed 003's tables, `passive_hz` the passive reader's tick rate.
pub(super) fn readers(passive_hz: u32) -> [Reader; 4] {
    let reader = |label: String, mode, hz| Reader { label, mode, hz };
    [
        reader("busy: active polling".into(), "busy", None),
        reader(format!("polling at hz {MAX_HZ}"), "polling", Some(MAX_HZ)),
        reader(
            format!(
                "passive: a usleep(1) between reads ({:.0} us, polling at hz {passive_hz})",
                1e6 / f64::from(passive_hz)
            ),
            "polling",
            Some(passive_hz),
        ),
        reader("interrupt: asleep until woken".into(), "interrupt", None),
    ]
}

/// polld's knobs for a reader polling at `hz` (or not polling): `user_frac` as the
/// curve's, and no looks between the ticks, so that the reader sleeps a whole period
/// between reads.
pub(super) fn reader_knobs(hz: Option<u32>) -> Vec<(String, String)> {
    let mut knobs = vec![(
        kern_entry(Knobs::USER_FRAC.name),
        CURVE_USER_FRAC.to_string(),
    )];
    if let Some(hz) = hz {
        knobs.push((kern_entry(Knobs::HZ.name), hz.to_string()));
        knobs.push((kern_entry(Knobs::LOOKS.name), "0".into()));
    }
    knobs
}

impl Bench<'_> {
    /// The CPUs of seed 003's trials: the sink on gen's CPU, since a reader that polls
    /// actively takes all of its own, and a sink beside it would be what loses frames.
    pub(super) fn sink_beside_gen(&self) -> CpuPlan {
        let (gen, fwd) = self.cpus;
        CpuPlan {
            gen,
            fwd,
            sink: gen,
        }
    }

    /// Seed 003's packet table; the `sleep` step has run (its `usleep(1)` sets the passive
    /// reader's period).
    pub(super) fn passive(&mut self) -> Result<(), TestbedError> {
        let hz = passive_hz(&self.report.sleep)
            .ok_or_else(|| failed("seed 003's packets need the sleep step's usleep(1)".into()))?;
        let tap = self.tb.layout().veth0.clone();
        let queue = |len: &str| {
            polld_dev::netns::ip(&["-n", &tap.ns, "link", "set", &tap.name, "txqueuelen", len])
                .map_err(|e| failed(format!("txqueuelen of {}: {e}", tap.name)))
        };
        let shown = polld_dev::netns::ip(&["-n", &tap.ns, "-j", "link", "show", &tap.name])
            .map_err(|e| failed(format!("reading {}: {e}", tap.name)))?;
        let before = serde_json::from_str::<serde_json::Value>(&shown)
            .ok()
            .and_then(|v| v[0]["txqlen"].as_u64())
            .ok_or_else(|| {
                failed(format!(
                    "`ip -j link show {}` gave no txqlen: {shown}",
                    tap.name
                ))
            })?
            .to_string();
        queue(&SMALL_RING.to_string())?;
        let result = self.readers(hz);
        queue(&before)?;
        self.report.passive = result?;
        self.report.merge = self.merge(hz)?;
        Ok(())
    }

    fn readers(&mut self, passive_hz: u32) -> Result<Vec<PassiveRow>, TestbedError> {
        let options = UpOptions {
            cpus: self.sink_beside_gen(),
            ..UpOptions::default()
        };
        let mut rows = Vec::new();
        for Reader { label, mode, hz } in readers(passive_hz) {
            let reader = label;
            self.say(&format!(
                "seed 003: {reader}, polld gen --rate {LOAD} into a {SMALL_RING}-frame queue ..."
            ));
            let owned = reader_knobs(hz);
            let knobs: Vec<(&str, &str)> = owned
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let trial = Trial {
                label: reader.clone(),
                forwarder: Forwarder::Polld {
                    backend: "tap",
                    mode,
                    knobs: &knobs,
                },
                load: Load::Frames {
                    rate: LOAD,
                    sink: true,
                    family: IpFamily::Ipv4,
                },
                duration: self.timing.window.max(1.0),
            };
            let row = measure(self.tb, &options, self.polld, self.dir, &trial)?;
            self.book(&format!("seed 003 {reader}"), row.conserved != Some(false));
            let latency = row.latency.ok_or_else(|| {
                failed(format!(
                    "polld sink timed no frame through polld ({reader})"
                ))
            })?;
            let ledger = row.ledger.as_ref().ok_or_else(|| {
                failed(format!(
                    "no ledger of gen's frames through polld ({reader})"
                ))
            })?;
            let at_queue = format!("{}:", self.tb.layout().veth0.name);
            let lost_at_queue = ledger
                .lost
                .iter()
                .filter(|(hop, _)| hop.starts_with(&at_queue))
                .map(|(_, n)| n)
                .sum();
            rows.push(PassiveRow {
                reader,
                mode: mode.into(),
                hz,
                offered_pps: row.offered_pps,
                delivered_pps: row.delivered_pps,
                sent: ledger.sent,
                lost_at_queue,
                loss_percent: lost_at_queue as f64 / ledger.sent.max(1) as f64 * 100.0,
                p50_us: latency.p50_us,
                p99_us: latency.p99_us,
                polld_cpu_percent: row.polld_cpu_percent,
            });
            self.say(&format!(
                "seed 003: {}: lost {} at tap0, p99 {:.0} us",
                rows[rows.len() - 1].reader,
                lost_at_queue,
                latency.p99_us
            ));
        }
        Ok(rows)
    }
}

/// Seed 003's packet table.
pub(super) fn render(rows: &[PassiveRow]) -> String {
    let mut text = format!(
        "{:<62} {:>10} {:>11} {:>8} {:>8} {:>7} {:>9} {:>9} {:>10}\n",
        "reader", "offered/s", "delivered/s", "sent", "at tap0", "loss", "p50", "p99", "polld CPU"
    );
    for r in rows {
        text.push_str(&format!(
            "{:<62} {:>10.0} {:>11.0} {:>8} {:>8} {:>6.2}% {:>6.0} us {:>6.0} us {:>9.1}%\n",
            r.reader,
            r.offered_pps,
            r.delivered_pps,
            r.sent,
            r.lost_at_queue,
            r.loss_percent,
            r.p50_us,
            r.p99_us,
            r.polld_cpu_percent
        ));
    }
    text.push_str(&format!(
        "  polld gen --rate {LOAD} into tap0 with a {SMALL_RING}-frame queue (txqueuelen); sent: by gen (its summary); at tap0: dropped at tap0's full queue, the reader's loss (the ledger's), and loss: as a share of what gen sent; p50, p99: one way, gen to polld sink\n"
    ));
    text
}

/// Seed 003's verdict on packets: the passive reader against active polling, by what
/// each lost at tap0's queue and the sink's p99.
pub(super) fn finding(rows: &[PassiveRow]) -> Option<String> {
    let busy = rows.iter().find(|r| r.mode == "busy")?;
    let passive = rows.iter().find(|r| r.reader.starts_with("passive"))?;
    let worse = passive.p99_us > busy.p99_us || passive.lost_at_queue > busy.lost_at_queue;
    Some(format!(
        "Seed 003 on packets: the passive reader (a usleep(1) between reads) lost {} frames at tap0's queue with a p99 of {:.0} us at {:.1} % CPU, active polling {} with {:.0} us at {:.1} %: {}.",
        passive.lost_at_queue,
        passive.p99_us,
        passive.polld_cpu_percent,
        busy.lost_at_queue,
        busy.p99_us,
        busy.polld_cpu_percent,
        if worse {
            "sleeping between reads costs frames or latency, as the seed says"
        } else {
            "NOT reproduced (the passive reader lost no more and waited no longer)"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleep_row(setting: Setting, call: Call, mean_us: f64) -> SleepRow {
        SleepRow {
            setting,
            call,
            slack_ns: 0,
            samples: 1,
            mean_us,
            p50_us: mean_us,
            p99_us: mean_us,
            max_us: mean_us,
            frames_at_10g: 0.0,
        }
    }

    #[test]
    fn the_passive_readers_tick_lasts_what_usleep_1_did_at_the_default_slack() {
        let rows = [
            sleep_row(Setting::Fifo, Call::Usleep1, 16.0),
            sleep_row(Setting::DefaultSlack, Call::Nanosleep1, 80.0),
            sleep_row(Setting::DefaultSlack, Call::Usleep1, 84.3),
        ];
        assert_eq!(passive_hz(&rows), Some(11862));
        // A sleep shorter than the fastest tick's period: the fastest tick.
        assert_eq!(
            passive_hz(&[sleep_row(Setting::DefaultSlack, Call::Usleep1, 5.0)]),
            Some(MAX_HZ)
        );
        assert_eq!(passive_hz(&rows[..2]), None);
    }

    fn reader(reader: &str, mode: &str, lost_at_queue: u64, p99_us: f64) -> PassiveRow {
        PassiveRow {
            reader: reader.into(),
            mode: mode.into(),
            hz: None,
            offered_pps: 50_000.0,
            delivered_pps: 50_000.0,
            sent: 50_000,
            lost_at_queue,
            loss_percent: 0.0,
            p50_us: p99_us / 2.0,
            p99_us,
            polld_cpu_percent: 50.0,
        }
    }

    #[test]
    fn the_passive_reader_is_judged_against_busy_polling_by_its_queue_and_its_p99() {
        let busy = reader("busy: active polling", "busy", 0, 30.0);
        let lossy = reader("passive: a usleep(1)", "polling", 120, 30.0);
        let late = reader("passive: a usleep(1)", "polling", 0, 140.0);
        for passive in [lossy, late] {
            let line = finding(&[busy.clone(), passive]).unwrap();
            assert!(
                line.ends_with("costs frames or latency, as the seed says."),
                "{line}"
            );
        }
        let line = finding(&[busy.clone(), reader("passive: x", "polling", 0, 30.0)]).unwrap();
        assert!(line.contains("NOT reproduced"), "{line}");
        assert!(finding(&[busy]).is_none());
    }
}
