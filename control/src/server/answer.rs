//! How a daemon answers control requests from its [`Dataplane`]: the poll thread calls
//! these from the closure it gives [`crate::server::Inbox::answer_pending`].
//!
//! Everything comes from the dataplane's own sysctl table (`kern.polling.*`,
//! `net.inet.ip.*`, `dev.<if>.*`), so `polld ctl` and `polld ifconfig` always show the
//! same names and values.

use std::path::PathBuf;

use polld_core::dataplane::IP_NODE;
use polld_core::poll::NODE;
use polld_core::sysctl::{read, Oid};
use polld_core::{Dataplane, Device, Kind, PacketStage, Poller, Reading, SysctlEntry, Value};

use crate::proto::{daemon_entry, DeviceInterrupts, IfStatus, Response, SetResult};

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

/// How late the tick timer woke the poll thread since start (`polld.tick_lateness_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TickLateness {
    pub wakeups: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
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
    pub tick_lateness: TickLateness,
    pub kernel_rx: KernelRxStatus,
    /// Each writable entry's value before the config was applied.
    pub defaults: Vec<(String, String)>,
    /// The receive interrupts of each interface whose device has vectors, by the
    /// interface's name: `dev.<if>.device_interrupts` and `device_interrupts_per_s`.
    pub device_interrupts: Vec<(String, DeviceInterrupts)>,
}

/// `dev.<if>.device_interrupts`: the device's own receive interrupts since boot, from
/// `/proc/interrupts` (polld's wakeups are `dev.<if>.interrupts`).
pub const DEVICE_INTERRUPTS: &str = "device_interrupts";
/// `dev.<if>.device_interrupts_per_s`: the same over the daemon's last second.
pub const DEVICE_INTERRUPTS_PER_S: &str = "device_interrupts_per_s";

/// The node the daemon's own entries hang under.
pub const DAEMON_NODE: &str = "polld";

/// The leaf of a `polld.*` name in [`daemon_entry`], at compile time.
const fn leaf(full: &'static str) -> &'static str {
    let node = DAEMON_NODE.as_bytes();
    let (head, rest) = full.as_bytes().split_at(node.len() + 1);
    let mut i = 0;
    while i < node.len() {
        assert!(head[i] == node[i], "a daemon entry outside polld.");
        i += 1;
    }
    match std::str::from_utf8(rest) {
        Ok(leaf) => leaf,
        Err(_) => panic!("a daemon entry name that is not UTF-8"),
    }
}

impl DaemonStatus {
    /// The daemon's own `polld.*` entries, each declared once, all read-only.
    pub const OIDS: &'static [Oid<DaemonStatus>] = &[
        Oid::read_only(
            leaf(daemon_entry::CONFIG),
            "Config file polld was started with",
            Kind::Gauge,
            |d| Value::from(d.config.display().to_string()),
        ),
        Oid::read_only(leaf(daemon_entry::PID), "Process id", Kind::Gauge, |d| {
            Value::from(d.pid)
        }),
        Oid::read_only(
            leaf(daemon_entry::CPU),
            "CPU of the poll thread: pinned, else last run on (-1 unknown)",
            Kind::Gauge,
            |d| Value::Int(d.cpu.map_or(-1, |c| c as i64)),
        ),
        Oid::read_only(
            leaf(daemon_entry::CPU_PINNED),
            "The poll thread is pinned to polld.cpu",
            Kind::Gauge,
            |d| Value::from(d.cpu_pinned),
        ),
        Oid::read_only(
            leaf(daemon_entry::CLOCK_NS),
            "Monotonic clock at this answer, ns",
            Kind::Gauge,
            |d| Value::from(d.clock_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::WORK_NS),
            "Time in device work (handlers, tasks, ticks, polls, input queue), ns",
            Kind::Counter,
            |d| Value::from(d.work_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::BUSY_POLL_NS),
            "Time busy polling, ns",
            Kind::Counter,
            |d| Value::from(d.busy_poll_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::IDLE_POLL_NS),
            "Time idle polling, ns",
            Kind::Counter,
            |d| Value::from(d.idle_poll_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::THREAD_CPU_NS),
            "CPU time of the poll thread (CLOCK_THREAD_CPUTIME_ID), ns",
            Kind::Counter,
            |d| Value::from(d.thread_cpu_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::TICK_WAKEUPS),
            "Tick wakeups of the poll thread timed for lateness",
            Kind::Counter,
            |d| Value::from(d.tick_lateness.wakeups),
        ),
        Oid::read_only(
            leaf(daemon_entry::TICK_LATENESS_P50_NS),
            "Median lateness of the tick wakeups since start (the kernel's timer path), ns",
            Kind::Gauge,
            |d| Value::from(d.tick_lateness.p50_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::TICK_LATENESS_P99_NS),
            "99th percentile of the tick wakeups' lateness since start, ns",
            Kind::Gauge,
            |d| Value::from(d.tick_lateness.p99_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::TICK_LATENESS_MAX_NS),
            "Largest lateness of the tick wakeups since start, ns",
            Kind::Gauge,
            |d| Value::from(d.tick_lateness.max_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::KERNEL_RX_NS),
            "CPU time of the kernel threads doing the interfaces' receive work, any CPU, ns",
            Kind::Counter,
            |d| Value::from(d.kernel_rx.ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::KERNEL_RX_ON_CPU_NS),
            "Part of kernel_rx_ns from threads that run only on polld.cpu, ns",
            Kind::Counter,
            |d| Value::from(d.kernel_rx.on_cpu_ns),
        ),
        Oid::read_only(
            leaf(daemon_entry::KERNEL_RX_THREADS),
            "Kernel threads doing the interfaces' receive work (outside polld's budget)",
            Kind::Gauge,
            |d| Value::from(d.kernel_rx.threads.as_str()),
        ),
        Oid::read_only(
            leaf(daemon_entry::KERNEL_RX_ELSEWHERE),
            "Kernel receive threads that may run on other CPUs than polld.cpu",
            Kind::Gauge,
            |d| Value::from(d.kernel_rx.elsewhere.as_str()),
        ),
        Oid::read_only(
            leaf(daemon_entry::KERNEL_RX_FOUND_BY),
            "How the kernel receive threads were found: netlink, thread names or none",
            Kind::Gauge,
            |d| Value::from(d.kernel_rx.found_by.as_str()),
        ),
    ];

    /// The `polld.*` entries, typed: the declared ones, then each writable entry's
    /// value before the config was applied.
    pub fn readings(&self) -> Vec<Reading> {
        let defaults_node = daemon_entry::DEFAULT_PREFIX.trim_end_matches('.');
        let defaults = self.defaults.iter().map(|(name, value)| Reading {
            node: defaults_node.to_string(),
            leaf: name.clone(),
            kind: Kind::Gauge,
            value: value_of(value),
            descr: "Value before the config file was applied".to_string(),
            allowed: None,
        });
        let device = self.device_interrupts.iter().flat_map(|(name, irqs)| {
            let node = format!("dev.{name}");
            let vectors = irqs.vectors.join(", ");
            let total = Reading {
                node: node.clone(),
                leaf: DEVICE_INTERRUPTS.to_string(),
                kind: Kind::Counter,
                value: Value::from(irqs.total),
                descr: format!("Receive interrupts of the device ({vectors}), all CPUs"),
                allowed: None,
            };
            let rate = irqs.per_s.map(|per_s| Reading {
                node,
                leaf: DEVICE_INTERRUPTS_PER_S.to_string(),
                kind: Kind::Gauge,
                value: Value::from(per_s),
                descr: format!("Receive interrupts of the device ({vectors}) over the last second"),
                allowed: None,
            });
            std::iter::once(total).chain(rate)
        });
        read(DAEMON_NODE, self, DaemonStatus::OIDS)
            .chain(defaults)
            .chain(device)
            .collect()
    }

    /// The `polld.*` entries, as `polld ctl -a` lists them.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        self.readings().into_iter().map(SysctlEntry::from).collect()
    }
}

/// A value given as text, typed: a number if it is one, else a word.
fn value_of(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(n) => Value::Int(n),
        Err(_) => Value::from(text),
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

/// The answer to [`crate::proto::Request::Snapshot`]: every entry typed, straight from
/// the declarations.
pub fn snapshot<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    daemon: Option<&DaemonStatus>,
) -> Response {
    let mut readings = dp.readings();
    readings.extend(daemon.map(DaemonStatus::readings).unwrap_or_default());
    Response::Snapshot { readings }
}

/// An entry given as text (a List answer, not a snapshot), typed: its kind from its
/// declaration where no dataplane is needed to find it (`kern.polling.*`, `polld.*`); for
/// the others the dataplane's declarations say the same as this rule: writable is a knob,
/// the interface counters count, the rest are levels.
pub fn typed(entries: impl IntoIterator<Item = SysctlEntry>) -> Vec<Reading> {
    // The declarations are read once for the whole list.
    let declared: std::collections::HashMap<String, Kind> = Poller::default()
        .readings(NODE)
        .into_iter()
        .chain(DaemonStatus::default().readings())
        .map(|r| (r.name(), r.kind))
        .collect();
    entries
        .into_iter()
        .map(|entry| {
            let (node, leaf) = split_name(&entry.name);
            let kind = match declared.get(&declared_name(&entry.name)) {
                Some(&kind) => kind,
                None if entry.writable => Kind::Knob,
                None => undeclared_kind(node, leaf),
            };
            Reading {
                node: node.to_string(),
                leaf: leaf.to_string(),
                kind,
                value: value_of(&entry.value),
                descr: entry.descr,
                allowed: None,
            }
        })
        .collect()
}

/// The declaration a name is an instance of: a poll CPU's `net.ifpoll.N.*` entry is its
/// `kern.polling.*` one, a `polld.percpu.N.*` entry the daemon's `polld.*` one.
fn declared_name(name: &str) -> String {
    if let Some((_, kern)) = polld_core::ifpoll::kern_name(name) {
        return kern;
    }
    match daemon_entry::split_per_cpu(name) {
        Some((_, entry)) => entry,
        None => name.to_string(),
    }
}

/// `dev.<if>.*` read-only entries that are levels; the others count.
const INTERFACE_GAUGES: [&str; 6] = [
    "queued",
    "rx_process_limit",
    "mode",
    "link",
    "auto_polling",
    DEVICE_INTERRUPTS_PER_S,
];

/// `net.inet.ip.*` read-only entries that are levels; the stage's others count.
const IP_GAUGES: [&str; 1] = ["intr_queue_len"];

fn undeclared_kind(node: &str, leaf: &str) -> Kind {
    let counts = if node == IP_NODE {
        !IP_GAUGES.contains(&leaf)
    } else {
        node.starts_with("dev.") && !INTERFACE_GAUGES.contains(&leaf)
    };
    if counts {
        Kind::Counter
    } else {
        Kind::Gauge
    }
}

/// Splits a full name into its node and leaf: `dev.<if>.<leaf>` (an interface name may
/// hold dots; a leaf is one word, `drops.<reason>` or `tx_drops.<reason>`), else at the
/// last dot.
fn split_name(name: &str) -> (&str, &str) {
    let at = match name.strip_prefix("dev.") {
        Some(rest) => rest
            .rfind(".drops.")
            .or_else(|| rest.rfind(".tx_drops."))
            .map(|i| i + "dev.".len()),
        None => None,
    };
    match at.or_else(|| name.rfind('.')) {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => ("", name),
    }
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
        umem: None,
        busy_poll: None,
        device_interrupts: None,
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
