//! How a daemon answers control requests from its [`Dataplane`]: the poll thread calls
//! these from the closure it gives [`crate::server::Inbox::answer_pending`].
//!
//! Everything comes from the dataplane's own sysctl table (`kern.polling.*`,
//! `net.inet.ip.*`, `dev.<if>.*`), so `polld ctl` and `polld ifconfig` always show the
//! same names and values.

use std::path::PathBuf;

use polld_core::{Dataplane, Device, PacketStage, SysctlEntry};

use crate::proto::{daemon_entry, IfStatus, Response, SetResult};

/// The kernel's receive work for the daemon's interfaces, read when it answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelRxStatus {
    /// CPU time of the kernel receive threads, on any CPU, ns.
    pub ns: u64,
    /// The part from threads that may run only on the poll thread's CPU, ns.
    pub on_cpu_ns: u64,
    /// The threads, for people.
    pub threads: String,
    /// Those that may run on other CPUs.
    pub elsewhere: String,
    /// `netlink`, `thread names` or `none`.
    pub found_by: String,
}

/// What the daemon adds to the dataplane's entries, under `polld.` (the names are in
/// [`daemon_entry`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DaemonStatus {
    pub config: PathBuf,
    pub pid: u32,
    pub cpu: Option<usize>,
    pub cpu_pinned: bool,
    pub clock_ns: u64,
    pub work_ns: u64,
    pub busy_poll_ns: u64,
    pub idle_poll_ns: u64,
    /// The poll thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), ns.
    pub thread_cpu_ns: u64,
    pub kernel_rx: KernelRxStatus,
    /// Each writable entry's value before the config was applied.
    pub defaults: Vec<(String, String)>,
}

impl DaemonStatus {
    /// The `polld.*` entries, all read-only.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        let entry = |name: &str, value: String, descr: &str| SysctlEntry {
            name: name.to_string(),
            value,
            descr: descr.to_string(),
            writable: false,
        };
        let mut entries = vec![
            entry(
                daemon_entry::CONFIG,
                self.config.display().to_string(),
                "Config file polld was started with",
            ),
            entry(daemon_entry::PID, self.pid.to_string(), "Process id"),
            entry(
                daemon_entry::CPU,
                self.cpu.map_or_else(|| "-1".to_string(), |c| c.to_string()),
                "CPU of the poll thread: pinned, else last run on (-1 unknown)",
            ),
            entry(
                daemon_entry::CPU_PINNED,
                (self.cpu_pinned as u8).to_string(),
                "The poll thread is pinned to polld.cpu",
            ),
            entry(
                daemon_entry::CLOCK_NS,
                self.clock_ns.to_string(),
                "Monotonic clock at this answer, ns",
            ),
            entry(
                daemon_entry::WORK_NS,
                self.work_ns.to_string(),
                "Time in device work (handlers, tasks, ticks, polls, input queue), ns",
            ),
            entry(
                daemon_entry::BUSY_POLL_NS,
                self.busy_poll_ns.to_string(),
                "Time busy polling, ns",
            ),
            entry(
                daemon_entry::IDLE_POLL_NS,
                self.idle_poll_ns.to_string(),
                "Time idle polling, ns",
            ),
            entry(
                daemon_entry::THREAD_CPU_NS,
                self.thread_cpu_ns.to_string(),
                "CPU time of the poll thread (CLOCK_THREAD_CPUTIME_ID), ns",
            ),
            entry(
                daemon_entry::KERNEL_RX_NS,
                self.kernel_rx.ns.to_string(),
                "CPU time of the kernel threads doing the interfaces' receive work, any CPU, ns",
            ),
            entry(
                daemon_entry::KERNEL_RX_ON_CPU_NS,
                self.kernel_rx.on_cpu_ns.to_string(),
                "Part of kernel_rx_ns from threads that run only on polld.cpu, ns",
            ),
            entry(
                daemon_entry::KERNEL_RX_THREADS,
                self.kernel_rx.threads.clone(),
                "Kernel threads doing the interfaces' receive work (outside polld's budget)",
            ),
            entry(
                daemon_entry::KERNEL_RX_ELSEWHERE,
                self.kernel_rx.elsewhere.clone(),
                "Kernel receive threads that may run on other CPUs than polld.cpu",
            ),
            entry(
                daemon_entry::KERNEL_RX_FOUND_BY,
                self.kernel_rx.found_by.clone(),
                "How the kernel receive threads were found: netlink, thread names or none",
            ),
        ];
        entries.extend(self.defaults.iter().map(|(name, value)| {
            entry(
                &format!("{}{name}", daemon_entry::DEFAULT_PREFIX),
                value.clone(),
                "Value before the config file was applied",
            )
        }));
        entries
    }
}

/// Whether `name` is `prefix` or lies under it (`""` holds everything), as sysctl(8).
pub fn under_prefix(name: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The writable entries of `dp` and their values: taken right after the dataplane is
/// built, these are the defaults of [`DaemonStatus::defaults`].
pub fn writable_values<D: Device, S: PacketStage>(dp: &Dataplane<D, S>) -> Vec<(String, String)> {
    dp.sysctl_entries("")
        .into_iter()
        .filter(|e| e.writable)
        .map(|e| (e.name, e.value))
        .collect()
}

/// The answer to [`crate::proto::Request::List`]: every entry at or under `prefix`, the
/// dataplane's and then the daemon's own.
pub fn list<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    daemon: Option<&DaemonStatus>,
    prefix: &str,
) -> Response {
    let mut entries = dp.sysctl_entries(prefix);
    if let Some(daemon) = daemon {
        entries.extend(
            daemon
                .entries()
                .into_iter()
                .filter(|e| under_prefix(&e.name, prefix)),
        );
    }
    Response::Entries { entries }
}

/// The answer to [`crate::proto::Request::Set`]: the assignments in order, each on its
/// own; a refused one changes nothing and does not stop the others.
pub fn set<D: Device, S: PacketStage>(
    dp: &mut Dataplane<D, S>,
    assignments: &[(String, String)],
) -> Response {
    let results = assignments
        .iter()
        .map(|(name, value)| {
            let old = dp.sysctl_get(name);
            let error = dp.sysctl_set(name, value).err().map(|e| e.to_string());
            SetResult {
                name: name.clone(),
                new: dp.sysctl_get(name),
                old,
                error,
            }
        })
        .collect();
    Response::Set { results }
}

/// Interface `i` as `polld ifconfig` shows it. The daemon knows what the dataplane does
/// not: the backend (`af_packet`, `af_xdp`, `tap`), the MAC and the addresses.
pub fn interface_status<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    i: usize,
    backend: &str,
    mac: Option<String>,
    addresses: Vec<String>,
) -> IfStatus {
    let name = dp.interfaces()[i].dev().name().to_string();
    let prefix = format!("dev.{name}.");
    let mut status = IfStatus {
        name,
        backend: backend.to_string(),
        mode: dp.interfaces()[i].mode().name().to_string(),
        link: String::new(),
        mac,
        addresses,
        counters: Vec::new(),
        rx_work: None,
    };
    for entry in dp.sysctl_entries(prefix.trim_end_matches('.')) {
        let Some(leaf) = entry.name.strip_prefix(&prefix) else {
            continue;
        };
        if leaf == "link" {
            status.link = entry.value;
        } else if !entry.writable {
            if let Ok(count) = entry.value.parse::<u64>() {
                status.counters.push((leaf.to_string(), count));
            }
        }
    }
    status
}
