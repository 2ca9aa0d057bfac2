//! The system calls polld makes that rustix does not offer safely, each behind one safe
//! function: scheduling policies, blocked signals read through a signalfd, a stop flag set
//! by SIGINT and SIGTERM, poll on a descriptor a device hands out by number,
//! the socket options of the socket and packet levels, and the hooks that run in a child
//! between fork and exec. Every crate but this one forbids unsafe code and makes its system
//! calls through rustix or through this module.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// `-1` as the error it stands for (errno), anything else as success.
fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Waits up to `timeout_ms` for `fd` to become readable (a signal or the timeout just
/// ends the wait). It takes a device's descriptor by number, for a caller that must use
/// the device mutably while it waits; the kernel reports a number that is not open.
pub fn poll_readable(fd: RawFd, timeout_ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a bad fd is reported in it (POLLNVAL), not an error.
    unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
}

/// Gives task `pid` (0: the calling thread) scheduling `policy` (`libc::SCHED_*`) at
/// `priority` (0 unless the policy is a real-time one).
pub fn set_scheduler(pid: libc::pid_t, policy: libc::c_int, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is valid for the call; the kernel checks the pid and our privilege.
    check(unsafe { libc::sched_setscheduler(pid, policy, &param) }).map(drop)
}

/// As [`set_scheduler`], for `thread`, a live thread of this process (its JoinHandle
/// held).
pub fn set_thread_scheduler(
    thread: libc::pthread_t,
    policy: libc::c_int,
    priority: i32,
) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: the caller holds `thread`'s handle, so it has not been joined; `param` is
    // valid for the call.
    match unsafe { libc::pthread_setschedparam(thread, policy, &param) } {
        0 => Ok(()),
        rc => Err(io::Error::from_raw_os_error(rc)),
    }
}

/// Task `pid`'s scheduling policy and priority, as [`set_scheduler`] takes them.
pub fn scheduler_of(pid: libc::pid_t) -> io::Result<(libc::c_int, i32)> {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a plain query; the kernel checks the pid.
    let policy = check(unsafe { libc::sched_getscheduler(pid) })?;
    // SAFETY: a query into a valid sched_param; the kernel checks the pid.
    check(unsafe { libc::sched_getparam(pid, &mut param) })?;
    Ok((policy, param.sched_priority))
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

/// Blocks `signals` ([`block_signals`]) and returns a non-blocking signalfd that reads
/// them. The error is the one of `signalfd(2)`, prefixed "signalfd: ".
pub fn signalfd_of(signals: &[i32]) -> io::Result<OwnedFd> {
    block_signals(signals)?;
    let set = signal_set(signals);
    // SAFETY: `set` is a live, initialised sigset; a non-negative result is a new fd, owned
    // by nobody else.
    let fd = unsafe {
        check(libc::signalfd(
            -1,
            &set,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        ))
        .map(|fd| OwnedFd::from_raw_fd(fd))
    };
    fd.map_err(|e| io::Error::new(e.kind(), format!("signalfd: {e}")))
}

/// The signal waiting on signalfd `fd`, if one is.
pub fn read_signal(fd: BorrowedFd<'_>) -> Option<i32> {
    // A `struct signalfd_siginfo`, whose first field is the signal number (`ssi_signo`).
    let mut info = [0u8; size_of::<libc::signalfd_siginfo>()];
    let read = rustix::io::read(fd, &mut info).ok()?;
    let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
    (read == info.len()).then_some(signo as i32)
}

static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn request_stop(_signal: libc::c_int) {
    STOP_REQUESTED.store(true, Ordering::Relaxed);
}

/// Sets the disposition of SIGINT and SIGTERM to `handler`.
fn set_stop_disposition(handler: libc::sighandler_t) {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler is SIG_DFL or `request_stop`, which only stores to an
        // atomic (async-signal-safe); the sigaction struct is fully initialised before use.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Makes SIGINT and SIGTERM set a flag instead of killing the process, and returns it.
///
/// The loops poll the flag, print their summary and return normally. The handler is
/// installed without SA_RESTART so that a blocking sleep or poll returns at once.
pub fn stop_on_signals() -> &'static AtomicBool {
    STOP_REQUESTED.store(false, Ordering::Relaxed);
    set_stop_disposition(request_stop as extern "C" fn(libc::c_int) as libc::sighandler_t);
    &STOP_REQUESTED
}

/// Gives SIGINT and SIGTERM back their default action (ending the process), undoing
/// [`stop_on_signals`].
pub fn default_stop_signals() {
    set_stop_disposition(libc::SIG_DFL);
}

/// `setsockopt(SOL_PACKET, option, value)` for an integer option of a packet socket
/// (`PACKET_QDISC_BYPASS`, `PACKET_IGNORE_OUTGOING`).
pub fn set_packet_option(
    fd: BorrowedFd<'_>,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    set_option(fd, Level::Packet, option, &value)
}

/// The socket option levels the device layer sets and reads options of, beyond those
/// rustix names. The kernel only copies their values in or out: no option of these levels
/// makes it keep a pointer into our memory (as SOL_XDP's UMEM registration does).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Level {
    /// `SOL_SOCKET`.
    Socket,
    /// `SOL_PACKET`.
    Packet,
}

impl Level {
    fn raw(self) -> libc::c_int {
        match self {
            Level::Socket => libc::SOL_SOCKET,
            Level::Packet => libc::SOL_PACKET,
        }
    }
}

/// `setsockopt(level, option, value)`: the kernel reads `size_of::<T>()` bytes of `value`.
pub(crate) fn set_option<T: Copy>(
    fd: BorrowedFd<'_>,
    level: Level,
    option: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a live T of the length given, which the kernel only reads; options
    // of `level` keep no pointer (see `Level`).
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level.raw(),
            option,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A value the kernel may overwrite with any bytes: integers, and structs of them.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes is a valid `Self`.
pub(crate) unsafe trait PlainData: Copy {}

// SAFETY: any bits are a valid integer.
unsafe impl PlainData for u32 {}
// SAFETY: three u32 counters.
unsafe impl PlainData for libc::tpacket_stats_v3 {}

/// `getsockopt(level, option)` into `value`, which the kernel overwrites with up to
/// `size_of::<T>()` bytes (the rest keeps what it held).
pub(crate) fn get_option<T: PlainData>(
    fd: BorrowedFd<'_>,
    level: Level,
    option: libc::c_int,
    value: &mut T,
) -> io::Result<()> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, a live T of that length
    // whatever the bytes are (`PlainData`); options of `level` keep no pointer.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level.raw(),
            option,
            (value as *mut T).cast(),
            &mut len,
        )
    })
    .map(drop)
}

/// Makes `command`'s child run on `cpu` only, from before it executes. `cpu` must be
/// below `libc::CPU_SETSIZE` (the caller checked it is one this process may use).
pub fn pin_at_exec(command: &mut Command, cpu: usize) {
    assert!(
        cpu < libc::CPU_SETSIZE as usize,
        "CPU {cpu} is beyond the CPU set"
    );
    // SAFETY: the hook only calls sched_setaffinity, which is async-signal-safe, on a
    // set it owns; CPU_SET stays inside the set for the cpu checked above.
    unsafe {
        command.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            check(libc::sched_setaffinity(
                0,
                std::mem::size_of::<libc::cpu_set_t>(),
                &set,
            ))
            .map(drop)
        });
    }
}

/// Makes `command`'s child close, at its exec, every descriptor above stderr it
/// inherited (such as a lock `flock` holds for its command), for a child that outlives
/// us.
pub fn close_inherited_at_exec(command: &mut Command) {
    const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;
    // SAFETY: close_range is async-signal-safe and marks only the child's descriptors.
    unsafe {
        command.pre_exec(|| {
            libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
            Ok(())
        });
    }
}

/// Limits the files `command`'s child writes to `bytes` (RLIMIT_FSIZE), with SIGXFSZ
/// ignored so that a write past the limit fails with EFBIG instead of killing it.
pub fn limit_file_size_at_exec(command: &mut Command, bytes: u64) {
    // SAFETY: only async-signal-safe calls (signal, setrlimit) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            check(libc::setrlimit(libc::RLIMIT_FSIZE, &limit)).map(drop)
        });
    }
}
