//! The interfaces' devices' own receive interrupts, sampled from `/proc/interrupts` once
//! a second: `dev.<if>.device_interrupts` (and `_per_s`) beside polld's own wakeups
//! (`dev.<if>.interrupts`), in `polld stat`, `polld ifconfig` and `/metrics`.

use polld_control::proto::DeviceInterrupts;
use polld_dev::irq::{self, DeviceIrqs};

/// Samples at least this far apart.
pub const SAMPLE_EVERY_NS: u64 = 1_000_000_000;

/// The last two samples of every interface's receive vectors.
#[derive(Debug, Default)]
pub struct DeviceIrqCounts {
    /// By interface: which vectors to count (`None`: a backend without a device).
    which: Vec<Option<DeviceIrqs>>,
    counted: Vec<Option<DeviceInterrupts>>,
    last_ns: Option<u64>,
}

impl DeviceIrqCounts {
    pub fn new(which: Vec<Option<DeviceIrqs>>) -> DeviceIrqCounts {
        DeviceIrqCounts {
            counted: vec![None; which.len()],
            which,
            last_ns: None,
        }
    }

    /// Reads `/proc/interrupts` if a second has passed since the last sample (or at
    /// the first call). A read error leaves the last counts.
    pub fn sample(&mut self, now_ns: u64) {
        if self
            .last_ns
            .is_some_and(|last| now_ns.saturating_sub(last) < SAMPLE_EVERY_NS)
        {
            return;
        }
        if self.which.iter().all(Option::is_none) {
            return;
        }
        let Ok(lines) = irq::read_proc_interrupts() else {
            return;
        };
        self.update(&lines, now_ns);
    }

    /// Counts each interface's vectors in `lines`, read at `now_ns`.
    fn update(&mut self, lines: &[irq::IrqLine], now_ns: u64) {
        let elapsed = self.last_ns.map(|last| now_ns.saturating_sub(last));
        for (which, counted) in self.which.iter().zip(&mut self.counted) {
            let Some(which) = which else { continue };
            let found = which.count(lines);
            if found.vectors.is_empty() {
                *counted = None;
                continue;
            }
            let per_s = match (counted.as_ref(), elapsed) {
                (Some(before), Some(ns)) if ns > 0 => {
                    Some(found.count.saturating_sub(before.total) * 1_000_000_000 / ns)
                }
                _ => None,
            };
            *counted = Some(DeviceInterrupts {
                vectors: found.vectors,
                total: found.count,
                per_s,
            });
        }
        self.last_ns = Some(now_ns);
    }

    /// Interface `i`'s device interrupts, if its device has receive vectors.
    pub fn get(&self, i: usize) -> Option<&DeviceInterrupts> {
        self.counted.get(i)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_interrupts(input: u64) -> Vec<irq::IrqLine> {
        irq::parse(&format!(
            "           CPU0       CPU1\n 25:  {input}  5   PCI-MSI 49153-edge      virtio0-input.0\n"
        ))
    }

    #[test]
    fn the_rate_is_the_difference_over_the_time_between_samples() {
        let eth0 = DeviceIrqs {
            ifname: "eth0".into(),
            bus_device: Some("virtio0".into()),
            queue: Some(0),
        };
        let veth = DeviceIrqs {
            ifname: "veth1".into(),
            bus_device: None,
            queue: Some(0),
        };
        let mut counts = DeviceIrqCounts::new(vec![Some(eth0), None, Some(veth)]);
        counts.update(&proc_interrupts(95), 1_000_000_000);
        assert_eq!(
            counts.get(0),
            Some(&DeviceInterrupts {
                vectors: vec!["virtio0-input.0".into()],
                total: 100,
                per_s: None,
            })
        );
        counts.update(&proc_interrupts(395), 3_000_000_000);
        assert_eq!(counts.get(0).unwrap().per_s, Some(150));
        assert_eq!(counts.get(0).unwrap().total, 400);
        // A TAP (no device) and a veth (no vectors) have nothing to show.
        assert_eq!((counts.get(1), counts.get(2)), (None, None));
    }
}
