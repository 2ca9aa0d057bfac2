//! The kernel's receive work for polld's interfaces: which kernel threads do it and how
//! much CPU time they used.
//!
//! On veth (AF_XDP copy mode, AF_PACKET) a frame's receive work — NAPI, the XDP program,
//! the copy into the UMEM or TPACKET ring — runs before polld sees the frame, in the
//! interface's threaded-NAPI kthread `napi/<ifname>-<id>` or, when NAPI is not threaded,
//! in softirq. polld's budget does not bound it, so it is shown as its own figure.
//!
//! The threads are found through the interface's NAPI ids (`napi-get` of the netdev
//! netlink family, asked in the calling thread's namespace, gives each instance's kthread
//! pid); when the kernel has no such family, by the kthreads' names, which cannot tell one
//! namespace's `veth1` from another's. [`FoundBy`] says which was used. A thread's CPU
//! time is its `/proc/<pid>/schedstat` run time (ns), else `utime + stime` of
//! `/proc/<pid>/stat` (clock ticks).

use std::fmt;

use crate::napi;

/// How the threads of an interface were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundBy {
    /// The interface's NAPI ids and their thread pids, from the netdev netlink family.
    Netlink,
    /// `napi/<ifname>-*` kthread names: may include another namespace's interface of the
    /// same name.
    ThreadName,
}

impl FoundBy {
    pub fn name(self) -> &'static str {
        match self {
            FoundBy::Netlink => "netlink",
            FoundBy::ThreadName => "thread names",
        }
    }
}

/// One kernel thread doing receive work for an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxThread {
    pub pid: u32,
    /// `napi/veth1-8193`.
    pub name: String,
    /// The CPUs it may run on (`Cpus_allowed_list`); empty when unknown.
    pub cpus: Vec<usize>,
}

impl fmt::Display for RxThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {}", self.name, self.pid)?;
        match self.cpus.as_slice() {
            [] => {}
            [cpu] => write!(f, ", CPU{cpu}")?,
            cpus => {
                let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
                write!(f, ", CPUs {}", list.join(","))?
            }
        }
        f.write_str(")")
    }
}

/// Where an interface's receive work runs, outside polld.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxWork {
    pub ifname: String,
    pub found_by: FoundBy,
    /// Its NAPI ids (empty when found by thread name or when it has no NAPI).
    pub napi_ids: Vec<u32>,
    /// Threaded-NAPI kthreads.
    pub threads: Vec<RxThread>,
    /// NAPI instances without a thread: their work runs in softirq.
    pub softirq_napis: usize,
}

impl RxWork {
    /// Finds the kernel threads doing `ifname`'s receive work, asking in the calling
    /// thread's namespace. Thread names are looked at only when the kernel has no netdev
    /// netlink family; an interface missing from the namespace has no threads (another
    /// namespace's interface of the same name is not it).
    pub fn find(ifname: &str) -> RxWork {
        if napi::ifindex(ifname).is_err() {
            return RxWork {
                ifname: ifname.to_string(),
                found_by: FoundBy::Netlink,
                napi_ids: Vec::new(),
                threads: Vec::new(),
                softirq_napis: 0,
            };
        }
        match napi::napis_of(ifname) {
            Ok(napis) => RxWork {
                ifname: ifname.to_string(),
                found_by: FoundBy::Netlink,
                napi_ids: napis.iter().map(|n| n.id).collect(),
                threads: napis
                    .iter()
                    .filter_map(|n| {
                        let pid = n.pid?;
                        Some(RxThread {
                            pid,
                            name: read_proc(pid, "comm")
                                .map(|c| c.trim().to_string())
                                .unwrap_or_else(|| format!("napi/{ifname}-{}", n.id)),
                            cpus: cpus_allowed(pid),
                        })
                    })
                    .collect(),
                softirq_napis: napis.iter().filter(|n| n.pid.is_none()).count(),
            },
            Err(_) => RxWork {
                ifname: ifname.to_string(),
                found_by: FoundBy::ThreadName,
                napi_ids: Vec::new(),
                threads: threads_named_for(ifname),
                softirq_napis: 0,
            },
        }
    }

    /// Where the work runs, for a person: `napi/veth1-8193 (pid 812, CPU1)`, `softirq`,
    /// or `softirq or no NAPI` when nothing was found.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self.threads.iter().map(RxThread::to_string).collect();
        if self.softirq_napis > 0 {
            parts.push("softirq (NAPI not threaded)".to_string());
        }
        if parts.is_empty() {
            return "softirq (no NAPI thread found)".to_string();
        }
        let mut text = parts.join(", ");
        if self.found_by == FoundBy::ThreadName {
            text.push_str(" [by thread name: may include other namespaces' interfaces]");
        }
        text
    }
}

/// The CPU time of the threads doing the receive work of some interfaces, at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxCpuTime {
    /// All their CPU time so far, ns.
    pub total_ns: u64,
    /// The part of it from threads allowed only on `cpu` (so all of it ran there), ns.
    pub on_cpu_ns: u64,
    /// Threads that may run elsewhere than `cpu`: their time is in `total_ns` only.
    pub elsewhere: Vec<String>,
}

impl RxCpuTime {
    /// The CPU time of every thread of `works`, split by whether it can run only on
    /// `cpu` (the poll thread's; `None`: no split, everything counts as elsewhere).
    pub fn read(works: &[RxWork], cpu: Option<usize>) -> RxCpuTime {
        let mut time = RxCpuTime::default();
        for thread in works.iter().flat_map(|w| &w.threads) {
            let Some(ns) = thread_cpu_ns(thread.pid) else {
                continue; // gone since it was found
            };
            time.total_ns += ns;
            if cpu.is_some_and(|c| thread.cpus == [c]) {
                time.on_cpu_ns += ns;
            } else {
                time.elsewhere.push(thread.name.clone());
            }
        }
        time
    }
}

fn read_proc(pid: u32, file: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).ok()
}

/// The CPUs thread `pid` may run on; empty when unknown.
pub fn cpus_allowed(pid: u32) -> Vec<usize> {
    read_proc(pid, "status")
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(parse_cpu_list)
        })
        .unwrap_or_default()
}

/// The CPU time thread `pid` has used, ns.
pub fn thread_cpu_ns(pid: u32) -> Option<u64> {
    ThreadClock::open(pid)?.read_ns()
}

/// Another thread's CPU clock, kept open: its `/proc/<pid>/schedstat` (else its `stat`),
/// read again from its start at each [`ThreadClock::read_ns`], one system call, where
/// [`thread_cpu_ns`] opens and closes the file (a path walk in procfs) each time. For a
/// reader on every tick.
#[derive(Debug)]
pub struct ThreadClock {
    file: std::fs::File,
    /// The file is `stat` (clock ticks), not `schedstat` (ns).
    ticks: bool,
}

impl ThreadClock {
    /// `None` when thread `pid` is gone.
    pub fn open(pid: u32) -> Option<ThreadClock> {
        let open = |name: &str| std::fs::File::open(format!("/proc/{pid}/{name}")).ok();
        match open("schedstat") {
            Some(file) => Some(ThreadClock { file, ticks: false }),
            None => Some(ThreadClock {
                file: open("stat")?,
                ticks: true,
            }),
        }
    }

    /// The thread's CPU time now, ns; `None` once it exited.
    pub fn read_ns(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 1024];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        if !self.ticks {
            return parse_schedstat(text);
        }
        let hz = rustix::param::clock_ticks_per_second().max(1);
        Some(parse_stat_cpu_ticks(text)? * (1_000_000_000 / hz))
    }
}

/// The pid of `ksoftirqd/<cpu>`, the kernel thread that runs CPU `cpu`'s softirqs when
/// there are more than the way out of an interrupt may run.
pub fn ksoftirqd_pid(cpu: usize) -> Option<u32> {
    let name = format!("ksoftirqd/{cpu}");
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .find(|&pid| read_proc(pid, "comm").is_some_and(|comm| comm.trim() == name))
}

/// The CPU time all threads of process `pid` have used, ns: the sum of the threads'
/// run times the scheduler measured (not the clock-tick samples of `utime + stime`,
/// which read far off for a thread that sleeps and wakes in step with the tick). Threads
/// that already exited are not counted. `None` when the process is gone.
pub fn process_cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let tids = tasks.filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok());
    Some(tids.filter_map(thread_cpu_ns).sum())
}

/// The run time (first field, ns) of a `/proc/<pid>/schedstat`.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `utime + stime` (clock ticks) of a `/proc/<pid>/stat` line. The command name may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat_cpu_ticks(text: &str) -> Option<u64> {
    let after_name = &text[text.rfind(')')? + 1..];
    // After the name: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime(14) stime(15).
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A kernel CPU list: `1`, `0-3`, `0,2-3`.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Whether a thread named `comm` is a threaded-NAPI kthread of `ifname`: `napi/<ifname>-<id>`,
/// cut to the kernel's 15 characters of thread name.
pub fn is_napi_thread_of(comm: &str, ifname: &str) -> bool {
    const COMM_LEN: usize = 15;
    let prefix = format!("napi/{ifname}-");
    if prefix.len() >= COMM_LEN {
        return comm.len() == COMM_LEN && prefix.starts_with(comm);
    }
    comm.strip_prefix(&prefix)
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Every kthread named `napi/<ifname>-*`, in any namespace.
fn threads_named_for(ifname: &str) -> Vec<RxThread> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut threads: Vec<RxThread> = dir
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let comm = read_proc(pid, "comm")?.trim().to_string();
            is_napi_thread_of(&comm, ifname).then(|| RxThread {
                pid,
                name: comm,
                cpus: cpus_allowed(pid),
            })
        })
        .collect();
    threads.sort_by_key(|t| t.pid);
    threads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_sums_its_threads() {
        let before = process_cpu_ns(std::process::id()).expect("our own process");
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let burner = std::thread::spawn(move || {
            let start = crate::clock::thread_cpu_ns();
            while crate::clock::thread_cpu_ns() - start < 50_000_000 {
                std::hint::spin_loop();
            }
            // Still alive while the process is measured: an exited thread's time is gone.
            let _ = wait.recv();
        });
        // The burner's 50 ms, read while it waits (a busy machine may take a while).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut after = before;
        while after.saturating_sub(before) < 50_000_000 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            after = process_cpu_ns(std::process::id()).unwrap();
        }
        drop(done);
        burner.join().unwrap();
        let grew = after.saturating_sub(before);
        assert!(grew >= 50_000_000, "{grew} ns");
        assert_eq!(process_cpu_ns(u32::MAX), None);
    }

    #[test]
    fn a_thread_clock_kept_open_reads_the_thread_anew_until_it_exits() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (go, started) = std::sync::mpsc::channel::<()>();
        let (burnt_tx, burnt) = std::sync::mpsc::channel::<()>();
        let (exit, exit_rx) = std::sync::mpsc::channel::<()>();
        let burner = std::thread::spawn(move || {
            tid_tx
                .send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                .unwrap();
            let _ = started.recv();
            let start = crate::clock::thread_cpu_ns();
            while crate::clock::thread_cpu_ns() - start < 50_000_000 {
                std::hint::spin_loop();
            }
            burnt_tx.send(()).unwrap();
            let _ = exit_rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let clock = ThreadClock::open(tid).expect("a live thread");
        let before = clock.read_ns().expect("a live thread's time");
        go.send(()).unwrap();
        burnt.recv().unwrap();
        // The same open file, read again while the thread lives: its 50 ms.
        let after = clock.read_ns().expect("a live thread's time");
        assert!(after - before >= 50_000_000, "{before} -> {after}");
        drop(exit);
        burner.join().unwrap();
        assert_eq!(clock.read_ns(), None, "a thread that exited has no time");
        assert!(ThreadClock::open(u32::MAX).is_none());
    }

    #[test]
    fn schedstat_gives_the_run_time_in_ns() {
        assert_eq!(parse_schedstat("123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn stat_gives_utime_plus_stime_even_with_a_tricky_name() {
        let line = "812 (napi/veth1-8193) S 2 0 0 0 -1 2129984 0 0 0 0 7 1234 0 0 20 0 1 0 \
                    300 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0";
        assert_eq!(parse_stat_cpu_ticks(line), Some(1241));
        let odd = "9 (a) b) c) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0";
        assert_eq!(parse_stat_cpu_ticks(odd), Some(11));
        assert_eq!(parse_stat_cpu_ticks("9 (short) R 1"), None);
    }

    #[test]
    fn cpu_lists_expand_ranges() {
        assert_eq!(parse_cpu_list("1\n"), Some(vec![1]));
        assert_eq!(parse_cpu_list("0,2-4"), Some(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn napi_thread_names_match_their_interface_only() {
        assert!(is_napi_thread_of("napi/veth1-8193", "veth1"));
        assert!(!is_napi_thread_of("napi/veth10-8193", "veth1"));
        assert!(!is_napi_thread_of("napi/veth1-", "veth1"));
        assert!(!is_napi_thread_of("ksoftirqd/1", "veth1"));
        // A long name is cut to 15 characters by the kernel.
        assert!(is_napi_thread_of("napi/enp0s31f6-", "enp0s31f6"));
        assert!(is_napi_thread_of("napi/longinterf", "longinterface0"));
    }

    #[test]
    fn described_work_names_threads_cpus_and_softirq() {
        let mut work = RxWork {
            ifname: "veth1".into(),
            found_by: FoundBy::Netlink,
            napi_ids: vec![8193],
            threads: vec![RxThread {
                pid: 812,
                name: "napi/veth1-8193".into(),
                cpus: vec![1],
            }],
            softirq_napis: 0,
        };
        assert_eq!(work.describe(), "napi/veth1-8193 (pid 812, CPU1)");
        work.found_by = FoundBy::ThreadName;
        work.threads[0].cpus = vec![0, 1];
        assert_eq!(
            work.describe(),
            "napi/veth1-8193 (pid 812, CPUs 0,1) [by thread name: may include other \
             namespaces' interfaces]"
        );
        work.found_by = FoundBy::Netlink;
        work.threads.clear();
        work.softirq_napis = 1;
        assert_eq!(work.describe(), "softirq (NAPI not threaded)");
    }
}
