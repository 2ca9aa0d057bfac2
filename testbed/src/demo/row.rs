//! What one trial of the demo measured: a [`DemoRow`], with the TCP stream's rate and the
//! sink's latency when the trial had them.

use polld_control::daemon::TickLateness;
use serde_json::Value;

use crate::entries::{split_dev_entry, value_of};
use crate::ledger::Ledger;
use crate::testpmd::TestpmdCounters;

/// What one mode did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoRow {
    /// The mode, or what forwarded (`kernel`, `polld af_xdp polling`).
    pub mode: String,
    /// The IP version (4 or 6) of the frames `polld gen` sent, as its summary says
    /// (`None`: a TCP load).
    pub gen_ip_version: Option<u8>,
    pub offered_pps: f64,
    pub delivered_pps: f64,
    /// The measured window, s.
    pub seconds: f64,
    /// The forwarder's CPU time over the run (polld's, or testpmd's: its threads' run
    /// times as the scheduler measured them, /proc/PID/task/*/schedstat), percent of one
    /// CPU (0 for the kernel).
    pub polld_cpu_percent: f64,
    /// CPU time of the kernel threads doing fwd's interfaces' receive work (threaded
    /// NAPI), percent of one CPU: outside polld's budget.
    pub kernel_rx_cpu_percent: f64,
    /// CPU time of the kernel threads doing the sink's interfaces' receive work, percent of
    /// one CPU: where the forwarded frames go, and where the kernel completes polld's
    /// AF_XDP sends. The scheduler charges part of it to polld when polld's wakeup
    /// preempts that thread (docs/measuring.md), so read the sum over all three.
    pub sink_rx_cpu_percent: f64,
    /// Busy time of the forwarder's CPU (all work on it: the wall time it did not idle, by
    /// /proc/stat), percent.
    pub fwd_cpu_busy_percent: f64,
    /// Time the hypervisor ran something else while the forwarder's CPU had work, ms
    /// (`/proc/stat` steal, in its 10 ms ticks).
    pub fwd_cpu_steal_ms: f64,
    /// How many times the forwarder's CPU halted when idle ([`crate::idle::halts`]);
    /// `None` without cpuidle.
    pub fwd_cpu_halts: Option<u64>,
    pub interrupts_per_sec: f64,
    /// Drops at the input (`dev.veth1.*`, `dev.tap0.*` on TAP) during the run, by reason.
    pub drops: Vec<(String, u64)>,
    /// polld's resident memory at the end of the run, KiB.
    pub polld_rss_kib: u64,
    /// Loss and latency at `polld sink`, when the trial ran one.
    pub latency: Option<SinkLatency>,
    /// The TCP stream's rate, in a TCP trial.
    pub tcp: Option<TcpResult>,
    /// Growth over the run of each of polld's numeric entries (counters; a gauge's
    /// change), by name: empty when polld did not forward.
    pub polld_deltas: Vec<(String, u64)>,
    /// How late polld's tick timer woke its poll thread, from start to the end of the run
    /// (`None`: no ticks, as in interrupt mode, or polld did not forward).
    pub tick_lateness: Option<TickLateness>,
    /// Where every frame `polld gen` sent went, from gen through polld to the sink's
    /// interface, each hop's losses named ([`Ledger::of_stream`]); `None` when polld did
    /// not forward, or the load was TCP (iperf3's retransmissions are its own).
    pub ledger: Option<Ledger>,
    /// Conservation on every interface in polld's final report, and the ledger balanced
    /// (`None`: the kernel or testpmd forwarded).
    pub conserved: Option<bool>,
    /// testpmd's forward statistics and the veths' counters, when testpmd forwarded.
    pub testpmd: Option<TestpmdCounters>,
}

impl DemoRow {
    /// How much polld's entry `name` grew over the run (0 if it has none).
    pub fn polld_delta(&self, name: &str) -> u64 {
        value_of(&self.polld_deltas, name)
    }

    /// The growth over the run of `dev.<if>.<leaf>`, summed over polld's interfaces.
    pub fn polld_delta_all_ifs(&self, leaf: &str) -> u64 {
        self.polld_deltas
            .iter()
            .filter(|(n, _)| split_dev_entry(n).is_some_and(|(_, l)| l == leaf))
            .map(|(_, v)| v)
            .sum()
    }

    /// CPU of every thread on the frames' path, percent of one CPU: the forwarder and the
    /// kernel's receive threads in fwd and sink. A charge a wakeup moves between them
    /// stays inside the sum (docs/measuring.md).
    pub fn path_cpu_percent(&self) -> f64 {
        self.polld_cpu_percent + self.kernel_rx_cpu_percent + self.sink_rx_cpu_percent
    }
}

/// What one iperf3 TCP stream achieved through the forwarder.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct TcpResult {
    /// Received by the server, averaged over the run.
    pub mbit_per_s: f64,
    /// Segments the sender retransmitted.
    pub retransmits: u64,
    /// The sender's mean smoothed round-trip time over the run (iperf3's `mean_rtt`), µs.
    pub mean_rtt_us: u64,
}

/// What `polld sink` measured end to end: loss and one-way latency.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct SinkLatency {
    /// Frames the generator sent that never arrived (its end-of-run record counts them).
    pub lost: u64,
    /// lost / (lost + frames received once), in percent.
    pub loss_percent: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl SinkLatency {
    /// From `polld sink --json`'s summary; `None` when it timed nothing.
    pub(super) fn of(summary: &Value) -> Option<SinkLatency> {
        let analysis = &summary["analysis"];
        let latency = &analysis["latency"];
        let us = |name: &str| latency[name].as_f64().map(|ns| ns / 1000.0);
        Some(SinkLatency {
            lost: analysis["sequence"]["lost"].as_u64()?,
            loss_percent: analysis["loss_percent"].as_f64()?,
            p50_us: us("p50_ns")?,
            p99_us: us("p99_ns")?,
            p999_us: us("p999_ns")?,
            max_us: us("max_ns")?,
        })
    }
}
