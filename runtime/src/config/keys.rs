//! The keys of the file the daemon reads itself: the top-level tables that are not the
//! packet stage's, and the keys of an `[[interfaces]]` entry that belong to the device.

use polld_core::Mode;
use polld_middleware::FaultConfig;
use serde::Deserialize;

use super::Backend;

/// The keys of an `[[interfaces]]` entry that belong to the device, not the stage.
#[derive(Deserialize)]
pub(super) struct DeviceKeys {
    #[serde(default)]
    pub(super) backend: Backend,
    #[serde(default)]
    pub(super) mode: ModeName,
    #[serde(default)]
    pub(super) queue: u32,
    #[serde(default)]
    pub(super) netns: Option<String>,
    #[serde(default)]
    pub(super) cpu: Option<usize>,
    #[serde(default)]
    pub(super) queues: Option<QueueList>,
    #[serde(default)]
    pub(super) fanout: Option<u32>,
    #[serde(default)]
    pub(super) cpus: Option<Vec<usize>>,
    pub(super) fault: Option<FaultConfig>,
    pub(super) pass_local: Option<bool>,
}

/// `queues = N` (queues 0..N) or `queues = [ids]`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum QueueList {
    Count(u32),
    Ids(Vec<u32>),
}

pub(super) struct ModeName(pub(super) Mode);

impl Default for ModeName {
    /// FreeBSD's default: polling is off until asked for.
    fn default() -> Self {
        ModeName(Mode::Interrupt)
    }
}

impl<'de> Deserialize<'de> for ModeName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(ModeName).map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown mode {s:?}; use interrupt, polling, adaptive, busy or auto"
            ))
        })
    }
}

/// The top-level keys the daemon reads itself; every other top-level key is the packet stage's.
pub(super) const RUN_FILE_KEYS: [&str; 3] = ["daemon", "knobs", "interfaces"];

pub(super) const DEVICE_KEYS: [&str; 10] = [
    "backend",
    "mode",
    "queue",
    "netns",
    "cpu",
    "fault",
    "queues",
    "fanout",
    "cpus",
    "pass_local",
];
