//! One-way latency through polld on the testbed (root): `polld gen` at 10 kpps of 64-byte
//! frames from gen on CPU0, through fwd, to `polld sink --backend af_xdp` in sink, which
//! times each frame when the kernel hands it over. In one run it measures the kernel's own
//! forwarding, then polld (realtime on CPU1, AF_XDP) in each mode with its defaults (no
//! `[knobs]`): interrupt, adaptive, polling, and busy; polling with the FreeBSD profile
//! too (`profile = "freebsd"`: the classic controller, chunks of 5); then DPDK
//! testpmd on `net_af_xdp` on CPU1 when `dpdk-testpmd` is installed (a line says when it is
//! skipped, and why).
//!
//! These rows run on a path tuned for latency, as a latency-tuned host would be: the
//! forwarder's and sink's CPU is held out of halt ([`polld_testbed::idle::IdleHold`]: on
//! this VM a halted vCPU takes the hypervisor's time to wake, 40 µs at the median) and the
//! receive kthreads in fwd and sink run `SCHED_FIFO` below polld's poll thread
//! ([`polld_testbed::placement::RealtimeRx`]: at `SCHED_OTHER` they wait milliseconds
//! behind ordinary tasks on their CPU). Two more rows, the kernel and polling
//! on the untuned path (the testbed's default), show what the tuning removes in the same
//! run. Each row prints p50/p99/max, loss, CPU, the steal time and halts of the
//! forwarder's CPU, and for polling the bound 1/hz + 100 µs with how late polld's tick
//! timer woke it (`polld.tick_lateness_*`); under the table each polling p99 is split into
//! the tick, the timer's lateness spread and what is left, beside the kernel's own path
//! p99 on the same path.
//!
//! `cargo bench -p polld --bench latency [-- --duration 5 --rate 10k]`

mod common;

use common::{announce, arg, is_root, testbed};
use polld_core::Knobs;
use polld_testbed::demo::{measure, DemoRow, Forwarder, Load, Trial};
use polld_testbed::idle::IdleHold;
use polld_testbed::placement::RealtimeRx;
use polld_testbed::{Devices, IpFamily, Role, UpOptions};

/// FreeBSD's defaults (`kern_poll.c`'s), beside polld's.
const FREEBSD: [(&str, &str); 1] = [("profile", "freebsd")];

fn main() {
    if !is_root("latency") {
        return;
    }
    let duration: f64 = arg("--duration").unwrap_or(5.0);
    let rate: String = arg("--rate").unwrap_or_else(|| "10k".to_string());
    let polld = std::path::Path::new(env!("CARGO_BIN_EXE_polld"));
    let options = UpOptions::default();
    let tb = testbed("latency", Devices::Veth, &options);
    let dir = std::env::temp_dir().join(format!("polld-latency-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let polld_at = |mode, knobs| Forwarder::Polld {
        backend: "af_xdp",
        mode,
        knobs,
    };
    // Both profiles poll at the same hz.
    let hz = Some(Knobs::default().hz);
    // (label, forwarder, the polling hz for the bound, whether the path is untuned)
    let trials: [(&str, Forwarder, Option<u32>, bool); 8] = [
        ("kernel (threaded NAPI)", Forwarder::Kernel, None, false),
        ("interrupt", polld_at("interrupt", &[]), None, false),
        ("adaptive", polld_at("adaptive", &[]), None, false),
        (
            "polling, freebsd profile",
            polld_at("polling", &FREEBSD),
            hz,
            false,
        ),
        ("polling", polld_at("polling", &[]), hz, false),
        ("busy", polld_at("busy", &[]), None, false),
        ("kernel, untuned", Forwarder::Kernel, None, true),
        ("polling, untuned", polld_at("polling", &[]), hz, true),
    ];
    let path_cpus = [options.cpus.fwd, options.cpus.sink];
    // The tuning for a row unless it is an untuned one; when the kernel refuses it, every
    // row runs untuned and says so.
    let mut tuning_refused: Option<String> = None;
    let mut tune = |untuned: bool| {
        if untuned || tuning_refused.is_some() {
            return None;
        }
        IdleHold::poll(&path_cpus)
            .and_then(|idle| {
                Ok((
                    idle,
                    RealtimeRx::raise(tb.layout(), &[Role::Fwd, Role::Sink])?,
                ))
            })
            .map_err(|e| {
                eprintln!("latency bench: {e}; every row runs on the untuned path");
                tuning_refused = Some(e.to_string());
            })
            .ok()
    };
    // testpmd is optional: when it is missing or cannot start, a line says why.
    let testpmd_program = polld_testbed::testpmd::program();
    let trial_of = |label: &str, forwarder| Trial {
        label: label.to_string(),
        forwarder,
        load: Load::Frames {
            rate: &rate,
            sink: true,
            family: IpFamily::Ipv4,
        },
        duration,
    };
    let mut rows: Vec<(DemoRow, Option<u32>, bool)> = Vec::new();
    for (label, forwarder, hz, untuned) in trials {
        let trial = trial_of(label, forwarder);
        let tuned = tune(untuned);
        let ran_untuned = tuned.is_none();
        announce("latency", &trial);
        match measure(&tb, &options, polld, &dir, &trial) {
            Ok(row) => rows.push((row, hz, ran_untuned)),
            Err(e) => {
                // Exit runs no destructors: give back the CPU, the kthreads and the
                // namespaces first.
                drop(tuned);
                let _ = std::fs::remove_dir_all(&dir);
                drop(tb);
                eprintln!("latency bench: {label}: {e}");
                std::process::exit(1);
            }
        }
    }
    let testpmd = testpmd_program
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|program| {
            let forwarder = Forwarder::Testpmd {
                program,
                backend: "af_xdp",
            };
            let trial = trial_of("testpmd af_xdp", forwarder);
            announce("latency", &trial);
            let tuned = tune(false);
            measure(&tb, &options, polld, &dir, &trial).map(|row| (row, tuned.is_none()))
        });
    let testpmd_note = match testpmd {
        Ok((row, untuned)) => {
            let note = row.testpmd.map(|c| format!("testpmd af_xdp: {c}"));
            rows.push((row, None, untuned));
            note
        }
        Err(e) => Some(format!("DPDK testpmd af_xdp: {e}; skipped")),
    };
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    let fwd_cpu = options.cpus.fwd;
    println!(
        "\none-way latency gen -> polld (af_xdp, realtime, CPU{fwd_cpu}) -> polld sink (af_xdp), 64-byte frames at {rate}/s, {duration} s per row"
    );
    match &tuning_refused {
        None => println!(
            "tuned path in every row but the \"untuned\" ones: CPU{fwd_cpu} (forwarder and sink) held out of halt, the receive kthreads of fwd and sink SCHED_FIFO {}; untuned: CPU{fwd_cpu} halts when idle, the kthreads run SCHED_OTHER (the testbed's default)",
            polld_testbed::placement::RX_FIFO_PRIORITY
        ),
        Some(e) => println!("the path could not be tuned ({e}): every row ran untuned"),
    }
    println!("steal and halts: CPU{fwd_cpu}'s during the row");
    println!(
        "{:<28} {:>9} {:>11} {:>6} {:>7} {:>7} {:>7} {:>9} {:>9} {:>8} {:>7} {:>14}  bound",
        "forwarder",
        "offered/s",
        "delivered/s",
        "lost",
        "p50 µs",
        "p99 µs",
        "max µs",
        "polld CPU",
        "kernel rx",
        "steal ms",
        "halts",
        "tick late µs"
    );
    let mut all_conserved = true;
    for (r, hz, _) in &rows {
        let l = r.latency;
        let field = |f: fn(&polld_testbed::demo::SinkLatency) -> f64| {
            l.as_ref()
                .map_or("-".to_string(), |l| format!("{:.0}", f(l)))
        };
        let bound = hz.map_or(String::new(), |hz| {
            let bound_us = 1e6 / hz as f64 + 100.0;
            let met = l.is_some_and(|l| l.p99_us <= bound_us);
            format!(
                "p99 <= {bound_us:.0} µs: {}",
                if met { "met" } else { "NOT met" }
            )
        });
        // The tick timer's lateness, p50/p99/max: the kernel's part of polling's wait.
        let tick_late = r.tick_lateness.map_or(String::new(), |t| {
            format!(
                "{}/{}/{}",
                t.p50_ns / 1000,
                t.p99_ns / 1000,
                t.max_ns / 1000
            )
        });
        println!(
            "{:<28} {:>9.0} {:>11.0} {:>6} {:>7} {:>7} {:>7} {:>8.1}% {:>8.1}% {:>8.0} {:>7} {tick_late:>14}  {bound}",
            r.mode,
            r.offered_pps,
            r.delivered_pps,
            l.map_or("-".to_string(), |l| l.lost.to_string()),
            field(|l| l.p50_us),
            field(|l| l.p99_us),
            field(|l| l.max_us),
            r.polld_cpu_percent,
            r.kernel_rx_cpu_percent,
            r.fwd_cpu_steal_ms,
            r.fwd_cpu_halts.map_or("-".to_string(), |h| h.to_string()),
        );
        all_conserved &= r.conserved != Some(false);
    }
    if let Some(note) = testpmd_note {
        println!("{note}");
    }
    // What of polling's p99 is the tick, what the timer's lateness, and what the path the
    // kernel's own forwarding also takes when its CPU idles the same way.
    for (r, hz, untuned) in &rows {
        let (Some(hz), Some(l), Some(t)) = (hz, r.latency, r.tick_lateness) else {
            continue;
        };
        let kernel_p99 = rows
            .iter()
            .find(|(k, _, u)| k.mode.starts_with("kernel") && u == untuned)
            .and_then(|(k, _, _)| k.latency)
            .map_or("-".to_string(), |k| format!("{:.0}", k.p99_us));
        let tick_us = 1e6 / *hz as f64;
        println!(
            "{}: p99 {:.0} µs = the tick {tick_us:.0} + {:.0}; of that the tick timer's lateness spread (p99 - p50) {} µs, and the kernel's own path had p99 {kernel_p99} µs",
            r.mode,
            l.p99_us,
            l.p99_us - tick_us,
            t.p99_ns.saturating_sub(t.p50_ns) / 1000,
        );
    }
    common::print_ledgers(rows.iter().map(|(r, _, _)| (rate.as_str(), r)));
    if all_conserved {
        println!(
            "conservation held in every polld run: on every interface, and end to end from gen to the sink"
        );
    } else {
        println!("CONSERVATION VIOLATED in some polld run: an unbalanced ledger above, or see `polld run --json`");
        std::process::exit(1);
    }
}
