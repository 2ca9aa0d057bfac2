//! Bringing the testbed up and down, running programs inside it, reading its counters.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::process::{Child, Command};

use polld_dev::net_dev;
use serde::Serialize;

use crate::layout::{check_prefix, Devices, Layout, Role};
use crate::links::{build, fwd_setup, host_namespaces, link};
use crate::placement::{self, CpuPlan, Placement, PlacementReport};
use crate::sys::{self, check_cpu, netns_exists, require_root_and_ip};
use crate::vm::{self, GuestState, VmOptions};
use crate::TestbedError;

/// How `up` builds the testbed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UpOptions {
    /// `ip_forward=1` in fwd, for the kernel-forwarding baseline. Off by default: polld
    /// forwards in fwd, and the kernel there must not forward as well.
    pub kernel_forwarding: bool,
    pub placement: Placement,
    pub cpus: CpuPlan,
    /// Delete namespaces of this layout that already exist instead of failing.
    pub force: bool,
    /// The sink's NAPI kthread runs `SCHED_FIFO` above polld's poll thread, as a NIC
    /// transmits without the forwarder's CPU (napi-threaded placement on veth only; see
    /// [`crate::placement`]).
    pub sink_rx_realtime: bool,
}

/// What `up` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UpReport {
    pub layout: Layout,
    pub kernel_forwarding: bool,
    /// Namespaces that existed and were deleted first (`--force`).
    pub replaced: Vec<String>,
    pub placement: PlacementReport,
    /// Settings that could not be applied and did not stop `up`.
    pub warnings: Vec<String>,
    /// TAP pairs added after the first ([`Testbed::add_tap_pair`]), for more poll CPUs.
    pub tap_pairs: Vec<Layout>,
    /// The qemu guest that plays fwd (`--devices vm`).
    pub guest: Option<GuestState>,
    /// On veth, the commands that set up fwd's kernel tables, which polld forwards by
    /// (`tables = "kernel"`), as a user would type them to rebuild fwd by hand.
    pub fwd_setup: Vec<String>,
}

/// What `down` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DownReport {
    pub removed: Vec<String>,
    /// Namespaces that were already gone.
    pub absent: Vec<String>,
    /// The qemu guest that was stopped (`--devices vm`), by its pid.
    pub stopped_guest: Option<u32>,
    /// Removed namespaces that processes still run in, with their pids: such a namespace
    /// (and its veths) lives on until they exit.
    pub still_used_by: Vec<(String, Vec<u32>)>,
}

/// Interface counters, as the kernel reports them (`ip -s link`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IfCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// For a veth: frames the peer's ring had no room for (threaded NAPI), or that the
    /// peer was down for.
    pub tx_dropped: u64,
}

/// A testbed that is up; dropping it tears it down (for tests and demos). Stop the
/// processes you started inside first: a namespace lives on while a process runs in it.
#[derive(Debug)]
pub struct Testbed {
    report: UpReport,
}

impl Testbed {
    /// Creates the namespaces, veths, addresses, routes, static neighbours, sysctls and
    /// placement of `layout` (on veth, IPv4 and IPv6 in every namespace's kernel). Fails naming the namespaces if any already exists, unless
    /// `options.force`. On failure nothing is left behind. A VM layout boots its guest
    /// with [`VmOptions::default`] (see [`Testbed::up_vm`]).
    pub fn up(layout: &Layout, options: &UpOptions) -> Result<Testbed, TestbedError> {
        Testbed::up_with(layout, options, &VmOptions::default())
    }

    /// [`Testbed::up`] of a layout of any devices, with the guest (`--devices vm`) built
    /// and booted as `vm` says.
    pub fn up_vm(
        layout: &Layout,
        options: &UpOptions,
        vm: &VmOptions,
    ) -> Result<Testbed, TestbedError> {
        Testbed::up_with(layout, options, vm)
    }

    fn up_with(
        layout: &Layout,
        options: &UpOptions,
        vm: &VmOptions,
    ) -> Result<Testbed, TestbedError> {
        check_prefix(&layout.prefix).map_err(TestbedError::InvalidPrefix)?;
        require_root_and_ip()?;
        let placement =
            placement::decide(options.placement, options.cpus, options.sink_rx_realtime)?;
        let mut existing: Vec<String> = layout
            .namespaces()
            .into_iter()
            .filter(|ns| netns_exists(ns))
            .map(str::to_string)
            .collect();
        if vm::guest_state(&layout.prefix).is_some() {
            existing.push(format!("guest {}", vm::guest_name(&layout.prefix)));
        }
        if !existing.is_empty() {
            if !options.force {
                return Err(TestbedError::AlreadyExists {
                    namespaces: existing,
                    prefix: layout.prefix.clone(),
                });
            }
            down(layout)?;
        }
        let mut warnings = Vec::new();
        let (namespaces, guest) = match layout.devices {
            Devices::Vm => {
                let namespaces = host_namespaces(layout, options.kernel_forwarding, &mut warnings)?;
                let guest = vm::boot(layout, vm, options.kernel_forwarding, &mut warnings)?;
                (namespaces, Some(guest))
            }
            Devices::Veth | Devices::Tap => (
                build(layout, options.kernel_forwarding, &mut warnings)?,
                None,
            ),
        };
        let placement = placement::apply(layout, placement);
        // Everything is in place: from here on the namespaces belong to this Testbed.
        for ns in namespaces {
            ns.into_name();
        }
        Ok(Testbed {
            report: UpReport {
                layout: layout.clone(),
                kernel_forwarding: options.kernel_forwarding,
                replaced: existing,
                placement,
                warnings,
                tap_pairs: Vec::new(),
                guest,
                fwd_setup: fwd_setup(layout, options.kernel_forwarding),
            },
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.report.layout
    }

    /// Adds the `pair`-th TAP pair ([`Layout::tap_pair`]) to a TAP testbed, in its
    /// namespaces (removed with them); returns its layout.
    pub fn add_tap_pair(&mut self, pair: u8) -> Result<Layout, TestbedError> {
        if self.layout().devices != Devices::Tap {
            return Err(TestbedError::Failed(
                "a second TAP pair needs the TAP testbed (`polld testbed up --devices tap`)"
                    .to_string(),
            ));
        }
        let layout = self.layout().tap_pair(pair);
        link(&layout, &[])?;
        self.report.tap_pairs.push(layout.clone());
        Ok(layout)
    }

    pub fn report(&self) -> &UpReport {
        &self.report
    }

    /// Leaves the testbed up after this value is gone (what `polld testbed up` does);
    /// `down` removes it later.
    pub fn keep(self) -> UpReport {
        let report = self.report.clone();
        std::mem::forget(self);
        report
    }

    /// A command running `program` in namespace `role`, pinned to `cpu` if given; add
    /// arguments and stdio, then spawn it. The child's pid is the program's
    /// (`ip netns exec` execs it).
    pub fn command_in(
        &self,
        role: Role,
        cpu: Option<usize>,
        program: &str,
    ) -> Result<Command, TestbedError> {
        command_in(self.layout().ns(role), cpu, program)
    }

    /// [`command_ahead_in`] in namespace `role`.
    pub fn command_ahead_in(
        &self,
        role: Role,
        cpu: Option<usize>,
        program: &str,
    ) -> Result<Command, TestbedError> {
        command_ahead_in(self.layout().ns(role), cpu, program)
    }

    /// Starts `program ARGS` in namespace `role`, pinned to `cpu` if given.
    pub fn spawn_in(
        &self,
        role: Role,
        cpu: Option<usize>,
        program: &str,
        args: &[&str],
    ) -> Result<Child, TestbedError> {
        self.command_in(role, cpu, program)?
            .args(args)
            .spawn()
            .map_err(|e| {
                TestbedError::Failed(format!(
                    "cannot start `{program}` in namespace {}: {e}",
                    self.layout().ns(role)
                ))
            })
    }

    /// The counters of one of the layout's kernel interfaces (`veth0` … `veth3`, or
    /// `tap0` and `tap1`).
    pub fn counters(&self, iface: &str) -> Result<IfCounters, TestbedError> {
        let layout = self.layout();
        let iface = layout.iface(iface).ok_or_else(|| {
            let names: Vec<&str> = layout
                .kernel_ifaces()
                .iter()
                .map(|i| i.name.as_str())
                .collect();
            TestbedError::Failed(format!(
                "the testbed has no interface {iface}: it has {}",
                names.join(", ")
            ))
        })?;
        counters(&iface.ns, &iface.name)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Err(e) = down(&self.report.layout) {
            log::warn!("tearing down the testbed failed: {e}");
        }
    }
}
/// Deletes the namespaces of `layout` (which deletes their veths). Succeeds when some or
/// all are already gone, e.g. after a crash, and says which were removed.
pub fn down(layout: &Layout) -> Result<DownReport, TestbedError> {
    check_prefix(&layout.prefix).map_err(TestbedError::InvalidPrefix)?;
    require_root_and_ip()?;
    let mut report = DownReport {
        stopped_guest: vm::stop(&layout.prefix)?,
        ..DownReport::default()
    };
    for ns in layout.namespaces() {
        if !netns_exists(ns) {
            report.absent.push(ns.to_string());
            continue;
        }
        let pids: Vec<u32> = sys::run("ip", &["netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
        sys::run("ip", &["netns", "del", ns])?;
        if !pids.is_empty() {
            report.still_used_by.push((ns.to_string(), pids));
        }
        report.removed.push(ns.to_string());
    }
    // A guest played fwd: there was no fwd namespace to remove.
    if report.stopped_guest.is_some() {
        report.absent.retain(|ns| *ns != layout.fwd_ns);
    }
    Ok(report)
}

/// A command running `program` in namespace `ns` (`ip netns exec`), restricted to `cpu`
/// if given: the affinity is set before `ip` execs, and the program inherits it.
pub fn command_in(ns: &str, cpu: Option<usize>, program: &str) -> Result<Command, TestbedError> {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns, program]);
    pin(&mut command, cpu, program)?;
    Ok(command)
}

/// [`command_in`] for a program a CPU-share trial relies on (the competitor, the TAP
/// testbed's generators, an iperf3 client there): it runs in a scheduling group of its own
/// at the highest CFS priority (`setsid`, then an autogroup nice of -20), so that other
/// userland on its CPU (a compile, a `nice` busy loop in a session of its own, which with
/// autogroups would get as much of the CPU as the whole trial) takes only what it leaves;
/// polld's realtime poll thread is above it either way. Not for programs whose kernel
/// work runs in threads of its CPU (a generator on veth, whose frames the receive threads
/// of that CPU carry): a spinning program at this priority would starve them.
pub fn command_ahead_in(
    ns: &str,
    cpu: Option<usize>,
    program: &str,
) -> Result<Command, TestbedError> {
    let mut command = Command::new("setsid");
    command.args([
        "sh",
        "-c",
        "echo -20 > /proc/self/autogroup 2>/dev/null; exec \"$@\"",
        "sh",
        "ip",
        "netns",
        "exec",
        ns,
        program,
    ]);
    pin(&mut command, cpu, program)?;
    Ok(command)
}

/// Restricts `command` (which runs `program`) to `cpu`, if given.
fn pin(command: &mut Command, cpu: Option<usize>, program: &str) -> Result<(), TestbedError> {
    if let Some(cpu) = cpu {
        check_cpu(cpu, &format!("the CPU for `{program}`"))?;
        polld_dev::sys::pin_at_exec(command, cpu);
    }
    Ok(())
}

/// The counters of interface `iface` in namespace `ns`.
pub fn counters(ns: &str, iface: &str) -> Result<IfCounters, TestbedError> {
    let json = sys::ip_in(ns, &["-s", "-j", "link", "show", "dev", iface])?;
    let links: serde_json::Value = serde_json::from_str(&json).map_err(|e| {
        TestbedError::Failed(format!(
            "cannot parse `ip -n {ns} -s -j link show dev {iface}`: {e}"
        ))
    })?;
    counters_of(&links[0]["stats64"]).ok_or_else(|| {
        TestbedError::Failed(format!(
            "`ip -n {ns} -s -j link show dev {iface}` has no stats64: is iproute2 older than 5.x?"
        ))
    })
}

/// The counters in the `stats64` object of `ip -s -j` output.
pub(crate) fn counters_of(stats64: &serde_json::Value) -> Option<IfCounters> {
    let field = |dir: &str, name: &str| stats64.get(dir)?.get(name)?.as_u64();
    Some(IfCounters {
        rx_packets: field("rx", "packets")?,
        rx_bytes: field("rx", "bytes")?,
        rx_dropped: field("rx", "dropped")?,
        tx_packets: field("tx", "packets")?,
        tx_bytes: field("tx", "bytes")?,
        tx_dropped: field("tx", "dropped")?,
    })
}

/// The interface counters of one namespace, read from its `/proc/net/dev` with no process
/// per reading: the file is opened once from a thread inside the namespace and stays bound
/// to it, so each reading is a `read()` in the caller ([`polld_dev::net_dev`]). A bench
/// that samples often uses it instead of [`counters`], whose `ip` process would run on any
/// CPU, the measured one too.
#[derive(Debug)]
pub struct NetDev {
    ns: String,
    file: File,
}

impl NetDev {
    /// Opens namespace `ns`'s `/proc/net/dev`.
    pub fn open(ns: &str) -> Result<NetDev, TestbedError> {
        let cannot = |e: String| {
            TestbedError::Failed(format!("cannot open /proc/net/dev in namespace {ns}: {e}"))
        };
        let file = polld_dev::netns::in_netns(ns, || File::open(net_dev::PATH))
            .map_err(|e| cannot(e.to_string()))?
            .map_err(|e| cannot(e.to_string()))?;
        Ok(NetDev {
            ns: ns.to_string(),
            file,
        })
    }

    /// The counters of `iface` now.
    pub fn counters(&self, iface: &str) -> Result<IfCounters, TestbedError> {
        let mut table = String::new();
        let mut file = &self.file;
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_string(&mut table))
            .map_err(|e| {
                TestbedError::Failed(format!(
                    "reading /proc/net/dev of namespace {}: {e}",
                    self.ns
                ))
            })?;
        let c = net_dev::counters_in(&table, iface).ok_or_else(|| {
            TestbedError::Failed(format!(
                "namespace {} has no interface {iface} (/proc/net/dev)",
                self.ns
            ))
        })?;
        Ok(IfCounters {
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            rx_dropped: c.rx_dropped,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            tx_dropped: c.tx_dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polld_dev::netns::Netns;

    #[test]
    fn net_dev_reads_the_namespace_it_was_opened_in() {
        polld_testsupport::require_root!("needs root to create a namespace");
        let ns = Netns::create("tb-netdev").unwrap();
        let reader = NetDev::open(ns.name()).unwrap();
        assert_eq!(reader.counters("lo").unwrap(), IfCounters::default());
        ns.ip(&["link", "set", "lo", "up"]).unwrap();
        ns.exec("ping", &["-c", "2", "-i", "0.2", "-q", "127.0.0.1"])
            .unwrap();
        // Read from this thread, outside the namespace: still the namespace's lo.
        let lo = reader.counters("lo").unwrap();
        assert_eq!(lo.rx_packets, 4, "2 requests and 2 replies: {lo:?}");
        assert_eq!(lo, counters(ns.name(), "lo").unwrap());
        let err = reader.counters("tap9").unwrap_err().to_string();
        assert!(err.contains("has no interface tap9"), "{err}");
    }
}
