//! The executor's loop, written once: what every executor does between its waits.
//!
//! An executor (the real poll thread of `polld-runtime`, the virtual CPU of `polld-sim`)
//! implements [`Executor`]: its clocks ([`Clocks`]), its wait, its timers and its
//! accounts. [`Dataplane::drive`] is the loop that both run: it reads the executor's
//! events when the protocol says so, runs what [`Dataplane::next_due`] returns with
//! [`Dataplane::step`] (the only way a piece runs; a test may step pieces itself, on a
//! [`super::Frozen`] clock), and hands the executor what a step asks of its timers (the
//! early tick, the look). The rules:
//!
//! 1. Before each piece of work, [`Executor::between`] reports what fired without a wait
//!    (a simulated clock's tick; nothing, for a thread that learns of its timers only by
//!    waiting).
//! 2. [`Executor::wait`] reads the events afresh (waiting for them first if nothing is
//!    due) when nothing is due, after one pass of spinning work ([`Due::spins`]), after
//!    [`EVENTS_EVERY_NS`] (at most a tick period) since the last read, and, while the
//!    executor waits on a line that can rise under the work ([`Executor::waits_on_lines`]),
//!    before any piece but a running handler's next batch ([`Due::wants_fresh_lines`]):
//!    a frame that arrived meanwhile runs its handler before the input queue's next
//!    frame, as in FreeBSD.
//! 3. Each piece runs with [`Dataplane::step`] on the executor's clocks; the executor
//!    charges it to its accounts ([`Executor::ran`]), moves its tick earlier where a cut
//!    short cycle asks ([`Step::repoll`], [`Executor::tick_early`]) and arms a one-shot
//!    look where a cycle at light traffic or the wakeup watchdog asks ([`Step::look`],
//!    [`Executor::look_at`]).
//!
//! The loop ends when the executor says so (a stop signal, the end of a simulation), with
//! what it said.

use std::ops::ControlFlow;

use crate::device::Device;
use crate::stage::PacketStage;

use super::{Clocks, Dataplane, Due, Step, EVENTS_EVERY_NS};

/// What an executor lends [`Dataplane::drive`]: its clocks, its wait, its timers and its
/// accounts. Each method that can end the loop returns `Break` with the reason.
pub trait Executor<D, S>: Clocks {
    /// Why the loop ended.
    type Stop;

    /// Reports to `dp` what fired without waiting, before each piece of work (a simulated
    /// clock's ticks and looks, the devices' models moving on); by default nothing.
    fn between(&mut self, _dp: &mut Dataplane<D, S>) -> ControlFlow<Self::Stop> {
        ControlFlow::Continue(())
    }

    /// Reads the executor's events afresh and reports what fired to `dp` (ticks, looks,
    /// interrupt and transmit-ready lines, an idle CPU, its own time with
    /// [`Dataplane::ran_outside`]); waits for them first while nothing is due. `worked`:
    /// work ran since the last wait. Returns `Continue(true)` when what is due may run
    /// now, `Continue(false)` when the wait gave the time to other work (a simulated user
    /// task): the loop then reads the events again before running anything.
    fn wait(&mut self, dp: &mut Dataplane<D, S>, worked: bool) -> ControlFlow<Self::Stop, bool>;

    /// Whether a line the executor waits on can rise while work runs (an armed interrupt
    /// whose fd it watches; a simulated device's lines, always): then it reads its events
    /// before any piece but a running handler's next batch.
    fn waits_on_lines(&self, dp: &Dataplane<D, S>) -> bool;

    /// `due` ran as `step` says: charges it to the executor's accounts, with whatever the
    /// executor does after such a piece (a spinning pass that found nothing yields).
    fn ran(&mut self, dp: &mut Dataplane<D, S>, due: Due, step: &Step) -> ControlFlow<Self::Stop>;

    /// The next tick comes at `at` (the executor's clock reads `now`), and the tick's
    /// period runs on from there ([`Step::repoll`]).
    fn tick_early(&mut self, at: u64, now: u64) -> ControlFlow<Self::Stop>;

    /// A look at the devices is due at `at` (the executor's clock reads `now`): a one-shot
    /// timer beside the tick, armed again in place of what it was armed for, reported with
    /// [`Dataplane::raise_look`] ([`Step::look`]: a poll cycle's look or the wakeup
    /// watchdog's).
    fn look_at(&mut self, at: u64, now: u64) -> ControlFlow<Self::Stop>;
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Runs the dataplane on `executor` until the executor stops it, by the rules in
    /// [`super::executor`]'s header; returns why it stopped.
    pub fn drive<E: Executor<D, S>>(&mut self, executor: &mut E) -> E::Stop {
        match self.drive_until_stop(executor) {
            ControlFlow::Break(stop) => stop,
            ControlFlow::Continue(never) => match never {},
        }
    }

    fn drive_until_stop<E: Executor<D, S>>(
        &mut self,
        ex: &mut E,
    ) -> ControlFlow<E::Stop, std::convert::Infallible> {
        // Work ran since the last wait; the last piece spun; when the events were read.
        let mut worked = false;
        let mut spun = false;
        let mut read_at = ex.now();
        loop {
            ex.between(self)?;
            let read = match self.next_due() {
                None => true,
                Some(due) => {
                    spun || ex.now().saturating_sub(read_at) >= self.events_slice()
                        || (due.wants_fresh_lines() && ex.waits_on_lines(self))
                }
            };
            if read {
                let run_now = ex.wait(self, worked)?;
                read_at = ex.now();
                worked = false;
                spun = false;
                if !run_now {
                    continue;
                }
            }
            let Some(due) = self.next_due() else {
                continue;
            };
            let step = self.step(due, ex);
            worked = true;
            spun = due.spins();
            ex.ran(self, due, &step)?;
            if let Some(at) = step.repoll {
                ex.tick_early(at, step.end)?;
            }
            if let Some(at) = step.look {
                ex.look_at(at, step.end)?;
            }
        }
    }

    /// The longest work runs before the events are read again: [`EVENTS_EVERY_NS`], at
    /// most a tick period while the tick runs.
    fn events_slice(&self) -> u64 {
        let poller = &self.poller;
        if poller.handlers() > 0 && !poller.state().quiet {
            poller.tick_period_ns().min(EVENTS_EVERY_NS)
        } else {
            EVENTS_EVERY_NS
        }
    }
}
