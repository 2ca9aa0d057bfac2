//! An interface's NAPI instances and their kernel threads, asked from inside the
//! testbed namespace that holds it (see [`polld_dev::napi`]).

pub use polld_dev::napi::Napi;

use crate::TestbedError;

/// The NAPI instances of interface `ifname` in namespace `ns` (none when the interface
/// has no NAPI enabled, as a veth without GRO or XDP).
pub fn napi_of(ns: &str, ifname: &str) -> Result<Vec<Napi>, TestbedError> {
    let ifname_owned = ifname.to_string();
    polld_dev::netns::in_netns(ns, move || polld_dev::napi::napis_of(&ifname_owned))?
        .map_err(|e| TestbedError::Failed(format!("NAPI of {ifname} in namespace {ns}: {e}")))
}
