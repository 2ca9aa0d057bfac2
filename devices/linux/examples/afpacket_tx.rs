//! Measures the AF_PACKET device's transmit path (`sendmmsg` with PACKET_QDISC_BYPASS):
//! how many 60-byte frames per second one pinned core pushes into a veth pair.
//!
//! Commit bf50ff9 also had a PACKET_TX_RING path and ran this example on both; they came
//! out equal (see the `afpacket` module docs), so only `sendmmsg` was kept.
//!
//! Topology as in docs/measuring.md §ref-gen: namespace `a` holds `txb0` (10.0.1.1), namespace `b`
//! holds its peer `txb1` (10.0.1.2). Frames are Eth/IPv4/UDP 10.0.1.1:9 → 10.0.2.100:9 to
//! txb1's MAC; b does not own 10.0.2.100 and does not forward, so it drops them in
//! `ip_rcv`, cheaply. veth runs that receive work on the sender's CPU, so the number is
//! the sender's CPU doing both.
//!
//! Run as root:
//! `cargo run --release -p polld-dev --example afpacket_tx -- [--secs 3] [--runs 3] [--cpu 0] [--batch 64]`
//! It prints the median (min–max) kpps the kernel accepted, the kpps
//! the peer received, and accepted kpps per second of sender CPU (comparable when other
//! work shares the core).

use std::time::{Duration, Instant};

use polld_core::device::{Device, TxFull};
use polld_dev::afpacket::{AfPacket, AfPacketConfig};
use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0x01, 0x02];

struct Options {
    secs: f64,
    runs: usize,
    cpu: usize,
    batch: usize,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        secs: 3.0,
        runs: 3,
        cpu: 0,
        batch: AfPacketConfig::default().tx_batch,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--secs" => options.secs = value.parse().map_err(|e| bad(&e))?,
            "--runs" => options.runs = value.parse().map_err(|e| bad(&e))?,
            "--cpu" => options.cpu = value.parse().map_err(|e| bad(&e))?,
            "--batch" => options.batch = value.parse().map_err(|e| bad(&e))?,
            _ => {
                return Err(format!(
                    "unknown option {flag}; use --secs, --runs, --cpu, --batch"
                ))
            }
        }
    }
    Ok(options)
}

/// The 60-byte test frame (64 on the wire with the FCS).
fn udp_frame() -> Vec<u8> {
    let mut frame = Vec::with_capacity(60);
    frame.extend_from_slice(&MAC_B);
    frame.extend_from_slice(&MAC_A);
    frame.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [
        0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 2, 100,
    ];
    let sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    let folded = (sum & 0xffff) + (sum >> 16);
    let checksum = !((folded & 0xffff) + (folded >> 16)) as u16;
    ip[10..12].copy_from_slice(&checksum.to_be_bytes());
    frame.extend_from_slice(&ip);
    frame.extend_from_slice(&[0, 9, 0, 9, 0, 26, 0, 0]);
    frame.resize(60, 0);
    frame
}

fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| format!("cannot pin to CPU {cpu}: {}", std::io::Error::from(e)))
}

fn peer_rx_packets(b: &Netns) -> Result<u64, String> {
    let text = b
        .exec("cat", &["/sys/class/net/txb1/statistics/rx_packets"])
        .map_err(|e| e.to_string())?;
    text.trim()
        .parse()
        .map_err(|e| format!("rx_packets {text:?}: {e}"))
}

struct Run {
    accepted_kpps: f64,
    delivered_kpps: f64,
    dropped: u64,
    pushbacks: u64,
    cpu_percent: f64,
}

/// Thread CPU time (user + system) in seconds.
fn thread_cpu_seconds() -> f64 {
    polld_dev::clock::thread_cpu_ns() as f64 / 1e9
}

fn run_once(a: &Netns, b: &Netns, options: &Options) -> Result<Run, String> {
    let (cpu, secs, batch) = (options.cpu, options.secs, options.batch);
    let before = peer_rx_packets(b)?;
    let (stats, elapsed, cpu_seconds) = in_netns(a.name(), move || {
        pin_to_cpu(cpu)?;
        let config = AfPacketConfig {
            tx_batch: batch,
            ..AfPacketConfig::default()
        };
        let mut device = AfPacket::open("txb0", config).map_err(|e| e.to_string())?;
        let frame = udp_frame();
        let cpu_start = thread_cpu_seconds();
        let start = Instant::now();
        let duration = Duration::from_secs_f64(secs);
        while start.elapsed() < duration {
            while device.send(&frame) != Err(TxFull) {}
            device.flush();
        }
        Ok::<_, String>((
            device.tx_stats(),
            start.elapsed().as_secs_f64(),
            thread_cpu_seconds() - cpu_start,
        ))
    })
    .map_err(|e| e.to_string())??;
    // Let the last frames land before reading the peer's counter.
    std::thread::sleep(Duration::from_millis(100));
    let delivered = peer_rx_packets(b)? - before;
    Ok(Run {
        accepted_kpps: stats.sent as f64 / elapsed / 1e3,
        delivered_kpps: delivered as f64 / elapsed / 1e3,
        dropped: stats.dropped(),
        pushbacks: stats.pushbacks,
        cpu_percent: cpu_seconds / elapsed * 100.0,
    })
}

fn median_and_range(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    format!(
        "{:.0} ({:.0}–{:.0})",
        values[values.len() / 2],
        values[0],
        values[values.len() - 1]
    )
}

fn main() -> Result<(), String> {
    let options = parse_options()?;
    let a = Netns::create("txb-a").map_err(|e| e.to_string())?;
    let b = Netns::create("txb-b").map_err(|e| e.to_string())?;
    let (mac_a, mac_b) = (
        MAC_A.map(|x| format!("{x:02x}")).join(":"),
        MAC_B.map(|x| format!("{x:02x}")).join(":"),
    );
    veth_pair(
        VethEnd {
            ns: &a,
            name: "txb0",
            mac: &mac_a,
            addr: Some("10.0.1.1/24"),
        },
        VethEnd {
            ns: &b,
            name: "txb1",
            mac: &mac_b,
            addr: Some("10.0.1.2/24"),
        },
    )
    .map_err(|e| e.to_string())?;

    let mut runs = Vec::new();
    for run in 0..options.runs {
        let result = run_once(&a, &b, &options)?;
        println!(
            "run {run}: accepted {:.0} kpps, delivered {:.0} kpps, \
             dropped {}, pushbacks {}, sender CPU {:.0} %",
            result.accepted_kpps,
            result.delivered_kpps,
            result.dropped,
            result.pushbacks,
            result.cpu_percent
        );
        runs.push(result);
    }
    println!(
        "\n{} s per run, sender pinned to CPU {}, tx_batch {}: accepted {} kpps, \
         delivered {} kpps, {} kpps per second of sender CPU",
        options.secs,
        options.cpu,
        options.batch,
        median_and_range(runs.iter().map(|r| r.accepted_kpps).collect()),
        median_and_range(runs.iter().map(|r| r.delivered_kpps).collect()),
        median_and_range(
            runs.iter()
                .map(|r| r.accepted_kpps / r.cpu_percent * 100.0)
                .collect()
        )
    );
    Ok(())
}
