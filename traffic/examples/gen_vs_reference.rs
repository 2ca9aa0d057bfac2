//! Benchmark: `polld gen` at full speed against a minimal AF_PACKET `sendmmsg` sender.
//!
//! Both send 60-byte frames over a veth pair between two namespaces. The peer end runs
//! an XDP program that counts and drops (native mode; its NAPI is made threaded and
//! pinned to CPU1 when possible, as in docs/measuring.md §ref-gen), so the receive side costs
//! the sender's CPU0 little and every delivered frame is counted. Senders run pinned to
//! CPU0 and take turns, so machine noise spreads over all of them.
//!
//! Run as root: `cargo run --release -p polld-traffic --example gen_vs_reference`
//! (`-- --seconds 3 --rounds 3` are the defaults).

use std::io::IoSlice;
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;

use clap::Parser;
use polld_dev::netns::{self, Netns, VethEnd};
use polld_traffic::backend::XdpCounter;
use polld_traffic::clock::monotonic_ns;
use polld_traffic::frame::{FlowAddrs, FlowTemplate};
use polld_traffic::{GenArgs, Generator};
use rustix::net::{sendmmsg, MMsgHdr, SendAncillaryBuffer, SendFlags};
use rustix::thread::CpuSet;

const GEN_MAC: &str = "02:00:00:00:01:01";
const PEER_MAC: &str = "02:00:00:00:01:02";
const FRAME_SIZE: usize = 60;
const REFERENCE_BATCH: usize = 64;

#[derive(Parser)]
struct Options {
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Runs per sender (the median is reported).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

#[derive(Parser)]
struct GenCli {
    #[command(flatten)]
    args: GenArgs,
}

/// One sender's result: frames it handed to the kernel and frames the peer counted.
struct Run {
    sent_pps: f64,
    delivered_pps: f64,
}

fn main() -> Result<(), String> {
    let options = Options::parse();
    if !rustix::process::geteuid().is_root() {
        return Err("needs root: it creates namespaces and attaches XDP programs".into());
    }
    print_machine();
    let gen_ns = Netns::create("bench-gen").map_err(|e| e.0)?;
    let peer_ns = Netns::create("bench-peer").map_err(|e| e.0)?;
    netns::veth_pair(
        VethEnd {
            ns: &gen_ns,
            name: "bg",
            mac: GEN_MAC,
            addr: None,
        },
        VethEnd {
            ns: &peer_ns,
            name: "bp",
            mac: PEER_MAC,
            addr: None,
        },
    )
    .map_err(|e| e.0)?;
    let counter = netns::in_netns(peer_ns.name(), || XdpCounter::attach("bp"))
        .map_err(|e| e.0)?
        .map_err(|e| e.0)?;
    pin_peer_napi(&peer_ns);

    type Sender = fn(f64) -> Result<f64, String>;
    let senders: [(&str, Sender); 3] = [
        ("reference sendmmsg", reference_sender),
        ("gen af_packet", |s| run_gen("af_packet", s)),
        ("gen af_xdp", |s| run_gen("af_xdp", s)),
    ];
    let mut results: Vec<Vec<Run>> = senders.iter().map(|_| Vec::new()).collect();
    for round in 0..options.rounds {
        for ((name, sender), runs) in senders.iter().zip(&mut results) {
            let (frames_before, _) = counter.counts().map_err(|e| e.0)?;
            let started = monotonic_ns();
            let (sender, seconds) = (*sender, options.seconds);
            let sent_pps = netns::in_netns(gen_ns.name(), move || {
                pin_to_cpu(0);
                sender(seconds)
            })
            .map_err(|e| e.0)??;
            // Let frames in flight arrive before reading the counter.
            std::thread::sleep(std::time::Duration::from_millis(50));
            let (frames_after, _) = counter.counts().map_err(|e| e.0)?;
            let elapsed = (monotonic_ns() - started) as f64 / 1e9 - 0.05;
            let run = Run {
                sent_pps,
                delivered_pps: (frames_after - frames_before) as f64 / elapsed,
            };
            println!(
                "round {round}: {name:<20} sent {:>8.1} kpps, delivered {:>8.1} kpps",
                run.sent_pps / 1e3,
                run.delivered_pps / 1e3
            );
            runs.push(run);
        }
    }

    println!();
    let median = |runs: &[Run], pick: fn(&Run) -> f64| {
        let mut values: Vec<f64> = runs.iter().map(pick).collect();
        values.sort_by(f64::total_cmp);
        (
            values[values.len() / 2],
            values[0],
            values[values.len() - 1],
        )
    };
    let (reference, _, _) = median(&results[0], |r| r.delivered_pps);
    for ((name, _), runs) in senders.iter().zip(&results) {
        let (sent, _, _) = median(runs, |r| r.sent_pps);
        let (delivered, low, high) = median(runs, |r| r.delivered_pps);
        println!(
            "{name:<20} delivered {:>7.1} kpps ({:.1}-{:.1}), sent {:>7.1} kpps, ratio to reference {:.2}",
            delivered / 1e3,
            low / 1e3,
            high / 1e3,
            sent / 1e3,
            delivered / reference
        );
    }
    Ok(())
}

/// `polld gen` at unlimited rate for `seconds`; returns the frames per second it sent.
fn run_gen(backend: &str, seconds: f64) -> Result<f64, String> {
    let seconds = seconds.to_string();
    let argv = [
        "gen",
        "bg",
        "--backend",
        backend,
        "--duration",
        &seconds,
        "-i",
        "0",
        "--dst-mac",
        PEER_MAC,
        "--src-mac",
        GEN_MAC,
    ];
    let args = GenCli::try_parse_from(argv)
        .map_err(|e| e.to_string())?
        .args;
    let generator = Generator::new(&args).map_err(|e| e.0)?;
    let mut dev = args.backend.open(&args.interface).map_err(|e| e.0)?;
    let summary = generator.run(dev.as_mut(), &AtomicBool::new(false), &mut std::io::sink());
    if let Some(drops) = summary.link_dropped.filter(|&d| d > 0) {
        // af_packet sees these as ENOBUFS and does not count them as sent; af_xdp in copy
        // mode never learns of them, so its `sent` includes them.
        println!("         gen {backend}: veth tx_dropped {drops} (its ring was full)");
    }
    Ok((summary.frames - summary.dropped) as f64 / summary.seconds)
}

/// The reference: one raw AF_PACKET socket with qdisc bypass, blocking `sendmmsg` of 64
/// copies of one prebuilt frame per call (docs/measuring.md §ref-gen).
fn reference_sender(seconds: f64) -> Result<f64, String> {
    // Blocking, bound to `bg`, protocol 0: transmit only.
    let socket = polld_dev::afpacket::raw_socket("bg", 0)
        .map_err(|e| format!("reference sender: socket: {e}"))?;
    polld_dev::sys::set_packet_option(socket.as_fd(), libc::PACKET_QDISC_BYPASS, 1)
        .map_err(|e| format!("reference sender: PACKET_QDISC_BYPASS: {e}"))?;
    let addrs = FlowAddrs {
        src_mac: GEN_MAC.parse()?,
        dst_mac: PEER_MAC.parse()?,
        src_ip: [10, 0, 1, 1].into(),
        dst_ip: [10, 0, 2, 100].into(),
        src_port: 9,
        dst_port: 9,
    };
    let frame = FlowTemplate::new(&addrs, 0, FRAME_SIZE)?
        .stamp(0, 0)
        .to_vec();
    // Every message of a batch is the one frame.
    let iov = [IoSlice::new(&frame)];
    let mut controls: Vec<SendAncillaryBuffer> = (0..REFERENCE_BATCH)
        .map(|_| SendAncillaryBuffer::default())
        .collect();
    let mut headers: Vec<MMsgHdr> = controls
        .iter_mut()
        .map(|control| MMsgHdr::new(&iov, control))
        .collect();
    let start = monotonic_ns();
    let end = start + (seconds * 1e9) as u64;
    let mut sent = 0u64;
    while monotonic_ns() < end {
        if let Ok(n) = sendmmsg(&socket, &mut headers, SendFlags::empty()) {
            sent += n as u64;
        }
    }
    Ok(sent as f64 / ((monotonic_ns() - start) as f64 / 1e9))
}

/// Makes the peer's NAPI a kernel thread pinned to CPU1, so that the XDP program runs
/// there rather than in the sender's softirq on CPU0 (docs/linux-mapping.md, "Where veth does its work").
fn pin_peer_napi(peer: &Netns) {
    let threaded = peer.exec("sh", &["-c", "echo 1 > /sys/class/net/bp/threaded"]);
    let pinned = threaded.and_then(|_| {
        netns::run(
            "sh",
            &[
                "-c",
                "for p in $(pgrep '^napi/bp-'); do taskset -pc 1 $p >/dev/null; done",
            ],
        )
    });
    match pinned {
        Ok(_) => println!("peer NAPI: threaded, pinned to CPU1"),
        Err(e) => println!("peer NAPI: left in the sender's softirq ({e})"),
    }
}

fn pin_to_cpu(cpu: usize) {
    let mut set = CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

fn print_machine() {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = netns::run("uname", &["-r"]).unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "machine: {cpus} CPUs, kernel {}, {cpu}; {FRAME_SIZE}-byte frames",
        kernel.trim()
    );
}
