//! A stream's interfaces from gen to sink ([`StreamPath`]) and the kernel's counters of
//! them ([`PathCounters`]), read from the testbed's namespaces ([`PathReader`]).

use std::time::{Duration, Instant};

use crate::{Devices, IfCounters, Layout, NetDev, TestbedError};

/// One stream's interfaces, from gen to sink.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamPath {
    /// The interface gen sends on (veth0, tap0), in gen.
    pub gen: String,
    /// polld's input and output, as its report names them.
    pub polld_in: String,
    pub polld_out: String,
    /// The interface the sink receives on (veth3, tap1), in sink.
    pub sink: String,
    /// Veth: polld's interfaces are veths of fwd's own (veth1, veth2), each behind a ring.
    /// TAP: they are gen's and sink's TAPs, whose fds polld reads and writes. Vm: they are
    /// the guest's NICs (eth0, eth1), with counters of their own as veth1 and veth2 have,
    /// and gen and sink send and receive on the TAPs behind them, as on TAP.
    pub devices: Devices,
}

impl StreamPath {
    /// The testbed's own stream: veth0 -> veth1 -> polld -> veth2 -> veth3, or tap0 ->
    /// polld -> tap1. `None` on a layout whose forwarder is not on this host (a guest).
    pub fn of(layout: &Layout) -> Option<StreamPath> {
        match layout.devices {
            Devices::Veth | Devices::Tap => Some(StreamPath::through(layout)),
            Devices::Vm => None,
        }
    }

    /// The testbed's own stream through its forwarder, wherever that is: on a guest the
    /// caller reads its NICs' counters in the guest.
    pub fn through(layout: &Layout) -> StreamPath {
        StreamPath {
            gen: layout.veth0.name.clone(),
            polld_in: layout.veth1.name.clone(),
            polld_out: layout.veth2.name.clone(),
            sink: layout.veth3.name.clone(),
            devices: layout.devices,
        }
    }

    /// A TAP stream: `input` in gen, `output` in sink, both polld's.
    pub fn tap(input: String, output: String) -> StreamPath {
        StreamPath {
            gen: input.clone(),
            polld_in: input,
            polld_out: output.clone(),
            sink: output,
            devices: Devices::Tap,
        }
    }
}

/// The kernel's counters of a stream's interfaces: gen's, fwd's two veths (zero on TAP,
/// whose polld ends are gen's and sink's TAPs), sink's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounters {
    pub gen: IfCounters,
    pub fwd_in: IfCounters,
    pub fwd_out: IfCounters,
    pub sink: IfCounters,
}

impl PathCounters {
    /// How much each counter grew since `start`.
    pub fn since(&self, start: &PathCounters) -> PathCounters {
        let grew = |now: &IfCounters, then: &IfCounters| IfCounters {
            rx_packets: now.rx_packets.saturating_sub(then.rx_packets),
            rx_bytes: now.rx_bytes.saturating_sub(then.rx_bytes),
            rx_dropped: now.rx_dropped.saturating_sub(then.rx_dropped),
            tx_packets: now.tx_packets.saturating_sub(then.tx_packets),
            tx_bytes: now.tx_bytes.saturating_sub(then.tx_bytes),
            tx_dropped: now.tx_dropped.saturating_sub(then.tx_dropped),
        };
        PathCounters {
            gen: grew(&self.gen, &start.gen),
            fwd_in: grew(&self.fwd_in, &start.fwd_in),
            fwd_out: grew(&self.fwd_out, &start.fwd_out),
            sink: grew(&self.sink, &start.sink),
        }
    }
}

/// Reads streams' kernel counters from the testbed's namespaces, each `/proc/net/dev`
/// opened once ([`NetDev`]: no process per reading on the measured CPUs).
#[derive(Debug)]
pub struct PathReader {
    gen: NetDev,
    fwd: Option<NetDev>,
    sink: NetDev,
}

impl PathReader {
    /// For the testbed of `layout`; fwd's namespace only when polld's interfaces are there.
    pub fn open(layout: &Layout) -> Result<PathReader, TestbedError> {
        Ok(PathReader {
            gen: NetDev::open(&layout.gen_ns)?,
            fwd: match layout.devices {
                Devices::Veth => Some(NetDev::open(&layout.fwd_ns)?),
                Devices::Tap | Devices::Vm => None,
            },
            sink: NetDev::open(&layout.sink_ns)?,
        })
    }

    /// `path`'s counters now.
    pub fn read(&self, path: &StreamPath) -> Result<PathCounters, TestbedError> {
        let (fwd_in, fwd_out) = match (&self.fwd, path.devices) {
            (Some(fwd), Devices::Veth) => (
                fwd.counters(&path.polld_in)?,
                fwd.counters(&path.polld_out)?,
            ),
            _ => (IfCounters::default(), IfCounters::default()),
        };
        Ok(PathCounters {
            gen: self.gen.counters(&path.gen)?,
            fwd_in,
            fwd_out,
            sink: self.sink.counters(&path.sink)?,
        })
    }

    /// Waits, after the generators stopped, for the frames still on the way: until gen's
    /// interfaces have handed on (or dropped) all `sent` frames since `streams`' start
    /// counters, and then until no counter on the paths has moved for 100 ms (the rings
    /// and sockets between drained into polld or the sink). Gives up after 2 s: what is
    /// still missing then shows as unaccounted. A TAP purges its queue uncounted when
    /// polld closes it, and an AF_XDP socket its rings, so polld must outlive this.
    pub fn drain(
        &self,
        streams: &[(StreamPath, PathCounters)],
        sent: u64,
    ) -> Result<(), TestbedError> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let now = || -> Result<Vec<PathCounters>, TestbedError> {
            streams
                .iter()
                .map(|(path, start)| Ok(self.read(path)?.since(start)))
                .collect()
        };
        let handed_on = |grew: &[PathCounters]| -> u64 {
            grew.iter()
                .map(|g| g.gen.tx_packets + g.gen.tx_dropped)
                .sum()
        };
        let mut last = now()?;
        while handed_on(&last) < sent && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            last = now()?;
        }
        let mut still_since = Instant::now();
        while Instant::now() < deadline && still_since.elapsed() < Duration::from_millis(100) {
            std::thread::sleep(Duration::from_millis(20));
            let next = now()?;
            if next != last {
                still_since = Instant::now();
                last = next;
            }
        }
        Ok(())
    }
}
