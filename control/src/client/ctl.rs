//! `polld ctl`: reads and writes a running polld's knobs and counters like FreeBSD's
//! sysctl(8).
//!
//! ```text
//! polld ctl -a                                   every entry, `name: value`
//! polld ctl kern.polling                         a subtree
//! polld ctl kern.polling.burst                   one entry
//! polld ctl kern.polling.user_frac=30 kern.polling.idle_poll=1
//!                                                writes, `name: old -> new` each
//!
//! polld ctl --save                              the running knobs and interface modes
//!                                                into the config file polld runs from
//! polld ctl kern.polling.user_frac=30 --save     write, then save
//! polld ctl reload                               polld reads its config file again;
//!                                                fails, naming the mistakes, if refused
//! ```
//!
//! `reload` sends polld SIGHUP, the one way a reload starts, and waits until the
//! `polld.reloads` or `polld.reload_failures` count moves (see [`reload`]).
//!
//! Names and assignments may be mixed; they are handled in order. An unknown name or a
//! refused write is reported and makes the exit status non-zero, and the other
//! arguments still take effect, as with sysctl. `--save` comes last (see [`crate::save`]).

use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Parser;
use polld_core::SysctlEntry;
use serde::{Deserialize, Serialize};

use crate::client::{exchange, unexpected, CtlError, SocketArg};
use crate::daemon::daemon_entry;
use crate::proto::{Request, Response, SetResult};
use crate::save::{self, SaveReport};

/// Read or write a running polld's knobs and counters, like sysctl(8).
#[derive(Parser, Clone, Debug, PartialEq, Eq)]
#[command(name = "polld ctl")]
pub struct CtlArgs {
    /// Names to read (one entry or a subtree like `kern.polling`), `name=value` to write,
    /// and `reload` to have polld read its config file again.
    #[arg(
        value_name = "NAME[=VALUE]",
        required_unless_present_any = ["all", "save"],
        conflicts_with = "all"
    )]
    pub names: Vec<String>,
    /// List every entry.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Print values only, without names.
    #[arg(short = 'n')]
    pub values_only: bool,
    /// Print descriptions instead of values.
    #[arg(short = 'd')]
    pub descriptions: bool,
    /// Print one JSON object: the entries read, the writes with their old and new
    /// values, every error, and what `--save` or `reload` did.
    #[arg(long)]
    pub json: bool,
    /// Write the running knobs and interface modes into the config file polld was
    /// started with (after the writes given, if any); comments and order are kept.
    #[arg(long)]
    pub save: bool,
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `polld ctl --json` output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtlJson {
    /// The entries read, in argument order.
    pub entries: Vec<SysctlEntry>,
    /// The writes, in argument order; refused ones carry their `error`.
    pub set: Vec<SetResult>,
    /// Every problem, as also printed on stderr.
    pub errors: Vec<String>,
    /// What `--save` did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<SaveReport>,
    /// The config file `reload` applied (a refused one is in `errors`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reloaded: Option<String>,
}

/// One round trip: a name to read, or a run of consecutive assignments.
enum Step<'a> {
    Read(&'a str),
    Write(Vec<(String, String)>),
    /// `--save`: the running state into the config file.
    Save,
    /// `reload`: the config file read again.
    Reload,
}

/// The argument that asks for a reload.
pub const RELOAD: &str = "reload";

fn plan(args: &CtlArgs) -> Result<Vec<Step<'_>>, CtlError> {
    if args.all && args.save {
        return Ok(vec![Step::Read(""), Step::Save]);
    }
    if args.all {
        return Ok(vec![Step::Read("")]);
    }
    let mut steps = Vec::new();
    for arg in &args.names {
        match arg.split_once('=') {
            Some(("", _)) => {
                return Err(CtlError::Usage(format!(
                    "'{arg}' has no name before '=': write name=value"
                )))
            }
            Some((name, value)) => {
                let pair = (name.to_string(), value.to_string());
                match steps.last_mut() {
                    Some(Step::Write(run)) => run.push(pair),
                    _ => steps.push(Step::Write(vec![pair])),
                }
            }
            None if arg.is_empty() => {
                return Err(CtlError::Usage(
                    "an empty name: give a name like kern.polling, or -a for everything"
                        .to_string(),
                ))
            }
            None if arg == RELOAD => steps.push(Step::Reload),
            None => steps.push(Step::Read(arg)),
        }
    }
    if args.save {
        steps.push(Step::Save);
    }
    Ok(steps)
}

/// Runs `polld ctl`: results on `out`, problems with single arguments on `err`, both in
/// argument order. Returns the exit status: 0, or 1 when some name was unknown or some
/// write was refused.
pub fn run_ctl(args: &CtlArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, CtlError> {
    let socket = &args.socket.socket;
    let mut report = CtlJson::default();
    for step in plan(args)? {
        let errors_before = report.errors.len();
        match step {
            Step::Read(prefix) => {
                let request = Request::List {
                    prefix: prefix.to_string(),
                };
                let entries = match exchange(socket, &request)? {
                    Response::Entries { entries } => entries,
                    other => return Err(unexpected(&other)),
                };
                if entries.is_empty() {
                    report.errors.push(format!(
                        "unknown oid '{prefix}': list the knobs with `polld ctl -a`"
                    ));
                }
                if !args.json {
                    print_entries(args, &entries, out)?;
                }
                report.entries.extend(entries);
            }
            Step::Write(assignments) => {
                let results = match exchange(socket, &Request::Set { assignments })? {
                    Response::Set { results } => results,
                    other => return Err(unexpected(&other)),
                };
                report
                    .errors
                    .extend(results.iter().filter_map(|r| r.error.clone()));
                if !args.json {
                    print_writes(args, &results, out)?;
                }
                report.set.extend(results);
            }
            Step::Save => {
                let request = Request::List {
                    prefix: String::new(),
                };
                let entries = match exchange(socket, &request)? {
                    Response::Entries { entries } => entries,
                    other => return Err(unexpected(&other)),
                };
                match save::save(&entries) {
                    Ok(saved) => {
                        if !args.json {
                            print_saved(&saved, out)?;
                        }
                        report.saved = Some(saved);
                    }
                    Err(e) => report.errors.push(e.to_string()),
                }
            }
            Step::Reload => match reload(socket, RELOAD_TIMEOUT)? {
                Ok(config) => {
                    if !args.json {
                        writeln!(out, "{config}: reloaded")?;
                    }
                    report.reloaded = Some(config);
                }
                Err(refused) => report.errors.push(refused),
            },
        }
        for message in &report.errors[errors_before..] {
            writeln!(err, "polld ctl: {message}")?;
        }
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report).map_err(|e| CtlError::Output(e.into()))?;
        writeln!(out)?;
    }
    Ok(if report.errors.is_empty() { 0 } else { 1 })
}

/// How long `reload` waits for polld's outcome.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// The daemon's reload entries: pid, config, applied and refused counts, last error.
struct Reloads {
    pid: i32,
    config: String,
    applied: u64,
    refused: u64,
    error: String,
}

fn reloads(socket: &Path) -> Result<Reloads, CtlError> {
    let request = Request::List {
        prefix: daemon_entry::NODE.to_string(),
    };
    let entries = match exchange(socket, &request)? {
        Response::Entries { entries } => entries,
        other => return Err(unexpected(&other)),
    };
    let get = |name: &str| {
        entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value.clone())
            .ok_or_else(|| {
                CtlError::Daemon(format!(
                    "no {name}: this polld cannot reload on request; send it SIGHUP"
                ))
            })
    };
    let number = |name: &str| -> Result<u64, CtlError> {
        let value = get(name)?;
        value
            .parse()
            .map_err(|_| CtlError::Daemon(format!("{name} = {value:?} is not a count")))
    };
    Ok(Reloads {
        pid: number(daemon_entry::PID)? as i32,
        config: get(daemon_entry::CONFIG)?,
        applied: number(daemon_entry::RELOADS)?,
        refused: number(daemon_entry::RELOAD_FAILURES)?,
        error: get(daemon_entry::RELOAD_ERROR)?,
    })
}

/// `polld ctl reload`: sends the daemon at `socket` SIGHUP and waits up to `timeout` for
/// its reload thread to count the outcome. `Ok(Ok(file))` when the file was applied,
/// `Ok(Err(why))` when polld refused it (polld goes on with the config it had).
///
/// Reloads that overlap (two SIGHUPs before the thread reads one) are counted once; the
/// outcome read is then the one both asked for.
pub fn reload(socket: &Path, timeout: Duration) -> Result<Result<String, String>, CtlError> {
    let before = reloads(socket)?;
    let pid = rustix::process::Pid::from_raw(before.pid)
        .ok_or_else(|| CtlError::Daemon(format!("polld.pid = {} is no process", before.pid)))?;
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).map_err(|e| {
        CtlError::Daemon(format!(
            "cannot send SIGHUP to polld (pid {}): {e}; run as polld's user or root",
            before.pid
        ))
    })?;
    let start = Instant::now();
    loop {
        let now = reloads(socket)?;
        if now.refused > before.refused {
            return Ok(Err(now.error));
        }
        if now.applied > before.applied {
            return Ok(Ok(now.config));
        }
        if start.elapsed() > timeout {
            return Err(CtlError::Daemon(format!(
                "polld (pid {}) did not finish reloading {} in {timeout:?}",
                before.pid, before.config
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn print_entries(args: &CtlArgs, entries: &[SysctlEntry], out: &mut dyn Write) -> io::Result<()> {
    for entry in entries {
        let shown = if args.descriptions {
            &entry.descr
        } else {
            &entry.value
        };
        if args.values_only {
            writeln!(out, "{shown}")?;
        } else {
            writeln!(out, "{}: {shown}", entry.name)?;
        }
    }
    Ok(())
}

/// `name: old -> new` for each write that took effect (refusals go to stderr).
fn print_writes(args: &CtlArgs, results: &[SetResult], out: &mut dyn Write) -> io::Result<()> {
    for result in results.iter().filter(|r| r.error.is_none()) {
        let old = result.old.as_deref().unwrap_or_default();
        let new = result.new.as_deref().unwrap_or_default();
        if args.values_only {
            writeln!(out, "{old} -> {new}")?;
        } else {
            writeln!(out, "{}: {old} -> {new}", result.name)?;
        }
    }
    Ok(())
}

/// What `--save` did, one line per change.
fn print_saved(saved: &SaveReport, out: &mut dyn Write) -> io::Result<()> {
    let path = saved.path.display();
    if !saved.written {
        return writeln!(out, "{path}: already holds the running knobs and modes");
    }
    for (name, value) in &saved.knobs {
        writeln!(out, "{path}: [knobs] \"{name}\" = {value}")?;
    }
    for (ifname, mode) in &saved.modes {
        writeln!(out, "{path}: interfaces {ifname}: mode = \"{mode}\"")?;
    }
    for name in &saved.removed {
        writeln!(
            out,
            "{path}: [knobs] \"{name}\" removed: the interface modes hold it"
        )?;
    }
    if saved.reordered {
        writeln!(
            out,
            "{path}: [knobs] put in polld's order, so that they apply as now"
        )?;
    }
    Ok(())
}
