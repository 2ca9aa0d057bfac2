//! A guest's state directory and what `up` recorded there ([`GuestState`]), read by
//! everything that needs to know whether a guest of a prefix is up.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::TestbedError;

/// Where the guests' state directories are.
pub(super) const STATE_ROOT: &str = "/run/polld-testbed";

/// A running guest, as `up` recorded it in `guest.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestState {
    /// qemu's pid.
    pub pid: u32,
    /// `kvm` or `tcg`.
    pub accel: String,
    /// Why that accelerator (`no vmx/svm in /proc/cpuinfo: software emulation`).
    pub accel_reason: String,
    /// Milliseconds from starting qemu to the agent's first answer.
    pub boot_ms: u64,
    pub kernel: String,
    pub initramfs: PathBuf,
    /// The initramfs was built by this `up` (else it came from the cache).
    pub initramfs_built: bool,
    /// The polld binary in the guest (a copy taken at `up`).
    pub polld: PathBuf,
    pub console_log: PathBuf,
    pub memory_mib: u32,
    /// The TAPs' names in the host namespace, before they moved into gen and sink.
    pub host_taps: [String; 2],
}

/// `{prefix}vm`: the guest's name, in messages and its state directory.
pub fn guest_name(prefix: &str) -> String {
    format!("{prefix}vm")
}

/// The guest's state directory.
pub fn state_dir(prefix: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(guest_name(prefix))
}

/// The state of the guest of `prefix`, if one was brought up (and not brought down).
pub fn guest_state(prefix: &str) -> Option<GuestState> {
    let text = fs::read_to_string(state_dir(prefix).join("guest.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The last `lines` lines of the guest's console.
pub fn console_tail(prefix: &str, lines: usize) -> String {
    let text = fs::read(state_dir(prefix).join("console.log")).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Writes `state` to the guest's `guest.json`.
pub(super) fn save(prefix: &str, state: &GuestState) -> Result<(), TestbedError> {
    let path = state_dir(prefix).join("guest.json");
    let text = serde_json::to_string_pretty(state).unwrap_or_default();
    fs::write(&path, text)
        .map_err(|e| TestbedError::Failed(format!("cannot write {}: {e}", path.display())))
}
