//! The dataplane's sysctl tree: `kern.polling.enable`, the poller's `kern.polling.*`,
//! `net.inet.ip.*` and `dev.<if>.*`, read and written with validation.

use crate::device::{Device, TxDrop};
use crate::knobs::{in_range, parse_int, KnobError};
use crate::poll::SysctlEntry;
use crate::stage::{DropReason, PacketStage};

use super::{Dataplane, Mode};

/// The global polling switch: a view of the interfaces' modes, so the dataplane's.
pub const ENABLE: &str = "kern.polling.enable";

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Reads a sysctl: `kern.polling.*`, `net.inet.ip.*` or `dev.<if>.*`.
    pub fn sysctl_get(&self, name: &str) -> Option<String> {
        self.sysctl_entries(name)
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.value)
    }

    /// Every entry under `prefix` (a whole name, a subtree like `kern.polling`, or `""`).
    pub fn sysctl_entries(&self, prefix: &str) -> Vec<SysctlEntry> {
        let entry = |name: &str, value: String, descr: &str, writable: bool| SysctlEntry {
            name: name.to_string(),
            value,
            descr: descr.to_string(),
            writable,
        };
        // First, where FreeBSD listed it.
        let mut all = vec![entry(
            ENABLE,
            (self.polling_enabled() as u8).to_string(),
            "Polling on every interface: 1 polls all, 0 takes all out (FreeBSD 6 compatibility; per interface: polld ifconfig IF polling)",
            true,
        )];
        all.extend(self.poller.entries());
        all.push(entry(
            "net.inet.ip.fastforwarding",
            (self.devs.fastforwarding as u8).to_string(),
            "Process frames in the receive handler instead of the input queue",
            true,
        ));
        all.push(entry(
            "net.inet.ip.intr_queue_maxlen",
            self.devs.queue.maxlen().to_string(),
            "Maximum size of the IP input queue",
            true,
        ));
        all.push(entry(
            "net.inet.ip.intr_queue_len",
            self.devs.queue.len().to_string(),
            "Frames in the IP input queue",
            false,
        ));
        for (name, value, descr) in self.devs.stage.sysctl_counters() {
            let name = format!("net.inet.ip.{name}");
            all.push(entry(&name, value.to_string(), descr, false));
        }
        for (iface, link) in self.devs.ifs.iter().zip(&self.devs.links) {
            let c = &iface.counters;
            let p = format!("dev.{}.", iface.dev.name());
            let n = |s: &str| format!("{p}{s}");
            all.push(entry(
                &n("mode"),
                iface.mode.name().into(),
                "interrupt|polling|adaptive|busy|auto",
                true,
            ));
            all.push(entry(
                &n("rx_process_limit"),
                iface.rx_process_limit.to_string(),
                "Adaptive mode: frames per task run, -1 unlimited",
                true,
            ));
            all.push(entry(&n("link"), link.name().into(), "Link state", false));
            for (k, v, d) in [
                ("interrupts", c.interrupts, "Interrupts (wakeups) taken"),
                ("polls", c.polls, "Poll handler calls"),
                (
                    "empty_polls",
                    c.empty_polls,
                    "Poll calls that found nothing",
                ),
                ("tasks", c.tasks, "Adaptive task runs"),
                (
                    "auto_switches",
                    c.auto_switches,
                    "Auto mode: switches between interrupts and polling",
                ),
                (
                    "auto_polling",
                    iface.auto_polling as u64,
                    "Auto mode: 1 while the interface polls, 0 on interrupts",
                ),
                ("rx_packets", c.rx_packets, "Frames received"),
                ("tx_packets", c.tx_packets, "Frames transmitted"),
                (
                    "forwarded",
                    c.forwarded,
                    "Frames received here and forwarded",
                ),
                ("local", c.local, "Frames received here for the box"),
                ("consumed", c.consumed, "Frames used up by polld (ARP)"),
                (
                    "generated",
                    c.generated,
                    "Frames polld generated here (ARP, ICMP)",
                ),
                (
                    "generated_dropped",
                    c.generated_dropped,
                    "Generated frames dropped, tx ring full",
                ),
                (
                    "queued",
                    c.queued,
                    "Frames received here waiting in the input queue",
                ),
            ] {
                all.push(entry(&n(k), v.to_string(), d, false));
            }
            for r in DropReason::all(self.devs.stage.drop_reasons()) {
                all.push(entry(
                    &n(&format!("drops.{}", r.name())),
                    c.drops.get(r).to_string(),
                    "Frames dropped, by reason",
                    false,
                ));
            }
            for r in TxDrop::ALL {
                all.push(entry(
                    &n(&format!("tx_drops.{}", r.name())),
                    c.tx_drops.get(r).to_string(),
                    "Frames the device accepted for transmission and then dropped, by reason",
                    false,
                ));
            }
        }
        let dotted = format!("{prefix}.");
        all.retain(|e| prefix.is_empty() || e.name == prefix || e.name.starts_with(&dotted));
        all
    }

    /// Writes a sysctl with validation; a rejected write changes nothing.
    pub fn sysctl_set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        if name == ENABLE {
            return self.set_polling_enable(name, value);
        }
        if name.starts_with("kern.polling.") {
            return self.poller.set_knob(name, value);
        }
        match name {
            "net.inet.ip.fastforwarding" => {
                self.devs.fastforwarding = in_range(name, parse_int(name, value)?, 0, 1)? == 1;
                return Ok(());
            }
            "net.inet.ip.intr_queue_maxlen" => {
                let maxlen = in_range(name, parse_int(name, value)?, 1, 65_536)?;
                self.devs.queue.set_maxlen(maxlen as usize);
                return Ok(());
            }
            _ => {}
        }
        if let Some(rest) = name.strip_prefix("dev.") {
            if let Some((ifname, leaf)) = rest.rsplit_once('.') {
                if let Some(i) = self.index_of(ifname) {
                    return self.set_interface_knob(i, name, leaf, value);
                }
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

    fn set_interface_knob(
        &mut self,
        i: usize,
        name: &str,
        leaf: &str,
        value: &str,
    ) -> Result<(), KnobError> {
        match leaf {
            "mode" => {
                let mode: Mode = value.parse().map_err(|_| KnobError::NotANumber {
                    name: name.to_string(),
                    value: value.to_string(),
                    expected: "interrupt, polling, adaptive, busy or auto".to_string(),
                })?;
                self.set_mode(i, mode).map_err(|e| KnobError::Invalid {
                    name: name.to_string(),
                    value: value.to_string(),
                    allowed: e.to_string(),
                })
            }
            "rx_process_limit" => {
                let v = parse_int(name, value)?;
                if v == 0 || v < -1 {
                    return Err(KnobError::Invalid {
                        name: name.to_string(),
                        value: value.to_string(),
                        allowed: "-1 (unlimited) or 1 and above".to_string(),
                    });
                }
                self.devs.ifs[i].rx_process_limit = v;
                Ok(())
            }
            _ if self.sysctl_get(name).is_some() => Err(KnobError::ReadOnly {
                name: name.to_string(),
            }),
            _ => Err(KnobError::Unknown {
                name: name.to_string(),
            }),
        }
    }
}
