//! `[daemon] cpus = [..]`: one poll thread per CPU, as DragonFly's ifpoll has one poll
//! context per CPU (docs/algorithm.md §8).
//!
//! Each poll thread is pinned to its CPU and runs its own [`Executor`] over its own
//! dataplane: its interfaces ([`RunConfig::per_cpu`]), its own [`polld_core::Poller`] with
//! its own tick, burst and `user_frac` accounting, its own packet stage. The threads share
//! nothing, so polld does not hand frames between CPUs: each CPU routes among its own
//! interfaces, and a frame for a network on another CPU is dropped there as `no_route`.
//!
//! The main thread keeps the stop signals and the control socket. It passes a signal on to
//! every poll thread, and routes each control request ([`route`]):
//!
//! - `net.ifpoll.N.*` is CPU N's `kern.polling.*` ([`polld_core::ifpoll::kern_name`]);
//! - `kern.polling.*` reads the first poll CPU's and writes every CPU's;
//! - `dev.<if>.*` goes to the CPU of that interface;
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
use polld_control::proto::{daemon_entry, IfStatus, Request, Response, SetResult};
use polld_control::server::{self, EventFd, Inbox, Requester};
use polld_core::ifpoll::{kern_name, per_cpu_name};
use polld_core::SysctlEntry;

use crate::config::RunConfig;
use crate::daemon::{self, FinalCounters, RunArgs, RunError};
use crate::executor::Executor;
use crate::sys::{Epoll, SignalRelay, Signals};

/// The main thread's end of one poll thread.
struct PollThread {
    cpu: usize,
    interfaces: Vec<String>,
    requester: Requester,
    relay: SignalRelay,
    handle: JoinHandle<Result<FinalCounters, RunError>>,
}

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
    for (cpu, part) in config.per_cpu() {
        let (requester, inbox) = server::channel().map_err(RunError::Io)?;
        let (thread_signals, relay) = Signals::relay().map_err(RunError::Io)?;
        let interfaces = part.devices.iter().map(|d| d.name.clone()).collect();
        let pcap = args.pcap.clone();
        let (ready, exited) = (ready_tx.clone(), exited.clone());
        let handle = std::thread::Builder::new()
            .name(format!("polld-cpu{cpu}"))
            .spawn(move || {
                let result =
                    poll_thread(cpu, &part, pcap.as_deref(), thread_signals, inbox, &ready);
                if result.is_err() {
                    exited.signal();
                }
                result
            })
            .map_err(|e| RunError::Setup(format!("starting the poll thread of CPU {cpu}: {e}")))?;
        threads.push(PollThread {
            cpu,
            interfaces,
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
        .map(|t| format!("CPU {}: {}", t.cpu, t.interfaces.join(", ")))
        .collect();
    eprintln!(
        "polld: running {} interface(s) from {}; {} poll threads {policy} ({}); control socket {}{}",
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
    let mut rows = stop_all(threads, signal)?;
    rows.sort_by_key(|(s, _)| order.iter().position(|n| *n == s.name));
    daemon::report(&rows, signal, args.json, out).map_err(RunError::Io)
}

/// One poll thread: pinned to `cpu`, its interfaces opened, its capabilities dropped,
/// then its executor until a relayed signal. Says on `ready` whether it started.
fn poll_thread(
    cpu: usize,
    config: &RunConfig,
    pcap: Option<&str>,
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
        let (dp, defaults, info, mut reopener) = daemon::open_dataplane(config, pcap)?;
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
fn stop_all(threads: Vec<PollThread>, signal: i32) -> Result<FinalCounters, RunError> {
    for t in &threads {
        t.relay.send(signal);
    }
    let mut rows = Vec::new();
    let mut first_error = None;
    for t in threads {
        match t.handle.join() {
            Ok(Ok(r)) => rows.extend(r),
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
            let mut interfaces: Vec<IfStatus> = Vec::new();
            for t in threads {
                match t.requester.ask(Request::Interfaces) {
                    Some(Response::Interfaces { interfaces: mine }) => interfaces.extend(mine),
                    other => return no_answer(t.cpu, other),
                }
            }
            interfaces.sort_by_key(|s| order.iter().position(|n| *n == s.name));
            Response::Interfaces { interfaces }
        }
    }
}

/// Every entry of every poll thread, merged (module docs); or the answer to give when a
/// thread does not answer.
fn merged_entries(threads: &[PollThread]) -> Result<Vec<SysctlEntry>, Response> {
    let mut per_cpu = Vec::new();
    for t in threads {
        match t.requester.ask(Request::List {
            prefix: String::new(),
        }) {
            Some(Response::Entries { entries }) => per_cpu.push((t.cpu, entries)),
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
    let owner = name.strip_prefix("dev.").and_then(|rest| {
        threads.iter().find(|t| {
            t.interfaces
                .iter()
                .any(|i| rest.starts_with(&format!("{i}.")))
        })
    });
    let targets: Vec<&PollThread> = match owner {
        Some(t) => vec![t],
        None => threads.iter().collect(),
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

/// The poll threads' entries as one table (module docs): `per_cpu` holds each CPU's whole
/// list, the first poll CPU first.
pub fn merge(per_cpu: &[(usize, Vec<SysctlEntry>)]) -> Vec<SysctlEntry> {
    let mut merged: Vec<SysctlEntry> = Vec::new();
    let mut ifpoll: Vec<SysctlEntry> = Vec::new();
    let mut threads: Vec<SysctlEntry> = Vec::new();
    for (k, (cpu, entries)) in per_cpu.iter().enumerate() {
        for e in entries {
            if let Some(name) = per_cpu_name(*cpu, &e.name) {
                ifpoll.push(SysctlEntry { name, ..e.clone() });
                if k > 0 {
                    continue;
                }
            }
            if PER_THREAD.contains(&e.name.as_str()) {
                threads.push(SysctlEntry {
                    name: daemon_entry::per_cpu(*cpu, &e.name),
                    ..e.clone()
                });
            }
            match merged.iter_mut().find(|m| m.name == e.name) {
                None => merged.push(e.clone()),
                Some(m) if summed(e) => {
                    let sum =
                        m.value.parse::<u64>().unwrap_or(0) + e.value.parse::<u64>().unwrap_or(0);
                    m.value = sum.to_string();
                }
                Some(_) => {}
            }
        }
    }
    merged.extend(ifpoll);
    merged.extend(threads);
    merged
}

/// Whether an entry is the sum over the CPUs: the stage's read-only counters.
fn summed(e: &SysctlEntry) -> bool {
    !e.writable && e.name.starts_with("net.inet.ip.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, value: &str, writable: bool) -> SysctlEntry {
        SysctlEntry {
            name: name.to_string(),
            value: value.to_string(),
            descr: String::new(),
            writable,
        }
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
            (0, cpu("30", "100", "1", "1000", "tap0")),
            (1, cpu("70", "5", "2", "500", "tap2")),
        ]);
        let get = |name: &str| {
            merged
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.value.as_str())
                .unwrap_or_else(|| panic!("{name} missing from {merged:?}"))
        };
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
        let unique: std::collections::HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicates in {names:?}");
    }
}
