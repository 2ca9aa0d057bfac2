//! What `polld stat` measures: a [`Sample`] is one reading of a running polld (its control
//! socket's typed snapshot, the scheduler's values found by their declarations) and of `/proc/stat`; a [`Snapshot`] is the
//! rates and the CPU split between two samples, the thing the screen shows and `--json`
//! prints.
//!
//! The split covers the poll thread's CPU when polld is pinned (`[daemon] cpu`); when it
//! is not, the thread moves between CPUs and the split covers all of them together (each
//! share a percentage of the whole machine), which the screen says. Over the interval:
//! - device: `Δpolld.work_ns / Δpolld.clock_ns` (the daemon's own monotonic accounts),
//!   and busy poll, idle poll likewise;
//! - kernel rx: the CPU time of the kernel threads doing polld's interfaces' receive
//!   work (`polld.kernel_rx_on_cpu_ns`: those that can run only on the poll CPU;
//!   unpinned, `polld.kernel_rx_ns`);
//! - softirq: the CPU's softirq time in `/proc/stat` (anyone's, polld's interfaces'
//!   included when their NAPI is not threaded);
//! - busy: the wall time (the daemon's clock) the CPU did not idle, its idle time from
//!   `/proc/stat` ([`CpuTimes::busy_percent_since`] says why not `/proc/stat`'s own busy
//!   share); user: what is left of it;
//! - idle: `100 − busy`.
//!
//! device + busy poll + idle poll + kernel rx + softirq + user + idle = 100. The figures
//! come from different clocks: when polld's and the kernel threads' measured time exceeds
//! the busy time, user is 0 and idle what is left, and the notes say by how much. The poll thread's own CPU time
//! (`polld.thread_cpu_ns`) checks the device figure, which the monotonic clock measures
//! including time the thread was preempted.

use std::collections::BTreeMap;
use std::path::Path;

use polld_control::answer::typed;
use polld_control::client::{request, ClientError};
use polld_control::daemon::{daemon_entry, per_cpu, DEVICE_INTERRUPTS};
use polld_control::proto::{Request, Response};
use polld_core::dataplane::{IfSettings, DEV_NODE, DROPS};
use polld_core::ifpoll::{kern_name, per_cpu_name};
use polld_core::poll::NODE;
use polld_core::SysctlEntry;
use polld_core::{
    IfCounters, Interface as Iface, Knobs, LinkState, Mode, PollState, Poller, Reading,
};
use serde::Serialize;

/// Points by which two measures of the same time may differ before a note says so.
const DISAGREEMENT_POINTS: f64 = 2.0;

/// One CPU's (or all CPUs') time from `/proc/stat`, in its ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub softirq: u64,
    /// Time the hypervisor ran something else while this CPU had work (part of `busy`).
    pub steal: u64,
    pub total: u64,
}

impl CpuTimes {
    /// Reads the line named `name` (`cpu1`, or `cpu` for all CPUs) of `/proc/stat`'s text.
    pub fn parse_line(stat: &str, name: &str) -> Option<CpuTimes> {
        let line = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))?;
        let v: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal: idle and iowait are not busy.
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        Some(CpuTimes {
            busy: total.saturating_sub(idle),
            softirq: v.get(6).copied().unwrap_or(0),
            steal: v.get(7).copied().unwrap_or(0),
            total,
        })
    }

    /// Reads `cpuN` from the text of `/proc/stat`.
    pub fn parse(stat: &str, cpu: usize) -> Option<CpuTimes> {
        CpuTimes::parse_line(stat, &format!("cpu{cpu}"))
    }

    /// `cpuN` of this machine, if it has that CPU.
    pub fn read(cpu: usize) -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?, cpu)
    }

    /// The percent of `wall_ns` (the time since `before` was read) in which this CPU (or
    /// `cpus` CPUs, for the `cpu` line) did not idle; `None` for no time.
    ///
    /// Not busy / (busy + idle): /proc/stat samples user and system time at the scheduler
    /// tick (CONFIG_TICK_CPU_ACCOUNTING) but measures idle time at each idle entry and exit
    /// (NO_HZ), so a thread that wakes in step with the tick (a poller at a multiple of HZ)
    /// runs at few of the ticks and that ratio reads far low: 28 % for a polling forwarder
    /// whose CPU idled 53 % of the wall time.
    pub fn busy_percent_since(&self, before: &CpuTimes, wall_ns: u64, cpus: usize) -> Option<f64> {
        if wall_ns == 0 {
            return None;
        }
        let idle = (self.total - self.busy).saturating_sub(before.total - before.busy);
        let idle_ns = idle as f64 * 1e9 / clock_ticks();
        let busy = 100.0 - idle_ns * 100.0 / (wall_ns as f64 * cpus.max(1) as f64);
        Some(busy.clamp(0.0, 100.0))
    }
}

/// `/proc/stat`'s tick (USER_HZ), per second.
pub fn clock_ticks() -> f64 {
    let t = rustix::param::clock_ticks_per_second();
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The parts of `/proc/stat` the split needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// Each CPU's line.
    pub cpus: BTreeMap<usize, CpuTimes>,
    /// The `cpu` line: all CPUs together.
    pub all: CpuTimes,
}

impl ProcStat {
    pub fn parse(stat: &str) -> Option<ProcStat> {
        let cpus = stat
            .lines()
            .filter_map(|l| {
                let name = l.split_whitespace().next()?;
                let cpu: usize = name.strip_prefix("cpu")?.parse().ok()?;
                Some((cpu, CpuTimes::parse_line(stat, name)?))
            })
            .collect();
        Some(ProcStat {
            cpus,
            all: CpuTimes::parse_line(stat, "cpu")?,
        })
    }

    pub fn read() -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// `cpu`'s times, or all CPUs' for `None`.
    fn scope(&self, cpu: Option<usize>) -> Option<CpuTimes> {
        match cpu {
            Some(c) => self.cpus.get(&c).copied(),
            None => Some(self.all),
        }
    }
}

/// One reading of a running polld.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// Every entry, typed, by its full name.
    pub values: BTreeMap<String, Reading>,
    /// The interfaces, in the daemon's order.
    pub interfaces: Vec<String>,
    /// `/proc/stat`, read right after the entries.
    pub proc_stat: Option<ProcStat>,
}

/// Why a sample could not be taken.
#[derive(Debug)]
pub enum SampleError {
    Client(ClientError),
    /// The daemon refused, or answered something else than entries.
    Daemon(String),
}

impl std::fmt::Display for SampleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SampleError::Client(e) => e.fmt(f),
            SampleError::Daemon(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for SampleError {}

impl Sample {
    /// Asks the polld at `socket` for its typed snapshot, then reads `/proc/stat`.
    pub fn take(socket: &Path) -> Result<Sample, SampleError> {
        let readings = match request(socket, &Request::Snapshot).map_err(SampleError::Client)? {
            Response::Snapshot { readings } => readings,
            Response::Error { message } => {
                return Err(SampleError::Daemon(format!(
                    "polld refused the request: {message}"
                )))
            }
            _ => {
                return Err(SampleError::Daemon(
                    "polld answered something else than a snapshot: is it the same version?".into(),
                ))
            }
        };
        let mut sample = Sample::from_readings(readings);
        sample.proc_stat = ProcStat::read();
        Ok(sample)
    }

    /// A sample of `entries` (a List answer), typed by their declarations, without
    /// `/proc/stat`.
    pub fn from_entries(entries: Vec<SysctlEntry>) -> Sample {
        Sample::from_readings(typed(entries))
    }

    /// A sample of `readings`, without `/proc/stat`.
    pub fn from_readings(readings: Vec<Reading>) -> Sample {
        let interfaces = readings
            .iter()
            .filter(|r| r.leaf == IfSettings::MODE.name)
            .filter_map(|r| r.node.strip_prefix(DEV_NODE)?.strip_prefix('.'))
            .map(str::to_string)
            .collect();
        Sample {
            values: readings.into_iter().map(|r| (r.name(), r)).collect(),
            interfaces,
            proc_stat: None,
        }
    }

    /// A value as text (a number or a word).
    pub fn get(&self, name: &str) -> Option<String> {
        self.values.get(name).map(|r| r.value.to_string())
    }

    /// A numeric value, 0 when absent or a word.
    pub fn number(&self, name: &str) -> u64 {
        self.values
            .get(name)
            .and_then(|r| r.value.int())
            .map_or(0, |n| n.max(0) as u64)
    }

    pub fn pid(&self) -> u32 {
        self.number(daemon_entry::PID) as u32
    }

    /// The poll thread's CPU, when the daemon knows it.
    pub fn cpu(&self) -> Option<usize> {
        usize::try_from(self.values.get(daemon_entry::CPU)?.value.int()?).ok()
    }

    pub fn pinned(&self) -> bool {
        self.number(daemon_entry::CPU_PINNED) == 1
    }
}

/// The poll thread's CPU (or, unpinned, all CPUs) over the interval, percent. The
/// shares device + busy poll + idle poll + kernel rx + softirq + user + idle add up to 100.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuSplit {
    /// The poll thread's CPU: pinned, else the one it last ran on.
    pub cpu: Option<usize>,
    pub pinned: bool,
    /// The CPUs the shares are of: 1 when pinned, all of them when not.
    pub cpus: usize,
    /// Device work: handlers, tasks, ticks, poll chunks, input queue, pollmore.
    pub device: f64,
    /// Busy polling (`busy` mode), shown apart from device work.
    pub busy_poll: f64,
    /// Idle polling (`kern.polling.idle_poll`), at idle priority.
    pub idle_poll: f64,
    /// The kernel threads doing polld's interfaces' receive work, outside polld's budget.
    pub kernel_rx: f64,
    /// The kernel's softirq time (`None`: no `/proc/stat`).
    pub softirq: Option<f64>,
    /// Everything else that ran.
    pub user: Option<f64>,
    pub idle: Option<f64>,
    /// The share of the wall time the CPU did not idle.
    pub busy: Option<f64>,
    /// The poll thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), a check on device +
    /// busy poll + idle poll (`None`: a daemon too old to report it).
    pub polld_thread: Option<f64>,
    /// The kernel receive threads' time on any CPU, percent of one CPU.
    pub kernel_rx_anywhere: f64,
    /// Those threads, and how they were found.
    pub kernel_rx_threads: String,
    pub kernel_rx_found_by: String,
    /// What the split cannot know or had to adjust, in words.
    pub notes: Vec<String>,
}

impl CpuSplit {
    /// The split between `before` and `after`, over `ns` of the daemon's clock.
    fn between(before: &Sample, after: &Sample, ns: u64) -> CpuSplit {
        let delta = |name: &str| after.number(name).saturating_sub(before.number(name));
        let pinned = after.pinned() && before.cpu() == after.cpu();
        let scope = if pinned { after.cpu() } else { None };
        let proc_stat = |s: &Sample| s.proc_stat.as_ref().and_then(|p| p.scope(scope));
        let cpus = if pinned {
            1
        } else {
            after.proc_stat.as_ref().map_or(1, |p| p.cpus.len().max(1))
        };
        let share_of = |ns_used: u64, cpus: usize| {
            if ns > 0 {
                ns_used as f64 * 100.0 / (ns as f64 * cpus as f64)
            } else {
                0.0
            }
        };
        let share = |name: &str| share_of(delta(name), cpus);
        let kernel_rx = if pinned {
            share(daemon_entry::KERNEL_RX_ON_CPU_NS)
        } else {
            share(daemon_entry::KERNEL_RX_NS)
        };
        let mut split = CpuSplit {
            cpu: after.cpu(),
            pinned,
            cpus,
            device: share(daemon_entry::WORK_NS),
            busy_poll: share(daemon_entry::BUSY_POLL_NS),
            idle_poll: share(daemon_entry::IDLE_POLL_NS),
            kernel_rx,
            polld_thread: after
                .get(daemon_entry::THREAD_CPU_NS)
                .map(|_| share(daemon_entry::THREAD_CPU_NS)),
            kernel_rx_anywhere: share_of(delta(daemon_entry::KERNEL_RX_NS), 1),
            kernel_rx_threads: after
                .get(daemon_entry::KERNEL_RX_THREADS)
                .unwrap_or_default(),
            kernel_rx_found_by: after
                .get(daemon_entry::KERNEL_RX_FOUND_BY)
                .unwrap_or_default(),
            ..CpuSplit::default()
        };
        if !pinned {
            split.notes.push(format!(
                "polld is not pinned: shares are of all {cpus} CPUs together (pin it with \
                 [daemon] cpu for the poll CPU's own split)"
            ));
        }
        split.check_against_the_thread_clock();
        if let (Some(b), Some(a)) = (proc_stat(before), proc_stat(after)) {
            if let Some(busy) = a.busy_percent_since(&b, ns, cpus) {
                let ticks = ns as f64 * cpus as f64 * clock_ticks() / 1e9;
                let softirq = a.softirq.saturating_sub(b.softirq) as f64 * 100.0 / ticks;
                split.fill_from_proc_stat(busy, softirq);
            }
        }
        split.note_what_is_not_known(after, pinned);
        split
    }

    /// Busy, softirq, user and idle from `/proc/stat`'s `busy` and `softirq` shares.
    fn fill_from_proc_stat(&mut self, busy: f64, softirq: f64) {
        let measured = self.device + self.busy_poll + self.idle_poll + self.kernel_rx + softirq;
        let user = busy - measured;
        if user < -DISAGREEMENT_POINTS {
            self.notes.push(format!(
                "polld's and the kernel threads' time exceeds the CPU's busy {busy:.1}% by \
                 {:.1} points (different clocks): user shown as 0",
                -user
            ));
        }
        self.busy = Some(busy.max(measured).min(100.0));
        self.softirq = Some(softirq);
        self.user = Some(user.max(0.0));
        self.idle = Some((100.0 - busy.max(measured)).max(0.0));
    }

    /// The monotonic device figure against the thread's CPU time: more device time than
    /// CPU time means the thread was preempted during device work. The time it waited is
    /// the time of whoever preempted it (the kernel's receive threads, other processes),
    /// counted in their shares, so device, busy-poll and idle-poll work are taken down to
    /// the thread's CPU time, in their ratio: on a CPU others keep busy the monotonic
    /// figures would count that time twice, and the shares would add up to more than 100.
    fn check_against_the_thread_clock(&mut self) {
        let Some(thread) = self.polld_thread else {
            return;
        };
        let accounted = self.device + self.busy_poll + self.idle_poll;
        if accounted <= thread {
            return;
        }
        if accounted > thread + DISAGREEMENT_POINTS {
            self.notes.push(format!(
                "device work {accounted:.1}% by the monotonic clock, the poll thread ran \
                 {thread:.1}%: it was preempted during device work, shown as what it ran"
            ));
        }
        let scale = thread / accounted;
        self.device *= scale;
        self.busy_poll *= scale;
        self.idle_poll *= scale;
    }

    fn note_what_is_not_known(&mut self, after: &Sample, pinned: bool) {
        let elsewhere = after
            .get(daemon_entry::KERNEL_RX_ELSEWHERE)
            .unwrap_or_default();
        if pinned && !elsewhere.is_empty() {
            self.notes.push(format!(
                "{elsewhere} may run on other CPUs: not in this split ({:.1}% of a CPU \
                 anywhere)",
                self.kernel_rx_anywhere
            ));
        }
        if self.kernel_rx_found_by == "thread names" {
            self.notes.push(
                "kernel rx threads found by name: they may include other namespaces' \
                 interfaces of the same name"
                    .to_string(),
            );
        }
        if self.softirq.is_some_and(|s| s >= 0.5) {
            self.notes.push(
                "softirq counts everyone's softirq work, not only polld's interfaces'".into(),
            );
        }
    }
}

/// The `kern.polling.*` state at the end of the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Scheduler {
    pub hz: u64,
    pub user_frac: u64,
    pub controller: String,
    pub burst: u64,
    pub burst_max: u64,
    pub each_burst: u64,
    pub phase: u64,
    pub residual_burst: u64,
    pub lost_polls: u64,
    pub lost_polls_per_s: f64,
    pub stalled: u64,
    pub handlers: u64,
    pub idle_poll: u64,
    /// Device share of the last cycle, percent of a tick.
    pub kern_load: u64,
    /// Periods of `hz` per tick: above 1 while the time controller slows a tick that
    /// costs more than the devices' share.
    pub stride: u64,
}

/// One poll CPU of `[daemon] cpus`: its own scheduler (`net.ifpoll.N.*`) and its poll
/// thread's time (`polld.percpu.N.*`), percent of the interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PollCpu {
    pub cpu: usize,
    pub scheduler: Scheduler,
    /// Device work of its poll thread.
    pub device: f64,
    /// Its poll thread's CPU time.
    pub polld_thread: f64,
}

/// One interface over the interval, per second.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Interface {
    pub name: String,
    /// The mode; `auto` shows what it does now: `auto/intr` or `auto/poll`.
    pub mode: String,
    /// Auto mode: switches between interrupts and polling, since start.
    pub auto_switches: u64,
    pub link: String,
    /// Wakeups taken from the device (polld's own).
    pub interrupts_per_s: f64,
    /// The device's own receive interrupts (`/proc/interrupts`); `None` for a device
    /// without vectors (veth, TAP) or a daemon too old to count them.
    pub device_interrupts_per_s: Option<f64>,
    pub polls_per_s: f64,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub drops_per_s: f64,
    /// Drops per second by reason, the non-zero ones, largest first.
    pub drops_by_reason: Vec<(String, f64)>,
    /// Frames the wakeup watchdog found (their device raised no wakeup), since start.
    pub watchdog_frames: u64,
    /// Of those, per second over the interval.
    pub watchdog_frames_per_s: f64,
}

/// What `polld stat` shows: one interval of a running polld.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    pub pid: u32,
    pub config: String,
    /// Length of the interval, seconds (the daemon's clock).
    pub interval_s: f64,
    pub cpu: CpuSplit,
    pub scheduler: Scheduler,
    /// Each poll CPU, with `[daemon] cpus`; empty with one poll thread.
    pub per_cpu: Vec<PollCpu>,
    pub interfaces: Vec<Interface>,
}

impl Snapshot {
    /// The rates and the split between `before` and `after` (of the same daemon).
    pub fn between(before: &Sample, after: &Sample) -> Snapshot {
        let ns = after
            .number(daemon_entry::CLOCK_NS)
            .saturating_sub(before.number(daemon_entry::CLOCK_NS));
        let seconds = ns as f64 / 1e9;
        let delta = |name: &str| after.number(name).saturating_sub(before.number(name));
        let rate = |name: &str| {
            if seconds > 0.0 {
                delta(name) as f64 / seconds
            } else {
                0.0
            }
        };
        let cpu = CpuSplit::between(before, after, ns);
        let scheduler = Scheduler::of(after, &rate, &|kern| kern.to_string());
        let per_cpu = poll_cpus(after)
            .into_iter()
            .map(|n| {
                let name = |kern: &str| per_cpu_name(n, kern).unwrap_or_default();
                let share = |entry: &str| percent_of(delta(&per_cpu(n, entry)), ns);
                PollCpu {
                    cpu: n,
                    scheduler: Scheduler::of(after, &rate, &name),
                    device: share(daemon_entry::WORK_NS),
                    polld_thread: share(daemon_entry::THREAD_CPU_NS),
                }
            })
            .collect();
        let interfaces = after
            .interfaces
            .iter()
            .cloned()
            .map(|name| {
                let node = format!("{DEV_NODE}.{name}");
                let entry = |leaf: &str| format!("{node}.{leaf}");
                let mut drops_by_reason: Vec<(String, f64)> = after
                    .values
                    .values()
                    .filter(|r| r.node == node)
                    .filter_map(|r| {
                        let reason = DROPS.key(&r.leaf)?;
                        let rate = rate(&r.name());
                        (rate > 0.0).then(|| (reason.to_string(), rate))
                    })
                    .collect();
                drops_by_reason.sort_by(|a, b| b.1.total_cmp(&a.1));
                let mode = after.get(&entry(IfSettings::MODE.name)).unwrap_or_default();
                let polls_now = || after.number(&entry(Iface::<()>::AUTO_POLLING.name)) == 1;
                let mode = match mode.as_str() {
                    auto if auto == Mode::Auto.name() && polls_now() => "auto/poll",
                    auto if auto == Mode::Auto.name() => "auto/intr",
                    other => other,
                };
                Interface {
                    mode: mode.to_string(),
                    auto_switches: after.number(&entry(IfCounters::AUTO_SWITCHES.name)),
                    link: after.get(&entry(LinkState::LINK.name)).unwrap_or_default(),
                    interrupts_per_s: rate(&entry(IfCounters::INTERRUPTS.name)),
                    device_interrupts_per_s: after
                        .get(&entry(DEVICE_INTERRUPTS))
                        .map(|_| rate(&entry(DEVICE_INTERRUPTS))),
                    polls_per_s: rate(&entry(IfCounters::POLLS.name)),
                    rx_pps: rate(&entry(IfCounters::RX_PACKETS.name)),
                    tx_pps: rate(&entry(IfCounters::TX_PACKETS.name)),
                    drops_per_s: drops_by_reason.iter().fold(0.0, |sum, (_, r)| sum + r),
                    drops_by_reason,
                    watchdog_frames: after.number(&entry(IfCounters::WATCHDOG_FRAMES.name)),
                    watchdog_frames_per_s: rate(&entry(IfCounters::WATCHDOG_FRAMES.name)),
                    name,
                }
            })
            .collect();
        Snapshot {
            pid: after.pid(),
            config: after.get(daemon_entry::CONFIG).unwrap_or_default(),
            interval_s: seconds,
            cpu,
            scheduler,
            per_cpu,
            interfaces,
        }
    }
}

impl Scheduler {
    /// The scheduler's entries in `after`, each named by `name` from its `kern.polling.*`
    /// name (itself, or a CPU's `net.ifpoll.N.*`); `rate` turns a counter into a rate.
    fn of(after: &Sample, rate: &dyn Fn(&str) -> f64, name: &dyn Fn(&str) -> String) -> Scheduler {
        let full = |leaf: &str| name(&format!("{NODE}.{leaf}"));
        let k = |leaf: &str| after.number(&full(leaf));
        Scheduler {
            hz: k(Knobs::HZ.name),
            user_frac: k(Knobs::USER_FRAC.name),
            controller: after.get(&full(Knobs::CONTROLLER.name)).unwrap_or_default(),
            burst: k(PollState::BURST.name),
            burst_max: k(Knobs::BURST_MAX.name),
            each_burst: k(Knobs::EACH_BURST.name),
            phase: k(PollState::PHASE.name),
            residual_burst: k(PollState::RESIDUAL_BURST.name),
            lost_polls: k(PollState::LOST_POLLS.name),
            lost_polls_per_s: rate(&full(PollState::LOST_POLLS.name)),
            stalled: k(PollState::STALLED.name),
            handlers: k(Poller::HANDLERS.name),
            idle_poll: k(Knobs::IDLE_POLL.name),
            kern_load: k(PollState::KERN_LOAD.name),
            stride: k(PollState::STRIDE.name),
        }
    }
}

/// `ns` of a `span` of the daemon's clock, in percent (0 for an empty span).
fn percent_of(ns: u64, span: u64) -> f64 {
    if span == 0 {
        0.0
    } else {
        ns as f64 * 100.0 / span as f64
    }
}

/// The poll CPUs of a daemon with `[daemon] cpus`, from its `net.ifpoll.N.pollhz`
/// entries; none for a daemon with one poll thread.
fn poll_cpus(sample: &Sample) -> Vec<usize> {
    sample
        .values
        .keys()
        .filter_map(|name| {
            let (cpu, kern) = kern_name(name)?;
            (kern == format!("{NODE}.{}", Knobs::HZ.name)).then_some(cpu)
        })
        .collect()
}
