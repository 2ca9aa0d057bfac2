//! Thin, safe wrappers over the Linux calls the executor waits with: epoll, timerfd,
//! signalfd, and the monotonic clock. Each owns its fd.

use std::io;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use polld_control::server::EventFd;
use rustix::event::epoll;
use rustix::thread::CpuSet;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// `err` prefixed with the call that failed.
fn failed(what: &str, err: impl Into<io::Error>) -> io::Error {
    let e = err.into();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Monotonic time in nanoseconds (the clock the scheduler and the timers share).
pub use polld_dev::clock::monotonic_ns as now_ns;

/// The signalfd calls rustix lacks, from the device layer's system-call module.
pub use polld_dev::sys::{block_signals, read_signal, signalfd_of};

/// An epoll instance; each registered fd carries a `u64` token.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<epoll::Event>,
}

/// How many events one wait reports at most.
const EPOLL_EVENTS: usize = 64;

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        let fd =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(|e| failed("epoll_create1", e))?;
        Ok(Epoll {
            fd,
            events: Vec::with_capacity(EPOLL_EVENTS),
        })
    }

    fn add_with(&self, fd: impl AsFd, flags: epoll::EventFlags, token: u64) -> io::Result<()> {
        epoll::add(&self.fd, fd, epoll::EventData::new_u64(token), flags)
            .map_err(|e| failed("epoll_ctl", e))
    }

    /// Waits for `fd` to become readable (level-triggered).
    pub fn add(&self, fd: impl AsFd, token: u64) -> io::Result<()> {
        self.add_with(fd, epoll::EventFlags::IN, token)
    }

    /// Waits for `fd` to be woken writable (edge-triggered: reported once when added if it
    /// is writable then, and after that once per wakeup that finds it writable).
    pub fn add_writable_edge(&self, fd: impl AsFd, token: u64) -> io::Result<()> {
        self.add_with(fd, epoll::EventFlags::OUT | epoll::EventFlags::ET, token)
    }

    /// Stops waiting for `fd`. (An fd closed has left the set by itself once nothing else
    /// holds its file.)
    pub fn remove(&self, fd: impl AsFd) {
        let _ = epoll::delete(&self.fd, fd);
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: just look) and returns the tokens of
    /// the ready fds. EINTR counts as nothing ready.
    pub fn wait(&mut self, timeout_ms: i32, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        self.events.clear();
        let timeout = u64::try_from(timeout_ms).ok().map(ms_timespec);
        match epoll::wait(
            &self.fd,
            rustix::buffer::spare_capacity(&mut self.events),
            timeout.as_ref(),
        ) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        ready.extend(self.events.iter().map(|e| e.data.u64()));
        Ok(())
    }
}

/// The 8-byte count a timerfd or an eventfd reads as, if the read got one.
pub(crate) fn read_u64(fd: BorrowedFd<'_>) -> Option<u64> {
    let mut count = [0u8; 8];
    match rustix::io::read(fd, &mut count) {
        Ok(8) => Some(u64::from_ne_bytes(count)),
        _ => None,
    }
}

/// `ms` milliseconds as a timespec.
fn ms_timespec(ms: u64) -> Timespec {
    ns_timespec(ms * 1_000_000)
}

/// `ns` nanoseconds as a timespec.
fn ns_timespec(ns: u64) -> Timespec {
    Timespec {
        tv_sec: (ns / 1_000_000_000) as i64,
        tv_nsec: (ns % 1_000_000_000) as i64,
    }
}

/// A periodic timer; reading it returns the expirations since the last read. It keeps its
/// own schedule, so a read also tells how late it came without asking the kernel.
pub struct Timer {
    fd: OwnedFd,
    period_ns: u64,
    /// When the first expiry not read yet is due, on the monotonic clock.
    next_ns: u64,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(|e| failed("timerfd_create", e))?;
        Ok(Timer {
            fd,
            period_ns: 0,
            next_ns: 0,
        })
    }

    /// Fires every `period_ns` from now on; 0 stops it.
    pub fn set_period(&mut self, period_ns: u64) -> io::Result<()> {
        self.set(period_ns, period_ns)
    }

    /// Fires in `first_ns` (at least 1 ns if the timer runs), then every `period_ns`;
    /// a period of 0 stops it.
    pub fn set(&mut self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let first = if period_ns == 0 { 0 } else { first_ns.max(1) };
        let spec = Itimerspec {
            it_interval: ns_timespec(period_ns),
            it_value: ns_timespec(first),
        };
        // Read before the kernel reads its clock: a wakeup is never reported early.
        let now = now_ns();
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)
            .map_err(|e| failed("timerfd_settime", e))?;
        self.period_ns = period_ns;
        self.next_ns = now + first;
        Ok(())
    }

    /// Fires once, in `first_ns` (at least 1 ns), replacing what was armed.
    pub fn once(&mut self, first_ns: u64) -> io::Result<()> {
        let first = first_ns.max(1);
        let spec = Itimerspec {
            it_interval: ns_timespec(0),
            it_value: ns_timespec(first),
        };
        let now = now_ns();
        timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec)
            .map_err(|e| failed("timerfd_settime", e))?;
        self.period_ns = 0;
        self.next_ns = now + first;
        Ok(())
    }

    /// Expirations since the last read (0 if none).
    pub fn expirations(&mut self) -> u64 {
        let Some(n) = read_u64(self.fd.as_fd()) else {
            return 0;
        };
        self.next_ns += n * self.period_ns;
        n
    }

    /// Expirations since the last read, and how long before `now` (the monotonic clock,
    /// as the caller read it on waking) the first of them expired, in ns (0 if none). With
    /// `now` read right after the wakeup, that is how late the wakeup came.
    pub fn expirations_late(&mut self, now: u64) -> (u64, u64) {
        let first_due = self.next_ns;
        let n = self.expirations();
        if n == 0 {
            return (0, 0);
        }
        (n, now.saturating_sub(first_due))
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// SIGINT and SIGTERM, blocked and delivered through an fd so the loop handles them
/// between two steps. Block them before starting other threads so they inherit the mask.
pub struct Signals {
    source: SignalSource,
}

enum SignalSource {
    /// The process's own signalfd.
    Signalfd(OwnedFd),
    /// Passed on by the main thread ([`Signals::relay`]): a doorbell and the signal.
    Relay(Arc<EventFd>, Arc<AtomicI32>),
}

/// The sending end of [`Signals::relay`].
pub struct SignalRelay {
    bell: Arc<EventFd>,
    signal: Arc<AtomicI32>,
}

impl SignalRelay {
    /// Hands `signal` to the relay's [`Signals`].
    pub fn send(&self, signal: i32) {
        self.signal.store(signal, Ordering::SeqCst);
        self.bell.signal();
    }
}

impl Signals {
    pub fn block_stop_signals() -> io::Result<Signals> {
        Ok(Signals {
            source: SignalSource::Signalfd(signalfd_of(&[libc::SIGINT, libc::SIGTERM])?),
        })
    }

    /// A `Signals` for one poll thread of several: a process-directed signal wakes one
    /// signalfd reader only, so the daemon's main thread reads them and passes them on
    /// with the returned [`SignalRelay`].
    pub fn relay() -> io::Result<(Signals, SignalRelay)> {
        let bell = Arc::new(EventFd::new()?);
        let signal = Arc::new(AtomicI32::new(0));
        let signals = Signals {
            source: SignalSource::Relay(bell.clone(), signal.clone()),
        };
        Ok((signals, SignalRelay { bell, signal }))
    }

    /// The signal that arrived, if any.
    pub fn take(&self) -> Option<i32> {
        let fd = match &self.source {
            SignalSource::Signalfd(fd) => fd,
            SignalSource::Relay(bell, signal) => {
                let rung = bell.take();
                return rung.then(|| signal.load(Ordering::SeqCst));
            }
        };
        read_signal(fd.as_fd())
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        match &self.source {
            SignalSource::Signalfd(fd) => fd.as_fd(),
            SignalSource::Relay(bell, _) => bell.fd(),
        }
    }
}

/// The CPUs the calling thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set =
        rustix::thread::sched_getaffinity(None).map_err(|e| failed("sched_getaffinity", e))?;
    Ok((0..CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("sched_setaffinity: CPU {cpu} is beyond the kernel's CPU set"),
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| failed("sched_setaffinity", e))
}

/// Returns the calling thread to SCHED_OTHER (no privilege needed).
pub fn make_ordinary() -> io::Result<()> {
    polld_dev::sys::set_scheduler(0, libc::SCHED_OTHER, 0)
        .map_err(|e| failed("sched_setscheduler(SCHED_OTHER)", e))
}

/// Gives the CPU to another runnable thread of the same policy, if any.
pub fn yield_cpu() {
    rustix::thread::sched_yield();
}

/// The poll thread's `SCHED_FIFO` priority, a middle one.
const POLL_PRIORITY: i32 = 50;

/// Makes the calling thread SCHED_FIFO at a middle priority, and tightens its timer slack
/// so that ticks are not rounded late.
pub fn make_realtime() -> io::Result<()> {
    polld_dev::sys::set_scheduler(0, libc::SCHED_FIFO, POLL_PRIORITY)
        .map_err(|e| failed("sched_setscheduler(SCHED_FIFO)", e))?;
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    Ok(())
}

/// Puts `thread`, the control socket's, at `SCHED_FIFO` one above the poll thread: a
/// request wakes it at once. At the poll thread's priority it waited until the poll thread
/// slept, which interrupt work under a flood on every input never did (`polld ctl` got no
/// answer in 10 s); its own work is a request's parse and reply, and the poll thread
/// answers the request when it next reads its events.
pub fn make_control_realtime(thread: libc::pthread_t) -> io::Result<()> {
    polld_dev::sys::set_thread_scheduler(thread, libc::SCHED_FIFO, POLL_PRIORITY + 1)
        .map_err(|e| failed("pthread_setschedparam(SCHED_FIFO) of the control thread", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_read_reports_the_first_expiry_it_missed() {
        let mut timer = Timer::new().unwrap();
        assert_eq!(timer.expirations_late(now_ns()), (0, 0));
        timer.set_period(1_000_000).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let (n, late) = timer.expirations_late(now_ns());
        assert!(n >= 4, "{n} expirations in 5 ms");
        // The first expiry was at 1 ms, and `now` was read at 5 ms or later. (`now` comes
        // just before the read, which may count one more expiry, and the timer's own clock
        // just before the kernel's when it was set: either way it is off by far less than
        // 100 µs.)
        assert!(
            late + 100_000 >= (n - 1) * 1_000_000,
            "{late} ns late after {n}"
        );
        assert!(late < n * 1_000_000 + 100_000, "{late} ns late after {n}");
    }
}
