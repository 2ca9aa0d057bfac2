//! A virtual CPU that runs the dataplane on virtual time.
//!
//! One CPU, as in Rizzo's uniprocessor box. The CPU keeps the clock (ticks every
//! `1/kern.polling.hz`), the devices' interrupt lines and the cost of each piece of work
//! ([`CpuCosts`]); which piece runs next is the dataplane's decision
//! (`polld_core::Due`, in the order written in `polld_core::dataplane::decision`). The user
//! task (CPU-bound spinning, or a generator that sends frames) runs when no device work
//! but busy polling is due, before the idle poller; the CPU idles when nothing is left.
//! A transmit-complete interrupt, and a transmit-ready one, also reclaims descriptors (the
//! device model).
//!
//! Every nanosecond is attributed to one of these, so CPU shares are measured exactly.

use std::cell::Cell;
use std::rc::Rc;

use std::ops::ControlFlow;

use polld_core::{
    Clocks, Dataplane, Due, Emit, Executor, PacketStage, Poller, Step, Verdict, Work,
};

use crate::nic::{Clock, SimNic};

/// CPU costs outside the driver, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CpuCosts {
    /// Interrupt entry and exit (save state, acknowledge, return).
    pub intr_ns: u64,
    /// One clock tick (hardclock and the polling hook).
    pub tick_ns: u64,
    /// IP forwarding of one frame (ip_input + ip_forward + ether_output).
    pub fwd_ns: u64,
    /// Local delivery of one frame (up to the socket).
    pub local_ns: u64,
    /// Putting one frame on the IP input queue (and taking it off later).
    pub enqueue_ns: u64,
    /// A context switch into a task or the netisr thread.
    pub switch_ns: u64,
    /// The user generator's cost to build and send one frame (syscall included).
    pub gen_ns: u64,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            intr_ns: 2_000,
            tick_ns: 1_000,
            fwd_ns: 1_500,
            local_ns: 1_000,
            enqueue_ns: 300,
            switch_ns: 1_000,
            gen_ns: 3_000,
        }
    }
}

/// The packet stage of the simulation: each input NIC forwards to a fixed output, or
/// delivers locally; the cost is charged on the virtual clock.
pub struct SimStage {
    clock: Clock,
    routes: Vec<Option<usize>>,
    costs: CpuCosts,
}

impl PacketStage for SimStage {
    fn process(&mut self, input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        match self.routes.get(input).copied().flatten() {
            Some(out) => {
                self.clock.set(self.clock.get() + self.costs.fwd_ns);
                Verdict::Forward { out }
            }
            None => {
                self.clock.set(self.clock.get() + self.costs.local_ns);
                Verdict::Local
            }
        }
    }
}

/// The competing user-level work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum UserTask {
    /// None: the CPU idles (or idle-polls) when the devices leave it.
    #[default]
    None,
    /// A CPU-bound process: takes every nanosecond it is given.
    Spin,
    /// A traffic generator sending as fast as it can on NIC `nic`.
    Generator { nic: usize },
}

/// Where the CPU went, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuSplit {
    /// Clock ticks and device interrupts.
    pub intr_ns: u64,
    /// Poll cycles, the input queue and adaptive tasks (the "kernel" share).
    pub kernel_ns: u64,
    /// Busy polling.
    pub busy_ns: u64,
    /// The user task.
    pub user_ns: u64,
    /// The idle poller (unaccounted by the scheduler).
    pub idle_poll_ns: u64,
    /// Nothing to do.
    pub idle_ns: u64,
}

impl CpuSplit {
    pub fn total(&self) -> u64 {
        self.intr_ns
            + self.kernel_ns
            + self.busy_ns
            + self.user_ns
            + self.idle_poll_ns
            + self.idle_ns
    }
    /// Share of a category in percent of the total.
    pub fn pct(&self, ns: u64) -> f64 {
        ns as f64 * 100.0 / self.total().max(1) as f64
    }
    /// Device work: interrupts, poll cycles, queue, tasks, busy and idle polling.
    pub fn device_ns(&self) -> u64 {
        self.intr_ns + self.kernel_ns + self.busy_ns + self.idle_poll_ns
    }
}

/// The simulation: a dataplane of simulated NICs on one virtual CPU.
pub struct Sim {
    clock: Clock,
    dp: Dataplane<SimNic, SimStage>,
    costs: CpuCosts,
    user: UserTask,
    timers: Timers,
    pub split: CpuSplit,
    /// Frames the user generator sent.
    pub generated: u64,
    /// Frames the user generator could not send (tx ring full): it blocked.
    pub gen_blocked: u64,
    /// Ticks delivered.
    pub ticks: u64,
    /// Wakeups of the one-shot timer (the looks between ticks, the wakeup watchdog).
    pub timer_wakeups: u64,
    /// The device work as the executor's clock times it, around each piece of work (what
    /// a step tells the `auto` window, `Step::ns`): without the wakeups before them.
    pub timed_ns: u64,
}

/// The longest the user task or the idle CPU runs without looking for work, in ns.
const QUANTUM_NS: u64 = 20_000;

impl Sim {
    /// A simulation over `nics`, where frames from NIC `i` go to `routes[i]` (or are
    /// delivered locally when `None`).
    pub fn new(
        poller: Poller,
        nics: Vec<crate::nic::NicConfig>,
        routes: Vec<Option<usize>>,
        costs: CpuCosts,
        user: UserTask,
        seed: u64,
    ) -> Sim {
        let clock: Clock = Rc::new(Cell::new(0));
        let devices = nics
            .into_iter()
            .enumerate()
            .map(|(i, cfg)| SimNic::new(cfg, clock.clone(), seed.wrapping_add(i as u64 * 7919)))
            .collect();
        let stage = SimStage {
            clock: clock.clone(),
            routes,
            costs,
        };
        Sim {
            dp: Dataplane::new(poller, devices, stage),
            clock,
            costs,
            user,
            timers: Timers::default(),
            split: CpuSplit::default(),
            generated: 0,
            gen_blocked: 0,
            ticks: 0,
            timer_wakeups: 0,
            timed_ns: 0,
        }
    }

    pub fn now(&self) -> u64 {
        self.clock.get()
    }
    pub fn dataplane(&self) -> &Dataplane<SimNic, SimStage> {
        &self.dp
    }
    pub fn dataplane_mut(&mut self) -> &mut Dataplane<SimNic, SimStage> {
        &mut self.dp
    }
    pub fn nic(&self, i: usize) -> &SimNic {
        self.dp.interfaces()[i].dev()
    }

    /// Runs until virtual time `end` (ns): the dataplane's loop ([`Dataplane::drive`]) on
    /// this CPU.
    pub fn run_until(&mut self, end: u64) {
        let mut cpu = Cpu {
            clock: &self.clock,
            costs: self.costs,
            user: self.user,
            end,
            timers: &mut self.timers,
            split: &mut self.split,
            generated: &mut self.generated,
            gen_blocked: &mut self.gen_blocked,
            ticks: &mut self.ticks,
            timer_wakeups: &mut self.timer_wakeups,
            timed_ns: &mut self.timed_ns,
        };
        self.dp.drive(&mut cpu);
        self.dp.sync_hw_drops();
    }
}

/// The virtual CPU while it runs: the simulation's clock, timers and accounts, lent to the
/// dataplane's loop.
struct Cpu<'a> {
    clock: &'a Clock,
    costs: CpuCosts,
    user: UserTask,
    /// Where the run ends.
    end: u64,
    timers: &'a mut Timers,
    split: &'a mut CpuSplit,
    generated: &'a mut u64,
    gen_blocked: &'a mut u64,
    ticks: &'a mut u64,
    timer_wakeups: &'a mut u64,
    timed_ns: &'a mut u64,
}

type SimDataplane = Dataplane<SimNic, SimStage>;

impl Cpu<'_> {
    /// Adds the time since `start` to `bucket`'s share.
    fn spent(&mut self, bucket: Bucket, start: u64) {
        *match bucket {
            Bucket::Intr => &mut self.split.intr_ns,
            Bucket::Kernel => &mut self.split.kernel_ns,
            Bucket::Busy => &mut self.split.busy_ns,
            Bucket::User => &mut self.split.user_ns,
            Bucket::IdlePoll => &mut self.split.idle_poll_ns,
            Bucket::Idle => &mut self.split.idle_ns,
        } += self.now() - start;
    }

    /// Reports the devices' interrupt and transmit-ready lines as they are now.
    fn read_lines(&mut self, dp: &mut SimDataplane) {
        for i in 0..dp.interfaces().len() {
            let nic = dp.interfaces()[i].dev();
            // A quiet poller unmasks the device's interrupt for its wakeup.
            let raised = if dp.wakeup_armed(i) {
                nic.rx_backlog() > 0
            } else {
                nic.interrupt_asserted()
            };
            let writable = nic.tx_writable();
            dp.interrupt_line(i, raised);
            dp.tx_ready_line(i, writable);
        }
    }

    /// The generator builds and sends one frame; false if it is blocked on a full ring
    /// (counted in `gen_blocked`).
    fn generate(&mut self, dp: &mut SimDataplane, nic: usize) -> bool {
        let frame = [0u8; 60];
        self.clock.set(self.now() + self.costs.gen_ns);
        match dp.send_from_user(nic, &frame) {
            Ok(()) => {
                *self.generated += 1;
                true
            }
            Err(_) => {
                // The frame's cost was spent in vain: take it back, the process blocks.
                self.clock.set(self.now() - self.costs.gen_ns);
                *self.gen_blocked += 1;
                false
            }
        }
    }

    /// Lets time pass until the next event (a tick, a look, an arrival, a departure), at
    /// most `cap` ns and not past the end of the run.
    fn idle_until(&mut self, dp: &SimDataplane, cap: u64) {
        let now = self.now();
        let next_nic = dp
            .interfaces()
            .iter()
            .map(|i| i.dev().next_event())
            .min()
            .unwrap_or(u64::MAX);
        let target = self
            .timers
            .next_tick
            .min(self.timers.next_look.unwrap_or(u64::MAX))
            .min(next_nic)
            .min(self.end)
            .min(now.saturating_add(cap));
        self.clock.set(target.max(now + 1));
    }
}

/// The virtual CPU's clocks as a step sees them: its device work stands for the poll
/// thread's CPU clock, a wakeup is charged before the work (where the real executor's clock
/// does not see it), and queueing a frame is charged after it.
impl Clocks for Cpu<'_> {
    fn now(&mut self) -> u64 {
        self.clock.get()
    }

    fn cpu_ns(&mut self) -> u64 {
        self.split.device_ns()
    }

    fn wake(&mut self, due: Due, start: u64) -> u64 {
        let wakeup = match due {
            Due::Tick(_) | Due::Look => self.costs.tick_ns,
            Due::QuietWakeup(_) | Due::Interrupt(_) | Due::TxReady(_) => self.costs.intr_ns,
            Due::Task(_) => self.costs.switch_ns,
            _ => 0,
        };
        self.clock.set(start + wakeup);
        start + wakeup
    }

    fn charge(&mut self, work: Work) {
        self.clock
            .set(self.clock.get() + work.enqueued * self.costs.enqueue_ns);
    }
}

impl Executor<SimNic, SimStage> for Cpu<'_> {
    type Stop = ();

    /// The hardware between two pieces: the devices' models move on to now, the clock
    /// ticks (unseen while quiet polling has stopped the tick) and a look's timer fires.
    fn between(&mut self, dp: &mut SimDataplane) -> ControlFlow<()> {
        let now = self.now();
        if now >= self.end {
            return ControlFlow::Break(());
        }
        for i in 0..dp.interfaces().len() {
            dp.interface_mut(i).dev_mut().advance();
        }
        let timers = &mut *self.timers;
        if now >= timers.next_tick {
            let tick = dp.poller().tick_period_ns();
            let n = (now - timers.next_tick) / tick + 1;
            timers.next_tick += n * tick;
            if !dp.poller().state().quiet {
                *self.ticks += n;
                dp.raise_ticks(n as u32);
            }
        }
        if timers.next_look.is_some_and(|at| now >= at) {
            timers.next_look = None;
            *self.timer_wakeups += 1;
            dp.raise_look();
        }
        ControlFlow::Continue(())
    }

    /// Reads the lines; with nothing but an idle-poll pass due, the user task runs (a
    /// quantum of spinning, one generated frame), and if it has nothing to do the CPU is
    /// idle: the idle poller may run, or time passes to the next event.
    fn wait(&mut self, dp: &mut SimDataplane, _worked: bool) -> ControlFlow<(), bool> {
        self.read_lines(dp);
        if !dp.next_due().is_none_or(|due| due == Due::IdlePoll) {
            return ControlFlow::Continue(true);
        }
        let start = self.now();
        let user = self.user;
        match user {
            UserTask::Spin => {
                self.idle_until(dp, QUANTUM_NS);
                self.spent(Bucket::User, start);
                return ControlFlow::Continue(false);
            }
            UserTask::Generator { nic } if self.generate(dp, nic) => {
                self.spent(Bucket::User, start);
                return ControlFlow::Continue(false);
            }
            // A blocked generator sleeps until its ring has room.
            _ => {}
        }
        dp.raise_idle();
        if dp.next_due().is_none() {
            self.idle_until(dp, u64::MAX);
            self.spent(Bucket::Idle, start);
        }
        ControlFlow::Continue(true)
    }

    /// A simulated device raises its lines whatever the CPU runs.
    fn waits_on_lines(&self, _dp: &SimDataplane) -> bool {
        true
    }

    fn ran(&mut self, dp: &mut SimDataplane, due: Due, step: &Step) -> ControlFlow<()> {
        *self.timed_ns += step.ns;
        let bucket = match due {
            Due::Tick(_) | Due::Look | Due::QuietWakeup(_) | Due::Handler(_) => Bucket::Intr,
            Due::TxReady(o) => {
                // The transmit-complete interrupt's own work: reclaiming the descriptors.
                dp.interface_mut(o).dev_mut().tx_interrupt();
                Bucket::Intr
            }
            Due::Interrupt(i) => {
                if dp.interfaces()[i].dev().tx_completions() > 0 && dp.interrupt_armed(i) {
                    dp.interface_mut(i).dev_mut().tx_interrupt();
                }
                Bucket::Intr
            }
            Due::Task(_) | Due::PollChunk | Due::InputQueue | Due::Pollmore | Due::Watchdog => {
                Bucket::Kernel
            }
            Due::Busy(_) => {
                if step.work.rx == 0 {
                    self.idle_until(dp, 1_000);
                }
                Bucket::Busy
            }
            Due::IdlePoll => {
                if step.work.rx == 0 {
                    self.idle_until(dp, QUANTUM_NS);
                }
                Bucket::IdlePoll
            }
        };
        self.spent(bucket, step.start);
        ControlFlow::Continue(())
    }

    /// The tick moves earlier, and the grid with it.
    fn tick_early(&mut self, at: u64, _now: u64) -> ControlFlow<()> {
        self.timers.next_tick = self.timers.next_tick.min(at);
        ControlFlow::Continue(())
    }

    fn look_at(&mut self, at: u64, _now: u64) -> ControlFlow<()> {
        self.timers.next_look = Some(at);
        ControlFlow::Continue(())
    }
}

/// The virtual CPU's timers: the tick's grid and a one-shot look (a cycle's, the wakeup
/// watchdog's).
#[derive(Clone, Copy, Debug, Default)]
struct Timers {
    /// When the next tick is due.
    next_tick: u64,
    /// When the look a step armed is due ([`Step::look`]).
    next_look: Option<u64>,
}

enum Bucket {
    Intr,
    Kernel,
    Busy,
    User,
    IdlePoll,
    Idle,
}
