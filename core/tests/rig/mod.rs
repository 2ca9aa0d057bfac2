//! The virtual CPU the kern_poll behaviour tests run the poller on: handlers that burn a
//! fixed cost per packet on an unbounded backlog and record every call, a clock that ticks
//! between steps (several ticks at once after an overrun, as a timerfd), and a CPU-bound
//! user task that takes whatever is left. Every rig starts from FreeBSD's defaults
//! ([`Knobs::freebsd`]), which the behaviours are stated for. Each test file uses the part
//! of it it needs.
#![allow(dead_code)]

use polld_core::{HandlerId, Knobs, Netisr, PollCmd, PollHandlers, Poller};

pub const MS: u64 = 1_000_000;
pub const US: u64 = 1_000;

#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub cycle: u64,
    pub id: HandlerId,
    pub cmd: PollCmd,
    pub count: u32,
}

/// Handlers with an unbounded backlog that each cost `cost_ns` per packet.
pub struct Backlog {
    pub now: u64,
    pub cost_ns: u64,
    pub calls: Vec<Call>,
    pub cycle: u64,
}

impl PollHandlers for Backlog {
    fn poll(&mut self, id: HandlerId, cmd: PollCmd, count: u32) -> u32 {
        self.calls.push(Call {
            cycle: self.cycle,
            id,
            cmd,
            count,
        });
        self.now += count as u64 * self.cost_ns;
        count
    }
}

/// A virtual CPU: clock ticks every `tick` ns, the netisr runs chunks and pollmores, and a
/// CPU-bound user task takes whatever is left. Ticks are delivered between steps, several at
/// once if a step overran (timerfd semantics).
pub struct Rig {
    pub p: Poller,
    pub h: Backlog,
    pub tick: u64,
    pub next_tick: u64,
    /// Time spent inside poll cycles (first chunk to last pollmore).
    pub kernel_ns: u64,
    /// Deferred-stage cost run between a chunk and its pollmore.
    pub stage_ns: u64,
}

impl Rig {
    pub fn new(handlers: usize, cost_ns: u64) -> Rig {
        Rig::with(Knobs::freebsd(), handlers, cost_ns)
    }

    pub fn with(knobs: Knobs, handlers: usize, cost_ns: u64) -> Rig {
        let mut p = Poller::new(knobs);
        for id in 0..handlers {
            p.register(id).unwrap();
        }
        Rig {
            tick: MS,
            next_tick: 0,
            p,
            h: Backlog {
                now: 0,
                cost_ns,
                calls: Vec::new(),
                cycle: 0,
            },
            kernel_ns: 0,
            stage_ns: 0,
        }
    }

    pub fn set(&mut self, name: &str, v: &str) {
        self.p.set_knob(name, v).unwrap();
        self.tick = 1_000_000_000 / self.p.knobs().hz as u64;
    }

    pub fn deliver_ticks(&mut self) {
        if self.h.now >= self.next_tick {
            let n = (self.h.now - self.next_tick) / self.tick + 1;
            self.p.hardclock(self.h.now, n as u32);
            self.next_tick += n * self.tick;
        }
    }

    /// One netisr pass in the order the scheduler arms it ([`Poller::netisr_due`], which the
    /// dataplane's decision follows): the chunk, the deferred stage (where the dataplane runs
    /// its input queue), the pollmore. Returns false if no chunk was armed.
    pub fn netisr(&mut self) -> bool {
        if self.p.netisr_due() != Some(Netisr::Chunk) {
            return false;
        }
        let start = self.h.now;
        self.h.cycle = self.p.state().cycles;
        self.p.netisr_poll(self.h.now, &mut self.h);
        self.h.now += self.stage_ns;
        self.deliver_ticks();
        assert_eq!(self.p.netisr_due(), Some(Netisr::Pollmore));
        self.p.netisr_pollmore(self.h.now);
        self.kernel_ns += self.h.now - start;
        true
    }

    /// Runs netisr passes until the current cycle completes; returns the passes run.
    pub fn cycle(&mut self) -> u32 {
        let cycles = self.p.state().cycles;
        let mut passes = 0;
        while self.p.state().cycles == cycles && self.netisr() {
            passes += 1;
        }
        passes
    }

    /// Runs for `ticks` ticks; the user task takes every idle moment.
    pub fn run_ticks(&mut self, ticks: u64) {
        let end = self.next_tick + ticks * self.tick;
        while self.h.now < end {
            self.deliver_ticks();
            if !self.netisr() {
                self.h.now = self.next_tick.min(end);
            }
        }
    }
}

/// Runs one cycle of exactly `elapsed` ns starting at a tick, and returns burst after it.
pub fn one_cycle_of(r: &mut Rig, elapsed: u64) -> u32 {
    let start = r.h.now;
    r.p.hardclock(start, 1);
    r.h.cost_ns = 0;
    r.p.netisr_poll(start, &mut r.h);
    while r.p.state().residual_burst > 0 {
        r.p.netisr_pollmore(start);
        r.p.netisr_poll(start, &mut r.h);
    }
    r.p.netisr_pollmore(start + elapsed);
    r.h.now = start + MS;
    r.p.state().burst
}

/// Measures the kernel share over `window` ticks, in percent.
pub fn share_over(r: &mut Rig, window: u64) -> f64 {
    let (k0, t0) = (r.kernel_ns, r.h.now);
    r.run_ticks(window);
    (r.kernel_ns - k0) as f64 * 100.0 / (r.h.now - t0) as f64
}
