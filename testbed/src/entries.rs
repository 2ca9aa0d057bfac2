//! polld's entries as the testbed reads them: over the control socket, and in
//! `polld run --json`'s final report. Their full names are built from the declarations
//! (`IfCounters::RX_PACKETS`, `Knobs::USER_FRAC`, the `drops` family), never written out.

use std::path::Path;

use polld_core::dataplane::{DEV_NODE, DROPS};
use polld_core::poll::NODE;
use serde_json::Value;

use crate::TestbedError;

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// `dev.<iface>`: the node of interface `iface`'s entries.
pub fn dev_node(iface: &str) -> String {
    format!("{DEV_NODE}.{iface}")
}

/// `dev.<iface>.<leaf>`: interface `iface`'s entry `leaf` (an oid's name, or a
/// [`drops_leaf`]).
pub fn dev_entry(iface: &str, leaf: &str) -> String {
    format!("{}.{leaf}", dev_node(iface))
}

/// `drops.<reason>`: the leaf, under an interface, of its drops of `reason` ([`DROPS`]).
pub fn drops_leaf(reason: &str) -> String {
    format!("{}.{reason}", DROPS.name)
}

/// The interface and the leaf of a `dev.<if>.<leaf>` name; `None` for another node's.
pub fn split_dev_entry(name: &str) -> Option<(&str, &str)> {
    name.strip_prefix(DEV_NODE)?
        .strip_prefix('.')?
        .split_once('.')
}

/// The reason of `name` if it is interface `iface`'s `dev.<iface>.drops.<reason>`.
pub fn drop_reason<'n>(name: &'n str, iface: &str) -> Option<&'n str> {
    let (of, leaf) = split_dev_entry(name)?;
    (of == iface).then_some(())?;
    DROPS.key(leaf)
}

pub use polld_core::dataplane::ip_entry::FASTFORWARDING;

/// `kern.polling.<leaf>`: the scheduler's entry `leaf` (a `Knobs` or `PollState` oid's
/// name).
pub fn kern_entry(leaf: &str) -> String {
    format!("{NODE}.{leaf}")
}

/// An interface's counters in `polld run --json`'s final report.
pub(crate) fn counters_of(iface: &Value) -> Vec<(String, u64)> {
    iface["counters"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|c| Some((c[0].as_str()?.to_string(), c[1].as_u64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Entry `name` among polld's entries `values` ([`polld_values`]), 0 if it has none.
pub(crate) fn value_of(values: &[(String, u64)], name: &str) -> u64 {
    values
        .iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| *v)
}

/// Counter `name` of one interface of `polld run --json`'s final report, 0 if it has none.
pub(crate) fn final_counter(iface: &Value, name: &str) -> u64 {
    iface["counters"]
        .as_array()
        .and_then(|counters| counters.iter().find(|c| c[0] == name))
        .and_then(|c| c[1].as_u64())
        .unwrap_or(0)
}

/// polld's numeric entries at or under `prefix` (`dev`: the interfaces' counters; `""`:
/// all) over the control socket.
pub(crate) fn polld_values(
    socket: &Path,
    prefix: &str,
) -> Result<Vec<(String, u64)>, TestbedError> {
    let request = polld_control::proto::Request::List {
        prefix: prefix.into(),
    };
    match polld_control::client::request(socket, &request) {
        Ok(polld_control::proto::Response::Entries { entries }) => Ok(entries
            .into_iter()
            .filter_map(|e| Some((e.name, e.value.parse().ok()?)))
            .collect()),
        Ok(other) => Err(failed(format!("polld answered {other:?}"))),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// The frames of one interface of `polld run --json`'s final report in no outcome counter
/// and no drop after rx
/// ([`polld_core::IfCounters::unaccounted_named`]): 0 when every frame is
/// accounted for; `None` when it has no counters.
pub fn unaccounted(iface: &Value) -> Option<i64> {
    let counters = iface["counters"].as_array()?;
    let named = counters
        .iter()
        .filter_map(|c| Some((c[0].as_str()?, c[1].as_u64()?)));
    Some(polld_core::IfCounters::unaccounted_named(named))
}

/// Whether every interface of `polld run --json`'s final report is conserved
/// ([`unaccounted`]).
pub fn conserved(interfaces: &Value) -> bool {
    interfaces
        .as_array()
        .is_some_and(|list| list.iter().all(|iface| unaccounted(iface) == Some(0)))
}
