//! `[daemon] cpus = [..]`: one poll thread per CPU, as DragonFly's ifpoll has one poll
//! context per CPU (docs/algorithm.md §8).
//!
//! Each poll thread is pinned to its CPU and runs its own [`Executor`] over its own
//! dataplane: its interfaces ([`RunConfig::per_cpu`]), its own [`polld_core::Poller`] with
//! its own tick, burst and `user_frac` accounting, its own packet stage. The threads share
//! nothing, so polld does not hand frames between CPUs: each CPU routes among its own
//! interfaces, and a frame for a network on another CPU is dropped there as `no_route`.
//! An interface with queues (`queues`, `fanout`: [`crate::queues`]) is one device on
//! each CPU that polls one of its queues, so a CPU with a queue of each of two such
//! interfaces forwards between them itself, transmitting through its own queue.
//!
//! The main thread keeps the stop signals and the control socket. It passes a signal on to
//! every poll thread, and routes each control request ([`route`]):
//!
//! - `net.ifpoll.N.*` is CPU N's `kern.polling.*` ([`polld_core::ifpoll::kern_name`]);
//! - `kern.polling.*` reads the first poll CPU's and writes every CPU's;
//! - `dev.<if>.*` goes to the CPU of that interface, or every CPU with one of its
//!   queues; read, a queued interface's entries are listed per queue as
//!   `dev.<if>.queue<N>.*`, and its counters summed under `dev.<if>.*`;
//! - anything else (`net.inet.ip.*`) is written on every CPU; read, its counters are
//!   summed;
//! - `polld.*` is the first poll CPU's thread's, as `kern.polling.*` is its poller's (so
//!   `polld stat`'s CPU split is that CPU's); every thread's CPU, time accounts and CPU
//!   time are listed as `polld.percpu.N.*`.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use polld_control::answer::{typed, under_prefix};
use polld_control::daemon::daemon_entry;
use polld_control::proto::{IfStatus, Request, Response, SetResult};
use polld_control::server::{self, EventFd, Inbox, Requester};
use polld_core::ifpoll::{kern_name, per_cpu_name};
use polld_core::SysctlEntry;

use crate::config::RunConfig;
use crate::daemon::{self, FinalCounters, RunArgs, RunError};
use crate::executor::Executor;
use crate::queues::{queue_name, QueueGroups};
use crate::sys::{Epoll, SignalRelay, Signals};
use polld_core::{IfCounters, Interface, LinkState};

/// The main thread's end of one poll thread.
struct PollThread {
    cpu: usize,
    interfaces: Vec<String>,
    /// The interfaces of which this CPU polls one queue, with that queue's number.
    queues: Vec<(String, u32)>,
    requester: Requester,
    relay: SignalRelay,
    handle: JoinHandle<Result<FinalCounters, RunError>>,
}

impl PollThread {
    /// What this CPU polls: its interfaces, a queue named as such (`veth1.queue0`).
    fn polled(&self) -> Vec<String> {
        self.interfaces
            .iter()
            .map(|i| match queue_of(&self.queues, i) {
                Some(q) => queue_name(i, q),
                None => i.clone(),
            })
            .collect()
    }
}

/// The queue of interface `ifname` a CPU polls, if it polls one of its `queues`.
fn queue_of(queues: &[(String, u32)], ifname: &str) -> Option<u32> {
    queues.iter().find(|(i, _)| i == ifname).map(|&(_, q)| q)
}

/// The row of one of a CPU's interfaces, with the interface's name, under the name of
/// its queue if it is one of the CPU's `queues`.
fn label<T>(queues: &[(String, u32)], (mut status, value): (IfStatus, T)) -> Row<T> {
    let interface = status.name.clone();
    if let Some(q) = queue_of(queues, &interface) {
        status.name = queue_name(&interface, q);
    }
    (interface, status, value)
}

/// A poll thread's row of an interface or a queue: the interface's name, the row.
type Row<T> = (String, IfStatus, T);

/// The per-thread daemon entries, listed per CPU under `polld.percpu.N.`.
const PER_THREAD: [&str; 5] = [
    daemon_entry::CPU,
    daemon_entry::WORK_NS,
    daemon_entry::BUSY_POLL_NS,
    daemon_entry::IDLE_POLL_NS,
    daemon_entry::THREAD_CPU_NS,
];

const TOKEN_SIGNAL: u64 = 0;
const TOKEN_CONTROL: u64 = 1;
const TOKEN_EXITED: u64 = 2;

/// Runs `polld run` with one poll thread per CPU of `[daemon] cpus`; returns once stopped
/// by a signal, or with the error of a poll thread that could not start or stopped.
pub(crate) fn run(
    config: &RunConfig,
    args: &RunArgs,
    socket: &Path,
    signals: Signals,
    out: &mut dyn Write,
) -> Result<(), RunError> {
    let exited = Arc::new(EventFd::new().map_err(RunError::Io)?);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<&'static str, ()>>();
    let mut threads: Vec<PollThread> = Vec::new();
    let groups = QueueGroups::of_config(config);
    for (cpu, part) in config.per_cpu() {
        let (requester, inbox) = server::channel().map_err(RunError::Io)?;
        let (thread_signals, relay) = Signals::relay().map_err(RunError::Io)?;
        let interfaces = part.devices.iter().map(|d| d.name.clone()).collect();
        let queues = part
            .devices
            .iter()
            .filter_map(|d| Some((d.name.clone(), d.queues[d.this_queue?])))
            .collect();
        let (pcap, groups) = (args.pcap.clone(), groups.clone());
        let (ready, exited) = (ready_tx.clone(), exited.clone());
        let handle = std::thread::Builder::new()
            .name(format!("polld-cpu{cpu}"))
            .spawn(move || {
                let result = poll_thread(
                    cpu,
                    &part,
                    pcap.as_deref(),
                    &groups,
                    thread_signals,
                    inbox,
                    &ready,
                );
                if result.is_err() {
                    exited.signal();
                }
                result
            })
            .map_err(|e| RunError::Setup(format!("starting the poll thread of CPU {cpu}: {e}")))?;
        threads.push(PollThread {
            cpu,
            interfaces,
            queues,
            requester,
            relay,
            handle,
        });
    }
    drop(ready_tx);
    let mut policy = "";
    for _ in 0..threads.len() {
        match ready_rx.recv() {
            Ok(Ok(p)) => policy = p,
            // A thread that failed says why when joined.
            Ok(Err(())) | Err(_) => return Err(stop_all(threads, libc::SIGTERM).unwrap_err()),
        }
    }
    // The poll threads keep their own; the main thread only answers and relays.
    crate::caps::drop_all_but(daemon::kept_caps(config))
        .map_err(|e| RunError::Setup(format!("dropping capabilities: {e}")))?;
    let (server, inbox, metrics) = daemon::start_control(config, socket)?;
    let placement: Vec<String> = threads
        .iter()
        .map(|t| format!("CPU {}: {}", t.cpu, t.polled().join(", ")))
        .collect();
    log::info!(
        "running {} interface(s) from {}; {} poll threads {policy} ({}); control socket {}{}",
        config.devices.len(),
        config.path.display(),
        threads.len(),
        placement.join("; "),
        socket.display(),
        daemon::metrics_line(&metrics),
    );
    let order: Vec<&str> = config.devices.iter().map(|d| d.name.as_str()).collect();
    let stopped = wait(&signals, &inbox, &exited, &threads, &order);
    drop(metrics);
    drop(server);
    let signal = stopped.map_err(RunError::Io)?;
    let rows = stop_all(threads, signal)?;
    daemon::report(
        &in_order(rows, &order, IfCounters::add),
        signal,
        args.json,
        out,
    )
    .map_err(RunError::Io)
}

/// One poll thread: pinned to `cpu`, its interfaces opened, its capabilities dropped,
/// then its executor until a relayed signal. Says on `ready` whether it started.
fn poll_thread(
    cpu: usize,
    config: &RunConfig,
    pcap: Option<&str>,
    groups: &QueueGroups,
    signals: Signals,
    inbox: Inbox,
    ready: &mpsc::Sender<Result<&'static str, ()>>,
) -> Result<FinalCounters, RunError> {
    let start = || -> Result<(Executor, Vec<crate::executor::IfInfo>, &'static str), RunError> {
        // Pinned first, so that the devices' memory is allocated on this CPU's node.
        crate::sys::pin_to_cpu(cpu).map_err(|e| {
            RunError::Setup(crate::check::cpu_error(
                &format!("[daemon] cpus: CPU {cpu}"),
                &e,
            ))
        })?;
        let (dp, defaults, info, mut reopener) = daemon::open_dataplane(config, pcap, groups)?;
        let policy = daemon::place_poll_thread(config, None, &mut reopener)?;
        let info_daemon = daemon::daemon_info(config, Some(cpu), defaults);
        let exec = Executor::new(dp, info.clone(), info_daemon, signals, Some(inbox))
            .map_err(RunError::Io)?;
        Ok((exec, info, policy))
    };
    let (mut exec, info, policy) = match start() {
        Ok(started) => started,
        Err(e) => {
            let _ = ready.send(Err(()));
            return Err(e);
        }
    };
    let _ = ready.send(Ok(policy));
    exec.run().map_err(RunError::Io)?;
    Ok(daemon::final_counters(exec.dataplane_mut(), &info))
}

/// Answers control requests until a stop signal (returned) or a poll thread's exit.
fn wait(
    signals: &Signals,
    inbox: &Inbox,
    exited: &EventFd,
    threads: &[PollThread],
    order: &[&str],
) -> std::io::Result<i32> {
    let mut epoll = Epoll::new()?;
    epoll.add(signals.fd(), TOKEN_SIGNAL)?;
    epoll.add(inbox.wake_fd(), TOKEN_CONTROL)?;
    epoll.add(exited.fd(), TOKEN_EXITED)?;
    let mut ready = Vec::new();
    loop {
        epoll.wait(-1, &mut ready)?;
        for &token in &ready {
            match token {
                TOKEN_SIGNAL => {
                    if let Some(signal) = signals.take() {
                        return Ok(signal);
                    }
                }
                TOKEN_CONTROL => inbox.answer_pending(&mut |req| route(threads, order, req)),
                // A poll thread stopped on an error: stop the others, and say it.
                _ => return Ok(libc::SIGTERM),
            }
        }
    }
}

/// Passes `signal` to every poll thread and collects their final counters; the first
/// error of a thread, if any.
fn stop_all(threads: Vec<PollThread>, signal: i32) -> Result<Vec<Row<IfCounters>>, RunError> {
    for t in &threads {
        t.relay.send(signal);
    }
    let mut rows = Vec::new();
    let mut first_error = None;
    for t in threads {
        match t.handle.join() {
            Ok(Ok(r)) => rows.extend(r.into_iter().map(|row| label(&t.queues, row))),
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(RunError::Setup(format!(
                    "the poll thread of CPU {} panicked",
                    t.cpu
                )));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(rows),
    }
}

/// Answers one control request by asking the poll threads (module docs).
fn route(threads: &[PollThread], order: &[&str], req: Request) -> Response {
    match req {
        Request::List { prefix } => match merged_entries(threads) {
            Ok(mut entries) => {
                entries.retain(|e| under_prefix(&e.name, &prefix));
                Response::Entries { entries }
            }
            Err(answer) => answer,
        },
        // The merge works on names, so the snapshot is the merged list typed by the
        // declarations the names are instances of.
        Request::Snapshot => match merged_entries(threads) {
            Ok(entries) => Response::Snapshot {
                readings: typed(entries),
            },
            Err(answer) => answer,
        },
        Request::Set { assignments } => Response::Set {
            results: assignments
                .iter()
                .map(|(name, value)| set_one(threads, name, value))
                .collect(),
        },
        Request::Interfaces => {
            let mut rows = Vec::new();
            for t in threads {
                match t.requester.ask(Request::Interfaces) {
                    Some(Response::Interfaces { interfaces: mine }) => {
                        rows.extend(mine.into_iter().map(|s| label(&t.queues, (s, ()))))
                    }
                    other => return no_answer(t.cpu, other),
                }
            }
            let interfaces = in_order(rows, order, |_, _| {})
                .into_iter()
                .map(|(s, ())| s)
                .collect();
            Response::Interfaces { interfaces }
        }
    }
}

/// The rows of every poll thread in the config's order of `order`; an interface polled as
/// queues has a row of its totals (the counters summed, `add` for the `T`s), followed
/// by its queues' rows.
fn in_order<T: Clone>(
    rows: Vec<Row<T>>,
    order: &[&str],
    add: impl Fn(&mut T, &T),
) -> Vec<(IfStatus, T)> {
    let mut ordered = Vec::new();
    for name in order {
        let mut mine: Vec<(IfStatus, T)> = rows
            .iter()
            .filter(|(i, _, _)| i == name)
            .map(|(_, s, t)| (s.clone(), t.clone()))
            .collect();
        if mine.iter().any(|(s, _)| s.name != *name) {
            mine.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            let mut total = mine[0].clone();
            total.0.name = name.to_string();
            for (s, t) in &mine[1..] {
                add_counters(&mut total.0.counters, &s.counters);
                add(&mut total.1, t);
            }
            ordered.push(total);
        }
        ordered.extend(mine);
    }
    ordered
}

/// Adds `more` to `counters`, by name; a state (not a sum) keeps the first queue's value.
fn add_counters(counters: &mut Vec<(String, u64)>, more: &[(String, u64)]) {
    for (name, n) in more {
        match counters.iter_mut().find(|(c, _)| c == name) {
            Some((_, sum)) if !is_state(name) => *sum += n,
            Some(_) => {}
            None => counters.push((name.clone(), *n)),
        }
    }
}

/// Whether an interface's read-only number (by its leaf name) is a state, which no sum
/// over queues means: the link's, and auto mode's polling flag.
fn is_state(leaf: &str) -> bool {
    [LinkState::LINK.name, Interface::<()>::AUTO_POLLING.name].contains(&leaf)
}

/// Every entry of every poll thread, merged (module docs); or the answer to give when a
/// thread does not answer.
fn merged_entries(threads: &[PollThread]) -> Result<Vec<SysctlEntry>, Response> {
    let mut per_cpu = Vec::new();
    for t in threads {
        match t.requester.ask(Request::List {
            prefix: String::new(),
        }) {
            Some(Response::Entries { entries }) => per_cpu.push((t.cpu, &t.queues[..], entries)),
            other => return Err(no_answer(t.cpu, other)),
        }
    }
    Ok(merge(&per_cpu))
}

/// A poll thread's answer that is not the one asked for: its own error, or none.
fn no_answer(cpu: usize, answer: Option<Response>) -> Response {
    match answer {
        Some(Response::Error { message }) => Response::Error { message },
        _ => Response::Error {
            message: format!("the poll thread of CPU {cpu} did not answer; try again"),
        },
    }
}

/// One write, on the CPU(s) it concerns (module docs).
fn set_one(threads: &[PollThread], name: &str, value: &str) -> SetResult {
    let refused = |error: String| SetResult {
        name: name.to_string(),
        old: None,
        new: None,
        error: Some(error),
    };
    let ask = |t: &PollThread, name: &str| -> Result<SetResult, String> {
        let req = Request::Set {
            assignments: vec![(name.to_string(), value.to_string())],
        };
        match t.requester.ask(req) {
            Some(Response::Set { mut results }) if results.len() == 1 => Ok(results.remove(0)),
            _ => Err(format!(
                "{name}: the poll thread of CPU {} did not answer; try again",
                t.cpu
            )),
        }
    };
    if let Some((cpu, kern)) = kern_name(name) {
        let Some(t) = threads.iter().find(|t| t.cpu == cpu) else {
            let cpus: Vec<usize> = threads.iter().map(|t| t.cpu).collect();
            return refused(format!(
                "{name}: CPU {cpu} has no poll thread; the poll CPUs are {cpus:?} ([daemon] cpus)"
            ));
        };
        return match ask(t, &kern) {
            Ok(r) => SetResult {
                name: name.to_string(),
                error: r.error.map(|e| e.replace(&kern, name)),
                ..r
            },
            Err(e) => refused(e),
        };
    }
    // An interface's CPU, or each CPU with one of its queues.
    let owners: Vec<&PollThread> = match name.strip_prefix("dev.") {
        Some(rest) => threads
            .iter()
            .filter(|t| {
                t.interfaces
                    .iter()
                    .any(|i| rest.starts_with(&format!("{i}.")))
            })
            .collect(),
        None => Vec::new(),
    };
    let targets: Vec<&PollThread> = match owners.is_empty() {
        false => owners,
        true => threads.iter().collect(),
    };
    let mut first: Option<SetResult> = None;
    for t in targets {
        match ask(t, name) {
            Ok(r) => {
                let f = first.get_or_insert_with(|| r.clone());
                if f.error.is_none() && r.error.is_some() {
                    f.error = r.error;
                }
            }
            Err(e) => return refused(e),
        }
    }
    first.unwrap_or_else(|| refused(format!("{name}: no poll thread to write it")))
}

/// One poll CPU's whole list of entries: the CPU, its queues (interface, queue number),
/// the entries.
pub type CpuEntries<'a> = (usize, &'a [(String, u32)], Vec<SysctlEntry>);

/// The poll threads' entries as one table (module docs): `per_cpu` holds each CPU's
/// list, the first poll CPU first.
pub fn merge(per_cpu: &[CpuEntries]) -> Vec<SysctlEntry> {
    let mut merged: Vec<SysctlEntry> = Vec::new();
    let mut ifpoll: Vec<SysctlEntry> = Vec::new();
    let mut threads: Vec<SysctlEntry> = Vec::new();
    let mut queues: Vec<SysctlEntry> = Vec::new();
    for (k, (cpu, mine, entries)) in per_cpu.iter().enumerate() {
        for e in entries {
            let queue = mine.iter().find_map(|(i, q)| {
                let leaf = e.name.strip_prefix(&format!("dev.{i}."))?;
                Some(format!("dev.{}.{leaf}", queue_name(i, *q)))
            });
            if let Some(name) = &queue {
                // A view of one queue: writes go to `dev.<if>.*`, which reaches every queue.
                queues.push(SysctlEntry {
                    name: name.clone(),
                    writable: false,
                    ..e.clone()
                });
            }
            if let Some(name) = per_cpu_name(*cpu, &e.name) {
                ifpoll.push(SysctlEntry { name, ..e.clone() });
                if k > 0 {
                    continue;
                }
            }
            if PER_THREAD.contains(&e.name.as_str()) {
                threads.push(SysctlEntry {
                    name: polld_control::daemon::per_cpu(*cpu, &e.name),
                    ..e.clone()
                });
            }
            match merged.iter_mut().find(|m| m.name == e.name) {
                None => merged.push(e.clone()),
                Some(m) if summed(e) || (queue.is_some() && summed_over_queues(e)) => {
                    let sum =
                        m.value.parse::<u64>().unwrap_or(0) + e.value.parse::<u64>().unwrap_or(0);
                    m.value = sum.to_string();
                }
                Some(_) => {}
            }
        }
    }
    merged.extend(queues);
    merged.extend(ifpoll);
    merged.extend(threads);
    merged
}

/// Whether an entry of a queued interface is the sum over its queues: the read-only
/// numbers but the link's state and auto mode's polling flag.
fn summed_over_queues(e: &SysctlEntry) -> bool {
    let leaf = e.name.rsplit('.').next().unwrap_or_default();
    !e.writable && e.value.parse::<u64>().is_ok() && !is_state(leaf)
}

/// Whether an entry is the sum over the CPUs: the stage's read-only counters.
fn summed(e: &SysctlEntry) -> bool {
    !e.writable && e.name.starts_with("net.inet.ip.")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of entry `name` of `merged`, which must have it.
    fn value<'a>(merged: &'a [SysctlEntry], name: &str) -> &'a str {
        merged
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value.as_str())
            .unwrap_or_else(|| panic!("{name} missing from {merged:?}"))
    }

    fn entry(name: &str, value: &str, writable: bool) -> SysctlEntry {
        SysctlEntry {
            name: name.to_string(),
            value: value.to_string(),
            descr: String::new(),
            writable,
        }
    }

    #[test]
    fn a_split_interfaces_total_sums_counters_but_not_states() {
        let queue = |rx: u64| {
            vec![
                ("rx".to_string(), rx),
                ("auto_polling".to_string(), 1),
                ("link".to_string(), 1),
            ]
        };
        let mut total = queue(5);
        add_counters(&mut total, &queue(7));
        assert_eq!(total, queue(12));
    }

    #[test]
    fn merge_names_each_cpu_sums_counters_and_keeps_the_first_cpus_knobs() {
        let cpu = |user_frac: &str, burst: &str, dropped: &str, work: &str, ifname: &str| {
            vec![
                entry("kern.polling.user_frac", user_frac, true),
                entry("kern.polling.burst", burst, false),
                entry("net.inet.ip.fastforwarding", "1", true),
                entry("net.inet.ip.no_route", dropped, false),
                entry(&format!("dev.{ifname}.rx_packets"), "7", false),
                entry("polld.work_ns", work, false),
                entry("polld.pid", "42", false),
                entry("polld.default.kern.polling.user_frac", "50", false),
            ]
        };
        let merged = merge(&[
            (0, &[], cpu("30", "100", "1", "1000", "tap0")),
            (1, &[], cpu("70", "5", "2", "500", "tap2")),
        ]);
        let get = |name: &str| value(&merged, name);
        assert_eq!(get("kern.polling.user_frac"), "30");
        assert_eq!(get("kern.polling.burst"), "100");
        assert_eq!(get("net.ifpoll.0.rx.user_frac"), "30");
        assert_eq!(get("net.ifpoll.1.rx.user_frac"), "70");
        assert_eq!(get("net.ifpoll.1.rx.burst"), "5");
        assert_eq!(get("net.inet.ip.no_route"), "3");
        assert_eq!(get("dev.tap0.rx_packets"), "7");
        assert_eq!(get("dev.tap2.rx_packets"), "7");
        assert_eq!(get("polld.work_ns"), "1000");
        assert_eq!(get("polld.percpu.1.work_ns"), "500");
        assert_eq!(get("polld.pid"), "42");
        assert_eq!(get("polld.default.kern.polling.user_frac"), "50");
        let names: Vec<&str> = merged.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.contains(".queue")), "{names:?}");
        let unique: std::collections::HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicates in {names:?}");
    }

    #[test]
    fn a_queued_interface_is_listed_per_queue_and_its_counters_summed() {
        let cpu = |rx: &str, link: &str| {
            vec![
                entry("dev.veth1.rx_packets", rx, false),
                entry("dev.veth1.queued", "1", false),
                entry("dev.veth1.link", link, false),
                entry("dev.veth1.auto_polling", "1", false),
                entry("dev.veth1.mode", "polling", true),
                entry("dev.veth2.rx_packets", "5", false),
            ]
        };
        let (q0, q1) = ([("veth1".to_string(), 0)], [("veth1".to_string(), 1)]);
        let merged = merge(&[(0, &q0, cpu("10", "up")), (1, &q1, cpu("32", "down"))]);
        let get = |name: &str| value(&merged, name);
        assert_eq!(get("dev.veth1.rx_packets"), "42");
        assert_eq!(get("dev.veth1.queued"), "2");
        assert_eq!(get("dev.veth1.queue0.rx_packets"), "10");
        assert_eq!(get("dev.veth1.queue1.rx_packets"), "32");
        assert_eq!(get("dev.veth1.queue1.link"), "down");
        // States and settings are not sums: the first CPU's.
        assert_eq!(get("dev.veth1.link"), "up");
        assert_eq!(get("dev.veth1.auto_polling"), "1");
        assert_eq!(get("dev.veth1.mode"), "polling");
        // An interface polled whole is not summed over the CPUs that list it.
        assert_eq!(get("dev.veth2.rx_packets"), "5");
    }
}
