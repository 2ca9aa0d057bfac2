//! The capabilities `polld run` needs to set up its interfaces, and those it keeps once
//! set up, to reopen an interface that went away and, with the kernel's tables, to ask
//! the kernel to resolve next hops and to hand it packets on a raw socket.

use crate::caps::{self, Cap, CapSet};
use crate::config::{Backend, RunConfig};

/// The capabilities set-up needs, with why.
pub(crate) fn needed_caps(config: &RunConfig) -> Vec<(Cap, String)> {
    let mut needed = Vec::new();
    for d in &config.devices {
        let why = |what: &str| format!("to {what} {} ({})", d.name, d.backend.name());
        match d.backend {
            Backend::AfPacket => needed.push((Cap::NetRaw, why("open"))),
            Backend::AfXdp => {
                needed.push((Cap::NetRaw, why("open an XDP socket on")));
                needed.push((Cap::Bpf, why("load the XDP redirect program for")));
                needed.push((Cap::NetAdmin, why("attach the XDP program to")));
            }
            Backend::Tap => needed.push((Cap::NetAdmin, why("create or attach"))),
        }
        if let Some(ns) = &d.netns {
            needed.push((
                Cap::SysAdmin,
                format!("to enter network namespace {ns:?} for {}", d.name),
            ));
        }
    }
    if config.packet.kernel_tables() {
        needed.push((
            Cap::NetAdmin,
            "to ask the kernel to resolve next hops (tables = \"kernel\")".to_string(),
        ));
        needed.push((
            Cap::NetRaw,
            "to hand the kernel the packets it forwards (tables = \"kernel\")".to_string(),
        ));
    }
    if config.daemon.realtime {
        needed.push((
            Cap::SysNice,
            "for `realtime = true` (SCHED_FIFO); or set it to false".to_string(),
        ));
    }
    needed
}

/// What must stay after set-up: reopening interfaces that disappear and return.
pub(crate) fn kept_caps(config: &RunConfig) -> CapSet {
    let mut keep = Vec::new();
    for d in &config.devices {
        match d.backend {
            Backend::AfPacket => keep.push(Cap::NetRaw),
            Backend::AfXdp => keep.extend([Cap::NetRaw, Cap::Bpf, Cap::NetAdmin]),
            Backend::Tap => keep.push(Cap::NetAdmin),
        }
        // Reopening an interface of another namespace enters that namespace again.
        if d.netns.is_some() {
            keep.push(Cap::SysAdmin);
        }
        // Reopening an AF_XDP interface split into queues registers a UMEM per queue at
        // once: without CAP_IPC_LOCK they count against RLIMIT_MEMLOCK (8 MiB here, one
        // UMEM) and the second fails with ENOBUFS. Kept if polld has it.
        let has_ipc_lock = || caps::effective().is_ok_and(|c| c.contains(Cap::IpcLock));
        if d.backend == Backend::AfXdp && !d.queues.is_empty() && has_ipc_lock() {
            keep.push(Cap::IpcLock);
        }
    }
    // With the kernel's tables, a next hop without a neighbour entry is asked of the
    // kernel (RTM_NEWNEIGH, `ip neigh ... use`) for as long as polld runs, and each poll
    // thread opens its raw sockets to the kernel after set-up.
    if config.packet.kernel_tables() {
        keep.extend([Cap::NetAdmin, Cap::NetRaw]);
    }
    // Busy mode spins at SCHED_OTHER and the poll thread returns to SCHED_FIFO after
    // (see the executor's module doc).
    if config.daemon.realtime {
        keep.push(Cap::SysNice);
    }
    CapSet::of(&keep)
}
