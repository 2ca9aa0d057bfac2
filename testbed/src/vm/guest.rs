//! polld and the kernel in a running guest, through its agent: start and stop polld on
//! eth0 and eth1, change its mode, ask it whether the receive work is in its budget, and
//! read the guest's interrupt, interface and CPU counters. What the smoke test and
//! `polld demo --devices vm` share.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use polld_core::dataplane::DROPS;
use serde_json::Value;

use super::exec;
use crate::{polld_config, Layout, PolldSetup, TestbedError};

/// polld's control socket in the guest.
pub const POLLD_SOCKET: &str = "/run/polld.sock";

/// The guest's receive interrupt of eth0's queue 0 (eth0 is the first virtio device).
pub const ETH0_RX_IRQ: &str = "virtio0-input.0";

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Runs `script` with `sh -c` in the guest, `stdin` as its input; its stdout, or an
/// error quoting its stderr.
pub fn sh(prefix: &str, script: &str, stdin: &str) -> Result<String, TestbedError> {
    let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
    let response = exec(prefix, &argv, stdin, Duration::from_secs(60))?;
    if response.exit_code() != 0 {
        return Err(failed(format!(
            "`{script}` in the guest exited with {}: {}{}",
            response.exit_code(),
            response.stderr.trim(),
            response.error.as_deref().unwrap_or("")
        )));
    }
    Ok(response.stdout)
}

/// The count of interrupt `name` (`virtio0-input.0`) in `/proc/interrupts` text, summed
/// over the CPUs.
pub fn interrupt_count(proc_interrupts: &str, name: &str) -> Option<u64> {
    let line = proc_interrupts
        .lines()
        .find(|l| l.split_whitespace().last() == Some(name))?;
    Some(
        line.split_whitespace()
            .skip(1)
            .map_while(|field| field.parse::<u64>().ok())
            .sum(),
    )
}

/// The guest's count of interrupt `name`.
pub fn interrupts(prefix: &str, name: &str) -> Result<u64, TestbedError> {
    let text = sh(prefix, "cat /proc/interrupts", "")?;
    interrupt_count(&text, name)
        .ok_or_else(|| failed(format!("no {name} in the guest's /proc/interrupts")))
}

/// The guest's `/proc/net/dev` counters of `iface`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetDevCounters {
    pub rx_packets: u64,
    pub rx_drop: u64,
    pub tx_packets: u64,
    pub tx_drop: u64,
}

pub fn net_dev(prefix: &str, iface: &str) -> Result<NetDevCounters, TestbedError> {
    let text = sh(prefix, "cat /proc/net/dev", "")?;
    let fields: Vec<u64> = text
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{iface}:")))
        .ok_or_else(|| failed(format!("no {iface} in the guest's /proc/net/dev")))?
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    if fields.len() < 12 {
        return Err(failed(format!("short /proc/net/dev line for {iface}")));
    }
    Ok(NetDevCounters {
        rx_packets: fields[1],
        rx_drop: fields[3],
        tx_packets: fields[9],
        tx_drop: fields[11],
    })
}

/// The pid of the guest's `ksoftirqd/0`, the thread its one vCPU's deferred softirqs run in.
pub fn ksoftirqd_pid(prefix: &str) -> Result<u32, TestbedError> {
    let text = sh(
        prefix,
        "grep -lx ksoftirqd/0 /proc/[0-9]*/comm 2>/dev/null; true",
        "",
    )?;
    text.trim()
        .strip_prefix("/proc/")
        .and_then(|rest| rest.strip_suffix("/comm"))
        .and_then(|pid| pid.parse().ok())
        .ok_or_else(|| failed(format!("no ksoftirqd/0 in the guest: {text:?}")))
}

/// Where the guest runs the device work its interrupts leave over (`ksoftirqd/0`: NAPI's
/// receive under load, transmit completions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceWork {
    /// Above every thread, polld's poll thread (`SCHED_FIFO` 50) included: `ksoftirqd/0`
    /// at `SCHED_FIFO` [`INTERRUPT_PRIORITY`], as FreeBSD runs its interrupt handlers and
    /// as Linux runs softirqs on the way out of an interrupt. The seeds' interrupt mode.
    InterruptPriority,
    /// Linux's default: `ksoftirqd/0` at `SCHED_OTHER`, where CFS gives it a fair share
    /// beside the other runnable threads. This is how NAPI keeps a flood from starving
    /// everything else.
    Fair,
}

impl DeviceWork {
    /// How the tables name it.
    pub fn name(self) -> &'static str {
        match self {
            DeviceWork::InterruptPriority => "interrupt priority",
            DeviceWork::Fair => "fair share (Linux default)",
        }
    }
}

/// `ksoftirqd/0`'s `SCHED_FIFO` priority at [`DeviceWork::InterruptPriority`]: one above
/// polld's poll thread.
pub const INTERRUPT_PRIORITY: u32 = 51;

/// Runs the guest's `ksoftirqd/0` as `work` says, with the guest's `chrt`.
pub fn set_device_work(prefix: &str, work: DeviceWork) -> Result<(), TestbedError> {
    let pid = ksoftirqd_pid(prefix)?;
    let policy = match work {
        DeviceWork::InterruptPriority => format!("-f -p {INTERRUPT_PRIORITY}"),
        DeviceWork::Fair => "-o -p 0".to_string(),
    };
    sh(
        prefix,
        &format!("{} {policy} {pid}", super::image::CHRT),
        "",
    )
    .map(drop)
}

/// Starts `polld run --json` in the guest on eth0 and eth1 (`setup.socket` is
/// [`POLLD_SOCKET`] whatever it says), its output in /tmp/polld.out and /tmp/polld.err;
/// returns its pid once its control socket exists.
pub fn start_polld(layout: &Layout, setup: &PolldSetup) -> Result<u32, TestbedError> {
    let prefix = &layout.prefix;
    let setup = PolldSetup {
        socket: Path::new(POLLD_SOCKET),
        ..setup.clone()
    };
    sh(
        prefix,
        "cat > /tmp/polld.toml",
        &polld_config(layout, &setup),
    )?;
    let pid = sh(
        prefix,
        &format!(
            "rm -f {POLLD_SOCKET}; polld run --json -c /tmp/polld.toml >/tmp/polld.out \
             2>/tmp/polld.err & echo $!; \
             for i in $(seq 300); do [ -S {POLLD_SOCKET} ] && exit 0; sleep 0.1; done; \
             cat /tmp/polld.err >&2; exit 1"
        ),
        "",
    )?;
    pid.trim()
        .parse()
        .map_err(|_| failed(format!("starting polld in the guest printed {pid:?}")))
}

/// Stops polld (`pid`) with SIGINT; returns its final report (`polld run --json`).
pub fn stop_polld(prefix: &str, pid: u32) -> Result<Value, TestbedError> {
    sh(
        prefix,
        &format!(
            "kill -INT {pid}; for i in $(seq 100); do [ -d /proc/{pid} ] || exit 0; \
             sleep 0.1; done; exit 1"
        ),
        "",
    )?;
    let out = sh(prefix, "cat /tmp/polld.out", "")?;
    serde_json::from_str(&out)
        .map_err(|e| failed(format!("polld in the guest printed {out:?}: {e}")))
}

/// `polld ctl NAME=VALUE` in the guest.
pub fn ctl(prefix: &str, assignment: &str) -> Result<(), TestbedError> {
    sh(
        prefix,
        &format!("polld ctl --socket {POLLD_SOCKET} {assignment}"),
        "",
    )
    .map(drop)
}

/// `polld ifconfig IFACE mode MODE` in the guest, for eth0 and eth1.
pub fn set_mode(prefix: &str, mode: &str) -> Result<(), TestbedError> {
    for iface in ["eth0", "eth1"] {
        sh(
            prefix,
            &format!("polld ifconfig --socket {POLLD_SOCKET} {iface} mode {mode}"),
            "",
        )?;
    }
    Ok(())
}

/// What polld says of `iface`'s receive work (`polld ifconfig --json`): whether it is in
/// its budget, and the whole `rx_work` object.
pub fn rx_work(prefix: &str, iface: &str) -> Result<(bool, Value), TestbedError> {
    let text = sh(
        prefix,
        &format!("polld ifconfig --json --socket {POLLD_SOCKET} {iface}"),
        "",
    )?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| failed(format!("polld ifconfig --json printed {text:?}: {e}")))?;
    let rx_work = value["rx_work"].clone();
    Ok((rx_work["in_budget"].as_bool() == Some(true), rx_work))
}

/// `polld gen --json` at `rate` (`unlimited`, `1000`) from gen's tap0 through the guest to
/// the unowned destination behind sink (tap1 receives and drops what polld forwards,
/// nobody answers); add `--count` or `--duration`.
pub fn gen_through_guest(polld: &Path, layout: &Layout, rate: &str) -> Command {
    let mut command = Command::new(polld);
    command
        .args(["gen", &layout.veth0.name, "--netns", &layout.gen_ns])
        .args(["--json", "--rate", rate])
        .args([
            "--src-mac",
            &layout.veth0.mac,
            "--dst-mac",
            &layout.veth1.mac,
        ])
        .args(["--src-ip", &layout.veth0.addr.to_string()])
        .args(["--dst-ip", &layout.unowned_dst.to_string()]);
    command
}

/// The sum of polld's `drops.*` counters over its interfaces in a final report.
pub fn polld_drops(report: &Value) -> u64 {
    report
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|iface| iface["counters"].as_array().into_iter().flatten())
        .filter(|c| c[0].as_str().is_some_and(|n| DROPS.key(n).is_some()))
        .filter_map(|c| c[1].as_u64())
        .sum()
}

/// The guest at one moment: its clock, an interrupt count and tasks' CPU times.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The guest's uptime, s.
    pub uptime: f64,
    pub interrupts: u64,
    /// Each task's CPU time.
    pub ticks: Vec<TaskTicks>,
    /// The ticks the vCPU accounted to anything (the `cpu` line of `/proc/stat`: user,
    /// nice, system, idle, iowait, irq, softirq, steal), the measure of its time the
    /// tasks' ticks are shares of.
    pub cpu_ticks: u64,
    /// The time the vCPU idled, s (`/proc/uptime`'s second field: measured, not sampled
    /// at ticks, which a guest under software emulation misses).
    pub idle: f64,
}

impl Sample {
    /// Task `i`'s ticks that `of` counts since `before`, percent of the ticks the vCPU
    /// accounted meanwhile (0 for a task not sampled).
    pub fn percent_since(&self, before: &Sample, i: usize, of: fn(TaskTicks) -> u64) -> f64 {
        let cpu_ticks = self.cpu_ticks.saturating_sub(before.cpu_ticks).max(1) as f64;
        match (self.ticks.get(i), before.ticks.get(i)) {
            (Some(&a), Some(&b)) => 100.0 * of(a).saturating_sub(of(b)) as f64 / cpu_ticks,
            _ => 0.0,
        }
    }
}

/// A task's CPU time in clock ticks (USER_HZ, 100 a second), from its `/proc/PID/stat`.
///
/// The 6.1 guest accounts time at its ticks, without IRQ_TIME_ACCOUNTING: a tick that
/// comes upon an interrupt or a softirq run on the way out of one counts as system time of
/// whichever task was running. A task that makes no system calls (the competitor, a shell
/// loop) got only its user time; its system time is the device work that ran on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskTicks {
    pub user: u64,
    pub system: u64,
}

impl TaskTicks {
    pub fn total(self) -> u64 {
        self.user + self.system
    }
}

/// Samples the guest with one command ([`sampler`]): its uptime, interrupt `irq` and the
/// CPU times of `pids` from their own `/proc/PID/stat`.
pub fn sample(prefix: &str, irq: &str, pids: &[u32]) -> Result<Sample, TestbedError> {
    parse_sample(&sh(prefix, &sampler(&sample_command(pids)), "")?, irq, pids)
}

/// Samples the guest before and after `secs` of its own sleep, in one command
/// ([`sampler`]): the window holds no command the host sends in (under software emulation
/// starting one costs the vCPU a few tenths of a second, a tenth of a 3-s window).
pub fn window(
    prefix: &str,
    irq: &str,
    pids: &[u32],
    secs: f64,
) -> Result<(Sample, Sample), TestbedError> {
    const MARK: &str = "--- polld testbed: window ---";
    let cat = sample_command(pids);
    let text = sh(
        prefix,
        &sampler(&format!("{cat}; sleep {secs}; echo '{MARK}'; {cat}")),
        "",
    )?;
    let (before, after) = text
        .split_once(MARK)
        .ok_or_else(|| failed(format!("the guest's window printed no mark: {text:?}")))?;
    Ok((
        parse_sample(before, irq, pids)?,
        parse_sample(after, irq, pids)?,
    ))
}

/// `script` (no double quotes in it) as a command at `SCHED_FIFO` 99, above everything a
/// sample measures, so that it reads its files at once: at the user's priority, behind the
/// device work at interrupt priority under a flood, a sampler reads the clock and the
/// tasks' times apart, and a task's share of the window comes out above 100 %.
fn sampler(script: &str) -> String {
    format!("{} -f 99 sh -c \"{script}\"", super::image::CHRT)
}

/// One `cat` of the guest's uptime, interrupts and `pids`' stat files.
fn sample_command(pids: &[u32]) -> String {
    let mut command = "head -1 /proc/stat; cat /proc/uptime /proc/interrupts".to_string();
    for pid in pids {
        command += &format!(" /proc/{pid}/stat");
    }
    command
}

fn parse_sample(text: &str, irq: &str, pids: &[u32]) -> Result<Sample, TestbedError> {
    let (stat, text) = text
        .trim_start()
        .split_once('\n')
        .filter(|(line, _)| line.starts_with("cpu "))
        .ok_or_else(|| failed("the guest's /proc/stat has no cpu line".into()))?;
    let cpu_ticks = stat
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    let mut clock = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    let (Some(Some(uptime)), Some(Some(idle))) = (clock.next(), clock.next()) else {
        return Err(failed("the guest's /proc/uptime is unreadable".into()));
    };
    let interrupts = interrupt_count(text, irq)
        .ok_or_else(|| failed(format!("no {irq} in the guest's /proc/interrupts")))?;
    let ticks = pids
        .iter()
        .map(|pid| {
            let prefix = format!("{pid} (");
            text.lines()
                .find(|l| l.starts_with(&prefix))
                .and_then(stat_ticks)
                .ok_or_else(|| failed(format!("task {pid} is gone from the guest")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Sample {
        uptime,
        interrupts,
        ticks,
        cpu_ticks,
        idle,
    })
}

/// utime and stime of a `/proc/PID/stat` line (fields 14 and 15, after the command name).
fn stat_ticks(line: &str) -> Option<TaskTicks> {
    let rest = &line[line.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14, stime 15.
    Some(TaskTicks {
        user: fields.get(11)?.parse().ok()?,
        system: fields.get(12)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_reads_the_vcpus_accounted_ticks_its_clock_and_each_tasks_time() {
        let text = "\ncpu  300 0 200 10 0 0 5 0 0 0\n120.50 3.25\n \
                    25:        150   PCI-MSI 32769-edge      virtio0-input.0\n\
                    132 (polld run) S 1 132 0 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 2 0 900\n";
        let sample = parse_sample(text, ETH0_RX_IRQ, &[132]).unwrap();
        assert_eq!(sample.cpu_ticks, 515);
        assert_eq!(
            (sample.uptime, sample.idle, sample.interrupts),
            (120.5, 3.25, 150)
        );
        assert_eq!(
            sample.ticks,
            vec![TaskTicks {
                user: 250,
                system: 75
            }]
        );
        assert!(parse_sample("120.50 3.25\n", ETH0_RX_IRQ, &[]).is_err());
    }

    #[test]
    fn a_tasks_share_is_of_the_ticks_the_vcpu_accounted_between_two_samples() {
        let at = |cpu_ticks, user, system| Sample {
            uptime: 0.0,
            interrupts: 0,
            ticks: vec![TaskTicks { user, system }],
            cpu_ticks,
            idle: 0.0,
        };
        let (before, after) = (at(1000, 10, 5), at(1400, 110, 105));
        assert_eq!(after.percent_since(&before, 0, TaskTicks::total), 50.0);
        assert_eq!(after.percent_since(&before, 0, |t| t.user), 25.0);
        assert_eq!(after.percent_since(&before, 1, TaskTicks::total), 0.0);
    }

    #[test]
    fn interrupts_are_summed_over_cpus_by_exact_name() {
        let text = " 25:        120         30   PCI-MSI 32769-edge      virtio0-input.0\n \
                    35:          7          1   PCI-MSI 32769-edge      virtio10-input.0\n";
        assert_eq!(interrupt_count(text, "virtio0-input.0"), Some(150));
        assert_eq!(interrupt_count(text, "virtio1-input.0"), None);
    }

    #[test]
    fn a_stat_line_gives_user_and_system_ticks_even_with_spaces_in_the_name() {
        let line = "132 (polld run) S 1 132 0 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 2 0 900";
        let ticks = stat_ticks(line).unwrap();
        assert_eq!((ticks.user, ticks.system, ticks.total()), (250, 75, 325));
    }
}
