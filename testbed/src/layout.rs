//! The testbed's topology: the single source of truth for namespace names, interface
//! names, MACs, addresses and gateways (the topology of docs/measuring.md).
//!
//! ```text
//!   gen                       fwd                         sink
//!   veth0 10.0.1.1/24  <->  veth1 10.0.1.2/24
//!                           veth2 10.0.2.1/24  <->  veth3 10.0.2.2/24
//! ```
//!
//! With `--devices tap` nothing joins the namespaces but polld: gen holds a persistent
//! TAP `tap0` (10.0.1.1) and sink a TAP `tap1` (10.0.2.2), and polld, running in fwd,
//! opens both TAPs in their namespaces and plays 10.0.1.2 and 10.0.2.1 on them:
//!
//! ```text
//!   gen                                         sink
//!   tap0 10.0.1.1/24  =fd=  polld in fwd  =fd=  tap1 10.0.2.2/24
//!        (polld plays 10.0.1.2)   (polld plays 10.0.2.1)
//! ```
//!
//! With `--devices vm` the forwarder is a qemu guest (see [`crate::vm`]): gen and sink
//! hold the host TAPs `tap0` and `tap1` behind the guest's two virtio-net NICs, and in
//! the guest `eth0` (MAC and address of veth1) and `eth1` (those of veth2) are where polld
//! runs. There is no fwd namespace on the host: the guest, `{prefix}vm`, plays it.
//!
//! ```text
//!   gen                       qemu guest                    sink
//!   tap0 10.0.1.1/24  =virtio=  eth0 10.0.1.2/24
//!                               eth1 10.0.2.1/24  =virtio=  tap1 10.0.2.2/24
//! ```
//!
//! The [`Iface`] fields keep their veth names in every layout: `veth0` is gen's end,
//! `veth1` the forwarder's receive side, `veth2` its transmit side, `veth3` sink's end.
//!
//! Every interface also has an IPv6 address, `2001:db8:<link>::<host>/64` (veth0 is
//! `2001:db8:1::1`), and the unowned destination `2001:db8:<far>::100` beside
//! `10.0.<far>.100`, so that `polld gen --ipv6` traffic is forwarded like IPv4
//! ([`IpFamily`]): on veth the kernels of the namespaces hold them (polld in fwd forwards
//! by fwd's tables), on TAP polld's config carries them.
//!
//! Every MAC is `02:00:00:00:<link>:<host>`: the locally administered prefix, then the
//! third and fourth bytes of the interface's IPv4 address, so a MAC in a capture names
//! its interface (`02:00:00:00:01:02` is veth1, 10.0.1.2).

use std::net::{Ipv4Addr, Ipv6Addr};

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

/// What joins the namespaces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Devices {
    /// veth pairs gen–fwd and fwd–sink; the forwarder in fwd owns veth1 and veth2.
    #[default]
    Veth,
    /// A persistent TAP in gen (tap0) and one in sink (tap1); only polld joins them.
    Tap,
    /// A qemu guest whose two virtio-net NICs sit on a TAP in gen (tap0) and one in sink
    /// (tap1); polld runs in the guest on eth0 and eth1.
    Vm,
}

impl Devices {
    pub fn name(self) -> &'static str {
        match self {
            Devices::Veth => "veth",
            Devices::Tap => "tap",
            Devices::Vm => "vm",
        }
    }
}

/// Which IP family a flood runs over: IPv4, or UDP over IPv6 to the layout's IPv6
/// addresses ([`Layout::gen_family_args`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IpFamily {
    #[default]
    Ipv4,
    Ipv6,
}

impl IpFamily {
    /// `IPv4` or `IPv6`, as the demo's text names it.
    pub fn name(self) -> &'static str {
        match self {
            IpFamily::Ipv4 => "IPv4",
            IpFamily::Ipv6 => "IPv6",
        }
    }

    /// The smallest frame `polld gen` sends over the family (60 or 80 bytes).
    pub fn smallest_frame(self) -> usize {
        polld_traffic::frame::smallest_frame(match self {
            IpFamily::Ipv4 => Ipv4Addr::UNSPECIFIED.into(),
            IpFamily::Ipv6 => Ipv6Addr::UNSPECIFIED.into(),
        })
    }
}

/// The prefix length of every interface's IPv6 address.
pub const PREFIX_LEN6: u8 = 64;

/// The IPv6 address beside `10.0.link.host`: `2001:db8:link::host`, both numbers as
/// hexadecimal groups.
fn ipv6_of(link: u8, host: u8) -> Ipv6Addr {
    Ipv6Addr::new(0x2001, 0xdb8, link.into(), 0, 0, 0, 0, host.into())
}

/// One end of a link: a veth end, a TAP, or the address polld plays on a TAP's fd.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Iface {
    /// Whose end it is: the forwarder's ends are `Role::Fwd` also on TAP, where they
    /// live in gen's and sink's namespaces.
    pub role: Role,
    /// The namespace the interface lives in (where polld opens a TAP).
    pub ns: String,
    pub name: String,
    pub mac: String,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    /// The IPv6 address beside `addr` (prefix length [`PREFIX_LEN6`]).
    pub addr6: Ipv6Addr,
    /// The name of the other end of its link (on TAP, the same TAP).
    pub peer: String,
    /// The next hop towards the far network, for the end namespaces (gen, sink).
    pub gateway: Option<Ipv4Addr>,
}

impl Iface {
    /// The address with its prefix, `10.0.1.1/24`.
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.addr, self.prefix_len)
    }

    /// The IPv6 address with its prefix, `2001:db8:1::1/64`.
    pub fn cidr6(&self) -> String {
        format!("{}/{PREFIX_LEN6}", self.addr6)
    }

    /// The network the address is on, `10.0.1.0/24`.
    pub fn network(&self) -> String {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len))
            .unwrap_or(0);
        let network = Ipv4Addr::from(u32::from(self.addr) & mask);
        format!("{network}/{}", self.prefix_len)
    }

    /// The IPv6 network the address is on, `2001:db8:1::/64`.
    pub fn network6(&self) -> String {
        let mask = u128::MAX << (128 - u32::from(PREFIX_LEN6));
        let network = Ipv6Addr::from(u128::from(self.addr6) & mask);
        format!("{network}/{PREFIX_LEN6}")
    }
}

/// The whole topology for one namespace prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub prefix: String,
    pub devices: Devices,
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
    /// The IPv6 address beside `unowned_dst`, with the same MAC (TAP testbed).
    pub unowned_dst6: Ipv6Addr,
    /// The MAC frames to `unowned_dst` carry. On veth, veth3's (sink's `ip_rcv` drops
    /// them, as in the baseline). On TAP, a MAC nobody has: tap1 receives the frame and
    /// the kernel drops it as another host's before IP, because on TAP that receive work
    /// runs inside polld's `write()`, and a benchmark should charge polld for forwarding,
    /// not for sink's routing lookup.
    pub unowned_mac: String,
}

impl Layout {
    /// The topology with namespaces `{prefix}gen`, `{prefix}fwd` and `{prefix}sink`.
    /// Interface names, MACs and addresses do not depend on the prefix: each testbed
    /// has its own namespaces, so several can exist at once.
    pub fn new(prefix: &str) -> Layout {
        Layout::with_devices(prefix, Devices::Veth)
    }

    /// The topology of `devices` with namespaces `{prefix}gen`, `{prefix}fwd` and
    /// `{prefix}sink`: the same namespaces, addresses and MACs either way.
    pub fn with_devices(prefix: &str, devices: Devices) -> Layout {
        Layout::with_pair(prefix, devices, 0)
    }

    /// The `pair`-th TAP pair of this layout's TAP testbed, in the same namespaces: pair 0
    /// is the testbed's own (tap0, tap1, networks 10.0.1.0/24 and 10.0.2.0/24), pair 1 is
    /// tap2 in gen (10.0.3.1) and tap3 in sink (10.0.4.2) with polld playing 10.0.3.2 and
    /// 10.0.4.1, and so on (`Testbed::add_tap_pair` creates it). For a second poll CPU
    /// with its own traffic.
    pub fn tap_pair(&self, pair: u8) -> Layout {
        Layout::with_pair(&self.prefix, Devices::Tap, pair)
    }

    fn with_pair(prefix: &str, devices: Devices, pair: u8) -> Layout {
        // A guest plays fwd on the VM testbed, under its own name.
        let ns = |role: Role| match (role, devices) {
            (Role::Fwd, Devices::Vm) => crate::vm::state::guest_name(prefix),
            _ => format!("{prefix}{}", role.base_name()),
        };
        // On TAP, the forwarder's ends are the TAPs of gen and sink.
        let (gen_tap, sink_tap) = (format!("tap{}", 2 * pair), format!("tap{}", 2 * pair + 1));
        let (names, homes) = match devices {
            Devices::Veth => (
                ["veth0", "veth1", "veth2", "veth3"],
                [Role::Gen, Role::Fwd, Role::Fwd, Role::Sink],
            ),
            Devices::Tap => (
                [&*gen_tap, &*gen_tap, &*sink_tap, &*sink_tap],
                [Role::Gen, Role::Gen, Role::Sink, Role::Sink],
            ),
            Devices::Vm => (
                [&*gen_tap, "eth0", "eth1", &*sink_tap],
                [Role::Gen, Role::Fwd, Role::Fwd, Role::Sink],
            ),
        };
        // The links of the pair: 10.0.(2·pair + 1).0/24 on gen's side, the next on sink's.
        let (near, far) = (2 * pair + 1, 2 * pair + 2);
        let iface =
            |role: Role, end: usize, peer: usize, host: [u8; 2], gateway: Option<[u8; 2]>| {
                let [link, last] = host;
                let (name, peer) = (names[end], names[peer]);
                Iface {
                    role,
                    ns: ns(homes[end]),
                    name: name.to_string(),
                    mac: format!("02:00:00:00:{link:02x}:{last:02x}"),
                    addr: Ipv4Addr::new(10, 0, link, last),
                    prefix_len: 24,
                    addr6: ipv6_of(link, last),
                    peer: peer.to_string(),
                    gateway: gateway.map(|[link, last]| Ipv4Addr::new(10, 0, link, last)),
                }
            };
        Layout {
            prefix: prefix.to_string(),
            devices,
            gen_ns: ns(Role::Gen),
            fwd_ns: ns(Role::Fwd),
            sink_ns: ns(Role::Sink),
            veth0: iface(Role::Gen, 0, 1, [near, 1], Some([near, 2])),
            veth1: iface(Role::Fwd, 1, 0, [near, 2], None),
            veth2: iface(Role::Fwd, 2, 3, [far, 1], None),
            veth3: iface(Role::Sink, 3, 2, [far, 2], Some([far, 1])),
            unowned_dst: Ipv4Addr::new(10, 0, far, 100),
            unowned_dst6: Ipv6Addr::new(0x2001, 0xdb8, far.into(), 0, 0, 0, 0, 0x100),
            unowned_mac: match devices {
                Devices::Veth => format!("02:00:00:00:{far:02x}:02"),
                Devices::Tap | Devices::Vm => format!("02:00:00:00:{far:02x}:64"),
            },
        }
    }

    /// The layout of the testbed that is up with this prefix: the VM's if its guest is
    /// known, TAP if gen holds `tap0`, else veth (also when nothing is up).
    pub fn found(prefix: &str) -> Layout {
        if crate::vm::state::guest_state(prefix).is_some() {
            return Layout::with_devices(prefix, Devices::Vm);
        }
        let tap = Layout::with_devices(prefix, Devices::Tap);
        let has_tap = polld_dev::netns::ip(&["-n", &tap.gen_ns, "link", "show", "dev", "tap0"]);
        match has_tap {
            Ok(_) => tap,
            Err(_) => Layout::new(prefix),
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

    /// The roles that are network namespaces on the host: all three, or gen and sink
    /// when a guest plays fwd.
    pub fn host_roles(&self) -> Vec<Role> {
        match self.devices {
            Devices::Vm => vec![Role::Gen, Role::Sink],
            Devices::Veth | Devices::Tap => Role::ALL.to_vec(),
        }
    }

    /// All four ends, in order veth0..veth3.
    pub fn ifaces(&self) -> [&Iface; 4] {
        [&self.veth0, &self.veth1, &self.veth2, &self.veth3]
    }

    /// The ends that are kernel interfaces with the end's address: all four veths, or
    /// gen's and sink's TAP.
    pub fn kernel_ifaces(&self) -> Vec<&Iface> {
        match self.devices {
            Devices::Veth => self.ifaces().to_vec(),
            Devices::Tap | Devices::Vm => vec![&self.veth0, &self.veth3],
        }
    }

    /// The kernel interface with this name (`veth3`, `tap1`).
    pub fn iface(&self, name: &str) -> Option<&Iface> {
        self.kernel_ifaces()
            .into_iter()
            .find(|iface| iface.name == name)
    }

    /// The `polld gen` options that send `family` from veth0 to the unowned destination
    /// (for IPv4 none: gen's defaults are this layout's pair 0 addresses).
    pub fn gen_family_args(&self, family: IpFamily) -> Vec<String> {
        match family {
            IpFamily::Ipv4 => Vec::new(),
            IpFamily::Ipv6 => vec![
                "--ipv6".into(),
                "--src-ip".into(),
                self.veth0.addr6.to_string(),
                "--dst-ip".into(),
                self.unowned_dst6.to_string(),
            ],
        }
    }

    /// The other end of `iface`'s link: veth0 and veth1, veth2 and veth3.
    pub fn peer_of(&self, iface: &Iface) -> &Iface {
        let [veth0, veth1, veth2, veth3] = self.ifaces();
        match iface {
            i if i == veth0 => veth1,
            i if i == veth1 => veth0,
            i if i == veth2 => veth3,
            _ => veth2,
        }
    }
}

/// [`check_prefix`] as a clap value parser, for the benches' `--prefix`.
pub(crate) fn parse_prefix(prefix: &str) -> Result<String, String> {
    check_prefix(prefix).map(|()| prefix.to_string())
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
            let v4 = iface.addr.octets();
            assert_eq!(iface.cidr6(), format!("2001:db8:{}::{:x}/64", v4[2], v4[3]));
        }
        assert_eq!(layout.unowned_dst6.to_string(), "2001:db8:2::100");
        assert_eq!(layout.veth0.network(), "10.0.1.0/24");
        assert_eq!(layout.veth3.network(), "10.0.2.0/24");
        assert_eq!(layout.veth0.network6(), "2001:db8:1::/64");
        assert_eq!(layout.veth3.network6(), "2001:db8:2::/64");
    }

    #[test]
    fn a_second_tap_pair_has_its_own_taps_and_networks_in_the_same_namespaces() {
        let first = Layout::with_devices("p-", Devices::Tap);
        let second = first.tap_pair(1);
        assert_eq!(second.namespaces(), first.namespaces());
        assert_eq!(
            (second.veth0.name.as_str(), second.veth0.ns.as_str()),
            ("tap2", "p-gen")
        );
        assert_eq!(
            (second.veth3.name.as_str(), second.veth3.ns.as_str()),
            ("tap3", "p-sink")
        );
        assert_eq!(second.veth0.cidr(), "10.0.3.1/24");
        assert_eq!(second.veth1.cidr(), "10.0.3.2/24");
        assert_eq!(second.veth2.cidr(), "10.0.4.1/24");
        assert_eq!(second.veth3.cidr(), "10.0.4.2/24");
        assert_eq!(second.unowned_dst.to_string(), "10.0.4.100");
        assert_eq!(first.tap_pair(0), first);
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
