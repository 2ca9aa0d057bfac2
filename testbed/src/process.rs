//! The child processes the demos and benches run (`polld run`, `polld gen`, `polld sink`,
//! iperf3): started with their output piped, stopped with SIGINT and killed if they do
//! not stop, their JSON summary read from what they printed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::Value;

use crate::TestbedError;

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// A child process stopped with SIGINT (and killed if it does not stop) on finish/drop.
pub(crate) struct Process {
    child: Option<Child>,
    what: &'static str,
}

impl Process {
    pub(crate) fn spawn(
        command: &mut std::process::Command,
        what: &'static str,
    ) -> Result<Process, TestbedError> {
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(format!("starting {what}: {e}")))?;
        Ok(Process {
            child: Some(child),
            what,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// SIGINT, wait up to 10 s; returns its standard output.
    pub(crate) fn finish(&mut self) -> Result<String, TestbedError> {
        self.end(true)
    }

    /// As [`Process::finish`], for a process that must still be running: a flood that had
    /// to last through a measured window. An error if it already ended by itself.
    pub(crate) fn finish_running(&mut self) -> Result<String, TestbedError> {
        if let Some(status) = self.exited() {
            return Err(failed(format!(
                "{} ended ({status}) before the measured window closed, so the window \
                 counted time without its load; its --duration is too short for the window",
                self.what
            )));
        }
        self.finish()
    }

    /// How it exited, if it has.
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits up to 10 s for it to exit by itself; returns its standard output.
    pub(crate) fn wait(&mut self) -> Result<String, TestbedError> {
        self.end(false)
    }

    fn end(&mut self, interrupt: bool) -> Result<String, TestbedError> {
        let Some(mut child) = self.child.take() else {
            return Ok(String::new());
        };
        if interrupt {
            crate::sys::signal(child.id(), Signal::INT);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = child
            .wait()
            .map_err(|e| failed(format!("{}: {e}", self.what)))?;
        let mut stdout = String::new();
        let mut stderr = String::new();
        if let Some(mut s) = child.stdout.take() {
            let _ = s.read_to_string(&mut stdout);
        }
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut stderr);
        }
        if !status.success() {
            return Err(failed(format!(
                "{} exited with {status}: {}",
                self.what,
                stderr.trim()
            )));
        }
        Ok(stdout)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Waits until polld's control socket exists, or reports why polld exited.
pub(crate) fn wait_for(socket: &Path, daemon: &mut Process) -> Result<(), TestbedError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !socket.exists() {
        if daemon.exited().is_some() || Instant::now() > deadline {
            let err = daemon
                .finish()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "it did not start in 20 s".into());
            return Err(failed(format!("polld run: {err}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The last line of `text` that is a JSON document: the summary `polld gen`, `polld sink`
/// and `polld run --json` print when they end.
pub(crate) fn last_json(text: &str) -> Option<Value> {
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
}

/// A `kB` field of process `pid`'s `/proc/PID/status` (`VmRSS:`, `VmHWM:`), KiB; 0 when
/// the process or the field is gone.
pub(crate) fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The 1-minute load average (`/proc/loadavg`), 0 if unreadable.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// The polld daemon to run: `polld` in the directory of this executable (polld-lab is
/// installed beside it), else `polld` on the PATH.
pub fn current_polld() -> PathBuf {
    std::env::current_exe()
        .map(|exe| exe.with_file_name("polld"))
        .ok()
        .filter(|polld| polld.is_file())
        .unwrap_or_else(|| PathBuf::from("polld"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Process {
        Process::spawn(
            std::process::Command::new("sh").args(["-c", script]),
            "the load",
        )
        .expect("sh starts")
    }

    #[test]
    fn a_load_that_ended_before_the_window_closed_is_an_error_and_one_still_running_is_stopped() {
        let mut ended = shell("echo sent");
        while ended.exited().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let err = ended.finish_running().unwrap_err().to_string();
        assert!(
            err.contains("the load ended") && err.contains("before the measured window closed"),
            "{err}"
        );

        // Stopped only once its SIGINT handler is in place (it says so with a file).
        let ready = std::env::temp_dir().join(format!("polld-demo-test-{}", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let mut running = shell(&format!(
            "trap 'echo stopped; exit 0' INT; touch {}; while :; do sleep 0.05; done",
            ready.display()
        ));
        while !ready.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_file(&ready);
        assert_eq!(
            running.finish_running().expect("still running").trim(),
            "stopped"
        );
    }
}
