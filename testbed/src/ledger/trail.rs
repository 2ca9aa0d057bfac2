//! The testbed's own stream under way ([`StreamTrail`]), booked into a [`Ledger`] once
//! gen and polld are done.

use std::time::{Duration, Instant};

use polld_core::DropReason;
use polld_core::IfCounters as PolldCounters;
use serde_json::Value;

use super::{Ledger, PathCounters, PathReader, Sent, StreamPath};
use crate::entries::{dev_entry, dev_node, drops_leaf, polld_values, value_of};
use crate::{Devices, Layout, TestbedError};

/// The testbed's own stream under way: its path's counters from before gen sent, then
/// drained and booked once gen and polld are done. Tests and [`crate::demo::measure`]
/// use it around their `polld gen` (the TAP trials of [`crate::share`], with several
/// streams, use [`PathReader`] directly).
#[derive(Debug)]
pub struct StreamTrail {
    reader: PathReader,
    stream: (StreamPath, PathCounters),
}

impl StreamTrail {
    /// Reads the stream's counters now, before gen sends; `None` on a layout whose
    /// forwarder is not on this host (a guest).
    pub fn start(layout: &Layout) -> Result<Option<StreamTrail>, TestbedError> {
        let Some(path) = StreamPath::of(layout) else {
            return Ok(None);
        };
        let reader = PathReader::open(layout)?;
        let start = reader.read(&path)?;
        Ok(Some(StreamTrail {
            reader,
            stream: (path, start),
        }))
    }

    /// Once gen has stopped: waits for the frames still on the way ([`PathReader::drain`]).
    /// Call it before polld stops.
    pub fn drain(&self, sent: Sent) -> Result<(), TestbedError> {
        self.reader
            .drain(std::slice::from_ref(&self.stream), sent.frames)
    }

    /// On veth, after [`StreamTrail::drain`]: waits (up to 2 s) until polld, over its
    /// control `socket`, has taken every frame veth1's kernel handed up (its `rx_packets`
    /// and drops before rx reach veth1's `rx_packets`, less the `rx_dropped` its socket
    /// did not count). A frame still in polld's socket ring moves no kernel counter, and
    /// the socket's ring is purged uncounted when polld closes it. On TAP the drain's
    /// first condition already covers it (a TAP counts a frame in `tx_packets` when polld
    /// reads it).
    pub fn wait_for_polld(&self, socket: &std::path::Path) -> Result<(), TestbedError> {
        let (path, start) = &self.stream;
        if path.devices != Devices::Veth {
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let values = polld_values(socket, &dev_node(&path.polld_in))?;
            let value = |leaf: &str| value_of(&values, &dev_entry(&path.polld_in, leaf));
            let before_rx: u64 = DropReason::before_rx_reasons()
                .map(|r| value(&drops_leaf(r.name())))
                .sum();
            let grew = self.reader.read(path)?.since(start);
            let unseen = grew.fwd_in.rx_dropped.saturating_sub(before_rx);
            let handed_up = grew.fwd_in.rx_packets.saturating_sub(unseen);
            if value(PolldCounters::RX_PACKETS.name) + before_rx >= handed_up
                || Instant::now() > deadline
            {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The ledger of what gen `sent`, from the counters now and polld's final report.
    pub fn ledger(&self, sent: Sent, polld: &Value) -> Result<Ledger, TestbedError> {
        let (path, start) = &self.stream;
        let grew = self.reader.read(path)?.since(start);
        Ledger::of_stream(path, sent, &grew, polld)
    }
}
