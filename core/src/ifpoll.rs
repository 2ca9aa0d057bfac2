//! Per-CPU polling as DragonFly BSD does it (`sys/net/if_poll.c`, "ifpoll"; docs/algorithm.md §8).
//!
//! # The algorithm
//!
//! Instead of one scheduler on the tick-keeping CPU, every CPU has its own poll context
//! driven by its own timer at `net.ifpoll.N.pollhz` (decoupled from HZ). A context has:
//!
//! - an **RX** poller: the whole kern_poll machine of [`crate::poll`] (adaptive `burst`,
//!   `each_burst` chunks, pending/lost/suspect/stalled), except that its clock is `pollhz`,
//!   so `kern_load` (DragonFly's `kern_frac`) and the short-tick test use `pollhz`;
//! - **TX** handlers, called every `tx_frac`-th tick with an unlimited count and no
//!   adaptation;
//! - on CPU 0 only, the **status** handlers, every `status_frac`-th tick.
//!
//! Each handler runs under its interface's serializer. A handler whose serializer is busy
//! (the driver holds it elsewhere) is not waited for: that interface is skipped for that
//! one chunk, and the next chunk of the same cycle tries it again. A CPU with no handlers
//! lets its timer fall to 1 Hz.
//!
//! Writes follow DragonFly: `burst_max` and `pollhz` are clamped into range rather than
//! refused, `each_burst` is clamped to `[1, burst_max]`, and the cycle's residual budget is
//! clipped when `burst_max` shrinks.

use crate::knobs::{in_range, parse_int, KnobError, Knobs};
use crate::poll::{HandlerId, PollCmd, PollHandlers, Poller, RegError, SysctlEntry};

/// At most this many per-CPU contexts (DragonFly's `IFPOLL_CTX_MAX`).
pub const IFPOLL_CPUS_MAX: usize = 32;
/// `pollhz` bounds (DragonFly's `IFPOLL_FREQ_MAX`).
pub const POLLHZ_MAX: u32 = 30_000;
/// `burst_max` bounds of ifpoll (`MIN_IOPOLL_BURST_MAX`, `MAX_IOPOLL_BURST_MAX`).
pub const IOPOLL_BURST_MIN: u32 = 10;
pub const IOPOLL_BURST_MAX: u32 = 5_000;
/// Timer rate of a context with no handlers.
pub const IDLE_TIMER_HZ: u32 = 1;

/// The serializer of an interface was held elsewhere: skip it for this call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Busy;

/// The handlers a per-CPU context calls; each returns [`Busy`] when it could not take its
/// interface's serializer without blocking.
pub trait IfPollHandlers {
    /// Receive up to `count` frames; returns the frames processed.
    fn rx(&mut self, id: HandlerId, count: u32) -> Result<u32, Busy>;
    /// Reclaim and push transmitted frames, with no limit.
    fn tx(&mut self, id: HandlerId) -> Result<u32, Busy>;
    /// Read the device's status (link, errors).
    fn status(&mut self, id: HandlerId) -> Result<(), Busy>;
}

/// Why a registration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IfPollRegError {
    /// The CPU has no poll context.
    NoSuchCpu { cpu: usize, cpus: usize },
    /// The kern_poll table refused it (full, or already registered).
    Table(RegError),
}

impl std::fmt::Display for IfPollRegError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IfPollRegError::NoSuchCpu { cpu, cpus } => write!(
                f,
                "ifpoll: no poll context on CPU {cpu}; contexts are 0..{}",
                cpus - 1
            ),
            IfPollRegError::Table(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for IfPollRegError {}

/// What each context counted, beyond the RX poller's own state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuCounters {
    /// Timer ticks received (expirations included).
    pub ticks: u64,
    /// RX handler calls skipped because the serializer was busy.
    pub rx_busy: u64,
    /// TX rounds run (every `tx_frac`-th tick).
    pub tx_rounds: u64,
    /// TX handler calls skipped because the serializer was busy.
    pub tx_busy: u64,
    /// Status rounds run (CPU 0, every `status_frac`-th tick).
    pub status_rounds: u64,
    /// Status handler calls skipped because the serializer was busy.
    pub status_busy: u64,
}

/// One CPU's poll context.
#[derive(Clone, Debug)]
struct CpuContext {
    rx: Poller,
    tx: Vec<HandlerId>,
    tx_frac: u32,
    tx_frac_count: u32,
    tx_armed: bool,
    counters: CpuCounters,
}

/// The per-CPU pollers, and the status handlers that live on CPU 0.
#[derive(Clone, Debug)]
pub struct IfPoll {
    cpus: Vec<CpuContext>,
    status: Vec<HandlerId>,
    status_frac: u32,
    status_frac_count: u32,
    status_armed: bool,
}

/// Adapts the RX side of [`IfPollHandlers`] to the kern_poll machine and counts skips.
struct RxOnly<'a> {
    handlers: &'a mut dyn IfPollHandlers,
    busy: u64,
}

impl PollHandlers for RxOnly<'_> {
    fn poll(&mut self, id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        // Status is a separate handler on CPU 0 here, so the command is not passed on.
        self.handlers.rx(id, count).unwrap_or_else(|Busy| {
            self.busy += 1;
            0
        })
    }
}

impl IfPoll {
    /// `cpus` contexts with DragonFly's later defaults: `pollhz` 6000 plus (3·cpu mod 50)
    /// so that the CPUs' timers do not align, `tx_frac` 1, `status_frac` 120,
    /// `each_burst` 50, `burst_max` 250, `user_frac` 50.
    pub fn new(cpus: usize) -> Result<IfPoll, String> {
        if cpus == 0 || cpus > IFPOLL_CPUS_MAX {
            return Err(format!(
                "ifpoll: {cpus} CPUs requested; allowed 1..{IFPOLL_CPUS_MAX}"
            ));
        }
        let cpus = (0..cpus)
            .map(|cpu| {
                let knobs = Knobs {
                    hz: 6000 + (3 * cpu as u32) % 50,
                    each_burst: 50,
                    burst_max: 250,
                    user_frac: 50,
                    // Status has its own cadence (status_frac); RX never asks for it.
                    reg_frac: u32::MAX,
                    ..Knobs::default()
                };
                CpuContext {
                    rx: Poller::new(knobs),
                    tx: Vec::new(),
                    tx_frac: 1,
                    tx_frac_count: 0,
                    tx_armed: false,
                    counters: CpuCounters::default(),
                }
            })
            .collect();
        Ok(IfPoll {
            cpus,
            status: Vec::new(),
            status_frac: 120,
            status_frac_count: 0,
            status_armed: false,
        })
    }

    pub fn cpus(&self) -> usize {
        self.cpus.len()
    }

    /// The RX poller of `cpu` (its knobs and kern_poll state).
    pub fn rx(&self, cpu: usize) -> &Poller {
        &self.cpus[cpu].rx
    }

    pub fn counters(&self, cpu: usize) -> &CpuCounters {
        &self.cpus[cpu].counters
    }

    /// The rate `cpu`'s timer should run at: `pollhz`, or 1 Hz with no handlers.
    pub fn timer_hz(&self, cpu: usize) -> u32 {
        let c = &self.cpus[cpu];
        if c.rx.handlers() == 0 && c.tx.is_empty() && (cpu != 0 || self.status.is_empty()) {
            IDLE_TIMER_HZ
        } else {
            c.rx.knobs().hz
        }
    }

    /// Registers an interface: RX and TX on `cpu`, status on CPU 0.
    pub fn register(&mut self, id: HandlerId, cpu: usize) -> Result<(), IfPollRegError> {
        let cpus = self.cpus.len();
        if self.cpus.iter().any(|c| c.rx.is_registered(id)) {
            return Err(IfPollRegError::Table(RegError::Eexist));
        }
        let c = self
            .cpus
            .get_mut(cpu)
            .ok_or(IfPollRegError::NoSuchCpu { cpu, cpus })?;
        c.rx.register(id).map_err(IfPollRegError::Table)?;
        c.tx.push(id);
        self.status.push(id);
        Ok(())
    }

    /// Removes an interface from whichever CPU holds it.
    pub fn deregister(&mut self, id: HandlerId) -> Result<(), RegError> {
        let c = self
            .cpus
            .iter_mut()
            .find(|c| c.rx.is_registered(id))
            .ok_or(RegError::Enoent)?;
        c.rx.deregister(id)?;
        c.tx.retain(|&h| h != id);
        self.status.retain(|&h| h != id);
        Ok(())
    }

    /// `cpu`'s timer fired `expirations` times at `now` (ns): arms RX as the tick hook
    /// does, TX every `tx_frac`-th tick, and on CPU 0 status every `status_frac`-th tick.
    pub fn tick(&mut self, cpu: usize, now: u64, expirations: u32) {
        let c = &mut self.cpus[cpu];
        c.counters.ticks += expirations as u64;
        c.rx.hardclock(now, expirations);
        if !c.tx.is_empty() {
            c.tx_frac_count += expirations;
            if c.tx_frac_count >= c.tx_frac {
                c.tx_frac_count = 0;
                c.tx_armed = true;
            }
        }
        if cpu == 0 && !self.status.is_empty() {
            self.status_frac_count += expirations;
            if self.status_frac_count >= self.status_frac {
                self.status_frac_count = 0;
                self.status_armed = true;
            }
        }
    }

    /// Runs `cpu`'s next armed piece of work: a TX round, a status round, an RX chunk, or
    /// the RX pollmore (which needs the time after the chunk and the deferred stage, hence
    /// its own step). Returns `false` when nothing was armed.
    pub fn run(&mut self, cpu: usize, now: u64, handlers: &mut dyn IfPollHandlers) -> bool {
        let c = &mut self.cpus[cpu];
        if c.tx_armed {
            c.tx_armed = false;
            c.counters.tx_rounds += 1;
            for &id in &c.tx {
                if handlers.tx(id).is_err() {
                    c.counters.tx_busy += 1;
                }
            }
            return true;
        }
        if cpu == 0 && self.status_armed {
            self.status_armed = false;
            c.counters.status_rounds += 1;
            for &id in &self.status {
                if handlers.status(id).is_err() {
                    c.counters.status_busy += 1;
                }
            }
            return true;
        }
        if c.rx.poll_armed() {
            let mut rx = RxOnly { handlers, busy: 0 };
            c.rx.netisr_poll(now, &mut rx);
            c.counters.rx_busy += rx.busy;
            return true;
        }
        c.rx.netisr_pollmore(now)
    }

    /// Writes `net.ifpoll.N.*` with DragonFly's clamping.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let unknown = || KnobError::Unknown {
            name: name.to_string(),
        };
        let (cpu, leaf) = self.split(name).ok_or_else(unknown)?;
        let v = parse_int(name, value)?;
        let clamp = |lo: u32, hi: u32| v.clamp(lo as i64, hi as i64) as u32;
        let c = &mut self.cpus[cpu];
        match leaf {
            "pollhz" => c.rx.knobs.hz = clamp(1, POLLHZ_MAX),
            "tx_frac" => c.tx_frac = clamp(1, u32::MAX),
            "status_frac" if cpu == 0 => self.status_frac = clamp(1, u32::MAX),
            "rx.user_frac" => c.rx.knobs.user_frac = in_range(name, v, 0, 99)?,
            "rx.burst_max" => {
                let burst_max = clamp(IOPOLL_BURST_MIN, IOPOLL_BURST_MAX);
                c.rx.knobs.burst_max = burst_max;
                c.rx.knobs.each_burst = c.rx.knobs.each_burst.min(burst_max);
                c.rx.state.burst = c.rx.state.burst.min(burst_max);
                c.rx.state.residual_burst = c.rx.state.residual_burst.min(burst_max);
            }
            "rx.each_burst" => c.rx.knobs.each_burst = clamp(1, c.rx.knobs.burst_max),
            _ if self.entries().iter().any(|e| e.name == name) => {
                return Err(KnobError::ReadOnly {
                    name: name.to_string(),
                })
            }
            _ => return Err(unknown()),
        }
        Ok(())
    }

    /// Splits `net.ifpoll.N.leaf` into a valid CPU and the leaf.
    fn split<'n>(&self, name: &'n str) -> Option<(usize, &'n str)> {
        let rest = name.strip_prefix("net.ifpoll.")?;
        let (cpu, leaf) = rest.split_once('.')?;
        let cpu: usize = cpu.parse().ok()?;
        (cpu < self.cpus.len()).then_some((cpu, leaf))
    }

    /// Every `net.ifpoll.*` entry: per CPU `pollhz`, `tx_frac`, the RX poller's knobs and
    /// state under `rx.` (`kern_load` is DragonFly's `kern_frac`), the busy-skip counters;
    /// `status_frac` on CPU 0.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        let mut out = Vec::new();
        let entry = |name: String, value: String, descr: &str, writable: bool| SysctlEntry {
            name,
            value,
            descr: descr.to_string(),
            writable,
        };
        for (cpu, c) in self.cpus.iter().enumerate() {
            let p = format!("net.ifpoll.{cpu}");
            out.push(entry(
                format!("{p}.pollhz"),
                c.rx.knobs().hz.to_string(),
                "Polling frequency",
                true,
            ));
            out.push(entry(
                format!("{p}.tx_frac"),
                c.tx_frac.to_string(),
                "Poll TX every this many ticks",
                true,
            ));
            if cpu == 0 {
                out.push(entry(
                    format!("{p}.status_frac"),
                    self.status_frac.to_string(),
                    "Poll status every this many ticks",
                    true,
                ));
            }
            for short in [
                "user_frac",
                "burst_max",
                "each_burst",
                "burst",
                "kern_load",
                "residual_burst",
                "pending_polls",
                "lost_polls",
                "short_ticks",
                "phase",
                "suspect",
                "stalled",
                "handlers",
            ] {
                let leaf = if short == "kern_load" {
                    "kern_frac"
                } else {
                    short
                };
                let writable = matches!(short, "user_frac" | "burst_max" | "each_burst");
                out.push(entry(
                    format!("{p}.rx.{leaf}"),
                    c.rx.get(short).unwrap_or_default(),
                    "RX poller (kern.polling semantics at pollhz)",
                    writable,
                ));
            }
            let k = &c.counters;
            for (leaf, v) in [
                ("rx.busy", k.rx_busy),
                ("tx.rounds", k.tx_rounds),
                ("tx.busy", k.tx_busy),
            ] {
                out.push(entry(
                    format!("{p}.{leaf}"),
                    v.to_string(),
                    "Handler calls (busy: skipped, serializer held)",
                    false,
                ));
            }
        }
        out
    }
}
