//! The demos' tables, and the sentences under them, each decided by the rows' numbers.

use std::io::Write;

use super::DemoRow;
use crate::share::ShareRow;
use crate::{IpFamily, UpOptions};

/// What the veth demo's two rows show, from their numbers: the wakeups polling saves, the
/// receive work the kernel's NAPI threads did outside polld's budget, and all the work on
/// the frames' path (the one figure the scheduler's charging cannot shift).
pub(super) fn veth_findings(interrupt: &DemoRow, polling: &DemoRow) -> String {
    format!(
        "Interrupt mode: polld took {:.0} interrupts/s and was charged {:.1} % of a CPU; polling: {:.0} \
         interrupts/s and {:.1} % (it wakes at kern.polling.hz and polls a bounded burst).\n\
         The kernel's NAPI threads did the receive work for polld's interfaces outside polld's \
         budget: {:.1} % and {:.1} % of a CPU (`polld ifconfig` says which interfaces).\n\
         All the work on the frames' path, polld and the kernel's receive threads in fwd and \
         sink: {:.1} % and {:.1} % of a CPU (read the sum: when polld's tick preempts a NAPI \
         thread mid-poll, the scheduler charges polld for the rest of that poll).",
        interrupt.interrupts_per_sec,
        interrupt.polld_cpu_percent,
        polling.interrupts_per_sec,
        polling.polld_cpu_percent,
        interrupt.kernel_rx_cpu_percent,
        polling.kernel_rx_cpu_percent,
        interrupt.path_cpu_percent(),
        polling.path_cpu_percent(),
    )
}

/// The TAP demo's table and what it shows, every claim computed from the rows.
pub(super) fn write_share_table(
    rows: &[ShareRow],
    family: IpFamily,
    gen_cpu: usize,
    fwd_cpu: usize,
    out: &mut dyn Write,
) {
    let _ = writeln!(
        out,
        "\npolld on TAP, {}-byte {} frames flooded by polld gen on CPU{gen_cpu}; polld (SCHED_FIFO) and a CPU-bound competitor on CPU{fwd_cpu}; {}",
        family.smallest_frame(),
        family.name(),
        machine()
    );
    let _ = writeln!(
        out,
        "{:<22} {:>11} {:>12} {:>13} {:>10} {:>11}  drops at tap0",
        "polld mode", "offered/s", "delivered/s", "interrupts/s", "polld CPU", "competitor"
    );
    for r in rows {
        let label = match r.mode.as_str() {
            "polling" => format!("polling, user_frac {}", r.user_frac),
            other => other.to_string(),
        };
        let drops: Vec<String> = r.drops.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let _ = writeln!(
            out,
            "{:<22} {:>11.0} {:>12.0} {:>13.0} {:>9.1}% {:>10.1}%  {}",
            label,
            r.offered_pps,
            r.delivered_pps,
            r.interrupts_per_sec,
            r.polld_cpu_percent,
            r.competitor_percent,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(", ")
            }
        );
    }
    for line in share_findings(rows, fwd_cpu) {
        let _ = writeln!(out, "{line}");
    }
}

/// Sentences about the rows, each one decided by the numbers in them.
fn share_findings(rows: &[ShareRow], cpu: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let interrupt = rows.iter().find(|r| r.mode == "interrupt");
    let polling = rows.iter().find(|r| r.mode == "polling");
    if let Some(r) = interrupt {
        let fate = if r.competitor_percent < 15.0 {
            "was starved"
        } else {
            "was not starved"
        };
        lines.push(format!(
            "Interrupt mode: polld took {:.0} interrupts/s and {:.1} % of CPU{cpu}; the competitor {fate}: it got {:.1} %.",
            r.interrupts_per_sec, r.polld_cpu_percent, r.competitor_percent
        ));
    }
    if let Some(r) = polling {
        let off = r.competitor_percent - f64::from(r.user_frac);
        let verdict = if off.abs() <= 5.0 {
            "within 5 points of it"
        } else {
            "more than 5 points away from it"
        };
        let wakeups = if r.interrupts_per_sec == 0.0 {
            "took no interrupts".to_string()
        } else {
            format!("took {:.0} interrupts/s", r.interrupts_per_sec)
        };
        lines.push(format!(
            "Polling: polld {wakeups} and used {:.1} % of CPU{cpu}; the competitor got {:.1} % against kern.polling.user_frac = {}, {verdict}.",
            r.polld_cpu_percent, r.competitor_percent, r.user_frac
        ));
    }
    if let (Some(i), Some(p)) = (interrupt, polling) {
        let per_cpu = |r: &ShareRow| r.delivered_pps / (r.polld_cpu_percent / 100.0).max(1e-9);
        let (ip, pp) = (per_cpu(i), per_cpu(p));
        // Runs of a few seconds differ by a few percent: within 2 % is "the same".
        let ratio = pp / ip.max(1e-9);
        let comparison = if ratio >= 0.98 {
            format!(
                "polling forwarded {:.2}x as much per second of CPU as interrupts did, so its rate is what its share of the CPU allows",
                ratio
            )
        } else {
            format!(
                "polling forwarded only {:.2}x as much per second of CPU as interrupts did",
                ratio
            )
        };
        lines.push(format!(
            "Forwarding: {:.0} frames/s with interrupts, {:.0} polling; per second of polld's CPU {:.0} and {:.0}: {comparison}.",
            i.delivered_pps, p.delivered_pps, ip, pp
        ));
    }
    for r in rows {
        if let Some(ledger) = &r.ledger {
            lines.push(format!("Every frame gen sent, {}: {ledger}.", r.mode));
        }
    }
    if rows.iter().any(|r| !r.conserved) {
        lines.push(
            "CONSERVATION VIOLATED: a frame no hop names, or an interface whose counters do not add up (see `polld run --json`)."
                .into(),
        );
    } else {
        lines.push(
            "Every frame is accounted for: end to end, and on each interface of polld (rx = forwarded + local + consumed + queued + named drops)."
                .into(),
        );
    }
    lines
}

/// The rows as a table, under a line saying what ran, the placement and the machine.
pub fn write_table(
    rows: &[DemoRow],
    what: &str,
    family: IpFamily,
    options: &UpOptions,
    out: &mut dyn Write,
) {
    let fwd = options.cpus.fwd;
    let _ = writeln!(
        out,
        "\n{what} ({} placement), {}-byte {} frames; gen on CPU{}, the forwarder and its receive work on CPU{fwd}; {}",
        options.placement.name(),
        family.smallest_frame(),
        family.name(),
        options.cpus.gen,
        machine()
    );
    let _ = writeln!(
        out,
        "{:<24} {:>11} {:>12} {:>10} {:>10} {:>10} {:>10} {:>13} {:>9}  drops at veth1",
        "forwarder",
        "offered/s",
        "delivered/s",
        "polld CPU",
        "kernel rx",
        "sink rx",
        format!("CPU{fwd} busy"),
        "interrupts/s",
        "polld RSS"
    );
    for r in rows {
        let drops: Vec<String> = r.drops.iter().map(|(n, v)| format!("{n} {v}")).collect();
        let rss = if r.polld_rss_kib > 0 {
            format!("{:.1} MiB", r.polld_rss_kib as f64 / 1024.0)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "{:<24} {:>11.0} {:>12.0} {:>9.1}% {:>9.1}% {:>9.1}% {:>9.1}% {:>13.0} {:>9}  {}",
            r.mode,
            r.offered_pps,
            r.delivered_pps,
            r.polld_cpu_percent,
            r.kernel_rx_cpu_percent,
            r.sink_rx_cpu_percent,
            r.fwd_cpu_busy_percent,
            r.interrupts_per_sec,
            rss,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(", ")
            }
        );
    }
}

fn machine() -> String {
    let m = crate::results::Machine::this();
    format!("{} CPUs, {}", m.cpus, m.cpu_model)
}
