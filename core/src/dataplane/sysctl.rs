//! The dataplane's sysctl tree: `kern.polling.enable`, the poller's `kern.polling.*`,
//! `net.inet.ip.*` and `dev.<if>.*`. Each entry is declared once ([`crate::sysctl`]): the
//! dataplane's own, an interface's settings, link and drops by reason here, an
//! interface's counters beside their fields in `counters.rs`, the packet stage's counters
//! in its own crate; listing, reading and writing go through the declarations.

use crate::device::{Device, LinkState, TxDrop};
use crate::knobs::{parse_int, KnobError};
use crate::poll::{SysctlEntry, NODE};
use crate::stage::{DropReason, PacketStage};
use crate::sysctl::{find, read, write, Family, Kind, Oid, Reading, Value, Write};
use crate::{sysctl_oids, sysctl_struct};

use super::{Dataplane, IfCounters, Interface, Mode};

/// The global polling switch: a view of the interfaces' modes, so the dataplane's.
pub const ENABLE: &str = "kern.polling.enable";
/// The node of the IP layer's entries.
pub const IP_NODE: &str = ip_entry::NODE;
/// The node of each interface's entries is `dev.<name>`.
pub const DEV_NODE: &str = "dev";

/// What `dev.IF.mode` takes.
const MODES: &str = "interrupt, polling, adaptive, busy or auto";
/// What `dev.IF.rx_process_limit` takes.
const RX_PROCESS_LIMITS: &str = "-1 (unlimited) or 1 and above";

sysctl_struct! {
    /// What can be set on one interface (`dev.<if>.*`): written on a copy, validated by
    /// the declarations, then applied by [`Dataplane::sysctl_set`] (a mode switch
    /// registers the interface with the poller).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct IfSettings {
        /// The interface's mode.
        mode: Mode = Mode::Interrupt, MODE: Knob "interrupt|polling|adaptive|busy|auto",
            Write::Proc {
                handler: |s, name, value| {
                    s.mode = value.trim().parse().map_err(|_| KnobError::NotANumber {
                        name: name.to_string(),
                        value: value.to_string(),
                        expected: MODES.to_string(),
                    })?;
                    Ok(())
                },
                allowed: |_| MODES.to_string(),
            };
        /// Adaptive mode: frames per task run, -1 unlimited.
        rx_process_limit: i64 = super::RX_PROCESS_LIMIT, RX_PROCESS_LIMIT: Knob
            "Adaptive mode: frames per task run, -1 unlimited",
            Write::Proc {
                handler: |s, name, value| {
                    let v = parse_int(name, value)?;
                    if v == 0 || v < -1 {
                        return Err(KnobError::Invalid {
                            name: name.to_string(),
                            value: value.to_string(),
                            allowed: RX_PROCESS_LIMITS.to_string(),
                        });
                    }
                    s.rx_process_limit = v;
                    Ok(())
                },
                allowed: |_| RX_PROCESS_LIMITS.to_string(),
            };
    }
}

impl From<Mode> for Value {
    fn from(mode: Mode) -> Value {
        Value::from(mode.name())
    }
}

sysctl_oids! {
    /// `dev.<if>.link`.
    impl LinkState: OIDS {
        /// `dev.<if>.link`: read from the device at each status check.
        LINK = "link": Gauge "Link state", |l| Value::from(l.name());
    }
}

sysctl_oids! {
    /// What an interface shows beyond its settings and counters.
    impl Interface<D>: OIDS {
        /// `dev.<if>.auto_polling`: where an `auto` interface is now.
        AUTO_POLLING = "auto_polling": Gauge
            "Auto mode: 1 while the interface polls, 0 on interrupts",
            |iface| Value::from(iface.auto_polling);
    }
}

/// `dev.<if>.drops.<reason>`: the drops of frames received on an interface.
pub const DROPS: Family = Family {
    name: "drops",
    descr: "Frames dropped, by reason",
    kind: Kind::Counter,
    label: "reason",
};

/// `dev.<if>.tx_drops.<reason>`: frames an output accepted and then dropped.
pub const TX_DROPS: Family = Family {
    name: "tx_drops",
    descr: "Frames the device accepted for transmission and then dropped, by reason",
    kind: Kind::Counter,
    label: "reason",
};

/// The families of entries under each interface's node.
pub const INTERFACE_FAMILIES: [Family; 2] = [DROPS, TX_DROPS];

/// The declared kind of the `dev.<if>.*` entry `leaf` (a setting, a counter, the link, a
/// drop by reason), `None` for a leaf no declaration of the dataplane's has.
pub fn interface_entry_kind(leaf: &str) -> Option<Kind> {
    Oid::find_leaf(IfSettings::OIDS, leaf)
        .map(|oid| oid.kind)
        .or_else(|| Oid::find_leaf(IfCounters::OIDS, leaf).map(|oid| oid.kind))
        .or_else(|| Oid::find_leaf(&LinkState::OIDS, leaf).map(|oid| oid.kind))
        .or_else(|| Oid::find_leaf(&Interface::<()>::OIDS, leaf).map(|oid| oid.kind))
        .or_else(|| {
            INTERFACE_FAMILIES
                .iter()
                .find(|family| family.key(leaf).is_some())
                .map(|family| family.kind)
        })
}

sysctl_oids! {
    /// `kern.polling.enable`.
    impl Dataplane<D: Device, S: PacketStage>: ENABLE_OIDS {
        /// `kern.polling.enable`, FreeBSD 6's switch.
        ENABLE = "enable": Knob
            "Polling on every interface: 1 polls all, 0 takes all out (FreeBSD 6 compatibility; per interface: polld ifconfig IF polling)",
            |dp| Value::from(dp.polling_enabled()),
            write Write::Proc {
                handler: |dp, name, value| dp.set_polling_enable(name, value),
                allowed: |_| "0 or 1".to_string(),
            };
    }
}

sysctl_oids! {
    /// The dataplane's own `net.inet.ip.*` entries (the stage adds its counters).
    impl Dataplane<D: Device, S: PacketStage>: IP_OIDS, names ip_entry under "net.inet.ip" {
        FASTFORWARDING = "fastforwarding": Knob
            "Process frames in the receive handler instead of the input queue",
            |dp| Value::from(dp.devs.fastforwarding),
            write Write::Int {
                range: |_| (0, 1),
                store: |dp, v| dp.devs.fastforwarding = v == 1,
            };
        INTR_QUEUE_MAXLEN = "intr_queue_maxlen": Knob "Maximum size of the IP input queue",
            |dp| Value::from(dp.devs.queue.maxlen()),
            write Write::Int {
                range: |_| (1, 65_536),
                store: |dp, v| dp.devs.queue.set_maxlen(v as usize),
            };
        INTR_QUEUE_LEN = "intr_queue_len": Gauge "Frames in the IP input queue",
            |dp| Value::from(dp.devs.queue.len());
    }
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Interface `i`'s settings, as [`IfSettings`].
    fn settings(&self, i: usize) -> IfSettings {
        let iface = &self.devs.ifs[i];
        IfSettings {
            mode: iface.mode,
            rx_process_limit: iface.rx_process_limit,
        }
    }

    /// Every entry, typed, in FreeBSD's listing order: the switch, the scheduler, the IP
    /// layer, then each interface under `dev.<name>`.
    pub fn readings(&self) -> Vec<Reading> {
        let mut all: Vec<Reading> = read(NODE, self, &Self::ENABLE_OIDS).collect();
        all.extend(self.poller.readings(NODE));
        all.extend(read(IP_NODE, self, &Self::IP_OIDS));
        all.extend(self.devs.stage.readings(IP_NODE));
        for (i, (iface, link)) in self.devs.ifs.iter().zip(&self.devs.links).enumerate() {
            let node = format!("{DEV_NODE}.{}", iface.dev.name());
            let settings = self.settings(i);
            let c = &iface.counters;
            all.extend(read(&node, &settings, IfSettings::OIDS));
            all.extend(read(&node, link, &LinkState::OIDS));
            all.extend(read(&node, c, IfCounters::OIDS));
            all.extend(read(&node, iface, &Interface::OIDS));
            for r in DropReason::all(self.devs.stage.drop_reasons()) {
                all.push(DROPS.reading(&node, r.name(), c.drops.get(r)));
            }
            for r in TxDrop::ALL {
                all.push(TX_DROPS.reading(&node, r.name(), c.tx_drops.get(r)));
            }
        }
        all
    }

    /// Reads a sysctl: `kern.polling.*`, `net.inet.ip.*` or `dev.<if>.*`.
    pub fn sysctl_get(&self, name: &str) -> Option<String> {
        self.sysctl_entries(name)
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.value)
    }

    /// Every entry under `prefix` (a whole name, a subtree like `kern.polling`, or `""`).
    pub fn sysctl_entries(&self, prefix: &str) -> Vec<SysctlEntry> {
        let dotted = format!("{prefix}.");
        self.readings()
            .into_iter()
            .map(SysctlEntry::from)
            .filter(|e| prefix.is_empty() || e.name == prefix || e.name.starts_with(&dotted))
            .collect()
    }

    /// Writes a sysctl with validation; a rejected write changes nothing.
    pub fn sysctl_set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        if let Some(result) = write(NODE, self, &Self::ENABLE_OIDS, name, value) {
            return result;
        }
        if name.starts_with(&format!("{NODE}.")) {
            return self.poller.set_knob(name, value);
        }
        if let Some(result) = write(IP_NODE, self, &Self::IP_OIDS, name, value) {
            return result;
        }
        if let Some(i) = self.interface_of(name) {
            let node = format!("{DEV_NODE}.{}", self.devs.ifs[i].dev.name());
            let mut settings = self.settings(i);
            if let Some(oid) = find(&node, IfSettings::OIDS, name) {
                (oid.write).apply(&mut settings, name, value)?;
                let switch = oid.name == IfSettings::MODE.name;
                return self.apply_settings(i, settings, switch, name, value);
            }
        }
        if self.sysctl_get(name).is_some() {
            return Err(KnobError::ReadOnly {
                name: name.to_string(),
            });
        }
        Err(KnobError::Unknown {
            name: name.to_string(),
        })
    }

    /// The interface a `dev.<if>.<leaf>` name is under (an interface name may hold dots).
    fn interface_of(&self, name: &str) -> Option<usize> {
        let (node, _) = name.rsplit_once('.')?;
        self.index_of(node.strip_prefix(DEV_NODE)?.strip_prefix('.')?)
    }

    /// Applies validated settings to interface `i`; a write of its mode (`switch`) goes
    /// through [`Dataplane::set_mode`], which registers it with the poller.
    fn apply_settings(
        &mut self,
        i: usize,
        settings: IfSettings,
        switch: bool,
        name: &str,
        value: &str,
    ) -> Result<(), KnobError> {
        if switch {
            self.set_mode(i, settings.mode)
                .map_err(|e| KnobError::Invalid {
                    name: name.to_string(),
                    value: value.to_string(),
                    allowed: e.to_string(),
                })?;
        }
        self.devs.ifs[i].rx_process_limit = settings.rx_process_limit;
        Ok(())
    }
}
