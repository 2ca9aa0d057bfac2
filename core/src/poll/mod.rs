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
//! Every `reg_frac` cycles the first chunk carries [`PollCmd::CheckStatus`] instead of
//! [`PollCmd::PollOnly`] so that drivers read their expensive status registers rarely.
//!
//! The files, one concern each:
//! - [`cycle`]: FreeBSD's cycle, registration, and polld's departures in it;
//! - [`time`]: the time controller (`kern.polling.controller=time`) and the tick's stride;
//! - [`looks`]: polls between two ticks, at light traffic (looks) and after a full output
//!   (repolls);
//! - [`quiet`]: polling that sleeps on the devices' interrupts after empty cycles;
//! - [`idle`]: the idle poller;
//! - [`knob_write`]: one handler per knob write, with every consequence of the write;
//! - [`state`] and [`entries`]: the read-only entries and the listing.
//!
//! # Invariants
//!
//! Between any two calls (a knob write, a tick, a chunk, a pollmore, a look, a wakeup),
//! as `kern_poll.c` keeps `1 <= poll_each_burst <= poll_burst <= poll_burst_max`:
//!
//! - `MIN_POLL_BURST_MAX <= burst_max <= MAX_POLL_BURST_MAX`;
//! - `1 <= each_burst <= burst_max` (lowering `burst_max` below `each_burst` sets
//!   `each_burst` to `MIN_POLL_BURST_MAX`, FreeBSD's quirk);
//! - `1 <= burst <= burst_max` (polld's `burst` is not bounded below by `each_burst`: the
//!   time controller reports in it the packets a cycle polled);
//! - `MIN_HZ <= hz <= MAX_HZ`, `1 <= reg_frac <= hz`, `1 <= auto_window_ticks <= hz`,
//!   `user_frac <= 99`, `looks <= MAX_LOOKS`;
//! - `1 <= stride <= MAX_STRIDE`, and `stride == 1` under the classic controller;
//! - `phase <= 6`; `quiet` only with `quiet_cycles > 0`; the idle poller sleeps while
//!   `idle_poll` is 0 or no handler is registered.
//!
//! A refused knob write changes nothing. `core/tests/knob_properties.rs` checks the chain
//! after every write of random sequences of writes and cycles.
//!
//! # Linux mapping
//!
//! The clock is a timerfd in the poller thread; a timerfd read that reports `n` expirations
//! is passed as `hardclock(now, n)`: one arming, `n` owed ticks (the late ones count as lost
//! polls, not as short ticks). Time is a parameter in nanoseconds from any monotonic clock,
//! so the same code runs on virtual time in `polld-sim`.

pub mod cycle;
pub mod entries;
pub mod idle;
pub mod knob_write;
pub mod looks;
pub mod quiet;
pub mod state;
pub mod time;

pub use crate::knobs::NODE;
pub use crate::sysctl::SysctlEntry;
pub use knob_write::KnobHook;
pub use state::PollState;

use crate::knobs::Knobs;

use looks::MIN_REPOLL_NS;

/// Maximum number of registered handlers (FreeBSD's `POLL_LIST_LEN`).
pub const POLL_LIST_LEN: usize = 128;

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
    /// What the runtime asked to be told after each knob write ([`Poller::on_knob_write`]).
    knob_hook: Option<KnobHook>,
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
            knob_hook: None,
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
}
