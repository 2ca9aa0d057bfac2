//! What `polld stat` measures: a [`Sample`] is one reading of a running polld (every
//! entry of its control socket's List answer) and of its CPU's time in `/proc/stat`; a
//! [`Snapshot`] is the rates and the CPU split between two samples, the thing the screen
//! shows and `--json` prints.
//!
//! The CPU split of the poll thread's core over the interval:
//! - device: `Δpolld.work_ns / Δpolld.clock_ns` (the daemon's own monotonic accounts);
//! - busy: the core's non-idle share in `/proc/stat` (everything that ran on it);
//! - user: `busy − device`, at least 0 (everything else on the core, the kernel's
//!   receive work included);
//! - idle: `100 − busy`.

use std::collections::BTreeMap;
use std::path::Path;

use polld_control::client::{request, ClientError};
use polld_control::proto::{daemon_entry, Request, Response};
use polld_core::SysctlEntry;
use serde::Serialize;

/// One CPU's jiffies from `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

impl CpuTimes {
    /// Reads `cpuN` from the text of `/proc/stat`.
    pub fn parse(stat: &str, cpu: usize) -> Option<CpuTimes> {
        let name = format!("cpu{cpu}");
        let line = stat
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
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
            total,
        })
    }

    /// `cpuN` of this machine, if it has that CPU.
    pub fn read(cpu: usize) -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?, cpu)
    }
}

/// One reading of a running polld.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sample {
    /// Every entry, name → value.
    pub values: BTreeMap<String, String>,
    /// The interfaces, in the daemon's order.
    pub interfaces: Vec<String>,
    /// The poll thread's CPU's time, read right after the entries.
    pub cpu_times: Option<CpuTimes>,
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
    /// Asks the polld at `socket` for every entry, then reads its CPU's time.
    pub fn take(socket: &Path) -> Result<Sample, SampleError> {
        let entries = match request(
            socket,
            &Request::List {
                prefix: String::new(),
            },
        )
        .map_err(SampleError::Client)?
        {
            Response::Entries { entries } => entries,
            Response::Error { message } => {
                return Err(SampleError::Daemon(format!(
                    "polld refused the request: {message}"
                )))
            }
            _ => {
                return Err(SampleError::Daemon(
                    "polld answered something else than entries: is it the same version?".into(),
                ))
            }
        };
        let mut sample = Sample::from_entries(entries);
        sample.cpu_times = sample.cpu().and_then(CpuTimes::read);
        Ok(sample)
    }

    /// A sample of `entries`, without CPU times.
    pub fn from_entries(entries: Vec<SysctlEntry>) -> Sample {
        let interfaces = entries
            .iter()
            .filter_map(|e| e.name.strip_prefix("dev.")?.strip_suffix(".mode"))
            .map(str::to_string)
            .collect();
        Sample {
            values: entries.into_iter().map(|e| (e.name, e.value)).collect(),
            interfaces,
            cpu_times: None,
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn number(&self, name: &str) -> u64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    pub fn pid(&self) -> u32 {
        self.number(daemon_entry::PID) as u32
    }

    /// The poll thread's CPU, when the daemon knows it.
    pub fn cpu(&self) -> Option<usize> {
        self.get(daemon_entry::CPU)?.parse().ok()
    }
}

/// The poll thread's core over the interval, percent.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CpuSplit {
    /// The core (`None`: unknown, no busy/user/idle split).
    pub cpu: Option<usize>,
    pub pinned: bool,
    /// Device work: handlers, tasks, ticks, poll chunks, input queue, pollmore.
    pub device: f64,
    /// Everything else that ran on the core.
    pub user: Option<f64>,
    pub idle: Option<f64>,
    /// The core's busy share from /proc/stat (device + user).
    pub busy: Option<f64>,
    /// Busy polling (`busy` mode), shown apart from device work.
    pub busy_poll: f64,
    /// Idle polling (`kern.polling.idle_poll`), at idle priority.
    pub idle_poll: f64,
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
}

/// One interface over the interval, per second.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Interface {
    pub name: String,
    pub mode: String,
    pub link: String,
    /// Wakeups taken from the device.
    pub interrupts_per_s: f64,
    pub polls_per_s: f64,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub drops_per_s: f64,
    /// Drops per second by reason, the non-zero ones, largest first.
    pub drops_by_reason: Vec<(String, f64)>,
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
        let share = |name: &str| {
            if ns > 0 {
                delta(name) as f64 * 100.0 / ns as f64
            } else {
                0.0
            }
        };
        let device = share(daemon_entry::WORK_NS);
        let busy = match (before.cpu_times, after.cpu_times) {
            (Some(b), Some(a)) if a.total > b.total => {
                Some(a.busy.saturating_sub(b.busy) as f64 * 100.0 / (a.total - b.total) as f64)
            }
            _ => None,
        };
        let cpu = CpuSplit {
            cpu: after.cpu(),
            pinned: after.number(daemon_entry::CPU_PINNED) == 1,
            device,
            user: busy.map(|b| (b - device).max(0.0)),
            idle: busy.map(|b| 100.0 - b),
            busy,
            busy_poll: share(daemon_entry::BUSY_POLL_NS),
            idle_poll: share(daemon_entry::IDLE_POLL_NS),
        };
        let k = |leaf: &str| after.number(&format!("kern.polling.{leaf}"));
        let scheduler = Scheduler {
            hz: k("hz"),
            user_frac: k("user_frac"),
            controller: after
                .get("kern.polling.controller")
                .unwrap_or_default()
                .to_string(),
            burst: k("burst"),
            burst_max: k("burst_max"),
            each_burst: k("each_burst"),
            phase: k("phase"),
            residual_burst: k("residual_burst"),
            lost_polls: k("lost_polls"),
            lost_polls_per_s: rate("kern.polling.lost_polls"),
            stalled: k("stalled"),
            handlers: k("handlers"),
            idle_poll: k("idle_poll"),
            kern_load: k("kern_load"),
        };
        let interfaces = after
            .interfaces
            .iter()
            .cloned()
            .map(|name| {
                let p = format!("dev.{name}.");
                let drops_prefix = format!("{p}drops.");
                let mut drops_by_reason: Vec<(String, f64)> = after
                    .values
                    .keys()
                    .filter_map(|n| {
                        let reason = n.strip_prefix(&drops_prefix)?;
                        let r = rate(n);
                        (r > 0.0).then(|| (reason.to_string(), r))
                    })
                    .collect();
                drops_by_reason.sort_by(|a, b| b.1.total_cmp(&a.1));
                Interface {
                    mode: after.get(&format!("{p}mode")).unwrap_or("").to_string(),
                    link: after.get(&format!("{p}link")).unwrap_or("").to_string(),
                    interrupts_per_s: rate(&format!("{p}interrupts")),
                    polls_per_s: rate(&format!("{p}polls")),
                    rx_pps: rate(&format!("{p}rx_packets")),
                    tx_pps: rate(&format!("{p}tx_packets")),
                    drops_per_s: drops_by_reason.iter().fold(0.0, |sum, (_, r)| sum + r),
                    drops_by_reason,
                    name,
                }
            })
            .collect();
        Snapshot {
            pid: after.pid(),
            config: after.get(daemon_entry::CONFIG).unwrap_or("").to_string(),
            interval_s: seconds,
            cpu,
            scheduler,
            interfaces,
        }
    }
}
