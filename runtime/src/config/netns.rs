//! What the config reads from an interface's network namespace: whether it exists, its
//! MAC, its MTU and its IPv4 addresses.

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
