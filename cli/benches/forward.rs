//! Forwarding benchmark (root): 64-byte frames from `polld gen` on CPU0 through fwd, with
//! the forwarder and its receive work on CPU1 (threaded NAPI pinned there). In one run:
//! - on the veth testbed, the kernel's own forwarding (`ip_forward=1`) and polld in each
//!   mode (interrupt, adaptive, polling, busy, auto) on AF_XDP and on AF_PACKET;
//! - on the TAP testbed, polld in each mode on TAP (the kernel cannot forward there:
//!   nothing but polld joins the TAPs);
//! - DPDK testpmd on the veth testbed, on `net_af_xdp` and `net_af_packet`, when
//!   `dpdk-testpmd` is installed (a line says when it is skipped, and why).
//!
//! Each forwarder runs twice: under a flood (gen as fast as it sends) and at half load
//! (half the kernel's flood rate on veth, half of polld's interrupt mode on TAP). Every row
//! has the delivered rate (the output's receive counter), the CPU of polld's threads, of
//! the kernel's receive threads for fwd's interfaces ("kernel rx") and of the sink's
//! ("sink rx", veth3's: where the frames go, and where the kernel completes polld's AF_XDP
//! sends), the CPU per delivered packet summed over all three, and whether conservation
//! held in polld's final report. The threads' times are what the scheduler charged them: a
//! thread woken in the middle of a NAPI poll is charged the rest of that poll, so a polling
//! row's polld CPU reads high and its kernel and sink rx low; their sum, and so the CPU per
//! packet, holds what the three ran between them (CPU busy, the wall time the CPU did not
//! idle, is exact; docs/measuring.md). polld polls
//! with its defaults (no `[knobs]`) and runs realtime. With `--sink-rx-realtime` the
//! sink's receive thread runs realtime above polld on veth, for every row, the kernel's
//! included (`UpOptions::sink_rx_realtime`): the output then drains as the forwarder
//! sends, as a NIC's transmit does, instead of only while a realtime forwarder sleeps.
//!
//! After the main table, polling and interrupt mode on each veth backend take
//! `--flood-rounds` (default 4) more flood windows in turns (rows of load "round"), and the
//! report gives the median of the per-window ratios: one window varies more than the gap.
//!
//! `cargo bench -p polld --bench forward [-- --duration 3] [--flood-rounds 4] [--json] [--sink-rx-realtime]`
//! (`--json`: the rows as a JSON array instead of the table). `POLLD_BENCH_ONLY=testpmd,af_xdp` runs only the
//! forwarders whose label contains one of the words, and the kernel (the half-load
//! reference).

mod common;
#[path = "forward/rounds.rs"]
mod rounds;
#[path = "forward/testpmd.rs"]
mod testpmd;

use std::path::Path;

use common::{announce, arg, is_root, measure_or_exit, testbed};
use polld_testbed::demo::{measure, DemoRow, Forwarder, Load, Trial};
use polld_testbed::placement::SINK_RX_PRIORITY;
use polld_testbed::plot::{LineChart, Series};
use polld_testbed::{Devices, IpFamily, Testbed, TestbedError, UpOptions};

const MODES: [&str; 5] = ["interrupt", "adaptive", "polling", "busy", "auto"];
/// The backends polld (and testpmd) forward with on the veth testbed.
const VETH_BACKENDS: [&str; 2] = ["af_xdp", "af_packet"];

/// One measured row: who forwarded, at which load.
struct Row {
    load: &'static str,
    demo: DemoRow,
}

impl Row {
    /// CPU time of every thread on the frames' path ([`DemoRow::path_cpu_percent`]) per
    /// delivered frame, ns.
    fn cpu_ns_per_frame(&self) -> f64 {
        let d = &self.demo;
        d.path_cpu_percent() / 100.0 * 1e9 / d.delivered_pps.max(1.0)
    }
}

struct Bench<'a> {
    polld: &'a Path,
    dir: std::path::PathBuf,
    options: UpOptions,
    duration: f64,
    rows: Vec<Row>,
    /// `POLLD_BENCH_ONLY`'s words; empty: every forwarder.
    only: Vec<String>,
    /// Lines for the report: forwarders skipped, and why.
    notes: Vec<String>,
}

impl Bench<'_> {
    /// Measures `forwarder` on `tb` at `rate` and keeps the row; exits on failure.
    fn run(
        &mut self,
        tb: &Testbed,
        label: &str,
        forwarder: Forwarder,
        load: &'static str,
        rate: &str,
    ) -> f64 {
        let trial = self.trial(label, forwarder, rate);
        let demo = measure_or_exit("forward", tb, &self.options, self.polld, &self.dir, &trial);
        self.keep(load, demo)
    }

    /// Measures `trial` on `tb` and keeps its row, as `load`.
    fn try_run(
        &mut self,
        tb: &Testbed,
        load: &'static str,
        trial: &Trial,
    ) -> Result<f64, TestbedError> {
        announce("forward", trial);
        let demo = measure(tb, &self.options, self.polld, &self.dir, trial)?;
        Ok(self.keep(load, demo))
    }

    /// The trial of `forwarder` at `rate` frames/s, the output's rx counting delivered.
    fn trial<'a>(&self, label: &str, forwarder: Forwarder<'a>, rate: &'a str) -> Trial<'a> {
        Trial {
            label: label.to_string(),
            forwarder,
            // Delivered = the output's rx counter: no sink process competing for CPU1.
            load: Load::Frames {
                rate,
                sink: false,
                family: IpFamily::Ipv4,
            },
            duration: self.duration,
        }
    }

    /// Keeps the row; returns its delivered rate.
    fn keep(&mut self, load: &'static str, demo: DemoRow) -> f64 {
        let delivered = demo.delivered_pps;
        self.rows.push(Row { load, demo });
        delivered
    }

    /// Whether `POLLD_BENCH_ONLY` selects `forwarder` (the kernel always runs: its flood
    /// sets the half load).
    fn selected(&self, label: &str, forwarder: Forwarder) -> bool {
        forwarder == Forwarder::Kernel
            || self.only.is_empty()
            || self.only.iter().any(|w| label.contains(w.as_str()))
    }

    /// A flood and half load for `forwarder`; `half` is the half-load rate, or `None` for
    /// half of this forwarder's own flood rate. 0 when `POLLD_BENCH_ONLY` leaves it out.
    fn both(&mut self, tb: &Testbed, label: &str, forwarder: Forwarder, half: Option<u64>) -> f64 {
        if !self.selected(label, forwarder) {
            return 0.0;
        }
        let flood = self.run(tb, label, forwarder, "flood", "unlimited");
        let half = half.unwrap_or((flood / 2.0) as u64).max(1000);
        self.run(tb, label, forwarder, "half", &half.to_string());
        flood
    }
}

fn main() {
    if !is_root("forward") {
        return;
    }
    let duration = arg("--duration").unwrap_or(3.0);
    let flood_rounds = arg("--flood-rounds").unwrap_or(4);
    let dir = std::env::temp_dir().join(format!("polld-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut bench = Bench {
        polld: Path::new(env!("CARGO_BIN_EXE_polld")),
        dir,
        options: UpOptions {
            sink_rx_realtime: std::env::args().any(|a| a == "--sink-rx-realtime"),
            ..UpOptions::default()
        },
        duration,
        rows: Vec::new(),
        only: std::env::var("POLLD_BENCH_ONLY")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(String::from)
            .collect(),
        notes: Vec::new(),
    };
    let polld_on = |backend, mode| Forwarder::Polld {
        backend,
        mode,
        knobs: &[],
    };

    let veth = testbed("forward", Devices::Veth, &bench.options);
    let kernel = bench.both(&veth, "kernel (threaded NAPI)", Forwarder::Kernel, None);
    let half = (kernel / 2.0) as u64;
    for backend in VETH_BACKENDS {
        for mode in MODES {
            let label = format!("polld {backend} {mode}");
            bench.both(&veth, &label, polld_on(backend, mode), Some(half));
        }
    }
    testpmd::run(&mut bench, &veth, half);
    rounds::run(&mut bench, &veth, flood_rounds);
    drop(veth);

    // On TAP nothing but polld joins the namespaces: there is no receive thread to raise.
    let tap_options = UpOptions {
        sink_rx_realtime: false,
        ..bench.options
    };
    let tap = testbed("forward", Devices::Tap, &tap_options);
    let mut tap_half = None;
    for mode in MODES {
        let flood = bench.both(
            &tap,
            &format!("polld tap {mode}"),
            polld_on("tap", mode),
            tap_half,
        );
        if flood > 0.0 {
            tap_half.get_or_insert((flood / 2.0) as u64);
        }
    }
    drop(tap);
    let _ = std::fs::remove_dir_all(&bench.dir);

    let svg = plot(&bench.rows);
    if std::env::args().any(|a| a == "--json") {
        let rows: Vec<serde_json::Value> = bench
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "load": r.load,
                    "cpu_ns_per_packet": r.cpu_ns_per_frame(),
                    "row": r.demo,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
        for note in &bench.notes {
            eprintln!("{note}");
        }
        if bench.rows.iter().any(|r| r.demo.conserved == Some(false)) {
            eprintln!("forward bench: CONSERVATION VIOLATED in some polld run");
            std::process::exit(1);
        }
    } else {
        print_report(&bench.rows, &bench.notes, &bench.options);
        println!("plot of delivered against offered load: {svg}");
    }
}

/// Draws delivered against offered load, one line per forwarder through (0, 0), half load
/// and the flood, as an SVG under the target directory; returns its path, or why not.
fn plot(rows: &[Row]) -> String {
    let mut series: Vec<Series> = Vec::new();
    for r in rows.iter().filter(|r| r.load != rounds::LOAD) {
        let point = (r.demo.offered_pps / 1e3, r.demo.delivered_pps / 1e3);
        match series.iter_mut().find(|s| s.name == r.demo.mode) {
            Some(s) => s.points.push(point),
            None => series.push(Series::new(r.demo.mode.clone(), vec![(0.0, 0.0), point])),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let chart = LineChart {
        title: "delivered against offered load, 64-byte frames".into(),
        x_label: "offered (kpps)".into(),
        y_label: "delivered (kpps)".into(),
        series,
    };
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("forward.svg");
    match chart.write_svg(&path) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("not drawn: {e}"),
    }
}

fn print_report(rows: &[Row], notes: &[String], options: &UpOptions) {
    let fwd = options.cpus.fwd;
    println!(
        "\npolld forwarding, 64-byte frames; gen on CPU{}, the forwarder and its receive work on CPU{fwd} ({} placement{}); {}",
        options.cpus.gen,
        options.placement.name(),
        if options.sink_rx_realtime {
            format!(", on veth the sink's receive thread SCHED_FIFO {SINK_RX_PRIORITY}, above polld")
        } else {
            String::new()
        },
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|c| c.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
            .unwrap_or_default()
    );
    println!(
        "{:<24} {:<5} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>10} {:>12} {:>8}  {:<9} drops at the input",
        "forwarder", "load", "offered/s", "delivered/s", "polld CPU", "kernel rx", "sink rx", format!("CPU{fwd} busy"), "CPU ns/pkt", "interrupts/s", "RSS MiB", "conserved"
    );
    for r in rows {
        let d = &r.demo;
        let drops: Vec<String> = d.drops.iter().map(|(n, v)| format!("{n} {v}")).collect();
        println!(
            "{:<24} {:<5} {:>10.0} {:>11.0} {:>8.1}% {:>8.1}% {:>8.1}% {:>9.1}% {:>10.0} {:>12.0} {:>8}  {:<9} {}",
            d.mode,
            r.load,
            d.offered_pps,
            d.delivered_pps,
            d.polld_cpu_percent,
            d.kernel_rx_cpu_percent,
            d.sink_rx_cpu_percent,
            d.fwd_cpu_busy_percent,
            r.cpu_ns_per_frame(),
            d.interrupts_per_sec,
            if d.polld_rss_kib > 0 { format!("{:.1}", d.polld_rss_kib as f64 / 1024.0) } else { "-".into() },
            match (d.conserved, d.testpmd) {
                (Some(true), _) => "yes",
                (Some(false), _) => "VIOLATED",
                (None, Some(_)) => "(testpmd)",
                (None, None) => "(kernel)",
            },
            match d.testpmd {
                Some(counters) => counters.to_string(),
                None if drops.is_empty() => "none".to_string(),
                None => drops.join(", "),
            }
        );
    }
    for note in notes {
        println!("{note}");
    }
    let flood = |label: &str| {
        rows.iter()
            .find(|r| r.demo.mode == label && r.load == "flood")
    };
    let half = |label: &str| {
        rows.iter()
            .find(|r| r.demo.mode == label && r.load == "half")
    };
    let kernel = flood("kernel (threaded NAPI)").map_or(1.0, |r| r.demo.delivered_pps.max(1.0));
    for backend in ["af_xdp", "af_packet", "tap"] {
        // Absent when POLLD_BENCH_ONLY left interrupt mode out.
        let interrupt =
            flood(&format!("polld {backend} interrupt")).map(|r| r.demo.delivered_pps.max(1.0));
        for mode in MODES {
            let label = format!("polld {backend} {mode}");
            let (Some(f), Some(h)) = (flood(&label), half(&label)) else {
                continue;
            };
            let against_kernel = if backend == "tap" {
                String::new()
            } else {
                format!(
                    "{:.2}x the kernel's delivered rate, ",
                    f.demo.delivered_pps / kernel
                )
            };
            let against_interrupt = interrupt.map_or(String::new(), |i| {
                format!("{:.2}x interrupt mode's; ", f.demo.delivered_pps / i)
            });
            println!(
                "{label}: {against_kernel}{against_interrupt}{:.0} ns of CPU per packet at half load",
                h.cpu_ns_per_frame()
            );
        }
    }
    if let Some(h) = half("kernel (threaded NAPI)") {
        println!(
            "kernel (threaded NAPI): {:.0} ns of CPU per packet at half load",
            h.cpu_ns_per_frame()
        );
    }
    rounds::report(rows);
    testpmd::report(rows);
    common::print_ledgers(rows.iter().map(|r| (r.load, &r.demo)));
    let polld_runs = rows.iter().filter(|r| r.demo.conserved.is_some()).count();
    let violated: Vec<String> = rows
        .iter()
        .filter(|r| r.demo.conserved == Some(false))
        .map(|r| format!("{} ({})", r.demo.mode, r.load))
        .collect();
    if !violated.is_empty() {
        println!("CONSERVATION VIOLATED in: {}", violated.join(", "));
        std::process::exit(1);
    } else if polld_runs > 0 {
        println!(
            "conservation held in all {polld_runs} polld runs: on every interface, and end to end from gen to the sink"
        );
    }
}
