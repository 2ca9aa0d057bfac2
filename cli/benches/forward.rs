//! Forwarding benchmark on the testbed (root): 64-byte frames from `polld gen` on CPU0 as
//! fast as it sends, through fwd to `polld sink`, with the forwarder and its receive work on
//! CPU1 (threaded NAPI pinned there). In one run it measures the kernel's own forwarding
//! (`ip_forward=1`, the baseline measured 751 kpps) and polld in interrupt and polling mode
//! on each backend (polling with the README's recommended knobs), and prints polld's
//! delivered rate as a ratio of the kernel's, with polld's CPU and resident memory.
//!
//! `cargo bench -p polld --bench forward [-- --duration 5]`

use polld_testbed::demo::{measure, write_table, Forwarder, Trial, RECOMMENDED_KNOBS};
use polld_testbed::{Layout, Testbed, UpOptions};

fn main() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("forward bench: needs root (network namespaces); skipped");
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    let duration = args
        .iter()
        .position(|a| a == "--duration")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5.0);
    let polld = std::path::Path::new(env!("CARGO_BIN_EXE_polld"));
    let options = UpOptions::default();
    let layout = Layout::new(&format!("fb{}", std::process::id() % 10_000));
    let tb = match Testbed::up(&layout, &options) {
        Ok(tb) => tb,
        Err(e) => {
            eprintln!("forward bench: {e}");
            std::process::exit(1);
        }
    };
    let dir = std::env::temp_dir().join(format!("polld-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut trials = vec![("kernel (threaded NAPI)".to_string(), Forwarder::Kernel)];
    for backend in ["af_xdp", "af_packet"] {
        for mode in ["interrupt", "polling"] {
            trials.push((
                format!("polld {backend} {mode}"),
                Forwarder::Polld {
                    backend,
                    mode,
                    knobs: &RECOMMENDED_KNOBS,
                },
            ));
        }
    }
    let mut rows = Vec::new();
    for (label, forwarder) in trials {
        eprintln!("forward bench: {label}, {duration} s ...");
        let trial = Trial {
            label: label.clone(),
            forwarder,
            rate: "unlimited",
            duration,
            // Delivered = veth3's rx counter, as in the baseline: no sink process
            // competing for the forwarder's CPU.
            sink: false,
        };
        match measure(&tb, &options, polld, &dir, &trial) {
            Ok(row) => rows.push(row),
            Err(e) => {
                eprintln!("forward bench: {label}: {e}");
                std::process::exit(1);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    write_table(
        &rows,
        "polld forwarding against the kernel",
        &options,
        &mut std::io::stdout(),
    );
    let kernel = rows[0].delivered_pps.max(1.0);
    for r in &rows[1..] {
        println!(
            "{}: {:.2}x the kernel's delivered rate, RSS {:.1} MiB (target < 64 MiB)",
            r.mode,
            r.delivered_pps / kernel,
            r.polld_rss_kib as f64 / 1024.0
        );
    }
    // Rows 1..: each backend's interrupt row, then its polling row.
    for pair in rows[1..].chunks(2) {
        if let [interrupt, polling] = pair {
            println!(
                "{}: {:.2}x interrupt mode's delivered rate ({:.0} against {:.0} frames/s)",
                polling.mode,
                polling.delivered_pps / interrupt.delivered_pps.max(1.0),
                polling.delivered_pps,
                interrupt.delivered_pps
            );
        }
    }
}
