//! Privileges: check the capabilities polld needs before touching anything, and drop the
//! rest once set-up is done.
//!
//! AF_PACKET needs CAP_NET_RAW; AF_XDP needs CAP_NET_RAW (the socket), CAP_BPF (the
//! redirect program and its map) and CAP_NET_ADMIN (attaching it); TAP needs
//! CAP_NET_ADMIN; an interface in another network namespace (`netns = ...`) needs
//! CAP_SYS_ADMIN to enter it; SCHED_FIFO needs CAP_SYS_NICE. After set-up polld keeps only what it
//! needs to reopen an interface that disappears and returns (and CAP_SYS_NICE with
//! `realtime`, to return to SCHED_FIFO after busy polling), and empties its bounding set
//! of everything else, so a bug in the packet path cannot be turned into more.

use std::fmt;
use std::io;

/// A Linux capability polld uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cap {
    NetAdmin,
    NetRaw,
    SysNice,
    SysAdmin,
    Bpf,
    IpcLock,
}

impl Cap {
    /// Every capability polld may need: the bounding set its systemd unit gives it.
    pub const ALL: [Cap; 6] = [
        Cap::NetAdmin,
        Cap::NetRaw,
        Cap::SysNice,
        Cap::SysAdmin,
        Cap::Bpf,
        Cap::IpcLock,
    ];

    fn bit(self) -> u32 {
        match self {
            Cap::NetAdmin => 12,
            Cap::NetRaw => 13,
            Cap::SysAdmin => 21,
            Cap::SysNice => 23,
            Cap::Bpf => 39,
            Cap::IpcLock => 14,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Cap::NetAdmin => "CAP_NET_ADMIN",
            Cap::NetRaw => "CAP_NET_RAW",
            Cap::SysAdmin => "CAP_SYS_ADMIN",
            Cap::SysNice => "CAP_SYS_NICE",
            Cap::Bpf => "CAP_BPF",
            Cap::IpcLock => "CAP_IPC_LOCK",
        }
    }
}

/// A capability set as the kernel stores it (64 bits in two halves).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CapSet(u64);

impl CapSet {
    pub fn of(caps: &[Cap]) -> CapSet {
        CapSet(caps.iter().fold(0, |acc, c| acc | 1 << c.bit()))
    }
    pub fn contains(self, cap: Cap) -> bool {
        self.0 & (1 << cap.bit()) != 0
    }
    pub fn bits(self) -> u64 {
        self.0
    }
}

/// The calling thread's effective capabilities.
pub fn effective() -> io::Result<CapSet> {
    Ok(CapSet(polld_dev::caps::get()?.effective))
}

/// Capabilities that are needed and missing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingCaps {
    /// Each missing capability with what needs it.
    pub missing: Vec<(Cap, String)>,
}

impl fmt::Display for MissingCaps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.missing.iter().map(|(c, _)| c.name()).collect();
        write!(f, "missing capability {}", names.join(", "))?;
        for (cap, why) in &self.missing {
            write!(f, "\n  {} is needed {why}", cap.name())?;
        }
        let lower: Vec<String> = self
            .missing
            .iter()
            .map(|(c, _)| c.name().to_lowercase())
            .collect();
        write!(
            f,
            "\nrun polld through its unit (dist/polld.service grants them to the polld user \
             only, AmbientCapabilities=) or as root; or setcap {}+ep on a polld binary only \
             a trusted group may execute (chgrp GROUP; chmod 0750), never on one every user \
             may run",
            lower.join(",")
        )
    }
}

impl std::error::Error for MissingCaps {}

/// Checks that every `(capability, reason)` in `needed` is effective.
pub fn require(needed: &[(Cap, String)]) -> Result<(), MissingCaps> {
    let have = effective().unwrap_or_default();
    let mut missing: Vec<(Cap, String)> = Vec::new();
    for (cap, why) in needed {
        if !have.contains(*cap) && !missing.iter().any(|(c, _)| c == cap) {
            missing.push((*cap, why.clone()));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingCaps { missing })
    }
}

/// Keeps only `keep` in the effective and permitted sets, and removes every other
/// capability from the bounding set so it cannot come back (not even through exec).
pub fn drop_all_but(keep: CapSet) -> io::Result<()> {
    let last_cap = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(40);
    for bit in 0..=last_cap {
        if keep.0 & (1 << bit) == 0 {
            let cap = rustix::thread::CapabilitySet::from_bits_retain(1 << bit);
            match rustix::thread::remove_capability_from_bounding_set(cap) {
                // EINVAL: a capability this kernel does not know; nothing to drop.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!(
                            "dropping capability {bit} from the bounding set: {}",
                            io::Error::from(e)
                        ),
                    ))
                }
            }
        }
    }
    polld_dev::caps::set(&polld_dev::caps::ThreadCaps {
        effective: keep.0,
        permitted: keep.0,
        inheritable: 0,
    })?;
    Ok(())
}
