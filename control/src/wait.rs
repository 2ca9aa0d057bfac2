//! The `poll(2)` wait the control and metrics server threads share: each watches its
//! stop eventfd, its listener and its connections, and wakes by the nearest of their
//! deadlines.

use std::os::fd::RawFd;
use std::time::Instant;

/// A pollfd waiting for `events` on `fd` (none when 0: the fd is kept but not watched).
pub(crate) fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Waits until one of `fds` is ready or the earliest of `deadlines` passes; false when
/// a signal interrupted the wait (the caller loops).
pub(crate) fn wait(fds: &mut [libc::pollfd], deadlines: impl Iterator<Item = Instant>) -> bool {
    let now = Instant::now();
    let timeout_ms = deadlines
        .map(|deadline| deadline.saturating_duration_since(now))
        .min()
        // Rounded up, so that a wake-up finds the deadline passed.
        .map_or(-1, |d| (d.as_millis() + 1).min(i32::MAX as u128) as i32);
    // SAFETY: `fds` is a live slice of `fds.len()` pollfds.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    // EINTR; poll cannot fail otherwise with valid arguments.
    n >= 0
}
