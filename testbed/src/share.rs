//! The seed's promise on real traffic: on the TAP testbed, under a flood from gen, a
//! CPU-bound competitor pinned to the poll CPU keeps `kern.polling.user_frac` percent of
//! it while polld polls, and is starved while polld takes interrupts.
//!
//! On TAP every bit of receive work happens inside polld's own `read()` and `write()`
//! (see `polld_dev::tap`), so polld's budget bounds all the device work, as `kern_poll`
//! does. [`measure_share`] runs one such trial: `polld run` realtime on the fwd CPU,
//! `polld gen --rate unlimited` on the gen CPU, a [`Competitor`] on the fwd CPU, and
//! measures over a window the competitor's and polld's CPU time (from their own
//! `/proc/PID/schedstat`, in ns), the delivered rate (tap1's receive counter), polld's
//! interrupts, and conservation at the end: on every interface of polld, and end to end
//! from what `polld gen` sent to what reached sink ([`Ledger`]). `polld demo` and the
//! promise test both use it.

use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::demo::{last_json, wait_for, Process};
use crate::ledger::{Ledger, PathCounters, PathReader, Sent, StreamPath};
use crate::streams::ExtraStream;
use crate::{polld_config, Devices, Layout, PolldSetup, Role, Testbed, TestbedError, UpOptions};

pub(crate) fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// A CPU-bound process pinned to one CPU (a shell spinning on `:`), killed on drop.
pub struct Competitor {
    child: Child,
}

impl Competitor {
    pub fn start(tb: &Testbed, cpu: usize) -> Result<Competitor, TestbedError> {
        let child = tb
            .command_ahead_in(Role::Fwd, Some(cpu), "sh")?
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting the competitor: {e}")))?;
        Ok(Competitor { child })
    }

    /// Its CPU time so far, in ns.
    pub fn cpu_ns(&self) -> u64 {
        task_cpu_ns(self.child.id())
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of thread `tid` so far, in ns (the scheduler's run time); 0 once it is gone.
fn task_cpu_ns(tid: u32) -> u64 {
    polld_dev::kernel_rx::thread_cpu_ns(tid).unwrap_or(0)
}

/// One trial: polld's mode on both TAPs and `user_frac`, the load and who shares the CPU.
#[derive(Clone, Debug)]
pub struct ShareTrial<'a> {
    pub mode: &'a str,
    pub user_frac: u32,
    /// Seconds of flood before the window opens (the controller settles).
    pub warm_up: f64,
    /// Seconds the shares are measured over.
    pub window: f64,
    /// `polld gen --rate` (`unlimited`, `200k`, ...), or no `polld gen` at all.
    pub rate: Option<&'a str>,
    /// Run the CPU-bound competitor on the fwd CPU.
    pub competitor: bool,
    /// Knobs set after the trial's own (`net.inet.ip.fastforwarding=0`, ...).
    pub knobs: &'a [(&'a str, &'a str)],
    /// Streams besides tap0 -> tap1, already created on the testbed, each with its own
    /// `polld gen` at `rate`.
    pub extra_streams: &'a [ExtraStream],
}

impl<'a> ShareTrial<'a> {
    /// The promise's trial: an unlimited flood and the competitor beside polld.
    pub fn flood(mode: &'a str, user_frac: u32, warm_up: f64, window: f64) -> ShareTrial<'a> {
        ShareTrial {
            mode,
            user_frac,
            warm_up,
            window,
            rate: Some("unlimited"),
            competitor: true,
            knobs: &[],
            extra_streams: &[],
        }
    }
}

/// What a trial measured.
#[derive(Clone, Debug, Serialize)]
pub struct ShareRow {
    pub mode: String,
    pub user_frac: u32,
    /// `polld gen`'s sending rate over its whole run (0 without `polld gen`), summed over
    /// the streams.
    pub offered_pps: f64,
    /// tap1's receive counter over the window: frames polld wrote towards sink (with
    /// the extra streams' outputs).
    pub delivered_pps: f64,
    pub interrupts_per_sec: f64,
    /// polld's poll thread, percent of the fwd CPU over the window.
    pub polld_cpu_percent: f64,
    /// The competitor, percent of the fwd CPU over the window (0 without one).
    pub competitor_percent: f64,
    /// In the guest, its `ksoftirqd/0`: the device work the kernel left over from its
    /// interrupts, percent of the vCPU (`None` on TAP, where no driver works).
    pub ksoftirqd_percent: Option<f64>,
    /// tap0's drops over the window, by reason (rx_ring_full: the TAP's queue was full
    /// and the kernel dropped on gen's CPU).
    pub drops: Vec<(String, u64)>,
    /// Where every frame `polld gen` sent went, end to end (`None` without `polld gen`:
    /// iperf3's traffic is its own to account for).
    pub ledger: Option<Ledger>,
    /// rx = forwarded + local + consumed + queued + drops on every interface at the end,
    /// and the ledger balanced.
    pub conserved: bool,
}

#[cfg(test)]
impl ShareRow {
    /// A polling trial at user_frac 10 that delivered `delivered` of `offered` frames/s,
    /// conserved: a point of a curve in unit tests.
    pub(crate) fn point(offered: f64, delivered: f64) -> ShareRow {
        ShareRow {
            mode: "polling".into(),
            user_frac: 10,
            offered_pps: offered,
            delivered_pps: delivered,
            interrupts_per_sec: 0.0,
            polld_cpu_percent: 90.0,
            competitor_percent: 0.0,
            ksoftirqd_percent: None,
            drops: vec![],
            ledger: None,
            conserved: true,
        }
    }
}

/// Writes `config` to `dir`/polld.toml and starts `polld run --json` on it in fwd; returns
/// once its control socket exists.
pub(crate) fn start_polld(
    tb: &Testbed,
    polld: &str,
    dir: &Path,
    config: &str,
    socket: &Path,
) -> Result<Process, TestbedError> {
    let config_path = dir.join("polld.toml");
    std::fs::write(&config_path, config)
        .map_err(|e| failed(format!("writing {}: {e}", config_path.display())))?;
    let mut daemon = Process::spawn(
        tb.command_in(Role::Fwd, None, polld)?
            .args(["run", "--json", "-c"])
            .arg(&config_path),
        "polld run",
    )?;
    wait_for(socket, &mut daemon)?;
    Ok(daemon)
}

/// `polld gen --rate unlimited` from `cpu` for `seconds`, from gen's TAP of `layout`'s pair
/// to the unowned destination behind it.
fn flood(
    tb: &Testbed,
    polld: &str,
    layout: &Layout,
    cpu: usize,
    seconds: f64,
) -> Result<Process, TestbedError> {
    let (src, rx) = (&layout.veth0, &layout.veth1);
    let (src_ip, dst_ip) = (src.addr.to_string(), layout.unowned_dst.to_string());
    Process::spawn(
        tb.command_ahead_in(Role::Gen, Some(cpu), polld)?.args([
            "gen",
            &src.name,
            "--json",
            "-i",
            "0",
            "--rate",
            "unlimited",
            "--duration",
            &seconds.to_string(),
            "--src-mac",
            &src.mac,
            "--dst-mac",
            &rx.mac,
            "--src-ip",
            &src_ip,
            "--dst-ip",
            &dst_ip,
        ]),
        "polld gen",
    )
}

/// Runs one trial on a TAP testbed: warm-up, then the measured window. `dir` holds the
/// trial's config and socket.
pub fn measure_share(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    cpus: (usize, usize),
    trial: &ShareTrial,
) -> Result<ShareRow, TestbedError> {
    let run = TrialRun::start(tb, polld, dir, cpus, trial)?;
    std::thread::sleep(Duration::from_secs_f64(trial.warm_up));
    let before = run.sample()?;
    std::thread::sleep(Duration::from_secs_f64(trial.window));
    let after = run.sample()?;
    run.finish(&before, &after)
}

/// A trial under way: `polld run` in fwd, `polld gen` in gen and the competitor, as the
/// trial asks. Take [`TrialRun::sample`]s around what is measured, then
/// [`TrialRun::finish`]. Dropped early, it kills what it started.
pub struct TrialRun<'a> {
    tb: &'a Testbed,
    polld: String,
    gen_cpu: usize,
    trial: ShareTrial<'a>,
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
        let mut all_knobs = vec![("kern.polling.user_frac", user_frac.as_str())];
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
            let targets = std::iter::once(vec![layout.veth0.name.clone()])
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
            socket,
            daemon,
            gens,
            competitor,
            reader,
            sent: RefCell::new(vec![Sent::default(); streams]),
        })
    }

    /// Starts one more `polld gen --rate rate` into tap0 for `seconds` (and [`GEN_SLACK_S`]),
    /// on the gen CPU; the caller ends it with [`TrialRun::end_gen`].
    pub(crate) fn start_gen(&self, rate: &str, seconds: f64) -> Result<Process, TestbedError> {
        let target = [self.tb.layout().veth0.name.clone()];
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
            values: polld_values(&self.socket, "dev")?,
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
        let drop_prefix = format!("dev.{tap0}.drops.");
        let drops = after
            .values
            .iter()
            .filter_map(|(n, v)| {
                let reason = n.strip_prefix(&drop_prefix)?;
                let d = v.saturating_sub(before.get(n));
                (d > 0).then(|| (reason.to_string(), d))
            })
            .collect();
        Ok(ShareRow {
            mode: self.trial.mode.to_string(),
            user_frac: self.trial.user_frac,
            offered_pps,
            delivered_pps: per_sec(before.delivered, after.delivered),
            interrupts_per_sec: delta(&format!("dev.{tap0}.interrupts")),
            polld_cpu_percent: percent(before.polld_ns, after.polld_ns),
            competitor_percent: percent(before.competitor_ns, after.competitor_ns),
            ksoftirqd_percent: None,
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

/// An interface's counters in `polld run --json`'s final report.
pub(crate) fn counters_of(iface: &Value) -> Vec<(String, u64)> {
    iface["counters"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|c| Some((c[0].as_str()?.to_string(), c[1].as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Prints a bench's report to `out`: one JSON document with `json`, else `text`'s table.
pub(crate) fn print_report<R: Serialize>(
    report: &R,
    json: bool,
    out: &mut dyn Write,
    text: fn(&R, &mut dyn Write),
) {
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
    } else {
        text(report, out);
    }
}

/// Brings up a TAP testbed of `prefix` and a scratch directory, runs `body` on them with
/// the (gen, fwd) CPUs, then removes both, saying so as `polld bench {bench}: ...`.
pub(crate) fn on_own_tap_testbed<T>(
    bench: &str,
    prefix: &str,
    progress: &mut dyn Write,
    body: impl FnOnce(&Testbed, &Path, (usize, usize), &mut dyn Write) -> Result<T, TestbedError>,
) -> Result<T, TestbedError> {
    let vm = crate::VmOptions::default();
    on_own_testbed(bench, prefix, Devices::Tap, &vm, progress, body)
}

/// [`on_own_tap_testbed`] on a testbed of `devices`: the guest of `Devices::Vm` runs
/// `vm`'s polld.
pub(crate) fn on_own_testbed<T>(
    bench: &str,
    prefix: &str,
    devices: Devices,
    vm: &crate::VmOptions,
    progress: &mut dyn Write,
    body: impl FnOnce(&Testbed, &Path, (usize, usize), &mut dyn Write) -> Result<T, TestbedError>,
) -> Result<T, TestbedError> {
    let layout = Layout::with_devices(prefix, devices);
    let options = UpOptions::default();
    let which = match devices {
        Devices::Tap => "the TAP testbed",
        Devices::Vm => "the VM testbed (a qemu guest between two TAPs)",
        Devices::Veth => "the veth testbed",
    };
    let _ = writeln!(
        progress,
        "polld bench {bench}: bringing up {which} {}, {}, {}",
        layout.gen_ns, layout.fwd_ns, layout.sink_ns
    );
    let tb = Testbed::up_vm(&layout, &options, vm)?;
    let dir = std::env::temp_dir().join(format!("polld-bench-{bench}-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
    let result = body(&tb, &dir, (options.cpus.gen, options.cpus.fwd), progress);
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    let _ = writeln!(progress, "polld bench {bench}: testbed removed");
    result
}

/// Seconds a `polld gen` may run past the flood its trial planned. Its trial stops it
/// (SIGINT) once the measured window closed, however long the samples around the window
/// took, so that the load lasts through the window; this only ends a generator whose
/// trial died before stopping it.
pub(crate) const GEN_SLACK_S: f64 = 60.0;

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

/// Entry `name` among polld's entries `values` ([`polld_values`]), 0 if it has none.
pub(crate) fn value_of(values: &[(String, u64)], name: &str) -> u64 {
    values
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| *v)
}

/// Counter `name` of one interface of `polld run --json`'s final report, 0 if it has none.
pub(crate) fn final_counter(iface: &Value, name: &str) -> u64 {
    iface["counters"]
        .as_array()
        .and_then(|counters| counters.iter().find(|c| c[0] == name))
        .and_then(|c| c[1].as_u64())
        .unwrap_or(0)
}

/// polld's numeric entries at or under `prefix` (`dev`: the interfaces' counters; `""`:
/// all) over the control socket.
pub(crate) fn polld_values(
    socket: &Path,
    prefix: &str,
) -> Result<Vec<(String, u64)>, TestbedError> {
    let request = polld_control::proto::Request::List {
        prefix: prefix.into(),
    };
    match polld_control::client::request(socket, &request) {
        Ok(polld_control::proto::Response::Entries { entries }) => Ok(entries
            .into_iter()
            .filter_map(|e| Some((e.name, e.value.parse().ok()?)))
            .collect()),
        Ok(other) => Err(failed(format!("polld answered {other:?}"))),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// The frames of one interface of `polld run --json`'s final report in no outcome counter
/// and no drop after rx
/// ([`polld_core::IfCounters::unaccounted_named`]): 0 when every frame is
/// accounted for; `None` when it has no counters.
pub fn unaccounted(iface: &Value) -> Option<i64> {
    let counters = iface["counters"].as_array()?;
    let named = counters
        .iter()
        .filter_map(|c| Some((c[0].as_str()?, c[1].as_u64()?)));
    Some(polld_core::IfCounters::unaccounted_named(named))
}

/// Whether every interface of `polld run --json`'s final report is conserved
/// ([`unaccounted`]).
pub fn conserved(interfaces: &Value) -> bool {
    interfaces
        .as_array()
        .is_some_and(|list| list.iter().all(|iface| unaccounted(iface) == Some(0)))
}

/// A trial on several poll CPUs: one TAP pair per CPU, each with its own `user_frac`.
#[derive(Clone, Debug)]
pub struct PerCpuTrial {
    /// Each poll CPU with the TAP pair it polls and its `net.ifpoll.N.rx.user_frac`.
    pub cpus: Vec<(usize, Layout, u32)>,
    /// Seconds of flood that fill each TAP's queue before the competitors start.
    pub fill: f64,
    pub warm_up: f64,
    pub window: f64,
}

/// What one CPU of a [`PerCpuTrial`] measured.
#[derive(Clone, Debug, Serialize)]
pub struct PerCpuRow {
    pub cpu: usize,
    pub user_frac: u32,
    /// The competitor on this CPU, percent of it over the window.
    pub competitor_percent: f64,
    /// This CPU's poll thread, percent of it over the window.
    pub polld_cpu_percent: f64,
    /// Frames polld forwarded from this CPU's gen-side TAP per second of the window.
    pub forwarded_pps: f64,
    /// Frames still queued in the gen-side TAP when the window closed: more than zero
    /// means polld had frames waiting all through the window.
    pub backlog_left: i64,
    /// Conservation on this CPU's interfaces at the end.
    pub conserved: bool,
}

/// When, each CPU's competitor and poll thread CPU time (ns), and polld's `dev.*` counters.
type PerCpuSample = (Instant, Vec<(u64, u64)>, Vec<(String, u64)>);

/// The TAP queue length of a [`PerCpuTrial`]: the flood is queued there first.
const TAP_QUEUE: &str = "400000";

/// Runs polld on every CPU of `trial` (`[daemon] cpus`), each CPU polling its own TAP
/// pair. The generators on both CPUs first fill the gen-side TAPs' queues (every CPU of
/// a 2-CPU machine also polls, so a generator running through the window would share
/// the competitor's part of the CPU, and the competitor could not get `user_frac`), then
/// a competitor starts on each CPU and the window measures each competitor's and each
/// poll thread's CPU time while polld works through the queued flood.
pub fn measure_per_cpu_shares(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    trial: &PerCpuTrial,
) -> Result<Vec<PerCpuRow>, TestbedError> {
    let polld_str = polld.to_string_lossy().to_string();
    let socket = dir.join("polld.sock");
    let _ = std::fs::remove_file(&socket);
    let fracs: Vec<(String, String)> = trial
        .cpus
        .iter()
        .map(|(cpu, _, uf)| (format!("net.ifpoll.{cpu}.rx.user_frac"), uf.to_string()))
        .collect();
    let all_knobs: Vec<(&str, &str)> = fracs
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let pairs: Vec<(&Layout, usize)> = trial.cpus.iter().map(|(c, l, _)| (l, *c)).collect();
    let config = crate::polld::polld_config_per_cpu(
        &pairs,
        &PolldSetup {
            backend: "tap",
            mode: "polling",
            socket: &socket,
            cpu: None,
            realtime: true,
            knobs: &all_knobs,
        },
    );
    for (_, layout, _) in &trial.cpus {
        let tap = &layout.veth0;
        polld_dev::netns::ip(&[
            "-n",
            &tap.ns,
            "link",
            "set",
            &tap.name,
            "txqueuelen",
            TAP_QUEUE,
        ])
        .map_err(|e| failed(format!("txqueuelen of {}: {e}", tap.name)))?;
    }
    let mut daemon = start_polld(tb, &polld_str, dir, &config, &socket)?;
    let mut gens = Vec::new();
    for (cpu, layout, _) in &trial.cpus {
        gens.push(flood(tb, &polld_str, layout, *cpu, trial.fill)?);
    }
    let mut sent = Vec::new();
    for gen in &mut gens {
        let out = gen.wait()?;
        let frames = last_json(&out)
            .and_then(|s| s["frames"].as_u64())
            .ok_or_else(|| failed(format!("polld gen printed no summary: {out}")))?;
        sent.push(frames);
    }
    let competitors = trial
        .cpus
        .iter()
        .map(|(cpu, _, _)| Competitor::start(tb, *cpu))
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::sleep(Duration::from_secs_f64(trial.warm_up));
    let pid = daemon.pid();
    let threads: Vec<u32> = trial
        .cpus
        .iter()
        .map(|(cpu, _, _)| thread_named(pid, &format!("polld-cpu{cpu}")))
        .collect::<Result<_, _>>()?;
    let sample = || -> Result<PerCpuSample, TestbedError> {
        let at = Instant::now();
        let ns = competitors
            .iter()
            .zip(&threads)
            .map(|(c, tid)| (c.cpu_ns(), task_cpu_ns(*tid)))
            .collect();
        Ok((at, ns, polld_values(&socket, "dev")?))
    };
    let before = sample()?;
    std::thread::sleep(Duration::from_secs_f64(trial.window));
    let after = sample()?;
    drop(competitors);
    let final_counters = daemon.finish()?;
    let interfaces: Value = serde_json::from_str(&final_counters)
        .map_err(|e| failed(format!("polld run --json printed {final_counters:?}: {e}")))?;

    let wall_ns = after.0.duration_since(before.0).as_nanos() as f64;
    let percent = |a: u64, b: u64| b.saturating_sub(a) as f64 * 100.0 / wall_ns;
    let final_of = |ifname: &str, counter: &str| -> u64 {
        interfaces
            .as_array()
            .and_then(|l| l.iter().find(|i| i["name"] == ifname))
            .map_or(0, |i| final_counter(i, counter))
    };
    Ok(trial
        .cpus
        .iter()
        .enumerate()
        .map(|(k, (cpu, layout, user_frac))| {
            let rx = &layout.veth1.name;
            let forwarded = format!("dev.{rx}.forwarded");
            let received = value_of(&after.2, &format!("dev.{rx}.rx_packets"));
            let dropped = final_of(rx, "drops.rx_ring_full");
            let mine: Vec<Value> = interfaces
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter(|i| i["name"] == *rx || i["name"] == layout.veth2.name)
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            PerCpuRow {
                cpu: *cpu,
                user_frac: *user_frac,
                competitor_percent: percent(before.1[k].0, after.1[k].0),
                polld_cpu_percent: percent(before.1[k].1, after.1[k].1),
                forwarded_pps: (value_of(&after.2, &forwarded) - value_of(&before.2, &forwarded))
                    as f64
                    * 1e9
                    / wall_ns,
                backlog_left: sent[k] as i64 - dropped as i64 - received as i64,
                conserved: mine.len() == 2 && conserved(&Value::Array(mine)),
            }
        })
        .collect())
}

/// The thread of process `pid` named `name` (its `comm`).
fn thread_named(pid: u32, name: &str) -> Result<u32, TestbedError> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|e| failed(format!("listing polld's threads: {e}")))?;
    tasks
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.trim() == name)
        })
        .ok_or_else(|| failed(format!("polld has no thread {name}")))
}
