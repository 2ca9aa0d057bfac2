//! Configuration of the packet stage, as embedded in `polld run`'s TOML (under a table
//! such as `[packet]`), and its validation.
//!
//! Validation reports every problem as a [`ConfigError`] naming the field (relative to
//! the packet table, e.g. `routes[1].gateway`) and saying how to fix it.
//!
//! A router, with every optional table at its default value:
//!
//! ```toml
//! mode = "router"            # or "bridge": then only interface names (and rules) matter
//! tables = "file"            # where addresses, routes and neighbours come from: "file"
//!                            # (this file's), or "kernel": the kernel's tables of the
//!                            # interfaces' namespace (`ip addr`, `ip route`, `ip -6
//!                            # route`, `ip neigh`), followed as they change, the kernel
//!                            # resolving neighbours; default: kernel where every
//!                            # interface is af_packet or af_xdp and the file writes no
//!                            # addresses, routes or static_arp, else file
//! default_action = "allow"   # for packets no rule matches
//!
//! [[interfaces]]
//! name = "veth1"             # a dataplane device
//! mac = "02:00:00:00:01:01"
//! addresses = ["10.0.1.1/24"]
//! mtu = 1500
//!
//! [[interfaces]]
//! name = "veth2"
//! mac = "02:00:00:00:02:01"
//! addresses = ["10.0.2.1/24", "2001:db8:2::1/64"]  # IPv4 and IPv6
//!
//! [[routes]]
//! prefix = "10.9.0.0/16"
//! gateway = "10.0.2.2"       # picks veth2, whose network holds it
//!
//! [[routes]]
//! prefix = "2001:db8:9::/48"
//! gateway = "2001:db8:2::2"
//!
//! [[static_arp]]             # a neighbour: ARP for IPv4, neighbour discovery for IPv6
//! ip = "10.0.2.2"
//! mac = "02:00:00:00:02:02"
//!
//! [[static_arp]]
//! ip = "2001:db8:2::2"
//! mac = "02:00:00:00:02:02"
//!
//! [arp]
//! capacity = 1024
//! max_age_ms = 60000
//! retry_ms = 1000
//!
//! [icmp]
//! rate_per_sec = 100
//! burst = 10
//! answer_echo = true
//!
//! [bridge]
//! capacity = 4096
//! max_age_ms = 300000
//!
//! [[rules]]
//! action = "deny"
//! proto = "tcp"              # any (default), tcp, udp, icmp
//! src = "any"                # prefixes; default any
//! dst = "10.9.0.0/16"
//! dst_ports = 22             # or "1024-65535"; tcp/udp only
//! ```

use crate::net::{is_martian_source, IpNet, Ipv4Net, Ipv6Class, Ipv6Net};
use crate::rules::{Action, Rule};
use crate::wire::MacAddr;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;

/// What the stage does with frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// IPv4 and IPv6 forwarding with ARP and ICMP/ICMPv6 ([`crate::Forwarder`]).
    #[default]
    Router,
    /// An L2 learning bridge over all interfaces ([`crate::Bridge`]).
    Bridge,
}

/// Where the router's addresses, routes and neighbours come from (`tables`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Tables {
    /// The file's `addresses`, `[[routes]]` and `[[static_arp]]`; polld answers ARP and
    /// neighbour solicitations for its addresses and resolves IPv4 next hops itself.
    File,
    /// The kernel's tables of the interfaces' network namespace, read over rtnetlink and
    /// followed as they change; ARP and neighbour discovery stay the kernel's.
    Kernel,
}

/// This module's commented example, every packet-stage table with its defaults: what the
/// configuration reference (docs/config.md) shows.
pub fn annotated_example() -> String {
    doc_example(include_str!("config.rs"))
}

/// The first ```toml block of the `//!` documentation at the top of a module's `source`:
/// how a module's commented example becomes a reference page or a manual page.
pub fn doc_example(source: &str) -> String {
    source
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .skip_while(|l| l.trim() != "```toml")
        .skip(1)
        .take_while(|l| l.trim() != "```")
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect()
}

/// The packet stage's whole configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketConfig {
    #[serde(default)]
    pub mode: Mode,
    /// Where the router's tables come from; `None` until the daemon decides it from the
    /// interfaces' backends (the forwarder takes `None` as [`Tables::File`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<Tables>,
    /// One entry per dataplane device, matched by name.
    pub interfaces: Vec<InterfaceConfig>,
    /// Static routes via gateways (router mode). Connected routes come from the
    /// interface addresses.
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Permanent neighbour entries (router mode): ARP entries for IPv4 addresses,
    /// neighbour-discovery entries for IPv6 ones.
    #[serde(default)]
    pub static_arp: Vec<StaticArpConfig>,
    #[serde(default)]
    pub arp: ArpConfig,
    #[serde(default)]
    pub icmp: IcmpConfig,
    #[serde(default)]
    pub bridge: BridgeConfig,
    /// What happens to packets no rule matches.
    #[serde(default)]
    pub default_action: Action,
    /// Ordered filter rules; the first match decides.
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InterfaceConfig {
    /// The dataplane device this configures (`veth1`).
    pub name: String,
    /// The MAC polld answers ARP with and sends from (required in router mode, unused by
    /// the bridge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<MacAddr>,
    /// The interface's IPv4 and IPv6 addresses with their prefix lengths (router mode).
    #[serde(default)]
    pub addresses: Vec<IpNet>,
    /// The IP MTU: the largest IPv4 or IPv6 packet sent out of this interface (at least
    /// 1280 on an interface with IPv6 addresses). `polld run`
    /// takes the kernel's MTU of the interface when the key is absent.
    #[serde(default = "default_mtu")]
    pub mtu: u16,
}

fn default_mtu() -> u16 {
    1500
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The destination prefix, host bits zero (`0.0.0.0/0` or `::/0` for a default
    /// route).
    pub prefix: IpNet,
    /// The next hop, of the prefix's family; must be on a connected network, which picks
    /// the output interface.
    pub gateway: IpAddr,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticArpConfig {
    /// An IPv4 (ARP) or IPv6 (neighbour discovery) address on a connected network.
    pub ip: IpAddr,
    pub mac: MacAddr,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArpConfig {
    /// Learned and pending entries kept at most; the oldest is evicted beyond.
    pub capacity: usize,
    /// How long a learned entry is used without being confirmed again.
    pub max_age_ms: u64,
    /// The minimum interval between two requests for the same next hop.
    pub retry_ms: u64,
}

impl Default for ArpConfig {
    fn default() -> Self {
        ArpConfig {
            capacity: 1024,
            max_age_ms: 60_000,
            retry_ms: 1_000,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IcmpConfig {
    /// ICMP errors sent per second on average (0 disables them).
    pub rate_per_sec: u32,
    /// ICMP errors that may be sent back to back.
    pub burst: u32,
    /// Whether polld itself answers pings to its addresses.
    pub answer_echo: bool,
}

impl Default for IcmpConfig {
    fn default() -> Self {
        IcmpConfig {
            rate_per_sec: 100,
            burst: 10,
            answer_echo: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeConfig {
    /// MAC addresses kept at most; the oldest is evicted beyond.
    pub capacity: usize,
    /// How long a learned station stays at its port without sending.
    pub max_age_ms: u64,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            capacity: 4096,
            max_age_ms: 300_000,
        }
    }
}

/// A configuration problem: the field and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending field, relative to the packet table (`interfaces[0].addresses[1]`).
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "packet config: {}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

fn problem(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

fn fail<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, ConfigError> {
    Err(problem(field, message))
}

/// Adds the problem of one checked item, if it has one.
fn collect(out: &mut Vec<ConfigError>, checked: Result<(), ConfigError>) {
    out.extend(checked.err());
}

impl PacketConfig {
    /// Checks the configuration for the selected mode: the first problem of
    /// [`PacketConfig::problems`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the configuration for the selected mode, in the order of its
    /// fields: each interface, route, static ARP entry and rule is checked on its own, so
    /// one mistake does not hide the next.
    pub fn problems(&self) -> Vec<ConfigError> {
        let mut out = Vec::new();
        if self.interfaces.is_empty() {
            out.push(problem(
                "interfaces",
                "no interfaces; add one [[interfaces]] entry per dataplane device",
            ));
        }
        for i in 0..self.interfaces.len() {
            collect(&mut out, self.validate_interface(i));
        }
        for (i, rule) in self.rules.iter().enumerate() {
            collect(&mut out, validate_rule(i, rule));
        }
        match self.mode {
            Mode::Router => self.validate_router(&mut out),
            Mode::Bridge => self.validate_bridge(&mut out),
        }
        out
    }

    fn validate_interface(&self, i: usize) -> Result<(), ConfigError> {
        let iface = &self.interfaces[i];
        if iface.name.is_empty() {
            return fail(
                format!("interfaces[{i}].name"),
                "empty; set it to the device name, e.g. \"veth1\"",
            );
        }
        if let Some(j) = self.interfaces[..i]
            .iter()
            .position(|o| o.name == iface.name)
        {
            return fail(
                format!("interfaces[{i}].name"),
                format!(
                    "{:?} is already interfaces[{j}]; each device appears once",
                    iface.name
                ),
            );
        }
        if iface.mtu < 68 {
            return fail(
                format!("interfaces[{i}].mtu"),
                format!(
                    "{} is below the IPv4 minimum of 68; use 1500 for Ethernet",
                    iface.mtu
                ),
            );
        }
        if iface.mtu < 1280 && iface.addresses.iter().any(|a| a.v6().is_some()) {
            return fail(
                format!("interfaces[{i}].mtu"),
                format!(
                    "{} is below the IPv6 minimum of 1280 (RFC 8200) on an interface with IPv6 addresses",
                    iface.mtu
                ),
            );
        }
        Ok(())
    }

    /// Whether the router's tables are the kernel's.
    pub fn kernel_tables(&self) -> bool {
        self.tables == Some(Tables::Kernel)
    }

    /// With `tables = "kernel"` the file writes no table of its own: each one it writes
    /// is a problem naming it and the `ip` command that does its job.
    fn validate_kernel_tables(&self, out: &mut Vec<ConfigError>) {
        let fix = |what: &str, ip: &str| {
            format!(
                "tables = \"kernel\" takes {what} from the kernel, not from this file; write \
                 them with `{ip}` in the interfaces' namespace instead, or set tables = \"file\""
            )
        };
        for (i, iface) in self.interfaces.iter().enumerate() {
            if !iface.addresses.is_empty() {
                out.push(problem(
                    format!("interfaces[{i}].addresses"),
                    fix("the addresses", "ip addr add ADDRESS dev IF"),
                ));
            }
        }
        if !self.routes.is_empty() {
            out.push(problem(
                "routes",
                fix("the routes", "ip route add PREFIX via GATEWAY"),
            ));
        }
        if !self.static_arp.is_empty() {
            out.push(problem(
                "static_arp",
                fix("the neighbours", "ip neigh replace IP lladdr MAC dev IF"),
            ));
        }
    }

    fn validate_router(&self, out: &mut Vec<ConfigError>) {
        if self.kernel_tables() {
            self.validate_kernel_tables(out);
        }
        let mut seen_macs: Vec<(MacAddr, usize)> = Vec::new();
        for (i, iface) in self.interfaces.iter().enumerate() {
            match iface.mac {
                None => out.push(problem(
                    format!("interfaces[{i}].mac"),
                    "missing; router mode needs the MAC peers reach this interface at, e.g. mac = \"02:00:00:00:00:01\"",
                )),
                Some(mac) if !mac.is_unicast() => out.push(problem(
                    format!("interfaces[{i}].mac"),
                    format!(
                        "{mac} is not a unicast address; clear the lowest bit of the first byte"
                    ),
                )),
                Some(mac) => match seen_macs.iter().find(|(m, _)| *m == mac) {
                    Some(&(_, j)) => out.push(problem(
                        format!("interfaces[{i}].mac"),
                        format!("{mac} is also interfaces[{j}]'s MAC; give each interface its own"),
                    )),
                    None => seen_macs.push((mac, i)),
                },
            }
            for (k, addr) in iface.addresses.iter().enumerate() {
                collect(out, self.validate_address(i, k, *addr));
            }
        }
        for i in 0..self.routes.len() {
            collect(out, self.validate_route(i));
        }
        for i in 0..self.static_arp.len() {
            collect(out, self.validate_static_arp(i));
        }
        if self.arp.capacity == 0 {
            out.push(problem(
                "arp.capacity",
                "0 leaves no room to resolve next hops; use at least 1 (default 1024)",
            ));
        }
        if self.arp.max_age_ms == 0 {
            out.push(problem(
                "arp.max_age_ms",
                "0 expires entries at once; use e.g. 60000",
            ));
        }
        if self.icmp.rate_per_sec > 0 && self.icmp.burst == 0 {
            out.push(problem("icmp.burst", "0 with a non-zero rate sends nothing; use at least 1, or set rate_per_sec = 0 to disable ICMP errors"));
        }
    }

    fn validate_route(&self, i: usize) -> Result<(), ConfigError> {
        let route = &self.routes[i];
        let field = format!("routes[{i}]");
        if !route.prefix.is_network() {
            return fail(
                format!("{field}.prefix"),
                format!(
                    "{} has host bits set; write {}",
                    route.prefix,
                    route.prefix.network()
                ),
            );
        }
        if let Some(j) = self.routes[..i]
            .iter()
            .position(|r| r.prefix == route.prefix)
        {
            return fail(
                format!("{field}.prefix"),
                format!("{} is already routes[{j}]; keep one", route.prefix),
            );
        }
        if let Some((iface, _)) = self
            .connected()
            .find(|(_, net)| net.network() == route.prefix)
        {
            return fail(
                format!("{field}.prefix"),
                format!(
                    "{} is the connected network of interfaces[{iface}]; remove the route",
                    route.prefix
                ),
            );
        }
        if self.is_own_address(route.gateway) {
            return fail(
                format!("{field}.gateway"),
                format!(
                    "{} is one of polld's own addresses; use the neighbour's address",
                    route.gateway
                ),
            );
        }
        if route.prefix.addr().is_ipv4() != route.gateway.is_ipv4() {
            return fail(
                format!("{field}.gateway"),
                format!(
                    "{} is not of {}'s address family; route IPv4 prefixes via IPv4 gateways and IPv6 via IPv6",
                    route.gateway, route.prefix
                ),
            );
        }
        if self.connected_interface(route.gateway).is_none() {
            return fail(
                format!("{field}.gateway"),
                format!("{} is not on a connected network ({}); use a neighbour's address on one of them", route.gateway, self.connected_list()),
            );
        }
        Ok(())
    }

    fn validate_static_arp(&self, i: usize) -> Result<(), ConfigError> {
        let entry = &self.static_arp[i];
        let field = format!("static_arp[{i}]");
        if !entry.mac.is_unicast() {
            return fail(
                format!("{field}.mac"),
                format!(
                    "{} is not a unicast address; clear the lowest bit of the first byte",
                    entry.mac
                ),
            );
        }
        if self.is_own_address(entry.ip) {
            return fail(
                format!("{field}.ip"),
                format!(
                    "{} is one of polld's own addresses; static entries are for neighbours",
                    entry.ip
                ),
            );
        }
        if self.connected_interface(entry.ip).is_none() {
            return fail(
                format!("{field}.ip"),
                format!(
                    "{} is not on a connected network ({}); only neighbours need ARP entries",
                    entry.ip,
                    self.connected_list()
                ),
            );
        }
        if let Some(j) = self.static_arp[..i].iter().position(|e| e.ip == entry.ip) {
            return fail(
                format!("{field}.ip"),
                format!("{} is already static_arp[{j}]; keep one", entry.ip),
            );
        }
        Ok(())
    }

    fn validate_address(&self, i: usize, k: usize, net: IpNet) -> Result<(), ConfigError> {
        let field = format!("interfaces[{i}].addresses[{k}]");
        match net {
            IpNet::V4(v4) => validate_ipv4_address(&field, v4)?,
            IpNet::V6(v6) => validate_ipv6_address(&field, v6)?,
        }
        let addr = net.addr();
        for (j, other) in self.interfaces.iter().enumerate() {
            for (l, o) in other.addresses.iter().enumerate() {
                // An address refused for itself (0 bits of prefix) overlaps everything.
                if (j, l) >= (i, k) || o.prefix_len() == 0 {
                    continue;
                }
                if o.addr() == addr {
                    return fail(field, format!("{addr} is also interfaces[{j}].addresses[{l}]; each address belongs to one interface"));
                }
                if j != i && o.overlaps(net) {
                    return fail(
                        field,
                        format!("{} overlaps {} on interfaces[{j}]; connected networks of different interfaces must be disjoint: give each interface a network of its own", net.network(), o.network()),
                    );
                }
            }
        }
        Ok(())
    }

    fn validate_bridge(&self, out: &mut Vec<ConfigError>) {
        if self.kernel_tables() {
            out.push(problem(
                "tables",
                "the bridge has no routing tables; remove `tables` or set mode = \"router\"",
            ));
        }
        if self.interfaces.len() < 2 {
            out.push(problem(
                "interfaces",
                "a bridge needs at least two interfaces to forward between; add another [[interfaces]] entry",
            ));
        }
        if let Some(i) = self.interfaces.iter().position(|f| !f.addresses.is_empty()) {
            out.push(problem(
                format!("interfaces[{i}].addresses"),
                "the bridge has no IP addresses; remove them or set mode = \"router\"",
            ));
        }
        if !self.routes.is_empty() {
            out.push(problem(
                "routes",
                "routes are for router mode; remove them or set mode = \"router\"",
            ));
        }
        if !self.static_arp.is_empty() {
            out.push(problem(
                "static_arp",
                "static ARP entries are for router mode; remove them or set mode = \"router\"",
            ));
        }
        if self.bridge.capacity == 0 {
            out.push(problem(
                "bridge.capacity",
                "0 leaves no room to learn stations; use at least 1 (default 4096)",
            ));
        }
        if self.bridge.max_age_ms == 0 {
            out.push(problem(
                "bridge.max_age_ms",
                "0 forgets stations at once; use e.g. 300000",
            ));
        }
    }

    /// Maps each dataplane device (by position in `devices`) to its entry in
    /// `interfaces`, requiring a one-to-one match by name.
    pub fn bind(&self, devices: &[&str]) -> Result<Vec<usize>, ConfigError> {
        if let Some(i) = self
            .interfaces
            .iter()
            .position(|f| !devices.contains(&f.name.as_str()))
        {
            return fail(
                format!("interfaces[{i}].name"),
                format!(
                    "{:?} is not a dataplane device (devices: {}); fix the name or add the device",
                    self.interfaces[i].name,
                    devices.join(", ")
                ),
            );
        }
        devices
            .iter()
            .map(
                |dev| match self.interfaces.iter().position(|f| f.name == *dev) {
                    Some(i) => Ok(i),
                    None => fail(
                        "interfaces",
                        format!(
                            "device {dev:?} has no entry; add [[interfaces]] with name = {dev:?}"
                        ),
                    ),
                },
            )
            .collect()
    }

    /// Every (interface index, address) pair.
    pub(crate) fn connected(&self) -> impl Iterator<Item = (usize, IpNet)> + '_ {
        self.interfaces
            .iter()
            .enumerate()
            .flat_map(|(i, f)| f.addresses.iter().map(move |a| (i, *a)))
    }

    fn connected_interface(&self, ip: IpAddr) -> Option<usize> {
        self.connected()
            .find(|(_, net)| net.contains(ip))
            .map(|(i, _)| i)
    }

    fn connected_list(&self) -> String {
        let nets: Vec<String> = self
            .connected()
            .map(|(_, n)| n.network().to_string())
            .collect();
        if nets.is_empty() {
            "none: no interface has an address".to_string()
        } else {
            nets.join(", ")
        }
    }

    fn is_own_address(&self, ip: IpAddr) -> bool {
        self.connected().any(|(_, net)| net.addr() == ip)
    }
}

fn validate_ipv4_address(field: &str, net: Ipv4Net) -> Result<(), ConfigError> {
    let addr = net.addr();
    if net.prefix_len() == 0 {
        return fail(
            field,
            format!("{net} covers every address; give the link's prefix length, e.g. {addr}/24"),
        );
    }
    if is_martian_source(addr) {
        return fail(
            field,
            format!(
                "{addr} is not a usable host address (0/8, loopback, multicast or reserved); pick a host address of the link's network, e.g. 10.0.1.1/24"
            ),
        );
    }
    if net.broadcast().is_some() && (net.is_network() || net.broadcast() == Some(addr)) {
        return fail(
            field,
            format!(
                "{addr} is the network or broadcast address of {}; pick a host address",
                net.network()
            ),
        );
    }
    Ok(())
}

fn validate_ipv6_address(field: &str, net: Ipv6Net) -> Result<(), ConfigError> {
    let addr = net.addr();
    if net.prefix_len() == 0 {
        return fail(
            field,
            format!("{net} covers every address; give the link's prefix length, e.g. {addr}/64"),
        );
    }
    match Ipv6Class::of(addr) {
        Ipv6Class::Unicast => {}
        Ipv6Class::LinkLocal => {
            return fail(
                field,
                format!("{addr} is link-local; polld's link-local address is fe80:: with the interface's MAC (EUI-64), list global or unique-local addresses"),
            )
        }
        _ => {
            return fail(
                field,
                format!("{addr} is not a usable unicast address (unspecified, loopback, multicast or IPv4-embedded); pick a host address of the link's network, e.g. 2001:db8:1::1/64"),
            )
        }
    }
    if net.prefix_len() < 127 && net.is_network() {
        return fail(
            field,
            format!(
                "{addr} is the subnet-router anycast address of {} (RFC 4291 §2.6.1); pick a host address",
                net.network()
            ),
        );
    }
    Ok(())
}

fn validate_rule(i: usize, rule: &Rule) -> Result<(), ConfigError> {
    for (name, net) in [("src", rule.src), ("dst", rule.dst)] {
        if !net.is_network() {
            return fail(
                format!("rules[{i}].{name}"),
                format!(
                    "{net} has host bits set; write {} (or {}/{} for one host)",
                    net.network(),
                    net.addr(),
                    net.host_len()
                ),
            );
        }
    }
    let has_ports = rule.src_ports.is_some() || rule.dst_ports.is_some();
    if has_ports && !rule.proto.has_ports() {
        return fail(
            format!("rules[{i}].proto"),
            "port conditions need proto = \"tcp\" or \"udp\"; set proto = \"tcp\" or \"udp\", or remove src_ports and dst_ports",
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared test router, with the top-level keys before it and more tables after.
    const ROUTER: &str = concat!(
        "mode = \"router\"\ndefault_action = \"allow\"\n",
        include_str!("../testdata/router.toml"),
        r#"
        [arp]
        capacity = 256

        [[rules]]
        action = "deny"
        proto = "tcp"
        dst = "10.9.0.0/16"
        dst_ports = 22

        [[rules]]
        action = "allow"
        proto = "udp"
        src_ports = "1024-65535"
    "#
    );

    fn router() -> PacketConfig {
        toml::from_str(ROUTER).unwrap()
    }

    fn error_of(config: &PacketConfig) -> ConfigError {
        config.validate().unwrap_err()
    }

    #[test]
    fn example_parses_and_validates() {
        let c = router();
        c.validate().unwrap();
        assert_eq!(c.interfaces[0].mtu, 1500);
        assert_eq!(c.interfaces[1].mtu, 1400);
        assert_eq!(c.arp.capacity, 256);
        assert_eq!(c.arp.retry_ms, 1000);
        assert_eq!(c.rules[0].dst_ports.unwrap().first, 22);
        // Serialize and parse back: the text forms round-trip.
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<PacketConfig>(&text).unwrap(), c);
    }

    #[test]
    fn module_doc_example_is_valid() {
        let source = include_str!("config.rs");
        let example: String = source
            .lines()
            .skip_while(|l| *l != "//! ```toml")
            .skip(1)
            .take_while(|l| *l != "//! ```")
            .map(|l| format!("{}\n", l.trim_start_matches("//!").trim_start()))
            .collect();
        let c: PacketConfig = toml::from_str(&example).unwrap();
        c.validate().unwrap();
        assert_eq!(c.arp, ArpConfig::default());
        assert_eq!(c.icmp, IcmpConfig::default());
        assert_eq!(c.bridge, BridgeConfig::default());
        assert_eq!(c.rules.len(), 1);
    }

    #[test]
    fn parse_errors_name_the_fix() {
        let bad = ROUTER.replace("10.0.1.1/24", "10.0.1.1/33");
        let err = toml::from_str::<PacketConfig>(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.b.c.d/len"), "{err}");
        let typo = ROUTER.replace("capacity = 256", "capacty = 256");
        assert!(toml::from_str::<PacketConfig>(&typo).is_err());
    }

    #[test]
    fn every_problem_is_reported_not_only_the_first() {
        let mut c = router();
        c.interfaces[0].mac = None;
        c.routes[0].gateway = "10.0.3.2".parse().unwrap();
        c.arp.capacity = 0;
        let fields: Vec<String> = c.problems().into_iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            ["interfaces[0].mac", "routes[0].gateway", "arp.capacity"],
        );
        assert_eq!(error_of(&c).field, "interfaces[0].mac");
    }

    #[test]
    fn kernel_tables_refuse_the_files_own() {
        let mut c = router();
        c.tables = Some(Tables::Kernel);
        let problems = c.problems();
        let fields: Vec<&str> = problems.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "interfaces[0].addresses",
                "interfaces[1].addresses",
                "routes",
                "static_arp"
            ]
        );
        assert!(
            problems[2].message.contains("ip route add"),
            "{}",
            problems[2]
        );
        assert!(problems[2].message.contains("tables = \"file\""));
        for iface in &mut c.interfaces {
            iface.addresses.clear();
        }
        c.routes.clear();
        c.static_arp.clear();
        assert_eq!(c.problems(), []);
        c.mode = Mode::Bridge;
        assert_eq!(error_of(&c).field, "tables");
    }

    #[test]
    fn gateway_must_be_on_a_connected_network() {
        let mut c = router();
        c.routes[0].gateway = "10.0.3.2".parse().unwrap();
        let e = error_of(&c);
        assert_eq!(e.field, "routes[0].gateway");
        assert!(e.message.contains("10.0.1.0/24, 10.0.2.0/24"), "{e}");
    }

    #[test]
    fn route_prefix_host_bits() {
        let mut c = router();
        c.routes[0].prefix = "10.9.0.1/16".parse().unwrap();
        let e = error_of(&c);
        assert_eq!(e.field, "routes[0].prefix");
        assert!(e.message.contains("write 10.9.0.0/16"), "{e}");
    }

    #[test]
    fn duplicate_and_overlapping_addresses() {
        let mut c = router();
        c.interfaces[1].addresses = vec!["10.0.1.1/24".parse().unwrap()];
        assert_eq!(error_of(&c).field, "interfaces[1].addresses[0]");
        assert!(error_of(&c).message.contains("also interfaces[0]"));
        c.interfaces[1].addresses = vec!["10.0.1.2/24".parse().unwrap()];
        assert!(error_of(&c).message.contains("overlaps"));
    }

    #[test]
    fn network_or_broadcast_as_address() {
        let mut c = router();
        c.interfaces[0].addresses = vec!["10.0.1.255/24".parse().unwrap()];
        assert!(error_of(&c).message.contains("broadcast"));
    }

    #[test]
    fn router_needs_macs() {
        let mut c = router();
        c.interfaces[0].mac = None;
        assert_eq!(error_of(&c).field, "interfaces[0].mac");
        c.interfaces[0].mac = Some(MacAddr::BROADCAST);
        assert!(error_of(&c).message.contains("unicast"));
    }

    #[test]
    fn ipv6_addresses_routes_and_neighbours() {
        let mut c = router();
        c.interfaces[1]
            .addresses
            .push("2001:db8:2::1/64".parse().unwrap());
        c.routes.push(RouteConfig {
            prefix: "2001:db8:9::/48".parse().unwrap(),
            gateway: "2001:db8:2::2".parse().unwrap(),
        });
        c.static_arp.push(StaticArpConfig {
            ip: "2001:db8:2::2".parse().unwrap(),
            mac: "02:00:00:00:02:02".parse().unwrap(),
        });
        c.validate().unwrap();
        let mut small = c.clone();
        small.interfaces[1].mtu = 1279;
        assert_eq!(error_of(&small).field, "interfaces[1].mtu");
        let text = toml::to_string(&c).unwrap();
        assert_eq!(toml::from_str::<PacketConfig>(&text).unwrap(), c);
        let mut bad = c.clone();
        bad.routes[1].gateway = "10.0.2.2".parse().unwrap();
        assert!(
            error_of(&bad).message.contains("address family"),
            "{}",
            error_of(&bad)
        );
        let mut bad = c.clone();
        bad.routes[1].gateway = "2001:db8:3::2".parse().unwrap();
        assert_eq!(error_of(&bad).field, "routes[1].gateway");
        for (addr, why) in [
            ("fe80::1/64", "link-local"),
            ("ff02::1/64", "not a usable unicast"),
            ("::1/128", "not a usable unicast"),
            ("2001:db8:2::/64", "subnet-router anycast"),
            ("::/0", "covers every address"),
        ] {
            let mut bad = c.clone();
            bad.interfaces[1].addresses[1] = addr.parse().unwrap();
            let e = error_of(&bad);
            assert_eq!(e.field, "interfaces[1].addresses[1]");
            assert!(e.message.contains(why), "{addr}: {e}");
        }
        let mut bad = c.clone();
        bad.interfaces[0]
            .addresses
            .push("2001:db8:2::9/64".parse().unwrap());
        assert!(
            error_of(&bad).message.contains("overlaps"),
            "{}",
            error_of(&bad)
        );
    }

    #[test]
    fn static_arp_off_link() {
        let mut c = router();
        c.static_arp[0].ip = "192.168.0.1".parse().unwrap();
        assert_eq!(error_of(&c).field, "static_arp[0].ip");
    }

    #[test]
    fn rule_ports_need_tcp_or_udp() {
        let mut c = router();
        c.rules[0].proto = crate::rules::Proto::Icmp;
        assert_eq!(error_of(&c).field, "rules[0].proto");
    }

    #[test]
    fn bridge_rejects_router_settings() {
        let mut c = router();
        c.mode = Mode::Bridge;
        assert_eq!(error_of(&c).field, "interfaces[0].addresses");
        for f in &mut c.interfaces {
            f.addresses.clear();
        }
        assert_eq!(error_of(&c).field, "routes");
        c.routes.clear();
        c.static_arp.clear();
        c.validate().unwrap();
    }

    #[test]
    fn bind_matches_devices_by_name() {
        let c = router();
        assert_eq!(c.bind(&["veth2", "veth1"]).unwrap(), vec![1, 0]);
        let e = c.bind(&["veth1"]).unwrap_err();
        assert_eq!(e.field, "interfaces[1].name");
        let e = c.bind(&["veth1", "veth2", "veth3"]).unwrap_err();
        assert!(e.message.contains("\"veth3\""), "{e}");
    }
}
