//! The service manager's notifications (sd_notify(3)) to `$NOTIFY_SOCKET`: READY=1 once
//! the devices are open and the control socket answers, RELOADING=1 and READY=1 around
//! each config reload, and the watchdog: WATCHDOG=1 every half `$WATCHDOG_USEC`, sent
//! only while every poll thread has made progress since the last one.
//!
//! A poll thread makes progress at each pass of its loop ([`Progress::pass`]); an idle
//! one still passes at each status tick (every 200 ms), so only a thread stuck in a piece
//! of work or a system call starves the watchdog, and systemd restarts polld. The
//! watchdog's interval (`WatchdogSec=`) must exceed two status ticks.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use polld_control::server::EventFd;
use rustix::event::{PollFd, PollFlags};

/// Sends `state` (`READY=1`, ...) to the service manager's `$NOTIFY_SOCKET`, a path or
/// an abstract name (`@name`); nothing when the variable is unset.
pub(crate) fn notify(state: &str) -> io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let addr = match target.to_str().and_then(|t| t.strip_prefix('@')) {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(&target)?,
    };
    UnixDatagram::unbound()?.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

/// [`notify`], a failure logged.
pub(crate) fn tell(state: &str) {
    if let Err(e) = notify(state) {
        let first = state.lines().next().unwrap_or_default();
        log::warn!("NOTIFY_SOCKET: cannot send {first}: {e}");
    }
}

/// READY=1 with polld's pid.
pub(crate) fn ready() {
    tell(&format!("READY=1\nMAINPID={}\n", std::process::id()));
}

/// RELOADING=1 with the monotonic clock, as systemd wants it (`Type=notify-reload`).
pub(crate) fn reloading() {
    let usec = crate::sys::now_ns() / 1000;
    tell(&format!("RELOADING=1\nMONOTONIC_USEC={usec}\n"));
}

/// The progress counters of the running poll threads.
static THREADS: Mutex<Vec<Arc<AtomicU64>>> = Mutex::new(Vec::new());

/// A poll thread's progress counter, counted by the watchdog while it lives.
#[derive(Debug)]
pub struct Progress(Arc<AtomicU64>);

impl Progress {
    pub fn register() -> Progress {
        let counter = Arc::new(AtomicU64::new(0));
        lock().push(counter.clone());
        Progress(counter)
    }

    /// One pass of the poll thread's loop.
    pub fn pass(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        lock().retain(|c| !Arc::ptr_eq(c, &self.0));
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<Arc<AtomicU64>>> {
    THREADS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Each poll thread's counter, by identity.
fn snapshot() -> Vec<(usize, u64)> {
    lock()
        .iter()
        .map(|c| (Arc::as_ptr(c) as usize, c.load(Ordering::Relaxed)))
        .collect()
}

/// Whether every poll thread of `now` passed since `before` (one that started since
/// counts as progress); false when there is none.
fn all_progressed(before: &[(usize, u64)], now: &[(usize, u64)]) -> bool {
    !now.is_empty()
        && now
            .iter()
            .all(|(id, n)| !before.iter().any(|(b, m)| b == id && m == n))
}

/// How often the service manager wants WATCHDOG=1, if it does and means this process:
/// `$WATCHDOG_USEC`, with `$WATCHDOG_PID` unset or polld's pid.
fn watchdog_usec() -> Option<u64> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    match std::env::var("WATCHDOG_PID") {
        Ok(pid) if pid.parse() != Ok(std::process::id()) => None,
        _ => (usec > 0).then_some(usec),
    }
}

/// The watchdog thread; dropping it stops the thread.
pub(crate) struct Watchdog {
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the watchdog thread when the service manager asks for one.
    pub(crate) fn start() -> io::Result<Option<Watchdog>> {
        let Some(usec) = watchdog_usec() else {
            return Ok(None);
        };
        let stop = Arc::new(EventFd::new()?);
        let thread_stop = stop.clone();
        let period = Duration::from_micros(usec / 2);
        let thread = std::thread::Builder::new()
            .name("polld-watchdog".into())
            .spawn(move || feed(&thread_stop, period))?;
        Ok(Some(Watchdog {
            stop,
            thread: Some(thread),
        }))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.signal();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn feed(stop: &EventFd, period: Duration) {
    let timeout = rustix::time::Timespec::try_from(period).unwrap_or(rustix::time::Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    });
    let mut before = snapshot();
    let mut stalled = false;
    loop {
        let mut fds = [PollFd::new(stop, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => {}
            Ok(_) => return,
            Err(_) => continue, // EINTR
        }
        let now = snapshot();
        if all_progressed(&before, &now) {
            if stalled {
                log::info!("watchdog: every poll thread makes progress again");
                stalled = false;
            }
            tell("WATCHDOG=1\n");
        } else if !stalled {
            log::error!(
                "watchdog: a poll thread made no progress in {period:?}; WATCHDOG=1 withheld"
            );
            stalled = true;
        }
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_every_thread_passing_or_new() {
        assert!(all_progressed(&[(1, 5), (2, 7)], &[(1, 6), (2, 8)]));
        assert!(!all_progressed(&[(1, 5), (2, 7)], &[(1, 6), (2, 7)]));
        assert!(all_progressed(&[(1, 5)], &[(1, 6), (3, 0)]));
        assert!(!all_progressed(&[], &[]));
    }
}
