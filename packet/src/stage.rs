//! The stage the dataplane runs: a router or a bridge, chosen by `mode` in the config.

use crate::bridge::Bridge;
use crate::config::{ConfigError, Mode, PacketConfig};
use crate::counters::{StageCounters, StageStats};
use crate::drops::PacketDrop;
use crate::forwarder::Forwarder;
use polld_core::{Emit, PacketStage, Reading, StageDrop, Verdict};

/// Either packet stage, behind one type.
// One stage per dataplane: the size difference between the variants costs nothing, while
// boxing would add an indirection per packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Stage {
    Router(Forwarder),
    Bridge(Bridge),
}

impl Stage {
    /// Validates `config` and builds the stage for the dataplane's devices, named in
    /// device-index order.
    pub fn new(config: &PacketConfig, devices: &[&str]) -> Result<Self, ConfigError> {
        Ok(match config.mode {
            Mode::Router => Stage::Router(Forwarder::new(config, devices)?),
            Mode::Bridge => Stage::Bridge(Bridge::new(config, devices)?),
        })
    }

    /// Sets the wall clock for IP timestamp options ([`Forwarder::set_utc_offset`]); the
    /// bridge does not look at IP options.
    pub fn set_utc_offset(&mut self, offset_ns: u64) {
        if let Stage::Router(f) = self {
            f.set_utc_offset(offset_ns);
        }
    }

    pub fn counters(&self) -> &StageCounters {
        match self {
            Stage::Router(f) => f.counters(),
            Stage::Bridge(b) => b.counters(),
        }
    }

    pub fn stats(&self) -> StageStats {
        match self {
            Stage::Router(f) => f.stats(),
            Stage::Bridge(b) => b.stats(),
        }
    }
}

impl PacketStage for Stage {
    /// Sets "now" (monotonic nanoseconds) for aging and rate limits; the dataplane sets it before each piece of work.
    fn set_now(&mut self, now_ns: u64) {
        match self {
            Stage::Router(f) => f.set_now(now_ns),
            Stage::Bridge(b) => b.set_now(now_ns),
        }
    }

    fn process(&mut self, input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict {
        match self {
            Stage::Router(f) => f.process(input, frame, emit),
            Stage::Bridge(b) => b.process(input, frame, emit),
        }
    }

    fn drop_reasons(&self) -> &'static [StageDrop] {
        &PacketDrop::TABLE
    }

    fn readings(&self, node: &str) -> Vec<Reading> {
        match self {
            Stage::Router(f) => f.readings(node),
            // A bridge neither fragments nor reads IP options.
            Stage::Bridge(_) => Vec::new(),
        }
    }
}
