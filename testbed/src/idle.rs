//! How the testbed's CPUs idle, which a latency measurement on a virtual machine must control.
//!
//! A virtual CPU that halts when idle (`HLT`, the `haltpoll` driver's second state) runs
//! again only when the hypervisor wakes it, which adds to a wakeup a delay no steal time
//! counts. Every wakeup on the forwarding path pays it: the kernel's receive thread woken
//! by the generator's transmit, the sink woken by its socket, polld's tick timer
//! (docs/measuring.md §tb-halt has the figures).
//!
//! [`IdleHold`] keeps CPUs out of halt while it lives through the kernel's per-CPU PM QoS:
//! `power/pm_qos_resume_latency_us` = `n/a` accepts no exit latency, so cpuidle picks only
//! its polling state, as a latency-tuned host does (tuned's `latency-performance` profile
//! sets the machine-wide `/dev/cpu_dma_latency` to the same effect). A polling idle CPU
//! counts as idle in `/proc/stat`; the hypervisor sees it busy, so a host preemption then
//! shows as steal. [`halts`] counts how often a CPU halted, so a measurement can show
//! whether the hold was in force.

use std::path::{Path, PathBuf};

use crate::TestbedError;

/// Where the kernel lists CPUs in sysfs.
const CPU_SYSFS: &str = "/sys/devices/system/cpu";
/// The resume-latency value that forbids every idle state but polling.
const NO_EXIT_LATENCY: &str = "n/a";
/// cpuidle's name of its polling state, the one idle state that does not halt.
const POLL_STATE: &str = "POLL";

/// Holds CPUs in polling idle until dropped; then each CPU gets its previous setting back.
#[derive(Debug)]
pub struct IdleHold {
    /// Each held CPU's setting file and the value it had.
    restore: Vec<(PathBuf, String)>,
}

impl IdleHold {
    /// Keeps `cpus` from halting when idle.
    pub fn poll(cpus: &[usize]) -> Result<IdleHold, TestbedError> {
        IdleHold::poll_in(Path::new(CPU_SYSFS), cpus)
    }

    /// [`IdleHold::poll`] on a sysfs CPU directory rooted at `root`.
    pub fn poll_in(root: &Path, cpus: &[usize]) -> Result<IdleHold, TestbedError> {
        let mut hold = IdleHold {
            restore: Vec::new(),
        };
        for &cpu in cpus {
            let path = root.join(format!("cpu{cpu}/power/pm_qos_resume_latency_us"));
            if hold.restore.iter().any(|(p, _)| *p == path) {
                continue;
            }
            let failed = |e: std::io::Error| {
                TestbedError::Failed(format!(
                    "cannot hold CPU{cpu} out of halt through {}: {e} (it needs root and a kernel \
                     with CPU PM QoS; measure without the hold instead)",
                    path.display()
                ))
            };
            let previous = std::fs::read_to_string(&path).map_err(failed)?;
            std::fs::write(&path, NO_EXIT_LATENCY).map_err(failed)?;
            // The file shows "0" for "no constraint", and writing "0" restores that.
            hold.restore.push((path, previous.trim().to_string()));
        }
        Ok(hold)
    }
}

impl Drop for IdleHold {
    fn drop(&mut self) {
        for (path, previous) in &self.restore {
            if let Err(e) = std::fs::write(path, previous) {
                log::warn!(
                    "cannot restore {} to {previous}: {e}; write it by hand",
                    path.display()
                );
            }
        }
    }
}

/// How many times `cpu` has halted (entered an idle state other than polling) since boot;
/// `None` when the kernel has no cpuidle states for it.
pub fn halts(cpu: usize) -> Option<u64> {
    halts_in(Path::new(CPU_SYSFS), cpu)
}

/// [`halts`] on a sysfs CPU directory rooted at `root`.
pub fn halts_in(root: &Path, cpu: usize) -> Option<u64> {
    let states = std::fs::read_dir(root.join(format!("cpu{cpu}/cpuidle"))).ok()?;
    let mut any = false;
    let mut halts = 0;
    for state in states.flatten() {
        let dir = state.path();
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
        let (Some(name), Some(usage)) = (read("name"), read("usage")) else {
            continue;
        };
        any = true;
        if name.trim() != POLL_STATE {
            halts += usage.trim().parse::<u64>().unwrap_or(0);
        }
    }
    any.then_some(halts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs() -> PathBuf {
        let root = std::env::temp_dir().join(format!(
            "polld-idle-{}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace("::", "-")
        ));
        let _ = std::fs::remove_dir_all(&root);
        for cpu in 0..2 {
            let power = root.join(format!("cpu{cpu}/power"));
            std::fs::create_dir_all(&power).unwrap();
            std::fs::write(power.join("pm_qos_resume_latency_us"), "0\n").unwrap();
            for (i, (name, usage)) in [("POLL", 7), ("haltpoll idle", 40 + cpu)]
                .iter()
                .enumerate()
            {
                let dir = root.join(format!("cpu{cpu}/cpuidle/state{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                std::fs::write(dir.join("name"), format!("{name}\n")).unwrap();
                std::fs::write(dir.join("usage"), format!("{usage}\n")).unwrap();
            }
        }
        root
    }

    fn setting(root: &Path, cpu: usize) -> String {
        std::fs::read_to_string(root.join(format!("cpu{cpu}/power/pm_qos_resume_latency_us")))
            .unwrap()
    }

    #[test]
    fn a_hold_forbids_halting_on_its_cpus_and_gives_the_setting_back_when_dropped() {
        let root = sysfs();
        let hold = IdleHold::poll_in(&root, &[1, 1]).unwrap();
        assert_eq!(setting(&root, 1), "n/a");
        assert_eq!(setting(&root, 0), "0\n", "CPU0 was not asked for");
        drop(hold);
        assert_eq!(setting(&root, 1), "0");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_cpu_without_the_setting_is_an_error_naming_the_file() {
        let root = sysfs();
        let e = IdleHold::poll_in(&root, &[0, 5]).unwrap_err().to_string();
        assert!(e.contains("CPU5") && e.contains("cpu5/power/pm_qos_resume_latency_us"));
        assert_eq!(setting(&root, 0), "0", "what was held is given back");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn halts_count_every_idle_state_but_polling() {
        let root = sysfs();
        assert_eq!(halts_in(&root, 0), Some(40));
        assert_eq!(halts_in(&root, 1), Some(41));
        assert_eq!(halts_in(&root, 2), None, "no cpuidle states");
        let _ = std::fs::remove_dir_all(&root);
    }
}
