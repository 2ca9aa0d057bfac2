//! A simulated NIC on virtual time.
//!
//! Frames arrive at a rate (constant, Poisson, or on/off bursts) into an rx ring of fixed
//! size; a full ring drops and counts. Transmitted frames leave at line rate from a tx ring;
//! completed descriptors are reclaimed by the driver's poll or task (interrupt masked) or by
//! the device's transmit-complete interrupt (interrupt armed), as in em(4). With
//! `tx_ready_line` the NIC also raises a transmit-ready line once its tx ring has drained
//! to half (as Linux reports a socket writable once half its send buffer is free), on which
//! interrupt work that stopped at this full output resumes.
//!
//! The NIC charges the driver's cost per frame and per call on the shared virtual clock as it
//! works, so a handler that runs long sees the frames that arrived meanwhile, exactly like a
//! handler draining a real ring.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

pub use polld_core::rng::Rng;
use polld_core::{
    Capabilities, Device, HwStats, LinkState, Mode, TxDrop, TxDrops, TxFull, TxReadyLine,
};

/// The shared virtual clock, in nanoseconds.
pub type Clock = Rc<Cell<u64>>;

/// How frames arrive.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Arrivals {
    /// No traffic.
    None,
    /// Evenly spaced.
    Constant { pps: f64 },
    /// Exponential gaps (seeded, repeatable).
    Poisson { pps: f64 },
    /// `pps` during `on_ms`, silence during `off_ms`, repeated.
    OnOff { pps: f64, on_ms: f64, off_ms: f64 },
}

impl Arrivals {
    pub fn pps(&self) -> f64 {
        match *self {
            Arrivals::None => 0.0,
            Arrivals::Constant { pps }
            | Arrivals::Poisson { pps }
            | Arrivals::OnOff { pps, .. } => pps,
        }
    }
}

/// Driver costs charged by the NIC on the virtual clock.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DriverCosts {
    /// Per receive call (register reads, ring bookkeeping).
    pub call_ns: u64,
    /// Per frame received (descriptor, buffer refill).
    pub rx_ns: u64,
    /// Per frame transmitted (descriptor setup).
    pub tx_ns: u64,
    /// Per completed transmit descriptor reclaimed.
    pub reclaim_ns: u64,
}

impl Default for DriverCosts {
    fn default() -> Self {
        DriverCosts {
            call_ns: 100,
            rx_ns: 500,
            tx_ns: 200,
            reclaim_ns: 50,
        }
    }
}

/// One simulated NIC's configuration.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicConfig {
    pub name: String,
    #[serde(default = "default_arrivals")]
    pub arrivals: Arrivals,
    /// Receive ring size, in descriptors.
    #[serde(default = "default_ring")]
    pub rx_ring: usize,
    /// Transmit ring size, in descriptors.
    #[serde(default = "default_ring")]
    pub tx_ring: usize,
    /// Line rate of the transmit side, frames per second.
    #[serde(default = "default_line_rate")]
    pub line_pps: f64,
    /// Descriptors one received frame occupies (3 for a jumbo frame on 2 KiB buffers).
    #[serde(default = "one")]
    pub descriptors_per_frame: usize,
    /// Frame length handed to the stage.
    #[serde(default = "default_frame_len")]
    pub frame_len: usize,
    /// Longest frame the transmit side sends (the default: a 9000-byte jumbo MTU plus
    /// Ethernet header and tag); a longer one is accepted and dropped, counted as
    /// `tx_drops.too_long`.
    #[serde(default = "default_max_frame")]
    pub max_frame: usize,
    #[serde(default)]
    pub costs: DriverCosts,
    /// The interface's mode at start.
    #[serde(default = "default_mode")]
    pub mode: Mode,
    /// Where frames received here go: another NIC's name, or `local` (the default).
    #[serde(default)]
    pub route: Option<String>,
    /// Frames one flush (a kick) takes at most, as an AF_XDP `sendto` does; unset, no
    /// limit (a doorbell write).
    #[serde(default)]
    pub tx_batch: Option<usize>,
    /// Raises a transmit-ready line once the tx ring has drained to half, which interrupt
    /// work stopped on this full output waits for (polld's AF_PACKET and AF_XDP devices
    /// have one: POLLOUT). Off by default, as in the 2002 drivers of seed 000's table,
    /// whose handlers never waited for a full output: their transmit starvation is that
    /// table's livelock with two and four streams.
    #[serde(default)]
    pub tx_ready_line: bool,
}

fn default_mode() -> Mode {
    Mode::Interrupt
}
fn default_arrivals() -> Arrivals {
    Arrivals::None
}
fn default_ring() -> usize {
    256
}
fn default_line_rate() -> f64 {
    148_810.0
}
fn one() -> usize {
    1
}
fn default_frame_len() -> usize {
    60
}
fn default_max_frame() -> usize {
    9018
}

impl NicConfig {
    pub fn new(name: &str, arrivals: Arrivals) -> NicConfig {
        NicConfig {
            name: name.to_string(),
            arrivals,
            rx_ring: default_ring(),
            tx_ring: default_ring(),
            line_pps: default_line_rate(),
            descriptors_per_frame: 1,
            frame_len: default_frame_len(),
            max_frame: default_max_frame(),
            costs: DriverCosts::default(),
            mode: Mode::Interrupt,
            route: None,
            tx_batch: None,
            tx_ready_line: false,
        }
    }

    /// Checks the values a scenario file may get wrong; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if self.rx_ring == 0 || self.tx_ring == 0 {
            return Err(format!("nic '{n}': rx_ring and tx_ring must be at least 1"));
        }
        if self.descriptors_per_frame == 0 || self.descriptors_per_frame > self.rx_ring {
            return Err(format!(
                "nic '{n}': descriptors_per_frame must be 1..={} (rx_ring)",
                self.rx_ring
            ));
        }
        if self.line_pps.is_nan() || self.line_pps <= 0.0 {
            return Err(format!("nic '{n}': line_pps must be positive"));
        }
        if !(14..=9018).contains(&self.frame_len) {
            return Err(format!("nic '{n}': frame_len must be 14..=9018 bytes"));
        }
        if self.tx_batch == Some(0) {
            return Err(format!("nic '{n}': tx_batch must be at least 1"));
        }
        if self.max_frame < 14 {
            return Err(format!("nic '{n}': max_frame must be at least 14 bytes"));
        }
        let pps = self.arrivals.pps();
        if !pps.is_finite() || pps < 0.0 {
            return Err(format!(
                "nic '{n}': arrivals.pps must be a finite rate >= 0"
            ));
        }
        if let Arrivals::OnOff { on_ms, off_ms, .. } = self.arrivals {
            if on_ms.is_nan() || off_ms.is_nan() || on_ms <= 0.0 || off_ms < 0.0 {
                return Err(format!(
                    "nic '{n}': on/off arrivals need on_ms > 0 and off_ms >= 0"
                ));
            }
        }
        Ok(())
    }
}

/// What happened on one NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NicStats {
    /// Frames that arrived on the wire.
    pub arrived: u64,
    /// Arrivals dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Frames handed to the driver.
    pub received: u64,
    /// Times the ring's consumer index was published (once per receive call that took frames).
    pub rx_publishes: u64,
    /// Frames accepted into the tx ring.
    pub tx_queued: u64,
    /// Frames `send` accepted and dropped: longer than `max_frame`.
    pub tx_too_long: u64,
    /// Frames that left on the wire.
    pub tx_wire: u64,
    /// Transmit-complete interrupts taken.
    pub tx_interrupts: u64,
    /// Times the driver flushed its transmit side (kicks).
    pub tx_flushes: u64,
    /// Frames that left on the wire carrying an arrival stamp (forwarded ones).
    pub stamped: u64,
    /// Sum of (wire time - arrival time) over those frames, ns.
    pub latency_sum_ns: u64,
    /// Largest such latency, ns.
    pub latency_max_ns: u64,
}

/// Frames carry their arrival time in these bytes, so latency is measured at the wire.
const STAMP: std::ops::Range<usize> = 6..14;

/// A simulated NIC.
pub struct SimNic {
    cfg: NicConfig,
    clock: Clock,
    rng: Rng,
    /// Next arrival time, ns.
    next_arrival: f64,
    /// Arrival times of frames in the rx ring.
    rx: VecDeque<u64>,
    /// Wire-departure times of frames in flight, and their arrival stamps.
    tx: VecDeque<(u64, u64)>,
    /// Completed, not yet reclaimed descriptors.
    tx_done: usize,
    /// When the wire is next free.
    wire_free: u64,
    armed: bool,
    link: LinkState,
    frame: Vec<u8>,
    pub stats: NicStats,
}

impl SimNic {
    pub fn new(cfg: NicConfig, clock: Clock, seed: u64) -> SimNic {
        let mut nic = SimNic {
            frame: vec![0; cfg.frame_len],
            rng: Rng::new(seed),
            next_arrival: 0.0,
            rx: VecDeque::with_capacity(cfg.rx_ring),
            tx: VecDeque::with_capacity(cfg.tx_ring),
            tx_done: 0,
            wire_free: 0,
            armed: true,
            link: LinkState::Up,
            stats: NicStats::default(),
            clock,
            cfg,
        };
        nic.next_arrival = nic.gap(0.0);
        nic
    }

    pub fn config(&self) -> &NicConfig {
        &self.cfg
    }

    /// The time from `t` to the next arrival, as an absolute time.
    fn gap(&mut self, t: f64) -> f64 {
        let pps = self.cfg.arrivals.pps();
        if pps <= 0.0 {
            return f64::INFINITY;
        }
        let mean = 1e9 / pps;
        match self.cfg.arrivals {
            Arrivals::None => f64::INFINITY,
            Arrivals::Constant { .. } => t + mean,
            Arrivals::Poisson { .. } => t - mean * self.rng.unit().ln(),
            Arrivals::OnOff { on_ms, off_ms, .. } => {
                let period = (on_ms + off_ms) * 1e6;
                let next = t + mean;
                let phase = next % period;
                if phase < on_ms * 1e6 {
                    next
                } else {
                    next - phase + period
                }
            }
        }
    }

    /// Brings arrivals and transmissions up to the current virtual time.
    pub fn advance(&mut self) {
        let now = self.clock.get();
        let slots = self.cfg.descriptors_per_frame;
        while self.next_arrival <= now as f64 {
            let t = self.next_arrival;
            self.stats.arrived += 1;
            if self.link != LinkState::Up || (self.rx.len() + 1) * slots > self.cfg.rx_ring {
                self.stats.rx_ring_full += 1;
            } else {
                self.rx.push_back(t as u64);
            }
            self.next_arrival = self.gap(t);
        }
        while let Some(&(done, stamp)) = self.tx.front() {
            if done > now {
                break;
            }
            self.tx.pop_front();
            self.tx_done += 1;
            self.stats.tx_wire += 1;
            if stamp > 0 {
                let lat = done.saturating_sub(stamp);
                self.stats.stamped += 1;
                self.stats.latency_sum_ns += lat;
                self.stats.latency_max_ns = self.stats.latency_max_ns.max(lat);
            }
        }
    }

    /// Puts `n` frames on the wire now, as a burst (scripted scenarios and tests).
    pub fn inject(&mut self, n: usize) {
        let now = self.clock.get();
        for _ in 0..n {
            self.stats.arrived += 1;
            if (self.rx.len() + 1) * self.cfg.descriptors_per_frame > self.cfg.rx_ring {
                self.stats.rx_ring_full += 1;
            } else {
                self.rx.push_back(now);
            }
        }
    }

    /// The next time something happens on this NIC (an arrival or a departure).
    pub fn next_event(&self) -> u64 {
        let tx = self.tx.front().map_or(u64::MAX, |&(t, _)| t);
        (self.next_arrival.ceil() as u64).min(tx)
    }

    /// Completed transmit descriptors waiting for the driver.
    pub fn tx_completions(&self) -> usize {
        self.tx_done
    }

    /// Whether the device would raise an interrupt now: armed, and a frame arrived or a
    /// transmission completed.
    pub fn interrupt_asserted(&self) -> bool {
        self.armed && self.link == LinkState::Up && (!self.rx.is_empty() || self.tx_done > 0)
    }

    /// The transmit-ready line: at most half the tx ring still waits for the wire.
    pub fn tx_writable(&self) -> bool {
        self.tx.len() <= self.cfg.tx_ring / 2
    }

    /// Frames still in the rx ring.
    pub fn rx_backlog(&self) -> usize {
        self.rx.len()
    }

    /// Frames not yet on the wire.
    pub fn tx_backlog(&self) -> usize {
        self.tx.len()
    }

    /// Takes the link down or up (a status check reports it).
    pub fn set_link(&mut self, state: LinkState) {
        self.link = state;
    }

    /// The driver reclaims completed transmit descriptors (txeof).
    pub fn reclaim(&mut self) {
        self.charge(self.tx_done as u64 * self.cfg.costs.reclaim_ns);
        self.tx_done = 0;
    }

    /// The transmit-complete interrupt's work.
    pub fn tx_interrupt(&mut self) {
        self.stats.tx_interrupts += 1;
        self.reclaim();
    }

    fn charge(&self, ns: u64) {
        self.clock.set(self.clock.get() + ns);
    }
}

/// A frame's arrival stamp, 0 when it carries none (generated locally).
pub fn stamp_of(frame: &[u8]) -> u64 {
    frame
        .get(STAMP)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
}

impl Device for SimNic {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    /// No fd: its interrupt and, with `tx_ready_line`, its transmit-ready line
    /// ([`SimNic::tx_writable`]) are reported by the virtual CPU.
    fn capabilities(&self) -> Capabilities<'_> {
        let caps = Capabilities::new().with_tx_batch(self.cfg.tx_batch.unwrap_or(usize::MAX));
        match self.cfg.tx_ready_line {
            true => caps.with_tx_ready(TxReadyLine::Modelled),
            false => caps,
        }
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        self.charge(self.cfg.costs.call_ns);
        if !self.armed {
            // Polled (or a masked task): txeof runs with every poll, as in em_poll.
            self.reclaim();
        }
        let mut n = 0;
        while n < budget {
            self.advance();
            let Some(arrival) = self.rx.pop_front() else {
                break;
            };
            self.charge(self.cfg.costs.rx_ns);
            self.frame[STAMP].copy_from_slice(&arrival.max(1).to_le_bytes());
            rx(&mut self.frame);
            n += 1;
        }
        self.stats.received += n as u64;
        if n > 0 {
            self.stats.rx_publishes += 1;
        }
        n
    }

    fn rx_ready(&mut self) -> bool {
        self.advance();
        !self.rx.is_empty()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        self.advance();
        if !self.armed && self.tx.len() + self.tx_done >= self.cfg.tx_ring {
            // Polled, the driver reclaims on transmit when the ring looks full (em's
            // em_xmit cleans below a threshold); with the interrupt armed only the
            // transmit-complete interrupt does, as in the seed's drivers.
            self.reclaim();
        }
        if self.tx.len() + self.tx_done >= self.cfg.tx_ring || self.link != LinkState::Up {
            return Err(TxFull);
        }
        if frame.len() > self.cfg.max_frame {
            self.stats.tx_too_long += 1;
            return Ok(());
        }
        self.charge(self.cfg.costs.tx_ns);
        let now = self.clock.get();
        let start = self.wire_free.max(now);
        let done = start + (1e9 / self.cfg.line_pps) as u64;
        self.wire_free = done;
        self.tx.push_back((done, stamp_of(frame)));
        self.stats.tx_queued += 1;
        Ok(())
    }

    fn tx_room(&mut self) -> usize {
        self.advance();
        if !self.armed {
            self.reclaim();
        }
        self.cfg
            .tx_ring
            .saturating_sub(self.tx.len() + self.tx_done)
    }

    fn flush(&mut self) {
        self.stats.tx_flushes += 1;
        if !self.armed {
            self.reclaim();
        }
    }

    fn check_status(&mut self) -> LinkState {
        self.link
    }

    fn set_interrupt(&mut self, armed: bool) {
        self.armed = armed;
    }

    fn hw_stats(&mut self) -> HwStats {
        let mut tx_drops = TxDrops::default();
        tx_drops.add(TxDrop::TooLong, self.stats.tx_too_long);
        HwStats {
            rx_ring_full: self.stats.rx_ring_full,
            tx_drops,
            ..HwStats::default()
        }
    }
}
