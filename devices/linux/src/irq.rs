//! A network device's own receive interrupts, counted from `/proc/interrupts`: what seed
//! 001's systat screen shows falling to about zero when polling starts.
//!
//! Each line of `/proc/interrupts` is an interrupt number, one count per CPU, the
//! controller's columns and the names of the handlers on it. A NIC names its queues'
//! vectors after itself:
//! - virtio-net after its virtio device, which `/sys/class/net/IF/device` links to:
//!   `virtio0-input.0` (receive queue 0), `virtio0-output.0`, `virtio0-config`; without
//!   MSI-X one shared line named `virtio0`;
//! - most NIC drivers after the interface: `eth0-TxRx-0` (igb, ixgbe, i40e, bnxt),
//!   `eth0-rx-0` and `eth0-tx-0` (e1000e, igb), `ice-eth0-TxRx-0`;
//! - some after the PCI address the device link names: `mlx5_comp0@pci:0000:03:00.0`.
//!
//! [`DeviceIrqs::find`] decides once which handler names are a queue's receive vectors;
//! [`DeviceIrqs::count`] sums their counts over every CPU in a `/proc/interrupts` text.
//! Transmit-only and configuration vectors are left out. Parsing is pure; only `find`
//! and [`read_proc_interrupts`] touch the system.

use std::path::Path;

/// One line of `/proc/interrupts`: the interrupt, its count on each CPU, its handlers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrqLine {
    /// `38`, or `NMI`, `LOC`, ... for the architecture's own.
    pub irq: String,
    pub per_cpu: Vec<u64>,
    /// The handlers' names (`virtio0-input.0`); several on a shared line.
    pub names: Vec<String>,
}

impl IrqLine {
    pub fn total(&self) -> u64 {
        self.per_cpu.iter().sum()
    }
}

/// The lines of a `/proc/interrupts` text; the header gives the number of CPU columns.
pub fn parse(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let cpus = lines
        .next()
        .map_or(0, |header| header.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (irq, rest) = line.split_once(':')?;
            let mut fields = rest.split_whitespace().peekable();
            let mut per_cpu = Vec::with_capacity(cpus);
            while per_cpu.len() < cpus {
                match fields.peek().and_then(|f| f.parse::<u64>().ok()) {
                    Some(n) => {
                        per_cpu.push(n);
                        fields.next();
                    }
                    None => break,
                }
            }
            // After the counts: the controller, the hardware irq and trigger, then the
            // handlers (`a, b` when shared). The names are the last words, commas split.
            let tail: Vec<&str> = fields.collect();
            let names = handler_names(&tail);
            Some(IrqLine {
                irq: irq.trim().to_string(),
                per_cpu,
                names,
            })
        })
        .collect()
}

/// The handler names at the end of a line's columns after the counts: the words after
/// the controller's (the first word, and those ending in `-edge`/`-level`/`-fasteoi`),
/// with the commas of a shared line removed.
fn handler_names(tail: &[&str]) -> Vec<String> {
    let trigger = |w: &str| {
        ["edge", "level", "fasteoi", "Edge", "Level"]
            .iter()
            .any(|t| w.ends_with(t))
    };
    let start = match tail.iter().rposition(|w| trigger(w)) {
        Some(i) => i + 1,
        // Architecture lines (`LOC: ... Local timer interrupts`): a description.
        None => tail.len(),
    };
    tail[start..]
        .iter()
        .map(|w| w.trim_end_matches(',').to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Which handler names are the receive vectors of one queue of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceIrqs {
    pub ifname: String,
    /// What `/sys/class/net/IF/device` links to: `virtio0`, `0000:03:00.0`; `None` for a
    /// virtual device (veth, TAP), which raises no interrupts of its own.
    pub bus_device: Option<String>,
    /// The receive queue; `None`: every queue.
    pub queue: Option<u32>,
}

impl DeviceIrqs {
    /// The receive vectors of `queue` of `ifname` (of the calling thread's namespace),
    /// as sysfs describes it; `None` when sysfs shows another namespace's interface of
    /// that name (sysfs shows the namespace that mounted it), whose vectors these are not.
    pub fn find(ifname: &str, queue: Option<u32>) -> Option<DeviceIrqs> {
        let dir = Path::new(crate::irq_defer::SYSFS_NET).join(ifname);
        let shown = std::fs::read_to_string(dir.join("ifindex")).ok()?;
        if shown.trim().parse::<u32>().ok() != crate::napi::ifindex(ifname).ok() {
            return None;
        }
        let bus_device = std::fs::read_link(dir.join("device"))
            .ok()
            .and_then(|target| Some(target.file_name()?.to_str()?.to_string()));
        Some(DeviceIrqs {
            ifname: ifname.to_string(),
            bus_device,
            queue,
        })
    }

    /// Whether handler `name` is a receive vector of this queue (or, for a line shared by
    /// every queue, of all of them).
    pub fn is_receive_vector(&self, name: &str) -> bool {
        let matched = self
            .bus_device
            .as_deref()
            .and_then(|bus| match_virtio(name, bus).or_else(|| match_pci(name, bus)))
            .or_else(|| match_ifname(name, &self.ifname));
        match matched {
            Some(Vector {
                receives: true,
                queue,
            }) => match (self.queue, queue) {
                (Some(want), Some(q)) => want == q,
                _ => true,
            },
            _ => false,
        }
    }

    /// The receive vectors' lines of a `/proc/interrupts` text: their handler names and
    /// their summed count over every CPU.
    pub fn count(&self, lines: &[IrqLine]) -> RxInterrupts {
        let mut found = RxInterrupts::default();
        for line in lines {
            if let Some(name) = line.names.iter().find(|n| self.is_receive_vector(n)) {
                found.vectors.push(name.clone());
                found.count += line.total();
            }
        }
        found
    }
}

/// A queue's receive interrupts: which vectors, and how many since boot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxInterrupts {
    pub vectors: Vec<String>,
    pub count: u64,
}

/// What a handler name says of itself: whether it receives, and for which queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Vector {
    receives: bool,
    queue: Option<u32>,
}

/// virtio: `virtio0-input.3` receives on queue 3, `virtio0-output.3` and
/// `virtio0-config` do not, `virtio0` alone (INTx, no MSI-X) serves everything.
fn match_virtio(name: &str, bus: &str) -> Option<Vector> {
    if !bus.starts_with("virtio") {
        return None;
    }
    let rest = name.strip_prefix(bus)?;
    if rest.is_empty() {
        return Some(Vector {
            receives: true,
            queue: None,
        });
    }
    let rest = rest.strip_prefix('-')?;
    // `virtio0-input` without a queue is a virtio input device (a keyboard), not a NIC.
    match rest.split_once('.') {
        Some(("input", q)) => Some(Vector {
            receives: true,
            queue: Some(q.parse().ok()?),
        }),
        _ => Some(Vector {
            receives: false,
            queue: None,
        }),
    }
}

/// A PCI NIC that names its vectors after its address: `mlx5_comp3@pci:0000:03:00.0`.
fn match_pci(name: &str, bus: &str) -> Option<Vector> {
    let (what, at) = name.split_once('@')?;
    if at.strip_prefix("pci:")? != bus {
        return None;
    }
    Some(classify(what))
}

/// A vector named after the interface: `eth0`, `eth0-TxRx-0`, `eth0-rx-0`,
/// `ice-eth0-TxRx-0`.
fn match_ifname(name: &str, ifname: &str) -> Option<Vector> {
    if name == ifname {
        return Some(Vector {
            receives: true,
            queue: None,
        });
    }
    let at = if name.starts_with(&format!("{ifname}-")) {
        0
    } else {
        name.find(&format!("-{ifname}-"))? + 1
    };
    Some(classify(&name[at + ifname.len()..]))
}

/// Receives unless it says only `tx`; the queue is its last number.
fn classify(what: &str) -> Vector {
    let lower = what.to_ascii_lowercase();
    let transmit_only = lower.contains("tx") && !lower.contains("rx");
    let config = ["async", "ctrl", "config", "misc", "link"]
        .iter()
        .any(|w| lower.contains(w));
    let digits: String = lower
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Vector {
        receives: !transmit_only && !config,
        queue: digits.parse().ok(),
    }
}

/// `/proc/interrupts`, parsed.
pub fn read_proc_interrupts() -> std::io::Result<Vec<IrqLine>> {
    Ok(parse(&std::fs::read_to_string("/proc/interrupts")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Debian 6.1 cloud guest with two virtio-net NICs (eth0 → virtio0, eth1 →
    /// virtio1), one vCPU.
    const GUEST: &str = "           CPU0       
  0:         36   IO-APIC   2-edge      timer
  1:          9   IO-APIC   1-edge      i8042
  4:        412   IO-APIC   4-edge      ttyS0
  9:          0   IO-APIC   9-fasteoi   acpi
 11:          0   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2
 24:          0   PCI-MSI 49152-edge      virtio0-config
 25:      14475   PCI-MSI 49153-edge      virtio0-input.0
 26:         21   PCI-MSI 49154-edge      virtio0-output.0
 27:          0   PCI-MSI 65536-edge      virtio1-config
 28:         35   PCI-MSI 65537-edge      virtio1-input.0
 29:       3964   PCI-MSI 65538-edge      virtio1-output.0
NMI:          0   Non-maskable interrupts
LOC:      51234   Local timer interrupts
ERR:          0
MIS:          0
";

    /// This machine's host (kernel 6.18, two CPUs): eth0 is virtio2; virtio4 is a virtio
    /// input device whose vector is named `virtio4-input`.
    const HOST: &str = "           CPU0       CPU1       
 26:          0         12  IO-APIC   4-edge      ttyS0
 28:          0          0 PCI-MSIX-0000:00:01.0   0-edge      virtio0-config
 34:         22          0 PCI-MSIX-0000:00:05.0   1-edge      virtio4-input
 37:          0          0 PCI-MSIX-0000:00:03.0   0-edge      virtio2-config
 38:          0       2234 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       1434          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
 41:       2031          0 PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
";

    /// A two-CPU server with an igb, an i40e and a ConnectX NIC.
    const SERVER: &str = "            CPU0       CPU1       
 120:          1          0  PCI-MSI 1048576-edge      eth0
 121:       1000        200  PCI-MSI 1048577-edge      eth0-TxRx-0
 122:         10         20  PCI-MSI 1048578-edge      eth0-TxRx-1
 130:          5          5  PCI-MSI 2097152-edge      eth1-rx-0
 131:          7          7  PCI-MSI 2097153-edge      eth1-tx-0
 140:          0          3  IR-PCI-MSI 3145728-edge      ice-eth2-TxRx-0
 150:          0          0  PCI-MSIX-0000:03:00.0   0-edge      mlx5_async0@pci:0000:03:00.0
 151:         40          2  PCI-MSIX-0000:03:00.0   1-edge      mlx5_comp0@pci:0000:03:00.0
 152:          4          4  PCI-MSIX-0000:03:00.0   2-edge      mlx5_comp1@pci:0000:03:00.0
";

    fn irqs(ifname: &str, bus: Option<&str>, queue: Option<u32>) -> DeviceIrqs {
        DeviceIrqs {
            ifname: ifname.into(),
            bus_device: bus.map(str::to_string),
            queue,
        }
    }

    #[test]
    fn lines_give_each_cpu_s_count_and_the_handler_names() {
        let lines = parse(HOST);
        assert_eq!(lines.len(), 7);
        assert_eq!(
            lines[4],
            IrqLine {
                irq: "38".into(),
                per_cpu: vec![0, 2234],
                names: vec!["virtio2-input.0".into()],
            }
        );
        let guest = parse(GUEST);
        let shared = guest.iter().find(|l| l.irq == "11").unwrap();
        assert_eq!(shared.names, ["uhci_hcd:usb1", "virtio2"]);
        let loc = guest.iter().find(|l| l.irq == "LOC").unwrap();
        assert_eq!((loc.total(), loc.names.len()), (51234, 0));
        assert_eq!(guest.iter().find(|l| l.irq == "ERR").unwrap().total(), 0);
    }

    #[test]
    fn a_virtio_nic_counts_its_input_vector_only() {
        let lines = parse(GUEST);
        let eth0 = irqs("eth0", Some("virtio0"), Some(0)).count(&lines);
        assert_eq!(eth0.vectors, ["virtio0-input.0"]);
        assert_eq!(eth0.count, 14475);
        let eth1 = irqs("eth1", Some("virtio1"), None).count(&lines);
        assert_eq!((eth1.vectors.len(), eth1.count), (1, 35));
        // Another queue has no vector here; a shared INTx line counts for every queue.
        assert_eq!(
            irqs("eth0", Some("virtio0"), Some(1)).count(&lines).count,
            0
        );
        let intx = irqs("eth2", Some("virtio2"), Some(0)).count(&lines);
        assert_eq!(intx.vectors, ["virtio2"]);
    }

    #[test]
    fn a_virtio_input_device_and_other_virtio_devices_are_not_the_nic() {
        let lines = parse(HOST);
        let eth0 = irqs("eth0", Some("virtio2"), Some(0)).count(&lines);
        assert_eq!(eth0.vectors, ["virtio2-input.0"]);
        assert_eq!(eth0.count, 2234);
        assert!(!irqs("x", Some("virtio4"), None).is_receive_vector("virtio4-input"));
        assert!(!irqs("x", Some("virtio3"), None).is_receive_vector("virtio3-rx"));
        assert!(!irqs("x", Some("virtio2"), None).is_receive_vector("virtio22-input.0"));
    }

    #[test]
    fn nic_drivers_name_their_queues_after_the_interface_or_the_pci_address() {
        let lines = parse(SERVER);
        let igb = irqs("eth0", Some("0000:01:00.0"), Some(1)).count(&lines);
        // The line named `eth0` alone (link and misc on igb) may carry receive work
        // when there is no per-queue vector: it is counted for every queue.
        assert_eq!(igb.vectors, ["eth0", "eth0-TxRx-1"]);
        assert_eq!(igb.count, 1 + 30);
        let e1000e = irqs("eth1", None, None).count(&lines);
        assert_eq!(
            (e1000e.vectors, e1000e.count),
            (vec!["eth1-rx-0".into()], 10)
        );
        assert_eq!(irqs("eth2", None, Some(0)).count(&lines).count, 3);
        let mlx = irqs("eth3", Some("0000:03:00.0"), Some(0)).count(&lines);
        assert_eq!(
            (mlx.vectors, mlx.count),
            (vec!["mlx5_comp0@pci:0000:03:00.0".into()], 42)
        );
        // A name that only contains the interface's as a part of another word is not it.
        assert!(!irqs("eth1", None, None).is_receive_vector("veth1-rx-0"));
        assert!(!irqs("eth", None, None).is_receive_vector("eth0-TxRx-0"));
    }

    #[test]
    fn a_virtual_device_has_no_vectors() {
        assert_eq!(
            irqs("veth1", None, Some(0)).count(&parse(HOST)),
            RxInterrupts::default()
        );
    }
}
