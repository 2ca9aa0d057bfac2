//! The scheduler's state and counters: the read-only `kern.polling.*` entries, each
//! declared once with its default.

use crate::sysctl_struct;

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
        /// tick slows instead ([`super::Poller::tick_period_ns`]).
        stride: u32 = 1, STRIDE: Gauge
            "Time controller: kern.polling.hz periods per tick, above 1 while a tick's own cost would not fit the devices' share (polld)";
        /// Time spent in poll cycles, from the first chunk to the close, as the controller
        /// measures them: beside the thread's CPU time (`polld.thread_cpu_ns`), what the
        /// thread spent outside them.
        cycle_ns: u64 = 0, CYCLE_NS: Counter
            "Time spent in poll cycles, first chunk to close, ns (polld)";
        /// Polling sleeps on the devices' interrupts: `quiet_cycles` cycles in a row found
        /// every ring empty. The executor stops the tick until [`super::Poller::wake`].
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
