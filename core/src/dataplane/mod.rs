//! The dataplane: interfaces in their modes, the IP input queue, and the scheduler.
//!
//! Each interface runs in one [`Mode`], switchable at run time:
//!
//! - `interrupt`: the device's interrupt (a readiness notification) runs a handler to
//!   completion. With `net.inet.ip.fastforwarding=1` frames are processed inside the
//!   handler; with `0` they go to the bounded IP input queue
//!   (`net.inet.ip.intr_queue_maxlen`), drained at lower priority: the configuration that
//!   livelocks under a flood. A handler that forwards stops when an output is full and
//!   waits for that output's transmit-ready line, its frames left in the ring ([`tx_ready`]);
//!   so does the adaptive task.
//! - `polling`: registered with the [`Poller`]; interrupts masked.
//! - `adaptive`: the em(4) 2006/2010 design: the interrupt masks the device and queues a
//!   task that handles at most `dev.<if>.rx_process_limit` frames and requeues itself while
//!   work remains; the interrupt is re-armed only once the ring is drained.
//! - `busy`: the executor spins on the device and never sleeps.
//! - `auto`: interrupts under light load, polling when interrupt work (the poll thread's
//!   CPU, wakeups included) takes more than `100 - user_frac` of a window of
//!   `kern.polling.auto_window_ticks` ticks, back to
//!   interrupts after `kern.polling.auto_empty_polls` empty polls ([`auto`]).
//!
//! In the modes that wait for a wakeup, the wakeup watchdog looks at the rings every
//! `kern.polling.wakeup_watchdog_ms`, so that a wakeup the device failed to raise strands
//! no frame for longer ([`watchdog`]).
//!
//! The dataplane does no I/O and reads no clock: it decides which piece of work is due
//! ([`Due`], in the order written once in [`decision`]) and an executor (the virtual CPU of
//! `polld-sim`, or the real poller thread) runs it with its clocks ([`step`]).
//!
//! # What an executor does
//!
//! An executor keeps only the waiting, the clock and the cost of the work. It implements
//! [`Executor`] and hands itself to [`Dataplane::drive`], the one loop every executor runs
//! ([`executor`]); no piece of work runs but through [`Dataplane::step`]:
//!
//! 1. its wait ([`Executor::wait`]) reports what fired: [`Dataplane::raise_ticks`] (or
//!    [`Dataplane::raise_late_ticks`]), [`Dataplane::interrupt_line`],
//!    [`Dataplane::tx_ready_line`], [`Dataplane::raise_idle`], [`Dataplane::raise_look`],
//!    and [`Dataplane::ran_outside`] for the time it spent on its own events; it waits on
//!    the lines that are armed ([`Dataplane::interrupt_armed`],
//!    [`Dataplane::wakeup_armed`], [`Dataplane::tx_ready_armed`]), on the tick while the
//!    [`Poller`] has handlers and is not quiet, and spins rather than sleeps while
//!    [`Dataplane::busy_polls`];
//! 2. the loop calls [`Dataplane::next_due`], and [`Dataplane::step`] with what it
//!    returned on the executor's [`Clocks`], until nothing is due; it has the events read
//!    again before any piece but a running handler's next batch
//!    ([`Due::wants_fresh_lines`]) while a line can rise under the work, after at most
//!    [`EVENTS_EVERY_NS`] and after one pass of spinning work ([`Due::spins`]);
//! 3. a [`Step`] says how long the piece took ([`Executor::ran`] charges it), when the
//!    tick must come early ([`Step::repoll`], [`Executor::tick_early`]) and when to look at
//!    the devices before the next tick ([`Step::look`], [`Executor::look_at`]: a one-shot
//!    timer);
//! 4. at a stop, the executor calls [`Dataplane::finish`].
//!
//! What is specific to a device stays behind the device contract ([`crate::device`]): the
//! fds an executor waits on are the device's [`crate::Capabilities`], and how a
//! transmit-ready line rises is its [`crate::TxReadyLine`].
//!
//! Every frame is counted: for every interface, `rx = forwarded + local + consumed +
//! to_kernel + drops + queued` ([`IfCounters::unaccounted`] is zero), where `queued` is the frames of
//! that interface waiting in the input queue. `forwarded` counts frames the output
//! device accepted; one it drops afterwards (too long, refused by the kernel) is counted
//! on the output interface in `tx_drops`, by reason, so a forwarded frame is delivered or
//! counted there.
//!
//! One file per reason to change: [`decision`] (what runs next, in which order), [`modes`]
//! (the per-interface state machine), [`auto`] (when an `auto` interface switches),
//! [`input_queue`], [`watchdog`] (the wakeup watchdog and the one-shot timer it shares
//! with the looks), [`transmit`] (staging, hardware-drop folding), [`tx_ready`] (interrupt
//! work waiting for a full output's transmit-ready line), [`step`] (what goes around a
//! piece of work: the `auto` window, its timing, the early tick), [`executor`] (the loop
//! around the steps), [`counters`] and
//! [`sysctl`] (the `kern.polling.enable`, `net.inet.ip.*` and `dev.<if>.*` tree).

mod auto;
mod counters;
mod decision;
pub mod executor;
mod input_queue;
mod modes;
mod step;
mod sysctl;
mod transmit;
mod tx_ready;
mod watchdog;

pub use counters::IfCounters;
pub use decision::{Due, EVENTS_EVERY_NS};
pub use executor::Executor;
pub use modes::{Mode, ModeError};
pub use step::{Clocks, Frozen, Step};
pub use sysctl::{
    interface_entry_kind, ip_entry, IfSettings, DEV_NODE, DROPS, ENABLE, INTERFACE_FAMILIES,
    IP_NODE, TX_DROPS,
};

use crate::device::{Capabilities, Device, HwStats, LinkState, Loan, PoolId};
use crate::poll::{HandlerId, PollCmd, PollHandlers, Poller};
use crate::stage::{DropReason, PacketStage};

use auto::AutoWindow;
use decision::Pending;
use input_queue::InputQueue;
use transmit::{apply, Received, TxStaging};

/// What one call did, for the executor's cost accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames taken from device rings.
    pub rx: u64,
    /// Frames put into the IP input queue.
    pub enqueued: u64,
}

/// One interface: its device, mode and counters.
pub struct Interface<D> {
    dev: D,
    mode: Mode,
    counters: IfCounters,
    /// Adaptive mode: the task is queued (the interrupt is masked meanwhile).
    task_queued: bool,
    /// Adaptive mode: what is left of the current run's `rx_process_limit` when a run
    /// larger than [`TASK_SLICE`] was cut into slices (`None`: the next run is new).
    task_left: Option<usize>,
    /// Interrupt mode: the handler is running (it returns once the ring is empty).
    in_handler: bool,
    /// `dev.<if>.rx_process_limit`: frames per adaptive task run, -1 = unlimited.
    rx_process_limit: i64,
    /// Device drops already folded into `counters`.
    hw_seen: HwStats,
    /// Auto mode: the interface polls now (else it is on interrupts).
    auto_polling: bool,
    /// Polls in a row that found the ring empty.
    empty_streak: u32,
    /// Auto mode on interrupts: it took interrupts in the current window.
    auto_interrupted: bool,
    /// The work under way (a handler, an adaptive task's runs) was started by the wakeup
    /// watchdog: its frames count as found by it.
    watchdog_run: bool,
    /// Auto mode: `counters.rx_packets` when the current window began.
    auto_rx_mark: u64,
    /// Interrupt work (a handler, an adaptive task) stopped because this output was full,
    /// and waits for its transmit-ready line; the interrupt is masked meanwhile.
    tx_wait: Option<usize>,
}

impl<D: Device> Interface<D> {
    pub fn dev(&self) -> &D {
        &self.dev
    }
    /// The device, for what the dataplane does not do itself: a simulator's device model,
    /// a test's injected frames.
    pub fn dev_mut(&mut self) -> &mut D {
        &mut self.dev
    }
    pub fn counters(&self) -> IfCounters {
        self.counters
    }
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn task_queued(&self) -> bool {
        self.task_queued
    }
    /// Whether the interface is registered with the poller: polling mode, or auto mode
    /// while it polls.
    pub fn polls(&self) -> bool {
        self.mode == Mode::Polling || (self.mode == Mode::Auto && self.auto_polling)
    }
    /// The output whose transmit-ready line this interface's interrupt work waits for.
    pub fn tx_wait(&self) -> Option<usize> {
        self.tx_wait
    }
}

/// Something that happened to an interface, for the executor's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The interface went down or came back up.
    Link { ifname: String, state: LinkState },
    /// The interface disappeared; its polling handler was deregistered.
    Gone { ifname: String },
}

/// What the dataplane keeps of a device's [`Capabilities`]: everything but the fds, which
/// only an executor waits on.
#[derive(Clone, Copy, Debug)]
struct Facts {
    /// It raises a transmit-ready line ([`Capabilities::signals_tx_ready`]).
    tx_ready: bool,
    tx_batch: usize,
    pool: Option<PoolId>,
}

impl Facts {
    fn of(dev: &impl Device) -> Facts {
        let caps = dev.capabilities();
        Facts {
            tx_ready: caps.signals_tx_ready(),
            tx_batch: caps.tx_batch,
            pool: caps.pool,
        }
    }
}

/// Everything but the scheduler: the scheduler calls into this as its handlers.
struct Devices<D, S> {
    ifs: Vec<Interface<D>>,
    links: Vec<LinkState>,
    stage: S,
    fastforwarding: bool,
    queue: InputQueue,
    tx: TxStaging,
    /// Per interface: what the dataplane uses of its device's [`Capabilities`], read at
    /// start and after each status check (where a wrapper may swap in a new device).
    caps: Vec<Facts>,
    /// Per interface: `Some(frames it accepted)` since it was given frames to send,
    /// until its next flush ([`Devices::flush_waiting`]).
    unflushed: Vec<Option<usize>>,
    /// Per interface: frames it received found their output full since the scheduler
    /// last asked (transmit backpressure).
    output_full: Vec<bool>,
    /// The output whose fullness set `output_full` last: the one a cut-short cycle waits
    /// for (taken by [`Devices::full_output_with_line`]).
    full_out: Option<usize>,
    work: Work,
    events: Vec<Event>,
    gone: Vec<usize>,
}

impl<D: Device, S: PacketStage> Devices<D, S> {
    /// Receives up to `budget` frames from interface `i`; processes them now (to
    /// completion) or queues them, per `fastforwarding`.
    fn receive(&mut self, i: usize, budget: usize) -> u64 {
        let Devices {
            ifs,
            links,
            stage,
            fastforwarding,
            queue,
            tx,
            caps,
            ..
        } = self;
        // Frames are lent only when processed to completion in this batch; the input queue
        // keeps copies.
        let lends = *fastforwarding && caps[i].pool.is_some();
        let Interface { dev, counters, .. } = &mut ifs[i];
        // Returns whether the frame's loan was kept.
        let mut process = |frame: &mut [u8], loan: Option<Loan>| {
            counters.count_rx(frame.len());
            if *fastforwarding {
                let verdict = stage.process(i, frame, tx);
                let rx = Received {
                    input: i,
                    frame,
                    loan,
                };
                return apply(verdict, rx, counters, links, caps, tx);
            }
            if queue.enqueue(i, frame) {
                counters.queued += 1;
            } else {
                counters.drops.add(DropReason::IntrQueueFull, 1);
            }
            false
        };
        let lender = if lends { dev.lending() } else { None };
        let n = if let Some(lender) = lender {
            lender.receive_lending(budget, &mut |frame, loan| process(frame, Some(loan)))
        } else {
            dev.receive(budget, &mut |frame| {
                process(frame, None);
            })
        } as u64;
        self.work.rx += n;
        let iface = &mut self.ifs[i];
        if iface.watchdog_run {
            iface.counters.watchdog_frames += n;
        }
        if !self.fastforwarding {
            self.work.enqueued += n;
        }
        self.transmit();
        n
    }

    /// The status check: the link, and the drops the device counted itself (reading
    /// those can cost a system call, so it is done here, not per receive).
    fn check_status(&mut self, i: usize) {
        self.fold_hw_drops(i);
        let state = self.ifs[i].dev.check_status();
        // A device is swapped for a new one only at a status check (a reopen).
        self.caps[i] = Facts::of(&self.ifs[i].dev);
        if state == self.links[i] {
            return;
        }
        self.links[i] = state;
        if state != LinkState::Up {
            // Its transmit-ready line will not come: what waited for it goes on (and counts
            // its frames to this output as `link_down`).
            self.release_tx_waiters(i);
        }
        let ifname = self.ifs[i].dev.name().to_string();
        if state == LinkState::Gone {
            self.gone.push(i);
            self.events.push(Event::Gone { ifname });
        } else {
            self.events.push(Event::Link { ifname, state });
        }
    }

    fn take_work(&mut self) -> Work {
        std::mem::take(&mut self.work)
    }
}

impl<D: Device, S: PacketStage> PollHandlers for Devices<D, S> {
    fn poll(&mut self, id: HandlerId, cmd: PollCmd, count: u32) -> u32 {
        if cmd == PollCmd::CheckStatus {
            self.check_status(id);
        }
        self.ifs[id].counters.polls += 1;
        if self.links[id] != LinkState::Up {
            return 0;
        }
        // Forwarding now, a poll takes no more frames than the fullest other interface can
        // send: what would not fit is better left in the input ring (where the kernel drops
        // it for free) than received and dropped at transmit. With two interfaces that is
        // exact; with more, a full output slows every input, as a shared buffer would.
        // Interrupt work does the same, and waits for the output's transmit-ready line
        // (tx_ready.rs).
        let mut budget = count as usize;
        if self.fastforwarding {
            if let Some((out, room)) = self.fullest_output_besides(id, |_| true) {
                if room < budget {
                    // Backpressure, though nothing was dropped: the output set the limit.
                    self.output_full[id] = true;
                    self.full_out = Some(out);
                    budget = room;
                }
            }
        }
        let n = if budget == 0 {
            0
        } else {
            self.receive(id, budget)
        };
        let iface = &mut self.ifs[id];
        if n == 0 {
            iface.counters.empty_polls += 1;
            iface.empty_streak = iface.empty_streak.saturating_add(1);
        } else {
            iface.empty_streak = 0;
        }
        n as u32
    }

    fn take_output_full(&mut self, id: HandlerId) -> bool {
        std::mem::take(&mut self.output_full[id])
    }
}

pub use input_queue::INTR_QUEUE_MAXLEN;
pub use modes::{RX_PROCESS_LIMIT, TASK_SLICE};
/// Frames a busy poll or an interrupt handler takes per receive call.
const BATCH: usize = 64;

/// The dataplane: interfaces, the packet stage, the input queue and the scheduler.
pub struct Dataplane<D, S> {
    poller: Poller,
    devs: Devices<D, S>,
    pending: Pending,
    auto: AutoWindow,
    /// The output whose transmit-ready line starts the next poll cycle, after a cycle that
    /// output cut short ([`Dataplane::take_repoll`]).
    repoll_line: Option<usize>,
    /// What the interrupt-mode pieces (a raised line, a handler's batch, an adaptive task)
    /// took of the executor's clock since it last reported the thread's CPU at a tick
    /// ([`Dataplane::note_tick_cpu`]).
    interrupt_ns: u64,
    /// The deadlines behind the executor's one-shot timer: the poller's look and the
    /// wakeup watchdog ([`watchdog`]).
    timer: watchdog::Timer,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// A dataplane over `devices`, all in interrupt mode with interrupts armed.
    pub fn new(poller: Poller, devices: Vec<D>, stage: S) -> Dataplane<D, S> {
        let links = vec![LinkState::Up; devices.len()];
        let caps = devices.iter().map(Facts::of).collect();
        let unflushed = vec![None; devices.len()];
        let output_full = vec![false; devices.len()];
        let ifs = devices
            .into_iter()
            .map(|mut dev| {
                dev.set_interrupt(true);
                Interface {
                    dev,
                    mode: Mode::Interrupt,
                    counters: IfCounters::default(),
                    task_queued: false,
                    task_left: None,
                    in_handler: false,
                    rx_process_limit: RX_PROCESS_LIMIT,
                    hw_seen: HwStats::default(),
                    auto_polling: false,
                    empty_streak: 0,
                    auto_interrupted: false,
                    auto_rx_mark: 0,
                    watchdog_run: false,
                    tx_wait: None,
                }
            })
            .collect();
        Dataplane {
            poller,
            pending: Pending::new(links.len()),
            auto: AutoWindow::default(),
            repoll_line: None,
            interrupt_ns: 0,
            timer: watchdog::Timer::default(),
            devs: Devices {
                ifs,
                links,
                stage,
                fastforwarding: true,
                queue: InputQueue::new(),
                tx: TxStaging::default(),
                caps,
                unflushed,
                output_full,
                full_out: None,
                work: Work::default(),
                events: Vec::new(),
                gone: Vec::new(),
            },
        }
    }

    pub fn poller(&self) -> &Poller {
        &self.poller
    }
    pub fn interfaces(&self) -> &[Interface<D>] {
        &self.devs.ifs
    }
    pub fn interface_mut(&mut self, i: usize) -> &mut Interface<D> {
        &mut self.devs.ifs[i]
    }
    pub fn stage(&self) -> &S {
        &self.devs.stage
    }
    /// The packet stage, for a control plane that changes its tables between two pieces
    /// of work.
    pub fn stage_mut(&mut self) -> &mut S {
        &mut self.devs.stage
    }
    pub fn link(&self, i: usize) -> LinkState {
        self.devs.links[i]
    }
    /// Interface `i`'s device's [`Capabilities`], its fds borrowed from the device.
    pub fn capabilities(&self, i: usize) -> Capabilities<'_> {
        self.devs.ifs[i].dev.capabilities()
    }
    /// Frames waiting in the IP input queue.
    pub fn queue_len(&self) -> usize {
        self.devs.queue.len()
    }
    /// Link changes and disappearances since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.devs.events)
    }

    fn index_of(&self, ifname: &str) -> Option<usize> {
        self.devs.ifs.iter().position(|i| i.dev.name() == ifname)
    }
    /// Brings every interface's device-counted drops (receive drops by reason, transmit drops) into
    /// its counters; status checks fold their own interface's as they go, this catches
    /// the outputs and brings everything up to date now.
    pub fn sync_hw_drops(&mut self) {
        for i in 0..self.devs.ifs.len() {
            self.devs.fold_hw_drops(i);
        }
    }

    /// When to poll again before the next tick, once, after a cycle cut short by a full
    /// output ([`Poller::take_repoll`]). `None` too when that output raises a transmit-ready
    /// line: its rising starts the next cycle instead of a timer if the cycle fits in the
    /// tick's share ([`Poller::repoll_on_line`]), or the tick does ([`tx_ready`]).
    fn take_repoll(&mut self) -> Option<u64> {
        let at = self.poller.take_repoll()?;
        self.repoll_line = self.devs.full_output_with_line();
        match self.repoll_line {
            Some(_) => None,
            None => Some(at),
        }
    }

    /// Checks the status of interface `i` outside the poll cycle (interfaces that are
    /// not polling get their status checked by the executor every `reg_frac` ticks).
    pub fn check_status(&mut self, i: usize) {
        let was_gone = self.devs.links[i] == LinkState::Gone;
        self.devs.check_status(i);
        self.deregister_gone();
        if was_gone && self.devs.links[i] != LinkState::Gone {
            self.revive(i);
        }
    }

    fn deregister_gone(&mut self) {
        for i in std::mem::take(&mut self.devs.gone) {
            let _ = self.poller.deregister(i);
        }
    }
}
