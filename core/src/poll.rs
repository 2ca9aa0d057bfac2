//! The polling scheduler: a port of FreeBSD's `sys/kern/kern_poll.c`.
//!
//! # The algorithm
//!
//! A clock ticks `kern.polling.hz` times a second. Each tick ([`Poller::hardclock`]) owes the
//! devices one *poll cycle* and, unless a cycle is already running, arms one. A cycle has a
//! budget of `burst` packets **per interface**, split into chunks of `each_burst`: each chunk
//! ([`Poller::netisr_poll`]) calls every registered handler once, in table order, with the
//! chunk's count; between chunks the deferred packet work (the netisr stage: the IP input
//! queue) runs; then [`Poller::netisr_pollmore`] either schedules the next chunk or, when the
//! budget is spent, closes the cycle.
//!
//! Closing a cycle adapts `burst`. The time from the first chunk to the last pollmore, as a
//! percentage of one tick, is `kern_load = floor(elapsed_us * hz / 10000)`; if it exceeds
//! `100 - user_frac`, `burst` shrinks by one, otherwise it grows by one (clamped to
//! `1..=burst_max`). If ticks arrived while the cycle ran (`pending_polls` is still above
//! zero after paying for this one) the cycle overran: `burst -= burst / 8` and a new cycle
//! starts at once (phase 6). So the devices get at most `100 - user_frac` percent of each
//! tick when there is other work, and the rest of the CPU is left to it.
//!
//! Two departures from FreeBSD in the cycle, both about work the budget cannot buy (the
//! idle poller's is below). *Transmit backpressure*: a handler whose received frames met a
//! full output ([`PollHandlers::take_output_full`]) has had its share of the cycle and is
//! skipped in the chunks left, and the burst does not grow after such a cycle (the output,
//! not the CPU, was the limit). *Empty rings*: a chunk after which every handler polled
//! returned less than its count (its ring ran empty) or was blocked ends the cycle (what
//! arrives later waits for the next tick, or for the idle poller), so an idle interface
//! costs one poll a tick whatever the burst (which still grows as FreeBSD's, to be ready
//! for the next flood).
//! Where every chunk comes back full and no output fills, the cycle is FreeBSD's.
//!
//! A cycle cut short by a full output asks to poll again before the next tick
//! ([`Poller::take_repoll`]), after a wait that keeps the cycle within its share of the time
//! to the next one: the output drains meanwhile, and the input is served at the rate the
//! output takes rather than one ring's worth a tick. (The dataplane replaces that wait by
//! the output's transmit-ready line where the output raises one.)
//!
//! *Looks*: a cycle that ended because every ring ran empty, while the devices moved frames
//! within the last tick (at most `looks` cycles in a row since the last that moved frames
//! found none), with room left in
//! the tick's `100 - user_frac` share for one more like it, arms a look
//! ([`Poller::take_look`]) at the next of `kern.polling.looks` points evenly spaced
//! between two ticks: the executor's timer fires there ([`Poller::look`]) and a cycle
//! runs, owing nothing to the clock. So while traffic is light a frame waits at most
//! `1/((looks + 1) * hz)` for its poll, not a tick, with no device interrupt; a flood
//! spends the budget first and an idle device moves nothing, so neither looks, and
//! FreeBSD's cycle is unchanged there.
//!
//! *Quiet*: after `quiet_cycles` cycles in a row that moved no frame (with idle polling
//! too, whose poller then sleeps on the same interrupts), the poller is `quiet`: the
//! executor stops the tick and waits on the polled devices' interrupts, and the first one
//! that fires ([`Poller::wake`]) counts as a tick and resumes polling. An idle box then
//! takes no wakeups at all (a bare 1000 Hz timer costs a few percent of a core in a VM);
//! `quiet_cycles=0` ticks forever, as FreeBSD. Under the classic controller the wakeup
//! first grows `burst` by one per tick the spell skipped (as FreeBSD's empty cycles would
//! have), so a flood after a quiet spell starts at FreeBSD's burst rather than ramping up
//! from the one the spell froze.
//!
//! Every `reg_frac` cycles the first chunk carries [`PollCmd::CheckStatus`] instead of
//! [`PollCmd::PollOnly`] so that drivers read their expensive status registers rarely.
//! With `idle_poll` on, an idle-priority pass ([`Poller::idle_poll`]) polls every handler
//! with `each_burst` whenever the CPU would otherwise idle; it is not accounted. Its
//! departure: a pass that leaves every ring empty (none filled its `each_burst`), or a
//! cycle that does, puts the idle poller to sleep on the devices' interrupts
//! ([`Poller::idle_wake`]) until a frame arrives, instead of polling empty rings again
//! (each pass costs a Linux thread two context switches). So frames that arrive while the
//! CPU idles are served when it idles, not at the next tick, and an idle CPU stays idle.
//! The interrupts wake it at most `kern.polling.idle_wakeups` times between two ticks (0:
//! no limit); after that it rests until the tick. Unbounded, a half-loaded CPU would wake
//! it per batch the kernel hands over, at interrupt mode's cost per packet (the forward
//! bench's half load: 2717 ns against polling's ~1050 without idle polling); once a tick
//! it costs 19-21 % more than without idle polling in the same session (1161-1183 against
//! 980 ns; the README, "Idle polling at half load", has the runs).
//!
//! `kern.polling.controller=time` swaps the ±1 packet rule for a time budget per tick with a
//! moving average of the cost per packet (the time-budget fork, docs/sources.md): each chunk polls as
//! many packets as fit in the time left, so the share converges in a few ticks instead of
//! one packet per tick. `time` is the default (`knobs.rs` says why), `classic` FreeBSD's
//! ([`crate::Profile::FreeBsd`]).
//!
//! # Linux mapping
//!
//! The clock is a timerfd in the poller thread; a timerfd read that reports `n` expirations
//! is passed as `hardclock(now, n)`: one arming, `n` owed ticks (the late ones count as lost
//! polls, not as short ticks). Time is a parameter in nanoseconds from any monotonic clock,
//! so the same code runs on virtual time in `polld-sim`.

use crate::knobs::{Controller, Knobs};
use crate::sysctl::{read, Reading, Value};
use crate::{sysctl_oids, sysctl_struct};

/// Maximum number of registered handlers (FreeBSD's `POLL_LIST_LEN`).
pub const POLL_LIST_LEN: usize = 128;

/// `pending_polls` above this is taken as a stall and reset (FreeBSD's magic 100).
const STALL_LIMIT: u32 = 100;

/// The most periods of `hz` the time controller's tick stretches to when a tick's own cost
/// does not fit the devices' share ([`PollState::stride`]). A queue polld busy-polls
/// returns to the kernel after ten periods without a poll (`gro_flush_timeout`,
/// devices/linux `busy_poll.rs`): at four, two slowed ticks still come within it. Slower,
/// the kernel's softirq can take the queue back between them, and its work counts as the
/// ticks' cost, which slows them further (bounded at 10 Hz, a guest under software
/// emulation at user_frac 90 ran ksoftirqd at 7.9 % of its vCPU beside polld's 4.3 %).
const MAX_STRIDE: u32 = 4;

/// The shortest wait before polling again after a cycle that met a full output.
const MIN_REPOLL_NS: u64 = 5_000;

/// Identifies a registered handler: an index into the dataplane's interfaces.
pub type HandlerId = usize;

/// What a handler is asked to do (FreeBSD's `enum poll_cmd`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PollCmd {
    /// Process up to `count` received frames and reclaim transmitted ones.
    PollOnly,
    /// The same, and also check the device's status (link, errors).
    CheckStatus,
}

/// The handlers the scheduler calls.
pub trait PollHandlers {
    /// Polls handler `id` for up to `count` frames; returns the number processed. A
    /// return below `count` means the handler's ring ran empty.
    fn poll(&mut self, id: HandlerId, cmd: PollCmd, count: u32) -> u32;

    /// Whether frames `id` received met a full output ring since the last call
    /// (transmit backpressure): they were dropped after being received. Asked after each
    /// poll of `id`; handlers without a transmit side never report it.
    fn take_output_full(&mut self, _id: HandlerId) -> bool {
        false
    }
}

/// What the scheduler has armed for the netisr ([`Poller::netisr_due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Netisr {
    /// A chunk of the poll cycle (`netisr_poll`).
    Chunk,
    /// The end of a chunk (`netisr_pollmore`): the next chunk, or the close of the cycle.
    Pollmore,
}

/// Registration errors, with FreeBSD's errno names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegError {
    /// The table already holds `POLL_LIST_LEN` handlers.
    Enomem,
    /// This interface is already registered.
    Eexist,
    /// This interface is not registered.
    Enoent,
}

impl std::fmt::Display for RegError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RegError::Enomem => "ENOMEM: the polling table is full (128 interfaces)",
            RegError::Eexist => "EEXIST: the interface is already registered for polling",
            RegError::Enoent => "ENOENT: the interface is not registered for polling",
        })
    }
}

impl std::error::Error for RegError {}

/// The node the scheduler's entries hang under.
pub const NODE: &str = "kern.polling";

sysctl_struct! {
    /// The scheduler's debug state and counters (`kern.polling.*` read-only values), each
    /// declared once with its default and its oid.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
    pub struct PollState {
        /// Current per-interface packet budget of a cycle.
        burst: u32 = 5, BURST: Gauge "Current polling burst size";
        /// Packets left in the current cycle's budget.
        residual_burst: u32 = 0, RESIDUAL_BURST: Gauge "Residual burst in the current cycle";
        /// Ticks owed: +1 per tick, -1 per completed cycle.
        pending_polls: u32 = 0, PENDING_POLLS: Gauge "Ticks owed to the poller";
        /// Ticks that arrived while a previous one was still owed.
        lost_polls: u64 = 0, LOST_POLLS: Counter "How many times we would have lost a poll tick";
        /// Cycles owed to ticks read late because the poll thread waited for the CPU, not
        /// because a cycle overran them: run without the overrun back-off.
        waited_polls: u64 = 0, WAITED_POLLS: Counter
            "Owed ticks read late after waiting for the CPU, run without the overrun back-off (polld)";
        /// Clock ticks less than half a nominal tick after the previous one.
        short_ticks: u64 = 0, SHORT_TICKS: Counter "Hardclock ticks shorter than they should be";
        /// Position in the state machine, 0..=6.
        phase: u32 = 0, PHASE: Gauge "Polling phase";
        /// Ticks that found the previously scheduled cycle not yet started.
        suspect: u64 = 0, SUSPECT: Counter "suspect event";
        /// Times `pending_polls` exceeded 100 and was reset.
        stalled: u64 = 0, STALLED: Counter "potential stalls";
        /// The idle poller is asleep (no handlers, `idle_poll` off, or every ring was
        /// empty at its last pass: the devices' interrupts wake it).
        idlepoll_sleeping: bool = true, IDLEPOLL_SLEEPING: Gauge "idlepoll thread is sleeping";
        /// Times a device's interrupt woke the idle poller resting on empty rings.
        idlepoll_wakeups: u64 = 0, IDLEPOLL_WAKEUPS: Counter
            "Times a device's interrupt woke the idle poller (polld)";
        /// Completed cycles.
        cycles: u64 = 0, CYCLES: Counter "Completed poll cycles (polld)";
        /// Chunks run.
        chunks: u64 = 0, CHUNKS: Counter "Poll chunks run: handler rounds of a cycle (polld)";
        /// `kern_load` of the last completed cycle, percent of a tick.
        kern_load: u32 = 0, KERN_LOAD: Gauge
            "Device share of the last cycle, percent of a tick (polld)";
        /// Time controller: moving average of the cost of one packet, in nanoseconds.
        ns_per_packet: u64 = 0, NS_PER_PACKET: Gauge
            "Time controller: average cost of one packet in ns (polld)";
        /// Time controller: moving average of the poll thread's CPU time per tick beyond its
        /// cycles' time, the cycles counted up to their budget (its wakeup, the timer read,
        /// work outside the cycles, the cycles' overrun of their budget), as the executor
        /// measures the thread's CPU; the cycle's time budget leaves it out of the share.
        tick_overhead_ns: u64 = 0, TICK_OVERHEAD_NS: Gauge
            "Time controller: poll thread CPU per tick beyond its cycles, ns (polld)";
        /// Time controller: the tick clock fires once every `stride` periods of
        /// `kern.polling.hz`. It is 1 unless every interface polls and the thread's own
        /// cost per tick (`tick_overhead_ns`) would take more than nine tenths of the
        /// devices' share of one, as a wakeup does in a guest under software emulation: then the cycles' tenth
        /// of the share on top of it would take the thread past `100 - user_frac`, so the
        /// tick slows instead ([`Poller::tick_period_ns`]).
        stride: u32 = 1, STRIDE: Gauge
            "Time controller: kern.polling.hz periods per tick, above 1 while a tick's own cost would not fit the devices' share (polld)";
        /// Time spent in poll cycles, from the first chunk to the close, as the controller
        /// measures them: beside the thread's CPU time (`polld.thread_cpu_ns`), what the
        /// thread spent outside them.
        cycle_ns: u64 = 0, CYCLE_NS: Counter
            "Time spent in poll cycles, first chunk to close, ns (polld)";
        /// Polling sleeps on the devices' interrupts: `quiet_cycles` cycles in a row found
        /// every ring empty. The executor stops the tick until [`Poller::wake`].
        quiet: bool = false, QUIET: Gauge
            "Polling sleeps on the devices' interrupts: every ring was empty (polld)";
        /// Quiet spells ended by a device with work.
        quiet_wakeups: u64 = 0, QUIET_WAKEUPS: Counter
            "Times a device's interrupt ended a quiet spell (polld)";
        /// Cycles cut short by a full output: each asks to poll again before the next tick
        /// (after a timer, or when the output's transmit-ready line rises and the next
        /// cycle fits in the tick's share).
        repolls: u64 = 0, REPOLLS: Counter
            "Cycles cut short by a full output, to poll again before the tick if it drains (polld)";
        /// Cycles run at a look between two ticks (`kern.polling.looks`).
        look_cycles: u64 = 0, LOOK_CYCLES: Counter
            "Cycles run at a look between two ticks, while traffic was light (polld)";
    }
}

/// The polling scheduler: knobs, state machine and registration table.
#[derive(Clone, Debug)]
pub struct Poller {
    pub(crate) knobs: Knobs,
    pub(crate) state: PollState,
    /// Cycles since the last status check (FreeBSD's `reg_frac_count`).
    reg_frac_count: u32,
    poll_armed: bool,
    pollmore_armed: bool,
    /// Time of the last tick not judged short, in ns.
    prev_tick: Option<u64>,
    /// Time the current cycle's first chunk started, in ns.
    cycle_start: u64,
    table: Vec<HandlerId>,
    /// Per table entry: its output was full in the current cycle, so its share is over.
    blocked: Vec<bool>,
    /// The current cycle met a full output (work not done: the burst must not grow).
    cycle_blocked: bool,
    /// The last chunk left every polled ring empty or blocked.
    chunk_drained: bool,
    /// Closed cycles in a row that moved no frame.
    empty_cycles: u32,
    /// When the current quiet spell began (the close of its last ticking cycle), in ns.
    quiet_since: u64,
    /// When to poll again, before the next tick, after a cycle cut short by a full output.
    repoll_at: Option<u64>,
    /// The current shortest wait before such a repoll: doubles when a cycle met the full
    /// output in its first chunk (the output had not drained enough to be worth a cycle),
    /// halves when it got further.
    repoll_backoff: u64,
    /// When to look at the devices again before the next tick (a cycle moved frames and
    /// emptied the rings), until the executor takes it ([`Poller::take_look`]).
    look_at: Option<u64>,
    /// The tick the armed look belongs to: a tick since makes it stale.
    look_tick: Option<u64>,
    /// Cycles in a row that moved no frame since the last that did (`u32::MAX` before
    /// any did): the devices moved frames within the last tick while it is at most
    /// `looks`.
    dry_cycles: u32,
    /// Of the ticks owed, how many the executor read late because its thread waited for
    /// the CPU ([`Poller::excuse_waited`]): their cycles skip the overrun back-off.
    excused_polls: u32,
    /// The current cycle met a full output in its first chunk.
    blocked_at_once: bool,
    /// Time the cycles closed since the last clock tick took, in ns, and the last one's:
    /// what a cycle started by an output's transmit-ready line must fit beside
    /// ([`Poller::repoll_on_line`]).
    tick_work_ns: u64,
    last_cycle_ns: u64,
    /// `cycle_ns` at the last [`Poller::note_tick_cpu`].
    cycle_ns_noted: u64,
    /// Time controller: the most handlers that took frames in one chunk of this cycle, and
    /// of the last cycle that took any (the ones a chunk's frames are paid for).
    cycle_busy_handlers: u32,
    busy_handlers: u32,
    /// Time of the last clock tick, in ns.
    last_tick: u64,
    /// Interrupt wakeups of the idle poller since the last clock tick.
    idle_wakeups_since_tick: u32,
    /// The idle poller sleeps until the next tick, not on the devices' interrupts: it
    /// spent its `idle_wakeups` for this tick.
    idle_parked: bool,
    /// Time controller: packets polled in the current cycle, and the busiest handler's
    /// return in the last chunk.
    cycle_packets: u64,
    last_chunk_max: u32,
    last_chunk_count: u32,
}

impl Default for Poller {
    fn default() -> Self {
        Poller::new(Knobs::default())
    }
}

impl Poller {
    pub fn new(knobs: Knobs) -> Poller {
        Poller {
            knobs,
            state: PollState::default(),
            reg_frac_count: 0,
            poll_armed: false,
            pollmore_armed: false,
            prev_tick: None,
            cycle_start: 0,
            table: Vec::new(),
            blocked: Vec::new(),
            cycle_blocked: false,
            chunk_drained: false,
            empty_cycles: 0,
            quiet_since: 0,
            repoll_at: None,
            repoll_backoff: MIN_REPOLL_NS,
            look_at: None,
            look_tick: None,
            dry_cycles: u32::MAX,
            excused_polls: 0,
            blocked_at_once: false,
            tick_work_ns: 0,
            last_cycle_ns: 0,
            cycle_ns_noted: 0,
            cycle_busy_handlers: 0,
            busy_handlers: 0,
            last_tick: 0,
            idle_wakeups_since_tick: 0,
            idle_parked: false,
            cycle_packets: 0,
            last_chunk_max: 0,
            last_chunk_count: 0,
        }
    }

    pub fn knobs(&self) -> &Knobs {
        &self.knobs
    }

    /// The scheduler's state and counters (the read-only `kern.polling.*` values).
    pub fn state(&self) -> &PollState {
        &self.state
    }

    /// Number of registered handlers (`kern.polling.handlers`).
    pub fn handlers(&self) -> usize {
        self.table.len()
    }

    /// The registration table, in call order.
    pub fn table(&self) -> &[HandlerId] {
        &self.table
    }

    pub fn is_registered(&self, id: HandlerId) -> bool {
        self.table.contains(&id)
    }

    /// The netisr's work from the scheduler: the armed chunk first, else the armed
    /// pollmore (the dataplane runs its input queue between the two: docs/algorithm.md §2).
    pub fn netisr_due(&self) -> Option<Netisr> {
        if self.poll_armed {
            Some(Netisr::Chunk)
        } else if self.pollmore_armed {
            Some(Netisr::Pollmore)
        } else {
            None
        }
    }

    /// Whether a chunk is armed (the netisr runs it before the protocol queues).
    pub fn poll_armed(&self) -> bool {
        self.poll_armed
    }

    /// Writes a knob with FreeBSD's validation and side effects; a rejected write
    /// changes nothing.
    pub fn set_knob(&mut self, name: &str, value: &str) -> Result<(), crate::knobs::KnobError> {
        let before = self.knobs.clone();
        self.knobs.set(name, value)?;
        // Side effects of the sysctl handlers in kern_poll.c.
        if self.knobs.burst_max != before.burst_max {
            self.state.burst = self.state.burst.min(self.knobs.burst_max);
        }
        if self.knobs.reg_frac != before.reg_frac && self.reg_frac_count >= self.knobs.reg_frac {
            self.reg_frac_count = 0;
        }
        // A new clock or controller starts at the knob's own period; the time controller
        // slows it again if its ticks still cost more than the share.
        if self.knobs.hz != before.hz || self.knobs.controller != before.controller {
            self.state.stride = 1;
        }
        // Writing idle_poll wakes (or puts to sleep) the idle poller.
        self.update_idle_sleep();
        // Any write ends a quiet spell: the new settings get a tick to act.
        self.leave_quiet();
        Ok(())
    }

    /// Registers an interface for polling (`ether_poll_register`).
    pub fn register(&mut self, id: HandlerId) -> Result<(), RegError> {
        if self.table.len() >= POLL_LIST_LEN {
            return Err(RegError::Enomem);
        }
        if self.table.contains(&id) {
            return Err(RegError::Eexist);
        }
        self.table.push(id);
        self.blocked.push(false);
        self.update_idle_sleep();
        self.leave_quiet();
        Ok(())
    }

    /// Deregisters an interface (`ether_poll_deregister`): the last entry moves into the hole.
    pub fn deregister(&mut self, id: HandlerId) -> Result<(), RegError> {
        let pos = self
            .table
            .iter()
            .position(|&h| h == id)
            .ok_or(RegError::Enoent)?;
        self.table.swap_remove(pos);
        self.blocked.swap_remove(pos);
        if self.table.is_empty() {
            self.reset_cycle();
        }
        self.update_idle_sleep();
        Ok(())
    }

    /// The last handler left: nothing is owed to nobody. The cycle under way, the ticks
    /// owed and the armed chunk and pollmore are dropped and the phase is 0, as DragonFly
    /// resets its poll context when its last interface leaves. (FreeBSD 14 returns early
    /// from pollmore instead and leaves phase 5 and the owed tick behind; after the next
    /// registration its hardclock then schedules nothing until the stall detector fires,
    /// about 100 ticks later, with the device's interrupt masked.) The burst, the knobs and
    /// the counters stay.
    fn reset_cycle(&mut self) {
        self.poll_armed = false;
        self.pollmore_armed = false;
        self.state.phase = 0;
        self.state.pending_polls = 0;
        self.state.residual_burst = 0;
        self.excused_polls = 0;
        self.repoll_at = None;
        self.look_at = None;
        self.look_tick = None;
        self.dry_cycles = u32::MAX;
        self.chunk_drained = false;
        self.cycle_blocked = false;
    }

    /// The clock-tick hook (`hardclock_device_poll`), for `expirations` ticks that arrived
    /// together at `now` (ns). Returns whether a cycle was scheduled.
    pub fn hardclock(&mut self, now: u64, expirations: u32) -> bool {
        if self.table.is_empty() || expirations == 0 {
            return false;
        }
        // Short-tick detector: a tick less than half a period after the reference.
        match self.prev_tick {
            Some(prev)
                if (now.saturating_sub(prev) / 1000) * (self.knobs.hz as u64)
                    < 500_000 * u64::from(self.state.stride) =>
            {
                self.state.short_ticks += 1;
            }
            _ => self.prev_tick = Some(now),
        }
        if self.state.pending_polls > STALL_LIMIT {
            self.state.stalled += 1;
            self.state.pending_polls = 0;
            self.excused_polls = 0;
            self.state.phase = 0;
        }
        self.tick_work_ns = 0;
        self.last_tick = now;
        // A new tick: the idle poller may be woken by interrupts again.
        self.idle_wakeups_since_tick = 0;
        self.idle_parked = false;
        self.schedule_cycle(expirations)
    }

    /// Of the ticks owed, `waited` were read late because the poll thread waited for the
    /// CPU (a user-space thread can be kept off it; FreeBSD's clock interrupt cannot), not
    /// because a cycle overran them: the cycles they owe run at once, as every owed cycle
    /// does, but without the overrun back-off. At most all owed ticks but the one being
    /// paid are excused. Call right after [`Poller::hardclock`].
    pub fn excuse_waited(&mut self, waited: u32) {
        if self.table.is_empty() {
            return; // hardclock did nothing
        }
        let owed_after_this = self.state.pending_polls.saturating_sub(1);
        self.excused_polls = self
            .excused_polls
            .saturating_add(waited)
            .min(owed_after_this);
    }

    /// Arms a poll cycle for `expirations` owed polls (the part of `hardclock` that is not
    /// the clock's own bookkeeping). Returns whether a cycle was scheduled.
    fn schedule_cycle(&mut self, expirations: u32) -> bool {
        let scheduled = self.state.phase <= 2;
        if scheduled {
            if self.state.phase != 0 {
                self.state.suspect += 1;
            }
            self.state.phase = 1;
            self.poll_armed = true;
            self.pollmore_armed = true;
            self.state.phase = 2;
        }
        for _ in 0..expirations {
            if self.state.pending_polls > 0 {
                self.state.lost_polls += 1;
            }
            self.state.pending_polls += 1;
        }
        scheduled
    }

    /// One chunk of a poll cycle (`netisr_poll`): calls every handler once. Returns
    /// `false` if no chunk was armed.
    pub fn netisr_poll(&mut self, now: u64, handlers: &mut dyn PollHandlers) -> bool {
        if !self.poll_armed {
            return false;
        }
        self.poll_armed = false;
        self.state.phase = 3;
        let mut cmd = PollCmd::PollOnly;
        if self.state.residual_burst == 0 {
            // First chunk of a cycle.
            self.cycle_start = now;
            self.cycle_packets = 0;
            self.cycle_busy_handlers = 0;
            self.cycle_blocked = false;
            self.blocked_at_once = false;
            self.blocked.iter_mut().for_each(|b| *b = false);
            self.reg_frac_count += 1;
            if self.reg_frac_count >= self.knobs.reg_frac {
                cmd = PollCmd::CheckStatus;
                self.reg_frac_count = 0;
            }
            self.state.residual_burst = match self.knobs.controller {
                Controller::Classic => self.state.burst,
                // The time controller spends a per-interface ceiling of burst_max and
                // stops early when the time budget runs out.
                Controller::Time => self.knobs.burst_max,
            };
        }
        let count = match self.knobs.controller {
            Controller::Classic => self.state.residual_burst.min(self.knobs.each_burst),
            Controller::Time => self.time_chunk(now),
        };
        self.state.residual_burst -= count;
        let first_chunk = self.cycle_packets == 0 && !self.cycle_blocked;
        let mut max_done = 0;
        let mut busy = 0;
        let mut drained = true;
        for i in 0..self.table.len() {
            // A handler whose output filled has had its share of this cycle: what it
            // would receive now could only be dropped after paying to receive it.
            if self.blocked[i] {
                continue;
            }
            let id = self.table[i];
            let done = handlers.poll(id, cmd, count);
            max_done = max_done.max(done);
            busy += u32::from(done > 0);
            self.cycle_packets += done as u64;
            if handlers.take_output_full(id) {
                self.blocked[i] = true;
                self.cycle_blocked = true;
                self.blocked_at_once |= first_chunk;
            } else if done >= count {
                drained = false;
            }
        }
        self.chunk_drained = drained;
        self.cycle_busy_handlers = self.cycle_busy_handlers.max(busy);
        self.last_chunk_max = max_done;
        self.last_chunk_count = count;
        self.state.chunks += 1;
        self.state.phase = 4;
        true
    }

    /// Chunk size under the time controller: what fits in the time left of the tick's
    /// budget at the current cost per packet, at most `each_burst`.
    fn time_chunk(&mut self, now: u64) -> u32 {
        let each = self.state.residual_burst.min(self.knobs.each_burst);
        if self.state.ns_per_packet == 0 {
            return each;
        }
        let left = self.time_budget_end().saturating_sub(now);
        let handlers = self.busy_handlers.max(1) as u64;
        let fits = (left / (self.state.ns_per_packet * handlers)).min(u64::from(each)) as u32;
        // The average cost per packet carries the cycle's fixed costs (the driver calls of
        // the polls that find little, the kick), which at a few packets a cycle overstate
        // what one more costs and would hold the chunk where it is: a cycle that ended
        // within its budget lets the next one's first chunk take a packet more than it
        // did, as FreeBSD's burst grows.
        let first = self.cycle_packets == 0 && !self.cycle_blocked;
        let grown = if first && self.last_cycle_ns < self.cycle_share_ns() {
            self.state.burst.saturating_add(1).min(each)
        } else {
            1
        };
        fits.max(grown)
    }

    fn time_budget_end(&self) -> u64 {
        self.cycle_start + self.cycle_share_ns()
    }

    /// The time controller's budget for a cycle: the devices' share of a tick less what the
    /// poll thread took per tick beyond its cycles (its own cost per tick, work outside the
    /// cycles, the cycles' overrun), for that is CPU the devices' work takes from the
    /// user's share too; a tenth of the share at least, so that polling goes on however
    /// dear its ticks are.
    fn cycle_share_ns(&self) -> u64 {
        let share = self.share_ns();
        share
            .saturating_sub(self.state.tick_overhead_ns)
            .max(share / 10)
    }

    /// The poll thread used `cpu_ns` of CPU over the last `ticks` ticks (busy and idle
    /// polling left out), as the executor measures it on the thread's own CPU clock at its
    /// tick reads: what it took per tick beyond the cycles' time, up to the cycle budget in
    /// force, is folded into the moving average the time controller leaves out of the next
    /// budgets ([`PollState::tick_overhead_ns`]). That is the thread's wakeup, the timer
    /// and epoll calls, work outside the cycles (interrupt-mode pieces left out: the
    /// dataplane subtracts them), the interrupts the kernel charges the
    /// thread for while it runs, and the cycles' overrun of their budget. So the thread's
    /// CPU, not the cycles' time on the monotonic clock, is what holds to the share; and a
    /// cycle that ends early, on an empty ring, does not make the overhead look smaller.
    /// In a guest under software emulation a tick's wakeup costs hundreds of microseconds,
    /// and each cycle's transmit raises completion interrupts the kernel charges to the
    /// thread: the budget measured on the cycles alone left polld 60 % of the vCPU at
    /// user_frac 50.
    ///
    /// `all_polling`: every interface is in polling mode, so no interrupt-mode work is
    /// among it. Interrupt work (an interface in interrupt, adaptive or `auto` mode) costs
    /// with the time between ticks, not with their number: a slower tick would only hand
    /// it more time a tick, so the tick stays at `hz` ([`PollState::stride`] 1) unless
    /// every interface polls.
    pub fn note_tick_cpu(&mut self, cpu_ns: u64, ticks: u64, all_polling: bool) {
        let cycles =
            self.state.cycle_ns - std::mem::replace(&mut self.cycle_ns_noted, self.state.cycle_ns);
        if ticks == 0 {
            return;
        }
        let metered = (cycles / ticks).min(self.cycle_share_ns());
        let beyond = (cpu_ns / ticks).saturating_sub(metered);
        let avg = &mut self.state.tick_overhead_ns;
        *avg = (*avg * 7 + beyond) / 8;
        self.state.stride = match self.knobs.controller {
            Controller::Time if all_polling => self.next_stride(),
            _ => 1,
        };
    }

    /// Time controller: the stride ([`PollState::stride`]) for the thread's cost per tick
    /// as it now stands. A tick whose own cost takes more than nine tenths of the devices'
    /// share leaves the cycles less than the tenth [`Poller::cycle_share_ns`] keeps for
    /// them, so the thread would take more than the share: the tick slows by one period at
    /// a time until its cost fits, and speeds up by one once the cost would fit one period
    /// shorter with a quarter to spare; at most [`MAX_STRIDE`] periods. The classic
    /// controller ticks at `hz` whatever a tick costs, as FreeBSD's hardclock.
    fn next_stride(&self) -> u32 {
        let stride = self.state.stride.max(1);
        let period = 1_000_000_000 / self.knobs.hz as u64;
        let share_at = |s: u32| period * u64::from(s) * (100 - self.knobs.user_frac) as u64 / 100;
        let cost = self.state.tick_overhead_ns * 10;
        if cost > share_at(stride) * 9 && stride < MAX_STRIDE {
            stride + 1
        } else if stride > 1 && cost * 4 <= share_at(stride - 1) * 9 * 3 {
            stride - 1
        } else {
            stride.min(MAX_STRIDE)
        }
    }

    /// The period the tick clock should fire at, in ns: `stride` periods of
    /// `kern.polling.hz`. The executor re-arms its timer when it changes.
    pub fn tick_period_ns(&self) -> u64 {
        self.tick_ns()
    }

    /// One tick, in ns: `stride` periods of `kern.polling.hz`.
    fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.knobs.hz as u64 * u64::from(self.state.stride)
    }

    /// The devices' share of a tick, `100 - user_frac` percent of it, in ns.
    fn share_ns(&self) -> u64 {
        self.tick_ns() * (100 - self.knobs.user_frac) as u64 / 100
    }

    /// Whether the armed `netisr_pollmore`, run at `now`, closes the cycle rather than
    /// schedule another chunk.
    pub fn pollmore_closes(&self, now: u64) -> bool {
        self.pollmore_armed && !self.wants_another_chunk(now)
    }

    /// Budget is left, the last chunk did not drain the rings, and the controller wants
    /// another chunk at `now`.
    fn wants_another_chunk(&self, now: u64) -> bool {
        self.state.residual_burst > 0 && !self.chunk_drained && self.more_chunks_wanted(now)
    }

    /// The end of a chunk (`netisr_pollmore`): schedules another chunk, or closes the
    /// cycle and adapts `burst`. Returns `false` if no pollmore was armed.
    pub fn netisr_pollmore(&mut self, now: u64) -> bool {
        if !self.pollmore_armed {
            return false;
        }
        self.pollmore_armed = false;
        self.state.phase = 5;
        if self.wants_another_chunk(now) {
            self.poll_armed = true;
            self.pollmore_armed = true;
            return true;
        }
        self.state.residual_burst = 0;
        self.last_cycle_ns = now.saturating_sub(self.cycle_start);
        self.tick_work_ns += self.last_cycle_ns;
        self.state.cycle_ns += self.last_cycle_ns;
        let elapsed_us = self.last_cycle_ns / 1000;
        self.state.kern_load =
            (elapsed_us * self.knobs.hz as u64 / 10_000 / u64::from(self.state.stride)) as u32;
        match self.knobs.controller {
            Controller::Classic => {
                if self.state.kern_load > 100 - self.knobs.user_frac {
                    self.state.burst = self.state.burst.saturating_sub(1).max(1);
                } else if self.state.burst < self.knobs.burst_max && !self.cycle_blocked {
                    // A full output, not the CPU, limited this cycle: a bigger budget
                    // would only buy frames to drop.
                    self.state.burst += 1;
                }
            }
            Controller::Time => self.time_account(now),
        }
        self.state.cycles += 1;
        self.dry_cycles = match self.cycle_packets {
            0 => self.dry_cycles.saturating_add(1),
            _ => 0,
        };
        self.note_quiet(now);
        if self.chunk_drained && !self.cycle_blocked {
            // The rings are empty now: the idle poller rests on the interrupts (it was
            // going to find them empty) rather than spending two context switches on that.
            self.idle_rest();
        } else if self.cycle_packets > 0 {
            // Frames are left: the idle poller may take more once the CPU idles.
            self.update_idle_sleep();
        }
        self.state.pending_polls = self.state.pending_polls.saturating_sub(1);
        if self.state.pending_polls == 0 {
            self.state.phase = 0;
            if self.cycle_blocked {
                self.repoll_at = Some(now + self.repoll_gap(now));
                self.state.repolls += 1;
            } else if self.chunk_drained && self.dry_cycles <= self.knobs.looks {
                // The rings ran empty before the budget, and the devices moved frames
                // within the last tick: light traffic.
                self.arm_look(now);
            }
        } else {
            // Ticks are still owed: start again at once. If the cycle overran them, back
            // off; ticks the thread read late after waiting for the CPU are no overrun.
            if self.excused_polls > 0 {
                self.excused_polls -= 1;
                self.state.waited_polls += 1;
            } else {
                self.state.burst = (self.state.burst - self.state.burst / 8).max(1);
            }
            self.poll_armed = true;
            self.pollmore_armed = true;
            self.state.phase = 6;
        }
        true
    }

    /// Counts empty cycles and enters or leaves the quiet state at the close of a cycle.
    fn note_quiet(&mut self, now: u64) {
        if self.cycle_packets > 0 || self.cycle_blocked {
            self.leave_quiet();
            return;
        }
        self.empty_cycles = self.empty_cycles.saturating_add(1);
        let limit = self.knobs.quiet_cycles;
        if limit > 0 && self.empty_cycles >= limit && !self.state.quiet {
            self.state.quiet = true;
            self.quiet_since = now;
        }
    }

    /// After a cycle cut short by a full output, the wait before polling again: long
    /// enough that the cycle's time stays within `100 - user_frac` percent of the time
    /// from its start to the next one, so the user's share holds however often it
    /// repeats. The wait is when the output drains (on veth, its NAPI thread runs).
    fn repoll_gap(&mut self, now: u64) -> u64 {
        let tick_ns = self.tick_ns();
        self.repoll_backoff = if self.blocked_at_once {
            (self.repoll_backoff * 2).min(tick_ns)
        } else {
            (self.repoll_backoff / 2).max(MIN_REPOLL_NS)
        };
        let elapsed = now.saturating_sub(self.cycle_start);
        let user = self.knobs.user_frac as u64;
        (elapsed * user / (100 - user)).max(self.repoll_backoff)
    }

    /// After a cycle cut short by a full output, that output's transmit-ready line rose at
    /// `now`: a cycle starts now if one more like the last still fits in this tick's
    /// `100 - user_frac` share beside the cycles already run since the tick, else the
    /// next tick starts it. Either way no timer is needed (a timer wakeup is what the
    /// repoll costs). Returns whether a cycle was scheduled.
    pub fn repoll_on_line(&mut self, now: u64) -> bool {
        if self.table.is_empty() || !self.one_more_fits(now) {
            return false;
        }
        self.schedule_cycle(1)
    }

    /// Whether one more cycle like the last, started at `at`, fits in this tick's
    /// `100 - user_frac` share beside the cycles already run since the tick, and ends
    /// before the next tick (which owes a cycle of its own).
    fn one_more_fits(&self, at: u64) -> bool {
        // The share less the thread's own cost per tick, of which the wakeups of looks
        // and repolls are part.
        let fits_share = self.tick_work_ns + self.last_cycle_ns <= self.cycle_share_ns();
        let ends_before_tick = at + self.last_cycle_ns <= self.last_tick + self.tick_ns();
        fits_share && ends_before_tick
    }

    /// After a cycle at light traffic that left every ring empty at `now`: arms a look at
    /// the next of the `looks` points evenly spaced between the last tick and the next,
    /// if one more cycle like it fits there ([`Poller::one_more_fits`]).
    fn arm_look(&mut self, now: u64) {
        let looks = u64::from(self.knobs.looks);
        let gap = self.tick_ns() / (looks + 1);
        let k = now.saturating_sub(self.last_tick) / gap + 1;
        let at = self.last_tick + k * gap;
        if k <= looks && self.one_more_fits(at) {
            self.look_at = Some(at);
            self.look_tick = Some(self.last_tick);
        }
    }

    /// When to look at the devices before the next tick, once (a cycle emptied the rings
    /// while traffic is light): the executor arms a timer for it and
    /// calls [`Poller::look`] when it fires. Unlike a repoll, the tick stays where it is.
    pub fn take_look(&mut self) -> Option<u64> {
        self.look_at.take()
    }

    /// The look's timer fired at `now`: a cycle starts, owing nothing to the clock, if the
    /// look still belongs to this tick, no cycle is under way, and one more cycle like the
    /// last still fits ([`Poller::one_more_fits`]). Returns whether a cycle was scheduled.
    pub fn look(&mut self, now: u64) -> bool {
        let current = self.look_tick.take() == Some(self.last_tick);
        if !current || self.table.is_empty() || self.state.phase != 0 || !self.one_more_fits(now) {
            return false;
        }
        self.state.look_cycles += 1;
        self.schedule_cycle(1)
    }

    /// When to poll again before the next tick (a cycle met a full output), once: the
    /// executor moves its next tick there if that is earlier. That tick comes early by
    /// polld's own schedule, not the clock's fault: the short-tick detector takes it as its
    /// new reference without counting it.
    pub fn take_repoll(&mut self) -> Option<u64> {
        let at = self.repoll_at.take();
        if at.is_some() {
            self.prev_tick = None;
        }
        at
    }

    fn leave_quiet(&mut self) {
        self.empty_cycles = 0;
        self.state.quiet = false;
    }

    /// A registered device signalled work while polling was quiet: polling resumes, and
    /// the wakeup counts as a tick. Returns whether a cycle was scheduled.
    pub fn wake(&mut self, now: u64) -> bool {
        if !self.state.quiet {
            return false;
        }
        self.leave_quiet();
        self.state.quiet_wakeups += 1;
        if self.knobs.controller == Controller::Classic {
            // FreeBSD ticks on through an idle spell, and each of those empty cycles grows
            // the burst by one: the flood that ends the spell meets the burst FreeBSD's
            // would have, not the one the spell froze (from which +1 a cycle took the veth
            // flood ~100 ms to reach its rate, dropping the ring's overflow meanwhile).
            let skipped = now.saturating_sub(self.quiet_since) / self.tick_ns();
            let grown = u64::from(self.state.burst).saturating_add(skipped);
            self.state.burst = grown.min(u64::from(self.knobs.burst_max)) as u32;
        }
        self.hardclock(now, 1)
    }

    /// Classic: always finish the budget. Time: go on while the time left is worth at
    /// least two packets and the busiest handler filled more than half of the last chunk.
    fn more_chunks_wanted(&self, now: u64) -> bool {
        match self.knobs.controller {
            Controller::Classic => true,
            Controller::Time => {
                let left = self.time_budget_end().saturating_sub(now);
                let per_round = self.state.ns_per_packet.max(1) * self.table.len() as u64;
                left >= 2 * per_round && 2 * self.last_chunk_max > self.last_chunk_count
            }
        }
    }

    /// Time controller accounting: a moving average (weight 1/2) of the cost per packet;
    /// `burst` reports the packets per interface the cycle polled.
    fn time_account(&mut self, now: u64) {
        if self.cycle_busy_handlers > 0 {
            self.busy_handlers = self.cycle_busy_handlers;
        }
        let handlers = u64::from(self.busy_handlers.max(1));
        let elapsed = now.saturating_sub(self.cycle_start);
        if let Some(sample) = elapsed.checked_div(self.cycle_packets) {
            self.state.ns_per_packet = if self.state.ns_per_packet == 0 {
                sample
            } else {
                (self.state.ns_per_packet + sample) / 2
            };
        }
        let per_if = (self.cycle_packets / handlers) as u32;
        self.state.burst = per_if.clamp(1, self.knobs.burst_max);
    }

    /// One pass of the idle poller (`poll_idle`): every handler gets `each_burst`, nothing
    /// is accounted. Returns the frames processed. A pass that found every ring empty (and
    /// no output full) puts the idle poller to sleep (`idlepoll_sleeping`) until a
    /// device signals a frame ([`Poller::idle_wake`]) or a poll cycle moves one: FreeBSD's
    /// idle loop polls empty rings for free, a Linux thread pays two context switches a
    /// pass, so it sleeps on the devices' interrupts instead.
    pub fn idle_poll(&mut self, handlers: &mut dyn PollHandlers) -> u32 {
        self.update_idle_sleep();
        if self.state.idlepoll_sleeping {
            return 0;
        }
        let each = self.knobs.each_burst;
        let mut done = 0;
        let mut drained = true;
        for i in 0..self.table.len() {
            let id = self.table[i];
            let got = handlers.poll(id, PollCmd::PollOnly, each);
            done += got;
            if handlers.take_output_full(id) || got >= each {
                drained = false;
            }
        }
        if drained {
            self.idle_rest();
        }
        done
    }

    /// Every ring was left empty: the idle poller sleeps on the devices' interrupts, or,
    /// when they woke it `idle_wakeups` times since the last tick, until the next tick.
    fn idle_rest(&mut self) {
        if !self.idle_poll_active() {
            return;
        }
        let limit = self.knobs.idle_wakeups;
        self.state.idlepoll_sleeping = true;
        self.idle_parked = limit != 0 && self.idle_wakeups_since_tick >= limit;
    }

    /// Whether idle polling is on (`kern.polling.idle_poll` and a registered handler).
    fn idle_poll_active(&self) -> bool {
        self.knobs.idle_poll != 0 && !self.table.is_empty()
    }

    /// Whether the idle poller wants a pass once the CPU idles: it is on and not asleep
    /// on empty rings.
    pub fn idle_poll_wanted(&self) -> bool {
        self.idle_poll_active() && !self.state.idlepoll_sleeping
    }

    /// Whether the idle poller sleeps on empty rings and the devices' interrupts wake it
    /// (not when it rests until the next tick).
    pub fn idle_poll_resting(&self) -> bool {
        self.idle_poll_active() && self.state.idlepoll_sleeping && !self.idle_parked
    }

    /// A registered device signalled a frame while the idle poller rested on empty rings:
    /// it wakes, and its next pass may run once the CPU idles.
    pub fn idle_wake(&mut self) {
        if self.idle_poll_resting() {
            self.idle_wakeups_since_tick = self.idle_wakeups_since_tick.saturating_add(1);
            self.state.idlepoll_wakeups += 1;
        }
        self.update_idle_sleep();
    }

    fn update_idle_sleep(&mut self) {
        self.state.idlepoll_sleeping = !self.idle_poll_active();
        self.idle_parked = false;
    }
}

/// One sysctl-like entry: full name, current value, description, writability.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SysctlEntry {
    pub name: String,
    pub value: String,
    pub descr: String,
    pub writable: bool,
}

sysctl_oids! {
    /// The scheduler's entries that are not fields.
    impl Poller: OIDS {
        /// `kern.polling.handlers`: not a variable but the table's length.
        HANDLERS = "handlers": Gauge "Number of registered poll handlers",
            |p| Value::from(p.table.len());
    }
}

impl Poller {
    /// Every `kern.polling.*` entry, typed, under `node` (`kern.polling`, or a per-CPU
    /// poller's node): the knobs, then the state, then the handler count.
    pub fn readings(&self, node: &str) -> Vec<Reading> {
        read(node, &self.knobs, Knobs::OIDS)
            .chain(read(node, &self.knobs, &Knobs::FIXED_OIDS))
            .chain(read(node, &self.state, PollState::OIDS))
            .chain(read(node, self, &Poller::OIDS))
            .collect()
    }

    /// Whether `name` is a declared `kern.polling.*` entry (knob or not).
    pub fn is_declared(name: &str) -> bool {
        let leaf = name.strip_prefix(NODE).and_then(|l| l.strip_prefix('.'));
        leaf.is_some_and(|leaf| {
            Poller::default()
                .readings(NODE)
                .iter()
                .any(|r| r.leaf == leaf)
        })
    }

    /// Reads one `kern.polling.*` value by its short name.
    pub fn get(&self, short: &str) -> Option<String> {
        self.readings(NODE)
            .into_iter()
            .find(|r| r.leaf == short)
            .map(|r| r.value.to_string())
    }

    /// Every `kern.polling.*` entry, as `polld ctl -a` lists it.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        self.readings(NODE)
            .into_iter()
            .map(SysctlEntry::from)
            .collect()
    }
}
