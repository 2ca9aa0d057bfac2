//! FreeBSD's poll cycle: registration, the tick (`hardclock_device_poll`), the chunks
//! (`netisr_poll`) and the close of a cycle (`netisr_pollmore`) with the classic burst
//! step and the overrun back-off (docs/algorithm.md §2-§4, §6).
//!
//! A tick owes the devices one cycle and arms one unless one is running (phase <= 2). A
//! cycle spends a budget of `burst` packets per interface in chunks of `each_burst`;
//! between chunks the dataplane runs its input queue. Closing a cycle moves `burst` by one
//! against `100 - user_frac` (classic controller; [`super::time`] for the other), and a
//! cycle that overran owed ticks backs off by an eighth and starts again at once.
//!
//! Departures from FreeBSD, each about work the budget cannot buy: a handler whose output
//! filled ([`super::PollHandlers::take_output_full`]) is skipped for the rest of the cycle
//! and the burst does not grow after it; a chunk after which every polled ring ran empty
//! ends the cycle; the last handler deregistered resets the cycle, as DragonFly does.

use crate::knobs::Controller;

use super::{HandlerId, PollCmd, PollHandlers, Poller, RegError, POLL_LIST_LEN};

/// `pending_polls` above this is taken as a stall and reset (FreeBSD's magic 100).
const STALL_LIMIT: u32 = 100;

impl Poller {
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
    pub(super) fn reset_cycle(&mut self) {
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
    pub(super) fn schedule_cycle(&mut self, expirations: u32) -> bool {
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

    /// Whether the armed `netisr_pollmore`, run at `now`, closes the cycle rather than
    /// schedule another chunk.
    pub fn pollmore_closes(&self, now: u64) -> bool {
        self.pollmore_armed && !self.wants_another_chunk(now)
    }

    /// Budget is left, the last chunk did not drain the rings, and the controller wants
    /// another chunk at `now`.
    pub(super) fn wants_another_chunk(&self, now: u64) -> bool {
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
}
