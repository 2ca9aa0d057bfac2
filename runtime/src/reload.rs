//! SIGHUP: read the config file again and apply what can change while polld runs, the
//! interfaces' modes and the `[knobs]`, the way `polld ctl` and `polld ifconfig` do: as
//! one [`Request::Set`] over the control socket, which every poll thread answers for its
//! share. A knob no longer in the file goes back to its default.
//!
//! A file that does not load, or whose modes and knobs a dataplane refuses (checked on
//! unopened devices first, as `--check` does), is refused as a whole with a logged error,
//! and polld goes on with the config it has. What only a restart can change (interfaces,
//! addresses, routes, `[daemon]`) is named in a warning, and the rest is applied.
//!
//! SIGHUP is blocked in every thread ([`block_hangup`], before the first one starts) and
//! read by the reload thread from a signalfd of its own. The service manager is told
//! RELOADING=1 before and READY=1 after each reload ([`crate::notify`]). `polld ctl reload` sends SIGHUP
//! too, and reads the outcome back from the `polld.reload*` entries ([`status`]).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use polld_control::client;
use polld_control::daemon::ReloadStatus;
use polld_control::proto::{Request, Response};
use polld_control::server::EventFd;
use rustix::event::{PollFd, PollFlags};

use crate::check;
use crate::config::{DeviceConfig, RunConfig};
use crate::notify;
use crate::sys;

/// The reloads of this process so far, as the `polld.reload*` entries show them.
static RELOADS: Mutex<ReloadStatus> = Mutex::new(ReloadStatus {
    applied: 0,
    refused: 0,
    time_s: 0,
    error: String::new(),
});

/// The reloads so far.
pub(crate) fn status() -> ReloadStatus {
    RELOADS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Counts a reload's outcome: `Err` holds why the file was refused.
fn record(outcome: Result<(), String>) {
    let mut reloads = RELOADS.lock().unwrap_or_else(|e| e.into_inner());
    match outcome {
        Ok(()) => {
            reloads.applied += 1;
            reloads.error.clear();
        }
        Err(e) => {
            reloads.refused += 1;
            reloads.error = e;
        }
    }
    reloads.time_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
}

/// Blocks SIGHUP in the calling thread and so in every thread it starts afterwards.
pub fn block_hangup() -> io::Result<()> {
    sys::block_signals(&[libc::SIGHUP])
}

/// The running reload thread; dropping it stops the thread.
pub struct Reloader {
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Reloader {
    /// Starts the thread that applies `config`'s file anew at each SIGHUP, through the
    /// control socket at `socket`.
    pub fn start(config: &RunConfig, socket: &Path) -> io::Result<Reloader> {
        let hangups = sys::signalfd_of(&[libc::SIGHUP])?;
        let stop = Arc::new(EventFd::new()?);
        let thread_stop = stop.clone();
        let (current, socket) = (config.clone(), socket.to_path_buf());
        let thread = std::thread::Builder::new()
            .name("polld-reload".into())
            .spawn(move || serve(&hangups, &thread_stop, current, &socket))?;
        Ok(Reloader {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(hangups: &OwnedFd, stop: &EventFd, mut current: RunConfig, socket: &Path) {
    loop {
        let mut fds = [
            PollFd::new(stop, PollFlags::IN),
            PollFd::new(hangups, PollFlags::IN),
        ];
        if rustix::event::poll(&mut fds, None).is_err() {
            continue; // EINTR
        }
        if !fds[0].revents().is_empty() {
            return;
        }
        if sys::read_signal(hangups.as_fd()).is_some() {
            reload(&mut current, socket);
        }
    }
}

/// Reads `current`'s file again and applies its modes and knobs; `current` becomes the
/// new config once applied. The outcome is logged and counted ([`status`]).
fn reload(current: &mut RunConfig, socket: &Path) {
    notify::reloading();
    let outcome = apply(current, socket);
    if let Err(e) = &outcome {
        log::error!("SIGHUP: {e}");
    }
    record(outcome);
    notify::ready();
}

/// Applies the file; `Err` says why it was refused, or which writes were.
fn apply(current: &mut RunConfig, socket: &Path) -> Result<(), String> {
    let path = current.path.clone();
    let refuse = |e: &dyn std::fmt::Display| {
        format!("{e}; the file is refused, polld goes on with the config it has")
    };
    let new = RunConfig::load(&path).map_err(|e| refuse(&e))?;
    let defaults = check::dataplanes(&new).map_err(|e| refuse(&e))?;
    let restart = needs_restart(current, &new);
    if !restart.is_empty() {
        log::warn!(
            "SIGHUP: {}: {} changed; only a restart applies that (modes and knobs are applied now)",
            path.display(),
            restart.join(", ")
        );
    }
    let assignments = assignments(current, &new, &defaults);
    let results = match client::request(socket, &Request::Set { assignments }) {
        Ok(Response::Set { results }) => results,
        Ok(other) => return Err(refuse(&format!("unexpected answer: {other:?}"))),
        Err(e) => return Err(refuse(&e)),
    };
    let mut refused = Vec::new();
    for r in results {
        let show = |v: Option<String>| v.unwrap_or_else(|| "?".to_string());
        match r.error {
            Some(e) => refused.push(e),
            None if r.old != r.new => {
                log::info!("SIGHUP: {}: {} -> {}", r.name, show(r.old), show(r.new))
            }
            None => {}
        }
    }
    let kept: Vec<DeviceConfig> = current.devices.clone();
    *current = new;
    // An interface only a restart adds is not running: it keeps the running set.
    current
        .devices
        .retain(|d| kept.iter().any(|k| k.name == d.name));
    if !refused.is_empty() {
        return Err(format!(
            "{}: applied but for: {}",
            path.display(),
            refused.join("; ")
        ));
    }
    log::info!("SIGHUP: {} applied", path.display());
    Ok(())
}

/// The writes that make the running daemon match `new`: each running interface's mode,
/// each knob `current` set that `new` does not, back to its default, then `new`'s knobs
/// in file order.
pub(crate) fn assignments(
    current: &RunConfig,
    new: &RunConfig,
    defaults: &HashMap<String, String>,
) -> Vec<(String, String)> {
    let modes = new
        .devices
        .iter()
        .filter(|d| current.devices.iter().any(|c| c.name == d.name))
        .map(|d| (format!("dev.{}.mode", d.name), d.mode.name().to_string()));
    let dropped = current
        .knobs
        .iter()
        .filter(|k| !new.knobs.iter().any(|n| n.name == k.name))
        .filter_map(|k| Some((k.name.clone(), defaults.get(&k.name)?.clone())));
    let knobs = new.knobs.iter().map(|k| (k.name.clone(), k.value.clone()));
    modes.chain(dropped).chain(knobs).collect()
}

/// What differs between `current` and `new` beyond modes and knobs.
fn needs_restart(current: &RunConfig, new: &RunConfig) -> Vec<&'static str> {
    let without_modes = |c: &RunConfig| {
        c.devices
            .iter()
            .map(|d| DeviceConfig {
                mode: polld_core::Mode::Interrupt,
                ..d.clone()
            })
            .collect::<Vec<_>>()
    };
    let mut changed = Vec::new();
    if without_modes(current) != without_modes(new) {
        changed.push("[[interfaces]]");
    }
    if current.packet != new.packet {
        changed.push("the packet stage (addresses, routes, ARP, rules)");
    }
    if current.daemon != new.daemon {
        changed.push("[daemon]");
    }
    if current.profile != new.profile {
        changed.push("[knobs] profile");
    }
    changed
}
