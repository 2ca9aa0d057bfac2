//! Where every frame went, end to end: what the generator sent = what reached the sink +
//! each named drop on every hop between them.
//!
//! polld checks its own identity on each interface (`rx = forwarded + local + consumed +
//! queued + drops`, [`crate::entries::conserved`]); that alone cannot see a frame lost
//! before polld read it or after it wrote it. A [`Ledger`] follows the frames across the
//! whole path, from counters kept by different parties: the generator's own count, the
//! kernel's counters of every interface on the path, polld's counters, and the kernel's
//! counters of the interface the sink receives on. Each hop's losses are named; what no
//! hop explains is [`Ledger::unaccounted`], and a trial whose ledger does not balance
//! fails. This is the one end-to-end conservation check of the benches: the TAP trials
//! ([`crate::share`]) and the testbed rows ([`crate::demo::measure`]) both build theirs
//! with [`Ledger::of_stream`].
//!
//! The hops, and which counter names each one's losses:
//!
//! ```text
//!   TAP:  gen -> tap0 queue -> polld -> tap1 (sink)
//!   veth: gen -> veth0 -> veth1's ring -> XDP/AF_PACKET socket -> polld -> veth2
//!             -> veth3's ring -> sink's socket
//! ```
//!
//! - *The generator's device.* gen counts what its device accepted (`frames`) and what it
//!   saw dropped after all (`dropped`: ENOBUFS or EBUSY from a full queue). The kernel
//!   counts every drop there on gen's interface (`tx_dropped`): a TAP's full queue
//!   (`tun_net_xmit`), or veth1's full ring (`veth_xmit`, drivers/net/veth.c: with veth1
//!   in NAPI mode the frame goes to a 256-slot ptr_ring; when it is full the veth has no
//!   qdisc to hold it and counts it in veth0's `tx_dropped`). gen's drops are among the
//!   kernel's, so the ledger books gen's and what only the kernel saw.
//! - *Into polld's socket* (veth). veth1's NAPI takes the frame off the ring and counts
//!   it in veth1's `rx_packets`; polld's XDP program redirects it to the AF_XDP socket,
//!   and a redirect that fails (the socket's rx ring full, no fill-ring frame) is counted
//!   in veth1's `rx_dropped` (`veth_xdp_rcv_skb`) and by the socket (XDP_STATISTICS
//!   `rx_ring_full`, `rx_dropped`), which polld reports as its drops before rx
//!   (`drops.rx_ring_full`, `drops.rx_no_buffer`). On AF_PACKET a full ring is the
//!   socket's `tp_drops` (polld's `drops.rx_ring_full`), no interface counter. The ledger
//!   books polld's reasons and whatever of veth1's `rx_dropped` they leave. On TAP polld's
//!   `rx_ring_full` is the TAP's own `tx_dropped`, already booked at the first hop.
//! - *polld.* Its drops after rx, by reason; the frames for the box (`local`,
//!   `consumed`); the frames still in its queues (`queued`, in flight); its output's
//!   transmit drops (`tx_drops.*`).
//! - *Out of polld* (veth). A full veth3 ring drops on veth2 (`tx_dropped`), which polld's
//!   `tx_drops.nobufs` counts too (AF_XDP reads veth2's counter, AF_PACKET gets ENOBUFS):
//!   the ledger books whatever of veth2's `tx_dropped` polld's `nobufs` leaves.
//! - *The sink's interface.* On veth, veth3's NAPI counts every frame it takes off the
//!   ring in `rx_packets`, and those its XDP program could not give the sink's socket in
//!   `rx_dropped` too; on TAP a frame the kernel could not take is in `rx_dropped` only.
//!   What reached the sink is `rx_packets` less those drops and less the frames polld
//!   generated itself on that interface.
//!
//! The veth rules hold for veths in NAPI mode: the testbed's default placement
//! (napi-threaded) and any veth with an XDP program. Without NAPI a frame dropped in
//! veth1's backlog is counted in veth0's `tx_dropped` and veth1's `rx_dropped` both.

mod path;
mod trail;

use std::fmt;

use polld_core::dataplane::{DROPS, TX_DROPS};
use polld_core::{DropReason, IfCounters as PolldCounters};
use serde::Serialize;
use serde_json::Value;

use crate::entries::{counters_of, final_counter};
use crate::{Devices, TestbedError};

pub use path::{PathCounters, PathReader, StreamPath};
pub use trail::StreamTrail;

/// One trial's frames, from the generator to the sink.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// Frames the generator handed to its device.
    pub sent: u64,
    /// Frames lost on the way, by hop and reason, in path order: `("tap0 queue full
    /// (kernel tx_dropped)", 123)`.
    pub lost: Vec<(String, u64)>,
    /// Frames still on the way when the trial ended (polld's input queue), named.
    pub in_flight: Vec<(String, u64)>,
    /// Frames that reached the sink's interface.
    pub delivered: u64,
}

impl Ledger {
    /// Adds `n` frames lost at `hop` (nothing when `n` is 0).
    pub fn lose(&mut self, hop: impl Into<String>, n: u64) {
        if n > 0 {
            self.lost.push((hop.into(), n));
        }
    }

    /// Adds `n` frames still on the way at `hop` (nothing when `n` is 0).
    pub fn hold(&mut self, hop: impl Into<String>, n: u64) {
        if n > 0 {
            self.in_flight.push((hop.into(), n));
        }
    }

    /// Sent less delivered less every named loss and frame in flight: 0 when every frame
    /// is accounted for; negative when more arrived than was sent (another sender).
    pub fn unaccounted(&self) -> i64 {
        let named: u64 = self
            .lost
            .iter()
            .chain(&self.in_flight)
            .map(|(_, n)| n)
            .sum();
        self.sent as i64 - self.delivered as i64 - named as i64
    }

    /// Every frame accounted for.
    pub fn balanced(&self) -> bool {
        self.unaccounted() == 0
    }

    /// Both ledgers' frames together (several streams of one trial).
    pub fn merge(&mut self, other: Ledger) {
        self.sent += other.sent;
        self.delivered += other.delivered;
        self.lost.extend(other.lost);
        self.in_flight.extend(other.in_flight);
    }
}

/// What a generator said it sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sent {
    /// Frames its device accepted, its end-of-run records included.
    pub frames: u64,
    /// Of those, the frames it saw dropped after all (ENOBUFS, EBUSY: a full queue).
    pub dropped: u64,
}

impl Sent {
    /// From `polld gen --json`'s summary.
    pub fn of(summary: &Value) -> Sent {
        let count = |k: &str| summary[k].as_u64().unwrap_or(0);
        Sent {
            frames: count("frames") + count("end_records"),
            dropped: count("dropped"),
        }
    }
}

impl std::ops::Add for Sent {
    type Output = Sent;

    /// Both generators' frames together.
    fn add(self, other: Sent) -> Sent {
        Sent {
            frames: self.frames + other.frames,
            dropped: self.dropped + other.dropped,
        }
    }
}

impl Ledger {
    /// Adds the drops at one place that both a party on the path counts, by name (`seen`:
    /// the sender that got ENOBUFS or EBUSY back, the socket that had no room) and the
    /// kernel counts on an interface (`counted`, named `hop`): the interface counts every
    /// drop there, the party some of them, so the ledger books the party's names and the
    /// rest of the kernel's count, as polld's AF_XDP does with a veth's `tx_dropped`.
    pub fn lose_seen(&mut self, seen: Vec<(String, u64)>, hop: impl Into<String>, counted: u64) {
        let named: u64 = seen.iter().map(|(_, n)| n).sum();
        for (name, n) in seen {
            self.lose(name, n);
        }
        self.lose(hop, counted.saturating_sub(named));
    }

    /// One stream's frames from gen to sink: what gen `sent`, how the kernel's counters of
    /// `path` `grew` over the trial, and `polld`'s final report (`polld run --json`'s
    /// interfaces). The hops are those of the module's doc.
    pub fn of_stream(
        path: &StreamPath,
        sent: Sent,
        grew: &PathCounters,
        polld: &Value,
    ) -> Result<Ledger, TestbedError> {
        Ledger::of_merge(&[(path, sent, grew)], polld)
    }

    /// The frames of several streams merged into one output: each stream's input hops
    /// (its generator's device, polld's input) once per stream, then the hops of the one
    /// output they share (polld's output, the sink's interface) once. The paths must share
    /// `polld_out` and `sink`; the output's counters are read from the first stream's.
    pub fn of_merge(
        streams: &[(&StreamPath, Sent, &PathCounters)],
        polld: &Value,
    ) -> Result<Ledger, TestbedError> {
        let Some(&(first, _, grew)) = streams.first() else {
            return Err(TestbedError::Failed("a ledger needs a stream".into()));
        };
        if let Some((other, _, _)) = streams
            .iter()
            .find(|(p, _, _)| p.polld_out != first.polld_out || p.sink != first.sink)
        {
            return Err(TestbedError::Failed(format!(
                "streams merged into one ledger must share their output: {} -> {} is not {} -> {}",
                other.polld_out, other.sink, first.polld_out, first.sink
            )));
        }
        let mut ledger = Ledger::default();
        for &(path, sent, grew) in streams {
            ledger.sent += sent.frames;
            ledger.input_hops(path, sent, grew, polld)?;
        }
        ledger.output_hops(first, grew, polld)?;
        Ok(ledger)
    }

    /// The hops of `path` up to polld's reading of its input.
    fn input_hops(
        &mut self,
        path: &StreamPath,
        sent: Sent,
        grew: &PathCounters,
        polld: &Value,
    ) -> Result<(), TestbedError> {
        let read = report_of(polld, &path.polld_in)?;
        let input = &path.polld_in;
        let gen = &path.gen;
        let next = match path.devices {
            Devices::Veth => format!("{input}'s ring full"),
            Devices::Tap | Devices::Vm => "queue full".to_string(),
        };
        self.lose_seen(
            vec![(format!("gen {gen}: dropped (ENOBUFS, EBUSY)"), sent.dropped)],
            format!("{gen}: {next} (kernel tx_dropped in gen)"),
            grew.gen.tx_dropped,
        );
        let fwd = polld_host(path.devices);
        let polld_counters = counters_of(read);
        if let Some(fwd) = fwd {
            let before_rx = polld_counters
                .iter()
                .filter(|(name, _)| {
                    DROPS.key(name).is_some_and(|reason| {
                        DropReason::before_rx_reasons().any(|r| r.name() == reason)
                    })
                })
                .map(|(name, n)| (format!("polld {input}: {name}"), *n))
                .collect();
            self.lose_seen(
                before_rx,
                format!("{input}: socket full (kernel rx_dropped in {fwd})"),
                grew.fwd_in.rx_dropped,
            );
        }
        for (name, n) in &polld_counters {
            if DropReason::is_drop_after_rx(name) {
                self.lose(format!("polld {input}: {name}"), *n);
            }
        }
        self.lose(
            format!("polld {input}: for the box (local, consumed)"),
            final_counter(read, PolldCounters::LOCAL.name)
                + final_counter(read, PolldCounters::CONSUMED.name),
        );
        self.hold(
            format!("polld {input}: queued"),
            final_counter(read, PolldCounters::QUEUED.name),
        );
        Ok(())
    }

    /// The hops of `path` from polld's output on, with `grew` the path's counters.
    fn output_hops(
        &mut self,
        path: &StreamPath,
        grew: &PathCounters,
        polld: &Value,
    ) -> Result<(), TestbedError> {
        let written = report_of(polld, &path.polld_out)?;
        let output = &path.polld_out;
        let fwd = polld_host(path.devices);
        let nobufs = format!("{}.{}", TX_DROPS.name, polld_core::TxDrop::NoBufs.name());
        let mut seen_out = Vec::new();
        for (name, n) in counters_of(written) {
            if name == nobufs && fwd.is_some() {
                seen_out.push((format!("polld {output}: {name}"), n));
            } else if TX_DROPS.key(&name).is_some() {
                self.lose(format!("polld {output}: {name}"), n);
            }
        }
        if let Some(fwd) = fwd {
            let full = match path.devices {
                Devices::Veth => format!("{}'s ring full", path.sink),
                _ => "transmit queue full".to_string(),
            };
            self.lose_seen(
                seen_out,
                format!("{output}: {full} (kernel tx_dropped in {fwd})"),
                grew.fwd_out.tx_dropped,
            );
        }
        let sink = &path.sink;
        let reason = match path.devices {
            Devices::Veth => "socket full",
            Devices::Tap | Devices::Vm => "queue full",
        };
        self.lose(
            format!("{sink}: {reason} (kernel rx_dropped in sink)"),
            grew.sink.rx_dropped,
        );
        // veth's NAPI counts in rx_packets every frame it took off the ring, those it then
        // dropped included; a TAP counts a frame it could not take in rx_dropped only.
        let arrived = match path.devices {
            Devices::Veth => grew.sink.rx_packets.saturating_sub(grew.sink.rx_dropped),
            Devices::Tap | Devices::Vm => grew.sink.rx_packets,
        };
        let own = final_counter(written, PolldCounters::GENERATED.name).saturating_sub(
            final_counter(written, PolldCounters::GENERATED_DROPPED.name),
        );
        self.delivered = arrived.saturating_sub(own);
        Ok(())
    }
}

/// `name`'s entry in polld's final report.
fn report_of<'v>(polld: &'v Value, name: &str) -> Result<&'v Value, TestbedError> {
    polld
        .as_array()
        .and_then(|l| l.iter().find(|i| i["name"] == name))
        .ok_or_else(|| {
            TestbedError::Failed(format!("polld's final report has no interface {name}"))
        })
}

/// Where polld's own interfaces are, when they have counters of their own.
fn polld_host(devices: Devices) -> Option<&'static str> {
    match devices {
        Devices::Veth => Some("fwd"),
        Devices::Vm => Some("the guest"),
        Devices::Tap => None,
    }
}

impl fmt::Display for Ledger {
    /// `sent 1000 = delivered 900 + tap0 queue full 90 + polld: no_route 10` and, when it
    /// does not balance, `+ UNACCOUNTED 5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sent {} = delivered {}", self.sent, self.delivered)?;
        for (hop, n) in self.lost.iter().chain(&self.in_flight) {
            write!(f, " + {hop} {n}")?;
        }
        match self.unaccounted() {
            0 => Ok(()),
            n => write!(f, " + UNACCOUNTED {n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IfCounters;

    fn ledger() -> Ledger {
        let mut l = Ledger {
            sent: 1000,
            delivered: 880,
            ..Ledger::default()
        };
        l.lose("tap0 queue full (kernel tx_dropped)", 100);
        l.lose("polld tap0: no_route", 0);
        l.lose("polld tap0: ttl_exceeded", 15);
        l.hold("polld: IP input queue", 5);
        l
    }

    #[test]
    fn a_ledger_balances_when_every_frame_is_named() {
        let l = ledger();
        assert!(l.balanced(), "{l}");
        assert_eq!(
            l.to_string(),
            "sent 1000 = delivered 880 + tap0 queue full (kernel tx_dropped) 100 + polld tap0: ttl_exceeded 15 + polld: IP input queue 5"
        );
    }

    #[test]
    fn a_missing_frame_shows_as_unaccounted() {
        let mut l = ledger();
        l.delivered -= 3;
        assert!(!l.balanced());
        assert_eq!(l.unaccounted(), 3);
        assert!(l.to_string().ends_with(" + UNACCOUNTED 3"), "{l}");
        l.delivered += 5;
        assert_eq!(l.unaccounted(), -2, "more arrived than was sent");
    }

    fn counters(rx_packets: u64, rx_dropped: u64, tx_dropped: u64) -> IfCounters {
        IfCounters {
            rx_packets,
            rx_dropped,
            tx_dropped,
            ..IfCounters::default()
        }
    }

    /// A veth path with drops on every hop: gen saw 5 of the 100 veth0 dropped (veth1's
    /// ring full), polld's socket 30 of veth1's 40, polld dropped 7 after rx, kept 3 for
    /// the box and holds 3, its output dropped 4 too long and 20 nobufs of veth2's 25,
    /// the sink's socket 6, and veth3 took 2 frames polld generated itself: 812 delivered.
    fn veth_trial() -> (StreamPath, Sent, PathCounters, Value) {
        let path = StreamPath {
            gen: "veth0".into(),
            polld_in: "veth1".into(),
            polld_out: "veth2".into(),
            sink: "veth3".into(),
            devices: Devices::Veth,
        };
        let grew = PathCounters {
            gen: counters(0, 0, 100),
            fwd_in: counters(0, 40, 0),
            fwd_out: counters(0, 0, 25),
            sink: counters(812 + 6 + 2, 6, 0),
        };
        let polld = serde_json::json!([
            {"name": "veth1", "counters": [
                ["rx_packets", 855], ["forwarded", 842], ["drops.rx_no_buffer", 30],
                ["drops.no_route", 7], ["local", 2], ["consumed", 1], ["queued", 3]]},
            {"name": "veth2", "counters": [
                ["tx_packets", 819], ["tx_drops.too_long", 4], ["tx_drops.nobufs", 20],
                ["generated", 3], ["generated_dropped", 1]]},
        ]);
        let sent = Sent {
            frames: 1000,
            dropped: 5,
        };
        (path, sent, grew, polld)
    }

    #[test]
    fn a_guest_stream_books_its_nics_drops_and_takes_the_sink_taps_count_whole() {
        // The veth trial's frames, through a guest: tap0 -> eth0 -> polld -> eth1 -> tap1.
        let (_, sent, mut grew, polld) = veth_trial();
        let path = StreamPath {
            gen: "tap0".into(),
            polld_in: "eth0".into(),
            polld_out: "eth1".into(),
            sink: "tap1".into(),
            devices: Devices::Vm,
        };
        let polld = polld
            .to_string()
            .replace("veth1", "eth0")
            .replace("veth2", "eth1");
        let polld = serde_json::from_str(&polld).unwrap();
        // tap1 counts only what it took (a TAP's rx_dropped is not in its rx_packets).
        grew.sink.rx_packets -= 6;
        let l = Ledger::of_stream(&path, sent, &grew, &polld).unwrap();
        assert!(l.balanced(), "{l}");
        assert_eq!(l.delivered, 812);
        let hops: Vec<&str> = l.lost.iter().map(|(h, _)| h.as_str()).collect();
        for hop in [
            "tap0: queue full (kernel tx_dropped in gen)",
            "eth0: socket full (kernel rx_dropped in the guest)",
            "eth1: transmit queue full (kernel tx_dropped in the guest)",
            "tap1: queue full (kernel rx_dropped in sink)",
        ] {
            assert!(hops.contains(&hop), "{hop} in {hops:?}");
        }
    }

    #[test]
    fn a_veth_stream_books_every_hop_from_the_kernels_and_pollds_counters() {
        let (path, sent, grew, polld) = veth_trial();
        let l = Ledger::of_stream(&path, sent, &grew, &polld).unwrap();
        assert!(l.balanced(), "{l}");
        assert_eq!(l.delivered, 812);
        assert_eq!(
            l.to_string(),
            "sent 1000 = delivered 812 + gen veth0: dropped (ENOBUFS, EBUSY) 5 \
             + veth0: veth1's ring full (kernel tx_dropped in gen) 95 \
             + polld veth1: drops.rx_no_buffer 30 + veth1: socket full (kernel rx_dropped in fwd) 10 \
             + polld veth1: drops.no_route 7 + polld veth1: for the box (local, consumed) 3 \
             + polld veth2: tx_drops.too_long 4 + polld veth2: tx_drops.nobufs 20 \
             + veth2: veth3's ring full (kernel tx_dropped in fwd) 5 \
             + veth3: socket full (kernel rx_dropped in sink) 6 + polld veth1: queued 3"
        );
    }

    #[test]
    fn a_hops_kernel_drops_left_out_leave_the_ledger_unbalanced() {
        let (path, sent, grew, polld) = veth_trial();
        // Each kernel counter's own part: what no party on the path counted as well.
        type LeaveOut = fn(&mut PathCounters);
        let hops: [(&str, LeaveOut, i64); 4] = [
            ("veth0 tx_dropped", |g| g.gen.tx_dropped = 0, 95),
            ("veth1 rx_dropped", |g| g.fwd_in.rx_dropped = 0, 10),
            ("veth2 tx_dropped", |g| g.fwd_out.tx_dropped = 0, 5),
            // Not booked as a loss, the sink's drops would count as delivered.
            ("veth3 rx_dropped", |g| g.sink.rx_dropped = 0, 0),
        ];
        for (hop, leave_out, missing) in hops {
            let mut g = grew;
            leave_out(&mut g);
            let l = Ledger::of_stream(&path, sent, &g, &polld).unwrap();
            assert_eq!(l.unaccounted(), missing, "{hop}: {l}");
        }
        // The sink's drops are frames veth3 took and did not hand up: not delivered.
        let mut g = grew;
        g.sink.rx_dropped = 0;
        let l = Ledger::of_stream(&path, sent, &g, &polld).unwrap();
        assert_eq!(l.delivered, 818, "{l}");
        // gen's own count without the kernel's: the ring's other drops go missing.
        let gen_only = Sent {
            dropped: 100,
            ..sent
        };
        let l = Ledger::of_stream(&path, gen_only, &grew, &polld).unwrap();
        assert!(l.balanced(), "gen saw all 100: {l}");
    }

    #[test]
    fn a_tap_stream_books_the_taps_queue_once() {
        let path = StreamPath::tap("tap0".into(), "tap1".into());
        let grew = PathCounters {
            gen: counters(0, 0, 50),
            sink: counters(930 + 1, 7, 0),
            ..PathCounters::default()
        };
        // polld's rx_ring_full on a TAP is the TAP's own tx_dropped: not booked twice.
        let polld = serde_json::json!([
            {"name": "tap0", "counters": [
                ["rx_packets", 950], ["forwarded", 940], ["drops.rx_ring_full", 50],
                ["drops.no_route", 10]]},
            {"name": "tap1", "counters": [["tx_drops.nobufs", 3], ["generated", 1]]},
        ]);
        let sent = Sent {
            frames: 1000,
            dropped: 0,
        };
        let l = Ledger::of_stream(&path, sent, &grew, &polld).unwrap();
        assert!(l.balanced(), "{l}");
        assert_eq!(
            l.to_string(),
            "sent 1000 = delivered 930 + tap0: queue full (kernel tx_dropped in gen) 50 \
             + polld tap0: drops.no_route 10 + polld tap1: tx_drops.nobufs 3 \
             + tap1: queue full (kernel rx_dropped in sink) 7"
        );
        let e = Ledger::of_stream(&path, sent, &grew, &serde_json::json!([])).unwrap_err();
        assert!(e.to_string().contains("no interface tap0"), "{e}");
    }

    /// Two TAP inputs merged into one output: each input's queue and polld's drops on it
    /// booked per input, the shared output and the sink's queue once.
    #[test]
    fn inputs_merged_into_one_output_book_the_output_once() {
        let (a, b) = (
            StreamPath::tap("tap0".into(), "tap1".into()),
            StreamPath::tap("tap2".into(), "tap1".into()),
        );
        let grew_a = PathCounters {
            gen: counters(0, 0, 20),
            sink: counters(1500 - 20 - 5 - 30 - 4 - 6, 6, 0),
            ..PathCounters::default()
        };
        let grew_b = PathCounters {
            gen: counters(0, 0, 30),
            sink: grew_a.sink,
            ..PathCounters::default()
        };
        let polld = serde_json::json!([
            {"name": "tap0", "counters": [["drops.no_route", 5]]},
            {"name": "tap2", "counters": [["queued", 0]]},
            {"name": "tap1", "counters": [["tx_drops.nobufs", 4]]},
        ]);
        let sent = |frames| Sent { frames, dropped: 0 };
        let merged = [(&a, sent(1000), &grew_a), (&b, sent(500), &grew_b)];
        let l = Ledger::of_merge(&merged, &polld).unwrap();
        assert!(l.balanced(), "{l}");
        assert_eq!(
            l.to_string(),
            "sent 1500 = delivered 1435 + tap0: queue full (kernel tx_dropped in gen) 20 \
             + polld tap0: drops.no_route 5 + tap2: queue full (kernel tx_dropped in gen) 30 \
             + polld tap1: tx_drops.nobufs 4 + tap1: queue full (kernel rx_dropped in sink) 6"
        );
        let apart = StreamPath::tap("tap2".into(), "tap3".into());
        let e = Ledger::of_merge(
            &[(&a, sent(1), &grew_a), (&apart, sent(1), &grew_b)],
            &polld,
        )
        .unwrap_err();
        assert!(e.to_string().contains("must share their output"), "{e}");
    }

    #[test]
    fn streams_merge_into_one_ledger() {
        let mut a = ledger();
        a.merge(ledger());
        assert_eq!((a.sent, a.delivered, a.lost.len()), (2000, 1760, 4));
        assert!(a.balanced());
    }
}
