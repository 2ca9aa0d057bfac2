//! `polld testbed status`: what the kernel says about each namespace of a layout, with
//! the placement in force, as text or JSON.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use crate::layout::{Layout, Role};
use crate::napi::napi_of;
use crate::placement::{rps_cpus_path, threaded_path};
use crate::sys::{self, cpus_of, netns_exists};
use crate::testbed::{counters_of, IfCounters};
use crate::vm::{guest_status, GuestStatus};

/// The state of a layout's namespaces.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub prefix: String,
    /// All three namespaces exist and hold their veths, up, with their addresses.
    pub up: bool,
    pub namespaces: Vec<NamespaceStatus>,
    /// The qemu guest that plays fwd (`--devices vm`).
    pub guest: Option<GuestStatus>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NamespaceStatus {
    pub name: String,
    pub role: Role,
    pub exists: bool,
    /// `net.ipv4.ip_forward`: whether the kernel in this namespace forwards.
    pub ip_forward: Option<bool>,
    pub interfaces: Vec<InterfaceStatus>,
    pub neighbours: Vec<Neighbour>,
    /// `ip route` lines, `10.0.2.0/24 via 10.0.1.2 dev veth0`.
    pub routes: Vec<String>,
    /// What could not be read.
    pub errors: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct InterfaceStatus {
    pub name: String,
    /// Administratively up (`ip link set up`).
    pub admin_up: bool,
    /// The kernel's operational state: `UP`, `DOWN`, `LOWERLAYERDOWN`, `UNKNOWN` (lo).
    pub state: String,
    pub mac: String,
    /// IPv4 addresses with prefix, `10.0.1.1/24`.
    pub addresses: Vec<String>,
    pub counters: Option<IfCounters>,
    /// The RPS CPU bitmap of receive queue 0 (`0`: no RPS).
    pub rps_cpus: Option<String>,
    /// Whether NAPI runs in kthreads.
    pub threaded: Option<bool>,
    /// NAPI instances: none unless GRO or XDP is on.
    pub napi: Vec<NapiStatus>,
}

#[derive(Clone, Debug, Serialize)]
pub struct NapiStatus {
    pub id: u32,
    /// The kthread, when threaded.
    pub pid: Option<u32>,
    /// The CPUs the kthread may run on (`1`, `0-1`).
    pub cpus: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Neighbour {
    pub addr: String,
    pub dev: String,
    pub mac: Option<String>,
    /// `PERMANENT` for the static entries `up` adds.
    pub state: Vec<String>,
}

/// Looks at every namespace of `layout`; never fails: what cannot be read is in `errors`.
pub fn status(layout: &Layout) -> Status {
    let namespaces: Vec<NamespaceStatus> = layout
        .host_roles()
        .into_iter()
        .map(|role| namespace_status(layout.ns(role), role))
        .collect();
    let up = layout.kernel_ifaces().into_iter().all(|iface| {
        namespaces.iter().any(|ns| {
            ns.name == iface.ns
                && ns.interfaces.iter().any(|i| {
                    i.name == iface.name && i.admin_up && i.addresses.contains(&iface.cidr())
                })
        })
    });
    let guest = guest_status(&layout.prefix);
    Status {
        prefix: layout.prefix.clone(),
        up: up
            && guest
                .as_ref()
                .is_none_or(|g| g.running && g.error.is_none()),
        namespaces,
        guest,
    }
}

fn namespace_status(name: &str, role: Role) -> NamespaceStatus {
    let mut status = NamespaceStatus {
        name: name.to_string(),
        role,
        exists: netns_exists(name),
        ip_forward: None,
        interfaces: Vec::new(),
        neighbours: Vec::new(),
        routes: Vec::new(),
        errors: Vec::new(),
    };
    if !status.exists {
        return status;
    }
    match ip_json(name, &["-s", "-j", "addr", "show"]) {
        Ok(links) => status.interfaces = links.iter().filter_map(interface_of).collect(),
        Err(e) => status.errors.push(e),
    }
    const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";
    let mut paths = vec![IP_FORWARD.to_string()];
    for iface in &status.interfaces {
        paths.push(rps_cpus_path(&iface.name));
        paths.push(threaded_path(&iface.name));
    }
    match sys::read_files_in(name, &paths) {
        Ok(values) => {
            status.ip_forward = values.get(IP_FORWARD).map(|v| v == "1");
            for iface in &mut status.interfaces {
                iface.rps_cpus = values.get(&rps_cpus_path(&iface.name)).cloned();
                iface.threaded = values.get(&threaded_path(&iface.name)).map(|v| v != "0");
            }
        }
        Err(e) => status.errors.push(e.to_string()),
    }
    for iface in status.interfaces.iter_mut().filter(|i| i.name != "lo") {
        match napi_of(name, &iface.name) {
            Ok(napis) => {
                iface.napi = napis
                    .into_iter()
                    .map(|napi| NapiStatus {
                        id: napi.id,
                        pid: napi.pid,
                        cpus: napi.pid.and_then(cpus_of),
                    })
                    .collect();
            }
            Err(e) => status.errors.push(e.to_string()),
        }
    }
    match ip_json(name, &["-j", "neigh", "show"]) {
        Ok(entries) => status.neighbours = entries.iter().filter_map(neighbour_of).collect(),
        Err(e) => status.errors.push(e),
    }
    match ip_json(name, &["-j", "route", "show"]) {
        Ok(routes) => status.routes = routes.iter().map(route_line).collect(),
        Err(e) => status.errors.push(e),
    }
    status
}

/// `ip -n NS ARGS` (with `-j`) parsed as a JSON array.
fn ip_json(ns: &str, args: &[&str]) -> Result<Vec<Value>, String> {
    let text = sys::ip_in(ns, args).map_err(|e| e.to_string())?;
    // `ip -j` prints nothing at all for an empty table in some versions.
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Array(items)) => Ok(items),
        _ => Err(format!(
            "`ip -n {ns} {}` did not print a JSON array",
            args.join(" ")
        )),
    }
}

fn text(value: &Value, key: &str) -> Option<String> {
    value.get(key)?.as_str().map(str::to_string)
}

fn interface_of(link: &Value) -> Option<InterfaceStatus> {
    let flags = link.get("flags")?.as_array()?;
    let addresses = link
        .get("addr_info")
        .and_then(Value::as_array)
        .map(|infos| {
            infos
                .iter()
                .filter(|info| info.get("family").and_then(Value::as_str) == Some("inet"))
                .filter_map(|info| {
                    Some(format!(
                        "{}/{}",
                        info.get("local")?.as_str()?,
                        info.get("prefixlen")?.as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    Some(InterfaceStatus {
        name: text(link, "ifname")?,
        admin_up: flags.iter().any(|f| f.as_str() == Some("UP")),
        state: text(link, "operstate").unwrap_or_default(),
        mac: text(link, "address").unwrap_or_default(),
        addresses,
        counters: link.get("stats64").and_then(counters_of),
        rps_cpus: None,
        threaded: None,
        napi: Vec::new(),
    })
}

fn neighbour_of(entry: &Value) -> Option<Neighbour> {
    Some(Neighbour {
        addr: text(entry, "dst")?,
        dev: text(entry, "dev").unwrap_or_default(),
        mac: text(entry, "lladdr"),
        state: entry
            .get("state")
            .and_then(Value::as_array)
            .map(|states| {
                states
                    .iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    })
}

fn route_line(route: &Value) -> String {
    let mut line = text(route, "dst").unwrap_or_else(|| "?".to_string());
    if let Some(gateway) = text(route, "gateway") {
        line += &format!(" via {gateway}");
    }
    if let Some(dev) = text(route, "dev") {
        line += &format!(" dev {dev}");
    }
    line
}

impl Status {
    /// The human-readable form of `polld testbed status`.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let label = if self.prefix.is_empty() {
            "testbed".to_string()
        } else {
            format!("testbed (prefix {})", self.prefix)
        };
        let state = if self.up {
            "up"
        } else if self.namespaces.iter().any(|ns| ns.exists) {
            "incomplete (remove it with `polld testbed down`)"
        } else {
            "down"
        };
        writeln!(out, "{label}: {state}")?;
        if let Some(guest) = &self.guest {
            guest.write_text(out)?;
        }
        for ns in &self.namespaces {
            if !ns.exists {
                writeln!(out, "{}: does not exist", ns.name)?;
                continue;
            }
            let forward = match ns.ip_forward {
                Some(true) => "1 (kernel forwards)",
                Some(false) => "0",
                None => "unknown",
            };
            writeln!(out, "{}: ip_forward {forward}", ns.name)?;
            for iface in ns.interfaces.iter().filter(|i| i.name != "lo") {
                let counters = iface.counters.unwrap_or_default();
                writeln!(
                    out,
                    "  {:<6} {:<5} {}  {}  rx {} tx {} tx_dropped {}",
                    iface.name,
                    iface.state,
                    iface.mac,
                    iface.addresses.join(" "),
                    counters.rx_packets,
                    counters.tx_packets,
                    counters.tx_dropped
                )?;
                let napi: Vec<String> = iface
                    .napi
                    .iter()
                    .map(|n| match n.pid {
                        Some(pid) => format!(
                            "napi {} kthread {pid} on CPUs {}",
                            n.id,
                            n.cpus.as_deref().unwrap_or("?")
                        ),
                        None => format!("napi {} in softirq", n.id),
                    })
                    .collect();
                writeln!(
                    out,
                    "         rps_cpus {}  threaded {}  {}",
                    iface.rps_cpus.as_deref().unwrap_or("?"),
                    iface.threaded.map_or("?", |t| if t { "1" } else { "0" }),
                    if napi.is_empty() {
                        "no NAPI (backlog)".to_string()
                    } else {
                        napi.join(", ")
                    }
                )?;
            }
            if let Some(lo) = ns.interfaces.iter().find(|i| i.name == "lo") {
                writeln!(out, "  lo     {}", if lo.admin_up { "up" } else { "DOWN" })?;
            }
            for neighbour in &ns.neighbours {
                writeln!(
                    out,
                    "  neighbour {} {} dev {} {}",
                    neighbour.addr,
                    neighbour.mac.as_deref().unwrap_or("-"),
                    neighbour.dev,
                    neighbour.state.join(",")
                )?;
            }
            for route in &ns.routes {
                writeln!(out, "  route {route}")?;
            }
            for error in &ns.errors {
                writeln!(out, "  error: {error}")?;
            }
        }
        Ok(())
    }
}
