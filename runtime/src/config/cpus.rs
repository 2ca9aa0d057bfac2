//! The poll CPUs (`[daemon] cpus`): each interface or queue assigned its CPU, and the
//! config split into the part each CPU runs; and the check that a shared UMEM has a poll
//! thread with two AF_XDP interfaces to share it.

use std::net::IpAddr;

use polld_packet::PacketConfig;

use super::errors::interface_error;
use super::{Backend, DaemonConfig, DeviceConfig, KnobSetting, RunConfig};

/// An explicit `af_xdp_shared_umem = true` needs two AF_XDP interfaces on one poll thread
/// to share anything: otherwise it says which interfaces cannot.
pub(crate) fn check_shared_umem(
    daemon: &DaemonConfig,
    devices: &[DeviceConfig],
) -> Result<(), String> {
    if daemon.af_xdp_shared_umem != Some(true) {
        return Ok(());
    }
    let af_xdp = |cpu: Option<usize>| {
        devices
            .iter()
            .filter(|d| d.backend == Backend::AfXdp && d.cpu == cpu)
            .count()
    };
    let threads: Vec<Option<usize>> = if daemon.cpus.is_empty() {
        vec![None]
    } else {
        daemon.cpus.iter().map(|&c| Some(c)).collect()
    };
    if threads.iter().any(|&cpu| af_xdp(cpu) >= 2) {
        return Ok(());
    }
    let others: Vec<String> = devices
        .iter()
        .filter(|d| d.backend != Backend::AfXdp)
        .map(|d| format!("{} is {}", d.name, d.backend.name()))
        .collect();
    let why = if others.is_empty() {
        "no poll thread has two of them".to_string()
    } else {
        others.join(", ")
    };
    Err(format!(
        "daemon.af_xdp_shared_umem: true, and a UMEM is shared by AF_XDP sockets only, and needs \
         two or more interfaces with backend = \"af_xdp\" polled by one thread ({why}); \
         use backend = \"af_xdp\", or remove af_xdp_shared_umem"
    ))
}

/// With `[daemon] cpus`, sets each device's poll CPU (its `cpu`, else round-robin);
/// without, refuses an interface `cpu`. A bridge floods to every port, and polld does not
/// hand frames between CPUs, so its ports must share one CPU. The error names the field.
pub(super) fn assign_cpus(
    daemon: &DaemonConfig,
    devices: &mut [DeviceConfig],
    packet: &PacketConfig,
) -> Result<(), (String, String)> {
    if daemon.cpus.is_empty() {
        if let Some(i) = devices.iter().position(|d| !d.queues.is_empty()) {
            let key = devices[i].backend.queues_key();
            let why = format!(
                "each queue is polled by its own CPU, and there is one poll thread; list the \
                 poll CPUs in [daemon] cpus = [..], or remove `{key}` here"
            );
            return Err(interface_error(i, key, why));
        }
        if let Some(i) = devices.iter().position(|d| d.cpu.is_some()) {
            let why = "there is one poll thread; list the poll CPUs in [daemon] cpus = [..] to \
                       poll interfaces on several CPUs, or remove `cpu` here";
            return Err(interface_error(i, "cpu", why.to_string()));
        }
        return Ok(());
    }
    if daemon.cpu.is_some() {
        let message = "daemon.cpu: `cpu` pins the one poll thread, and `cpus` starts one per \
                       CPU; keep one of them"
            .to_string();
        return Err(("daemon.cpu".to_string(), message));
    }
    for (i, d) in devices.iter_mut().enumerate() {
        d.queue_cpus = queue_cpus(i, d, &daemon.cpus)?;
    }
    let whole: Vec<usize> = (0..devices.len())
        .filter(|&i| devices[i].queues.is_empty())
        .collect();
    let wanted: Vec<Option<usize>> = whole.iter().map(|&i| devices[i].cpu).collect();
    let assigned = polld_core::ifpoll::assign(&daemon.cpus, &wanted).map_err(|e| {
        let field = match &e {
            polld_core::ifpoll::AssignError::NotAPollCpu { index, .. } => {
                format!("interfaces[{}].cpu", whole[*index])
            }
            _ => "daemon.cpus".to_string(),
        };
        let message = match e {
            polld_core::ifpoll::AssignError::NotAPollCpu { cpu, cpus, .. } => format!(
                "{field}: CPU {cpu} is not a poll CPU; the poll CPUs are {cpus:?} ([daemon] \
                 cpus): add {cpu} there or pick one of them"
            ),
            e => format!("daemon.cpus: {e}"),
        };
        (field, message)
    })?;
    for (&i, cpu) in whole.iter().zip(&assigned) {
        devices[i].cpu = Some(*cpu);
    }
    let polled = |c: &usize| {
        devices
            .iter()
            .any(|d| d.cpu == Some(*c) || d.queue_cpus.contains(c))
    };
    if let Some(idle) = daemon.cpus.iter().find(|c| !polled(c)) {
        let message = format!(
            "daemon.cpus: CPU {idle} polls no interface; remove it from `cpus`, or give an \
             interface `cpu = {idle}`"
        );
        return Err(("daemon.cpus".to_string(), message));
    }
    if packet.mode == polld_packet::Mode::Bridge {
        if let Some(i) = devices.iter().position(|d| !d.queues.is_empty()) {
            let key = devices[i].backend.queues_key();
            let why = format!(
                "a bridge floods to every port and polld does not hand frames between poll \
                 CPUs, so a bridge port is polled whole by one CPU; remove `{key}` from {}",
                devices[i].name
            );
            return Err(interface_error(i, key, why));
        }
        if let Some(i) = assigned.iter().position(|c| *c != assigned[0]) {
            let why = format!(
                "a bridge floods to every port and polld does not hand frames between poll \
                 CPUs; {} is on CPU {} and {} on CPU {}: give every port the same `cpu`",
                devices[0].name, assigned[0], devices[i].name, assigned[i]
            );
            return Err(interface_error(i, "cpu", why));
        }
    }
    Ok(())
}

/// The poll CPU of each queue of device `i`: its `cpus` (one per queue, each a poll CPU,
/// no CPU twice), else the poll CPUs in order. A CPU polls at most one queue of an
/// interface, so there are at most as many queues as poll CPUs.
fn queue_cpus(i: usize, d: &DeviceConfig, cpus: &[usize]) -> Result<Vec<usize>, (String, String)> {
    let n = d.queues.len();
    let key = d.backend.queues_key();
    let refuse = |key: &str, why: String| Err(interface_error(i, key, why));
    if n > cpus.len() {
        return refuse(
            key,
            format!(
                "{n} queues on {} poll CPU(s) ([daemon] cpus = {cpus:?}); each CPU polls one \
                 queue of an interface: at most {}, or add CPUs to [daemon] cpus",
                cpus.len(),
                cpus.len()
            ),
        );
    }
    if d.queue_cpus.is_empty() {
        return Ok(cpus[..n].to_vec());
    }
    if d.queue_cpus.len() != n {
        return refuse(
            "cpus",
            format!(
                "{} CPU(s) for {n} queue(s); list one CPU per queue, in the order of `{key}`",
                d.queue_cpus.len()
            ),
        );
    }
    for (k, cpu) in d.queue_cpus.iter().enumerate() {
        if !cpus.contains(cpu) {
            return refuse(
                "cpus",
                format!(
                    "CPU {cpu} is not a poll CPU; the poll CPUs are {cpus:?} ([daemon] cpus): \
                     add {cpu} there or pick one of them"
                ),
            );
        }
        if d.queue_cpus[..k].contains(cpu) {
            return refuse(
                "cpus",
                format!("CPU {cpu} is listed twice; each CPU polls one queue of an interface"),
            );
        }
    }
    Ok(d.queue_cpus.clone())
}

impl RunConfig {
    /// The poll CPUs (`[daemon] cpus`), each with the part of this config it runs: its
    /// interfaces, and the routes and static ARP entries whose addresses are on their
    /// networks. Every CPU is a router of its own interfaces (polld does not hand frames
    /// between CPUs): a frame for a network on another CPU is dropped as `no_route`. An
    /// interface with queues is in the part of every CPU that polls one of them.
    pub fn per_cpu(&self) -> Vec<(usize, RunConfig)> {
        self.daemon
            .cpus
            .iter()
            .map(|&cpu| {
                let mine: Vec<bool> = self
                    .devices
                    .iter()
                    .map(|d| d.cpu == Some(cpu) || d.queue_cpus.contains(&cpu))
                    .collect();
                let on_mine = |ip: IpAddr| {
                    self.packet
                        .interfaces
                        .iter()
                        .zip(&mine)
                        .any(|(ifc, &m)| m && ifc.addresses.iter().any(|a| a.contains(ip)))
                };
                let mut part = self.clone();
                part.devices = pick(&self.devices, &mine);
                for d in &mut part.devices {
                    d.this_queue = d.queue_cpus.iter().position(|&c| c == cpu);
                }
                part.packet.interfaces = pick(&self.packet.interfaces, &mine);
                part.packet.routes.retain(|r| on_mine(r.gateway));
                part.packet.static_arp.retain(|a| on_mine(a.ip));
                part.knobs = self
                    .knobs
                    .iter()
                    .filter_map(|k| self.knob_for_cpu(k, cpu, &part.devices))
                    .collect();
                (cpu, part)
            })
            .collect()
    }

    /// A `[knobs]` write as poll CPU `cpu` applies it: `net.ifpoll.N.*` as the
    /// `kern.polling.*` of CPU N only, `dev.<if>.*` on the CPU of that interface only,
    /// anything else (`kern.polling.*` included) on every CPU. A name no CPU would take
    /// goes to the first one, which refuses it by name.
    fn knob_for_cpu(
        &self,
        k: &KnobSetting,
        cpu: usize,
        mine: &[DeviceConfig],
    ) -> Option<KnobSetting> {
        let first = self.daemon.cpus.first() == Some(&cpu);
        if let Some((n, kern)) = polld_core::ifpoll::kern_name(&k.name) {
            if !self.daemon.cpus.contains(&n) {
                return first.then(|| k.clone());
            }
            return (n == cpu).then(|| KnobSetting {
                name: kern,
                ..k.clone()
            });
        }
        if let Some(rest) = k.name.strip_prefix("dev.") {
            let ifname = rest.rsplit_once('.').map_or(rest, |(i, _)| i);
            let known = self.devices.iter().any(|d| d.name == ifname);
            let here = mine.iter().any(|d| d.name == ifname);
            return (here || (!known && first)).then(|| k.clone());
        }
        Some(k.clone())
    }
}

/// The items of `all` whose flag in `mine` is set.
fn pick<T: Clone>(all: &[T], mine: &[bool]) -> Vec<T> {
    all.iter()
        .zip(mine)
        .filter(|(_, &m)| m)
        .map(|(x, _)| x.clone())
        .collect()
}
