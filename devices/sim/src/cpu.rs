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

use polld_core::dataplane::EVENTS_EVERY_NS;
use polld_core::{Clocks, Dataplane, Due, Emit, PacketStage, Poller, Verdict, Work};

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
    next_tick: u64,
    /// When the look a cycle armed is due ([`polld_core::dataplane::Step::look`]).
    next_look: Option<u64>,
    pub split: CpuSplit,
    /// Frames the user generator sent.
    pub generated: u64,
    /// Frames the user generator could not send (tx ring full): it blocked.
    pub gen_blocked: u64,
    /// Ticks delivered.
    pub ticks: u64,
    /// When the interrupt lines were last read (ns).
    lines_read_at: u64,
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
            next_tick: 0,
            next_look: None,
            split: CpuSplit::default(),
            generated: 0,
            gen_blocked: 0,
            ticks: 0,
            lines_read_at: 0,
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

    fn tick_ns(&self) -> u64 {
        self.dp.poller().tick_period_ns()
    }

    fn charge(&self, ns: u64) {
        self.clock.set(self.clock.get() + ns);
    }

    /// Runs until virtual time `end` (ns).
    pub fn run_until(&mut self, end: u64) {
        while self.now() < end {
            let start = self.now();
            let bucket = self.step(end);
            let spent = self.now() - start;
            *match bucket {
                Bucket::Intr => &mut self.split.intr_ns,
                Bucket::Kernel => &mut self.split.kernel_ns,
                Bucket::Busy => &mut self.split.busy_ns,
                Bucket::User => &mut self.split.user_ns,
                Bucket::IdlePoll => &mut self.split.idle_poll_ns,
                Bucket::Idle => &mut self.split.idle_ns,
            } += spent;
        }
        self.dp.sync_hw_drops();
    }

    /// Reports the clock and the interrupt lines to the dataplane, runs the work it says
    /// is most urgent (or the user task, or nothing), charges its cost and says whose time
    /// it was.
    fn step(&mut self, end: u64) -> Bucket {
        let now = self.now();
        for i in 0..self.dp.interfaces().len() {
            self.dp.interface_mut(i).dev_mut().advance();
        }
        if now >= self.next_tick {
            let tick = self.tick_ns();
            let n = (now - self.next_tick) / tick + 1;
            self.next_tick += n * tick;
            // Quiet polling has stopped its tick: the clock passes unseen.
            if !self.dp.poller().state().quiet {
                self.ticks += n;
                self.dp.raise_ticks(n as u32);
            }
        }
        if self.next_look.is_some_and(|at| now >= at) {
            self.next_look = None;
            self.dp.raise_look();
        }
        // As the real executor reads its events: before every piece of work but a running
        // handler's next batch, and after a slice of interrupt work.
        let slice_over = now.saturating_sub(self.lines_read_at) >= EVENTS_EVERY_NS;
        if slice_over || self.dp.next_due().is_none_or(Due::wants_fresh_lines) {
            self.read_lines();
            self.lines_read_at = now;
        }
        let mut due = self.dp.next_due();
        if due.is_none() || due == Some(Due::IdlePoll) {
            let user = self.user;
            match user {
                UserTask::Spin => {
                    self.idle_until(end, QUANTUM_NS);
                    return Bucket::User;
                }
                UserTask::Generator { nic } if self.generate(nic) => return Bucket::User,
                // A blocked generator sleeps until its ring has room.
                _ => {}
            }
            self.dp.raise_idle();
            due = self.dp.next_due();
        }
        let Some(due) = due else {
            self.idle_until(end, u64::MAX);
            return Bucket::Idle;
        };
        let mut clocks = VirtualClocks {
            clock: &self.clock,
            costs: self.costs,
            device_ns: self.split.device_ns(),
        };
        let step = self.dp.step(due, &mut clocks);
        let work = step.work;
        self.timed_ns += step.ns;
        match due {
            Due::Tick(_) | Due::Look | Due::QuietWakeup(_) | Due::Handler(_) => Bucket::Intr,
            Due::TxReady(o) => {
                // The transmit-complete interrupt's own work: reclaiming the descriptors.
                self.dp.interface_mut(o).dev_mut().tx_interrupt();
                Bucket::Intr
            }
            Due::Interrupt(i) => {
                if self.nic(i).tx_completions() > 0 && self.dp.interrupt_armed(i) {
                    self.dp.interface_mut(i).dev_mut().tx_interrupt();
                }
                Bucket::Intr
            }
            Due::Task(_) | Due::PollChunk | Due::InputQueue => Bucket::Kernel,
            Due::Pollmore => {
                // As the executor does: the tick moves earlier, and the grid with it.
                if let Some(at) = step.repoll {
                    self.next_tick = self.next_tick.min(at);
                }
                // A look is a one-shot timer beside the tick.
                if let Some(at) = step.look {
                    self.next_look = Some(at);
                }
                Bucket::Kernel
            }
            Due::Busy(_) => {
                if work.rx == 0 {
                    self.idle_until(end, 1_000);
                }
                Bucket::Busy
            }
            Due::IdlePoll => {
                if work.rx == 0 {
                    self.idle_until(end, QUANTUM_NS);
                }
                Bucket::IdlePoll
            }
        }
    }

    /// Reports the devices' interrupt and transmit-ready lines as they are now.
    fn read_lines(&mut self) {
        for i in 0..self.dp.interfaces().len() {
            // A quiet poller unmasks the device's interrupt for its wakeup.
            let raised = if self.dp.wakeup_armed(i) {
                self.nic(i).rx_backlog() > 0
            } else {
                self.nic(i).interrupt_asserted()
            };
            self.dp.interrupt_line(i, raised);
            self.dp.tx_ready_line(i, self.nic(i).tx_writable());
        }
    }

    /// The generator builds and sends one frame; false if it is blocked on a full ring
    /// (counted in `gen_blocked`).
    fn generate(&mut self, nic: usize) -> bool {
        let frame = [0u8; 60];
        self.charge(self.costs.gen_ns);
        match self.dp.send_from_user(nic, &frame) {
            Ok(()) => {
                self.generated += 1;
                true
            }
            Err(_) => {
                // The frame's cost was spent in vain: take it back, the process blocks.
                self.clock.set(self.now() - self.costs.gen_ns);
                self.gen_blocked += 1;
                false
            }
        }
    }

    /// Lets time pass until the next event (a tick, an arrival, a departure), at most
    /// `cap` ns and not past `end`.
    fn idle_until(&mut self, end: u64, cap: u64) {
        let now = self.now();
        let next_nic = (0..self.dp.interfaces().len())
            .map(|i| self.nic(i).next_event())
            .min()
            .unwrap_or(u64::MAX);
        let target = self
            .next_tick
            .min(self.next_look.unwrap_or(u64::MAX))
            .min(next_nic)
            .min(end)
            .min(now.saturating_add(cap));
        self.clock.set(target.max(now + 1));
    }
}

/// The virtual CPU's clocks as a step sees them: its device work stands for the poll
/// thread's CPU clock, a wakeup is charged before the work (where the real executor's clock
/// does not see it), and queueing a frame is charged after it.
struct VirtualClocks<'a> {
    clock: &'a Clock,
    costs: CpuCosts,
    device_ns: u64,
}

impl Clocks for VirtualClocks<'_> {
    fn now(&mut self) -> u64 {
        self.clock.get()
    }

    fn cpu_ns(&mut self) -> u64 {
        self.device_ns
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

enum Bucket {
    Intr,
    Kernel,
    Busy,
    User,
    IdlePoll,
    Idle,
}
