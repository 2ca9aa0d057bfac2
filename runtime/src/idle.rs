//! Idle polling's own thread, as FreeBSD's `idlepoll` kernel thread: it runs at idle
//! priority (`SCHED_IDLE`) on the poll thread's CPU, so it gets to run only while nothing
//! else on that CPU wants it, and then asks for one idle-poll pass.
//!
//! **Who touches the dataplane.** The poll thread alone. The idle thread never polls: it
//! only reports "the CPU went idle" through an eventfd in the poll thread's epoll set,
//! and the poll thread answers with one `each_burst` pass ([`polld_core::Dataplane::idle_poll`])
//! at its own priority. The alternative, a lock the poll thread holds while working and
//! the idle thread takes for its pass, costs the poll path a lock per wakeup and inverts
//! priorities: an idle-priority thread holding the lock when a tick arrives keeps the
//! tick waiting for as long as other work fills the CPU (Linux gives a `SCHED_IDLE`
//! thread no priority inheritance below the real-time classes). With the doorbell the
//! poll path pays one flag test per wakeup, the poll thread's policy never changes after
//! set-up, and a pass that starts while the CPU is idle delays work arriving meanwhile
//! by at most one `each_burst` pass.
//!
//! The hand-off: the poll thread [`IdlePoller::ask`]s (unparks the idle thread) once per
//! pass it wants; the idle thread, when the scheduler lets it run, rings the doorbell and
//! parks again; the poll thread [`IdlePoller::take`]s the ring, polls, and asks again
//! while idle polling stays on. Each pass thus costs two context switches, paid only
//! while the CPU has nothing else to do.

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use polld_control::server::EventFd;

/// The idle thread's name, as FreeBSD's kernel thread (`ps -L`, `/proc/PID/task/*/comm`).
pub const THREAD_NAME: &str = "idlepoll";

/// The idle thread and its doorbell.
pub struct IdlePoller {
    /// Rung by the idle thread when it got the CPU; in the poll thread's epoll set.
    idle: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// A pass was asked for and the idle thread has not rung yet.
    asked: bool,
}

impl IdlePoller {
    /// Starts the idle thread on the calling thread's CPUs (threads inherit affinity) at
    /// `SCHED_IDLE`, which needs no privilege.
    pub fn start() -> io::Result<IdlePoller> {
        let idle = Arc::new(EventFd::new()?);
        let stop = Arc::new(AtomicBool::new(false));
        let (started, result) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn({
                let idle = Arc::clone(&idle);
                let stop = Arc::clone(&stop);
                move || {
                    if let Err(e) = polld_dev::sys::set_scheduler(0, libc::SCHED_IDLE, 0) {
                        let _ = started.send(Err(e));
                        return;
                    }
                    let _ = started.send(Ok(()));
                    loop {
                        std::thread::park();
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        idle.signal();
                    }
                }
            })?;
        let ready = result.recv().unwrap_or_else(|_| {
            Err(io::Error::other(
                "the idle poll thread exited while starting",
            ))
        });
        let poller = IdlePoller {
            idle,
            stop,
            thread: Some(thread),
            asked: false,
        };
        ready
            .map_err(|e| io::Error::new(e.kind(), format!("idle poll thread: SCHED_IDLE: {e}")))?;
        Ok(poller)
    }

    /// The fd that turns readable when the CPU went idle: add it to the epoll set.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.idle.fd()
    }

    /// Asks for one report of an idle CPU, unless one is asked for already.
    pub fn ask(&mut self) {
        if !self.asked {
            self.asked = true;
            if let Some(thread) = &self.thread {
                thread.thread().unpark();
            }
        }
    }

    /// Takes the idle thread's report; true if the CPU went idle since [`Self::ask`].
    pub fn take(&mut self) -> bool {
        self.idle.clear();
        std::mem::take(&mut self.asked)
    }
}

impl Drop for IdlePoller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}
