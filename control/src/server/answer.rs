//! How a daemon answers control requests from its [`Dataplane`]: the poll thread calls
//! these from the closure it gives [`crate::server::Inbox::answer_pending`].
//!
//! Everything comes from the dataplane's own sysctl table (`kern.polling.*`,
//! `net.inet.ip.*`, `dev.<if>.*`) and the daemon's own entries ([`crate::daemon`]), so
//! `polld ctl` and `polld ifconfig` always show the same names and values.

use polld_core::dataplane::{interface_entry_kind, DEV_NODE, INTERFACE_FAMILIES, IP_NODE};
use polld_core::poll::NODE;
use polld_core::sysctl::Oid;
use polld_core::{
    Dataplane, Device, Emit, Kind, PacketStage, Poller, Reading, SysctlEntry, Value, Verdict,
};

use crate::daemon::{split_per_cpu, DaemonStatus, DEVICE_INTERRUPTS_PER_S};
use crate::proto::{IfStatus, Response, SetResult};

/// A value given as text, typed: a number if it is one, else a word.
pub(crate) fn value_of(text: &str) -> Value {
    match text.parse::<i64>() {
        Ok(n) => Value::Int(n),
        Err(_) => Value::from(text),
    }
}

/// Whether `name` is `prefix` or lies under it (`""` holds everything), as sysctl(8).
pub fn under_prefix(name: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || name
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// The writable entries of `dp` and their values: taken right after the dataplane is
/// built, these are the defaults of [`DaemonStatus::defaults`].
pub fn writable_values<D: Device, S: PacketStage>(dp: &Dataplane<D, S>) -> Vec<(String, String)> {
    dp.sysctl_entries("")
        .into_iter()
        .filter(|e| e.writable)
        .map(|e| (e.name, e.value))
        .collect()
}

/// The answer to [`crate::proto::Request::List`]: every entry at or under `prefix`, the
/// dataplane's and then the daemon's own.
pub fn list<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    daemon: Option<&DaemonStatus>,
    prefix: &str,
) -> Response {
    let mut entries = dp.sysctl_entries(prefix);
    if let Some(daemon) = daemon {
        entries.extend(
            daemon
                .entries()
                .into_iter()
                .filter(|e| under_prefix(&e.name, prefix)),
        );
    }
    Response::Entries { entries }
}

/// The answer to [`crate::proto::Request::Snapshot`]: every entry typed, straight from
/// the declarations.
pub fn snapshot<D: Device, S: PacketStage>(
    dp: &Dataplane<D, S>,
    daemon: Option<&DaemonStatus>,
) -> Response {
    let mut readings = dp.readings();
    readings.extend(daemon.map(DaemonStatus::readings).unwrap_or_default());
    Response::Snapshot { readings }
}

/// An entry given as text (a List answer, not a snapshot), typed: its kind from its
/// declaration where no dataplane is needed to find it (`kern.polling.*`, `polld.*`); for
/// the others the dataplane's declarations say the same as this rule: writable is a knob,
/// the interface counters count, the rest are levels.
pub fn typed(entries: impl IntoIterator<Item = SysctlEntry>) -> Vec<Reading> {
    // The declarations are read once for the whole list.
    let declared: std::collections::HashMap<String, Kind> = Poller::default()
        .readings(NODE)
        .into_iter()
        .chain(DaemonStatus::default().readings())
        .map(|r| (r.name(), r.kind))
        .collect();
    entries
        .into_iter()
        .map(|entry| {
            let (node, leaf) = split_name(&entry.name);
            let kind = match declared.get(&declared_name(&entry.name)) {
                Some(&kind) => kind,
                None if entry.writable => Kind::Knob,
                None => undeclared_kind(node, leaf),
            };
            Reading {
                node: node.to_string(),
                leaf: leaf.to_string(),
                kind,
                value: value_of(&entry.value),
                descr: entry.descr,
                allowed: None,
            }
        })
        .collect()
}

/// The declaration a name is an instance of: a poll CPU's `net.ifpoll.N.*` entry is its
/// `kern.polling.*` one, a `polld.percpu.N.*` entry the daemon's `polld.*` one.
fn declared_name(name: &str) -> String {
    if let Some((_, kern)) = polld_core::ifpoll::kern_name(name) {
        return kern;
    }
    match split_per_cpu(name) {
        Some((_, entry)) => entry,
        None => name.to_string(),
    }
}

/// A stage that names the dataplane's `net.inet.ip.*` declarations, which do not depend
/// on the stage (they are generic over it): it takes no frame.
struct Declarations;

impl PacketStage for Declarations {
    fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        Verdict::Consumed
    }
}

/// The kind of an entry the dataplane declares generically, from its node and leaf:
/// `net.inet.ip.*` by the dataplane's declarations (the stage's own entries count), an
/// interface's by its declarations too.
fn undeclared_kind(node: &str, leaf: &str) -> Kind {
    let ip_oids = Dataplane::<Box<dyn Device>, Declarations>::IP_OIDS;
    let counts = if node == IP_NODE {
        Oid::find_leaf(&ip_oids, leaf).is_none_or(|oid| oid.kind == Kind::Counter)
    } else if node.starts_with(&format!("{DEV_NODE}.")) {
        // A setting listed read-only (a queue's copy) is a level.
        match interface_entry_kind(leaf) {
            Some(kind) => kind == Kind::Counter,
            None => leaf != DEVICE_INTERRUPTS_PER_S,
        }
    } else {
        false
    };
    if counts {
        Kind::Counter
    } else {
        Kind::Gauge
    }
}

/// Splits a full name into its node and leaf: `dev.<if>.<leaf>` (an interface name may
/// hold dots; a leaf is one word, or a family's `drops.<reason>`), else at the last dot.
fn split_name(name: &str) -> (&str, &str) {
    let dev = format!("{DEV_NODE}.");
    let at = match name.strip_prefix(&dev) {
        Some(rest) => INTERFACE_FAMILIES
            .iter()
            .find_map(|family| rest.rfind(&format!(".{}.", family.name)))
            .map(|i| i + dev.len()),
        None => None,
    };
    match at.or_else(|| name.rfind('.')) {
        Some(i) => (&name[..i], &name[i + 1..]),
        None => ("", name),
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
    let name = dp.interfaces()[i].dev().name().to_string();
    let prefix = format!("{DEV_NODE}.{name}.");
    let mut status = IfStatus {
        name,
        backend: backend.to_string(),
        mode: dp.interfaces()[i].mode().name().to_string(),
        link: String::new(),
        mac,
        addresses,
        tables: None,
        counters: Vec::new(),
        rx_work: None,
        umem: None,
        busy_poll: None,
        device_interrupts: None,
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
