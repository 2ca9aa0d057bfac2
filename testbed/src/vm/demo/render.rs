//! The VM demo's report as text: its rows, their ledgers, the livelock and the TCP
//! transfers.

use std::io::Write;

use super::report::{VmDemo, VmRow, TCP_FIXED_MBIT};
use crate::vm::guest::{self, DeviceWork};

pub(super) fn write_table(demo: &VmDemo, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "\npolld in a qemu guest ({}, kernel {}, 1 vCPU) between two virtio-net NICs, a CPU-bound competitor on the vCPU; user_frac {}; {} s windows",
        demo.accel, demo.kernel, demo.user_frac, demo.window_s
    );
    let _ = writeln!(
        out,
        "{:<21} {:<6} {:>10} {:>12} {:>14} {:>10} {:>10} {:>11}  rx work in polld's budget",
        "mode",
        "load",
        "offered/s",
        "delivered/s",
        "eth0 irqs/s",
        "polld CPU",
        "ksoftirqd",
        "competitor"
    );
    let label = |r: &VmRow, ff: &str| VmRow {
        mode: match r.device_work {
            DeviceWork::Fair => format!("{}{ff}, fair", r.mode),
            DeviceWork::InterruptPriority => format!("{}{ff}", r.mode),
        },
        ..r.clone()
    };
    let rows: Vec<VmRow> = (demo.rows.iter().map(|r| label(r, "")))
        .chain(demo.livelock.rows.iter().map(|r| label(r, ", ff=0")))
        .collect();
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<21} {:<6} {:>10.0} {:>12.0} {:>14.0} {:>9.1}% {:>9.1}% {:>10.1}%  {}",
            r.mode,
            r.load,
            r.offered_pps,
            r.delivered_pps,
            r.device_interrupts_per_s,
            r.polld_cpu_percent,
            r.ksoftirqd_percent,
            r.competitor_percent,
            if r.rx_work_in_budget {
                "yes".to_string()
            } else {
                format!(
                    "no: {}",
                    r.rx_work["why_not"]
                        .as_str()
                        .unwrap_or("polld does not say")
                )
            }
        );
    }
    let _ = writeln!(
        out,
        "The guest's ksoftirqd/0 (the device work its interrupts leave over) runs at {}: SCHED_FIFO {}, above polld's poll thread, as FreeBSD runs its interrupt handlers; \"fair\": at SCHED_OTHER, Linux's default, where CFS gives it a fair share.",
        DeviceWork::InterruptPriority.name(),
        guest::INTERRUPT_PRIORITY
    );
    let _ = writeln!(out);
    for r in &rows {
        let _ = writeln!(
            out,
            "Every frame gen sent, {} {}: {}",
            r.mode, r.load, r.ledger
        );
    }
    let _ = writeln!(
        out,
        "Every frame is accounted for: host TAPs, guest NICs and polld (rx = forwarded + local + consumed + queued + named drops)."
    );
    let l = &demo.livelock;
    let _ = writeln!(
        out,
        "\ninterrupt mode without fastforwarding (ff=0): best {:.0}/s; flooded {:.0} % of its best: {}",
        l.best_pps,
        l.flooded_percent_of_best,
        if l.reproduced {
            "livelock reproduced"
        } else {
            "NOT under 10 % of its best: no livelock here"
        }
    );
    if demo.tcp.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\niperf3 TCP from gen to sink through the guest, no competitor; CPU is the vCPU's, by the guest's clock"
    );
    let _ = writeln!(
        out,
        "{:<10} {:>10} {:>10} {:>10} {:>10} {:>12}",
        "mode", "target", "Mbit/s", "guest CPU", "polld CPU", "eth0 irqs/s"
    );
    for r in &demo.tcp {
        let target = r
            .target_mbit
            .map_or("unlimited".to_string(), |m| format!("{m} Mbit/s"));
        let _ = writeln!(
            out,
            "{:<10} {:>10} {:>10.1} {:>9.1}% {:>9.1}% {:>12.0}",
            r.mode,
            target,
            r.mbit_per_s,
            r.guest_cpu_percent,
            r.polld_cpu_percent,
            r.device_interrupts_per_s
        );
    }
    let pair = |target: Option<u32>| {
        let find = |mode: &str| {
            demo.tcp
                .iter()
                .find(|r| r.mode == mode && r.target_mbit == target)
        };
        find("interrupt").zip(find("polling"))
    };
    if let Some((i, p)) = pair(None) {
        let _ = writeln!(
            out,
            "unlimited: polling carried {:.2}x what interrupt mode did",
            p.mbit_per_s / i.mbit_per_s.max(1e-9)
        );
    }
    if let Some((i, p)) = pair(Some(TCP_FIXED_MBIT)) {
        let _ = writeln!(
            out,
            "at {TCP_FIXED_MBIT} Mbit/s: polling carried {:.1} against interrupt mode's {:.1} Mbit/s on {:.2}x its guest CPU (seed 002: 34 % against 73 %, 0.47x)",
            p.mbit_per_s,
            i.mbit_per_s,
            p.guest_cpu_percent / i.guest_cpu_percent.max(1e-9)
        );
    }
}
