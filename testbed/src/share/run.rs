//! A trial of the promise under way ([`TrialRun`]): polld, its generators and the
//! competitor started, sampled around what is measured, then stopped and booked.

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::time::Instant;

use polld_core::dataplane::DEV_NODE;
use polld_core::{IfCounters, Knobs};
use serde_json::Value;

use super::{failed, task_cpu_ns, Competitor, ShareRow, ShareTrial};
use crate::entries::{conserved, dev_entry, drop_reason, kern_entry, polld_values, value_of};
use crate::ledger::{Ledger, PathCounters, PathReader, Sent, StreamPath};
use crate::polld::start_polld;
use crate::process::{last_json, Process};
use crate::{polld_config, Devices, IpFamily, PolldSetup, Role, Testbed, TestbedError};

/// A trial under way: `polld run` in fwd, `polld gen` in gen and the competitor, as the
/// trial asks. Take [`TrialRun::sample`]s around what is measured, then
/// [`TrialRun::finish`]. Dropped early, it kills what it started.
pub struct TrialRun<'a> {
    tb: &'a Testbed,
    polld: String,
    gen_cpu: usize,
    trial: ShareTrial<'a>,
    /// The family of the flood into tap0 (the extra streams' are IPv4).
    family: IpFamily,
    socket: PathBuf,
    daemon: Process,
    /// A `polld gen` per stream.
    gens: Vec<Process>,
    competitor: Option<Competitor>,
    /// The streams' counters (sink's read at every sample without a process).
    reader: PathReader,
    /// Each stream's path, with its kernel counters before any frame was sent.
    paths: Vec<(StreamPath, PathCounters)>,
    /// What the finished generators sent, by stream.
    sent: RefCell<Vec<Sent>>,
    /// The IP version of the frames the last finished `polld gen` into tap0 sent, by its
    /// summary.
    tap0_ip_version: Cell<Option<u8>>,
}

impl<'a> TrialRun<'a> {
    /// Starts polld (and waits for its control socket), then gen and the competitor.
    pub fn start(
        tb: &'a Testbed,
        polld: &Path,
        dir: &Path,
        cpus: (usize, usize),
        trial: &ShareTrial<'a>,
    ) -> Result<TrialRun<'a>, TestbedError> {
        TrialRun::start_family(tb, polld, dir, cpus, trial, IpFamily::Ipv4)
    }

    /// [`TrialRun::start`] with the flood into tap0 over `family`.
    pub fn start_family(
        tb: &'a Testbed,
        polld: &Path,
        dir: &Path,
        cpus: (usize, usize),
        trial: &ShareTrial<'a>,
        family: IpFamily,
    ) -> Result<TrialRun<'a>, TestbedError> {
        let layout = tb.layout();
        if layout.devices != Devices::Tap {
            return Err(failed(
                "the share trial needs the TAP testbed (`polld testbed up --devices tap`)".into(),
            ));
        }
        let (gen_cpu, fwd_cpu) = cpus;
        let polld_str = polld.to_string_lossy().to_string();
        let socket = dir.join("polld.sock");
        let _ = std::fs::remove_file(&socket);
        let user_frac = trial.user_frac.to_string();
        // polld's defaults but user_frac: what a user who sets only that gets.
        let user_frac_name = kern_entry(Knobs::USER_FRAC.name);
        let mut all_knobs = vec![(user_frac_name.as_str(), user_frac.as_str())];
        all_knobs.extend_from_slice(trial.knobs);
        let mut config = polld_config(
            layout,
            &PolldSetup {
                backend: "tap",
                mode: trial.mode,
                socket: &socket,
                cpu: Some(fwd_cpu),
                realtime: true,
                knobs: &all_knobs,
            },
        );
        for stream in trial.extra_streams {
            config.push_str(&stream.config(layout, trial.mode));
        }
        let daemon = start_polld(tb, &polld_str, dir, &config, &socket)?;
        let reader = PathReader::open(layout)?;
        let mut paths = Vec::new();
        for (input, output) in
            std::iter::once((layout.veth0.name.clone(), layout.veth3.name.clone()))
                .chain(trial.extra_streams.iter().map(|s| (s.input(), s.output())))
        {
            let path = StreamPath::tap(input, output);
            let start = reader.read(&path)?;
            paths.push((path, start));
        }
        let mut gens = Vec::new();
        if let Some(rate) = trial.rate {
            let flood_secs = trial.warm_up + trial.window;
            let targets = std::iter::once(tap0_target(layout, family))
                .chain(trial.extra_streams.iter().map(|s| s.gen_args()));
            for target in targets {
                gens.push(spawn_gen(
                    tb, &polld_str, gen_cpu, &target, rate, flood_secs,
                )?);
            }
        }
        let competitor = match trial.competitor {
            true => Some(Competitor::start(tb, fwd_cpu)?),
            false => None,
        };
        let streams = paths.len();
        Ok(TrialRun {
            paths,
            tb,
            polld: polld_str,
            gen_cpu,
            trial: trial.clone(),
            family,
            socket,
            daemon,
            gens,
            competitor,
            reader,
            sent: RefCell::new(vec![Sent::default(); streams]),
            tap0_ip_version: Cell::new(None),
        })
    }

    /// Starts one more `polld gen --rate rate` into tap0 for `seconds` (and [`GEN_SLACK_S`]),
    /// on the gen CPU; the caller ends it with [`TrialRun::end_gen`].
    pub(crate) fn start_gen(&self, rate: &str, seconds: f64) -> Result<Process, TestbedError> {
        let target = tap0_target(self.tb.layout(), self.family);
        spawn_gen(self.tb, &self.polld, self.gen_cpu, &target, rate, seconds)
    }

    /// Stops a `polld gen` into tap0 of this trial and books what it sent; returns its
    /// rate, frames/s.
    pub(crate) fn end_gen(&self, gen: &mut Process) -> Result<f64, TestbedError> {
        self.end_gen_of(0, gen)
    }

    /// Stops the `polld gen` of stream `stream`, which must still be flooding, and books
    /// what it sent; returns its rate.
    fn end_gen_of(&self, stream: usize, gen: &mut Process) -> Result<f64, TestbedError> {
        let out = gen.finish_running()?;
        let summary = last_json(&out)
            .ok_or_else(|| failed(format!("polld gen printed no summary: {out}")))?;
        let mut sent = self.sent.borrow_mut();
        sent[stream] = sent[stream] + Sent::of(&summary);
        if stream == 0 {
            let version = summary["ip_version"]
                .as_u64()
                .and_then(|v| u8::try_from(v).ok());
            self.tap0_ip_version.set(version);
        }
        summary["pps"]
            .as_f64()
            .ok_or_else(|| failed(format!("polld gen printed no rate: {out}")))
    }

    /// polld's control socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The CPU time all of polld's threads have used so far, ns.
    pub fn polld_process_ns(&self) -> u64 {
        polld_dev::kernel_rx::process_cpu_ns(self.daemon.pid()).unwrap_or(0)
    }

    /// CPU times and counters now.
    pub fn sample(&self) -> Result<Sample, TestbedError> {
        let pid = self.daemon.pid();
        Ok(Sample {
            at: Instant::now(),
            competitor_ns: self.competitor.as_ref().map_or(0, Competitor::cpu_ns),
            polld_ns: task_cpu_ns(pid),
            delivered: self.delivered()?,
            values: polld_values(&self.socket, DEV_NODE)?,
        })
    }

    /// Frames received so far by sink's TAPs: tap1 and the extra streams' outputs.
    fn delivered(&self) -> Result<u64, TestbedError> {
        self.paths
            .iter()
            .map(|(path, _)| Ok(self.reader.read(path)?.sink.rx_packets))
            .sum()
    }

    /// Stops everything; the row covers `before` to `after`, conservation polld's final
    /// counters.
    pub fn finish(mut self, before: &Sample, after: &Sample) -> Result<ShareRow, TestbedError> {
        drop(self.competitor.take());
        let mut offered_pps = 0.0;
        let mut gens = std::mem::take(&mut self.gens);
        for (stream, gen) in gens.iter_mut().enumerate() {
            offered_pps += self.end_gen_of(stream, gen)?;
        }
        let sent: u64 = self.sent.borrow().iter().map(|s| s.frames).sum();
        let generated = !gens.is_empty() || sent > 0;
        if generated {
            self.reader.drain(&self.paths, sent)?;
        }
        let final_counters = self.daemon.finish()?;
        let interfaces: Value = serde_json::from_str(&final_counters)
            .map_err(|e| failed(format!("polld run --json printed {final_counters:?}: {e}")))?;
        let ledger = match generated {
            true => Some(self.ledger(&interfaces)?),
            false => None,
        };

        let wall_ns = after.at.duration_since(before.at).as_nanos() as f64;
        let percent = |a: u64, b: u64| b.saturating_sub(a) as f64 * 100.0 / wall_ns;
        let per_sec = |a: u64, b: u64| b.saturating_sub(a) as f64 * 1e9 / wall_ns;
        let tap0 = &self.tb.layout().veth1.name;
        let delta = |name: &str| per_sec(before.get(name), after.get(name));
        let drops = after
            .values
            .iter()
            .filter_map(|(n, v)| {
                let reason = drop_reason(n, tap0)?;
                let d = v.saturating_sub(before.get(n));
                (d > 0).then(|| (reason.to_string(), d))
            })
            .collect();
        Ok(ShareRow {
            mode: self.trial.mode.to_string(),
            user_frac: self.trial.user_frac,
            offered_pps,
            delivered_pps: per_sec(before.delivered, after.delivered),
            interrupts_per_sec: delta(&dev_entry(tap0, IfCounters::INTERRUPTS.name)),
            polld_cpu_percent: percent(before.polld_ns, after.polld_ns),
            competitor_percent: percent(before.competitor_ns, after.competitor_ns),
            ksoftirqd_percent: None,
            gen_ip_version: self.tap0_ip_version.get(),
            drops,
            conserved: conserved(&interfaces) && ledger.as_ref().is_none_or(Ledger::balanced),
            ledger,
        })
    }

    /// The trial's frames from gen to sink, stream by stream ([`Ledger::of_stream`]).
    fn ledger(&self, interfaces: &Value) -> Result<Ledger, TestbedError> {
        let mut ledger = Ledger::default();
        for ((path, start), sent) in self.paths.iter().zip(self.sent.borrow().iter()) {
            let grew = self.reader.read(path)?.since(start);
            ledger.merge(Ledger::of_stream(path, *sent, &grew, interfaces)?);
        }
        Ok(ledger)
    }
}

/// Seconds a `polld gen` may run past the flood its trial planned. Its trial stops it
/// (SIGINT) once the measured window closed, however long the samples around the window
/// took, so that the load lasts through the window; this only ends a generator whose
/// trial died before stopping it.
pub(crate) const GEN_SLACK_S: f64 = 60.0;

/// `polld gen`'s interface and options for the flood into tap0 over `family`.
pub(crate) fn tap0_target(layout: &crate::Layout, family: IpFamily) -> Vec<String> {
    let mut target = vec![layout.veth0.name.clone()];
    target.extend(layout.gen_family_args(family));
    target
}

/// `polld gen target --rate rate` from `cpu` for `seconds` and [`GEN_SLACK_S`].
fn spawn_gen(
    tb: &Testbed,
    polld: &str,
    cpu: usize,
    target: &[String],
    rate: &str,
    seconds: f64,
) -> Result<Process, TestbedError> {
    Process::spawn(
        tb.command_ahead_in(Role::Gen, Some(cpu), polld)?
            .arg("gen")
            .args(target)
            .args(["--json", "-i", "0", "--rate", rate, "--duration"])
            .arg((seconds + GEN_SLACK_S).to_string()),
        "polld gen",
    )
}

/// CPU times and polld's counters at one moment of a [`TrialRun`].
pub struct Sample {
    pub(crate) at: Instant,
    pub(crate) competitor_ns: u64,
    pub(crate) polld_ns: u64,
    /// Frames sink's TAPs received so far.
    pub(crate) delivered: u64,
    pub(crate) values: Vec<(String, u64)>,
}

impl Sample {
    pub(crate) fn get(&self, name: &str) -> u64 {
        value_of(&self.values, name)
    }
}
