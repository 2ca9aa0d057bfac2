//! What the control and metrics server threads share: the `poll(2)` wait over the stop
//! eventfd, the listener and the connections, woken by the nearest of their deadlines;
//! and taking the next connection off a non-blocking listener.

use std::io;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// How long to stop accepting after `accept` failed (out of file descriptors).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// What to wait for on a listener: a connection while `accepting`, else nothing.
pub(crate) fn accept_events(accepting: bool) -> PollFlags {
    if accepting {
        PollFlags::IN
    } else {
        PollFlags::empty()
    }
}

/// Waits until one of `fds` is ready (an fd whose events are empty is kept but not
/// watched) or the earliest of `deadlines` passes, and returns
/// which of them are ready, in order; `None` when a signal interrupted the wait (the
/// caller loops).
pub(crate) fn wait(
    fds: &mut [PollFd<'_>],
    deadlines: impl Iterator<Item = Instant>,
) -> Option<Vec<bool>> {
    let now = Instant::now();
    let timeout_ms = deadlines
        .map(|deadline| deadline.saturating_duration_since(now))
        .min()
        // Rounded up, so that a wake-up finds the deadline passed.
        .map(|d| (d.as_millis() + 1).min(i32::MAX as u128) as i64);
    let timeout = timeout_ms.map(|ms| Timespec {
        tv_sec: ms / 1000,
        tv_nsec: ms % 1000 * 1_000_000,
    });
    // EINTR; poll cannot fail otherwise with valid arguments.
    poll(fds, timeout.as_ref()).ok()?;
    Some(fds.iter().map(|fd| !fd.revents().is_empty()).collect())
}

/// After a failed accept (EMFILE), when to try again: the listener stays readable, and
/// polling it meanwhile would spin.
#[derive(Default)]
pub(crate) struct AcceptPause(Option<Instant>);

impl AcceptPause {
    /// Whether accepting is paused now (a pause that ran out is over).
    pub(crate) fn active(&mut self) -> bool {
        if self.0.is_some_and(|t| t <= Instant::now()) {
            self.0 = None;
        }
        self.0.is_some()
    }

    /// When the pause ends, a deadline for [`wait`].
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.0
    }
}

/// The next connection `accept` gives, made non-blocking by `nonblocking`; `None` when
/// none waits, or when accept failed: then `pause` stops accepting for a while.
pub(crate) fn next_connection<S>(
    accept: impl Fn() -> io::Result<S>,
    nonblocking: impl Fn(&S) -> io::Result<()>,
    pause: &mut AcceptPause,
) -> Option<S> {
    loop {
        match accept() {
            Ok(stream) if nonblocking(&stream).is_ok() => return Some(stream),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(_) => {
                pause.0 = Some(Instant::now() + ACCEPT_RETRY);
                return None;
            }
        }
    }
}
