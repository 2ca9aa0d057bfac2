//! The bench's report as text: each step's table beside the seed's figures, then the
//! findings.

use std::io::Write;

use super::report::{SeedsReport, TcpRow};
use super::seed;
use crate::share::ShareRow;

fn opt(v: Option<f64>, unit: &str) -> String {
    match v {
        Some(v) if unit == "%" => format!("{v:.1} %"),
        // Under 1 kpps in pps, as the seed's "110 pps".
        Some(v) if unit == "kpps" && v < 1.0 => format!("{:.0} pps", v * 1e3),
        Some(v) => format!("{v:.0} {unit}"),
        None => "-".into(),
    }
}

pub(super) fn write_text(report: &SeedsReport, out: &mut dyn Write) {
    if let Some(m) = &report.machine {
        let _ = writeln!(
            out,
            "polld bench seeds{} on {} CPUs, {}, kernel {}; {}",
            if report.quick { " --quick" } else { "" },
            m.cpus,
            m.cpu_model,
            m.kernel,
            report.testbed
        );
    }
    if !report.table.is_empty() {
        let _ = writeln!(out, "\nSeed 000 (Rizzo 2002): polld on TAP beside the seed's 750 MHz Athlon with 100 Mbit cards");
        let _ = writeln!(
            out,
            "{:<42} {:>12} {:>12} {:>7} | {:>10} {:>10}",
            "test", "interrupt", "polling", "p/i", "seed intr", "seed poll"
        );
        for r in &report.table {
            let ratio = match (r.interrupt, r.polling) {
                (Some(i), Some(p)) if i > 0.0 => format!("{:.2}", p / i),
                _ => "-".into(),
            };
            let _ = writeln!(
                out,
                "{:<42} {:>12} {:>12} {:>7} | {:>10} {:>10}",
                r.test,
                opt(r.interrupt, &r.unit),
                opt(r.polling, &r.unit),
                ratio,
                r.seed_interrupt,
                r.seed_polling
            );
        }
        for (i, r) in report.table.iter().enumerate() {
            let _ = writeln!(out, "  ({}) {}: {}", i + 1, r.test, r.note);
        }
    }
    if !report.curve.is_empty() {
        let _ = writeln!(
            out,
            "\nSeed 000's curve: delivered against offered (frames/s); seed: {}",
            seed::CURVE
        );
        if report
            .curve
            .iter()
            .any(|s| s.rounds.iter().any(|r| r.len() > 1))
        {
            let _ = writeln!(
                out,
                "Each point is the trial with the median delivered rate of its rounds (rounds: every trial's delivered, thousands/s, in the order they ran)."
            );
        }
        let softirq = report.in_guest();
        let _ = writeln!(
            out,
            "{:<30} {:>11} {:>12} {:>10}{} {:>13}  rounds",
            "configuration",
            "offered/s",
            "delivered/s",
            "polld CPU",
            ksoftirqd_heading(softirq),
            "interrupts/s"
        );
        for s in &report.curve {
            for (p, rounds) in s.points.iter().zip(&s.rounds) {
                let rounds: Vec<String> =
                    rounds.iter().map(|d| format!("{:.0}", d / 1e3)).collect();
                let _ = writeln!(
                    out,
                    "{:<30} {:>11.0} {:>12.0} {:>9.1}%{} {:>13.0}  {}",
                    s.name,
                    p.offered_pps,
                    p.delivered_pps,
                    p.polld_cpu_percent,
                    ksoftirqd_cell(p, softirq),
                    p.interrupts_per_sec,
                    rounds.join("/")
                );
            }
        }
    }
    if let Some(p) = report.plateau.as_ref().filter(|p| !p.loads.is_empty()) {
        let _ = writeln!(
            out,
            "\nPolling above its peak: {} more rounds of trials at each load above it and at its best, the loads polld gen could not reach as one (unlimited); each load's mean, its standard deviation (percent of the mean) and its range.\n{}",
            p.rounds,
            p.table().trim_end()
        );
    }
    if !report.screens.is_empty() {
        let _ = writeln!(
            out,
            "\nSeed 001 (the polling how-to's systat screens); seed: {}",
            seed::SCREENS
        );
        for s in &report.screens {
            let _ = writeln!(
                out,
                "--- polld stat --once, tap0 and tap1 in {} mode ---\n{}",
                s.mode,
                s.text.trim_end()
            );
        }
    }
    if !report.tcp.is_empty() {
        let _ = writeln!(out, "\nSeed 002 (the nixCraft tutorial: iperf TCP through the box over a 10 Mbit/s link; polling at user_frac 50, idle_poll 0, as its sysctl listing)");
        let _ = writeln!(
            out,
            "{:<10} {:>8} {:>9} {:>10} {:>9} {:>13} | {:>10} {:>9}",
            "mode",
            "-b",
            "Mbit/s",
            "polld CPU",
            "path CPU",
            "interrupts/s",
            "seed Mbit/s",
            "seed CPU"
        );
        for r in &report.tcp {
            let (_, seed_mbit, seed_cpu) = seed::TCP
                .iter()
                .find(|(m, _, _)| *m == r.mode)
                .copied()
                .unwrap_or(("", 0.0, 0.0));
            let target = r
                .target_mbit
                .map_or("unlimited".to_string(), |t| format!("{t:.0}M"));
            let _ = writeln!(
                out,
                "{:<10} {:>8} {:>9.0} {:>9.1}% {:>8.1}% {:>13.0} | {:>10.2} {:>8.0}%",
                r.mode,
                target,
                r.mbit_per_sec,
                r.polld_cpu_percent,
                r.path_cpu_percent,
                r.interrupts_per_sec,
                seed_mbit,
                seed_cpu
            );
        }
        let _ = writeln!(
            out,
            "  path CPU: both iperf3s, all of polld's threads and ksoftirqd, percent of one CPU"
        );
        let seed_per_mbit = |i: usize| seed::TCP[i].2 / seed::TCP[i].1;
        for target in [None, report.tcp.iter().find_map(|r| r.target_mbit)] {
            let rows: Vec<&TcpRow> = report
                .tcp
                .iter()
                .filter(|r| r.target_mbit == target)
                .collect();
            let (Some(i), Some(p)) = (
                rows.iter().find(|r| r.mode == "interrupt"),
                rows.iter().find(|r| r.mode == "polling"),
            ) else {
                continue;
            };
            let per_mbit = |r: &TcpRow| r.path_cpu_percent / r.mbit_per_sec.max(1e-9);
            let label = target.map_or("unlimited".to_string(), |t| format!("at {t:.0} Mbit/s"));
            let _ = writeln!(
                out,
                "polling/interrupt {label}: throughput {:.2}x (seed {:.2}x), polld CPU {:.2}x, path CPU per Mbit/s {:.2}x (seed's CPU per Mbit/s {:.2}x)",
                p.mbit_per_sec / i.mbit_per_sec.max(1e-9),
                seed::TCP[1].1 / seed::TCP[0].1,
                p.polld_cpu_percent / i.polld_cpu_percent.max(1e-9),
                per_mbit(p) / per_mbit(i).max(1e-9),
                seed_per_mbit(1) / seed_per_mbit(0)
            );
        }
    }
    if !report.share.is_empty() {
        let _ = writeln!(out, "\nThe promise: a CPU-bound competitor on polld's CPU under a flood (seed 000: user_frac is the CPU share left to userland)");
        let softirq = report.in_guest();
        let _ = writeln!(
            out,
            "{:<28} {:>11} {:>12} {:>10} {:>11}{}",
            "polld mode",
            "offered/s",
            "delivered/s",
            "polld CPU",
            "competitor",
            ksoftirqd_heading(softirq)
        );
        // The IPv6 trials below the IPv4 ones, each family's smallest frames.
        for r in report
            .share
            .iter()
            .chain(report.ipv6.iter().map(|r| &r.ipv6))
        {
            let mut label = match r.mode.as_str() {
                "polling" => format!("polling, user_frac {}", r.user_frac),
                other => other.to_string(),
            };
            if r.gen_ip_version == Some(6) {
                label.push_str(", IPv6");
            }
            let _ = writeln!(
                out,
                "{:<28} {:>11.0} {:>12.0} {:>9.1}% {:>10.1}%{}",
                label,
                r.offered_pps,
                r.delivered_pps,
                r.polld_cpu_percent,
                r.competitor_percent,
                ksoftirqd_cell(r, softirq)
            );
        }
    }
    if !report.sleep.is_empty() {
        let _ = writeln!(out, "\nSeed 003 (PF_RING: active against passive polling): how long a sleep of 1 us and of 1 ns lasts on this machine");
        let _ = write!(out, "{}", crate::sleep::render(&report.sleep));
    }
    if !report.passive.is_empty() {
        let _ = writeln!(out, "\nSeed 003 on packets: polld as the reader of tap0, sleeping between reads or not (seed: a sleep of 1 us lasts ~60 us, ~900 frames at 10 Gbit/s; time-merging two adapters needs active polling: the next table)");
        let _ = write!(out, "{}", super::passive::render(&report.passive));
    }
    if !report.merge.is_empty() {
        let _ = writeln!(out, "\nSeed 003, time merge: two inputs forwarded into one output by the same readers (seed: accurate time-merging of two adapters needs active polling, at 100 % of a core)");
        let _ = write!(out, "{}", super::merge::render(&report.merge));
    }
    if !report.adaptive.is_empty() {
        let _ = writeln!(out, "\nSeed 004 (em(4), 2006: a fast interrupt that masks the NIC and a task bounded by rx_processing_limit): interrupt against adaptive mode, frames/s");
        let _ = write!(out, "{}", super::adaptive::render(&report.adaptive));
    }
    let _ = writeln!(out);
    for line in &report.findings {
        let _ = writeln!(out, "{line}");
    }
    for svg in &report.svgs {
        let _ = writeln!(out, "wrote {}", svg.display());
    }
}

/// The heading of the `ksoftirqd` column, in the guest (`shown`): its `ksoftirqd/0`, the
/// device work the kernel left over from its interrupts, beside polld's.
fn ksoftirqd_heading(shown: bool) -> &'static str {
    if shown {
        "  ksoftirqd"
    } else {
        ""
    }
}

/// The row's cell in the `ksoftirqd` column ([`ksoftirqd_heading`]).
fn ksoftirqd_cell(row: &ShareRow, shown: bool) -> String {
    match row.ksoftirqd_percent {
        Some(p) if shown => format!(" {p:>9.1}%"),
        _ => String::new(),
    }
}
