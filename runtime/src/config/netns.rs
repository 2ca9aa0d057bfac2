//! What the config reads from an interface's network namespace: whether it exists, its
//! MAC, its MTU, its IPv4 addresses, and whether the kernel forwards what it receives.

use super::DeviceConfig;

/// The error for an interface polld must open but which its namespace does not have.
pub fn no_such_interface(i: usize, dev: &DeviceConfig) -> String {
    let (place, fix) = match &dev.netns {
        Some(ns) => (
            format!("network namespace `{ns}`"),
            "check `netns` and the name (`ip -n NAME link`)".to_string(),
        ),
        None => (
            polld_dev::netns::describe_current(),
            "run polld in the namespace that has it (--netns NAME; `ip netns list`), or check \
             the name (`ip link`)"
                .to_string(),
        ),
    };
    format!(
        "interfaces[{i}].name: there is no interface {:?} in {place}; {fix}",
        dev.name
    )
}

/// Runs `read` in the interface's namespace (its `netns`, or polld's own); `None` when
/// that namespace cannot be entered (it is missing: `run` reports that by name).
pub fn in_namespace_of<T>(dev: &DeviceConfig, read: impl FnOnce() -> T) -> Option<T> {
    match &dev.netns {
        Some(name) => polld_dev::iface::Namespace::named(name)
            .and_then(|ns| ns.enter_while(&dev.name, read))
            .ok(),
        None => Some(read()),
    }
}

/// The MAC the kernel gives the interface, if it exists in its namespace.
pub(super) fn kernel_mac(dev: &DeviceConfig) -> Option<polld_packet::wire::MacAddr> {
    in_namespace_of(dev, || polld_dev::iface::hardware_address(&dev.name).ok())
        .flatten()
        .map(polld_packet::wire::MacAddr)
}

/// The MTU the kernel gives the interface, if it exists in its namespace and the
/// forwarder can use it (68 and up, RFC 791's minimum).
pub(super) fn kernel_mtu(dev: &DeviceConfig) -> Option<u16> {
    let mtu = in_namespace_of(dev, || polld_dev::iface::mtu(&dev.name).ok()).flatten()?;
    (mtu >= 68).then(|| mtu.min(u32::from(u16::MAX)) as u16)
}

/// The addresses (IPv4 and IPv6) the kernel has on the interface, in its namespace, as `ip` lists
/// them; none when they cannot be read.
pub(super) fn kernel_addresses(dev: &DeviceConfig) -> Vec<std::net::IpAddr> {
    // `ip` runs in the namespace of the thread that starts it.
    let listed = in_namespace_of(dev, || {
        std::process::Command::new("ip")
            .args(["-o", "addr", "show", "dev", &dev.name])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
    })
    .flatten();
    let Some(out) = listed.filter(|o| o.status.success()) else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet" || *w == "inet6")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect()
}

/// The sysctls by which the kernel forwards what it receives on the interface, as
/// `sysctl` names them, read in its namespace; empty when it forwards nothing (or they
/// cannot be read). IPv4 forwards by the input interface's own
/// `net.ipv4.conf.IF.forwarding` (which `net.ipv4.ip_forward` and `conf.all` write on
/// every interface); IPv6, where the interface has it, by `net.ipv6.conf.all.forwarding`
/// or the interface's `force_forwarding` (Linux 6.17+); `net.ipv6.conf.IF.forwarding`
/// alone makes the interface act as a router (RAs) but forwards nothing.
pub(super) fn kernel_forwarding(dev: &DeviceConfig) -> Vec<String> {
    // `sysctl` writes a dot of an interface name as a slash.
    let name = dev.name.replace('.', "/");
    let set = |path: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/{path}")).is_ok_and(|v| v.trim() == "1")
    };
    in_namespace_of(dev, || {
        let mut on = Vec::new();
        if set(&format!("ipv4/conf/{}/forwarding", dev.name)) {
            on.push(format!("net.ipv4.conf.{name}.forwarding"));
        }
        if !set(&format!("ipv6/conf/{}/disable_ipv6", dev.name)) {
            if set("ipv6/conf/all/forwarding") {
                on.push("net.ipv6.conf.all.forwarding".to_string());
            }
            if set(&format!("ipv6/conf/{}/force_forwarding", dev.name)) {
                on.push(format!("net.ipv6.conf.{name}.force_forwarding"));
            }
        }
        on
    })
    .unwrap_or_default()
}
