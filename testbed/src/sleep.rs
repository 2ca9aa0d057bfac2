//! Seed 003's first experiment: how long a sleep of 1 µs (`usleep(1)`) and of 1 ns
//! (`nanosleep(1)`) really lasts, and so how many frames arrive at 10 Gbit/s line rate
//! while a passive poller sleeps between two empty reads.
//!
//! A thread of its own sleeps [`SleepArgs::samples`] times in each of three settings: the
//! default timer slack (the kernel lets a timer of a `SCHED_OTHER` thread expire up to
//! `timer_slack_ns` late, 50 µs by default, to batch wakeups), a slack of 1 ns
//! (`PR_SET_TIMERSLACK`), and `SCHED_FIFO` (whose timers the kernel never delays by a
//! slack). Each sleep is timed on the monotonic clock around the system call. The
//! seed's `sleep.c` timed the mean of its loop; the table gives the mean beside the
//! median and the 99th percentile.

use std::num::NonZeroU64;
use std::time::Instant;

use rustix::thread::{nanosleep, set_current_timer_slack, Timespec};
use serde::Serialize;

/// Ethernet's smallest frame on the wire at 10 Gbit/s: 64 bytes, preamble and gap, 84
/// bytes, every 67.2 ns.
pub const LINE_RATE_10G_NS: f64 = 84.0 * 8.0 / 10.0;

/// The seed's figures (PF_RING's `sleep.c`): the mean of each call, µs.
pub const SEED_USLEEP_US: f64 = 56.248760;
pub const SEED_NANOSLEEP_US: f64 = 65.165280;

/// The thread's setting while it sleeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    /// `SCHED_OTHER` with the timer slack it inherited.
    DefaultSlack,
    /// `SCHED_OTHER` with `PR_SET_TIMERSLACK` 1 ns.
    Slack1ns,
    /// `SCHED_FIFO` priority 1.
    Fifo,
}

impl Setting {
    pub const ALL: [Setting; 3] = [Setting::DefaultSlack, Setting::Slack1ns, Setting::Fifo];

    pub fn label(self) -> &'static str {
        match self {
            Setting::DefaultSlack => "default timer slack",
            Setting::Slack1ns => "timer slack 1 ns",
            Setting::Fifo => "SCHED_FIFO",
        }
    }
}

/// The call timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// `usleep(1)`: glibc's usleep is `nanosleep` of 1000 ns.
    Usleep1,
    /// `nanosleep(1)`: 1 ns.
    Nanosleep1,
}

impl Call {
    pub const ALL: [Call; 2] = [Call::Usleep1, Call::Nanosleep1];

    pub fn label(self) -> &'static str {
        match self {
            Call::Usleep1 => "usleep(1)",
            Call::Nanosleep1 => "nanosleep(1)",
        }
    }

    fn request_ns(self) -> i64 {
        match self {
            Call::Usleep1 => 1_000,
            Call::Nanosleep1 => 1,
        }
    }

    /// The seed's mean for this call, µs.
    pub fn seed_us(self) -> f64 {
        match self {
            Call::Usleep1 => SEED_USLEEP_US,
            Call::Nanosleep1 => SEED_NANOSLEEP_US,
        }
    }
}

/// How long one call lasted, over its samples, µs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SleepRow {
    pub setting: Setting,
    pub call: Call,
    /// The thread's timer slack while it slept, ns (`PR_GET_TIMERSLACK`).
    pub slack_ns: u64,
    pub samples: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Frames that arrive at 10 Gbit/s line rate (64-byte frames) during the mean sleep.
    pub frames_at_10g: f64,
}

/// Times `samples` sleeps of each call in each setting, on a thread of its own (its
/// scheduling and slack die with it). A setting the process may not take (SCHED_FIFO
/// without CAP_SYS_NICE) is an error naming it.
pub fn measure(samples: usize) -> Result<Vec<SleepRow>, String> {
    let samples = samples.max(1);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut rows = Vec::new();
            for setting in Setting::ALL {
                enter(setting)?;
                let slack_ns = rustix::thread::current_timer_slack()
                    .map_err(|e| format!("PR_GET_TIMERSLACK: {e}"))?;
                for call in Call::ALL {
                    let mut us = time_sleeps(call, samples);
                    rows.push(row(setting, call, slack_ns, &mut us));
                }
            }
            Ok(rows)
        })
        .join()
        .map_err(|_| "the sleeping thread panicked".to_string())?
    })
}

/// Puts the calling thread in `setting`.
fn enter(setting: Setting) -> Result<(), String> {
    match setting {
        Setting::DefaultSlack => Ok(()),
        Setting::Slack1ns => set_current_timer_slack(NonZeroU64::new(1))
            .map_err(|e| format!("PR_SET_TIMERSLACK 1: {e}")),
        Setting::Fifo => polld_dev::sys::set_scheduler(0, libc::SCHED_FIFO, 1).map_err(|e| {
            format!("SCHED_FIFO for the sleep test: {e} (run as root or with CAP_SYS_NICE)")
        }),
    }
}

/// `samples` durations of `call`, µs.
fn time_sleeps(call: Call, samples: usize) -> Vec<f64> {
    let request = Timespec {
        tv_sec: 0,
        tv_nsec: call.request_ns(),
    };
    (0..samples)
        .map(|_| {
            let start = Instant::now();
            let _ = nanosleep(&request);
            start.elapsed().as_nanos() as f64 / 1e3
        })
        .collect()
}

fn row(setting: Setting, call: Call, slack_ns: u64, us: &mut [f64]) -> SleepRow {
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    let mean_us = us.iter().sum::<f64>() / us.len() as f64;
    SleepRow {
        setting,
        call,
        slack_ns,
        samples: us.len(),
        mean_us,
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
        frames_at_10g: mean_us * 1e3 / LINE_RATE_10G_NS,
    }
}

/// The table, beside the seed's means.
pub fn render(rows: &[SleepRow]) -> String {
    let mut out = format!(
        "{:<14} {:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11} | {:>9}\n",
        "call", "setting", "slack", "mean", "p50", "p99", "max", "10G frames", "seed mean"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<14} {:<20} {:>6} ns {:>6.1} us {:>6.1} us {:>6.1} us {:>6.1} us {:>11.0} | {:>6.1} us\n",
            r.call.label(),
            r.setting.label(),
            r.slack_ns,
            r.mean_us,
            r.p50_us,
            r.p99_us,
            r.max_us,
            r.frames_at_10g,
            r.call.seed_us(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_call_in_each_setting_is_timed_and_no_sleep_is_shorter_than_asked() {
        let rows = measure(20).unwrap();
        assert_eq!(rows.len(), Setting::ALL.len() * Call::ALL.len());
        for r in &rows {
            assert_eq!(r.samples, 20);
            assert!(r.p50_us <= r.p99_us && r.p99_us <= r.max_us, "{r:?}");
            let asked_us = r.call.request_ns() as f64 / 1e3;
            assert!(r.p50_us >= asked_us, "{r:?}");
        }
        let slack = |s: Setting| rows.iter().find(|r| r.setting == s).unwrap().slack_ns;
        assert_eq!(slack(Setting::Slack1ns), 1);
        let table = render(&rows);
        assert!(
            table.contains("usleep(1)") && table.contains("SCHED_FIFO"),
            "{table}"
        );
    }

    #[test]
    fn frames_at_line_rate_follow_the_mean() {
        let mut us = vec![60.0, 60.0];
        let r = row(Setting::DefaultSlack, Call::Usleep1, 50_000, &mut us);
        // The seed: 60 µs at a frame every 67 ns is about 895 frames.
        assert_eq!(r.frames_at_10g.round(), 893.0);
    }
}
