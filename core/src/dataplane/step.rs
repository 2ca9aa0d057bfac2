//! One step of an executor: a piece of due work with everything that goes around it.
//!
//! [`Dataplane::step`] runs the piece [`Dataplane::next_due`] chose and does, in one call,
//! what every executor needs done around it: it closes the `auto` window when one is over
//! (reading the thread's CPU clock then, and only then: [`super::auto`]), runs the piece at
//! the executor's time, tells the window how long the piece took, and after a
//! [`Due::Pollmore`] takes the early tick a cycle cut short by a full output asks for
//! ([`Step::repoll`]) and the look a cycle at light traffic asks for ([`Step::look`]). The
//! `Pollmore` that closes a cycle kicks the outputs the cycle filled before it closes, so
//! that the kick (on AF_XDP in copy mode, the driver's whole transmit) is timed as part of
//! the cycle the controller meters. The executor lends it its clocks and its cost charging
//! ([`Clocks`]), through the loop ([`super::executor`]); the real poll thread times the
//! piece on the monotonic clock, the simulator's virtual CPU charges its costs on virtual
//! time.

use crate::device::Device;
use crate::stage::PacketStage;

use super::{Dataplane, Due, Work};

/// What an executor lends [`Dataplane::step`]: its clocks, and the costs the clock does not
/// see pass (a simulator's).
pub trait Clocks {
    /// The executor's clock, ns (monotonic time; a simulator's virtual time): read when the
    /// piece begins and when it ends.
    fn now(&mut self) -> u64;
    /// The CPU time the executor's thread has used, ns (the simulator's device work): read
    /// once per `auto` window, and never while no interface is in `auto` mode.
    fn cpu_ns(&mut self) -> u64;
    /// Charges the wakeup before `due`, which began at `start`, and returns the clock where
    /// the piece's own timing begins. A real thread's wakeup is behind it already: by
    /// default nothing is charged and the timing begins at `start`.
    fn wake(&mut self, _due: Due, start: u64) -> u64 {
        start
    }
    /// Charges what `work` cost beyond what ran on the clock (by default nothing).
    fn charge(&mut self, _work: Work) {}
}

/// A clock that stands at one instant, on a thread that uses no CPU: for stepping what is
/// due where time does not matter (a test that hands the dataplane frames,
/// [`Dataplane::finish`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frozen(pub u64);

impl Clocks for Frozen {
    fn now(&mut self) -> u64 {
        self.0
    }

    fn cpu_ns(&mut self) -> u64 {
        0
    }
}

/// What one step ran, for the executor's time accounts and its tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The work done.
    pub work: Work,
    /// The executor's clock when the piece began, its wakeup included.
    pub start: u64,
    /// The executor's clock when the piece ended.
    pub end: u64,
    /// How long the piece took on the executor's clock, its wakeup left out: what the
    /// `auto` window was told.
    pub ns: u64,
    /// When to tick next, earlier than the tick's period: a full output cut the poll cycle
    /// short and raises no transmit-ready line (else its rising starts the next cycle). The
    /// executor's tick comes then, and its period runs on from there.
    pub repoll: Option<u64>,
    /// When to look at the devices before the next tick: the cycle moved frames and
    /// emptied the rings ([`crate::Poller::take_look`]), or the wakeup watchdog's next
    /// look ([`super::watchdog`]), whichever comes first. The executor arms its one-shot
    /// timer there (in place of what it was armed for) and reports it with
    /// [`Dataplane::raise_look`]; its tick stays where it is.
    pub look: Option<u64>,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Runs `due` (what [`Dataplane::next_due`] returned) on the executor's `clocks`: closes
    /// the `auto` window if it is over, runs the piece, accounts its time to the window and
    /// takes the early tick a cut-short poll cycle asks for.
    pub fn step(&mut self, due: Due, clocks: &mut impl Clocks) -> Step {
        let start = clocks.now();
        if self.auto_window_due(start) {
            // Once a window at most: what the thread used, wakeups included.
            let cpu = clocks.cpu_ns();
            self.close_auto_window(start, cpu);
        }
        let woken = clocks.wake(due, start);
        let at = if due == Due::Pollmore && self.closes_cycle_with_flush(start) {
            // The cycle's transmit is part of its cost, as a driver's transmit within
            // FreeBSD's poll cycle is: the outputs are kicked first, and the cycle closes
            // (and the controller reads its length) on the clock after the kick.
            self.devs.flush_waiting();
            clocks.now()
        } else {
            start
        };
        let work = self.run(due, at);
        clocks.charge(work);
        let end = clocks.now();
        let ns = end.saturating_sub(woken);
        self.ran(due, ns);
        if matches!(due, Due::Interrupt(_) | Due::Handler(_) | Due::Task(_)) {
            self.interrupt_ns += ns;
        }
        let (repoll, look) = if due == Due::Pollmore {
            (self.take_repoll(), self.poller.take_look())
        } else {
            (None, None)
        };
        let look = self.rearm_timer(look);
        Step {
            work,
            start,
            end,
            ns,
            repoll,
            look,
        }
    }

    /// Ends the work that takes in frames without bound and runs the rest, as at shutdown:
    /// interrupt handlers and adaptive tasks stop where they are (under a flood that
    /// outruns the CPU they would never end; what is left in a ring was never received;
    /// their interrupts are re-armed), raised lines and ticks not yet run are forgotten,
    /// then the bounded work runs until nothing is due: the poll cycles already owed (at
    /// most `burst` frames per interface each), the input queue, the outputs' flush.
    /// Returns the work done.
    pub fn finish(&mut self, now: u64) -> Work {
        self.forget_unbounded_work();
        self.step_accounted(&mut Frozen(now))
    }

    /// Steps every piece of accounted work due now (levels 1 to 6 of [`Dataplane::next_due`])
    /// on `clocks`, as a test that hands the dataplane some frames does; returns the work
    /// done.
    pub fn step_accounted(&mut self, clocks: &mut impl Clocks) -> Work {
        let mut total = Work::default();
        while let Some(due) = self.next_due().filter(|d| !d.spins()) {
            let w = self.step(due, clocks).work;
            total.rx += w.rx;
            total.enqueued += w.enqueued;
        }
        total
    }

    /// Whether a `Pollmore` at `now` closes the poll cycle while outputs wait for their
    /// kick.
    fn closes_cycle_with_flush(&self, now: u64) -> bool {
        self.devs.waits_for_flush() && self.poller.pollmore_closes(now)
    }
}
