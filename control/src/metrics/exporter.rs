//! What every Prometheus exporter serves about itself beside its own metrics: the build it
//! is (`polld_build_info`) and the process it runs as (`process_*`, under the names and
//! units of the client libraries' process collector, so dashboards made for any exporter
//! work on polld's).
//!
//! The process is read from `/proc` by the metrics thread when `/metrics` is scraped,
//! without asking the poll thread: `/proc/self/stat` (CPU time, memory, start),
//! `/proc/self/fd` (open descriptors), `/proc/stat`'s `btime` (the boot time the start is
//! counted from) and the `RLIMIT_NOFILE` soft limit (the `Max open files` of
//! `/proc/self/limits`). The build is fixed when polld is compiled (`build.rs`).

use std::io;

use rustix::process::{getrlimit, Resource};

use super::exposition::{Families, Type};

/// The build `polld_build_info` describes, as its labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Build {
    /// The workspace's version (`Cargo.toml`).
    pub version: &'static str,
    /// The commit the workspace was checked out at, or `unknown` outside a git checkout.
    pub commit: &'static str,
    /// The compiler's `rustc --version`, without `rustc`.
    pub rustc: &'static str,
}

/// This build.
/// `polld --version`: the version and the commit it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("POLLD_COMMIT"),
    ")"
);

pub const BUILD: Build = Build {
    version: env!("CARGO_PKG_VERSION"),
    commit: env!("POLLD_COMMIT"),
    rustc: env!("POLLD_RUSTC"),
};

/// The process as the process collector reports it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProcessStats {
    /// User and system CPU time of all its threads, seconds.
    pub cpu_seconds: f64,
    /// Resident set size, bytes.
    pub resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub virtual_bytes: u64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit on open file descriptors; `None` when unlimited.
    pub max_fds: Option<u64>,
    /// When the process started, seconds since the epoch.
    pub start_time_seconds: f64,
}

/// The fields of `/proc/<pid>/stat` the collector uses, in the kernel's units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    /// `utime + stime`, clock ticks.
    cpu_ticks: u64,
    /// `starttime`: clock ticks after boot.
    start_ticks: u64,
    /// `vsize`, bytes.
    vsize: u64,
    /// `rss`, pages.
    rss_pages: u64,
}

impl ProcessStats {
    /// Reads this process's figures now.
    pub fn read() -> io::Result<ProcessStats> {
        let stat = parse_stat(&std::fs::read_to_string("/proc/self/stat")?)?;
        let boot = parse_btime(&std::fs::read_to_string("/proc/stat")?)?;
        // The directory's own descriptor is among those counted, as the collectors count.
        let open_fds = std::fs::read_dir("/proc/self/fd")?.count() as u64;
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        Ok(ProcessStats {
            cpu_seconds: stat.cpu_ticks as f64 / ticks,
            resident_bytes: stat.rss_pages * rustix::param::page_size() as u64,
            virtual_bytes: stat.vsize,
            open_fds,
            max_fds: getrlimit(Resource::Nofile).current,
            start_time_seconds: boot as f64 + stat.start_ticks as f64 / ticks,
        })
    }
}

/// The fields of a `/proc/<pid>/stat` line. The command name, in parentheses, may hold
/// spaces and parentheses itself: the fields are counted from the last `)`.
fn parse_stat(line: &str) -> io::Result<Stat> {
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "malformed /proc/self/stat");
    let (_, after_comm) = line.rsplit_once(')').ok_or_else(malformed)?;
    // Field 3 (`state`) is the first after the name; proc(5) numbers them from 1.
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    let field = |n: usize| -> io::Result<u64> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or_else(malformed)
    };
    Ok(Stat {
        cpu_ticks: field(14)? + field(15)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time in `/proc/stat`, seconds since the epoch.
fn parse_btime(text: &str) -> io::Result<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no btime in /proc/stat"))
}

/// A family of the process collector: its name, type and help, each declared once, and
/// its value in a reading (`None`: no sample).
struct ProcessFamily {
    name: &'static str,
    kind: Type,
    help: &'static str,
    value: fn(&ProcessStats) -> Option<String>,
}

const PROCESS_FAMILIES: [ProcessFamily; 6] = [
    ProcessFamily {
        name: "process_cpu_seconds_total",
        kind: Type::Counter,
        help: "Total user and system CPU time spent in seconds",
        value: |p| Some(p.cpu_seconds.to_string()),
    },
    ProcessFamily {
        name: "process_resident_memory_bytes",
        kind: Type::Gauge,
        help: "Resident memory size in bytes",
        value: |p| Some(p.resident_bytes.to_string()),
    },
    ProcessFamily {
        name: "process_virtual_memory_bytes",
        kind: Type::Gauge,
        help: "Virtual memory size in bytes",
        value: |p| Some(p.virtual_bytes.to_string()),
    },
    ProcessFamily {
        name: "process_open_fds",
        kind: Type::Gauge,
        help: "Number of open file descriptors",
        value: |p| Some(p.open_fds.to_string()),
    },
    ProcessFamily {
        name: "process_max_fds",
        kind: Type::Gauge,
        help: "Maximum number of open file descriptors (no sample: unlimited)",
        value: |p| p.max_fds.map(|n| n.to_string()),
    },
    ProcessFamily {
        name: "process_start_time_seconds",
        kind: Type::Gauge,
        help: "Start time of the process since unix epoch in seconds",
        value: |p| Some(p.start_time_seconds.to_string()),
    },
];

/// Adds `polld_build_info` and the process families; with `process` `None` (`/proc`
/// could not be read) the process families are declared without samples.
pub(super) fn add(families: &mut Families, build: &Build, process: Option<&ProcessStats>) {
    families.add(
        "polld_build_info".into(),
        "The build polld runs: its version, the commit it was built from, the compiler (always 1)",
        Type::Gauge,
        vec![
            ("version", build.version.into()),
            ("commit", build.commit.into()),
            ("rustc", build.rustc.into()),
        ],
        "1".into(),
    );
    for family in &PROCESS_FAMILIES {
        families.declare(family.name.into(), family.help, family.kind);
        if let Some(value) = process.and_then(family.value) {
            families.add(
                family.name.into(),
                family.help,
                family.kind,
                Vec::new(),
                value,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a parenthesis, then fields 3 to 24.
        let line = "4242 (po) ld) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    150 30 0 0 20 0 3 0 777 123456789 2048 18446744073709551615";
        assert_eq!(
            parse_stat(line).unwrap(),
            Stat {
                cpu_ticks: 180,
                start_ticks: 777,
                vsize: 123456789,
                rss_pages: 2048,
            }
        );
        assert!(parse_stat("4242 (polld S 1").is_err());
        assert!(parse_stat("4242 (polld) S 1 2").is_err());
    }

    #[test]
    fn the_boot_time_is_the_btime_line() {
        let text = "cpu  1 2 3\ncpu0 1 2 3\nintr 5 0 0\nbtime 1765000000\nprocesses 9\n";
        assert_eq!(parse_btime(text).unwrap(), 1_765_000_000);
        assert!(parse_btime("cpu 1 2 3\n").is_err());
    }
}
