//! The real-time executor: one poll thread that drives the dataplane the way FreeBSD's
//! kernel drives `kern_poll` and the drivers.
//!
//! The thread sleeps in `epoll_wait` on:
//! - the **tick** timerfd at `kern.polling.hz`, armed only while some interface polls; a
//!   read that reports `n` expirations is `n` ticks (owed ticks: docs/algorithm.md §2);
//! - the **look** timerfd, one-shot: armed where a poll cycle at light traffic asks to look
//!   at the devices before the next tick ([`Step`]'s `look`, `kern.polling.looks`), so
//!   that a frame waits part of a tick for its poll rather than all of it, with the
//!   device's interrupt still off; the tick stays where it is; and where the wakeup
//!   watchdog looks at the rings of interfaces that wait for a wakeup
//!   (`kern.polling.wakeup_watchdog_ms`, the earlier of the two);
//! - each interface's **interrupt**: its ring or socket fd, in the set only while the
//!   dataplane has that interrupt armed (interrupt mode; adaptive mode between tasks)
//!   and the thread has slept within the last millisecond: a thread that has had work
//!   for longer reads the armed lines from the devices at each read of its events
//!   (`PollThread::choose_line_reading`), so that a flood's writer does not pay a wakeup
//!   callback per frame for an interrupt nobody sleeps on;
//! - an output's **transmit-ready line**: its `tx_ready_fd` capability, waited on for POLLOUT,
//!   edge-triggered, only while interrupt work waits for that output (it stopped because the
//!   output was full); the status timer also raises it, as em(4)'s watchdog retries a
//!   transmit that never completed. Where only a wakeup while the thread sleeps is a rise
//!   ([`polld_core::TxReadyLine::WakeupOnly`]), the thread follows the device layer's rule
//!   for those ([`polld_dev::tx_wakeup`]): it looks without sleeping before it sleeps and
//!   drops that line from what the look finds;
//! - a slow **status** timer: link checks of the interfaces the poller does not check
//!   (a gone device is swapped there for the one the reopen thread opened, [`polld_middleware::reopen`]);
//! - SIGINT/SIGTERM through a signalfd, and the control socket's wakeup eventfd;
//! - the idle poller's doorbell ([`crate::idle`]), asked for while `idle_poll` is on;
//! - with `tables = "kernel"`, the netlink socket that brings the kernel's route, address
//!   and neighbour changes ([`crate::tables`]), applied to the router between two pieces
//!   of work.
//!
//! The loop is the dataplane's ([`Dataplane::drive`], the same for the simulated CPU):
//! this thread is its [`polld_core::Executor`], which keeps only the clock, the waiting and
//! the time accounts. Each wait reports what fired to the dataplane (ticks, interrupt
//! lines, an idle CPU); the loop runs what is due and says when to read the events
//! again: while an interrupt line is waited on, before each piece of work but a running
//! handler's next batch, so a device's interrupt runs before the input queue's next frame,
//! as in FreeBSD (under a flood in interrupt mode without fastforwarding the queue starves:
//! receive livelock); after one pass of busy or idle polling, which spin; and after a
//! millisecond of work, since a handler under a flood that outruns the thread never finds
//! its ring empty, and the tick, `polld ctl` and a stop signal must still get in. When
//! nothing is due the thread sleeps, which is what leaves the rest of the core to user
//! work. On a stop signal it ends the interrupt work under way and drains what was
//! received ([`Dataplane::finish`]).
//!
//! Busy polling spins at `SCHED_OTHER`, and a pass that finds nothing yields the CPU. On
//! veth the kernel's receive threads (threaded NAPI, `SCHED_OTHER`) fill the sockets a
//! busy interface reads; a `SCHED_FIFO` spinner on their CPU would leave them only the
//! few percent the scheduler reserves for ordinary threads, and lose most of the traffic
//! (docs/linux-mapping.md, "who owns the receive work"). So a realtime poll thread lowers
//! itself while some interface is busy and returns to `SCHED_FIFO` (it keeps
//! CAP_SYS_NICE for that) when none is; meanwhile its ticks are as punctual as an ordinary
//! thread's. Idle polling waits for the idle thread (`SCHED_IDLE`) to find the CPU idle,
//! so busy mode is the only thing that changes the poll thread's policy.
//!
//! Each tick wakeup is timed against the tick's expiry ([`Lateness`], `polld.tick_lateness_*`):
//! the part of polling's latency that is the kernel's timer path, not polld's. The owed
//! ticks of a late read that the thread's own CPU time does not explain were waited for,
//! not overrun ([`WaitedTicks`], `kern.polling.waited_polls`): their cycles skip the
//! overrun back-off. The thread's CPU per tick, busy and idle polling left out, with the
//! run time of its CPU's `ksoftirqd` while an interface is on a driver ([`TickCpu`],
//! [`SoftirqThread`]), is passed on at each tick read; the time controller leaves what it
//! took beyond its cycles (the
//! thread's wakeup, the timer and epoll calls, control and status rounds, work outside the
//! cycles, the interrupts the kernel charges it for, the devices' softirq work left to
//! `ksoftirqd`) out of the next budgets (`kern.polling.tick_overhead_ns`).
//!
//! The executor keeps its own time accounts ([`TimeAccounts`]): the monotonic clock is read
//! around each piece of work (once per piece, never per packet), and the sums
//! are served as `polld.work_ns`, `polld.busy_poll_ns` and `polld.idle_poll_ns` with the
//! other `polld.*` entries, from which `polld stat` splits the core's time. For `auto`
//! interfaces it also lends the dataplane the thread's CPU clock, read once per window
//! ([`Dataplane::step`]): overload is judged on the CPU the thread really used, wakeups
//! included and preemptions not.
//!
//! One file per reason to change: this one (the thread, its loop's hooks, its time
//! accounts), `events.rs` (the wait and what each event reports), `lines.rs` (which device
//! fds are in the epoll set), `status.rs` (status rounds, scheduling policy, busy-poll
//! settings, the drain at a stop) and `control.rs` (answering `polld ctl` and `polld
//! ifconfig`).

mod control;
mod events;
mod lines;
mod status;

use std::io;
use std::ops::ControlFlow;
use std::os::fd::AsFd;

use polld_control::server::Inbox;
use polld_core::{Clocks, Dataplane, Device, Due, Step};
use polld_dev::tx_wakeup::WakeupOnlyLines;
use polld_packet::Stage;

use crate::device_irqs::DeviceIrqCounts;
use crate::idle::IdlePoller;
use crate::lateness::{Lateness, SoftirqThread, TickCpu, WaitedTicks};
use crate::notify::Progress;
use crate::sys::{now_ns, Epoll, Signals, Timer};
use crate::tables::KernelFollower;

pub use control::interfaces;
use lines::{Line, Watched};

/// The dataplane on real devices.
pub type RealDataplane = Dataplane<Box<dyn Device>, Stage>;

/// Status checks of interfaces outside the poll cycle.
const STATUS_PERIOD_NS: u64 = 200_000_000;

const TOKEN_TICK: u64 = 0;
const TOKEN_STATUS: u64 = 1;
const TOKEN_SIGNAL: u64 = 2;
const TOKEN_CONTROL: u64 = 3;
const TOKEN_IDLE: u64 = 4;
const TOKEN_LOOK: u64 = 5;
const TOKEN_TABLES: u64 = 6;
const TOKEN_IF: u64 = 16;
/// Transmit-ready lines: above every interrupt's token.
const TOKEN_TX: u64 = 1 << 32;

/// What `polld ifconfig` shows besides the counters: per interface, set at start.
#[derive(Clone, Debug, Default)]
pub struct IfInfo {
    pub name: String,
    pub backend: String,
    /// Who does its receive work: polld or the kernel.
    pub rx_owner: crate::rx_work::RxOwner,
    /// Which of `/proc/interrupts`' vectors are its device's receive interrupts.
    pub irqs: Option<polld_dev::irq::DeviceIrqs>,
    /// AF_XDP: whose UMEM its socket uses (`shared with veth2`, `own`).
    pub umem: Option<String>,
    pub mac: Option<String>,
    pub addresses: Vec<String>,
}

/// Where the poll thread's time went, in ns of the monotonic clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimeAccounts {
    /// Interrupt handlers, tasks, ticks, poll chunks, the input-queue drain, pollmore.
    pub work_ns: u64,
    /// Busy polling (`busy` mode).
    pub busy_poll_ns: u64,
    /// Idle polling (`kern.polling.idle_poll`).
    pub idle_poll_ns: u64,
}

/// What the executor reports about the daemon besides the dataplane (`polld.*`).
#[derive(Clone, Debug, Default)]
pub struct DaemonInfo {
    /// The config file, absolute.
    pub config: std::path::PathBuf,
    /// The CPU the poll thread is pinned to.
    pub pinned_cpu: Option<usize>,
    /// The poll thread runs `SCHED_FIFO` (but for busy polling).
    pub realtime: bool,
    /// Writable entries before the config was applied.
    pub defaults: Vec<(String, String)>,
}

/// The real-time executor: the dataplane and the poll thread that drives it.
pub struct Executor {
    dp: RealDataplane,
    thread: PollThread,
}

/// Everything of the poll thread but the dataplane: what it waits on, its clocks and its
/// accounts. It is the dataplane loop's [`polld_core::Executor`].
struct PollThread {
    info: Vec<IfInfo>,
    daemon: DaemonInfo,
    accounts: TimeAccounts,
    epoll: Epoll,
    /// What the last wait reported.
    ready: Vec<u64>,
    tick: Timer,
    tick_ns: u64,
    /// One-shot: a look at the devices between two ticks.
    look: Timer,
    status: Timer,
    signals: Signals,
    inbox: Option<Inbox>,
    /// The fds each interface has in the epoll set, by [`Line`].
    watched: Vec<Watched>,
    /// Which transmit-ready events of wakeup-only lines are rises.
    wakeup_only: WakeupOnlyLines,
    idle: IdlePoller,
    /// A realtime poll thread lowered to `SCHED_OTHER` for busy polling.
    lowered: bool,
    /// How late the tick timer woke the thread.
    lateness: Lateness,
    /// Which owed ticks the thread only waited for.
    waited: WaitedTicks,
    /// The thread's CPU per tick, with its CPU's softirq thread's.
    tick_cpu: TickCpu,
    softirq: SoftirqThread,
    /// The devices' own receive interrupts.
    device_irqs: DeviceIrqCounts,
    /// Whether each interface was last told it polls (preferred busy polling follows).
    busy_polling: Vec<bool>,
    /// Since when the thread has had work without sleeping.
    busy_since: Option<u64>,
    /// The interrupt lines are read from the devices, not waited on
    /// ([`PollThread::choose_line_reading`]).
    lines_read: bool,
    /// Counted at each pass of the loop, for the watchdog.
    progress: Progress,
    /// The kernel's tables, followed into the router (`tables = "kernel"`).
    tables: Option<KernelFollower>,
}

impl Executor {
    pub fn new(
        dp: RealDataplane,
        info: Vec<IfInfo>,
        daemon: DaemonInfo,
        signals: Signals,
        inbox: Option<Inbox>,
        tables: Option<KernelFollower>,
    ) -> io::Result<Executor> {
        let mut dp = dp;
        let epoll = Epoll::new()?;
        let tick = Timer::new()?;
        let look = Timer::new()?;
        let mut status = Timer::new()?;
        epoll.add(tick.fd(), TOKEN_TICK)?;
        epoll.add(look.fd(), TOKEN_LOOK)?;
        epoll.add(status.fd(), TOKEN_STATUS)?;
        epoll.add(signals.fd(), TOKEN_SIGNAL)?;
        if let Some(inbox) = &inbox {
            epoll.add(inbox.wake_fd(), TOKEN_CONTROL)?;
        }
        status.set_period(STATUS_PERIOD_NS)?;
        let idle = IdlePoller::start()?;
        epoll.add(idle.fd(), TOKEN_IDLE)?;
        let mut tables = tables;
        if let (Some(follower), Stage::Router(router)) = (&mut tables, dp.stage_mut()) {
            follower.load(router)?;
            let held = follower.state();
            log::info!(
                "kernel tables: {} IPv4 and {} IPv6 routes, {} neighbours",
                held.routes,
                held.routes6,
                held.neighbours
            );
            epoll.add(follower.as_fd(), TOKEN_TABLES)?;
        }
        let n = dp.interfaces().len();
        let mut device_irqs = DeviceIrqCounts::new(info.iter().map(|i| i.irqs.clone()).collect());
        device_irqs.sample(now_ns());
        let thread = PollThread {
            info,
            daemon,
            accounts: TimeAccounts::default(),
            epoll,
            ready: Vec::new(),
            tick,
            tick_ns: 0,
            look,
            status,
            signals,
            inbox,
            watched: vec![Watched::default(); n],
            wakeup_only: WakeupOnlyLines::default(),
            idle,
            lowered: false,
            lateness: Lateness::default(),
            waited: WaitedTicks::default(),
            tick_cpu: TickCpu::default(),
            softirq: SoftirqThread::default(),
            device_irqs,
            busy_polling: vec![false; n],
            busy_since: None,
            lines_read: false,
            progress: Progress::register(),
            tables,
        };
        Ok(Executor { dp, thread })
    }

    pub fn dataplane_mut(&mut self) -> &mut RealDataplane {
        &mut self.dp
    }

    pub fn accounts(&self) -> TimeAccounts {
        self.thread.accounts
    }

    /// Runs the dataplane's loop until SIGINT or SIGTERM, then drains the queues; returns
    /// the signal.
    pub fn run(&mut self) -> io::Result<i32> {
        let signal = self.dp.drive(&mut self.thread)?;
        self.thread.drain(&mut self.dp);
        Ok(signal)
    }
}

/// `Continue` on success, else `Break` with the error: for the loop's hooks.
fn go_on(result: io::Result<()>) -> ControlFlow<io::Result<i32>> {
    match result {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => ControlFlow::Break(Err(e)),
    }
}

/// The poll thread's clocks for a step: the monotonic clock, and the thread's own CPU
/// clock for the `auto` window.
impl Clocks for PollThread {
    fn now(&mut self) -> u64 {
        now_ns()
    }

    fn cpu_ns(&mut self) -> u64 {
        polld_dev::clock::thread_cpu_ns()
    }
}

impl polld_core::Executor<Box<dyn Device>, Stage> for PollThread {
    /// The stop signal, or what failed.
    type Stop = io::Result<i32>;

    /// A pass of the loop: progress, for the watchdog.
    fn between(&mut self, _dp: &mut RealDataplane) -> ControlFlow<Self::Stop> {
        self.progress.pass();
        ControlFlow::Continue(())
    }

    fn wait(&mut self, dp: &mut RealDataplane, worked: bool) -> ControlFlow<Self::Stop, bool> {
        if worked {
            // It may have woken the wakeup-only lines' fds itself.
            self.wakeup_only.ran();
        }
        self.log_events(dp);
        match self.wait_for_events(dp) {
            Ok(None) => ControlFlow::Continue(true),
            Ok(Some(signal)) => ControlFlow::Break(Ok(signal)),
            Err(e) => ControlFlow::Break(Err(e)),
        }
    }

    /// While an armed interrupt's fd is waited on (or read from its device).
    fn waits_on_lines(&self, dp: &RealDataplane) -> bool {
        (0..self.watched.len()).any(|i| Line::Interrupt.wanted(dp, i).is_some())
    }

    /// Charges the piece to its time account; a busy pass that found nothing lets the
    /// kernel's receive work run.
    fn ran(&mut self, _dp: &mut RealDataplane, due: Due, step: &Step) -> ControlFlow<Self::Stop> {
        let account = match due {
            Due::Busy(_) => &mut self.accounts.busy_poll_ns,
            Due::IdlePoll => &mut self.accounts.idle_poll_ns,
            _ => &mut self.accounts.work_ns,
        };
        *account += step.ns;
        if matches!(due, Due::Busy(_)) && step.work.rx == 0 {
            crate::sys::yield_cpu();
        }
        ControlFlow::Continue(())
    }

    /// A stopped tick, just woken from quiet, is armed afresh at the next wait.
    fn tick_early(&mut self, at: u64, now: u64) -> ControlFlow<Self::Stop> {
        if self.tick_ns == 0 {
            return ControlFlow::Continue(());
        }
        go_on(self.tick.set(at.saturating_sub(now), self.tick_ns))
    }

    fn look_at(&mut self, at: u64, now: u64) -> ControlFlow<Self::Stop> {
        go_on(self.look.once(at.saturating_sub(now)))
    }
}
