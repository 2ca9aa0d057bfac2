//! DPDK's `dpdk-testpmd` as the forwarder in fwd, so the forwarding bench can set polld
//! against a kernel-bypass poller on the same veth testbed (Debian package `dpdk-dev`;
//! optional: without it the bench says so and skips the rows).
//!
//! testpmd runs without hugepages or PCI (`--no-pci --no-huge -m 512`), on two virtual
//! devices over fwd's veths: `net_af_xdp` (queue 0) or `net_af_packet`. It forwards in
//! `mac` mode: each frame leaves with the transmit port's MAC as source and the far
//! end's (veth3's, `--eth-peer`) as destination, as a router would write them; `io` mode
//! would forward the frames unchanged, still addressed to veth1. testpmd needs a main
//! lcore besides its forwarding lcore, so both are mapped onto the forwarder's CPU
//! (`--lcores 0@CPU,1@CPU`): the main lcore only waits on standard input. It starts
//! forwarding at once (`--auto-start`) and stops on a newline, printing its forward
//! statistics, which [`Testpmd::finish`] reads with the veths' counters to account for
//! every frame (see [`TestpmdCounters`]).
//!
//! testpmd leaves veth1 and veth2 promiscuous when it exits, so the benches run it last on
//! a testbed.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{IfCounters, Role, Testbed, TestbedError};

/// The program, as Debian's `dpdk-dev` installs it.
pub const PROGRAM: &str = "dpdk-testpmd";

/// Mbufs in testpmd's pool. Its default (about 155 000, 340 MB) does not fit the
/// 512 MB it gets without hugepages: mbuf pool creation fails with "Cannot allocate
/// memory". 16384 is more than the rings of two ports hold.
const MBUFS: &str = "16384";

/// How long testpmd may take to start forwarding, or to stop.
const PATIENCE: Duration = Duration::from_secs(20);

/// Where `dpdk-testpmd` is, or [`TestbedError::MissingTool`] naming the package.
pub fn program() -> Result<PathBuf, TestbedError> {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(PROGRAM))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| TestbedError::MissingTool {
            program: PROGRAM.into(),
            package: "dpdk-dev".into(),
        })
}

/// testpmd's virtual devices on veth1 (port 0) and veth2 (port 1) for `backend`.
fn vdevs(backend: &str, rx: &str, tx: &str) -> Result<[String; 2], TestbedError> {
    let vdev = |port: u8, iface: &str| match backend {
        "af_xdp" => Ok(format!(
            "net_af_xdp{port},iface={iface},start_queue=0,queue_count=1"
        )),
        "af_packet" => Ok(format!("net_af_packet{port},iface={iface}")),
        other => Err(TestbedError::Failed(format!(
            "testpmd has no backend {other:?}: use af_xdp or af_packet"
        ))),
    };
    Ok([vdev(0, rx)?, vdev(1, tx)?])
}

/// testpmd's forward statistics over its run, and the veths' counters over the same
/// time, which together account for every frame that reached fwd:
///
/// - `arrived` (veth1's rx) = `rx` + `rx_missed` + `unread` (frames the socket's ring
///   had no room for that testpmd's statistics do not count, as `net_af_packet`'s);
/// - `rx` = `tx` + `tx_dropped` (testpmd's own balance);
/// - `tx` = `delivered` (veth3's rx) + [`lost_out`](Self::lost_out), and each frame lost
///   there is one of veth2's `tx_dropped` (veth3's ring was full). veth2 can count more
///   drops than frames lost: on `net_af_packet` the kernel leaves a frame it failed to
///   send in the socket's TX ring and sends it again on the next kick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TestpmdCounters {
    pub arrived: u64,
    pub rx: u64,
    pub rx_missed: u64,
    pub tx: u64,
    pub tx_dropped: u64,
    pub delivered: u64,
    /// veth2's `tx_dropped`: sends that found veth3's ring full.
    pub veth2_dropped: u64,
}

impl TestpmdCounters {
    /// Frames veth1 received that testpmd neither read nor counted as missed.
    pub fn unread(&self) -> u64 {
        self.arrived.saturating_sub(self.rx + self.rx_missed)
    }

    /// Frames testpmd sent that veth3 did not receive.
    pub fn lost_out(&self) -> u64 {
        self.tx.saturating_sub(self.delivered)
    }

    /// Whether every frame is accounted for (see the type's equations).
    pub fn balanced(&self) -> bool {
        self.arrived >= self.rx + self.rx_missed
            && self.rx == self.tx + self.tx_dropped
            && self.delivered <= self.tx
            && self.lost_out() <= self.veth2_dropped
    }
}

impl std::fmt::Display for TestpmdCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "arrived {} = rx {} + missed {} + unread {}; rx = tx {} + dropped {}; tx = veth3 {} + lost {} (veth2 tx_dropped {}){}",
            self.arrived,
            self.rx,
            self.rx_missed,
            self.unread(),
            self.tx,
            self.tx_dropped,
            self.delivered,
            self.lost_out(),
            self.veth2_dropped,
            if self.balanced() { "" } else { " UNBALANCED" }
        )
    }
}

/// The "Accumulated forward statistics for all ports" block of testpmd's exit report:
/// `(RX-packets, RX-dropped, TX-packets, TX-dropped)`.
fn accumulated(output: &str) -> Option<(u64, u64, u64, u64)> {
    let block = output.split("Accumulated forward statistics").nth(1)?;
    let value = |name: &str| -> Option<u64> {
        let at = block.find(name)? + name.len();
        block[at..].split_whitespace().next()?.parse().ok()
    };
    Some((
        value("RX-packets:")?,
        value("RX-dropped:")?,
        value("TX-packets:")?,
        value("TX-dropped:")?,
    ))
}

/// A running testpmd forwarding between veth1 and veth2 in fwd. Dropping it kills it.
pub struct Testpmd {
    child: Child,
    stdin: Option<ChildStdin>,
    output: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
    backend: String,
    runtime_dir: PathBuf,
    /// veth1, veth2 and veth3 when forwarding began.
    start: [IfCounters; 3],
}

impl Testpmd {
    /// Starts `program` (see [`program()`]) in fwd with both lcores on `cpu` and its ports
    /// on `backend` (`af_xdp` or `af_packet`); returns once it forwards, or why it could
    /// not (EAL's own words: no memory, a device it could not open, ...).
    pub fn start(
        tb: &Testbed,
        program: &Path,
        cpu: usize,
        backend: &str,
    ) -> Result<Testpmd, TestbedError> {
        let layout = tb.layout();
        let [rx, tx] = vdevs(backend, &layout.veth1.name, &layout.veth2.name)?;
        // A file prefix of its own: two testpmds (two testbeds) must not share EAL state.
        let file_prefix = format!("polld-{}", layout.fwd_ns);
        let lcores = format!("0@{cpu},1@{cpu}");
        let peers = [
            format!("--eth-peer=0,{}", layout.veth0.mac),
            format!("--eth-peer=1,{}", layout.veth3.mac),
        ];
        let mut command = tb.command_in(Role::Fwd, Some(cpu), "stdbuf")?;
        // Line-buffered, so the readiness line arrives while testpmd runs.
        command.arg("-oL").arg(program);
        command.args(["--no-pci", "--no-huge", "-m", "512", "--no-shconf"]);
        command.args(["--no-telemetry", "--file-prefix", &file_prefix]);
        command.args(["--lcores", &lcores, "--vdev", &rx, "--vdev", &tx, "--"]);
        command.args(["--forward-mode=mac", &peers[0], &peers[1]]);
        command.args(["--total-num-mbufs", MBUFS, "--auto-start"]);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| TestbedError::Failed(format!("cannot start {PROGRAM}: {e}")))?;
        let output = Arc::new(Mutex::new(String::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(collect(out, &output));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(collect(err, &output));
        }
        let mut testpmd = Testpmd {
            stdin: child.stdin.take(),
            child,
            output,
            readers,
            backend: backend.to_string(),
            runtime_dir: PathBuf::from("/var/run/dpdk").join(&file_prefix),
            start: [IfCounters::default(); 3],
        };
        testpmd.wait_until("Press enter to exit", "start forwarding")?;
        testpmd.start = counters(tb)?;
        Ok(testpmd)
    }

    /// The process id (its /proc entry has the CPU time of all its threads).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Tells it to stop forwarding and exit; returns its counters and the veths' since the start.
    pub fn finish(mut self, tb: &Testbed) -> Result<TestpmdCounters, TestbedError> {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        self.wait_until("Bye...", "stop")?;
        let end = counters(tb)?;
        let output = self.output();
        let (rx, rx_missed, tx, tx_dropped) = accumulated(&output).ok_or_else(|| {
            TestbedError::Failed(format!(
                "{PROGRAM} ({}) printed no forward statistics: {}",
                self.backend,
                tail(&output)
            ))
        })?;
        let delta =
            |i: usize, f: fn(&IfCounters) -> u64| f(&end[i]).saturating_sub(f(&self.start[i]));
        Ok(TestpmdCounters {
            arrived: delta(0, |c| c.rx_packets),
            rx,
            rx_missed,
            tx,
            tx_dropped,
            delivered: delta(2, |c| c.rx_packets),
            veth2_dropped: delta(1, |c| c.tx_dropped),
        })
    }

    fn output(&self) -> String {
        self.output.lock().map(|o| o.clone()).unwrap_or_default()
    }

    /// Waits until testpmd prints `line`; fails with its last words if it exits first or
    /// takes longer than [`PATIENCE`] to `what`.
    fn wait_until(&mut self, line: &str, what: &str) -> Result<(), TestbedError> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if self.output().contains(line) {
                return Ok(());
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                // Let the readers drain what it said last.
                std::thread::sleep(Duration::from_millis(100));
                let why = match exited {
                    Some(status) => format!("exited ({status})"),
                    None => format!("did not {what} in {} s", PATIENCE.as_secs()),
                };
                return Err(TestbedError::Failed(format!(
                    "{PROGRAM} ({}) {why}: {}",
                    self.backend,
                    tail(&self.output())
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        for reader in self.readers.drain(..) {
            let _ = reader.join();
        }
        // Empty with --no-shconf; remove_dir leaves it if anything else is in it.
        let _ = std::fs::remove_dir(&self.runtime_dir);
    }
}

/// veth1, veth2 and veth3's counters.
fn counters(tb: &Testbed) -> Result<[IfCounters; 3], TestbedError> {
    let layout = tb.layout();
    Ok([
        tb.counters(&layout.veth1.name)?,
        tb.counters(&layout.veth2.name)?,
        tb.counters(&layout.veth3.name)?,
    ])
}

/// A thread appending what `stream` says to `output`, line by line.
fn collect(stream: impl Read + Send + 'static, output: &Arc<Mutex<String>>) -> JoinHandle<()> {
    let output = Arc::clone(output);
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if let Ok(mut o) = output.lock() {
                o.push_str(&line);
                o.push('\n');
            }
        }
    })
}

/// The lines that say why testpmd failed: EAL's errors and its last few lines.
fn tail(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| l.contains("Error") || l.contains("Cause:") || l.contains("error"))
        .collect();
    if errors.is_empty() {
        lines[lines.len().saturating_sub(3)..].join(" / ")
    } else {
        errors.join(" / ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a real run (`net_af_xdp`, 50 kpps for 2 s).
    const EXIT_REPORT: &str = "\
Telling cores to stop...
Waiting for lcores to finish...

  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 96859          RX-dropped: 0             RX-total: 96859
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 0              RX-dropped: 0             RX-total: 0
  TX-packets: 96859          TX-dropped: 0             TX-total: 96859
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 96859          RX-dropped: 12            RX-total: 96871
  TX-packets: 96850          TX-dropped: 9             TX-total: 96859
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

Done.
";

    #[test]
    fn reads_the_accumulated_statistics_not_a_ports() {
        assert_eq!(accumulated(EXIT_REPORT), Some((96859, 12, 96850, 9)));
        assert_eq!(accumulated("Port 0 is closed\n"), None);
    }

    #[test]
    fn counters_balance_only_when_every_frame_is_accounted_for() {
        let c = TestpmdCounters {
            arrived: 100,
            rx: 90,
            rx_missed: 4,
            tx: 88,
            tx_dropped: 2,
            delivered: 85,
            veth2_dropped: 3,
        };
        assert!(c.balanced());
        assert_eq!((c.unread(), c.lost_out()), (6, 3));
        // A frame veth2 failed to send and sent again: a drop counted, nothing lost.
        assert!(TestpmdCounters { delivered: 86, ..c }.balanced());
        assert!(!TestpmdCounters { tx: 87, ..c }.balanced());
        assert!(!TestpmdCounters {
            veth2_dropped: 2,
            ..c
        }
        .balanced());
        assert!(!TestpmdCounters {
            delivered: 89,
            tx: 88,
            ..c
        }
        .balanced());
        assert!(!TestpmdCounters { arrived: 93, ..c }.balanced());
        assert!(c
            .to_string()
            .starts_with("arrived 100 = rx 90 + missed 4 + unread 6"));
    }

    #[test]
    fn an_unknown_backend_is_named() {
        let e = vdevs("tap", "veth1", "veth2").unwrap_err();
        assert!(e.to_string().contains("\"tap\""), "{e}");
        let [rx, tx] = vdevs("af_packet", "veth1", "veth2").unwrap();
        assert_eq!(
            (rx.as_str(), tx.as_str()),
            ("net_af_packet0,iface=veth1", "net_af_packet1,iface=veth2")
        );
    }

    #[test]
    fn a_failure_is_told_by_eals_error_lines() {
        let output = "EAL: Detected CPU lcores: 2\nEAL: Error - exiting with code: 1\n  Cause: No cores defined for forwarding\nPort 0 is closed\n";
        assert_eq!(
            tail(output),
            "EAL: Error - exiting with code: 1 / Cause: No cores defined for forwarding"
        );
    }
}
