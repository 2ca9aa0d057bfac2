//! An L2 learning bridge over all configured interfaces (FreeBSD's `if_bridge` without
//! STP).
//!
//! The bridge learns each source MAC at the port it arrived on (bounded, aging table) and
//! forwards a unicast frame to the learned port. Broadcast, multicast and unknown
//! destinations are flooded to every other port. There is no spanning tree: do not build
//! loops. Frames with a group source MAC are invalid (`Martian`); VLAN-tagged frames are
//! dropped (`Vlan`; the bridge is VLAN-unaware and its rules could not see inside).
//!
//! **Counting a flood.** The dataplane takes one verdict per frame, so a flooded frame
//! returns `Forward { out }` for the first other port and the copies for the remaining
//! ports go out through [`Emit`], counted as `generated.flood_copies`. The received frame
//! is thus counted once (as forwarded) and conservation holds; the copies are accounted
//! like any frame the stage makes up.
//!
//! A known destination learned on the port the frame came in by needs no forwarding: the
//! station already got it on that segment. Such frames, and floods with no other port, are
//! dropped as `NoRoute` (there is nowhere to send them).
//!
//! Rules apply to IPv4 frames only (ARP must pass for IPv4 to work). With any rule or a
//! deny default, an IPv4 frame must have a structurally valid header (not checksum) so
//! that the rules can read it; otherwise it is dropped with the header's error.

use crate::config::{ConfigError, Mode, PacketConfig};
use crate::counters::{StageCounters, StageStats};
use crate::drops::PacketDrop;
use crate::rules::{Action, FiveTuple, RuleSet};
use crate::table::AgingMap;
use crate::wire::ethernet::ethertype;
use crate::wire::{EthernetFrame, Ipv4Packet, MacAddr};
use polld_core::{DropReason, Emit, PacketStage, StageDrop, Verdict};

const NS_PER_MS: u64 = 1_000_000;

/// The learning bridge stage.
#[derive(Debug)]
pub struct Bridge {
    ports: usize,
    stations: AgingMap<MacAddr, usize>,
    rules: RuleSet,
    now_ns: u64,
    counters: StageCounters,
}

impl Bridge {
    /// Builds the bridge over the dataplane's devices, named in device-index order; every
    /// device is a port and needs an `[[interfaces]]` entry of the same name.
    pub fn new(config: &PacketConfig, devices: &[&str]) -> Result<Self, ConfigError> {
        if config.mode != Mode::Bridge {
            return Err(ConfigError {
                field: "mode".into(),
                message: "is \"router\"; build a Forwarder, or set mode = \"bridge\"".into(),
            });
        }
        config.validate()?;
        config.bind(devices)?;
        Ok(Bridge {
            ports: devices.len(),
            stations: AgingMap::new(
                config.bridge.capacity,
                config.bridge.max_age_ms.saturating_mul(NS_PER_MS),
            ),
            rules: RuleSet::new(config.rules.clone(), config.default_action),
            now_ns: 0,
            counters: StageCounters::default(),
        })
    }

    /// Sets the time used for aging (monotonic nanoseconds); called once per batch.
    pub fn set_now(&mut self, now_ns: u64) {
        self.now_ns = now_ns;
    }

    pub fn counters(&self) -> &StageCounters {
        &self.counters
    }

    pub fn stats(&self) -> StageStats {
        StageStats {
            counters: self.counters,
            rules: self.rules.hits().clone(),
            table: self.stations.stats(),
        }
    }

    /// The port `mac` was last seen on, if that is recent enough.
    pub fn port_of(&self, mac: MacAddr) -> Option<usize> {
        self.stations.get(&mac, self.now_ns).map(|(&port, _)| port)
    }

    fn decide(&mut self, input: usize, frame: &[u8], emit: &mut dyn Emit) -> Verdict {
        if input >= self.ports {
            // Not a configured device: the dataplane and the config disagree.
            return Verdict::Drop(DropReason::LinkDown);
        }
        let eth = match EthernetFrame::new_checked(frame) {
            Ok(eth) => eth,
            Err(e) => return e.drop_reason().verdict(),
        };
        let src = eth.src_addr();
        if !src.is_unicast() {
            return PacketDrop::Martian.verdict();
        }
        if eth.is_vlan_tagged() {
            return PacketDrop::Vlan.verdict();
        }
        if eth.ethertype() == ethertype::IPV4 && !self.rules.allows_everything() {
            let ip = match Ipv4Packet::new_checked(eth.payload()) {
                Ok(ip) => ip,
                Err(e) => return e.drop_reason().verdict(),
            };
            if self.rules.evaluate(&FiveTuple::of(&ip)) == Action::Deny {
                return PacketDrop::Filtered.verdict();
            }
        }
        self.stations.insert(src, input, self.now_ns);
        let dst = eth.dst_addr();
        if dst.is_unicast() {
            if let Some((&port, _)) = self.stations.get(&dst, self.now_ns) {
                return if port == input {
                    PacketDrop::NoRoute.verdict()
                } else {
                    Verdict::Forward { out: port }
                };
            }
        }
        let mut others = (0..self.ports).filter(|&p| p != input);
        let Some(first) = others.next() else {
            return PacketDrop::NoRoute.verdict();
        };
        for port in others {
            emit.emit(port, frame);
            self.counters.generated.flood_copies += 1;
        }
        Verdict::Forward { out: first }
    }
}

impl PacketStage for Bridge {
    fn set_now(&mut self, now_ns: u64) {
        Bridge::set_now(self, now_ns)
    }

    fn process(&mut self, input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict {
        let verdict = self.decide(input, frame, emit);
        self.counters.record(verdict);
        verdict
    }

    fn drop_reasons(&self) -> &'static [StageDrop] {
        &PacketDrop::TABLE
    }
}
