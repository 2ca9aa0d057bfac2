//! The seed's promise on real traffic: on the TAP testbed, under a flood from gen, a
//! CPU-bound competitor pinned to the poll CPU keeps `kern.polling.user_frac` percent of
//! it while polld polls, and is starved while polld takes interrupts.
//!
//! On TAP every bit of receive work happens inside polld's own `read()` and `write()`
//! (see `polld_dev::tap`), so polld's budget bounds all the device work, as `kern_poll`
//! does. [`measure_share`] runs one such trial: `polld run` realtime on the fwd CPU,
//! `polld gen --rate unlimited` on the gen CPU, a [`Competitor`] on the fwd CPU, and
//! measures over a window the competitor's and polld's CPU time (from their own
//! `/proc/PID/schedstat`, in ns), the delivered rate (tap1's receive counter), polld's
//! interrupts, and conservation at the end: on every interface of polld, and end to end
//! from what `polld gen` sent to what reached sink ([`Ledger`]). `polld demo` and the
//! promise test both use it.
//!
//! [`TrialRun`] is a trial under way, for benches that measure around something else
//! than a plain window; [`measure_per_cpu_shares`] the promise on several poll CPUs.

mod per_cpu;
mod run;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use serde::Serialize;

use crate::ledger::Ledger;
use crate::streams::ExtraStream;
use crate::{IpFamily, Role, Testbed, TestbedError};

pub use per_cpu::{measure_per_cpu_shares, PerCpuRow, PerCpuTrial};
pub(crate) use run::{tap0_target, GEN_SLACK_S};
pub use run::{Sample, TrialRun};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// A CPU-bound process pinned to one CPU (a shell spinning on `:`), killed on drop.
pub struct Competitor {
    child: Child,
}

impl Competitor {
    pub fn start(tb: &Testbed, cpu: usize) -> Result<Competitor, TestbedError> {
        let child = tb
            .command_ahead_in(Role::Fwd, Some(cpu), "sh")?
            .args(["-c", "while :; do :; done"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting the competitor: {e}")))?;
        Ok(Competitor { child })
    }

    /// Its CPU time so far, in ns.
    pub fn cpu_ns(&self) -> u64 {
        task_cpu_ns(self.child.id())
    }
}

impl Drop for Competitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time of thread `tid` so far, in ns (the scheduler's run time); 0 once it is gone.
fn task_cpu_ns(tid: u32) -> u64 {
    polld_dev::kernel_rx::thread_cpu_ns(tid).unwrap_or(0)
}

/// One trial: polld's mode on both TAPs and `user_frac`, the load and who shares the CPU.
#[derive(Clone, Debug)]
pub struct ShareTrial<'a> {
    pub mode: &'a str,
    pub user_frac: u32,
    /// Seconds of flood before the window opens (the controller settles).
    pub warm_up: f64,
    /// Seconds the shares are measured over.
    pub window: f64,
    /// `polld gen --rate` (`unlimited`, `200k`, ...), or no `polld gen` at all.
    pub rate: Option<&'a str>,
    /// Run the CPU-bound competitor on the fwd CPU.
    pub competitor: bool,
    /// Knobs set after the trial's own (`net.inet.ip.fastforwarding=0`, ...).
    pub knobs: &'a [(&'a str, &'a str)],
    /// Streams besides tap0 -> tap1, already created on the testbed, each with its own
    /// `polld gen` at `rate`.
    pub extra_streams: &'a [ExtraStream],
}

impl<'a> ShareTrial<'a> {
    /// The promise's trial: an unlimited flood and the competitor beside polld.
    pub fn flood(mode: &'a str, user_frac: u32, warm_up: f64, window: f64) -> ShareTrial<'a> {
        ShareTrial {
            mode,
            user_frac,
            warm_up,
            window,
            rate: Some("unlimited"),
            competitor: true,
            knobs: &[],
            extra_streams: &[],
        }
    }
}

/// What a trial measured.
#[derive(Clone, Debug, Serialize)]
pub struct ShareRow {
    pub mode: String,
    pub user_frac: u32,
    /// `polld gen`'s sending rate over its whole run (0 without `polld gen`), summed over
    /// the streams.
    pub offered_pps: f64,
    /// tap1's receive counter over the window: frames polld wrote towards sink (with
    /// the extra streams' outputs).
    pub delivered_pps: f64,
    pub interrupts_per_sec: f64,
    /// polld's poll thread, percent of the fwd CPU over the window.
    pub polld_cpu_percent: f64,
    /// The competitor, percent of the fwd CPU over the window (0 without one).
    pub competitor_percent: f64,
    /// In the guest, its `ksoftirqd/0`: the device work the kernel left over from its
    /// interrupts, percent of the vCPU (`None` on TAP, where no driver works).
    pub ksoftirqd_percent: Option<f64>,
    /// The IP version (4 or 6) of the frames `polld gen` flooded into tap0, as its summary
    /// says (`None`: no `polld gen` into tap0, or its summary was not read for it).
    pub gen_ip_version: Option<u8>,
    /// tap0's drops over the window, by reason (rx_ring_full: the TAP's queue was full
    /// and the kernel dropped on gen's CPU).
    pub drops: Vec<(String, u64)>,
    /// Where every frame `polld gen` sent went, end to end (`None` without `polld gen`:
    /// iperf3's traffic is its own to account for).
    pub ledger: Option<Ledger>,
    /// rx = forwarded + local + consumed + queued + drops on every interface at the end,
    /// and the ledger balanced.
    pub conserved: bool,
}

#[cfg(test)]
impl ShareRow {
    /// A polling trial at user_frac 10 that delivered `delivered` of `offered` frames/s,
    /// conserved: a point of a curve in unit tests.
    pub(crate) fn point(offered: f64, delivered: f64) -> ShareRow {
        ShareRow {
            mode: "polling".into(),
            user_frac: 10,
            offered_pps: offered,
            delivered_pps: delivered,
            interrupts_per_sec: 0.0,
            polld_cpu_percent: 90.0,
            competitor_percent: 0.0,
            ksoftirqd_percent: None,
            gen_ip_version: Some(4),
            drops: vec![],
            ledger: None,
            conserved: true,
        }
    }
}

/// Runs one trial on a TAP testbed: warm-up, then the measured window. `dir` holds the
/// trial's config and socket.
pub fn measure_share(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    cpus: (usize, usize),
    trial: &ShareTrial,
) -> Result<ShareRow, TestbedError> {
    measure_share_family(tb, polld, dir, cpus, trial, IpFamily::Ipv4)
}

/// [`measure_share`] with the flood over `family` (`polld gen --ipv6` for IPv6).
pub fn measure_share_family(
    tb: &Testbed,
    polld: &Path,
    dir: &Path,
    cpus: (usize, usize),
    trial: &ShareTrial,
    family: IpFamily,
) -> Result<ShareRow, TestbedError> {
    let run = TrialRun::start_family(tb, polld, dir, cpus, trial, family)?;
    std::thread::sleep(Duration::from_secs_f64(trial.warm_up));
    let before = run.sample()?;
    std::thread::sleep(Duration::from_secs_f64(trial.window));
    let after = run.sample()?;
    run.finish(&before, &after)
}
