//! `polld bench seeds`: the seeds' experiments (docs/sources.md: Rizzo 2002, the polling
//! how-to, the nixCraft tutorial) on real traffic, on a TAP testbed of the bench's own, each
//! printed beside the seed's figure.
//!
//! Steps, each one or more [`crate::share`] trials (polld realtime on the fwd CPU, `polld
//! gen` on the gen CPU, both TAPs in the same mode):
//! - `curve`: delivered against offered load (gen's rate in steps, then unlimited) for
//!   interrupt, interrupt with `net.inet.ip.fastforwarding=0`, and polling; no competitor.
//!   Three rounds through the steps (one with `--quick`); each point is the round with the
//!   median delivered rate, so that one trial spoiled by other work on the machine does not
//!   make the best or the worst point. Then polling's plateau ([`crate::plateau`]): 25 more
//!   rounds at the loads above its peak and at its best, whose means its verdict compares.
//! - `table`: Rizzo's table from the curve's flooded points, one more flood polling with
//!   `fastforwarding=0`, 2 and 4 streams (more input TAPs, [`crate::streams`]) in both
//!   modes, and the receive CPU load from the `share` step.
//! - `screens`: `polld stat --once` in interrupt mode at a moderate rate, then
//!   `polld ifconfig tap0 polling` (and tap1) and `polld stat --once` again.
//! - `tcp`: iperf3 TCP from gen to sink through polld, interrupt against polling: unlimited,
//!   then at a fixed bitrate both modes carry (a quarter of the slower mode's unlimited
//!   rate, as the seed's 10 Mbit/s link was well under its box's capacity), with the CPU of
//!   every thread on the path.
//! - `share`: the CPU-bound competitor's share at user_frac 10, 50 and 90, and in
//!   interrupt mode, under a flood.
//!
//! `--devices vm` runs the curve and the share steps on the VM testbed instead: polld in a
//! qemu guest between two virtio-net NICs, a polld of its own for each trial, `polld gen`
//! in the host's gen namespace, the competitor on the guest's vCPU, the loads scaled to
//! what the guest forwards, the guest's device work (`ksoftirqd/0`) at interrupt
//! priority as FreeBSD's ([`crate::vm::demo::trial`]).
//!
//! Every trial checks conservation on every interface from polld's final counters; the
//! bench fails if one does not hold. The figures go to `--out` as SVG ([`crate::plot`]).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::plateau::{self, Plateau};
use crate::plot::{write_charts, LineChart, Series};
use crate::share::{measure_share, Sample, ShareRow, ShareTrial, TrialRun};
use crate::streams::ExtraStream;
use crate::{Devices, Role, Testbed, TestbedError};

/// `polld bench seeds` options.
#[derive(clap::Args, Debug, Clone)]
pub struct SeedsArgs {
    /// Shorter windows, four load steps, one round of the curve instead of three and two
    /// rounds of polling's plateau instead of 25.
    #[arg(long)]
    pub quick: bool,
    /// Run only these steps (comma-separated); all of them by default. `table` also runs
    /// `curve` and `share`, whose figures it shows.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub steps: Vec<Step>,
    /// Directory the SVG plots are written to.
    #[arg(long, default_value = "target/bench-seeds")]
    pub out: PathBuf,
    /// Namespace prefix of the bench's own TAP testbed (`{prefix}gen`, ...).
    #[arg(long, default_value = "bseeds", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print the results as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
    /// The testbed: TAPs only polld joins, or a qemu guest with polld between its two
    /// virtio-net NICs (a driver, its NAPI and its interrupts), where the bench runs the
    /// curve and the share steps (`polld demo --devices vm` has the guest's screens and
    /// TCP).
    #[arg(long, value_enum, default_value = "tap")]
    pub devices: SeedsDevices,
}

/// Where `polld bench seeds` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum SeedsDevices {
    /// The TAP testbed: polld on the host between two TAPs, polld gen on another CPU.
    Tap,
    /// The VM testbed: polld in a 1-vCPU qemu guest between two virtio-net NICs.
    Vm,
}

impl SeedsDevices {
    fn devices(self) -> Devices {
        match self {
            SeedsDevices::Tap => Devices::Tap,
            SeedsDevices::Vm => Devices::Vm,
        }
    }

    /// The steps that run here.
    fn steps(self) -> &'static [Step] {
        match self {
            SeedsDevices::Tap => &[
                Step::Curve,
                Step::Table,
                Step::Screens,
                Step::Tcp,
                Step::Share,
            ],
            SeedsDevices::Vm => &[Step::Curve, Step::Share],
        }
    }
}

/// One experiment of the bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    Curve,
    Table,
    Screens,
    Tcp,
    Share,
}

/// The seeds' own figures, beside which polld's are printed.
mod seed {
    /// Rizzo 2002, 750 MHz Athlon, 100 Mbit cards, minimum-size frames (148 kpps a stream):
    /// (test, interrupt, polling, unit).
    pub const TABLE: [(&str, &str, &str); 6] = [
        ("Transmit", "138 kpps", "148 kpps"),
        ("Rx CPU load", "100 %", "40 %"),
        ("Forwarding 1 stream", "143 kpps", "148 kpps"),
        (
            "Forwarding 1 stream, no fast forwarding",
            "110 pps",
            "148 kpps",
        ),
        ("Forwarding 2 streams", "0", "180 kpps"),
        ("Forwarding 4 streams", "0", "185 kpps"),
    ];
    /// Rizzo 2002 on the curve: without fast forwarding, interrupts sustain at most
    /// 120 kpps, "above that load the forwarding speed rapidly decays to almost 0".
    pub const CURVE: &str = "interrupts without fast forwarding: at most 120 kpps, then decaying to almost 0 (110 pps at 148 kpps offered); polling: 148 kpps, \"roughly remains there when the incoming traffic increases\"";
    /// The polling how-to's systat screens (em3 at about 7 kpps of interrupts).
    pub const SCREENS: &str = "interrupts: em3 7133/s, 21.5 % Intr, 76.6 % idle; polling: em3 0/s, 0.8 % Intr, 96.2 % idle";
    /// The nixCraft tutorial, over a 10 Mbit/s metro Ethernet link: (mode, Mbit/s, CPU load).
    // 6.28 is the tutorial's Mbit/s, not 2π.
    #[allow(clippy::approx_constant)]
    pub const TCP: [(&str, f64, f64); 2] = [("interrupt", 6.28, 73.0), ("polling", 8.87, 34.0)];
}

/// How long each trial runs, by `--quick`.
#[derive(Clone, Copy, Debug)]
struct Timing {
    warm_up: f64,
    window: f64,
    /// `polld gen --rate` of the curve's steps, the last one the flood.
    rates: &'static [&'static str],
    /// Trials per step of the curve, each round through every step in turn; a point is
    /// the round with the median delivered rate.
    rounds: usize,
    /// Rounds of polling's trials at the loads above its peak and its best
    /// ([`crate::plateau`]): what the verdict on its plateau is taken from.
    plateau_rounds: usize,
    /// iperf3's seconds.
    tcp_secs: u32,
}

const FULL: Timing = Timing {
    warm_up: 0.5,
    window: 1.5,
    // Dense around the knees (interrupts without fastforwarding peak between 100k and
    // 250k, polling between 250k and 500k), one flood step per doubling above them: a
    // generator that cannot reach a rate only repeats the flood.
    rates: &[
        "100k",
        "150k",
        "200k",
        "250k",
        "350k",
        "500k",
        "1M",
        "2M",
        "unlimited",
    ],
    rounds: 3,
    // With trials whose standard deviation is 7 % (a shared machine), the means of 25
    // trials at each of three loads put a flat plateau at 95 % or more of its best in 97 %
    // of runs (20 trials: 93 %; resampling 61 trials measured at 350k, 500k and the flood).
    plateau_rounds: 25,
    tcp_secs: 3,
};

const QUICK: Timing = Timing {
    warm_up: 0.3,
    window: 0.7,
    // 50k and 100k: below every configuration's knee, where interrupts without
    // fastforwarding have their best (on a loaded machine 200k is already past it: it
    // delivered 54k to 107k there, and a best taken there would make the flood's share
    // of it mean nothing).
    rates: &["50k", "100k", "200k", "unlimited"],
    rounds: 1,
    plateau_rounds: 2,
    tcp_secs: 1,
};

/// In a guest under software emulation, which forwards about a thirtieth of what the host
/// does: steps up to its knees (interrupt mode carried 10k and about 10k flooded, polling
/// at user_frac 10 carried 6k and about 8k at 10k: docs/results/seeds-vm.md), a longer
/// window for the guest's slower clock of events, and a second of warm-up (a polld that
/// polls gets more to take its queue from the kernel: `crate::vm::demo`'s `TAKEOVER_S`).
const FULL_VM: Timing = Timing {
    warm_up: 1.0,
    window: 3.0,
    rates: &["1k", "2k", "4k", "6k", "10k", "unlimited"],
    rounds: 3,
    plateau_rounds: 10,
    tcp_secs: 3,
};

const QUICK_VM: Timing = Timing {
    window: 2.0,
    rates: &["1k", "4k", "unlimited"],
    rounds: 1,
    plateau_rounds: 2,
    ..FULL_VM
};

/// The curve's and the table's polling trials: a router box (seed 000: "low values ...
/// useful e.g. in a router box") with no user work to leave room for.
const CURVE_USER_FRAC: u32 = 10;
/// The `screens`, `tcp` and `share`-derived Rx CPU rows: FreeBSD's default.
const DEFAULT_USER_FRAC: u32 = 50;

/// Knobs a trial sets after its own.
type Knobs = &'static [(&'static str, &'static str)];

const NO_FASTFORWARDING: [(&str, &str); 1] = [("net.inet.ip.fastforwarding", "0")];

/// FreeBSD's knob defaults (`profile = "freebsd"`), where the seed ran them and the
/// rate stays below their ceiling (hz x burst_max, 150 kpps): the how-to's screens. The
/// floods (curve, table, share) run polld's defaults: FreeBSD's would cap polling there.
const FREEBSD: [(&str, &str); 1] = [("profile", "freebsd")];

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
    fn of_rounds(name: &str, trials: Vec<Vec<ShareRow>>) -> CurveSeries {
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

/// The machine the bench ran on.
pub use crate::results::Machine;

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
    /// The curve's livelock, if the curve ran: the bench fails when it did not reproduce.
    pub livelock: Option<Livelock>,
    /// Sentences decided by the numbers above.
    pub findings: Vec<String>,
    pub svgs: Vec<PathBuf>,
    /// Trials run, and those whose counters did not add up.
    pub trials: usize,
    pub unconserved: Vec<String>,
}

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// What the steps share.
struct Bench<'a> {
    tb: &'a Testbed,
    polld: &'a Path,
    dir: &'a Path,
    cpus: (usize, usize),
    timing: Timing,
    progress: &'a mut dyn Write,
    report: SeedsReport,
}

impl Bench<'_> {
    fn say(&mut self, line: &str) {
        let _ = writeln!(self.progress, "polld bench seeds: {line}");
    }

    /// Runs one trial and books its conservation.
    fn trial(&mut self, label: &str, trial: &ShareTrial) -> Result<ShareRow, TestbedError> {
        let row = match self.tb.layout().devices {
            Devices::Vm => crate::vm::demo::trial(self.tb, self.polld, trial)?,
            _ => measure_share(self.tb, self.polld, self.dir, self.cpus, trial)?,
        };
        self.book(label, row.conserved);
        Ok(row)
    }

    fn book(&mut self, label: &str, conserved: bool) {
        self.report.trials += 1;
        if !conserved {
            self.report.unconserved.push(label.to_string());
        }
    }

    fn flood_trial<'t>(&self, mode: &'t str, user_frac: u32) -> ShareTrial<'t> {
        ShareTrial::flood(mode, user_frac, self.timing.warm_up, self.timing.window)
    }

    fn curve(&mut self) -> Result<(), TestbedError> {
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
    fn curve_trial(
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

    fn share(&mut self) -> Result<(), TestbedError> {
        for (mode, user_frac) in [
            ("polling", 10),
            ("polling", 50),
            ("polling", 90),
            ("interrupt", DEFAULT_USER_FRAC),
        ] {
            let beside = match self.tb.layout().devices {
                Devices::Vm => "on the guest's vCPU".to_string(),
                _ => format!("on CPU{}", self.cpus.1),
            };
            self.say(&format!(
                "share: {mode}, user_frac {user_frac}, flood and a competitor {beside} ..."
            ));
            let row = self.trial(
                &format!("share {mode} {user_frac}"),
                &ShareTrial {
                    warm_up: self.timing.warm_up.max(1.0),
                    ..self.flood_trial(mode, user_frac)
                },
            )?;
            self.say(&format!(
                "share: {mode}, user_frac {user_frac}: competitor {:.1} %, polld {:.1} %",
                row.competitor_percent, row.polld_cpu_percent
            ));
            self.report.share.push(row);
        }
        Ok(())
    }

    /// Seed 000's table, from the curve's and the share step's trials and one more.
    fn table(&mut self) -> Result<(), TestbedError> {
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

    /// Seed 001: `polld stat --once` before and after `polld ifconfig tap0 polling`.
    fn screens(&mut self) -> Result<(), TestbedError> {
        self.say(
            "screens: interrupt mode, polld gen at 100k, then polld ifconfig tap0 polling ...",
        );
        let trial = ShareTrial {
            rate: Some("100k"),
            competitor: false,
            knobs: &FREEBSD,
            warm_up: 0.0,
            // gen runs this much longer than the warm-up: both screens fit.
            window: 8.0,
            ..self.flood_trial("interrupt", DEFAULT_USER_FRAC)
        };
        let run = TrialRun::start(self.tb, self.polld, self.dir, self.cpus, &trial)?;
        std::thread::sleep(Duration::from_secs_f64(0.5));
        let before = run.sample()?;
        let interrupt = self.screen(&run, "interrupt")?;
        for iface in [&self.tb.layout().veth1.name, &self.tb.layout().veth2.name] {
            self.polld_command(&run, &["ifconfig", iface, "polling"])?;
        }
        std::thread::sleep(Duration::from_secs_f64(0.5));
        let polling = self.screen(&run, "polling")?;
        let after = run.sample()?;
        let row = run.finish(&before, &after)?;
        self.book("screens", row.conserved);
        self.report.screens = vec![interrupt, polling];
        Ok(())
    }

    /// Runs `polld COMMAND --socket S ARGS` and returns its standard output. (The socket
    /// comes first: `ifconfig` takes everything after the interface as its actions.)
    fn polld_command(&self, run: &TrialRun, args: &[&str]) -> Result<String, TestbedError> {
        let out = std::process::Command::new(self.polld)
            .arg(args[0])
            .arg("--socket")
            .arg(run.socket())
            .args(&args[1..])
            .output()
            .map_err(|e| failed(format!("polld {}: {e}", args.join(" "))))?;
        if !out.status.success() {
            return Err(failed(format!(
                "polld {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn screen(&mut self, run: &TrialRun, mode: &str) -> Result<Screen, TestbedError> {
        let text = self.polld_command(run, &["stat", "--once", "-w", "1"])?;
        let tap0 = &self.tb.layout().veth1.name;
        let (interrupts_per_sec, idle_percent, polld_thread_percent) = parse_screen(&text, tap0)
            .ok_or_else(|| {
                failed(format!(
                    "polld stat --once: no {tap0} row, idle bar or polld thread figure in\n{text}"
                ))
            })?;
        self.say(&format!(
            "screens: {mode}: {tap0} {interrupts_per_sec:.0} interrupts/s, idle {idle_percent:.1} %, polld thread {polld_thread_percent:.1} %"
        ));
        Ok(Screen {
            mode: mode.into(),
            interrupts_per_sec,
            idle_percent,
            polld_thread_percent,
            text,
        })
    }

    /// Seed 002: iperf3 TCP from gen to sink through polld, unlimited, then at a bitrate
    /// both modes carry.
    fn tcp(&mut self) -> Result<(), TestbedError> {
        for mode in ["interrupt", "polling"] {
            self.tcp_run(mode, None)?;
        }
        // A quarter of the slower mode's rate, whole tens of Mbit/s: both carry it with CPU
        // to spare, as the seed's box did its 10 Mbit/s link.
        let slower = self
            .report
            .tcp
            .iter()
            .map(|r| r.mbit_per_sec)
            .fold(f64::INFINITY, f64::min);
        let target = ((slower / 4.0 / 10.0).floor() * 10.0).max(10.0);
        for mode in ["interrupt", "polling"] {
            self.tcp_run(mode, Some(target))?;
        }
        Ok(())
    }

    /// One iperf3 transfer through polld in `mode`, at `target` Mbit/s or unlimited.
    fn tcp_run(&mut self, mode: &str, target: Option<f64>) -> Result<(), TestbedError> {
        let rate = target.map_or("unlimited".to_string(), |t| format!("{t:.0} Mbit/s"));
        self.say(&format!(
            "tcp: iperf3 {rate} for {} s through polld in {mode} mode ...",
            self.timing.tcp_secs
        ));
        let trial = ShareTrial {
            rate: None,
            competitor: false,
            ..self.flood_trial(mode, DEFAULT_USER_FRAC)
        };
        let run = TrialRun::start(self.tb, self.polld, self.dir, self.cpus, &trial)?;
        let transfer = self.iperf3(&run, target)?;
        let row = run.finish(&transfer.before, &transfer.after)?;
        self.book(&format!("tcp {mode} {rate}"), row.conserved);
        let tcp = TcpRow {
            mode: mode.into(),
            target_mbit: target,
            mbit_per_sec: transfer.mbit_per_sec,
            polld_cpu_percent: row.polld_cpu_percent,
            path_cpu_percent: transfer.path_cpu_percent,
            interrupts_per_sec: row.interrupts_per_sec,
            conserved: row.conserved,
        };
        self.say(&format!(
            "tcp: {mode} at {rate}: {:.0} Mbit/s, polld {:.1} % of CPU{}, the path {:.1} % of a CPU",
            tcp.mbit_per_sec, tcp.polld_cpu_percent, self.cpus.1, tcp.path_cpu_percent
        ));
        self.report.tcp.push(tcp);
        Ok(())
    }

    /// One iperf3 TCP transfer at `target` Mbit/s (unlimited: `None`), with samples around
    /// it and the CPU of every thread on the path.
    fn iperf3(&self, run: &TrialRun, target: Option<f64>) -> Result<Transfer, TestbedError> {
        let layout = self.tb.layout();
        // The first frame to polld's address makes gen's kernel resolve it.
        let _ = self
            .tb
            .command_in(Role::Gen, None, "ping")?
            .args([
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "1",
                &layout.veth3.addr.to_string(),
            ])
            .output();
        let mut server = self
            .tb
            .command_in(Role::Sink, None, "iperf3")?
            .args(["-s", "-1", "-p", "5399"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting iperf3 -s in {}: {e}", layout.sink_ns)))?;
        std::thread::sleep(Duration::from_millis(300));
        let mut client = self
            .tb
            .command_ahead_in(Role::Gen, Some(self.cpus.0), "iperf3")?;
        client.args([
            "-c",
            &layout.veth3.addr.to_string(),
            "-p",
            "5399",
            "-J",
            "-t",
            &self.timing.tcp_secs.to_string(),
        ]);
        if let Some(mbit) = target {
            client.args(["-b", &format!("{mbit:.0}M")]);
        }
        let before = run.sample()?;
        let kernel_before = run.polld_process_ns() + ksoftirqd_ns();
        let out = client.output();
        let after = run.sample()?;
        let kernel_after = run.polld_process_ns() + ksoftirqd_ns();
        let _ = server.kill();
        let _ = server.wait();
        let out = out.map_err(|e| failed(format!("iperf3 -c in {}: {e}", layout.gen_ns)))?;
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let bits = report["end"]["sum_received"]["bits_per_second"].as_f64();
        let iperf_cpu = &report["end"]["cpu_utilization_percent"];
        let iperf_percent = iperf_cpu["host_total"].as_f64().unwrap_or(0.0)
            + iperf_cpu["remote_total"].as_f64().unwrap_or(0.0);
        let wall_ns = after.at.duration_since(before.at).as_nanos().max(1) as f64;
        let path_cpu_percent =
            iperf_percent + kernel_after.saturating_sub(kernel_before) as f64 * 100.0 / wall_ns;
        match bits {
            Some(bits) if out.status.success() => Ok(Transfer {
                mbit_per_sec: bits / 1e6,
                path_cpu_percent,
                before,
                after,
            }),
            _ => Err(failed(format!(
                "iperf3 TCP through polld failed: {} {}",
                report["error"],
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }
}

/// One iperf3 transfer: its rate, the CPU of every thread on its path, and the trial's
/// samples around it.
struct Transfer {
    mbit_per_sec: f64,
    path_cpu_percent: f64,
    before: Sample,
    after: Sample,
}

/// The CPU time of the ksoftirqd threads so far, ns: the kernel's packet work that ran in
/// no process's context.
fn ksoftirqd_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with("ksoftirqd/"))
        })
        .filter_map(polld_dev::kernel_rx::thread_cpu_ns)
        .sum()
}

/// tap0's interrupts/s, the idle percent and polld's thread percent from a
/// `polld stat --once` screen.
fn parse_screen(text: &str, iface: &str) -> Option<(f64, f64, f64)> {
    // The interface table's columns are right-aligned under their headings: polld's own
    // wakeups are the figure that ends where `intr/s` ends.
    let header = text.lines().find(|l| l.starts_with("interface "))?;
    let end = header.find(" intr/s")? + " intr/s".len();
    let intr = text.lines().find_map(|l| {
        if l.split_whitespace().next() != Some(iface) || l.len() < end {
            return None;
        }
        l[..end].split_whitespace().last()?.parse::<f64>().ok()
    })?;
    let idle = text.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix("idle ")?;
        rest.split_whitespace()
            .next()?
            .strip_suffix('%')?
            .parse::<f64>()
            .ok()
    })?;
    let thread = text.lines().find_map(|l| {
        let rest = l.split_once("polld thread")?.1;
        rest.split_whitespace()
            .next()?
            .strip_suffix('%')?
            .parse::<f64>()
            .ok()
    })?;
    Some((intr, idle, thread))
}

/// Runs the bench; `polld` is the binary the trials run. Results go to `out`, a
/// progress line per step to `progress`.
pub fn run_seeds(
    args: &SeedsArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<SeedsReport, TestbedError> {
    let here = args.devices.steps();
    let mut steps = if args.steps.is_empty() {
        here.to_vec()
    } else {
        args.steps.clone()
    };
    if let Some(step) = steps.iter().find(|s| !here.contains(s)) {
        let name = |s: &Step| format!("{s:?}").to_lowercase();
        return Err(failed(format!(
            "`polld bench seeds --devices {}` runs {}, not {}: `polld demo --devices vm` has the guest's screens and TCP",
            format!("{:?}", args.devices).to_lowercase(),
            here.iter().map(name).collect::<Vec<_>>().join(" and "),
            name(step)
        )));
    }
    if steps.contains(&Step::Table) {
        steps.extend([Step::Curve, Step::Share]);
    }
    let timing = match (args.devices, args.quick) {
        (SeedsDevices::Tap, false) => FULL,
        (SeedsDevices::Tap, true) => QUICK,
        (SeedsDevices::Vm, false) => FULL_VM,
        (SeedsDevices::Vm, true) => QUICK_VM,
    };
    // On the VM testbed the guest runs this same polld.
    let vm = crate::VmOptions {
        polld: polld.to_path_buf(),
        accel: crate::Accel::Auto,
    };
    let mut report = crate::share::on_own_testbed(
        "seeds",
        &args.prefix,
        args.devices.devices(),
        &vm,
        progress,
        |tb, dir, cpus, progress| {
            let testbed = match &tb.report().guest {
                Some(g) => format!(
                    "VM testbed: polld in a qemu guest ({}, kernel {}, 1 vCPU) between two virtio-net NICs, polld gen in the host's gen namespace; the guest's ksoftirqd/0 at {} (SCHED_FIFO {}, above polld)",
                    g.accel,
                    g.kernel,
                    crate::vm::guest::DeviceWork::InterruptPriority.name(),
                    crate::vm::guest::INTERRUPT_PRIORITY
                ),
                None => format!(
                    "TAP testbed: polld realtime on CPU{}, polld gen on CPU{}",
                    cpus.1, cpus.0
                ),
            };
            let mut bench = Bench {
                tb,
                polld,
                dir,
                cpus,
                timing,
                progress,
                report: SeedsReport {
                    machine: Some(Machine::this()),
                    testbed,
                    quick: args.quick,
                    ..SeedsReport::default()
                },
            };
            // In this order: the table reads the curve's and the share step's trials.
            for step in [
                Step::Curve,
                Step::Share,
                Step::Table,
                Step::Screens,
                Step::Tcp,
            ] {
                if !steps.contains(&step) {
                    continue;
                }
                match step {
                    Step::Curve => bench.curve()?,
                    Step::Share => bench.share()?,
                    Step::Table => bench.table()?,
                    Step::Screens => bench.screens()?,
                    Step::Tcp => bench.tcp()?,
                }
            }
            Ok(bench.report)
        },
    )?;
    report.livelock = Livelock::of(&report.curve);
    report.findings = findings(&report);
    report.svgs = write_plots(&report, &args.out)?;
    crate::share::print_report(&report, args.json, out, write_text);
    Ok(report)
}

impl SeedsReport {
    /// Whether its trials ran in the guest: their rows carry its `ksoftirqd/0`.
    fn in_guest(&self) -> bool {
        let curve = self.curve.iter().flat_map(|s| &s.points);
        curve
            .chain(&self.share)
            .any(|r| r.ksoftirqd_percent.is_some())
    }

    /// The bench's verdict, once its report is printed (and its results page written): an
    /// error when the livelock did not reproduce, polling's plateau declined beyond the
    /// machine's noise ([`crate::plateau::Holding::declines`]), or a trial's counters did
    /// not add up.
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

    fn of(curve: &[CurveSeries]) -> Option<Livelock> {
        let s = curve
            .iter()
            .find(|s| s.name == "interrupt, fastforwarding=0")?;
        let best = s
            .points
            .iter()
            .max_by(|a, b| a.delivered_pps.total_cmp(&b.delivered_pps))?;
        let flooded = s.points.last()?;
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

fn findings(report: &SeedsReport) -> Vec<String> {
    let mut lines = curve_findings(&report.curve, report.plateau.as_ref());
    for r in &report.share {
        let line = match r.mode.as_str() {
            "interrupt" => format!(
                "Interrupt mode under a flood: the competitor got {:.1} % ({}).",
                r.competitor_percent,
                if r.competitor_percent < 15.0 {
                    "under 15 %: starved"
                } else {
                    "NOT under 15 %"
                }
            ),
            _ => format!(
                "Polling, user_frac {}: the competitor got {:.1} % ({}).",
                r.user_frac,
                r.competitor_percent,
                if (r.competitor_percent - f64::from(r.user_frac)).abs() <= 5.0 {
                    "within 5 points"
                } else {
                    "NOT within 5 points"
                }
            ),
        };
        lines.push(line);
    }
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

/// The charts of the steps that ran, as SVG files in `dir`.
fn write_plots(report: &SeedsReport, dir: &Path) -> Result<Vec<PathBuf>, TestbedError> {
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
                x_label: "kern.polling.user_frac".into(),
                y_label: "competitor (% of the CPU)".into(),
                series,
            },
        ));
    }
    write_charts(dir, charts)
}

fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if unit == "%" => format!("{v:.1} %"),
        // Under 1 kpps in pps, as the seed's "110 pps".
        Some(v) if unit == "kpps" && v < 1.0 => format!("{:.0} pps", v * 1e3),
        Some(v) => format!("{v:.0} {unit}"),
        None => "-".into(),
    }
}

fn write_text(report: &SeedsReport, out: &mut dyn Write) {
    if let Some(m) = &report.machine {
        let _ = writeln!(
            out,
            "polld bench seeds{} on {} CPUs, {}, kernel {}; {}",
            if report.quick { " --quick" } else { "" },
            m.cpus,
            m.cpu_model,
            m.kernel,
            report.testbed
        );
    }
    if !report.table.is_empty() {
        let _ = writeln!(out, "\nSeed 000 (Rizzo 2002): polld on TAP beside the seed's 750 MHz Athlon with 100 Mbit cards");
        let _ = writeln!(
            out,
            "{:<42} {:>12} {:>12} {:>7} | {:>10} {:>10}",
            "test", "interrupt", "polling", "p/i", "seed intr", "seed poll"
        );
        for r in &report.table {
            let ratio = match (r.interrupt, r.polling) {
                (Some(i), Some(p)) if i > 0.0 => format!("{:.2}", p / i),
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "{:<42} {:>12} {:>12} {:>7} | {:>10} {:>10}",
                r.test,
                opt(r.interrupt, &r.unit),
                opt(r.polling, &r.unit),
                ratio,
                r.seed_interrupt,
                r.seed_polling
            );
        }
        for (i, r) in report.table.iter().enumerate() {
            let _ = writeln!(out, "  ({}) {}: {}", i + 1, r.test, r.note);
        }
    }
    if !report.curve.is_empty() {
        let _ = writeln!(
            out,
            "\nSeed 000's curve: delivered against offered (frames/s); seed: {}",
            seed::CURVE
        );
        if report
            .curve
            .iter()
            .any(|s| s.rounds.iter().any(|r| r.len() > 1))
        {
            let _ = writeln!(
                out,
                "Each point is the trial with the median delivered rate of its rounds (rounds: every trial's delivered, thousands/s, in the order they ran)."
            );
        }
        let softirq = report.in_guest();
        let _ = writeln!(
            out,
            "{:<30} {:>11} {:>12} {:>10}{} {:>13}  rounds",
            "configuration",
            "offered/s",
            "delivered/s",
            "polld CPU",
            ksoftirqd_heading(softirq),
            "interrupts/s"
        );
        for s in &report.curve {
            for (p, rounds) in s.points.iter().zip(&s.rounds) {
                let rounds: Vec<String> =
                    rounds.iter().map(|d| format!("{:.0}", d / 1e3)).collect();
                let _ = writeln!(
                    out,
                    "{:<30} {:>11.0} {:>12.0} {:>9.1}%{} {:>13.0}  {}",
                    s.name,
                    p.offered_pps,
                    p.delivered_pps,
                    p.polld_cpu_percent,
                    ksoftirqd_cell(p, softirq),
                    p.interrupts_per_sec,
                    rounds.join("/")
                );
            }
        }
    }
    if let Some(p) = report.plateau.as_ref().filter(|p| !p.loads.is_empty()) {
        let _ = writeln!(
            out,
            "\nPolling above its peak: {} more rounds of trials at each load above it and at its best, the loads polld gen could not reach as one (unlimited); each load's mean, its standard deviation (percent of the mean) and its range.\n{}",
            p.rounds,
            p.table().trim_end()
        );
    }
    if !report.screens.is_empty() {
        let _ = writeln!(
            out,
            "\nSeed 001 (the polling how-to's systat screens); seed: {}",
            seed::SCREENS
        );
        for s in &report.screens {
            let _ = writeln!(
                out,
                "--- polld stat --once, tap0 and tap1 in {} mode ---\n{}",
                s.mode,
                s.text.trim_end()
            );
        }
    }
    if !report.tcp.is_empty() {
        let _ = writeln!(out, "\nSeed 002 (the nixCraft tutorial: iperf TCP through the box over a 10 Mbit/s link; polling at user_frac 50, idle_poll 0, as its sysctl listing)");
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>9} {:>10} {:>9} {:>13} | {:>10} {:>9}",
            "mode",
            "-b",
            "Mbit/s",
            "polld CPU",
            "path CPU",
            "interrupts/s",
            "seed Mbit/s",
            "seed CPU"
        );
        for r in &report.tcp {
            let (_, seed_mbit, seed_cpu) = seed::TCP
                .iter()
                .find(|(m, _, _)| *m == r.mode)
                .copied()
                .unwrap_or(("", 0.0, 0.0));
            let target = r
                .target_mbit
                .map_or("unlimited".to_string(), |t| format!("{t:.0}M"));
            let _ = writeln!(
                out,
                "{:<10} {:>8} {:>9.0} {:>9.1}% {:>8.1}% {:>13.0} | {:>10.2} {:>8.0}%",
                r.mode,
                target,
                r.mbit_per_sec,
                r.polld_cpu_percent,
                r.path_cpu_percent,
                r.interrupts_per_sec,
                seed_mbit,
                seed_cpu
            );
        }
        let _ = writeln!(
            out,
            "  path CPU: both iperf3s, all of polld's threads and ksoftirqd, percent of one CPU"
        );
        let seed_per_mbit = |i: usize| seed::TCP[i].2 / seed::TCP[i].1;
        for target in [None, report.tcp.iter().find_map(|r| r.target_mbit)] {
            let rows: Vec<&TcpRow> = report
                .tcp
                .iter()
                .filter(|r| r.target_mbit == target)
                .collect();
            let (Some(i), Some(p)) = (
                rows.iter().find(|r| r.mode == "interrupt"),
                rows.iter().find(|r| r.mode == "polling"),
            ) else {
                continue;
            };
            let per_mbit = |r: &TcpRow| r.path_cpu_percent / r.mbit_per_sec.max(1e-9);
            let label = target.map_or("unlimited".to_string(), |t| format!("at {t:.0} Mbit/s"));
            let _ = writeln!(
                out,
                "polling/interrupt {label}: throughput {:.2}x (seed {:.2}x), polld CPU {:.2}x, path CPU per Mbit/s {:.2}x (seed's CPU per Mbit/s {:.2}x)",
                p.mbit_per_sec / i.mbit_per_sec.max(1e-9),
                seed::TCP[1].1 / seed::TCP[0].1,
                p.polld_cpu_percent / i.polld_cpu_percent.max(1e-9),
                per_mbit(p) / per_mbit(i).max(1e-9),
                seed_per_mbit(1) / seed_per_mbit(0)
            );
        }
    }
    if !report.share.is_empty() {
        let _ = writeln!(out, "\nThe promise: a CPU-bound competitor on polld's CPU under a flood (seed 000: user_frac is the CPU share left to userland)");
        let softirq = report.in_guest();
        let _ = writeln!(
            out,
            "{:<22} {:>11} {:>12} {:>10} {:>11}{}",
            "polld mode",
            "offered/s",
            "delivered/s",
            "polld CPU",
            "competitor",
            ksoftirqd_heading(softirq)
        );
        for r in &report.share {
            let label = match r.mode.as_str() {
                "polling" => format!("polling, user_frac {}", r.user_frac),
                other => other.to_string(),
            };
            let _ = writeln!(
                out,
                "{:<22} {:>11.0} {:>12.0} {:>9.1}% {:>10.1}%{}",
                label,
                r.offered_pps,
                r.delivered_pps,
                r.polld_cpu_percent,
                r.competitor_percent,
                ksoftirqd_cell(r, softirq)
            );
        }
    }
    let _ = writeln!(out);
    for line in &report.findings {
        let _ = writeln!(out, "{line}");
    }
    for svg in &report.svgs {
        let _ = writeln!(out, "wrote {}", svg.display());
    }
}

/// The heading of the `ksoftirqd` column, in the guest (`shown`): its `ksoftirqd/0`, the
/// device work the kernel left over from its interrupts, beside polld's.
fn ksoftirqd_heading(shown: bool) -> &'static str {
    if shown {
        "  ksoftirqd"
    } else {
        ""
    }
}

/// The row's cell in the `ksoftirqd` column ([`ksoftirqd_heading`]).
fn ksoftirqd_cell(row: &ShareRow, shown: bool) -> String {
    match row.ksoftirqd_percent {
        Some(p) if shown => format!(" {p:>9.1}%"),
        _ => String::new(),
    }
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
    fn a_stat_screen_gives_tap0s_interrupts_and_the_idle_share() {
        // As `polld stat` prints it: the device's own interrupts (`-` on a TAP) before
        // polld's wakeups.
        let screen = "CPU1 busy 40.0%   polld thread  27.0%\n  idle    61.5% |====   |\ninterface mode      link dev irq/s   intr/s  polls/s  in pkt/s\ntap0      interrupt up           -     7133        0    100001\ntap1      interrupt up           -        0        0         0\n";
        assert_eq!(parse_screen(screen, "tap0"), Some((7133.0, 61.5, 27.0)));
        assert_eq!(parse_screen(screen, "tap9"), None);
    }
}
