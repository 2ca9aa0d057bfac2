//! The final report of `polld run`: each interface's counters, and the conservation check
//! per interface.

use std::io::Write;

use polld_control::proto::IfStatus;
use polld_core::IfCounters;
use polld_packet::PacketDrop;

use crate::executor::{self, IfInfo, RealDataplane};

/// Each interface as `polld ifconfig` shows it, with its counters: what the final report
/// prints.
pub(crate) type FinalCounters = Vec<(IfStatus, IfCounters)>;

pub(crate) fn final_counters(dp: &mut RealDataplane, info: &[IfInfo]) -> FinalCounters {
    executor::interfaces(dp, info, None)
        .into_iter()
        .zip(dp.interfaces().iter().map(|i| i.counters()))
        .collect()
}

/// The final counters, and the conservation check per interface.
pub(crate) fn report(
    rows: &[(IfStatus, IfCounters)],
    signal: i32,
    json: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if json {
        let interfaces: Vec<&IfStatus> = rows.iter().map(|(s, _)| s).collect();
        serde_json::to_writer_pretty(&mut *out, &interfaces)?;
        return writeln!(out);
    }
    let name = if signal == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    writeln!(out, "polld: stopped by {name}; queues drained")?;
    for (status, c) in rows {
        writeln!(
            out,
            "{}: mode {} link {}  rx {}  forwarded {}  local {}  consumed {}  to_kernel {}  tx {}  interrupts {}  polls {}",
            status.name, status.mode, status.link, c.rx_packets, c.forwarded, c.local, c.consumed,
            c.to_kernel, c.tx_packets, c.interrupts, c.polls
        )?;
        // The stage is the packet crate's (router or bridge): its reasons are PacketDrop.
        for (reason, n) in c.drops.nonzero(&PacketDrop::TABLE) {
            writeln!(out, "    dropped {n} {}", reason.name())?;
        }
        for (reason, n) in c.tx_drops.nonzero() {
            writeln!(out, "    dropped on transmit {n} {}", reason.name())?;
        }
        let unaccounted = c.unaccounted();
        if unaccounted != 0 {
            writeln!(
                out,
                "    CONSERVATION VIOLATED: {unaccounted} frames unaccounted"
            )?;
        }
    }
    Ok(())
}
