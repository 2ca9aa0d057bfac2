//! The testbed's topology: the single source of truth for namespace names, interface
//! names, MACs, addresses and gateways (the topology of docs/measuring.md).
//!
//! ```text
//!   gen                       fwd                         sink
//!   veth0 10.0.1.1/24  <->  veth1 10.0.1.2/24
//!                           veth2 10.0.2.1/24  <->  veth3 10.0.2.2/24
//! ```
//!
//! Every MAC is `02:00:00:00:<link>:<host>`: the locally administered prefix, then the
//! third and fourth bytes of the interface's IPv4 address, so a MAC in a capture names
//! its interface (`02:00:00:00:01:02` is veth1, 10.0.1.2).

use std::net::Ipv4Addr;

use serde::Serialize;

/// One of the three namespaces, by its job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Runs the traffic generator (and iperf3 clients).
    Gen,
    /// Runs the forwarder: polld, or the kernel with `--kernel-forwarding`.
    Fwd,
    /// Runs the sink (and iperf3 servers).
    Sink,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Gen, Role::Fwd, Role::Sink];

    /// The namespace name without prefix.
    pub fn base_name(self) -> &'static str {
        match self {
            Role::Gen => "gen",
            Role::Fwd => "fwd",
            Role::Sink => "sink",
        }
    }
}

/// One veth end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Iface {
    /// The namespace it lives in.
    pub role: Role,
    pub ns: String,
    pub name: String,
    pub mac: String,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    /// The other end of its veth pair.
    pub peer: String,
    /// The next hop towards the far network, for the end namespaces (gen, sink).
    pub gateway: Option<Ipv4Addr>,
}

impl Iface {
    /// The address with its prefix, `10.0.1.1/24`.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.addr, self.prefix_len)
    }

    /// The network the address is on, `10.0.1.0/24`.
    pub fn network(&self) -> String {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len))
            .unwrap_or(0);
        let network = Ipv4Addr::from(u32::from(self.addr) & mask);
        format!("{network}/{}", self.prefix_len)
    }
}

/// The whole topology for one namespace prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub prefix: String,
    pub gen_ns: String,
    pub fwd_ns: String,
    pub sink_ns: String,
    /// gen's end of the gen–fwd link.
    pub veth0: Iface,
    /// fwd's end of the gen–fwd link: the forwarder's receive side.
    pub veth1: Iface,
    /// fwd's end of the fwd–sink link: the forwarder's transmit side.
    pub veth2: Iface,
    /// sink's end of the fwd–sink link.
    pub veth3: Iface,
    /// An address on sink's network that sink does not own: fwd holds a static neighbour
    /// for it pointing at veth3's MAC, so frames sent to it cross fwd and are dropped by
    /// sink's `ip_rcv` without any reply (the baseline's benchmark destination).
    pub unowned_dst: Ipv4Addr,
}

impl Layout {
    /// The topology with namespaces `{prefix}gen`, `{prefix}fwd` and `{prefix}sink`.
    /// Interface names, MACs and addresses do not depend on the prefix: each testbed
    /// has its own namespaces, so several can exist at once.
    pub fn new(prefix: &str) -> Layout {
        let ns = |role: Role| format!("{prefix}{}", role.base_name());
        let iface =
            |role: Role, name: &str, peer: &str, host: [u8; 2], gateway: Option<[u8; 2]>| {
                let [link, last] = host;
                Iface {
                    role,
                    ns: ns(role),
                    name: name.to_string(),
                    mac: format!("02:00:00:00:{link:02x}:{last:02x}"),
                    addr: Ipv4Addr::new(10, 0, link, last),
                    prefix_len: 24,
                    peer: peer.to_string(),
                    gateway: gateway.map(|[link, last]| Ipv4Addr::new(10, 0, link, last)),
                }
            };
        Layout {
            prefix: prefix.to_string(),
            gen_ns: ns(Role::Gen),
            fwd_ns: ns(Role::Fwd),
            sink_ns: ns(Role::Sink),
            veth0: iface(Role::Gen, "veth0", "veth1", [1, 1], Some([1, 2])),
            veth1: iface(Role::Fwd, "veth1", "veth0", [1, 2], None),
            veth2: iface(Role::Fwd, "veth2", "veth3", [2, 1], None),
            veth3: iface(Role::Sink, "veth3", "veth2", [2, 2], Some([2, 1])),
            unowned_dst: Ipv4Addr::new(10, 0, 2, 100),
        }
    }

    /// The namespace name of a role.
    pub fn ns(&self, role: Role) -> &str {
        match role {
            Role::Gen => &self.gen_ns,
            Role::Fwd => &self.fwd_ns,
            Role::Sink => &self.sink_ns,
        }
    }

    /// All three namespace names, gen first.
    pub fn namespaces(&self) -> [&str; 3] {
        Role::ALL.map(|role| self.ns(role))
    }

    /// All four veth ends, in order veth0..veth3.
    pub fn ifaces(&self) -> [&Iface; 4] {
        [&self.veth0, &self.veth1, &self.veth2, &self.veth3]
    }

    /// The veth end with this name.
    pub fn iface(&self, name: &str) -> Option<&Iface> {
        self.ifaces().into_iter().find(|iface| iface.name == name)
    }

    /// The other end of `iface`'s veth pair.
    pub fn peer_of(&self, iface: &Iface) -> &Iface {
        self.iface(&iface.peer)
            .expect("every veth end of a Layout names a peer of the same Layout")
    }
}

/// Checks that `prefix` can start a namespace name: ASCII letters, digits, `-`, `_` and
/// `.`, short enough that the name stays a valid file name under /run/netns.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    const MAX_PREFIX: usize = 64;
    if prefix.len() > MAX_PREFIX {
        return Err(format!(
            "namespace prefix `{prefix}` is longer than {MAX_PREFIX} characters: use a shorter one"
        ));
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "namespace prefix `{prefix}` contains {bad:?}: use only letters, digits, `-`, `_` and `.`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_layout_is_the_baseline_topology() {
        let layout = Layout::new("");
        assert_eq!(layout.namespaces(), ["gen", "fwd", "sink"]);
        let expected = [
            (
                "gen",
                "veth0",
                "02:00:00:00:01:01",
                "10.0.1.1/24",
                Some("10.0.1.2"),
            ),
            ("fwd", "veth1", "02:00:00:00:01:02", "10.0.1.2/24", None),
            ("fwd", "veth2", "02:00:00:00:02:01", "10.0.2.1/24", None),
            (
                "sink",
                "veth3",
                "02:00:00:00:02:02",
                "10.0.2.2/24",
                Some("10.0.2.1"),
            ),
        ];
        for (iface, (ns, name, mac, cidr, gateway)) in layout.ifaces().into_iter().zip(expected) {
            assert_eq!(iface.ns, ns);
            assert_eq!(iface.name, name);
            assert_eq!(iface.mac, mac);
            assert_eq!(iface.cidr(), cidr);
            assert_eq!(iface.gateway.map(|g| g.to_string()).as_deref(), gateway);
        }
        assert_eq!(layout.veth0.network(), "10.0.1.0/24");
        assert_eq!(layout.veth3.network(), "10.0.2.0/24");
    }

    #[test]
    fn peers_are_symmetric_and_on_one_network() {
        let layout = Layout::new("x");
        for iface in layout.ifaces() {
            let peer = layout.peer_of(iface);
            assert_eq!(layout.peer_of(peer), iface);
            assert_eq!(peer.network(), iface.network());
            assert_ne!(peer.ns, iface.ns);
        }
    }

    #[test]
    fn the_prefix_goes_before_each_namespace_name() {
        assert_eq!(
            Layout::new("t7-").namespaces(),
            ["t7-gen", "t7-fwd", "t7-sink"]
        );
        assert_eq!(Layout::new("t7-").veth3.ns, "t7-sink");
    }

    #[test]
    fn prefixes_that_cannot_name_a_file_are_refused() {
        assert!(check_prefix("").is_ok());
        assert!(check_prefix("ci.run-3_").is_ok());
        let err = check_prefix("a/b").unwrap_err();
        assert!(err.contains("'/'"), "{err}");
        assert!(check_prefix(&"p".repeat(65)).is_err());
    }
}
