//! The testbed's namespaces and links: the namespaces with their sysctls, the veths or
//! TAPs in them, and every link configured (offloads, neighbours, routes) as the crate
//! doc describes.

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
/// guest plays fwd) with their sysctls; they are deleted if dropped.
pub(crate) fn host_namespaces(
    layout: &Layout,
    kernel_forwarding: bool,
    warnings: &mut Vec<String>,
) -> Result<Vec<Netns>, TestbedError> {
    let mut namespaces = Vec::new();
    for role in layout.host_roles() {
        let ns = Netns::create_named(layout.ns(role))?;
        let forward = u8::from(role == Role::Fwd && kernel_forwarding);
        // rp_filter off: a strict reverse-path check would drop the asymmetric traffic of
        // tests that spoof sources; ip_forward set explicitly whatever the default is.
        sys::exec_in(
            ns.name(),
            "sysctl",
            &[
                "-qw",
                &format!("net.ipv4.ip_forward={forward}"),
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
            ],
        )?;
        // No IPv6: router and neighbour solicitations would add frames that no test sent
        // and break packet accounting. Set before the veths exist, so they inherit it.
        // IPv6 forwarding follows IPv4's, for a veth that turns IPv6 on.
        if let Err(e) = sys::exec_in(
            ns.name(),
            "sysctl",
            &[
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
                &format!("net.ipv6.conf.all.forwarding={forward}"),
            ],
        ) {
            warnings.push(format!("IPv6 left on in namespace {}: {e}", ns.name()));
        }
        namespaces.push(ns);
    }
    Ok(namespaces)
}

/// Creates the links of `layout` in its namespaces (`namespaces`, gen, fwd and sink, are
/// needed for veths only): the veths or TAPs, then [`configure_links`].
pub(crate) fn link(layout: &Layout, namespaces: &[Netns]) -> Result<(), TestbedError> {
    match layout.devices {
        Devices::Veth => {
            let [gen, fwd, sink] = [&namespaces[0], &namespaces[1], &namespaces[2]];
            for (a_ns, a, b_ns, b) in [
                (gen, &layout.veth0, fwd, &layout.veth1),
                (fwd, &layout.veth2, sink, &layout.veth3),
            ] {
                let (a_cidr, b_cidr) = (a.cidr(), b.cidr());
                veth_pair(
                    VethEnd {
                        ns: a_ns,
                        name: &a.name,
                        mac: &a.mac,
                        addr: Some(&a_cidr),
                    },
                    VethEnd {
                        ns: b_ns,
                        name: &b.name,
                        mac: &b.mac,
                        addr: Some(&b_cidr),
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

/// Sets up the kernel interfaces of `layout` once they exist, with their addresses:
/// offloads off, static neighbours, and gen's and sink's routes to each other's network.
pub(crate) fn configure_links(layout: &Layout) -> Result<(), TestbedError> {
    // No transmit offloads. Checksum offload would leave TCP and UDP checksums for the
    // "hardware" to fill in, and a user-space forwarder (AF_XDP, AF_PACKET) passes them
    // on unfilled, so the receiver drops them; segmentation offload would pass 64 KB
    // super-frames through the veth. `tx off` disables checksumming and, with it, TSO
    // and UDP segmentation: every frame is complete and wire-sized, as from a real NIC.
    for iface in layout.kernel_ifaces() {
        sys::exec_in(&iface.ns, "ethtool", &["-K", &iface.name, "tx", "off"])?;
    }
    // Static neighbours: every end knows its peer's MAC, so a generator can send to a
    // fixed MAC and nothing waits for ARP; fwd also resolves the unowned destination.
    for iface in layout.kernel_ifaces() {
        let peer = layout.peer_of(iface);
        add_neighbour(iface, &peer.addr.to_string(), &peer.mac)?;
    }
    // On TAP, polld's own static ARP resolves it (`polld_config`).
    if layout.devices == Devices::Veth {
        add_neighbour(
            &layout.veth2,
            &layout.unowned_dst.to_string(),
            &layout.unowned_mac,
        )?;
    }
    // gen and sink reach each other's network through fwd.
    for (near, far) in [
        (&layout.veth0, &layout.veth3),
        (&layout.veth3, &layout.veth0),
    ] {
        if let Some(gateway) = near.gateway {
            sys::ip_in(
                &near.ns,
                &[
                    "route",
                    "add",
                    &far.network(),
                    "via",
                    &gateway.to_string(),
                    "dev",
                    &near.name,
                ],
            )?;
        }
    }
    Ok(())
}

fn add_neighbour(iface: &Iface, addr: &str, mac: &str) -> Result<(), TestbedError> {
    sys::ip_in(
        &iface.ns,
        &[
            "neigh",
            "replace",
            addr,
            "lladdr",
            mac,
            "dev",
            &iface.name,
            "nud",
            "permanent",
        ],
    )
    .map(drop)
}
