//! The real-time executor: one poll thread that drives the dataplane the way FreeBSD's
//! kernel drives `kern_poll` and the drivers.
//!
//! The thread sleeps in `epoll_wait` on:
//! - the **tick** timerfd at `kern.polling.hz`, armed only while some interface polls; a
//!   read that reports `n` expirations is `n` ticks (owed ticks: docs/algorithm.md §2);
//! - the **look** timerfd, one-shot: armed where a poll cycle at light traffic asks to look
//!   at the devices before the next tick ([`Step`]'s `look`, `kern.polling.looks`), so
//!   that a frame waits part of a tick for its poll rather than all of it, with the
//!   device's interrupt still off; the tick stays where it is;
//! - each interface's **interrupt**: its ring or socket fd, in the set only while the
//!   dataplane has that interrupt armed (interrupt mode; adaptive mode between tasks)
//!   and the thread has slept within the last millisecond: a thread that has had work
//!   for longer reads the armed lines from the devices at each read of its events
//!   (`Executor::choose_line_reading`), so that a flood's writer does not pay a wakeup
//!   callback per frame for an interrupt nobody sleeps on;
//! - an output's **transmit-ready line**: its `tx_ready_fd` capability, waited on for POLLOUT,
//!   edge-triggered, only while interrupt work waits for that output (it stopped because the
//!   output was full); the status timer also raises it, as em(4)'s watchdog retries a
//!   transmit that never completed. Where only a wakeup while the thread sleeps is a rise
//!   ([`polld_core::TxReadyLine`]: AF_XDP in copy mode, whose fd polls writable
//!   while its device is still full, and is woken by polld's own sends), the thread looks
//!   without sleeping before it sleeps and drops that line from what the look finds;
//! - a slow **status** timer: link checks of the interfaces the poller does not check
//!   (a gone device is swapped there for the one the reopen thread opened, [`polld_middleware::reopen`]);
//! - SIGINT/SIGTERM through a signalfd, and the control socket's wakeup eventfd;
//! - the idle poller's doorbell ([`crate::idle`]), asked for while `idle_poll` is on.
//!
//! After each wakeup it reports what fired to the dataplane (ticks, interrupt lines, an idle
//! CPU) and runs what the dataplane says is due, in the order the dataplane decides
//! (`polld_core::dataplane::decision`, the same for the simulated CPU): the executor keeps
//! only the clock, the waiting and the time accounts. While it waits on an interrupt line
//! it reads its events again before each piece of work but a running handler's next batch
//! (`Due::wants_fresh_lines`), so a device's interrupt runs before the input queue's next
//! frame, as in FreeBSD: under a flood in interrupt mode without fastforwarding the queue
//! starves (receive livelock). Busy and idle polling spin, so after
//! one pass of them it reads its events again; so it does after a millisecond of interrupt
//! work, since a handler under a flood that outruns the thread never finds its ring empty,
//! and the tick, `polld ctl` and a stop signal must still get in. When nothing is due it
//! sleeps again, which is what leaves the rest of the core to user work. On a stop signal
//! it ends the interrupt work under way and drains what was received
//! ([`Dataplane::finish`]).
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
//! around each call into the dataplane (once per call, never per packet), and the sums
//! are served as `polld.work_ns`, `polld.busy_poll_ns` and `polld.idle_poll_ns` with the
//! other `polld.*` entries, from which `polld stat` splits the core's time. For `auto`
//! interfaces it also lends the dataplane the thread's CPU clock, read once per window
//! ([`Dataplane::step`]): overload is judged on the CPU the thread really used, wakeups
//! included and preemptions not.

use std::io;
use std::os::fd::RawFd;

use polld_control::answer as control;
use polld_control::daemon::DaemonStatus;
use polld_control::proto::{IfStatus, Request, Response};
use polld_control::server::Inbox;
use polld_core::dataplane::EVENTS_EVERY_NS;
use polld_core::{Clocks, Dataplane, Device, Due, Event, LinkState, Mode, Step};
use polld_packet::Stage;

use crate::device_irqs::DeviceIrqCounts;
use crate::idle::IdlePoller;
use crate::lateness::{Lateness, SoftirqThread, TickCpu, WaitedTicks};
use crate::rx_work;
use crate::sys::{now_ns, Epoll, Signals, Timer};

/// The dataplane on real devices.
pub type RealDataplane = Dataplane<Box<dyn Device>, Stage>;

/// Status checks of interfaces outside the poll cycle.
const STATUS_PERIOD_NS: u64 = 200_000_000;
/// At a stop, how long the outputs' devices may take to make room for what polld handed
/// them (in a guest under software emulation a full virtio-net queue drains in a few ms).
const DRAIN_TX_MS: u64 = 200;

const TOKEN_TICK: u64 = 0;
const TOKEN_STATUS: u64 = 1;
const TOKEN_SIGNAL: u64 = 2;
const TOKEN_CONTROL: u64 = 3;
const TOKEN_IDLE: u64 = 4;
const TOKEN_LOOK: u64 = 5;
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

pub struct Executor {
    dp: RealDataplane,
    info: Vec<IfInfo>,
    daemon: DaemonInfo,
    accounts: TimeAccounts,
    epoll: Epoll,
    tick: Timer,
    tick_ns: u64,
    /// One-shot: a look at the devices between two ticks.
    look: Timer,
    status: Timer,
    signals: Signals,
    inbox: Option<Inbox>,
    /// The fds each interface has in the epoll set, by [`Line`].
    watched: Vec<[Option<RawFd>; 2]>,
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
    /// The interrupt lines are read from the devices, not waited on ([`Executor::run`]).
    lines_read: bool,
}

impl Executor {
    pub fn new(
        dp: RealDataplane,
        info: Vec<IfInfo>,
        daemon: DaemonInfo,
        signals: Signals,
        inbox: Option<Inbox>,
    ) -> io::Result<Executor> {
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
        let n = dp.interfaces().len();
        let mut device_irqs = DeviceIrqCounts::new(info.iter().map(|i| i.irqs.clone()).collect());
        device_irqs.sample(now_ns());
        Ok(Executor {
            dp,
            info,
            daemon,
            accounts: TimeAccounts::default(),
            epoll,
            tick,
            tick_ns: 0,
            look,
            status,
            signals,
            inbox,
            watched: vec![[None; 2]; n],
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
        })
    }

    pub fn dataplane_mut(&mut self) -> &mut RealDataplane {
        &mut self.dp
    }

    pub fn accounts(&self) -> TimeAccounts {
        self.accounts
    }

    /// Runs until SIGINT or SIGTERM, then drains the queues; returns the signal.
    pub fn run(&mut self) -> io::Result<i32> {
        let mut ready = Vec::new();
        loop {
            self.sync_tick()?;
            if self.dp.poller().idle_poll_wanted() {
                self.idle.ask();
            }
            self.sync_policy()?;
            self.sync_busy_poll(false);
            let busy = self.dp.next_due().is_some();
            self.choose_line_reading(busy);
            self.sync_lines();
            let waiting = !busy && self.waits_for_wakeup_only_line();
            let timeout = self.wakeup_only.timeout(busy, waiting);
            self.epoll.wait(timeout, &mut ready)?;
            let events_start = now_ns();
            if ready.is_empty() && self.wakeup_only.watchdog_expired() {
                self.raise_wakeup_only_lines();
            }
            for &token in &ready {
                match token {
                    TOKEN_TICK => {
                        // The wakeup's one clock read times the tick too.
                        let (n, late_ns) = self.tick.expirations_late(events_start);
                        if n > 0 {
                            self.lateness.record(late_ns);
                        }
                        let cpu = polld_dev::clock::thread_cpu_ns();
                        let waited = self.waited.waited(n, cpu, self.tick_ns);
                        let spin = self.accounts.busy_poll_ns + self.accounts.idle_poll_ns;
                        let poll_cpu = self
                            .daemon
                            .pinned_cpu
                            .unwrap_or_else(rustix::thread::sched_getcpu);
                        // A driver's softirq work (what its NAPI leaves over, its transmit
                        // completions) is the devices' work polld's share bounds; a TAP has none.
                        let drivers = self.info.iter().any(|i| i.rx_owner.busy_poll().is_some());
                        let softirq = self.softirq.used_ns(poll_cpu, drivers);
                        if let Some(ns) = self.tick_cpu.since_last_read(n, cpu + softirq, spin) {
                            self.dp.note_tick_cpu(ns, n);
                        }
                        let clamp = |v: u64| v.min(u32::MAX as u64) as u32;
                        self.dp.raise_late_ticks(clamp(n), clamp(waited));
                    }
                    TOKEN_LOOK => {
                        if self.look.expirations() > 0 {
                            self.dp.raise_look();
                        }
                    }
                    TOKEN_STATUS => {
                        self.status.expirations();
                        self.status_round();
                    }
                    TOKEN_SIGNAL => {
                        if let Some(sig) = self.signals.take() {
                            self.drain();
                            return Ok(sig);
                        }
                    }
                    TOKEN_CONTROL => self.answer_control(),
                    TOKEN_IDLE => {
                        if self.idle.take() {
                            self.dp.raise_idle();
                        }
                    }
                    t if t >= TOKEN_TX => {
                        let o = (t - TOKEN_TX) as usize;
                        let caps = self.dp.capabilities(o);
                        if !caps.tx_ready_on_wakeup_only() || self.wakeup_only.rose() {
                            self.dp.tx_ready_line(o, true);
                        } else {
                            self.wakeup_only.dropped();
                        }
                    }
                    t => self.dp.interrupt_line((t - TOKEN_IF) as usize, true),
                }
            }
            if self.lines_read {
                self.read_lines();
            }
            // Timer reads, status checks, control requests: none of it is interrupt work.
            self.dp.ran_outside(now_ns().saturating_sub(events_start));
            if self.run_due()? {
                self.wakeup_only.ran();
            }
            self.log_events();
        }
    }

    /// The outputs whose transmit-ready fd is in the epoll set and rises on a wakeup only
    /// ([`polld_core::TxReadyLine`]).
    fn wakeup_only_outputs(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.watched.len()).filter(|&o| {
            self.watched[o][Line::TxReady as usize].is_some()
                && self.dp.capabilities(o).tx_ready_on_wakeup_only()
        })
    }

    /// Whether the epoll set holds the transmit-ready fd of an output whose line rises on
    /// a wakeup only.
    fn waits_for_wakeup_only_line(&self) -> bool {
        self.wakeup_only_outputs().next().is_some()
    }

    /// Raises the lines of the outputs whose transmit-ready fd rises on a wakeup only.
    fn raise_wakeup_only_lines(&mut self) {
        let outputs: Vec<usize> = self.wakeup_only_outputs().collect();
        for o in outputs {
            self.dp.tx_ready_line(o, true);
        }
    }

    /// Runs what the dataplane says is due, charging each piece to its time account, until
    /// only spinning work is left, of which it runs one pass, until interrupt work has run
    /// for [`EVENTS_EVERY_NS`] or a tick period, or, while an interrupt line is waited on,
    /// until the next piece is not a running handler's batch: then the events are read
    /// again.
    /// Returns whether anything ran.
    fn run_due(&mut self) -> io::Result<bool> {
        let mut ran = false;
        let entered = now_ns();
        let slice = match self.tick_ns {
            0 => EVENTS_EVERY_NS,
            tick => tick.min(EVENTS_EVERY_NS),
        };
        let watches_interrupts =
            (0..self.watched.len()).any(|i| Line::Interrupt.wanted(&self.dp, i).is_some());
        while let Some(due) = self.dp.next_due() {
            if ran && watches_interrupts && due.wants_fresh_lines() {
                // A line raised while the work before ran is seen before this runs: a
                // frame that arrived meanwhile runs its handler before the input queue's
                // next frame.
                break;
            }
            ran = true;
            let account = match due {
                Due::Busy(_) => &mut self.accounts.busy_poll_ns,
                Due::IdlePoll => &mut self.accounts.idle_poll_ns,
                _ => &mut self.accounts.work_ns,
            };
            let Step {
                work,
                end,
                ns,
                repoll,
                look,
                ..
            } = self.dp.step(due, &mut ThreadClocks);
            *account += ns;
            if let Some(at) = repoll.filter(|_| self.tick_ns > 0) {
                // A full output cut the cycle short: the next tick comes early, and the
                // period runs on from there. (A stopped tick, just woken from quiet, is
                // armed afresh at the top of the loop.)
                self.tick.set(at.saturating_sub(end), self.tick_ns)?;
            }
            if let Some(at) = look {
                self.look.once(at.saturating_sub(end))?;
            }
            if due.spins() {
                if matches!(due, Due::Busy(_)) && work.rx == 0 {
                    // Nothing there: let the kernel's receive work run.
                    crate::sys::yield_cpu();
                }
                break;
            }
            // A handler or task ends only on an empty ring, which a flood that outruns the
            // thread never leaves: the tick (which preempts it, within a period), control
            // requests and signals are read meanwhile. Poll cycles are bounded by the burst,
            // so only interrupt work run between their chunks can end a pass mid-cycle.
            let interrupt_work = matches!(
                due,
                Due::Interrupt(_) | Due::Handler(_) | Due::Task(_) | Due::TxReady(_)
            );
            if interrupt_work && end.saturating_sub(entered) >= slice {
                break;
            }
        }
        Ok(ran)
    }

    /// A realtime poll thread spins at `SCHED_OTHER` while some interface is busy.
    fn sync_policy(&mut self) -> io::Result<()> {
        let spin = self.dp.busy_polls();
        if !self.daemon.realtime || spin == self.lowered {
            return Ok(());
        }
        if spin {
            crate::sys::make_ordinary()?;
        } else {
            crate::sys::make_realtime()?;
        }
        self.lowered = spin;
        Ok(())
    }

    /// Tells each AF_XDP interface's preferred busy polling whether the interface polls
    /// (polling, busy, auto while it polls): the device's interrupt is deferred then,
    /// and back to normal otherwise. Only changes are passed on, or all of them when
    /// `again` (a reopened socket starts not polling).
    fn sync_busy_poll(&mut self, again: bool) {
        for (i, info) in self.info.iter().enumerate() {
            let Some(busy) = info.rx_owner.busy_poll() else {
                continue;
            };
            let iface = &self.dp.interfaces()[i];
            let polls = iface.polls() || iface.mode() == Mode::Busy;
            if again || polls != self.busy_polling[i] {
                busy.set_polling(polls);
                self.busy_polling[i] = polls;
            }
        }
    }

    /// Arms the tick timer at the poller's period (`kern.polling.hz`, slowed by
    /// `kern.polling.stride`) while some interface is registered and polling is not quiet.
    fn sync_tick(&mut self) -> io::Result<()> {
        let poller = self.dp.poller();
        let want = if poller.handlers() > 0 && !poller.state().quiet {
            poller.tick_period_ns()
        } else {
            0
        };
        if want != self.tick_ns {
            self.tick.set_period(want)?;
            self.tick_ns = want;
        }
        Ok(())
    }

    /// Once the thread has had work for [`EVENTS_EVERY_NS`] without sleeping, it reads
    /// the armed interrupt lines from the devices ([`Device::rx_ready`]) at each read of
    /// its events, and takes their fds out of the epoll set until it next sleeps. An fd
    /// waited on costs whoever fills it a wakeup callback per frame (a TAP's writer, on
    /// its own CPU), where a device raises its interrupt for free: under a flood that is
    /// the generator's CPU paying for an interrupt nobody sleeps on.
    fn choose_line_reading(&mut self, busy: bool) {
        if !busy {
            self.busy_since = None;
            self.lines_read = false;
            return;
        }
        let now = now_ns();
        let since = *self.busy_since.get_or_insert(now);
        self.lines_read = now.saturating_sub(since) >= EVENTS_EVERY_NS;
    }

    /// Raises the armed interrupt lines whose device has frames (while `lines_read`).
    fn read_lines(&mut self) {
        for i in 0..self.watched.len() {
            if Line::Interrupt.wanted(&self.dp, i).is_some()
                && self.dp.interface_mut(i).dev_mut().rx_ready()
            {
                self.dp.interrupt_line(i, true);
            }
        }
    }

    /// Waits on exactly the interrupts the dataplane has armed (unless they are read from
    /// the devices), and on the transmit-ready lines interrupt work waits for.
    fn sync_lines(&mut self) {
        for i in 0..self.watched.len() {
            for line in [Line::Interrupt, Line::TxReady] {
                let want = line
                    .wanted(&self.dp, i)
                    .filter(|_| !(self.lines_read && matches!(line, Line::Interrupt)));
                let added = rewatch(
                    &self.epoll,
                    &mut self.watched[i][line as usize],
                    want,
                    |epoll, fd| line.add(epoll, fd, i),
                );
                if let Err(e) = added {
                    log::warn!(
                        "{}: cannot wait for its {} ({e}); {}",
                        self.dp.interfaces()[i].dev().name(),
                        line.name(),
                        line.fallback()
                    );
                }
            }
        }
    }

    /// Link checks for interfaces the poller does not check (all of them while polling
    /// is quiet).
    fn status_round(&mut self) {
        for i in 0..self.dp.interfaces().len() {
            if !self.dp.poller().is_registered(i) || self.dp.poller().state().quiet {
                self.dp.check_status(i);
                // A check may have swapped in a reopened device, whose fds may reuse the old
                // numbers, which a comparison cannot tell: wait on them afresh.
                for fd in self.watched[i].iter_mut().filter_map(Option::take) {
                    self.epoll.remove(fd);
                }
            }
            // The watchdog: a transmit-ready wakeup that never came does not stall the
            // interrupt work waiting for it longer than a status period.
            if self.dp.tx_ready_armed(i) {
                self.dp.tx_ready_line(i, true);
            }
        }
        self.dp.sync_hw_drops();
        // A copy-mode socket learns its NAPI id from its first frame.
        for busy in self.info.iter().filter_map(|i| i.rx_owner.busy_poll()) {
            busy.refresh();
        }
        self.sync_busy_poll(true);
        self.device_irqs.sample(now_ns());
    }

    fn log_events(&mut self) {
        for event in self.dp.take_events() {
            match event {
                Event::Link { ifname, state } => {
                    log::info!("{ifname}: link {}", state.name())
                }
                Event::Gone { ifname } => log::warn!(
                    "{ifname}: interface gone; handler deregistered, waiting for it to return"
                ),
            }
        }
    }

    fn answer_control(&mut self) {
        let Some(inbox) = self.inbox.take() else {
            return;
        };
        let status = self.daemon_status();
        inbox.answer_pending(&mut |req| answer(&mut self.dp, &self.info, &status, req));
        self.inbox = Some(inbox);
    }

    /// The `polld.*` entries as of now.
    fn daemon_status(&self) -> DaemonStatus {
        let interfaces = self.info.iter().map(|i| (i.name.as_str(), &i.rx_owner));
        DaemonStatus {
            config: self.daemon.config.clone(),
            pid: std::process::id(),
            cpu: self
                .daemon
                .pinned_cpu
                .or_else(|| Some(rustix::thread::sched_getcpu())),
            cpu_pinned: self.daemon.pinned_cpu.is_some(),
            clock_ns: now_ns(),
            work_ns: self.accounts.work_ns,
            busy_poll_ns: self.accounts.busy_poll_ns,
            idle_poll_ns: self.accounts.idle_poll_ns,
            thread_cpu_ns: polld_dev::clock::thread_cpu_ns(),
            tick_lateness: self.lateness.summary(),
            kernel_rx: rx_work::kernel_rx_status(interfaces, self.daemon.pinned_cpu),
            defaults: self.daemon.defaults.clone(),
            device_interrupts: (0..self.info.len())
                .filter_map(|i| {
                    let counted = self.device_irqs.get(i)?.clone();
                    Some((self.dp.interfaces()[i].dev().name().to_string(), counted))
                })
                .collect(),
        }
    }

    /// At a stop signal: ends running handlers and tasks, runs the owed poll cycles, the
    /// input queue and the outputs' flush ([`Dataplane::finish`]), then kicks the outputs
    /// until their devices took what they hold, for at most [`DRAIN_TX_MS`].
    fn drain(&mut self) {
        self.dp.finish(now_ns());
        let deadline = now_ns() + DRAIN_TX_MS * 1_000_000;
        while self.dp.flush_outputs() && now_ns() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.dp.sync_hw_drops();
    }
}

/// The poll thread's clocks for a step: the monotonic clock, and the thread's own CPU
/// clock for the `auto` window.
struct ThreadClocks;

impl Clocks for ThreadClocks {
    fn now(&mut self) -> u64 {
        now_ns()
    }

    fn cpu_ns(&mut self) -> u64 {
        polld_dev::clock::thread_cpu_ns()
    }
}

/// Which transmit-ready events are rises, for outputs whose line rises on a wakeup only
/// ([`polld_core::TxReadyLine`]). What such a fd reports before the thread sleeps
/// is its level when added, or a wakeup polld's own sends caused (`xsk_generic_xmit` wakes
/// the socket after sending), not the output taking frames: the work that just ran saw the
/// output itself. So after work ran, the next wait with nothing due looks without sleeping,
/// and the lines that look finds are dropped; only a wakeup while the thread sleeps (or
/// while work is due) raises the line. The output may also have taken frames just before
/// the look, and that wakeup is dropped with the others: so a sleep after a look that
/// dropped a line lasts at most [`WATCHDOG_MS`], and the lines rise when it ends with
/// nothing reported (not 200 ms later, at the status timer's watchdog).
#[derive(Clone, Copy, Debug, Default)]
struct WakeupOnlyLines {
    /// The last wait was that look, and nothing ran since.
    looked: bool,
    /// A look dropped a line, and no line rose since.
    suspect: bool,
    /// The last wait was a bounded sleep for that.
    bounded: bool,
}

/// The longest sleep after a look that dropped a wakeup-only line (ms).
const WATCHDOG_MS: i32 = 1;

impl WakeupOnlyLines {
    /// The next wait's timeout in ms (0: just look; [`WATCHDOG_MS`]: sleep after a look
    /// that dropped a line; -1: sleep), given whether work is due and whether a
    /// wakeup-only line is waited for.
    fn timeout(&mut self, busy: bool, waiting: bool) -> i32 {
        let look = !busy && waiting && !self.looked;
        // Work due says nothing of the line: only an output no longer waited for ends it.
        self.suspect &= waiting || busy;
        self.bounded = !busy && !look && self.suspect;
        self.looked = look;
        if busy || look {
            0
        } else if self.bounded {
            WATCHDOG_MS
        } else {
            -1
        }
    }

    /// The look dropped a line it reported.
    fn dropped(&mut self) {
        self.suspect = true;
    }

    /// Whether the last wait was a bounded sleep and nothing woke it: the lines rise.
    fn watchdog_expired(&mut self) -> bool {
        self.suspect &= !self.bounded;
        self.bounded
    }

    /// Whether a wakeup-only line the last wait reported is a rise.
    fn rose(&mut self) -> bool {
        self.suspect &= self.looked;
        !self.looked
    }

    /// Work ran: it may have woken the fds itself.
    fn ran(&mut self) {
        self.looked = false;
    }
}

/// What the executor waits on for an interface, each through an fd of its device.
#[derive(Clone, Copy)]
enum Line {
    /// Its interrupt: the fd readable, level-triggered.
    Interrupt = 0,
    /// Its transmit-ready line: the fd woken writable, edge-triggered.
    TxReady = 1,
}

impl Line {
    /// The fd to wait on for interface `i` now, if any: while the line is armed and the
    /// link is up.
    fn wanted(self, dp: &RealDataplane, i: usize) -> Option<RawFd> {
        let caps = dp.capabilities(i);
        let (armed, fd) = match self {
            Line::Interrupt => (
                dp.interrupt_armed(i) || dp.wakeup_armed(i),
                caps.interrupt_fd,
            ),
            Line::TxReady => (dp.tx_ready_armed(i), caps.tx_ready_fd()),
        };
        fd.filter(|_| armed && dp.link(i) == LinkState::Up)
    }

    fn add(self, epoll: &Epoll, fd: RawFd, i: usize) -> io::Result<()> {
        match self {
            Line::Interrupt => epoll.add(fd, TOKEN_IF + i as u64),
            Line::TxReady => epoll.add_writable_edge(fd, TOKEN_TX + i as u64),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Line::Interrupt => "interrupt",
            Line::TxReady => "transmit-ready line",
        }
    }

    /// What serves the interface when its line cannot be waited on.
    fn fallback(self) -> &'static str {
        match self {
            Line::Interrupt => "it is served by status checks only",
            Line::TxReady => "what waits for it resumes at status checks",
        }
    }
}

/// Makes `watched` (an fd in the epoll set, or none) what `want` says: the old fd leaves
/// the set, the new one joins it through `add` (and is not watched if that fails).
fn rewatch(
    epoll: &Epoll,
    watched: &mut Option<RawFd>,
    want: Option<RawFd>,
    add: impl FnOnce(&Epoll, RawFd) -> io::Result<()>,
) -> io::Result<()> {
    if want == *watched {
        return Ok(());
    }
    if let Some(fd) = watched.take() {
        epoll.remove(fd);
    }
    if let Some(fd) = want {
        add(epoll, fd)?;
        *watched = Some(fd);
    }
    Ok(())
}

/// Answers one control request against the dataplane.
fn answer(
    dp: &mut RealDataplane,
    info: &[IfInfo],
    status: &DaemonStatus,
    req: Request,
) -> Response {
    match req {
        Request::List { prefix } => control::list(dp, Some(status), &prefix),
        Request::Set { assignments } => control::set(dp, &assignments),
        Request::Snapshot => control::snapshot(dp, Some(status)),
        Request::Interfaces => Response::Interfaces {
            interfaces: interfaces(dp, info, Some(status)),
        },
    }
}

/// What `polld ifconfig` says of interface `i`'s UMEM now: the shared UMEM it was opened
/// with is gone once the interface was reopened (it gets its own).
fn umem_now(dp: &RealDataplane, i: usize, opened_with: String) -> String {
    let lends = dp.capabilities(i).pool.is_some();
    if lends || opened_with == "own" {
        opened_with
    } else {
        "own".to_string()
    }
}

/// Every interface as `polld ifconfig` shows it; its device's interrupts from `daemon`.
pub fn interfaces(
    dp: &mut RealDataplane,
    info: &[IfInfo],
    daemon: Option<&DaemonStatus>,
) -> Vec<IfStatus> {
    (0..dp.interfaces().len())
        .map(|i| {
            let info = info.get(i).cloned().unwrap_or_default();
            let mut status =
                control::interface_status(dp, i, &info.backend, info.mac, info.addresses);
            status.rx_work = Some(rx_work::rx_work(&status.name, &info.rx_owner));
            status.busy_poll = rx_work::busy_poll_line(&info.rx_owner);
            status.device_interrupts = daemon.and_then(|d| {
                let (_, irqs) = d
                    .device_interrupts
                    .iter()
                    .find(|(n, _)| *n == status.name)?;
                Some(irqs.clone())
            });
            status.umem = info.umem.map(|umem| umem_now(dp, i, umem));
            status
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::pipe::PipeFlags;
    use std::os::fd::{AsRawFd, OwnedFd};

    /// A pipe's write end stands in for an AF_XDP socket in copy mode: writable (so
    /// reported when added), and woken writable when the reader drains a full pipe, as the
    /// socket is when veth's peer frees what it sent.
    fn pipe() -> (OwnedFd, OwnedFd) {
        rustix::pipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)
            .unwrap_or_else(|e| panic!("pipe2: {}", io::Error::from(e)))
    }

    /// Fills the pipe, then empties it: one wakeup of the write end.
    fn wake_writer(read: &OwnedFd, write: &OwnedFd) {
        let buf = [0u8; 4096];
        while rustix::io::write(write, &buf).is_ok_and(|n| n > 0) {}
        let mut sink = [0u8; 4096];
        while rustix::io::read(read, &mut sink).is_ok_and(|n| n > 0) {}
    }

    const TOKEN: u64 = 7;

    #[test]
    fn a_wakeup_only_line_rises_on_a_wakeup_while_asleep_not_on_its_level_or_own_work() {
        let (read, write) = pipe();
        let mut epoll = Epoll::new().unwrap();
        let mut ready = Vec::new();
        let mut lines = WakeupOnlyLines::default();
        // A cycle ran and armed the line: the fd joins the set, writable.
        lines.ran();
        epoll.add_writable_edge(write.as_raw_fd(), TOKEN).unwrap();
        assert_eq!(lines.timeout(false, true), 0, "must look before sleeping");
        epoll.wait(0, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN], "the kernel reports the level when added");
        assert!(!lines.rose(), "the level when added is no rise");
        // Nothing ran: now it sleeps, and the level is not reported again.
        assert_eq!(lines.timeout(false, true), -1);
        epoll.wait(50, &mut ready).unwrap();
        assert!(ready.is_empty(), "reported again: {ready:?}");
        // The output takes frames while the thread sleeps: that wakeup is a rise.
        wake_writer(&read, &write);
        epoll.wait(1000, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN]);
        assert!(lines.rose());
        // A cycle ran and its own sends woke the fd: the look before sleeping drops it.
        lines.ran();
        wake_writer(&read, &write);
        assert_eq!(lines.timeout(false, true), 0);
        epoll.wait(0, &mut ready).unwrap();
        assert_eq!(ready, [TOKEN]);
        assert!(!lines.rose(), "a wakeup from polld's own work is no rise");
        lines.dropped();
        // The sleep after a look that dropped a line is bounded: the output may have taken
        // frames just before the look. Nothing woke it: the line rises.
        assert_eq!(lines.timeout(false, true), WATCHDOG_MS);
        epoll.wait(WATCHDOG_MS, &mut ready).unwrap();
        assert!(ready.is_empty(), "{ready:?}");
        assert!(lines.watchdog_expired());
        // After a look that dropped nothing, the sleep is not bounded.
        lines.ran();
        assert_eq!(lines.timeout(false, true), 0);
        assert_eq!(lines.timeout(false, true), -1);
        assert!(!lines.watchdog_expired());
        // While work is due every wait just looks, and what it reports counts.
        assert_eq!(lines.timeout(true, true), 0);
        assert!(lines.rose());
        // Without such a line waited for, nothing changes: no look before sleeping.
        lines.ran();
        assert_eq!(lines.timeout(false, false), -1);
        assert!(lines.rose());
    }
}
