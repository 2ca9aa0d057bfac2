//! Seed 002: iperf3 TCP from gen to sink through polld, with the CPU of every thread on
//! the path.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::plan::DEFAULT_USER_FRAC;
use super::report::TcpRow;
use super::steps::Bench;
use crate::share::{Sample, ShareTrial, TrialRun};
use crate::{Role, TestbedError};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

impl Bench<'_> {
    /// Seed 002: iperf3 TCP from gen to sink through polld, unlimited, then at a bitrate
    /// both modes carry.
    pub(super) fn tcp(&mut self) -> Result<(), TestbedError> {
        for mode in ["interrupt", "polling"] {
            self.tcp_run(mode, None)?;
        }
        // A quarter of the slower mode's rate, whole tens of Mbit/s: both carry it with CPU
        // to spare, as the seed's box did its 10 Mbit/s link.
        let slower = self
            .report
            .tcp
            .iter()
            .map(|r| r.mbit_per_sec)
            .fold(f64::INFINITY, f64::min);
        let target = ((slower / 4.0 / 10.0).floor() * 10.0).max(10.0);
        for mode in ["interrupt", "polling"] {
            self.tcp_run(mode, Some(target))?;
        }
        Ok(())
    }

    /// One iperf3 transfer through polld in `mode`, at `target` Mbit/s or unlimited.
    fn tcp_run(&mut self, mode: &str, target: Option<f64>) -> Result<(), TestbedError> {
        let rate = target.map_or("unlimited".to_string(), |t| format!("{t:.0} Mbit/s"));
        self.say(&format!(
            "tcp: iperf3 {rate} for {} s through polld in {mode} mode ...",
            self.timing.tcp_secs
        ));
        let trial = ShareTrial {
            rate: None,
            competitor: false,
            ..self.flood_trial(mode, DEFAULT_USER_FRAC)
        };
        let run = TrialRun::start(self.tb, self.polld, self.dir, self.cpus, &trial)?;
        let transfer = self.iperf3(&run, target)?;
        let row = run.finish(&transfer.before, &transfer.after)?;
        self.book(&format!("tcp {mode} {rate}"), row.conserved);
        let tcp = TcpRow {
            mode: mode.into(),
            target_mbit: target,
            mbit_per_sec: transfer.mbit_per_sec,
            polld_cpu_percent: row.polld_cpu_percent,
            path_cpu_percent: transfer.path_cpu_percent,
            interrupts_per_sec: row.interrupts_per_sec,
            conserved: row.conserved,
        };
        self.say(&format!(
            "tcp: {mode} at {rate}: {:.0} Mbit/s, polld {:.1} % of CPU{}, the path {:.1} % of a CPU",
            tcp.mbit_per_sec, tcp.polld_cpu_percent, self.cpus.1, tcp.path_cpu_percent
        ));
        self.report.tcp.push(tcp);
        Ok(())
    }

    /// One iperf3 TCP transfer at `target` Mbit/s (unlimited: `None`), with samples around
    /// it and the CPU of every thread on the path.
    fn iperf3(&self, run: &TrialRun, target: Option<f64>) -> Result<Transfer, TestbedError> {
        let layout = self.tb.layout();
        // The first frame to polld's address makes gen's kernel resolve it.
        let _ = self
            .tb
            .command_in(Role::Gen, None, "ping")?
            .args([
                "-c",
                "2",
                "-i",
                "0.2",
                "-W",
                "1",
                &layout.veth3.addr.to_string(),
            ])
            .output();
        let mut server = self
            .tb
            .command_in(Role::Sink, None, "iperf3")?
            .args(["-s", "-1", "-p", "5399"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed(format!("starting iperf3 -s in {}: {e}", layout.sink_ns)))?;
        std::thread::sleep(Duration::from_millis(300));
        let mut client = self
            .tb
            .command_ahead_in(Role::Gen, Some(self.cpus.0), "iperf3")?;
        client.args([
            "-c",
            &layout.veth3.addr.to_string(),
            "-p",
            "5399",
            "-J",
            "-t",
            &self.timing.tcp_secs.to_string(),
        ]);
        if let Some(mbit) = target {
            client.args(["-b", &format!("{mbit:.0}M")]);
        }
        let before = run.sample()?;
        let kernel_before = run.polld_process_ns() + ksoftirqd_ns();
        let out = client.output();
        let after = run.sample()?;
        let kernel_after = run.polld_process_ns() + ksoftirqd_ns();
        let _ = server.kill();
        let _ = server.wait();
        let out = out.map_err(|e| failed(format!("iperf3 -c in {}: {e}", layout.gen_ns)))?;
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let bits = report["end"]["sum_received"]["bits_per_second"].as_f64();
        let iperf_cpu = &report["end"]["cpu_utilization_percent"];
        let iperf_percent = iperf_cpu["host_total"].as_f64().unwrap_or(0.0)
            + iperf_cpu["remote_total"].as_f64().unwrap_or(0.0);
        let wall_ns = after.at.duration_since(before.at).as_nanos().max(1) as f64;
        let path_cpu_percent =
            iperf_percent + kernel_after.saturating_sub(kernel_before) as f64 * 100.0 / wall_ns;
        match bits {
            Some(bits) if out.status.success() => Ok(Transfer {
                mbit_per_sec: bits / 1e6,
                path_cpu_percent,
                before,
                after,
            }),
            _ => Err(failed(format!(
                "iperf3 TCP through polld failed: {} {}",
                report["error"],
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
        }
    }
}

/// One iperf3 transfer: its rate, the CPU of every thread on its path, and the trial's
/// samples around it.
struct Transfer {
    mbit_per_sec: f64,
    path_cpu_percent: f64,
    before: Sample,
    after: Sample,
}

/// The CPU time of the ksoftirqd threads so far, ns: the kernel's packet work that ran in
/// no process's context.
fn ksoftirqd_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with("ksoftirqd/"))
        })
        .filter_map(polld_dev::kernel_rx::thread_cpu_ns)
        .sum()
}
