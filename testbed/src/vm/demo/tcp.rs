//! Seed 002 through the guest: iperf3 TCP from gen to sink, with the guest sampled around
//! each transfer.

use std::io::Write;
use std::time::Duration;

use super::report::{TcpRow, TCP_FIXED_MBIT};
use crate::demo::say::say;
use crate::vm::guest::{self, TaskTicks, ETH0_RX_IRQ};
use crate::{Role, Testbed, TestbedError};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Seed 002 through the guest: iperf3 TCP from gen to sink, unlimited in both modes, then
/// at [`TCP_FIXED_MBIT`]; a progress line before each ([`say`]).
pub(super) fn tcp(
    tb: &Testbed,
    polld: u32,
    secs: f64,
    json: bool,
    out: &mut dyn Write,
) -> Result<Vec<TcpRow>, TestbedError> {
    let mut rows = Vec::new();
    for target in [None, Some(TCP_FIXED_MBIT)] {
        for mode in ["interrupt", "polling"] {
            let rate = target.map_or("unlimited".to_string(), |m| format!("at {m} Mbit/s"));
            say(
                json,
                out,
                format_args!("iperf3 TCP {rate} through the guest in {mode} mode; {secs} s ..."),
            );
            guest::set_mode(&tb.layout().prefix, mode)?;
            rows.push(transfer(tb, mode, target, secs, polld)?);
        }
    }
    Ok(rows)
}

/// One iperf3 transfer at `target` Mbit/s (unlimited: `None`), with the guest sampled
/// around it.
fn transfer(
    tb: &Testbed,
    mode: &str,
    target: Option<u32>,
    secs: f64,
    polld: u32,
) -> Result<TcpRow, TestbedError> {
    let layout = tb.layout();
    let mut server = tb
        .command_in(Role::Sink, None, "iperf3")?
        .args(["-s", "-1", "-p", "5399"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("starting iperf3 -s in {}: {e}", layout.sink_ns)))?;
    std::thread::sleep(Duration::from_millis(300));
    let mut client = tb.command_in(Role::Gen, None, "iperf3")?;
    client.args(["-c", &layout.veth3.addr.to_string(), "-p", "5399", "-J"]);
    client.args(["-t", &format!("{}", secs.ceil().max(1.0))]);
    if let Some(mbit) = target {
        client.args(["-b", &format!("{mbit}M")]);
    }
    let before = guest::sample(&layout.prefix, ETH0_RX_IRQ, &[polld]);
    let output = client.output();
    let after = guest::sample(&layout.prefix, ETH0_RX_IRQ, &[polld]);
    let _ = server.kill();
    let _ = server.wait();
    let (before, after) = (before?, after?);
    let output = output.map_err(|e| failed(format!("iperf3 -c in {}: {e}", layout.gen_ns)))?;
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let bits = report["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .filter(|_| output.status.success())
        .ok_or_else(|| {
            failed(format!(
                "iperf3 TCP through the guest failed: {} {}",
                report["error"],
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        })?;
    let guest_s = (after.uptime - before.uptime).max(0.01);
    Ok(TcpRow {
        mode: mode.to_string(),
        target_mbit: target,
        mbit_per_s: bits / 1e6,
        guest_cpu_percent: 100.0 * (1.0 - (after.idle - before.idle) / guest_s).max(0.0),
        polld_cpu_percent: after.percent_since(&before, 0, TaskTicks::total),
        device_interrupts_per_s: (after.interrupts - before.interrupts) as f64 / guest_s,
    })
}
