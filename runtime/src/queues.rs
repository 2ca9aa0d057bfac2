//! Interfaces polled by several CPUs, one queue each (`queues` on AF_XDP, `fanout` on
//! AF_PACKET; docs/algorithm.md §8): opening their queues together, and naming them.
//!
//! The queues of one interface must be opened together: the AF_XDP sockets share the one
//! XDP program an interface can have, and the AF_PACKET sockets join one fanout group
//! whose id the first socket gets. Each poll thread opens its own devices, so the queues
//! of an interface wait in a [`QueueGroup`] shared by the threads: the first thread to ask
//! for one opens them all and takes its own, the others take theirs. An interface that
//! went away is reopened the same way: the first queue to ask opens a new set.
//!
//! Each queue's counters are `dev.<if>.queue<N>.*` (FreeBSD's ix(4) names its queues'
//! `dev.ix.0.queue0.*`), N being the AF_XDP receive queue or the fanout member; the
//! interface's own `dev.<if>.*` counters are their sums.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use polld_dev::busy_poll::BusyPoll;
use polld_middleware::reopen::Opened;

use crate::config::{DeviceConfig, RunConfig};
use crate::daemon::busy_poll::busy_poll_of;
use crate::daemon::open::{namespace_of, open_queues};
use crate::rx_work::RxOwner;

/// The queues of one interface, opened once for every poll thread that polls one.
pub(crate) struct QueueGroup {
    device: DeviceConfig,
    /// The preferred busy polling of its AF_XDP queues (`busy.queue(k)` for the k-th).
    busy: BusyPoll,
    /// Opened queues not taken yet, in the order of `device.queues`.
    ready: Mutex<Vec<Option<(Opened, RxOwner)>>>,
}

impl QueueGroup {
    /// Queue `k` (of `queues`): the one waiting, else all of them opened anew (at start,
    /// or after the interface went away), keeping the others for their threads.
    pub(crate) fn take(&self, k: usize) -> Result<(Opened, RxOwner), String> {
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(queue) = ready.get_mut(k).and_then(Option::take) {
            return Ok(queue);
        }
        let netns = namespace_of(&self.device).map_err(|e| e.to_string())?;
        *ready = open_queues(&self.device, netns, &self.busy)?
            .into_iter()
            .map(Some)
            .collect();
        ready
            .get_mut(k)
            .and_then(Option::take)
            .ok_or_else(|| format!("{}: no queue {k} was opened", self.device.name))
    }
}

/// The queue group of every interface with queues, by its `[[interfaces]]` entry.
#[derive(Clone, Default)]
pub(crate) struct QueueGroups(HashMap<usize, Arc<QueueGroup>>);

impl QueueGroups {
    /// A group, with nothing opened yet, for each interface of `config` that has queues.
    pub(crate) fn of_config(config: &RunConfig) -> QueueGroups {
        QueueGroups(
            config
                .devices
                .iter()
                .filter(|d| !d.queues.is_empty())
                .map(|d| {
                    let group = QueueGroup {
                        device: d.clone(),
                        busy: busy_poll_of(config),
                        ready: Mutex::new(Vec::new()),
                    };
                    (d.entry, Arc::new(group))
                })
                .collect(),
        )
    }

    /// The group of `d` and which of its queues `d` is, if `d` is one poll CPU's queue.
    pub(crate) fn of(&self, d: &DeviceConfig) -> Option<(Arc<QueueGroup>, usize)> {
        Some((self.0.get(&d.entry)?.clone(), d.this_queue?))
    }
}

/// The name of queue `queue` of interface `ifname` in counters and reports:
/// `veth1.queue0`.
pub fn queue_name(ifname: &str, queue: u32) -> String {
    format!("{ifname}.queue{queue}")
}
