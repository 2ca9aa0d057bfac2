//! Gen and sink logic against an in-memory device: exact counts, no kernel, no root.

mod common;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use common::{conserved, GenCli, SinkCli};
use polld_core::{Device, LinkState, TxFull};
use polld_traffic::backend::TxDevice;
use polld_traffic::frame::{parse, Parsed};
use polld_traffic::{GenArgs, GenSummary, Generator, Sink, SinkArgs, SinkSummary};

/// A wire in memory: what one device flushes, the other receives.
type Wire = Rc<RefCell<VecDeque<Vec<u8>>>>;

/// A device whose transmit ring holds `ring` frames until `flush`, and which can refuse
/// every `refuse_every`-th send as a full ring would.
struct MemoryDevice {
    wire: Wire,
    pending: Vec<Vec<u8>>,
    ring: usize,
    refuse_every: Option<u64>,
    sends: u64,
}

impl MemoryDevice {
    fn new(wire: &Wire, ring: usize) -> MemoryDevice {
        MemoryDevice {
            wire: wire.clone(),
            pending: Vec::new(),
            ring,
            refuse_every: None,
            sends: 0,
        }
    }
}

impl Device for MemoryDevice {
    fn name(&self) -> &str {
        "mem0"
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let mut wire = self.wire.borrow_mut();
        let n = budget.min(wire.len());
        for mut frame in wire.drain(..n) {
            rx(&mut frame);
        }
        n
    }

    fn rx_ready(&mut self) -> bool {
        !self.wire.borrow().is_empty()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        self.sends += 1;
        if self.pending.len() >= self.ring
            || self
                .refuse_every
                .is_some_and(|n| self.sends.is_multiple_of(n))
        {
            return Err(TxFull);
        }
        self.pending.push(frame.to_vec());
        Ok(())
    }

    fn flush(&mut self) {
        self.wire.borrow_mut().extend(self.pending.drain(..));
    }

    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }

    fn set_interrupt(&mut self, _armed: bool) {}
}

impl TxDevice for MemoryDevice {
    fn tx_dropped(&mut self) -> u64 {
        0
    }

    fn tx_pushbacks(&mut self) -> u64 {
        0
    }

    fn tx_pending(&mut self) -> u64 {
        self.pending.len() as u64
    }
}

/// Parses `gen mem0 EXTRA`, with interval reports off unless EXTRA sets them.
fn gen_args(extra: &[&str]) -> Result<GenArgs, String> {
    let quiet: &[&str] = if extra.contains(&"-i") {
        &[]
    } else {
        &["-i", "0"]
    };
    let argv = ["gen", "mem0"].iter().chain(quiet).chain(extra);
    GenCli::try_parse_from(argv)
        .map(|c| c.args)
        .map_err(|e| e.to_string())
}

fn sink_args(extra: &[&str]) -> SinkArgs {
    let argv = ["sink", "mem0", "-i", "0"].iter().chain(extra);
    SinkCli::try_parse_from(argv).unwrap().args
}

fn generate(dev: &mut MemoryDevice, extra: &[&str]) -> (GenSummary, String) {
    let gen = Generator::new(&gen_args(extra).unwrap()).unwrap();
    let mut out = Vec::new();
    let summary = gen.run(dev, &AtomicBool::new(false), &mut out);
    (summary, String::from_utf8(out).unwrap())
}

fn receive(dev: &mut MemoryDevice, extra: &[&str]) -> (SinkSummary, String) {
    let sink = Sink::new(&sink_args(extra)).unwrap();
    let mut out = Vec::new();
    let summary = sink.run(dev, &AtomicBool::new(false), &mut out);
    (summary, String::from_utf8(out).unwrap())
}

#[test]
fn an_injected_gap_and_reordering_are_counted_exactly_in_every_flow() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    let (gen, _) = generate(
        &mut tx,
        &[
            "--count",
            "4000",
            "--flows",
            "4",
            "--inject-gap",
            "100:10",
            "--inject-reorder",
            "500",
        ],
    );
    assert_eq!(gen.frames, 4000);
    let mut rx = MemoryDevice::new(&wire, 64);
    let (sink, text) = receive(&mut rx, &["--count", "4000"]);
    assert_eq!(conserved(&sink).flows, 4);
    assert_eq!(conserved(&sink).sequence.received, 4000);
    assert_eq!(conserved(&sink).sequence.lost, 4 * 10);
    assert_eq!(conserved(&sink).sequence.reordered, 4);
    assert_eq!(conserved(&sink).sequence.duplicates, 0);
    assert_eq!(conserved(&sink).latency.unwrap().samples, 4000);
    assert!(text.contains("lost 40 ("), "{text}");
}

/// IPv6 frames take the same accounting: gaps, reordering, the end-of-run record of a
/// flow that lost its tail, and latency; the smallest frame is the IPv6 one (80 bytes).
#[test]
fn ipv6_frames_are_generated_and_accounted_like_ipv4_ones() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    let (gen, text) = generate(
        &mut tx,
        &[
            "--ipv6",
            "--count",
            "2000",
            "--flows",
            "2",
            "--vary",
            "dst-ip",
            "--inject-gap",
            "100:10",
            "--inject-reorder",
            "500",
        ],
    );
    assert_eq!((gen.frames, gen.ip_version, gen.frame_size), (2000, 6, 80));
    assert!(text.contains("80-byte IPv6 frames"), "{text}");
    let dst: Vec<_> = wire
        .borrow()
        .iter()
        .take(2)
        .map(|f| f[38..54].to_vec())
        .collect();
    assert_eq!(
        dst[0][15] + 1,
        dst[1][15],
        "flow 1 adds 1 to the destination"
    );
    // Flow 1 loses its last 20 frames.
    wire.borrow_mut().retain(|f| match parse(f) {
        Parsed::Ours { flow: 1, seq, .. } => seq < 1010 - 20,
        _ => true,
    });
    let mut rx = MemoryDevice::new(&wire, 64);
    let (sink, text) = receive(&mut rx, &["--duration", "0.2"]);
    let a = conserved(&sink);
    assert_eq!(a.foreign + a.bad_checksum, 0, "{text}");
    assert_eq!(a.sequence.received, 2000 - 20);
    assert_eq!(a.sequence.lost, 2 * 10 + 20, "{text}");
    assert_eq!(a.sequence.reordered, 2);
    assert_eq!((a.flows, a.flows_issued), (2, Some(2)));
    assert_eq!(a.latency.unwrap().samples, 2000 - 20);
}

#[test]
fn pushed_back_frames_are_retried_not_lost() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 8);
    tx.refuse_every = Some(5);
    let (gen, _) = generate(&mut tx, &["--count", "1000", "--flows", "3"]);
    assert_eq!(gen.frames, 1000);
    assert!(gen.pushed_back >= 1000 / 5, "{gen:?}");
    let mut rx = MemoryDevice::new(&wire, 8);
    let (sink, _) = receive(&mut rx, &["--count", "1000"]);
    assert_eq!(conserved(&sink).sequence.received, 1000);
    assert_eq!(
        conserved(&sink).sequence.lost
            + conserved(&sink).sequence.reordered
            + conserved(&sink).sequence.duplicates,
        0
    );
}

#[test]
fn foreign_and_corrupted_frames_are_counted_apart_from_ours() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    generate(&mut tx, &["--count", "10", "--size", "128"]);
    {
        let mut frames = wire.borrow_mut();
        let mut corrupted = frames[3].clone();
        corrupted[22] = 1; // TTL changed without fixing the checksum
        frames.push_back(corrupted);
        frames.push_back(vec![0xff; 60]);
        frames.push_back(vec![0; 14]);
    }
    let mut rx = MemoryDevice::new(&wire, 64);
    let (sink, _) = receive(&mut rx, &["--count", "16"]);
    assert_eq!(sink.frames, 16);
    assert_eq!(conserved(&sink).bad_checksum, 1);
    assert_eq!(conserved(&sink).foreign, 2);
    assert_eq!(
        conserved(&sink).end_records,
        3,
        "one record, sent three times"
    );
    assert_eq!(conserved(&sink).sequence.received, 10);
    assert_eq!(sink.bytes, 11 * 128 + 60 + 14 + 3 * 70);
}

#[test]
fn flows_differ_in_the_varied_fields_only() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    generate(
        &mut tx,
        &[
            "--count",
            "3",
            "--flows",
            "3",
            "--vary",
            "src-ip,dst-port",
            "--src-ip",
            "10.0.1.254",
        ],
    );
    let frames: Vec<_> = wire
        .borrow_mut()
        .drain(..)
        .filter(|f| matches!(parse(f), Parsed::Ours { .. }))
        .collect();
    let src_ips: Vec<_> = frames.iter().map(|f| f[26..30].to_vec()).collect();
    assert_eq!(src_ips, [[10, 0, 1, 254], [10, 0, 1, 255], [10, 0, 2, 0]]);
    let dst_ports: Vec<_> = frames
        .iter()
        .map(|f| u16::from_be_bytes([f[36], f[37]]))
        .collect();
    assert_eq!(dst_ports, [9, 10, 11]);
    assert!(frames
        .iter()
        .all(|f| f[30..34] == [10, 0, 2, 100] && f[34..36] == [0, 9]));
    for (i, f) in frames.iter().enumerate() {
        assert!(matches!(parse(f), Parsed::Ours { flow, seq: 0, .. } if usize::from(flow) == i));
    }
}

#[test]
fn a_paced_run_sends_the_scheduled_frames() {
    // Frames sent plus frames skipped after stalls (a loaded machine) always make up the
    // schedule; on an idle machine nothing is skipped.
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    let (gen, _) = generate(&mut tx, &["--rate", "20k", "--duration", "0.3"]);
    assert_eq!(
        gen.frames + gen.skipped,
        6000,
        "frames due in [0, 0.3 s): {gen:?}"
    );
    assert_eq!(wire.borrow().len() as u64, gen.frames + gen.end_records);
}

/// Frames lost after the last one a flow delivered are invisible to sequence numbers;
/// the generator's end-of-run record shows them. (The sink starts after the generator
/// here, so a flow it never saw cannot be counted: the cli tests cover that case.)
#[test]
fn the_end_of_run_record_counts_the_frames_lost_at_the_end_of_each_flow() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    let (gen, _) = generate(&mut tx, &["--count", "400", "--flows", "4"]);
    assert_eq!((gen.frames, gen.end_records), (400, 3));
    // Flow 2 loses its last 30 frames, flow 3 all but its first 10.
    wire.borrow_mut().retain(|f| match parse(f) {
        Parsed::Ours { flow: 2, seq, .. } => seq < 70,
        Parsed::Ours { flow: 3, seq, .. } => seq < 10,
        _ => true,
    });
    let mut rx = MemoryDevice::new(&wire, 64);
    let (sink, text) = receive(&mut rx, &["--duration", "0.2"]);
    let a = conserved(&sink);
    assert_eq!(a.sequence.received, 400 - 30 - 90);
    assert_eq!(a.sequence.lost, 30 + 90, "{text}");
    assert_eq!((a.flows, a.flows_issued), (4, Some(4)));
    assert!(text.contains("end-of-run record came"), "{text}");
}

#[test]
fn json_mode_prints_one_document_the_summary_with_its_intervals() {
    let wire = Wire::default();
    let mut tx = MemoryDevice::new(&wire, 64);
    let gen = Generator::new(
        &gen_args(&["--rate", "10k", "--duration", "0.35", "-i", "0.1", "--json"]).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    let summary = gen.run(&mut tx, &AtomicBool::new(false), &mut out);
    let document: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(document["frames"], summary.frames);
    let intervals = document["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 3, "{document}");
    let interval_frames: u64 = intervals
        .iter()
        .map(|l| l["frames"].as_u64().unwrap())
        .sum();
    assert_eq!(interval_frames, summary.frames);

    let mut rx = MemoryDevice::new(&wire, 64);
    let sink = Sink::new(&sink_args(&["--json", "--count", "5"])).unwrap();
    let mut out = Vec::new();
    sink.run(&mut rx, &AtomicBool::new(false), &mut out);
    let summary: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(summary["frames"], 5);
    assert!(
        summary["analysis"]["latency"]["p999_ns"].as_u64().is_some(),
        "{summary}"
    );
}

#[test]
fn a_stop_request_ends_both_loops_with_a_summary() {
    let stop = AtomicBool::new(true);
    let wire = Wire::default();
    let mut dev = MemoryDevice::new(&wire, 64);
    let gen = Generator::new(&gen_args(&["--rate", "1k"]).unwrap()).unwrap();
    let summary = gen.run(&mut dev, &stop, &mut Vec::new());
    assert_eq!(summary.frames, 0);
    let sink = Sink::new(&sink_args(&[])).unwrap();
    let summary = sink.run(&mut dev, &stop, &mut Vec::new());
    assert_eq!(summary.frames, 0);
    assert!(summary.analysis.unwrap().latency.is_none());
}

#[test]
fn bad_arguments_are_refused_with_a_clear_reason() {
    for (argv, reason) in [
        (&["--size", "59"][..], "60..=1514"),
        (&["--size", "1515"], "60..=1514"),
        (&["--rate", "0"], "above zero"),
        (&["--rate", "10k", "--bitrate", "1M"], "cannot be used with"),
        (&["--duration", "0"], "above 0 seconds"),
        (&["--count", "0"], "not in 1.."),
        (&["--flows", "0"], "not in 1..=65536"),
        (&["--flows", "65537"], "not in 1..=65536"),
        (&["--inject-gap", "5"], "AT:LEN"),
        (&["--dst-mac", "02:00"], "MAC address"),
        (&["--backend", "dpdk"], "af_packet"),
    ] {
        let err = gen_args(argv).unwrap_err();
        assert!(err.contains(reason), "{argv:?}: {err}");
    }
    for (argv, reason) in [
        (&["--ipv6", "--size", "79"][..], "80..=1514"),
        (
            &["--ipv6", "--src-ip", "10.0.1.1"],
            "--src-ip 10.0.1.1 is not of the family",
        ),
        (
            &["--src-ip", "10.0.1.1", "--dst-ip", "2001:db8::1"],
            "not of the family",
        ),
    ] {
        let err = Generator::new(&gen_args(argv).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(reason), "{argv:?}: {err}");
    }
    let err = GenCli::try_parse_from(["gen"]).err().unwrap().to_string();
    assert!(err.contains("<INTERFACE>"), "{err}");
}

#[test]
fn the_counter_sink_reports_counts_since_its_start_and_passes_errors_on() {
    let sink = Sink::new(&sink_args(&[
        "--backend",
        "xdp-count",
        "--count",
        "500",
        "--json",
    ]))
    .unwrap();
    let mut reads = 0;
    let mut counter = || {
        reads += 1;
        Ok((1000 + 100 * reads, 64_000 + 6_000 * reads))
    };
    let mut out = Vec::new();
    let summary = sink
        .run_counter(&mut counter, &AtomicBool::new(false), &mut out)
        .unwrap();
    assert_eq!((summary.frames, summary.bytes), (500, 30_000));
    assert!(summary.analysis.is_none());
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["analysis"], serde_json::Value::Null);

    let mut broken = || Err(polld_traffic::Error("the map is gone".into()));
    let err = sink
        .run_counter(&mut broken, &AtomicBool::new(false), &mut Vec::new())
        .unwrap_err();
    assert_eq!(err.0, "the map is gone");
}

#[test]
fn a_missing_namespace_or_interface_is_named_in_the_error() {
    let args = gen_args(&["--netns", "polld-no-such-ns", "--count", "1"]).unwrap();
    let err = polld_traffic::run_gen(&args, &mut Vec::new()).unwrap_err();
    assert!(err.0.contains("polld-no-such-ns"), "{err}");
    for backend in ["af_packet", "af_xdp", "xdp-count"] {
        let argv = ["sink", "polld-nosuch0", "--backend", backend];
        let args = SinkCli::try_parse_from(argv).unwrap().args;
        let err = polld_traffic::run_sink(&args, &mut Vec::new()).unwrap_err();
        assert!(err.0.contains("polld-nosuch0"), "{backend}: {err}");
    }
}

#[test]
fn a_device_that_refuses_everything_does_not_hold_a_timed_run_past_its_end() {
    let wire = Wire::default();
    let mut full = MemoryDevice::new(&wire, 0);
    let (gen, _) = generate(&mut full, &["--rate", "1k", "--duration", "0.2"]);
    assert_eq!(gen.frames, 0);
    assert!(gen.pushed_back > 0);
    assert_eq!(gen.skipped, 200, "frames due in [0, 0.2 s): {gen:?}");
    assert!(
        gen.seconds < 5.0,
        "ends soon after the deadline, not never: {gen:?}"
    );
}

/// Two generators into one sink, as two inputs merged into one output: with their own
/// flow ranges (`--first-flow`) the sink keeps their sequences apart, and it counts the
/// frames that arrived after a frame sent later (`out_of_send_order`): none when the
/// merge keeps the order of sending, every frame of the earlier run when it comes last.
#[test]
fn two_generators_merged_into_one_sink_are_counted_apart_and_in_send_order() {
    let (early, late) = (Wire::default(), Wire::default());
    let (a, _) = generate(
        &mut MemoryDevice::new(&early, 64),
        &["--count", "300", "--flows", "2"],
    );
    let (b, _) = generate(
        &mut MemoryDevice::new(&late, 64),
        &["--count", "200", "--flows", "2", "--first-flow", "2"],
    );
    for (first, then, out_of_order) in [(&early, &late, 0), (&late, &early, a.frames)] {
        let merged = Wire::default();
        merged
            .borrow_mut()
            .extend(first.borrow().iter().chain(then.borrow().iter()).cloned());
        let (sink, text) = receive(&mut MemoryDevice::new(&merged, 64), &["--duration", "0.2"]);
        let s = conserved(&sink);
        assert_eq!(s.sequence.received, a.frames + b.frames, "{text}");
        assert_eq!((s.flows, s.flows_issued), (4, Some(4)), "{text}");
        let q = &s.sequence;
        assert_eq!((q.lost, q.reordered, q.duplicates), (0, 0, 0), "{text}");
        assert_eq!(s.out_of_send_order, out_of_order, "{text}");
        assert!(
            text.contains(&format!("out of send order {out_of_order}")),
            "{text}"
        );
    }
}

#[test]
fn a_flow_range_past_the_last_flow_id_is_refused() {
    let Err(e) = Generator::new(&gen_args(&["--first-flow", "65535", "--flows", "2"]).unwrap())
    else {
        panic!("flow ids 65535 and 65536 were accepted");
    };
    assert!(
        e.to_string().contains("--first-flow 65535 with --flows 2"),
        "{e}"
    );
}
