//! The scheduler's entries as `polld ctl` lists them: the knobs, the state, and the
//! handler count, under `kern.polling` or a per-CPU poller's node.

use crate::knobs::{Knobs, NODE};
use crate::sysctl::{read, Reading, SysctlEntry, Value};
use crate::sysctl_oids;

use super::{PollState, Poller};

sysctl_oids! {
    /// The scheduler's entries that are not fields.
    impl Poller: OIDS {
        /// `kern.polling.handlers`: not a variable but the table's length.
        HANDLERS = "handlers": Gauge "Number of registered poll handlers",
            |p| Value::from(p.table.len());
    }
}

impl Poller {
    /// Every `kern.polling.*` entry, typed, under `node` (`kern.polling`, or a per-CPU
    /// poller's node): the knobs, then the state, then the handler count.
    pub fn readings(&self, node: &str) -> Vec<Reading> {
        read(node, &self.knobs, Knobs::OIDS)
            .chain(read(node, &self.knobs, &Knobs::FIXED_OIDS))
            .chain(read(node, &self.state, PollState::OIDS))
            .chain(read(node, self, &Poller::OIDS))
            .collect()
    }

    /// Whether `name` is a declared `kern.polling.*` entry (knob or not).
    pub fn is_declared(name: &str) -> bool {
        let leaf = name.strip_prefix(NODE).and_then(|l| l.strip_prefix('.'));
        leaf.is_some_and(|leaf| {
            Poller::default()
                .readings(NODE)
                .iter()
                .any(|r| r.leaf == leaf)
        })
    }

    /// Reads one `kern.polling.*` value by its short name.
    pub fn get(&self, short: &str) -> Option<String> {
        self.readings(NODE)
            .into_iter()
            .find(|r| r.leaf == short)
            .map(|r| r.value.to_string())
    }

    /// Every `kern.polling.*` entry, as `polld ctl -a` lists it.
    pub fn entries(&self) -> Vec<SysctlEntry> {
        self.readings(NODE)
            .into_iter()
            .map(SysctlEntry::from)
            .collect()
    }
}
