//! Thin, safe wrappers over the Linux calls the executor waits with: epoll, timerfd,
//! signalfd, and the monotonic clock. Each owns its fd.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use polld_control::server::EventFd;

fn check(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

/// Monotonic time in nanoseconds (the clock the scheduler and the timers share).
pub use polld_dev::clock::monotonic_ns as now_ns;

/// An epoll instance; each registered fd carries a `u64` token.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the result is checked and owned.
        let fd = check(
            unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) },
            "epoll_create1",
        )?;
        Ok(Epoll {
            // SAFETY: a fresh fd we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is valid for the call; the kernel validates `fd`.
        check(
            unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) },
            "epoll_ctl",
        )
        .map(drop)
    }

    /// Waits for `fd` to become readable (level-triggered).
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token)
    }

    /// Waits for `fd` to be woken writable (edge-triggered: reported once when added if it
    /// is writable then, and after that once per wakeup that finds it writable).
    pub fn add_writable_edge(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let events = (libc::EPOLLOUT | libc::EPOLLET) as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Stops waiting for `fd`. An fd already closed has left the set by itself.
    pub fn remove(&self, fd: RawFd) {
        let _ = self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0);
    }

    /// Waits up to `timeout_ms` (-1: forever, 0: just look) and returns the tokens of
    /// the ready fds. EINTR counts as nothing ready.
    pub fn wait(&mut self, timeout_ms: i32, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        // SAFETY: the buffer holds `len` events and outlives the call.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        ready.extend(self.events[..n as usize].iter().map(|e| e.u64));
        Ok(())
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
        // SAFETY: plain syscall; the result is checked and owned.
        let fd = check(
            unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            },
            "timerfd_create",
        )?;
        Ok(Timer {
            // SAFETY: a fresh fd we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
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
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        };
        let first = if period_ns == 0 { 0 } else { first_ns.max(1) };
        let spec = libc::itimerspec {
            it_interval: ts(period_ns),
            it_value: ts(first),
        };
        // Read before the kernel reads its clock: a wakeup is never reported early.
        let now = now_ns();
        // SAFETY: `spec` is valid; the old value is not wanted.
        check(
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) },
            "timerfd_settime",
        )?;
        self.period_ns = period_ns;
        self.next_ns = now + first;
        Ok(())
    }

    /// Expirations since the last read (0 if none).
    pub fn expirations(&mut self) -> u64 {
        let mut n: u64 = 0;
        // SAFETY: reads 8 bytes into `n`.
        let r = unsafe { libc::read(self.fd.as_raw_fd(), (&mut n as *mut u64).cast(), 8) };
        if r != 8 {
            return 0;
        }
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

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
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
        read_signal(fd.as_raw_fd())
    }

    pub fn fd(&self) -> RawFd {
        match &self.source {
            SignalSource::Signalfd(fd) => fd.as_raw_fd(),
            SignalSource::Relay(bell, _) => bell.fd(),
        }
    }
}

/// `signals` as a set.
fn signal_set(signals: &[i32]) -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &signal in signals {
            libc::sigaddset(&mut set, signal);
        }
        set
    }
}

/// Blocks `signals` in the calling thread and so in every thread it starts afterwards.
pub fn block_signals(signals: &[i32]) -> io::Result<()> {
    let set = signal_set(signals);
    // SAFETY: `set` is a live, initialised sigset.
    match unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Blocks `signals` ([`block_signals`]) and returns a non-blocking signalfd that reads them.
pub fn signalfd_of(signals: &[i32]) -> io::Result<OwnedFd> {
    block_signals(signals)?;
    let set = signal_set(signals);
    // SAFETY: `set` is a live, initialised sigset; a non-negative result is a new fd,
    // owned by nobody else.
    unsafe {
        let fd = check(
            libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC),
            "signalfd",
        )?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The signal waiting on signalfd `fd`, if one is.
pub fn read_signal(fd: RawFd) -> Option<i32> {
    // SAFETY: signalfd_siginfo is plain data; the read fills it.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: reads at most `size` bytes into `info`.
    let r = unsafe { libc::read(fd, (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
    (r as usize == size).then_some(info.ssi_signo as i32)
}

/// The CPUs the calling thread may run on (its affinity mask), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: the set is zeroed, then filled by the kernel; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        check(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            "sched_getaffinity",
        )?;
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&cpu| libc::CPU_ISSET(cpu, &set))
            .collect())
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("sched_setaffinity: CPU {cpu} is beyond the kernel's CPU set"),
        ));
    }
    // SAFETY: the set is zeroed then filled; the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        check(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            "sched_setaffinity",
        )
        .map(drop)
    }
}

/// Returns the calling thread to SCHED_OTHER (no privilege needed).
pub fn make_ordinary() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: valid parameters for the calling thread.
    check(
        unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) },
        "sched_setscheduler(SCHED_OTHER)",
    )
    .map(drop)
}

/// Gives the CPU to another runnable thread of the same policy, if any.
pub fn yield_cpu() {
    // SAFETY: sched_yield has no preconditions and cannot fail on Linux.
    unsafe { libc::sched_yield() };
}

/// Makes the calling thread SCHED_FIFO at a middle priority, and tightens its timer slack
/// so that ticks are not rounded late.
pub fn make_realtime() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 50 };
    // SAFETY: valid parameters for the calling thread.
    unsafe {
        check(
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &param),
            "sched_setscheduler(SCHED_FIFO)",
        )?;
        libc::prctl(libc::PR_SET_TIMERSLACK, 1);
    }
    Ok(())
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
