//! The time controller (`kern.polling.controller=time`, the default; `knobs.rs` says
//! why): a time budget per tick with a moving average of the cost per packet, in place of
//! FreeBSD's ±1 packet step (the time-budget fork, docs/sources.md). Each chunk polls as
//! many packets as fit in the time left, so the devices' share is reached within a few
//! ticks at any rate.
//!
//! Contracts: a cycle's budget is the devices' share of a tick (`100 - user_frac`
//! percent) less the poll thread's own cost per tick, and never less than a tenth of the
//! share; the tick stretches to `stride` periods of `hz` (1 to `MAX_STRIDE`) only under
//! this controller and only while every interface polls.

use crate::knobs::Controller;

use super::Poller;

/// The most periods of `hz` the time controller's tick stretches to when a tick's own cost
/// does not fit the devices' share ([`super::PollState::stride`]). A queue polld
/// busy-polls returns to the kernel after ten periods without a poll
/// (`gro_flush_timeout`, devices/linux `busy_poll.rs`): at four, two slowed ticks still
/// come within it, so the kernel's softirq does not take the queue back between them.
pub(super) const MAX_STRIDE: u32 = 4;

impl Poller {
    /// Chunk size under the time controller: what fits in the time left of the tick's
    /// budget at the current cost per packet, at most `each_burst`.
    pub(super) fn time_chunk(&mut self, now: u64) -> u32 {
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

    pub(super) fn time_budget_end(&self) -> u64 {
        self.cycle_start + self.cycle_share_ns()
    }

    /// The time controller's budget for a cycle: the devices' share of a tick less what the
    /// poll thread took per tick beyond its cycles (its own cost per tick, work outside the
    /// cycles, the cycles' overrun), for that is CPU the devices' work takes from the
    /// user's share too; a tenth of the share at least, so that polling goes on however
    /// dear its ticks are.
    pub(super) fn cycle_share_ns(&self) -> u64 {
        let share = self.share_ns();
        share
            .saturating_sub(self.state.tick_overhead_ns)
            .max(share / 10)
    }

    /// The poll thread used `cpu_ns` of CPU over the last `ticks` ticks (busy and idle
    /// polling left out), as the executor measures it on the thread's own CPU clock at its
    /// tick reads: what it took per tick beyond the cycles' time, up to the cycle budget in
    /// force, is folded into the moving average the time controller leaves out of the next
    /// budgets ([`super::PollState::tick_overhead_ns`]). That is the thread's wakeup, the timer
    /// and epoll calls, work outside the cycles (interrupt-mode pieces left out: the
    /// dataplane subtracts them), the interrupts the kernel charges the
    /// thread for while it runs, and the cycles' overrun of their budget. So the thread's
    /// CPU, not the cycles' time on the monotonic clock, is what holds to the share; and a
    /// cycle that ends early, on an empty ring, does not make the overhead look smaller.
    /// Where a tick's wakeup is dear (a guest under software emulation) or a cycle's
    /// transmit raises completion interrupts the kernel charges to the thread, a budget
    /// measured on the cycles alone would let the thread take more than the share
    /// (docs/algorithm.md §10).
    ///
    /// `all_polling`: every interface is in polling mode, so no interrupt-mode work is
    /// among it. Interrupt work (an interface in interrupt, adaptive or `auto` mode) costs
    /// with the time between ticks, not with their number: a slower tick would only hand
    /// it more time a tick, so the tick stays at `hz` ([`super::PollState::stride`] 1) unless
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

    /// Time controller: the stride ([`super::PollState::stride`]) for the thread's cost per tick
    /// as it now stands. A tick whose own cost takes more than nine tenths of the devices'
    /// share leaves the cycles less than the tenth [`Poller::cycle_share_ns`] keeps for
    /// them, so the thread would take more than the share: the tick slows by one period at
    /// a time until its cost fits, and speeds up by one once the cost would fit one period
    /// shorter with a quarter to spare; at most [`MAX_STRIDE`] periods. The classic
    /// controller ticks at `hz` whatever a tick costs, as FreeBSD's hardclock.
    pub(super) fn next_stride(&self) -> u32 {
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
    pub(super) fn tick_ns(&self) -> u64 {
        1_000_000_000 / self.knobs.hz as u64 * u64::from(self.state.stride)
    }

    /// The devices' share of a tick, `100 - user_frac` percent of it, in ns.
    pub(super) fn share_ns(&self) -> u64 {
        self.tick_ns() * (100 - self.knobs.user_frac) as u64 / 100
    }

    /// Classic: always finish the budget. Time: go on while the time left is worth at
    /// least two packets and the busiest handler filled more than half of the last chunk.
    pub(super) fn more_chunks_wanted(&self, now: u64) -> bool {
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
    pub(super) fn time_account(&mut self, now: u64) {
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
}
