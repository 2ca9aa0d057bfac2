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
//! read by the reload thread from a signalfd of its own.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use polld_control::client;
use polld_control::proto::{Request, Response};
use polld_control::server::EventFd;
use rustix::event::{PollFd, PollFlags};

use crate::check;
use crate::config::{DeviceConfig, RunConfig};
use crate::sys;

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
/// new config once applied.
fn reload(current: &mut RunConfig, socket: &Path) {
    let path = current.path.clone();
    let refuse = |e: &dyn std::fmt::Display| {
        log::error!("SIGHUP: {e}; the file is refused, polld goes on with the config it has")
    };
    let new = match RunConfig::load(&path) {
        Ok(new) => new,
        Err(e) => return refuse(&e),
    };
    let defaults = match check::dataplanes(&new) {
        Ok(defaults) => defaults,
        Err(e) => return refuse(&e),
    };
    let restart = needs_restart(current, &new);
    if !restart.is_empty() {
        log::warn!(
            "SIGHUP: {}: {} changed; only a restart applies that (modes and knobs are applied now)",
            path.display(),
            restart.join(", ")
        );
    }
    let assignments = assignments(current, &new, &defaults);
    match client::request(socket, &Request::Set { assignments }) {
        Ok(Response::Set { results }) => {
            for r in results {
                let show = |v: Option<String>| v.unwrap_or_else(|| "?".to_string());
                match r.error {
                    Some(e) => log::error!("SIGHUP: {e}"),
                    None if r.old != r.new => {
                        log::info!("SIGHUP: {}: {} -> {}", r.name, show(r.old), show(r.new))
                    }
                    None => {}
                }
            }
            log::info!("SIGHUP: {} applied", path.display());
        }
        Ok(other) => log::error!("SIGHUP: unexpected answer from the poll thread: {other:?}"),
        Err(e) => log::error!("SIGHUP: {e}"),
    }
    let kept: Vec<DeviceConfig> = current.devices.clone();
    *current = new;
    // An interface only a restart adds is not running: it keeps the running set.
    current
        .devices
        .retain(|d| kept.iter().any(|k| k.name == d.name));
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
