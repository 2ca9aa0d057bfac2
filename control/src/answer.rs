//! How a daemon answers control requests from its [`Dataplane`]: the poll thread calls
//! these from the closure it gives [`crate::server::Inbox::answer_pending`].
//!
//! Everything comes from the dataplane's own sysctl table (`kern.polling.*`,
//! `net.inet.ip.*`, `dev.<if>.*`), so `polld ctl` and `polld ifconfig` always show the
//! same names and values.

use polld_core::{Dataplane, Device, PacketStage};

use crate::proto::{IfStatus, Response, SetResult};

/// The answer to [`crate::proto::Request::List`]: every entry at or under `prefix`.
pub fn list<D: Device, S: PacketStage>(dp: &Dataplane<D, S>, prefix: &str) -> Response {
    Response::Entries {
        entries: dp.sysctl_entries(prefix),
    }
}

/// The answer to [`crate::proto::Request::Set`]: the assignments in order, each on its
/// own; a refused one changes nothing and does not stop the others.
pub fn set<D: Device, S: PacketStage>(
    dp: &mut Dataplane<D, S>,
    assignments: &[(String, String)],
) -> Response {
    let results = assignments
        .iter()
        .map(|(name, value)| {
            let old = dp.sysctl_get(name);
            let error = dp.sysctl_set(name, value).err().map(|e| e.to_string());
            SetResult {
                name: name.clone(),
                new: dp.sysctl_get(name),
                old,
                error,
            }
        })
        .collect();
    Response::Set { results }
}

/// Interface `i` as `polld ifconfig` shows it. The daemon knows what the dataplane does
/// not: the backend (`af_packet`, `af_xdp`, `tap`), the MAC and the addresses.
pub fn interface_status<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    i: usize,
    backend: &str,
    mac: Option<String>,
    addresses: Vec<String>,
) -> IfStatus {
    let name = dp.interfaces()[i].dev.name().to_string();
    let prefix = format!("dev.{name}.");
    let mut status = IfStatus {
        name,
        backend: backend.to_string(),
        mode: dp.interfaces()[i].mode().name().to_string(),
        link: String::new(),
        mac,
        addresses,
        counters: Vec::new(),
    };
    for entry in dp.sysctl_entries(prefix.trim_end_matches('.')) {
        let Some(leaf) = entry.name.strip_prefix(&prefix) else {
            continue;
        };
        if leaf == "link" {
            status.link = entry.value;
        } else if !entry.writable {
            if let Ok(count) = entry.value.parse::<u64>() {
                status.counters.push((leaf.to_string(), count));
            }
        }
    }
    status
}
