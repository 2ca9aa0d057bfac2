//! Running `ip`, `ethtool` and `sysctl` inside namespaces, reading and writing sysfs as
//! a namespace sees it, and CPU affinity.
//!
//! sysfs shows the interfaces of the namespace that mounted it, so a file under
//! /sys/class/net is read with `ip netns exec`, which mounts a fresh sysfs for the
//! namespace; entering the namespace with `setns` alone would still show the host's.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::Path;
use std::process::{Command, Output};

use rustix::process::{Pid, Signal};
use rustix::thread::CpuSet;

use crate::TestbedError;

/// The Debian package that provides a program we run.
fn package_of(program: &str) -> String {
    match program {
        "ip" => "iproute2",
        "sysctl" => "procps",
        "sh" => "dash",
        other => other,
    }
    .to_string()
}

/// Runs a program and returns its output whatever its exit status; only a program that
/// cannot be started is an error (naming the package to install).
pub(crate) fn output(program: &str, args: &[&str]) -> Result<Output, TestbedError> {
    Command::new(program)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            ErrorKind::NotFound => TestbedError::MissingTool {
                program: program.to_string(),
                package: package_of(program),
            },
            _ => TestbedError::Failed(format!("cannot run `{program}`: {e}")),
        })
}

/// Runs a program to completion; a non-zero exit is an error quoting the command line
/// and its stderr.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let out = output(program, args)?;
    if !out.status.success() {
        return Err(TestbedError::Failed(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -n NS ARGS`.
pub(crate) fn ip_in(ns: &str, args: &[&str]) -> Result<String, TestbedError> {
    let mut full = vec!["-n", ns];
    full.extend_from_slice(args);
    run("ip", &full)
}

/// `ip netns exec NS PROGRAM ARGS`; a missing PROGRAM is reported as such, not as an
/// `ip` failure.
pub(crate) fn exec_in(ns: &str, program: &str, args: &[&str]) -> Result<String, TestbedError> {
    let mut full = vec!["netns", "exec", ns, program];
    full.extend_from_slice(args);
    let missing = format!("exec of \"{program}\" failed: No such file or directory");
    run("ip", &full).map_err(|e| match e {
        TestbedError::Failed(message) if message.contains(&missing) => TestbedError::MissingTool {
            program: program.to_string(),
            package: package_of(program),
        },
        other => other,
    })
}

/// Fails with [`TestbedError::NotRoot`] unless we are root, and with
/// [`TestbedError::MissingTool`] unless `ip` runs.
pub(crate) fn require_root_and_ip() -> Result<(), TestbedError> {
    if !polld_dev::netns::is_root() {
        return Err(TestbedError::NotRoot);
    }
    run("ip", &["-V"]).map(drop)
}

/// Whether namespace `name` exists (is mounted where `ip netns` keeps them).
pub(crate) fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

/// Reads files (under /sys or /proc/sys) as namespace `ns` sees them, with one process.
/// Files that do not exist are missing from the map.
pub(crate) fn read_files_in(
    ns: &str,
    paths: &[String],
) -> Result<HashMap<String, String>, TestbedError> {
    let mut args = vec!["netns", "exec", ns, "grep", "-H", "."];
    args.extend(paths.iter().map(String::as_str));
    // grep exits 2 when one of the files is missing; the others are still printed.
    let out = output("ip", &args)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut values = HashMap::new();
    for line in stdout.lines() {
        if let Some((path, value)) = paths.iter().find_map(|p| {
            line.strip_prefix(p.as_str())?
                .strip_prefix(':')
                .map(|v| (p, v))
        }) {
            values.insert(path.clone(), value.trim().to_string());
        }
    }
    Ok(values)
}

/// Writes `value` to a sysfs file as namespace `ns` sees it.
pub(crate) fn write_file_in(ns: &str, path: &str, value: &str) -> Result<(), TestbedError> {
    exec_in(
        ns,
        "sh",
        &["-c", "printf '%s\\n' \"$1\" > \"$2\"", "sh", value, path],
    )
    .map(drop)
    .map_err(|e| {
        TestbedError::Failed(format!(
            "cannot write {value} to {path} in namespace {ns}: {e}"
        ))
    })
}

/// The CPUs this process may run on, ascending.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU)
            .filter(|&cpu| set.is_set(cpu))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Checks that `cpu` is one this process may use; `what` names the option for the message.
pub(crate) fn check_cpu(cpu: usize, what: &str) -> Result<(), TestbedError> {
    let allowed = allowed_cpus();
    if allowed.contains(&cpu) {
        return Ok(());
    }
    Err(TestbedError::InvalidCpu(format!(
        "{what} is CPU {cpu}, but this process may run only on CPUs {}: choose one of those",
        cpu_list(&allowed)
    )))
}

/// Restricts thread or process `pid` (0: the caller) to `cpu`, which callers checked with
/// [`check_cpu`].
pub(crate) fn pin(pid: libc::pid_t, cpu: usize) -> std::io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(Pid::from_raw(pid), &set)?)
}

/// Makes task `pid` `SCHED_FIFO` at `priority`.
pub(crate) fn make_fifo(pid: libc::pid_t, priority: i32) -> std::io::Result<()> {
    set_scheduler(pid, (libc::SCHED_FIFO, priority))
}

/// Task `pid`'s scheduling policy and priority.
pub(crate) use polld_dev::sys::scheduler_of;

/// Gives task `pid` a policy and priority, as [`scheduler_of`] reads them.
pub(crate) fn set_scheduler(
    pid: libc::pid_t,
    (policy, priority): (libc::c_int, i32),
) -> std::io::Result<()> {
    polld_dev::sys::set_scheduler(pid, policy, priority)
}

/// Sends `signal` to process `pid`, one we started; a process already gone is no error
/// to report.
pub(crate) fn signal(pid: u32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// The CPUs task `pid` may run on, as the kernel writes them (`1`, `0-1`).
pub(crate) fn cpus_of(pid: u32) -> Option<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_string())
}

/// `0, 1, 3` for a list of CPUs.
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
    list.join(", ")
}

/// The sysfs CPU bitmap with only `cpu` set, as `rps_cpus` takes it: hex words of 32
/// CPUs, most significant first, separated by commas (`2`, `1,00000000` for CPU 32).
pub(crate) fn cpu_mask(cpu: usize) -> String {
    let mut mask = format!("{:x}", 1u32 << (cpu % 32));
    for _ in 0..cpu / 32 {
        mask.push_str(",00000000");
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_are_sysfs_bitmaps() {
        assert_eq!(cpu_mask(0), "1");
        assert_eq!(cpu_mask(1), "2");
        assert_eq!(cpu_mask(31), "80000000");
        assert_eq!(cpu_mask(32), "1,00000000");
        assert_eq!(cpu_mask(65), "2,00000000,00000000");
    }

    #[test]
    fn this_process_may_run_somewhere_and_not_on_a_huge_cpu() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        check_cpu(allowed[0], "--gen-cpu").unwrap();
        let err = check_cpu(100_000, "--fwd-cpu").unwrap_err().to_string();
        assert!(err.contains("--fwd-cpu is CPU 100000"), "{err}");
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let err = run("polld-no-such-program", &[]).unwrap_err();
        assert!(matches!(err, TestbedError::MissingTool { .. }), "{err}");
    }

    #[test]
    fn a_program_missing_inside_a_namespace_is_told_apart_from_its_failure() {
        if !polld_dev::netns::is_root() {
            eprintln!("skipped: needs root for a namespace");
            return;
        }
        let ns = polld_dev::netns::Netns::create("tb-exec").unwrap();
        let missing = exec_in(ns.name(), "polld-no-such-program", &[]).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "`polld-no-such-program` is not installed: install the polld-no-such-program \
             package (e.g. `apt-get install polld-no-such-program`)"
        );
        let failed = write_file_in(ns.name(), "/sys/class/net/nope/threaded", "1").unwrap_err();
        assert!(matches!(failed, TestbedError::Failed(_)), "{failed}");
        assert!(
            failed.to_string().contains("/sys/class/net/nope/threaded"),
            "{failed}"
        );
    }
}
