//! The daemon's own entries, under `polld.`: what `polld run` knows about itself beyond
//! the dataplane (its config, its poll thread, its time accounts, the kernel's receive
//! work), each declared once ([`polld_core::sysctl`]) with its name, kind, description
//! and how `/metrics` serves it. [`daemon_entry`] holds their full names, by which
//! `polld stat`, `/metrics` and the tests read them.

use std::path::PathBuf;

use polld_core::dataplane::DEV_NODE;
use polld_core::sysctl::{read, Metric};
use polld_core::{sysctl_oids, Kind, Reading, SysctlEntry, Value};

use crate::proto::DeviceInterrupts;
use crate::server::answer::value_of;

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

/// The config reloads since start (SIGHUP or `polld ctl reload`): `polld.reloads`,
/// `polld.reload_failures`, `polld.reload_time`, `polld.reload_error`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadStatus {
    /// Reloads whose file was applied.
    pub applied: u64,
    /// Reloads whose file was refused.
    pub refused: u64,
    /// When the last reload ended, in seconds since the epoch; 0 before the first.
    pub time_s: u64,
    /// Why the last reload was refused, never empty when it was; empty when it was
    /// applied (or none ran).
    pub error: String,
}

/// The router's copy of the kernel's tables (`tables = "kernel"`; all 0 with the file's):
/// `polld.tables_*`, the poll thread's (the first poll CPU's with several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TablesStatus {
    /// IPv4 and IPv6 routes the router holds.
    pub routes: u64,
    pub routes6: u64,
    /// Neighbour entries with a link-layer address (IPv4 and IPv6).
    pub neighbours: u64,
    /// The kernel's changes applied since start.
    pub changes: u64,
    /// Whole dumps read: the first, and one per overrun.
    pub dumps: u64,
    /// Next hops without a neighbour entry the kernel was asked to resolve.
    pub resolves: u64,
    /// When the router last took a dump or a change, in seconds since the epoch.
    pub time_s: u64,
}

/// What the daemon adds to the dataplane's entries, under `polld.` (declared below, their
/// names in [`daemon_entry`]).
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
    pub reload: ReloadStatus,
    pub tables: TablesStatus,
}

sysctl_oids! {
    /// The daemon's own `polld.*` entries, all read-only, in listing order.
    impl DaemonStatus: OIDS, names daemon_entry under "polld" {
        /// The config file polld was started with, as an absolute path.
        CONFIG = "config": Gauge "Config file polld was started with",
            |d| Value::from(d.config.display().to_string()), metric Metric::Hidden;
        /// The daemon's process id.
        PID = "pid": Gauge "Process id", |d| Value::from(d.pid), metric Metric::Hidden;
        /// The CPU the poll thread is pinned to, else the one it last ran on.
        CPU = "cpu": Gauge "CPU of the poll thread: pinned, else last run on (-1 unknown)",
            |d| Value::Int(d.cpu.map_or(-1, |c| c as i64)),
            metric Metric::Named("polld_poll_thread_cpu");
        /// 1 when the poll thread is pinned (`[daemon] cpu`), else 0.
        CPU_PINNED = "cpu_pinned": Gauge "The poll thread is pinned to polld.cpu",
            |d| Value::from(d.cpu_pinned), metric Metric::Hidden;
        /// The daemon's monotonic clock when it answered, in ns: the time base of the
        /// `_ns` counters, so rates need no clock of the client's.
        CLOCK_NS = "clock_ns": Gauge "Monotonic clock at this answer, ns",
            |d| Value::from(d.clock_ns), metric Metric::Hidden;
        /// Time in device work: interrupt handlers, tasks, ticks, poll chunks, the
        /// input-queue drain and pollmore, in ns.
        WORK_NS = "work_ns": Counter
            "Time in device work (handlers, tasks, ticks, polls, input queue), ns",
            |d| Value::from(d.work_ns),
            metric Metric::Seconds {
                name: "polld_device_work_seconds_total",
                help: "Time in device work: handlers, tasks, ticks, polls, input queue",
            };
        /// Time spent busy polling (interfaces in `busy` mode), in ns.
        BUSY_POLL_NS = "busy_poll_ns": Counter "Time busy polling, ns",
            |d| Value::from(d.busy_poll_ns),
            metric Metric::Seconds {
                name: "polld_busy_poll_seconds_total",
                help: "Time spent busy polling",
            };
        /// Time spent idle polling (`kern.polling.idle_poll`), in ns.
        IDLE_POLL_NS = "idle_poll_ns": Counter "Time idle polling, ns",
            |d| Value::from(d.idle_poll_ns),
            metric Metric::Seconds {
                name: "polld_idle_poll_seconds_total",
                help: "Time spent idle polling",
            };
        /// The poll thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`), in ns: a check on
        /// the monotonic accounts above, which also count time the thread was preempted.
        THREAD_CPU_NS = "thread_cpu_ns": Counter
            "CPU time of the poll thread (CLOCK_THREAD_CPUTIME_ID), ns",
            |d| Value::from(d.thread_cpu_ns),
            metric Metric::Seconds {
                name: "polld_poll_thread_cpu_seconds_total",
                help: "CPU time of the poll thread (CLOCK_THREAD_CPUTIME_ID)",
            };
        /// Tick wakeups the poll thread has timed (each read of the tick timer).
        TICK_WAKEUPS = "tick_wakeups": Counter "Tick wakeups of the poll thread timed for lateness",
            |d| Value::from(d.tick_lateness.wakeups), metric Metric::Hidden;
        /// How late the tick timer woke the poll thread, from the tick's expiry to the
        /// read, since start, in ns: the median (1 µs resolution).
        TICK_LATENESS_P50_NS = "tick_lateness_p50_ns": Gauge
            "Median lateness of the tick wakeups since start (the kernel's timer path), ns",
            |d| Value::from(d.tick_lateness.p50_ns), metric Metric::Hidden;
        /// The same, the 99th percentile.
        TICK_LATENESS_P99_NS = "tick_lateness_p99_ns": Gauge
            "99th percentile of the tick wakeups' lateness since start, ns",
            |d| Value::from(d.tick_lateness.p99_ns), metric Metric::Hidden;
        /// The same, the worst.
        TICK_LATENESS_MAX_NS = "tick_lateness_max_ns": Gauge
            "Largest lateness of the tick wakeups since start, ns",
            |d| Value::from(d.tick_lateness.max_ns), metric Metric::Hidden;
        /// CPU time of the kernel threads doing the receive work of polld's interfaces
        /// (threaded NAPI), on any CPU, in ns. Outside polld's budget.
        KERNEL_RX_NS = "kernel_rx_ns": Counter
            "CPU time of the kernel threads doing the interfaces' receive work, any CPU, ns",
            |d| Value::from(d.kernel_rx.ns),
            metric Metric::Seconds {
                name: "polld_kernel_rx_seconds_total",
                help: "CPU time of the kernel threads doing the interfaces' receive work, outside polld's budget",
            };
        /// The part of `kernel_rx_ns` from threads that may run only on `polld.cpu`, in ns.
        KERNEL_RX_ON_CPU_NS = "kernel_rx_on_cpu_ns": Counter
            "Part of kernel_rx_ns from threads that run only on polld.cpu, ns",
            |d| Value::from(d.kernel_rx.on_cpu_ns),
            metric Metric::Seconds {
                name: "polld_kernel_rx_on_poll_cpu_seconds_total",
                help: "Part of polld_kernel_rx_seconds_total from threads that run only on the poll thread's CPU",
            };
        /// Those threads: `napi/veth1-8193 (pid 812, CPU1), ...`.
        KERNEL_RX_THREADS = "kernel_rx_threads": Gauge
            "Kernel threads doing the interfaces' receive work (outside polld's budget)",
            |d| Value::from(d.kernel_rx.threads.as_str()), metric Metric::Hidden;
        /// Those of them that may run on other CPUs than `polld.cpu`.
        KERNEL_RX_ELSEWHERE = "kernel_rx_elsewhere": Gauge
            "Kernel receive threads that may run on other CPUs than polld.cpu",
            |d| Value::from(d.kernel_rx.elsewhere.as_str()), metric Metric::Hidden;
        /// How they were found: `netlink` (the interfaces' NAPI ids), `thread names`,
        /// `none`.
        KERNEL_RX_FOUND_BY = "kernel_rx_found_by": Gauge
            "How the kernel receive threads were found: netlink, thread names or none",
            |d| Value::from(d.kernel_rx.found_by.as_str()), metric Metric::Labelled("method");
        /// Config reloads whose file was applied (SIGHUP, `polld ctl reload`).
        RELOADS = "reloads": Counter "Config reloads applied (SIGHUP, polld ctl reload)",
            |d| Value::from(d.reload.applied), metric Metric::Labelled("value");
        /// Config reloads whose file was refused; polld went on with the config it had.
        RELOAD_FAILURES = "reload_failures": Counter
            "Config reloads refused (polld went on with the config it had)",
            |d| Value::from(d.reload.refused), metric Metric::Labelled("value");
        /// When the last reload ended, applied or refused, in seconds since the epoch (0
        /// before the first).
        RELOAD_TIME = "reload_time": Gauge
            "When the last config reload ended, seconds since the epoch (0: none yet)",
            |d| Value::from(d.reload.time_s),
            metric Metric::Named("polld_last_reload_timestamp_seconds");
        /// 1 when the last reload was applied (or none ran: the config polld started
        /// with was), 0 when it was refused.
        RELOAD_OK = "reload_ok": Gauge
            "The last config reload was applied (1; also before the first) or refused (0)",
            |d| Value::from(d.reload.error.is_empty()),
            metric Metric::Named("polld_last_reload_successful");
        /// Why the last reload was refused, as logged; empty when it was applied.
        RELOAD_ERROR = "reload_error": Gauge
            "Why the last config reload was refused (empty: applied)",
            |d| Value::from(d.reload.error.as_str()), metric Metric::Hidden;
        /// IPv4 routes the router holds from the kernel's tables.
        TABLES_ROUTES = "tables_routes": Gauge
            "IPv4 routes the router holds from the kernel's tables",
            |d| Value::from(d.tables.routes), metric Metric::Named("polld_kernel_table_routes");
        /// IPv6 routes the router holds from the kernel's tables.
        TABLES_ROUTES6 = "tables_routes6": Gauge
            "IPv6 routes the router holds from the kernel's tables",
            |d| Value::from(d.tables.routes6), metric Metric::Named("polld_kernel_table_routes6");
        /// Neighbour entries the router holds from the kernel's tables.
        TABLES_NEIGHBOURS = "tables_neighbours": Gauge
            "Neighbour entries the router holds from the kernel's tables",
            |d| Value::from(d.tables.neighbours),
            metric Metric::Named("polld_kernel_table_neighbours");
        /// Route, address and neighbour changes of the kernel applied since start.
        TABLES_CHANGES = "tables_changes": Counter
            "Changes of the kernel's tables applied since start",
            |d| Value::from(d.tables.changes), metric Metric::ByNode;
        /// Whole reads of the kernel's tables: at start, and after each overrun.
        TABLES_DUMPS = "tables_dumps": Counter
            "Whole reads of the kernel's tables (start, overruns)",
            |d| Value::from(d.tables.dumps), metric Metric::ByNode;
        /// Next hops without a neighbour entry that frames were routed to, which the
        /// kernel was asked to resolve (`ip neigh ... use`), at most once per
        /// `arp.retry_ms` each.
        TABLES_RESOLVES = "tables_resolves": Counter
            "Next hops the kernel was asked to resolve",
            |d| Value::from(d.tables.resolves), metric Metric::ByNode;
        /// When the router last took the kernel's tables or a change, in seconds since
        /// the epoch (0: never, tables = "file").
        TABLES_TIME = "tables_time": Gauge
            "When the router last took a change of the kernel's tables, seconds since the epoch",
            |d| Value::from(d.tables.time_s),
            metric Metric::Named("polld_kernel_tables_last_update_timestamp_seconds");
    }
}

/// `polld.default.<name>`: the value of each writable entry before the config file's
/// modes and knobs were applied, which `polld ctl --save` compares against.
pub const DEFAULT_PREFIX: &str = "polld.default.";

/// `dev.<if>.device_interrupts`: the device's own receive interrupts since boot, from
/// `/proc/interrupts` (polld's wakeups are `dev.<if>.interrupts`).
pub const DEVICE_INTERRUPTS: &str = "device_interrupts";
/// `dev.<if>.device_interrupts_per_s`: the same over the daemon's last second.
pub const DEVICE_INTERRUPTS_PER_S: &str = "device_interrupts_per_s";

/// `polld.percpu.N.<leaf>`: poll thread N's copy of the per-thread entry `polld.<leaf>`
/// (`[daemon] cpus`).
pub fn per_cpu(cpu: usize, entry: &str) -> String {
    let node = daemon_entry::NODE;
    let leaf = entry.trim_start_matches(&format!("{node}."));
    format!("{node}.percpu.{cpu}.{leaf}")
}

/// The CPU and the `polld.<leaf>` entry a `polld.percpu.N.<leaf>` name is a copy of.
pub fn split_per_cpu(name: &str) -> Option<(usize, String)> {
    let node = daemon_entry::NODE;
    let rest = name.strip_prefix(node)?.strip_prefix(".percpu.")?;
    let (cpu, leaf) = rest.split_once('.')?;
    Some((cpu.parse().ok()?, format!("{node}.{leaf}")))
}

/// How `/metrics` serves the daemon's entry `polld.<leaf>`, as declared.
pub fn metric_of(leaf: &str) -> Option<Metric> {
    polld_core::sysctl::Oid::find_leaf(&DaemonStatus::OIDS, leaf).map(|oid| oid.metric)
}

impl DaemonStatus {
    /// The `polld.*` entries, typed: the declared ones, then each writable entry's
    /// value before the config was applied.
    pub fn readings(&self) -> Vec<Reading> {
        let defaults_node = DEFAULT_PREFIX.trim_end_matches('.');
        let defaults = self.defaults.iter().map(|(name, value)| Reading {
            node: defaults_node.to_string(),
            leaf: name.clone(),
            kind: Kind::Gauge,
            value: value_of(value),
            descr: "Value before the config file was applied".to_string(),
            allowed: None,
        });
        let device = self.device_interrupts.iter().flat_map(|(name, irqs)| {
            let node = format!("{DEV_NODE}.{name}");
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
        read(daemon_entry::NODE, self, &DaemonStatus::OIDS)
            .chain(defaults)
            .chain(device)
            .collect()
    }

    /// The `polld.*` entries, as `polld ctl -a` lists them.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        self.readings().into_iter().map(SysctlEntry::from).collect()
    }
}
