//! What the VM demo measured: its rows ([`VmRow`]), the livelock rows, the TCP transfers
//! and the report they make ([`VmDemo`]).

use serde::Serialize;

use crate::ledger::Ledger;
use crate::vm::guest::DeviceWork;

/// One mode at one load.
#[derive(Clone, Debug, Serialize)]
pub struct VmRow {
    pub mode: String,
    /// `flood` (gen unlimited) or `half` (half of interrupt mode's delivered rate under
    /// the flood, with the device work at a fair share).
    pub load: String,
    /// Where the guest ran the device work its interrupts left over (`ksoftirqd/0`).
    pub device_work: DeviceWork,
    pub offered_pps: f64,
    pub delivered_pps: f64,
    pub device_interrupts_per_s: f64,
    pub polld_cpu_percent: f64,
    /// The guest's `ksoftirqd/0`: the driver's work the kernel left over from its
    /// interrupts (its NAPI's receive, its transmit completions), percent of the vCPU. The
    /// softirqs run on the way out of an interrupt count in the time of whichever task the
    /// interrupt came upon (the 6.1 guest has no IRQ_TIME_ACCOUNTING).
    pub ksoftirqd_percent: f64,
    /// The competitor's user time, percent of the vCPU: what it got (see [`TaskTicks`](crate::vm::guest::TaskTicks)).
    pub competitor_percent: f64,
    /// polld's word on eth0's receive work: in its budget only with preferred busy
    /// polling.
    pub rx_work_in_budget: bool,
    /// Where that work runs, and why it is not in the budget (`polld ifconfig --json`).
    pub rx_work: serde_json::Value,
    /// Where every frame gen sent went, host and guest.
    pub ledger: Ledger,
}

/// The demo's report.
#[derive(Clone, Debug, Serialize)]
pub struct VmDemo {
    pub accel: String,
    pub kernel: String,
    pub user_frac: u32,
    pub window_s: f64,
    pub rows: Vec<VmRow>,
    /// Interrupt mode without fastforwarding (seed 000).
    pub livelock: Livelock,
    /// iperf3 TCP through the guest, without the competitor (seed 002): unlimited in
    /// each mode, then at [`TCP_FIXED_MBIT`].
    pub tcp: Vec<TcpRow>,
}

/// The fixed TCP bitrate, Mbit/s: seed 002's box routed a 10 Mbit/s WAN.
pub const TCP_FIXED_MBIT: u32 = 10;

/// One iperf3 transfer from gen to sink through polld in the guest.
#[derive(Clone, Debug, Serialize)]
pub struct TcpRow {
    pub mode: String,
    /// iperf3's `-b`, Mbit/s; `None`: unlimited.
    pub target_mbit: Option<u32>,
    /// What sink received, Mbit/s.
    pub mbit_per_s: f64,
    /// The vCPU's time not idle over the transfer (all of it: polld, the driver's
    /// interrupts and softirqs), percent, by the guest's clock.
    pub guest_cpu_percent: f64,
    /// polld's own CPU time, percent of the vCPU.
    pub polld_cpu_percent: f64,
    /// eth0's receive interrupts a second: in interrupt mode, how many TCP segments NAPI
    /// takes per interrupt.
    pub device_interrupts_per_s: f64,
}

/// Seed 000 in the guest: interrupt mode with `net.inet.ip.fastforwarding=0`, at half load
/// and under the flood, beside the same competitor.
#[derive(Clone, Debug, Serialize)]
pub struct Livelock {
    /// At half load, then flooded.
    pub rows: Vec<VmRow>,
    /// The most it delivered, at either load, frames/s.
    pub best_pps: f64,
    /// Flooded, as a percentage of its best.
    pub flooded_percent_of_best: f64,
    /// Under [`LIVELOCK_PERCENT`] of its best when flooded.
    pub reproduced: bool,
}

/// Flooded, interrupt mode without fastforwarding delivers less than this percentage of
/// its best: receive livelock.
pub const LIVELOCK_PERCENT: f64 = 10.0;

impl Livelock {
    pub(super) fn of(rows: Vec<VmRow>) -> Livelock {
        let best_pps = rows.iter().map(|r| r.delivered_pps).fold(0.0, f64::max);
        let flooded = rows.last().map_or(0.0, |r| r.delivered_pps);
        let flooded_percent_of_best = if best_pps > 0.0 {
            100.0 * flooded / best_pps
        } else {
            0.0
        };
        Livelock {
            rows,
            best_pps,
            flooded_percent_of_best,
            reproduced: flooded_percent_of_best < LIVELOCK_PERCENT,
        }
    }
}
