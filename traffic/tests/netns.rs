//! Gen and sink on real devices over a veth pair between two namespaces (needs root).
//!
//! The tests share the machine's two CPUs, so they run one at a time (a lock): the rate
//! tests measure the pacer, and a concurrent test would steal its CPU.

mod common;

use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use clap::Parser;
use common::{conserved, GenCli, SinkCli};
use polld_dev::netns::{self, Netns, VethEnd};
use polld_dev::xdp::{CountProgram, XdpMode};
use polld_traffic::backend::XdpCounter;
use polld_traffic::{GenSummary, Generator, Sink, SinkSummary};
use rustix::process::Signal;

const GEN_MAC: &str = "02:00:00:00:01:01";
const SINK_MAC: &str = "02:00:00:00:01:02";

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs this thread at the highest nice priority (as `nice -n -20 polld gen` would), so
/// that other work on this 2-vCPU machine cannot stall pacing or receiving for long.
fn raise_priority() {
    // On this thread only; failure just leaves the priority as is.
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), -20);
}

/// Two namespaces joined by a veth pair: `tg` in `gen`, `ts` in `sink`.
struct Pair {
    gen: Netns,
    sink: Netns,
    _serial: MutexGuard<'static, ()>,
}

fn pair() -> Option<Pair> {
    if !polld_testsupport::root_or_skip("needs root for namespaces") {
        return None;
    }
    let serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let gen = Netns::create("tr-gen").unwrap();
    let sink = Netns::create("tr-sink").unwrap();
    for ns in [&gen, &sink] {
        // No IPv6 router or neighbour solicitations: the only frames are ours.
        ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
    }
    netns::veth_pair(
        VethEnd {
            ns: &gen,
            name: "tg",
            mac: GEN_MAC,
            addr: None,
        },
        VethEnd {
            ns: &sink,
            name: "ts",
            mac: SINK_MAC,
            addr: None,
        },
    )
    .unwrap();
    Some(Pair {
        gen,
        sink,
        _serial: serial,
    })
}

/// Runs `gen tg ARGS` inside the generator namespace.
fn generate(p: &Pair, args: &[&str]) -> (GenSummary, String) {
    let argv = ["gen", "tg", "--dst-mac", SINK_MAC, "-i", "1"]
        .iter()
        .chain(args);
    let args = GenCli::try_parse_from(argv).unwrap().args;
    netns::in_netns(p.gen.name(), move || {
        raise_priority();
        let generator = Generator::new(&args).unwrap();
        let mut dev = args.backend.open(&args.interface).unwrap();
        let mut out = Vec::new();
        let summary = generator.run(dev.as_mut(), &AtomicBool::new(false), &mut out);
        (summary, String::from_utf8(out).unwrap())
    })
    .unwrap()
}

/// Starts `sink ts ARGS` inside the sink namespace and returns once its device is open.
fn start_sink(p: &Pair, args: &[&str]) -> JoinHandle<(SinkSummary, String)> {
    let argv = ["sink", "ts", "-i", "1"].iter().chain(args);
    let args = SinkCli::try_parse_from(argv).unwrap().args;
    let ns = p.sink.name().to_string();
    let (ready, opened) = mpsc::channel();
    let handle = thread::spawn(move || {
        netns::enter(&ns).unwrap();
        raise_priority();
        let sink = Sink::new(&args).unwrap();
        let stop = AtomicBool::new(false);
        let mut out = Vec::new();
        let summary = match args.backend.open(&args.interface).unwrap() {
            Some(mut dev) => {
                ready.send(()).unwrap();
                sink.run(dev.as_mut(), &stop, &mut out)
            }
            None => {
                let counter = XdpCounter::attach(&args.interface).unwrap();
                ready.send(()).unwrap();
                sink.run_counter(&mut || counter.counts(), &stop, &mut out)
                    .unwrap()
            }
        };
        (summary, String::from_utf8(out).unwrap())
    });
    opened.recv().expect("the sink opened its device");
    handle
}

#[test]
fn the_rate_holds_within_2_percent_at_10k_100k_and_300k_pps() {
    let Some(p) = pair() else { return };
    // The peer counts and drops in XDP, so the receive side costs the generator's CPU
    // little.
    let _drop = netns::in_netns(p.sink.name(), || {
        CountProgram::load()
            .and_then(|prog| prog.attach("ts", XdpMode::Native))
            .map_err(|e| e.to_string())
    })
    .unwrap()
    .unwrap();
    for pps in [10_000.0, 100_000.0, 300_000.0] {
        let rate = pps.to_string();
        // A second attempt absorbs one unlucky stall from other work on the machine; a
        // pacing error shows in both.
        let missed: Vec<GenSummary> = (0..2)
            .map(|_| generate(&p, &["--rate", &rate, "--duration", "5"]))
            .inspect(|(_, text)| println!("{text}"))
            .map(|(gen, _)| gen)
            .take_while(|gen| (gen.pps - pps).abs() / pps >= 0.02)
            .collect();
        assert!(
            missed.len() < 2,
            "{pps} pps target missed by 2 % twice: {missed:?}"
        );
    }
}

#[test]
fn at_10kpps_nothing_is_lost_and_latency_percentiles_are_reported() {
    let Some(p) = pair() else { return };
    let sink = start_sink(&p, &["--count", "20000", "--duration", "30"]);
    let (gen, _) = generate(&p, &["--rate", "10k", "--count", "20000", "--flows", "8"]);
    let (summary, text) = sink.join().unwrap();
    println!("{text}");
    assert_eq!(gen.frames, 20_000);
    let a = conserved(&summary);
    assert_eq!(a.sequence.received, 20_000, "{text}");
    assert_eq!(
        a.sequence.lost + a.sequence.reordered + a.sequence.duplicates,
        0
    );
    assert_eq!(a.flows, 8);
    assert_eq!(a.latency.unwrap().samples, 20_000);
    assert!(
        text.contains("latency µs: min") && text.contains("p99.9"),
        "{text}"
    );
    // The default backend, AF_PACKET, says how much of that latency may be its own.
    assert_eq!(summary.latency_floor_ns, 1_000_000);
    assert!(
        text.contains("latency includes up to 1000 µs of the sink's own"),
        "{text}"
    );
}

/// Over IPv4 and over IPv6 (the namespaces' kernels have IPv6 off: the sockets see the
/// frames before IP), with both device sinks.
#[test]
fn the_sink_counts_an_injected_gap_and_reordering_exactly() {
    let Some(p) = pair() else { return };
    let faults = [
        "--flows",
        "3",
        "--inject-gap",
        "200:7",
        "--inject-reorder",
        "500",
    ];
    for (family, version, size) in [(&[][..], 4, 60), (&["--ipv6"][..], 6, 80)] {
        for backend in ["af_packet", "af_xdp"] {
            let sink = start_sink(
                &p,
                &["--backend", backend, "--count", "3000", "--duration", "30"],
            );
            let (gen, _) = generate(
                &p,
                &[&["--rate", "20k", "--count", "3000"], &faults[..], family].concat(),
            );
            let (summary, text) = sink.join().unwrap();
            assert_eq!(
                (gen.frames, gen.ip_version, gen.frame_size),
                (3000, version, size)
            );
            let a = conserved(&summary);
            let q = a.sequence;
            assert_eq!(a.foreign + a.bad_checksum, 0, "{backend}: {text}");
            assert_eq!(q.received, 3000, "IPv{version} {backend}: {text}");
            assert_eq!(q.lost, 3 * 7, "IPv{version} {backend}: {text}");
            assert_eq!(q.reordered, 3, "IPv{version} {backend}: {text}");
            assert_eq!(q.duplicates, 0, "IPv{version} {backend}: {text}");
            assert_eq!(a.latency.unwrap().samples, 3000, "IPv{version} {backend}");
        }
    }
}

#[test]
fn the_xdp_counter_sees_every_frame() {
    let Some(p) = pair() else { return };
    let sink = start_sink(
        &p,
        &[
            "--backend",
            "xdp-count",
            "--count",
            "5003",
            "--duration",
            "30",
        ],
    );
    let (gen, _) = generate(&p, &["--rate", "50k", "--count", "5000", "--size", "100"]);
    let (summary, text) = sink.join().unwrap();
    assert_eq!((gen.frames, gen.end_records), (5000, 3));
    // The three copies of the generator's 70-byte end-of-run record come last.
    assert_eq!(
        (summary.frames, summary.bytes),
        (5003, 5000 * 100 + 3 * 70),
        "{text}"
    );
    assert!(summary.analysis.is_none());
}

/// Discards output, and reports the first write (the header: the sink is running).
struct FirstWrite(Option<mpsc::Sender<()>>);

impl std::io::Write for FirstWrite {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(started) = self.0.take() {
            let _ = started.send(());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn sigint_stops_the_sink_which_still_returns_its_summary() {
    let Some(p) = pair() else { return };
    let argv = ["sink", "ts", "--netns", p.sink.name(), "-i", "0"];
    let args = SinkCli::try_parse_from(argv).unwrap().args;
    let (started_tx, started) = mpsc::channel();
    let sink = thread::spawn(move || {
        raise_priority();
        polld_traffic::run_sink(&args, &mut FirstWrite(Some(started_tx)))
    });
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("the sink started and printed its header");
    generate(&p, &["--rate", "10k", "--count", "1000"]);
    thread::sleep(Duration::from_millis(300)); // the last ring block retires after 1 ms
                                               // run_sink installed a handler that only sets a flag.
    rustix::process::kill_process(rustix::process::getpid(), Signal::INT).unwrap();
    let summary = sink.join().unwrap().unwrap();
    // The default dispositions for the rest of the test process.
    polld_dev::sys::default_stop_signals();
    assert_eq!(
        summary.frames,
        1000 + 3,
        "ours and the end-of-run records: {summary:?}"
    );
    assert_eq!(conserved(&summary).end_records, 3);
    assert_eq!(conserved(&summary).sequence.lost, 0);
}
