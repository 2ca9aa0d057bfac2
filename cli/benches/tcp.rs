//! TCP through polld (root): one iperf3 stream from gen to sink on the veth testbed, the
//! client on CPU0, the server, the forwarder and its receive work on CPU1. In one run it
//! measures the kernel's forwarding and polld (realtime) in interrupt and polling mode on
//! AF_XDP and AF_PACKET, polling with polld's defaults (no `[knobs]`: hz 1000, the time
//! controller, chunks of 50), at hz 2000 with burst_max 1000 and chunks of 16, and
//! with idle polling added to the defaults (the idle poller serves what arrives while
//! the CPU idles, woken by the devices' interrupts at most `kern.polling.idle_wakeups`
//! times a tick: once, the default, and without a limit, as FreeBSD's idle loop polls),
//! and prints polling's rate as a ratio of interrupt mode's (the goal is at least 0.9x).
//! The congestion control is the machine's (`net.ipv4.tcp_congestion_control`).
//!
//! The sink's NAPI thread (veth3, which drains polld's output) runs realtime above polld
//! ([`UpOptions::sink_rx_realtime`]), as a NIC's wire drains whatever the CPU does;
//! `--sink-rx other` leaves it at `SCHED_OTHER`, where it runs only while polld sleeps
//! (the README's "TCP through polld" has both).
//!
//! `cargo bench -p polld --bench tcp [-- --duration 5] [--sink-rx realtime|other]`

mod common;

use common::{arg, is_root, measure_or_exit, testbed};
use polld_testbed::demo::{DemoRow, Forwarder, Load, Trial};
use polld_testbed::{Devices, UpOptions};

/// A faster clock and smaller chunks.
const HZ_2000: [(&str, &str); 3] = [
    ("kern.polling.hz", "2000"),
    ("kern.polling.burst_max", "1000"),
    ("kern.polling.each_burst", "16"),
];

/// Added to the defaults: idle polling. Ticks bound the device work under load,
/// the idle poller serves arrivals while the CPU idles, woken by an interrupt once a tick
/// (`kern.polling.idle_wakeups` 1, the default).
const IDLE_POLL: [(&str, &str); 1] = [("kern.polling.idle_poll", "1")];

/// As [`IDLE_POLL`], with the interrupts waking the idle poller whenever the CPU idles
/// (`kern.polling.idle_wakeups` 0): FreeBSD's idle loop, which polls whenever it runs.
const IDLE_POLL_UNBOUNDED: [(&str, &str); 2] = [
    ("kern.polling.idle_poll", "1"),
    ("kern.polling.idle_wakeups", "0"),
];

fn main() {
    if !is_root("tcp") {
        return;
    }
    let duration: f64 = arg("--duration").unwrap_or(5.0);
    let polld = std::path::Path::new(env!("CARGO_BIN_EXE_polld"));
    let sink_rx_realtime = match arg::<String>("--sink-rx").as_deref() {
        None | Some("realtime") => true,
        Some("other") => false,
        Some(other) => {
            eprintln!("tcp bench: --sink-rx {other:?}: use `realtime` (the default) or `other`");
            std::process::exit(2);
        }
    };
    let options = UpOptions {
        sink_rx_realtime,
        ..UpOptions::default()
    };
    let tb = testbed("tcp", Devices::Veth, &options);
    let congestion = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map(|c| c.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let dir = std::env::temp_dir().join(format!("polld-tcp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    // Polling's rows, each as a ratio of interrupt mode's on the same backend.
    let polling_variants: [(&str, &[(&str, &str)]); 4] = [
        ("polling", &[]),
        ("polling hz 2000", &HZ_2000),
        ("polling idle_poll", &IDLE_POLL),
        ("polling idle_poll unbounded", &IDLE_POLL_UNBOUNDED),
    ];
    let mut trials = vec![("kernel (threaded NAPI)".to_string(), Forwarder::Kernel)];
    for backend in ["af_xdp", "af_packet"] {
        let polld_with = |mode, knobs| Forwarder::Polld {
            backend,
            mode,
            knobs,
        };
        trials.push((
            format!("polld {backend} interrupt"),
            polld_with("interrupt", &[]),
        ));
        for (variant, knobs) in polling_variants {
            trials.push((
                format!("polld {backend} {variant}"),
                polld_with("polling", knobs),
            ));
        }
    }
    let mut rows: Vec<DemoRow> = Vec::new();
    for (label, forwarder) in trials {
        let trial = Trial {
            label: label.clone(),
            forwarder,
            load: Load::Tcp,
            duration,
        };
        rows.push(measure_or_exit("tcp", &tb, &options, polld, &dir, &trial));
    }
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    println!(
        "\none iperf3 TCP stream gen -> fwd -> sink, {duration} s per row, congestion control {congestion}; client on CPU{}, server and forwarder on CPU{}; the sink's NAPI thread {}",
        options.cpus.gen,
        options.cpus.fwd,
        if sink_rx_realtime {
            "SCHED_FIFO above polld"
        } else {
            "SCHED_OTHER"
        }
    );
    println!(
        "{:<44} {:>9} {:>8} {:>10} {:>10} {:>10} {:>10}  conserved",
        "forwarder",
        "Mbit/s",
        "retrans",
        "polld CPU",
        "kernel rx",
        "sink rx",
        format!("CPU{} busy", options.cpus.fwd)
    );
    for r in &rows {
        let tcp = r.tcp.expect("a TCP trial has a TCP result");
        println!(
            "{:<44} {:>9.0} {:>8} {:>9.1}% {:>9.1}% {:>9.1}% {:>9.1}%  {}",
            r.mode,
            tcp.mbit_per_s,
            tcp.retransmits,
            r.polld_cpu_percent,
            r.kernel_rx_cpu_percent,
            r.sink_rx_cpu_percent,
            r.fwd_cpu_busy_percent,
            match r.conserved {
                Some(true) => "yes",
                Some(false) => "VIOLATED",
                None => "(kernel)",
            }
        );
    }
    println!(
        "\nwhere polld's time went (per second of the run; frames counted on both interfaces, data and acks)"
    );
    println!(
        "{:<44} {:>10} {:>11} {:>11} {:>9} {:>10} {:>9} {:>9} {:>11} {:>10}",
        "forwarder",
        "frames/s",
        "polld µs/f",
        "kernel µs/f",
        "rtt µs",
        "tx full/s",
        "cycles/s",
        "repolls/s",
        "chunks/cyc",
        "idle wk/s"
    );
    for r in rows.iter().filter(|r| r.conserved.is_some()) {
        let per_s = |n: u64| n as f64 / r.seconds.max(1e-9);
        let frames = per_s(r.polld_delta_all_ifs("rx_packets")).max(1e-9);
        let cycles = r.polld_delta("kern.polling.cycles");
        println!(
            "{:<44} {:>10.0} {:>11.2} {:>11.2} {:>9} {:>10.0} {:>9.0} {:>9.0} {:>11.1} {:>10.0}",
            r.mode,
            frames,
            r.polld_cpu_percent / 100.0 * 1e6 / frames,
            r.kernel_rx_cpu_percent / 100.0 * 1e6 / frames,
            r.tcp.map_or(0, |t| t.mean_rtt_us),
            per_s(r.polld_delta_all_ifs("drops.tx_ring_full")),
            per_s(cycles),
            per_s(r.polld_delta("kern.polling.repolls")),
            r.polld_delta("kern.polling.chunks") as f64 / cycles.max(1) as f64,
            per_s(r.polld_delta("kern.polling.idlepoll_wakeups")),
        );
    }
    let rate = |label: &str| {
        rows.iter()
            .find(|r| r.mode == label)
            .and_then(|r| r.tcp)
            .map_or(0.0, |t| t.mbit_per_s)
    };
    for backend in ["af_xdp", "af_packet"] {
        let interrupt = rate(&format!("polld {backend} interrupt")).max(1e-9);
        for (variant, _) in polling_variants {
            let label = format!("polld {backend} {variant}");
            println!(
                "{label}: {:.2}x interrupt mode's TCP rate (goal >= 0.9x)",
                rate(&label) / interrupt
            );
        }
    }
    if rows.iter().any(|r| r.conserved == Some(false)) {
        println!("CONSERVATION VIOLATED in some polld run: see `polld run --json`");
        std::process::exit(1);
    }
    // iperf3's frames have no generator count (TCP retransmits, and acks flow back): no
    // end-to-end ledger, polld's own identity on each interface only.
    println!("conservation held on every interface in every polld run (TCP: no end-to-end ledger, iperf3 counts no frames)");
}
