//! The testbed's namespaces and links: the namespaces with their sysctls, the veths or
//! TAPs in them, and every link configured (offloads, addresses, neighbours, routes) as
//! the crate doc describes.

use polld_dev::netns::{veth_pair, Netns, VethEnd};

use crate::layout::{Devices, Iface, Layout, Role};
use crate::sys;
use crate::TestbedError;

/// Creates the namespaces and everything in them except placement; the returned
/// namespaces are deleted if dropped, so an error on the way leaves nothing behind.
pub(crate) fn build(
    layout: &Layout,
    kernel_forwarding: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Netns>, TestbedError> {
    let namespaces = host_namespaces(layout, kernel_forwarding, warnings)?;
    link(layout, &namespaces)?;
    Ok(namespaces)
}

/// Creates the host namespaces of `layout` (gen, fwd and sink, or gen and sink when a
/// guest plays fwd) with their sysctls ([`sysctls`]); they are deleted if dropped.
pub(crate) fn host_namespaces(
    layout: &Layout,
    kernel_forwarding: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Netns>, TestbedError> {
    let mut namespaces = Vec::new();
    for role in layout.host_roles() {
        let ns = Netns::create_named(layout.ns(role))?;
        let [ipv4, ipv6] = sysctls(layout, role, kernel_forwarding);
        sys::exec_in(ns.name(), "sysctl", &sysctl_args(&ipv4))?;
        if let Err(e) = sys::exec_in(ns.name(), "sysctl", &sysctl_args(&ipv6)) {
            warnings.push(format!("IPv6 not set up in namespace {}: {e}", ns.name()));
        }
        namespaces.push(ns);
    }
    Ok(namespaces)
}

/// The sysctls of namespace `role`, IPv4's and IPv6's, set before the links exist so that
/// they inherit the `default` ones. rp_filter is off: a strict reverse-path check would
/// drop the asymmetric traffic of tests that spoof sources. Forwarding (`ip_forward`,
/// IPv6's `forwarding`) is set explicitly whatever the default is: on in fwd only with
/// `kernel_forwarding`.
///
/// IPv6 is on in the veth testbed, quiet: no link-local address (so no router
/// solicitation), no duplicate address detection, and each address's MLD reports sent
/// at once when it is added: no frame a test did not send appears once `up` is done.
/// Its addresses stay while a link is down, as IPv4's do.
/// Elsewhere IPv6 is off: a TAP's frames are polld's, and polld answers on IPv6 only.
fn sysctls(layout: &Layout, role: Role, kernel_forwarding: bool) -> [Vec<String>; 2] {
    let forward = u8::from(role == Role::Fwd && kernel_forwarding);
    let ipv4 = vec![
        format!("net.ipv4.ip_forward={forward}"),
        "net.ipv4.conf.all.rp_filter=0".into(),
        "net.ipv4.conf.default.rp_filter=0".into(),
    ];
    let disable = u8::from(layout.devices != Devices::Veth);
    let mut ipv6 = vec![
        format!("net.ipv6.conf.all.disable_ipv6={disable}"),
        format!("net.ipv6.conf.default.disable_ipv6={disable}"),
        format!("net.ipv6.conf.all.forwarding={forward}"),
    ];
    if disable == 0 {
        ipv6.extend(
            [
                "net.ipv6.conf.default.addr_gen_mode=1",
                "net.ipv6.conf.default.accept_dad=0",
                "net.ipv6.conf.default.keep_addr_on_down=1",
                "net.ipv6.conf.default.mldv1_unsolicited_report_interval=0",
                "net.ipv6.conf.default.mldv2_unsolicited_report_interval=0",
            ]
            .map(String::from),
        );
    }
    [ipv4, ipv6]
}

fn sysctl_args(settings: &[String]) -> Vec<&str> {
    std::iter::once("-qw")
        .chain(settings.iter().map(String::as_str))
        .collect()
}

/// How a user rebuilds fwd's kernel tables by hand, the commands `up` ran there: its
/// sysctls, then its addresses and neighbours (its routes are the connected ones of its
/// addresses). On veth polld forwards by these tables (`tables = "kernel"`); empty on TAP
/// and VM, where polld's config holds the tables.
pub(crate) fn fwd_setup(layout: &Layout, kernel_forwarding: bool) -> Vec<String> {
    if layout.devices != Devices::Veth {
        return Vec::new();
    }
    let [ipv4, ipv6] = sysctls(layout, Role::Fwd, kernel_forwarding);
    let sysctl = format!(
        "ip netns exec {} sysctl -w {} {}",
        layout.fwd_ns,
        ipv4.join(" "),
        ipv6.join(" ")
    );
    std::iter::once(sysctl)
        .chain(
            table_commands(layout)
                .into_iter()
                .filter(|c| c.ns == layout.fwd_ns)
                .map(|c| c.line()),
        )
        .collect()
}

/// Creates the links of `layout` in its namespaces (`namespaces`, gen, fwd and sink, are
/// needed for veths only): the veths or TAPs, then [`configure_links`].
pub(crate) fn link(layout: &Layout, namespaces: &[Netns]) -> Result<(), TestbedError> {
    match layout.devices {
        // Their addresses are added with the other tables ([`table_commands`]).
        Devices::Veth => {
            let [gen, fwd, sink] = [&namespaces[0], &namespaces[1], &namespaces[2]];
            for (a_ns, a, b_ns, b) in [
                (gen, &layout.veth0, fwd, &layout.veth1),
                (fwd, &layout.veth2, sink, &layout.veth3),
            ] {
                veth_pair(
                    VethEnd {
                        ns: a_ns,
                        name: &a.name,
                        mac: &a.mac,
                        addr: None,
                    },
                    VethEnd {
                        ns: b_ns,
                        name: &b.name,
                        mac: &b.mac,
                        addr: None,
                    },
                )?;
            }
        }
        // Persistent TAPs: they outlive any reader, so polld can attach and leave.
        Devices::Tap => {
            for iface in layout.kernel_ifaces() {
                let (ns, name) = (iface.ns.as_str(), iface.name.as_str());
                sys::ip_in(ns, &["tuntap", "add", "dev", name, "mode", "tap"])?;
                sys::ip_in(ns, &["link", "set", name, "address", &iface.mac])?;
                sys::ip_in(ns, &["addr", "add", &iface.cidr(), "dev", name])?;
                sys::ip_in(ns, &["link", "set", name, "up"])?;
            }
        }
        Devices::Vm => {
            return Err(TestbedError::Failed(
                "a guest's TAPs are made with the guest (`Testbed::up_vm`)".to_string(),
            ))
        }
    }
    configure_links(layout)
}

/// Sets up the kernel interfaces of `layout` once they exist: offloads off, then the
/// tables of [`table_commands`].
pub(crate) fn configure_links(layout: &Layout) -> Result<(), TestbedError> {
    // No transmit offloads. Checksum offload would leave TCP and UDP checksums for the
    // "hardware" to fill in, and a user-space forwarder (AF_XDP, AF_PACKET) passes them
    // on unfilled, so the receiver drops them; segmentation offload would pass 64 KB
    // super-frames through the veth. `tx off` disables checksumming and, with it, TSO
    // and UDP segmentation: every frame is complete and wire-sized, as from a real NIC.
    for iface in layout.kernel_ifaces() {
        sys::exec_in(&iface.ns, "ethtool", &["-K", &iface.name, "tx", "off"])?;
    }
    for command in table_commands(layout) {
        sys::ip_in(&command.ns, &command.args())?;
    }
    Ok(())
}

/// One `ip -n NS ARGS` command of the testbed's tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IpCommand {
    pub ns: String,
    args: Vec<String>,
}

impl IpCommand {
    fn new(ns: &str, args: &[&str]) -> IpCommand {
        IpCommand {
            ns: ns.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    /// The command as a user types it.
    pub fn line(&self) -> String {
        format!("ip -n {} {}", self.ns, self.args.join(" "))
    }
}

/// The addresses, neighbours and routes of the kernel interfaces of `layout`, once they
/// exist, in the order `up` adds them:
/// - on veth, every end's IPv4 and IPv6 address (a TAP's IPv4 address comes with the
///   TAP, a guest's host TAPs' with the guest);
/// - permanent neighbours: every end knows its peer's MAC (IPv4, and IPv6 on veth), so a
///   generator can send to a fixed MAC and nothing waits for ARP or neighbour discovery;
///   on veth fwd also resolves the unowned destinations (on TAP polld's own static
///   neighbours do, `polld_config`);
/// - gen and sink reach each other's network through fwd (IPv4, and IPv6 on veth).
pub(crate) fn table_commands(layout: &Layout) -> Vec<IpCommand> {
    let veth = layout.devices == Devices::Veth;
    let mut commands = Vec::new();
    if veth {
        for iface in layout.kernel_ifaces() {
            for cidr in [iface.cidr(), iface.cidr6()] {
                commands.push(IpCommand::new(
                    &iface.ns,
                    &["addr", "add", &cidr, "dev", &iface.name],
                ));
            }
        }
    }
    let neighbour = |iface: &Iface, addr: String, mac: &str| {
        IpCommand::new(
            &iface.ns,
            &[
                "neigh",
                "replace",
                &addr,
                "lladdr",
                mac,
                "dev",
                &iface.name,
                "nud",
                "permanent",
            ],
        )
    };
    for iface in layout.kernel_ifaces() {
        let peer = layout.peer_of(iface);
        commands.push(neighbour(iface, peer.addr.to_string(), &peer.mac));
        if veth {
            commands.push(neighbour(iface, peer.addr6.to_string(), &peer.mac));
        }
    }
    if veth {
        for unowned in [
            layout.unowned_dst.to_string(),
            layout.unowned_dst6.to_string(),
        ] {
            commands.push(neighbour(&layout.veth2, unowned, &layout.unowned_mac));
        }
    }
    for (near, far) in [
        (&layout.veth0, &layout.veth3),
        (&layout.veth3, &layout.veth0),
    ] {
        let Some(gateway) = near.gateway else {
            continue;
        };
        let route = |family: &str, network: &str, gateway: &str| {
            IpCommand::new(
                &near.ns,
                &[
                    family, "route", "add", network, "via", gateway, "dev", &near.name,
                ],
            )
        };
        commands.push(route("-4", &far.network(), &gateway.to_string()));
        if veth {
            let gateway6 = layout.peer_of(near).addr6.to_string();
            commands.push(route("-6", &far.network6(), &gateway6));
        }
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fwd_on_veth_gets_both_families_addresses_and_neighbours_from_ip() {
        let layout = Layout::new("x");
        let fwd = fwd_setup(&layout, false);
        for line in [
            "ip -n xfwd addr add 2001:db8:1::2/64 dev veth1",
            "ip -n xfwd addr add 10.0.2.1/24 dev veth2",
            "ip -n xfwd neigh replace 2001:db8:2::100 lladdr 02:00:00:00:02:02 dev veth2 nud permanent",
            "ip -n xfwd neigh replace 10.0.2.100 lladdr 02:00:00:00:02:02 dev veth2 nud permanent",
        ] {
            assert!(fwd.iter().any(|l| l == line), "{line} not in {fwd:#?}");
        }
        assert!(
            fwd[0].contains("net.ipv6.conf.all.forwarding=0"),
            "{}",
            fwd[0]
        );
        assert!(fwd_setup(&layout, true)[0].contains("net.ipv6.conf.all.forwarding=1"));
        let gen: Vec<String> = table_commands(&layout)
            .iter()
            .filter(|c| c.ns == "xgen")
            .map(IpCommand::line)
            .collect();
        assert!(
            gen.iter().any(|l| l == "ip -n xgen -6 route add 2001:db8:2::/64 via 2001:db8:1::2 dev veth0"),
            "{gen:#?}"
        );
    }

    #[test]
    fn on_tap_the_kernels_hold_ipv4_only_and_fwd_nothing() {
        let layout = Layout::with_devices("x", Devices::Tap);
        assert!(fwd_setup(&layout, false).is_empty());
        let lines: Vec<String> = table_commands(&layout)
            .iter()
            .map(IpCommand::line)
            .collect();
        assert!(lines.iter().all(|l| !l.contains("2001:db8")), "{lines:#?}");
        assert!(lines.iter().all(|l| !l.contains("addr add")), "{lines:#?}");
    }
}
