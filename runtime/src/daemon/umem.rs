//! The UMEM a poll thread's AF_XDP interfaces share (`[daemon] af_xdp_shared_umem`),
//! and what `polld ifconfig` says of each interface's.

use polld_dev::afxdp::{AfXdpConfig, SharedUmem};

use crate::config::{Backend, DeviceConfig, RunConfig};
use crate::error::RunError;

/// The UMEM this poll thread's AF_XDP interfaces share, when `[daemon]
/// af_xdp_shared_umem` is on and two or more of them would lend frames to each other,
/// with their names. None is allocated for fewer: its memory is populated at once.
pub(crate) fn shared_umem(
    config: &RunConfig,
    pcap: Option<&str>,
) -> Result<(Option<SharedUmem>, Vec<String>), RunError> {
    let af_xdp = |d: &&DeviceConfig| d.backend == Backend::AfXdp;
    let names: Vec<String> = config
        .devices
        .iter()
        .filter(af_xdp)
        // An interface split into queues opens its sockets together, each on its own UMEM;
        // a device wrapped by a middleware device (`--pcap`, faults) does not lend.
        .filter(|d| d.queues.is_empty() && d.fault.is_none() && pcap.is_none())
        .map(|d| d.name.clone())
        .collect();
    if !config.daemon.shared_umem() || names.len() < 2 {
        let candidates = config.devices.iter().filter(af_xdp).count();
        if config.daemon.af_xdp_shared_umem == Some(true) && candidates >= 2 {
            log::warn!(
                "af_xdp_shared_umem: {} of the {candidates} AF_XDP interfaces can lend \
                 frames (one split into queues, wrapped by --pcap or injecting faults copies \
                 them) and sharing needs two: each gets a UMEM of its own",
                names.len()
            );
        }
        return Ok((None, Vec::new()));
    }
    let umem = SharedUmem::new(names.len() as u32, &AfXdpConfig::default()).map_err(|e| {
        RunError::Setup(format!(
            "[daemon] af_xdp_shared_umem: {e}; or set af_xdp_shared_umem = false"
        ))
    })?;
    Ok((Some(umem), names))
}

/// What `polld ifconfig` says of interface `d`'s UMEM: shared with which interfaces, or
/// its own (AF_XDP only).
pub(crate) fn umem_line(d: &DeviceConfig, shared_by: &[String]) -> Option<String> {
    if d.backend != Backend::AfXdp {
        return None;
    }
    let others: Vec<&str> = shared_by
        .iter()
        .map(String::as_str)
        .filter(|n| *n != d.name)
        .collect();
    Some(if shared_by.contains(&d.name) {
        format!("shared with {}", others.join(", "))
    } else {
        "own".to_string()
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Three AF_XDP interfaces on one poll thread, the first with `fault`.
    fn three_af_xdp(fault: &str) -> RunConfig {
        let entry = |name: &str, n: u8, extra: &str| {
            format!(
                "[[interfaces]]\nname = \"{name}\"\nbackend = \"af_xdp\"\n\
                 mac = \"02:00:00:00:0{n}:01\"\naddresses = [\"10.0.{n}.1/24\"]\n{extra}\n"
            )
        };
        let text = [
            "[daemon]\naf_xdp_shared_umem = true\n".to_string(),
            entry("veth1", 1, fault),
            entry("veth2", 2, ""),
            entry("veth3", 3, ""),
        ]
        .concat();
        RunConfig::parse(Path::new("fwd.toml"), &text).unwrap()
    }
    /// The UMEM's members, or `None` when none was allocated.
    fn members(config: &RunConfig, pcap: Option<&str>) -> Option<Vec<String>> {
        let (umem, names) = shared_umem(config, pcap).unwrap();
        umem.map(|_| names)
    }

    #[test]
    fn a_shared_umem_is_allocated_only_for_two_or_more_interfaces_that_lend() {
        let plain = three_af_xdp("");
        assert_eq!(
            members(&plain, None),
            Some(vec!["veth1".into(), "veth2".into(), "veth3".into()])
        );
        // A fault injector wraps veth1, which then copies: the other two still share.
        let one_faulty = three_af_xdp("[interfaces.fault]\nseed = 1\n");
        let sharers = members(&one_faulty, None).unwrap();
        assert_eq!(sharers, vec!["veth2".to_string(), "veth3".to_string()]);
        assert_eq!(umem_line(&one_faulty.devices[0], &sharers).unwrap(), "own");
        assert_eq!(
            umem_line(&one_faulty.devices[1], &sharers).unwrap(),
            "shared with veth3"
        );
        // --pcap wraps every interface: nothing lends, and no UMEM is shared.
        assert_eq!(members(&plain, Some("/tmp/cap")), None);
        // veth3 alone could lend: a UMEM needs two.
        let mut two_faulty = one_faulty.clone();
        two_faulty.devices[1].fault = two_faulty.devices[0].fault;
        assert_eq!(members(&two_faulty, None), None);
    }
}
