//! The comparisons of `polld bench design`: each step runs polld twice on the same
//! testbed, with the knob's default and with its alternative, under the step's load, and
//! turns what each side measured into [`DesignRow`]s.

use std::cell::Cell;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use polld_control::daemon::daemon_entry;
use polld_core::{IfCounters, Knobs, PollState};

use super::{DesignRow, Step};
use crate::demo::{measure, Forwarder, Load, Trial};
use crate::entries::{kern_entry, polld_values, split_dev_entry, value_of};
use crate::share::{ShareRow, ShareTrial, TrialRun};
use crate::{IpFamily, Testbed, TestbedError, UpOptions};

/// `kern.polling.user_frac` of every side: FreeBSD's default, and polld's.
const USER_FRAC: u32 = 50;

/// The light load of the latency and auto-mode steps, frames/s.
const LIGHT_RATE: &str = "10000";

/// What one side measured over its window (a [`TrialRun`] between two samples).
struct Window {
    share: ShareRow,
    seconds: f64,
    /// polld's CPU time over the window, all its threads, ns.
    process_ns: u64,
    /// How much each of polld's numeric entries grew over the window.
    deltas: Vec<(String, u64)>,
}

impl Window {
    /// polld's CPU over the window, percent of one CPU.
    fn cpu_percent(&self) -> f64 {
        self.process_ns as f64 / 1e9 / self.seconds * 100.0
    }

    /// Growth of entry `name` per second.
    fn per_sec(&self, name: &str) -> f64 {
        value_of(&self.deltas, name) as f64 / self.seconds
    }

    /// Growth of `dev.<if>.<leaf>`, summed over the interfaces.
    fn all_ifs(&self, leaf: &str) -> u64 {
        self.deltas
            .iter()
            .filter(|(n, _)| split_dev_entry(n).is_some_and(|(_, l)| l == leaf))
            .map(|(_, v)| v)
            .sum()
    }
}

/// The testbed, the polld binary and the windows every step runs with.
pub(super) struct Bench<'a> {
    tb: &'a Testbed,
    polld: &'a Path,
    dir: &'a Path,
    /// The (gen, fwd) CPUs.
    cpus: (usize, usize),
    warm_up: f64,
    window: f64,
    /// Conservation held in every polld run so far.
    conserved: Cell<bool>,
}

impl<'a> Bench<'a> {
    pub(super) fn new(
        tb: &'a Testbed,
        polld: &'a Path,
        dir: &'a Path,
        cpus: (usize, usize),
        warm_up: f64,
        window: f64,
    ) -> Bench<'a> {
        Bench {
            tb,
            polld,
            dir,
            cpus,
            warm_up,
            window,
            conserved: Cell::new(true),
        }
    }

    /// Whether conservation held in every polld run.
    pub(super) fn conserved(&self) -> bool {
        self.conserved.get()
    }

    /// Runs `step`'s comparison; a progress line per side to `progress`.
    pub(super) fn run(
        &self,
        step: Step,
        progress: &mut dyn Write,
    ) -> Result<Vec<DesignRow>, TestbedError> {
        let secs = self.window;
        Ok(match step {
            Step::QuietCycles => {
                let [d, a] = self.both(step, progress, |knobs| {
                    self.window_of(&self.trial("polling", None, false, knobs))
                })?;
                vec![
                    DesignRow::new(
                        step,
                        "polld CPU, idle, both interfaces polling (% of a CPU)".into(),
                        [d.cpu_percent(), a.cpu_percent()],
                    ),
                    DesignRow::new(
                        step,
                        "tick wakeups of the poll thread, idle (per s)".into(),
                        [d, a].map(|w| w.per_sec(daemon_entry::TICK_WAKEUPS)),
                    ),
                ]
            }
            Step::BurstMax => {
                let [d, a] = self.both(step, progress, |knobs| {
                    let trial = ShareTrial {
                        knobs,
                        ..ShareTrial::flood("polling", USER_FRAC, self.warm_up, self.window)
                    };
                    self.window_of(&trial)
                })?;
                let under = format!("flood, polling, user_frac {USER_FRAC}, competitor beside");
                vec![
                    DesignRow::new(
                        step,
                        format!("delivered, {under} (frames/s)"),
                        [d.share.delivered_pps, a.share.delivered_pps],
                    ),
                    DesignRow::new(
                        step,
                        format!("competitor's CPU, {under} (% of a CPU)"),
                        [d.share.competitor_percent, a.share.competitor_percent],
                    ),
                ]
            }
            Step::Looks => {
                let [d, a] = self.both(step, progress, |knobs| self.latency(knobs))?;
                let at = format!("{LIGHT_RATE}/s, polling, one way to polld sink");
                vec![
                    DesignRow::new(step, format!("latency p50, {at} (µs)"), [d.0, a.0]),
                    DesignRow::new(step, format!("latency p99, {at} (µs)"), [d.1, a.1]),
                ]
            }
            Step::AutoWindowTicks => {
                let [d, a] = self.both(step, progress, |knobs| {
                    self.window_of(&self.trial("auto", Some(LIGHT_RATE), false, knobs))
                })?;
                let switches = IfCounters::AUTO_SWITCHES.name;
                vec![DesignRow::new(
                    step,
                    format!("switches in {secs} s at {LIGHT_RATE}/s, auto mode (count)"),
                    [d, a].map(|w| w.all_ifs(switches) as f64),
                )]
            }
            Step::IdleWakeups => self.idle_wakeups(progress)?,
        })
    }

    /// `step`'s two sides: `side` run with no knob written (the default), then with the
    /// knob at its alternative.
    fn both<T>(
        &self,
        step: Step,
        progress: &mut dyn Write,
        side: impl Fn(&[(&str, &str)]) -> Result<T, TestbedError>,
    ) -> Result<[T; 2], TestbedError> {
        let name = kern_entry(step.knob());
        let alternative = step.alternative();
        let default = step.default_value();
        let say = |progress: &mut dyn Write, value: &str, which: &str| {
            let _ = writeln!(
                progress,
                "polld bench design: {name} = {value} ({which}), {} s ...",
                self.window
            );
        };
        say(progress, &default, "the default");
        let d = side(&[])?;
        say(progress, &alternative, "the alternative");
        let a = side(&[(name.as_str(), alternative.as_str())])?;
        Ok([d, a])
    }

    /// A trial in `mode` at `rate` (no `polld gen` without one), with or without the
    /// competitor, over the bench's windows.
    fn trial<'t>(
        &self,
        mode: &'t str,
        rate: Option<&'t str>,
        competitor: bool,
        knobs: &'t [(&'t str, &'t str)],
    ) -> ShareTrial<'t> {
        ShareTrial {
            rate,
            competitor,
            knobs,
            ..ShareTrial::flood(mode, USER_FRAC, self.warm_up, self.window)
        }
    }

    /// Runs `trial` and measures its window: its [`ShareRow`], polld's CPU time and the
    /// growth of all its entries.
    fn window_of(&self, trial: &ShareTrial) -> Result<Window, TestbedError> {
        let run = TrialRun::start(self.tb, self.polld, self.dir, self.cpus, trial)?;
        std::thread::sleep(Duration::from_secs_f64(trial.warm_up));
        let point = || -> Result<_, TestbedError> {
            let sample = run.sample()?;
            let ns = run.polld_process_ns();
            Ok((sample, ns, polld_values(run.socket(), "")?))
        };
        let (before, before_ns, before_values) = point()?;
        std::thread::sleep(Duration::from_secs_f64(trial.window));
        let (after, after_ns, after_values) = point()?;
        let seconds = after.at.duration_since(before.at).as_secs_f64();
        let share = run.finish(&before, &after)?;
        self.book(share.conserved);
        Ok(Window {
            share,
            seconds,
            process_ns: after_ns.saturating_sub(before_ns),
            deltas: after_values
                .into_iter()
                .map(|(n, v)| {
                    let grew = v.saturating_sub(value_of(&before_values, &n));
                    (n, grew)
                })
                .collect(),
        })
    }

    /// Notes one polld run's conservation.
    fn book(&self, conserved: bool) {
        if !conserved {
            self.conserved.set(false);
        }
    }

    /// The sink's one-way latency at [`LIGHT_RATE`] through polld polling with `knobs`:
    /// p50 and p99, µs.
    fn latency(&self, knobs: &[(&str, &str)]) -> Result<(f64, f64), TestbedError> {
        let trial = Trial {
            label: "polling".into(),
            forwarder: Forwarder::Polld {
                backend: "tap",
                mode: "polling",
                knobs,
            },
            load: Load::Frames {
                rate: LIGHT_RATE,
                sink: true,
                family: IpFamily::Ipv4,
            },
            duration: self.window,
        };
        let row = measure(self.tb, &UpOptions::default(), self.polld, self.dir, &trial)?;
        self.book(row.conserved != Some(false));
        let latency = row.latency.ok_or_else(|| {
            TestbedError::Failed("polld sink timed no frame through polld".into())
        })?;
        Ok((latency.p50_us, latency.p99_us))
    }

    /// `idle_wakeups` with `idle_poll` 1 on both sides, at half the rate polld forwards a
    /// flood in interrupt mode (measured first, in a window of its own).
    fn idle_wakeups(&self, progress: &mut dyn Write) -> Result<Vec<DesignRow>, TestbedError> {
        let step = Step::IdleWakeups;
        let _ = writeln!(
            progress,
            "polld bench design: the half load: a flood in interrupt mode, {} s ...",
            self.window
        );
        let flood = self.window_of(&self.trial("interrupt", Some("unlimited"), false, &[]))?;
        let half = ((flood.share.delivered_pps / 2.0) as u64)
            .max(1000)
            .to_string();
        let idle_poll = kern_entry(Knobs::IDLE_POLL.name);
        let [d, a] = self.both(step, progress, |knobs| {
            let mut all = vec![(idle_poll.as_str(), "1")];
            all.extend_from_slice(knobs);
            self.window_of(&self.trial("polling", Some(&half), false, &all))
        })?;
        let ns_per_packet = |w: &Window| {
            let frames = w.share.delivered_pps * w.seconds;
            if frames > 0.0 {
                w.process_ns as f64 / frames
            } else {
                0.0
            }
        };
        let at = format!("{half}/s (half of interrupt mode's flood), polling, idle_poll 1");
        let wakeups = kern_entry(PollState::IDLEPOLL_WAKEUPS.name);
        Ok(vec![
            DesignRow::new(
                step,
                format!("polld CPU per forwarded frame, {at} (ns)"),
                [ns_per_packet(&d), ns_per_packet(&a)],
            ),
            DesignRow::new(
                step,
                format!("idle poller wakeups, {at} (per s)"),
                [d.per_sec(&wakeups), a.per_sec(&wakeups)],
            ),
        ])
    }
}
