//! The poll thread's wait: what it arms before sleeping in `epoll_wait`, and what each
//! event it wakes to reports to the dataplane (ticks with their lateness and CPU, looks,
//! status rounds, a stop signal, control requests, an idle CPU, the devices' lines).

use std::io;

use super::{
    PollThread, RealDataplane, TOKEN_CONTROL, TOKEN_IDLE, TOKEN_IF, TOKEN_LOOK, TOKEN_SIGNAL,
    TOKEN_STATUS, TOKEN_TABLES, TOKEN_TICK, TOKEN_TX,
};
use crate::sys::now_ns;

impl PollThread {
    /// Arms what the dataplane wants waited on, waits (just looks while work is due) and
    /// reports what fired. Returns the stop signal, if one came.
    pub(super) fn wait_for_events(&mut self, dp: &mut RealDataplane) -> io::Result<Option<i32>> {
        self.ask_tables(dp);
        self.sync_tick(dp)?;
        if dp.poller().idle_poll_wanted() {
            self.idle.ask();
        }
        self.sync_policy(dp)?;
        self.sync_busy_poll(dp, false);
        let busy = dp.next_due().is_some();
        self.choose_line_reading(busy);
        self.sync_lines(dp);
        let waiting = !busy && self.waits_for_wakeup_only_line(dp);
        let timeout = self.wakeup_only.timeout(busy, waiting);
        let mut ready = std::mem::take(&mut self.ready);
        self.epoll.wait(timeout, &mut ready)?;
        let events_start = now_ns();
        if ready.is_empty() && self.wakeup_only.watchdog_expired() {
            self.raise_wakeup_only_lines(dp);
        }
        let mut signal = None;
        for &token in &ready {
            match token {
                TOKEN_TICK => self.read_tick(dp, events_start),
                TOKEN_LOOK => {
                    if self.look.expirations() > 0 {
                        dp.raise_look();
                    }
                }
                TOKEN_STATUS => {
                    self.status.expirations();
                    self.status_round(dp);
                }
                TOKEN_SIGNAL => signal = signal.or(self.signals.take()),
                TOKEN_CONTROL => self.answer_control(dp),
                TOKEN_TABLES => self.follow_tables(dp)?,
                TOKEN_IDLE => {
                    if self.idle.take() {
                        dp.raise_idle();
                    }
                }
                t if t >= TOKEN_TX => self.tx_ready_event(dp, (t - TOKEN_TX) as usize),
                t => dp.interrupt_line((t - TOKEN_IF) as usize, true),
            }
            if signal.is_some() {
                break;
            }
        }
        self.ready = ready;
        if signal.is_some() {
            return Ok(signal);
        }
        if self.lines_read {
            self.read_lines(dp);
        }
        // Timer reads, status checks, control requests: none of it is interrupt work.
        dp.ran_outside(now_ns().saturating_sub(events_start));
        Ok(None)
    }

    /// The next hops the router found no neighbour for since the last wait: the kernel is
    /// asked to resolve them.
    fn ask_tables(&mut self, dp: &mut RealDataplane) {
        if let (Some(follower), polld_packet::Stage::Router(router)) =
            (&mut self.tables, dp.stage_mut())
        {
            follower.ask(router);
        }
    }

    /// The kernel changed its tables: the router follows.
    fn follow_tables(&mut self, dp: &mut RealDataplane) -> io::Result<()> {
        if let (Some(follower), polld_packet::Stage::Router(router)) =
            (&mut self.tables, dp.stage_mut())
        {
            follower.follow(router)?;
        }
        Ok(())
    }

    /// The tick timer fired: its expirations are ticks, timed against their expiry (`now`,
    /// the wakeup's one clock read), with the thread's CPU since the last tick read.
    fn read_tick(&mut self, dp: &mut RealDataplane, now: u64) {
        let (n, late_ns) = self.tick.expirations_late(now);
        if n > 0 {
            self.lateness.record(late_ns);
        }
        let cpu = polld_dev::clock::thread_cpu_ns();
        let waited = self.waited.waited(n, cpu, self.tick_ns);
        let spin = self.accounts.busy_poll_ns + self.accounts.idle_poll_ns;
        let poll_cpu = self
            .daemon
            .pinned_cpu
            .unwrap_or_else(rustix::thread::sched_getcpu);
        // A driver's softirq work (what its NAPI leaves over, its transmit
        // completions) is the devices' work polld's share bounds; a TAP has none.
        let drivers = self.info.iter().any(|i| i.rx_owner.busy_poll().is_some());
        let softirq = self.softirq.used_ns(poll_cpu, drivers);
        if let Some(ns) = self.tick_cpu.since_last_read(n, cpu + softirq, spin) {
            dp.note_tick_cpu(ns, n);
        }
        let clamp = |v: u64| v.min(u32::MAX as u64) as u32;
        dp.raise_late_ticks(clamp(n), clamp(waited));
    }

    /// Arms the tick timer at the poller's period (`kern.polling.hz`, slowed by
    /// `kern.polling.stride`) while some interface is registered and polling is not quiet.
    fn sync_tick(&mut self, dp: &RealDataplane) -> io::Result<()> {
        let poller = dp.poller();
        let want = if poller.handlers() > 0 && !poller.state().quiet {
            poller.tick_period_ns()
        } else {
            0
        };
        if want != self.tick_ns {
            self.tick.set_period(want)?;
            self.tick_ns = want;
        }
        Ok(())
    }
}
