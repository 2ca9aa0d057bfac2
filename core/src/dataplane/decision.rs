//! The scheduling decision: which piece of work runs next, written once for every executor.
//!
//! An executor (the real poll thread of `polld-runtime`, the virtual CPU of `polld-sim`)
//! keeps only the clock, the waiting (epoll, virtual time) and the cost accounting. It
//! reports what happened — clock ticks that expired ([`Dataplane::raise_ticks`]), a look's
//! timer ([`Dataplane::raise_look`]), interrupt
//! lines ([`Dataplane::interrupt_line`]), transmit-ready lines
//! ([`Dataplane::tx_ready_line`]), an idle CPU ([`Dataplane::raise_idle`]) — and the
//! loop ([`super::executor`]) asks [`Dataplane::next_due`] what is due and runs it with
//! [`Dataplane::step`] on the executor's clocks ([`super::step`]). The order of priorities, highest first, follows a uniprocessor FreeBSD box
//! (docs/algorithm.md: §2 the tick, §3 the poll cycle and the deferred stage between its
//! chunks, §5 idle polling, §7 the modes):
//!
//! 1. [`Due::Tick`]: the clock interrupt (hardclock and the polling hook), owed ticks at once;
//!    then [`Due::Look`]: the one-shot timer, for a look between two ticks (light
//!    traffic: [`crate::Poller::take_look`]) or the wakeup watchdog's look
//!    ([`super::watchdog`]); then [`Due::Watchdog`]: arming the watchdog;
//! 2. [`Due::QuietWakeup`]: a quiet poller's device interrupt, which resumes polling (or
//!    the interrupt that wakes an idle poller asleep on empty rings);
//! 3. [`Due::Handler`]: the next batch of a running interrupt handler (it runs to completion
//!    at interrupt priority, one batch at a time so a tick can still preempt it);
//! 4. [`Due::TxReady`]: an output's transmit-ready line (its transmit-complete interrupt),
//!    raised while interrupt work or the next poll cycle waits for that output
//!    ([`super::tx_ready`]); then
//!    [`Due::Interrupt`]: a raised interrupt line, the lowest-numbered interface first
//!    (the fixed priorities of an 8259 PIC);
//! 5. [`Due::Task`]: an adaptive-mode task (a fast taskqueue at network priority);
//! 6. the netisr: [`Due::PollChunk`] when a chunk is armed, then [`Due::InputQueue`] one frame
//!    at a time (so interrupts preempt it between frames), then [`Due::Pollmore`];
//! 7. [`Due::Busy`]: busy-polled interfaces, round robin: a thread that never sleeps;
//! 8. [`Due::IdlePoll`]: an idle-poll pass, only once the executor reported the CPU idle
//!    (the user task, which ranks between 7 and 8, had nothing to run).
//!
//! Levels 1 to 6 are the accounted device work; 7 and 8 spin, so an executor runs one pass of
//! them and then looks at its clock and its events again ([`Due::spins`]).
//!
//! A raised interrupt line is seen as soon as the work under way returns, as a device's
//! interrupt is taken as soon as the CPU leaves the handler it runs, and it preempts the
//! netisr between two frames: the loop runs the batches of a running handler without
//! reading the executor's events (for at most [`EVENTS_EVERY_NS`]), but before any other
//! piece ([`Due::wants_fresh_lines`]) it has them read afresh. So a frame that arrived meanwhile runs its handler before the input queue's next
//! frame, which is what starves the queue under a flood in interrupt mode without
//! fastforwarding (receive livelock, docs/algorithm.md §1): an executor that ran the queue
//! on lines read before it would give the queue a share of the CPU the seed's kernel never
//! gave it.

use crate::device::{Device, LinkState};
use crate::poll::{Netisr, PollCmd, PollHandlers};
use crate::stage::PacketStage;

use super::{Dataplane, Mode, Work, BATCH};

/// The longest an executor runs interrupt work (a handler that never finds its ring empty
/// under a flood) before it reads its events again: the tick, control requests and stop
/// signals get in, and the interrupt lines are read afresh. Capped by a tick period.
pub const EVENTS_EVERY_NS: u64 = 1_000_000;

/// A piece of work that is due, by kind; [`Dataplane::next_due`] returns the most urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Due {
    /// Clock ticks that expired since the last tick ran (owed ticks: more than one).
    Tick(u32),
    /// The one-shot timer fired: a look between two ticks ([`crate::Poller::look`]), the
    /// wakeup watchdog's look at the rings, or both.
    Look,
    /// The wakeup watchdog is wanted (some interface waits for a wakeup) and not armed:
    /// the step arms the one-shot timer for it ([`super::Step::look`]).
    Watchdog,
    /// Polling interface `i` is quiet, or the idle poller sleeps on empty rings, and its
    /// interrupt fired.
    QuietWakeup(usize),
    /// One more batch of interface `i`'s running interrupt handler.
    Handler(usize),
    /// Output `o`'s transmit-ready line is raised and interrupt work, or the next poll
    /// cycle, waits for it.
    TxReady(usize),
    /// Interface `i`'s interrupt line is raised and armed.
    Interrupt(usize),
    /// Interface `i`'s adaptive task is queued.
    Task(usize),
    /// A chunk of a poll cycle is armed.
    PollChunk,
    /// The IP input queue has frames: one is processed.
    InputQueue,
    /// A chunk has ended: schedule the next one or close the cycle.
    Pollmore,
    /// Interface `i` is busy polled.
    Busy(usize),
    /// An idle-poll pass over the polling interfaces.
    IdlePoll,
}

impl Due {
    /// Whether this is spinning work (busy or idle polling), which is always due again: an
    /// executor runs one pass, then waits for its events before asking again.
    pub fn spins(self) -> bool {
        matches!(self, Due::Busy(_) | Due::IdlePoll)
    }

    /// Whether an executor that ran work since it last read its events reads them again
    /// before running this: everything but the next batch of a running handler.
    pub fn wants_fresh_lines(self) -> bool {
        !matches!(self, Due::Handler(_))
    }
}

/// What the executor reported and the decision has not consumed yet.
#[derive(Default)]
pub(super) struct Pending {
    ticks: u32,
    /// Of those, the ones read late after the executor waited for the CPU.
    waited_ticks: u32,
    /// Per interface: its interrupt line is raised.
    lines: Vec<bool>,
    /// Per interface: its transmit-ready line is raised.
    tx_lines: Vec<bool>,
    /// A look's timer fired.
    look: bool,
    /// The CPU was found idle (an idle-poll pass may run).
    idle: bool,
    /// The busy interface to look at first, for round robin.
    busy_next: usize,
}

impl Pending {
    pub(super) fn new(interfaces: usize) -> Pending {
        Pending {
            lines: vec![false; interfaces],
            tx_lines: vec![false; interfaces],
            ..Pending::default()
        }
    }

    /// Forgets interface `i`'s raised line (its mode changed: what was raised was for the
    /// old mode; the wakeup watchdog serves it).
    pub(super) fn lower(&mut self, i: usize) {
        self.lines[i] = false;
    }
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// `expirations` clock ticks expired (a timerfd read, virtual time passing a tick).
    pub fn raise_ticks(&mut self, expirations: u32) {
        self.raise_late_ticks(expirations, 0);
    }

    /// `expirations` clock ticks expired, of which `waited` were read late because the
    /// executor's thread waited for the CPU, not because its work overran them
    /// ([`crate::Poller::excuse_waited`]).
    pub fn raise_late_ticks(&mut self, expirations: u32, waited: u32) {
        self.pending.ticks = self.pending.ticks.saturating_add(expirations);
        self.pending.waited_ticks = self.pending.waited_ticks.saturating_add(waited);
    }

    /// The executor's thread used `cpu_ns` of CPU over the last `ticks` ticks, busy and
    /// idle polling left out ([`Poller::note_tick_cpu`]); whether every interface polls
    /// says whether interrupt-mode work may be among it. The interrupt-mode pieces' time is
    /// left out: it is not what a tick costs, and counted there it took the polling
    /// cycles' budget down to its floor after each spell of `auto` on interrupts, so that
    /// the frames polled then looked light enough for interrupts again (an `auto`
    /// interface under a flood switched about 160 times a second).
    pub fn note_tick_cpu(&mut self, cpu_ns: u64, ticks: u64) {
        let all_polling = self.devs.ifs.iter().all(|f| f.mode == Mode::Polling);
        let interrupts = std::mem::take(&mut self.interrupt_ns);
        self.poller
            .note_tick_cpu(cpu_ns.saturating_sub(interrupts), ticks, all_polling);
    }

    /// The timer the executor armed for a look ([`crate::dataplane::Step::look`]) fired.
    pub fn raise_look(&mut self) {
        self.pending.look = true;
    }

    /// Interface `i`'s interrupt line: raised (`true`: its fd became readable, a simulated
    /// device asserted it) or not. A line raised while the interrupt is masked is ignored,
    /// as FreeBSD ignores a masked device's spurious interrupt.
    pub fn interrupt_line(&mut self, i: usize, raised: bool) {
        self.pending.lines[i] = raised;
    }

    /// Output `o`'s transmit-ready line: raised (`true`: its
    /// [`crate::Capabilities::tx_ready_fd`] became writable, a simulated NIC's transmit
    /// ring drained to half) or not. Acted on only
    /// while interrupt work or the next poll cycle waits for `o`
    /// ([`Dataplane::tx_ready_armed`]).
    pub fn tx_ready_line(&mut self, o: usize, raised: bool) {
        // A line nobody waits for is not kept: it would wake the next wait for nothing.
        self.pending.tx_lines[o] = raised && self.tx_ready_armed(o);
    }

    /// The CPU is idle (the idle thread ran, or the user task had nothing to do): the next
    /// idle-poll pass may run.
    pub fn raise_idle(&mut self) {
        self.pending.idle = true;
    }

    /// The most urgent work due now, by the priorities in this module's header; `None` when
    /// nothing is (the executor sleeps until its next event).
    pub fn next_due(&self) -> Option<Due> {
        let p = &self.pending;
        let n = self.devs.ifs.len();
        let raised = |i: &usize| p.lines[*i];
        if p.ticks > 0 {
            return Some(Due::Tick(p.ticks));
        }
        if p.look {
            return Some(Due::Look);
        }
        if self.watchdog_unarmed() {
            return Some(Due::Watchdog);
        }
        if let Some(i) = (0..n).filter(raised).find(|&i| self.wakeup_armed(i)) {
            return Some(Due::QuietWakeup(i));
        }
        if let Some(i) = self.devs.ifs.iter().position(|f| f.in_handler) {
            return Some(Due::Handler(i));
        }
        let tx_raised = |o: &usize| p.tx_lines[*o];
        if let Some(o) = (0..n).filter(tx_raised).find(|&o| self.tx_ready_armed(o)) {
            return Some(Due::TxReady(o));
        }
        if let Some(i) = (0..n).filter(raised).find(|&i| self.interrupt_armed(i)) {
            return Some(Due::Interrupt(i));
        }
        if let Some(i) = self.devs.ifs.iter().position(|f| f.task_queued) {
            return Some(Due::Task(i));
        }
        let netisr = self.poller.netisr_due();
        if netisr == Some(Netisr::Chunk) {
            return Some(Due::PollChunk);
        }
        if self.devs.queue.len() > 0 {
            return Some(Due::InputQueue);
        }
        if netisr == Some(Netisr::Pollmore) {
            return Some(Due::Pollmore);
        }
        let busy = (0..n)
            .map(|k| (p.busy_next + k) % n)
            .find(|&i| self.busy(i));
        if let Some(i) = busy {
            return Some(Due::Busy(i));
        }
        if p.idle && self.poller.idle_poll_wanted() {
            return Some(Due::IdlePoll);
        }
        None
    }

    /// Whether interface `i` is busy polled now: busy mode, link up.
    fn busy(&self, i: usize) -> bool {
        self.devs.ifs[i].mode == Mode::Busy && self.devs.links[i] == LinkState::Up
    }

    /// Whether some interface is busy polled now ([`Due::Busy`] is due whenever nothing
    /// more urgent is): the executor spins, and a realtime one spins at ordinary priority
    /// so that the kernel's receive work on its CPU still runs.
    pub fn busy_polls(&self) -> bool {
        (0..self.devs.ifs.len()).any(|i| self.busy(i))
    }

    /// Runs `due` at time `now` (ns of the executor's clock, which the packet stage gets
    /// too) and returns the work done. Nothing is timed: [`Dataplane::step`], the only
    /// caller, does what goes around the piece.
    pub(super) fn run(&mut self, due: Due, now: u64) -> Work {
        self.devs.stage.set_now(now);
        match due {
            Due::Tick(n) => {
                self.pending.ticks = self.pending.ticks.saturating_sub(n);
                // The tick came before the line a cut-short cycle waited for: a rise
                // already read is stale for the next wait.
                if let Some(o) = self.repoll_line.take() {
                    self.pending.tx_lines[o] &= self.tx_ready_armed(o);
                }
                self.poller.hardclock(now, n);
                self.poller
                    .excuse_waited(std::mem::take(&mut self.pending.waited_ticks));
            }
            Due::Look => {
                self.pending.look = false;
                self.timer_fired(now);
            }
            Due::Watchdog => self.arm_watchdog(now),
            Due::QuietWakeup(i) => {
                self.pending.lines[i] = false;
                // Quiet polling resumes at once (its cycle then settles the idle poller).
                // Otherwise a resting idle poller only wants its next pass again: that
                // runs when the CPU idles (the idle thread asks), not at the poll
                // thread's priority now.
                if self.wakeup_armed(i) {
                    if self.poller.state().quiet {
                        self.poller.wake(now);
                    } else {
                        self.poller.idle_wake();
                    }
                }
            }
            Due::Handler(i) => self.continue_handler(i),
            Due::TxReady(o) => {
                self.pending.tx_lines[o] = false;
                self.tx_ready(o, now);
            }
            Due::Interrupt(i) => {
                self.pending.lines[i] = false;
                self.interrupt(i);
            }
            Due::Task(i) => self.run_task(i),
            Due::PollChunk => {
                self.poller.netisr_poll(now, &mut self.devs);
                self.deregister_gone();
                self.auto_check_idle();
            }
            Due::InputQueue => {
                self.devs.drain_queue(1);
            }
            Due::Pollmore => {
                self.poller.netisr_pollmore(now);
            }
            Due::Busy(i) => {
                self.pending.busy_next = i + 1;
                self.devs.poll(i, PollCmd::PollOnly, BATCH as u32);
            }
            Due::IdlePoll => {
                self.pending.idle = false;
                self.poller.idle_poll(&mut self.devs);
                self.deregister_gone();
                self.auto_check_idle();
            }
        }
        // The outputs are kicked once the executor is about to wait (nothing accounted is
        // due): once per poll cycle, once per completed handler, once per spinning pass.
        if self.devs.waits_for_flush() && self.next_due().is_none_or(|d| d.spins()) {
            self.devs.flush_waiting();
        }
        self.devs.take_work()
    }

    /// Ends the work that takes in frames without bound, as at shutdown ([`Dataplane::finish`]):
    /// interrupt handlers and adaptive tasks stop where they are (under a flood that
    /// outruns the CPU they would never end; what is left in a ring was never received;
    /// their interrupts are re-armed), raised lines and ticks not yet run are forgotten.
    pub(super) fn forget_unbounded_work(&mut self) {
        self.pending.ticks = 0;
        self.pending.waited_ticks = 0;
        self.pending.look = false;
        self.pending.lines.fill(false);
        self.pending.tx_lines.fill(false);
        for iface in &mut self.devs.ifs {
            iface.in_handler = false;
            iface.task_queued = false;
            iface.task_left = None;
            iface.watchdog_run = false;
            let armed = iface.interrupt_armed();
            iface.dev.set_interrupt(armed);
        }
    }

    /// At shutdown, after [`Dataplane::finish`]: kicks every output again, and says whether
    /// one still holds frames its device had no room for yet (an AF_XDP tx ring behind a
    /// full NIC queue, which only a later kick empties). The caller waits a little and asks
    /// again: a socket's rings are purged uncounted when it closes.
    pub fn flush_outputs(&mut self) -> bool {
        let mut holding = false;
        for iface in &mut self.devs.ifs {
            iface.dev.flush();
            holding |= iface.dev.tx_room() == 0;
        }
        holding
    }
}
