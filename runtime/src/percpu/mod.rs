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

use polld_control::proto::IfStatus;
use polld_control::server::{self, EventFd, Inbox, Requester};
use polld_core::IfCounters;

use crate::config::RunConfig;
use crate::daemon::dataplane::open_dataplane;
use crate::daemon::placement::{daemon_info, place_poll_thread};
use crate::daemon::privileges::kept_caps;
use crate::daemon::report::{final_counters, report, FinalCounters};
use crate::daemon::services::{metrics_line, start_control};
use crate::error::RunError;
use crate::executor::Executor;
use crate::queues::{queue_name, QueueGroups};
use crate::sys::{Epoll, SignalRelay, Signals};

mod merge;
mod route;

pub use merge::{merge, CpuEntries};

use route::{in_order, route};

/// The main thread's end of one poll thread.
pub(super) struct PollThread {
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
pub(super) fn queue_of(queues: &[(String, u32)], ifname: &str) -> Option<u32> {
    queues.iter().find(|(i, _)| i == ifname).map(|&(_, q)| q)
}

/// The row of one of a CPU's interfaces, with the interface's name, under the name of
/// its queue if it is one of the CPU's `queues`.
pub(super) fn label<T>(queues: &[(String, u32)], (mut status, value): (IfStatus, T)) -> Row<T> {
    let interface = status.name.clone();
    if let Some(q) = queue_of(queues, &interface) {
        status.name = queue_name(&interface, q);
    }
    (interface, status, value)
}

/// A poll thread's row of an interface or a queue: the interface's name, the row.
pub(super) type Row<T> = (String, IfStatus, T);

const TOKEN_SIGNAL: u64 = 0;
const TOKEN_CONTROL: u64 = 1;
const TOKEN_EXITED: u64 = 2;

/// Runs `polld run` with one poll thread per CPU of `[daemon] cpus` (`pcap`: `--pcap`'s prefix; `json`: the final counters as JSON); returns once stopped
/// by a signal, or with the error of a poll thread that could not start or stopped.
pub(crate) fn run(
    config: &RunConfig,
    pcap: Option<&str>,
    json: bool,
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
        let (pcap, groups) = (pcap.map(str::to_string), groups.clone());
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
    crate::caps::drop_all_but(kept_caps(config))
        .map_err(|e| RunError::Setup(format!("dropping capabilities: {e}")))?;
    let (server, inbox, metrics) = start_control(config, socket)?;
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
        metrics_line(&metrics),
    );
    let order: Vec<&str> = config.devices.iter().map(|d| d.name.as_str()).collect();
    let stopped = wait(&signals, &inbox, &exited, &threads, &order);
    drop(metrics);
    drop(server);
    let signal = stopped.map_err(RunError::Io)?;
    let rows = stop_all(threads, signal)?;
    report(&in_order(rows, &order, IfCounters::add), signal, json, out).map_err(RunError::Io)
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
        let (dp, defaults, info, mut reopener) = open_dataplane(config, pcap, groups)?;
        let policy = place_poll_thread(config, None, &mut reopener)?;
        let info_daemon = daemon_info(config, Some(cpu), defaults);
        let tables = crate::tables::follow(config, &dp)?;
        let exec = Executor::new(dp, info.clone(), info_daemon, signals, Some(inbox), tables)
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
    Ok(final_counters(exec.dataplane_mut(), &info))
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
