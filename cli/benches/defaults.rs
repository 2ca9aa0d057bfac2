//! What `polld run` does with no `[knobs]` (root): the promise and the forwarding rate of
//! the defaults, on a TAP testbed of its own, every figure against a baseline measured in
//! the same run. polld runs realtime on CPU1 with only `kern.polling.user_frac` set.
//! - Share: under an unlimited flood from `polld gen` on CPU0, with a CPU-bound competitor
//!   pinned to CPU1, polld in interrupt mode (the baseline), then polling at user_frac 10,
//!   50 and 90. The promise: the competitor gets user_frac ± 5 points of CPU1 (from its own
//!   `/proc` CPU time); and polling at user_frac 10 forwards at least 0.8x what interrupt
//!   mode forwarded.
//! - Latency: 64-byte frames at `--rate` (10k) through polld, one-way to `polld sink
//!   --backend af_xdp` on tap1, in interrupt mode (the baseline) and polling. The promise:
//!   polling's p99 within 1/hz + 100 µs (a tick, and what the path takes).
//!
//! Then the same trials on the FreeBSD profile (`profile = "freebsd"`, `kern_poll.c`'s
//! defaults), for comparison in the same run (`--profiles polld` skips them). Each of the
//! defaults' lines ends `kept` or `NOT kept`; the bench exits 1 if conservation failed in
//! any run, not on a figure (one window on a shared machine can be hit by unrelated work).
//!
//! `--only share` or `--only latency` runs one part.
//!
//! `cargo bench -p polld --bench defaults [-- --prefix dflt] [--window 3] [--rate 10k] [--duration 5] [--profiles polld,freebsd] [--only share|latency]`

mod common;

use std::path::Path;

use common::{arg, is_root, measure_or_exit, testbed};
use polld_core::knobs::PROFILE_KEY;
use polld_core::{Knobs, Profile};
use polld_testbed::demo::{DemoRow, Forwarder, Load, SinkLatency, Trial};
use polld_testbed::share::{measure_share, ShareRow, ShareTrial};
use polld_testbed::{Devices, IpFamily, Testbed, TestbedError, UpOptions};

/// The user_frac values the promise is checked at.
const USER_FRACS: [u32; 3] = [10, 50, 90];
/// How far from user_frac the competitor's share may be, in points.
const SHARE_SLACK: f64 = 5.0;
/// Polling at user_frac 10 forwards at least this fraction of interrupt mode's rate.
const MIN_FORWARD_RATIO: f64 = 0.8;
/// What the path may add to polling's tick in the latency bound, µs.
const PATH_US: f64 = 100.0;

/// What the run shares.
struct Bench<'a> {
    tb: &'a Testbed,
    options: &'a UpOptions,
    polld: &'a Path,
    dir: &'a Path,
    window: f64,
    rate: &'a str,
    duration: f64,
    /// Which parts run.
    parts: Parts,
}

/// The bench's parts (`--only`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Both,
    Share,
    Latency,
}

/// One profile's figures.
struct Measured {
    profile: Profile,
    /// Interrupt mode, then polling at each of [`USER_FRACS`].
    shares: Vec<ShareRow>,
    /// Interrupt mode, then polling.
    latencies: Vec<DemoRow>,
}

impl Bench<'_> {
    fn fail(&self, what: &str, e: TestbedError) -> ! {
        eprintln!("defaults bench: {what}: {e}");
        let _ = std::fs::remove_dir_all(self.dir);
        if let Err(e) = polld_testbed::down(self.tb.layout()) {
            eprintln!("defaults bench: tearing down the testbed failed: {e}");
        }
        std::process::exit(1);
    }

    fn measure(&self, profile: Profile) -> Measured {
        let name = profile.name();
        let knobs: &[(&str, &str)] = &[(PROFILE_KEY, name)];
        let cpus = (self.options.cpus.gen, self.options.cpus.fwd);
        let floods = std::iter::once(("interrupt", 50)).chain(USER_FRACS.map(|uf| ("polling", uf)));
        let shares = floods
            .filter(|_| self.parts != Parts::Latency)
            .map(|(mode, user_frac)| {
                eprintln!(
                    "defaults bench: profile {name}: {mode}, user_frac {user_frac}, flood and a competitor on CPU{}, {} s ...",
                    cpus.1, self.window
                );
                let trial = ShareTrial {
                    knobs,
                    ..ShareTrial::flood(mode, user_frac, 1.0, self.window)
                };
                measure_share(self.tb, self.polld, self.dir, cpus, &trial).unwrap_or_else(|e| {
                    self.fail(&format!("{name} {mode} user_frac {user_frac}"), e)
                })
            })
            .collect();
        let latencies = ["interrupt", "polling"]
            .into_iter()
            .filter(|_| self.parts != Parts::Share)
            .map(|mode| {
                let trial = Trial {
                    label: format!("{mode}, profile {name}"),
                    forwarder: Forwarder::Polld {
                        backend: "tap",
                        mode,
                        knobs,
                    },
                    load: Load::Frames {
                        rate: self.rate,
                        sink: true,
                        family: IpFamily::Ipv4,
                    },
                    duration: self.duration,
                };
                measure_or_exit(
                    "defaults",
                    self.tb,
                    self.options,
                    self.polld,
                    self.dir,
                    &trial,
                )
            })
            .collect();
        Measured {
            profile,
            shares,
            latencies,
        }
    }
}

fn verdict(judged: bool, kept: bool) -> &'static str {
    match (judged, kept) {
        (false, _) => "",
        (true, true) => ": kept",
        (true, false) => ": NOT kept",
    }
}

/// Prints one profile's figures; the promise is judged for polld's defaults only.
fn print(m: &Measured, hz: u32, b: &Bench) {
    let judged = m.profile == Profile::default();
    println!(
        "\nprofile {}{}",
        m.profile.name(),
        if judged { " (the defaults)" } else { "" }
    );
    if !m.shares.is_empty() {
        print_shares(&m.shares, judged, b);
    }
    if !m.latencies.is_empty() {
        print_latencies(&m.latencies, judged, hz, b);
    }
}

/// The share part: interrupt mode, then polling at each of [`USER_FRACS`].
fn print_shares(shares: &[ShareRow], judged: bool, b: &Bench) {
    println!(
        "flood of 60-byte frames, a CPU-bound competitor on CPU{}, {} s windows",
        b.options.cpus.fwd, b.window
    );
    println!(
        "{:<22} {:>11} {:>12} {:>10} {:>11}",
        "polld", "offered/s", "delivered/s", "polld CPU", "competitor"
    );
    for r in shares {
        println!(
            "{:<22} {:>11.0} {:>12.0} {:>9.1}% {:>10.1}%",
            format!("{}, user_frac {}", r.mode, r.user_frac),
            r.offered_pps,
            r.delivered_pps,
            r.polld_cpu_percent,
            r.competitor_percent
        );
    }
    let interrupt = &shares[0];
    for r in &shares[1..] {
        let off = r.competitor_percent - f64::from(r.user_frac);
        println!(
            "share at user_frac {}: competitor {:.1} % ({off:+.1} points){}",
            r.user_frac,
            r.competitor_percent,
            verdict(judged, off.abs() <= SHARE_SLACK)
        );
    }
    let polling_10 = &shares[1];
    let ratio = polling_10.delivered_pps / interrupt.delivered_pps.max(1.0);
    println!(
        "forwarding at user_frac 10: {:.0}/s polling against {:.0}/s in interrupt mode = {ratio:.2}x (at least {MIN_FORWARD_RATIO}x){}",
        polling_10.delivered_pps,
        interrupt.delivered_pps,
        verdict(judged, ratio >= MIN_FORWARD_RATIO)
    );
}

/// The latency part: interrupt mode, then polling, with what polling's tick added.
fn print_latencies(latencies: &[DemoRow], judged: bool, hz: u32, b: &Bench) {
    println!(
        "one-way latency at {}/s, 64-byte frames, to polld sink (af_xdp) on tap1, {} s each:",
        b.rate, b.duration
    );
    for r in latencies {
        let l = r.latency;
        let us = |f: fn(&SinkLatency) -> f64| {
            l.as_ref()
                .map_or("-".to_string(), |l| format!("{:.0}", f(l)))
        };
        println!(
            "{:<28} delivered {:>7.0}/s lost {:>5} p50 {:>6} µs p99 {:>6} µs max {:>6} µs",
            r.mode,
            r.delivered_pps,
            l.map_or("-".to_string(), |l| l.lost.to_string()),
            us(|l| l.p50_us),
            us(|l| l.p99_us),
            us(|l| l.max_us)
        );
    }
    let polling = &latencies[1];
    if let Some(t) = polling.tick_lateness {
        println!(
            "polling's ticks: woken late by p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs ({} wakeups since start); in the run {} cycles, {} of them at looks between ticks, {} lost polls, {} waited",
            t.p50_ns as f64 / 1e3,
            t.p99_ns as f64 / 1e3,
            t.max_ns as f64 / 1e3,
            t.wakeups,
            polling.polld_delta("kern.polling.cycles"),
            polling.polld_delta("kern.polling.look_cycles"),
            polling.polld_delta("kern.polling.lost_polls"),
            polling.polld_delta("kern.polling.waited_polls"),
        );
    }
    let bound_us = 1e6 / f64::from(hz) + PATH_US;
    let p99 = |r: &DemoRow| r.latency.map(|l| l.p99_us);
    let polling_p99 = p99(polling);
    println!(
        "polling p99 {} µs (interrupt mode's {} µs in the same run) against 1/hz + {PATH_US:.0} µs = {bound_us:.0} µs{}",
        polling_p99.map_or("-".to_string(), |p| format!("{p:.0}")),
        p99(&latencies[0]).map_or("-".to_string(), |p| format!("{p:.0}")),
        verdict(judged, polling_p99.is_some_and(|p| p <= bound_us))
    );
}

fn main() {
    if !is_root("defaults") {
        return;
    }
    let profiles: Vec<Profile> = arg::<String>("--profiles")
        .unwrap_or_else(|| "polld,freebsd".to_string())
        .split(',')
        .map(|name| {
            Profile::named(name.trim()).unwrap_or_else(|| {
                eprintln!("defaults bench: --profiles: no profile {name:?} (polld, freebsd)");
                std::process::exit(2);
            })
        })
        .collect();
    let rate: String = arg("--rate").unwrap_or_else(|| "10k".to_string());
    let load_before = polld_testbed::load_average();
    let options = UpOptions::default();
    let tb = testbed("defaults", Devices::Tap, &options);
    let dir = std::env::temp_dir().join(format!("polld-defaults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bench = Bench {
        tb: &tb,
        options: &options,
        polld: Path::new(env!("CARGO_BIN_EXE_polld")),
        dir: &dir,
        window: arg("--window").unwrap_or(3.0),
        rate: &rate,
        duration: arg("--duration").unwrap_or(5.0),
        parts: match arg::<String>("--only").as_deref() {
            None => Parts::Both,
            Some("share") => Parts::Share,
            Some("latency") => Parts::Latency,
            Some(other) => {
                eprintln!("defaults bench: --only: no part {other:?} (share, latency)");
                std::process::exit(2);
            }
        },
    };
    let measured: Vec<Measured> = profiles.iter().map(|&p| bench.measure(p)).collect();
    let _ = std::fs::remove_dir_all(&dir);

    let hz = Knobs::default().hz;
    println!(
        "\nTAP testbed: polld realtime on CPU{}, polld gen on CPU{}, kern.polling.hz {hz}, [knobs] the profile and user_frac only",
        options.cpus.fwd, options.cpus.gen
    );
    // Other work on the CPUs takes from the competitor's share and from gen's flood: say
    // how much there was.
    println!(
        "kernel {}, {} CPUs; load average (1 min) {load_before} at the start, {} at the end",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or("?".into(), |k| k.trim().to_string()),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        polld_testbed::load_average()
    );
    for m in &measured {
        print(m, hz, &bench);
    }
    drop(tb);
    for m in &measured {
        common::print_labelled_ledgers(m.shares.iter().filter_map(|r| {
            let label = format!(
                "{} share, {} user_frac {} (flood)",
                m.profile.name(),
                r.mode,
                r.user_frac
            );
            Some((label, r.ledger.as_ref()?))
        }));
        common::print_ledgers(m.latencies.iter().map(|r| (rate.as_str(), r)));
    }
    let conserved = measured.iter().all(|m| {
        m.shares.iter().all(|r| r.conserved)
            && m.latencies.iter().all(|r| r.conserved != Some(false))
    });
    if conserved {
        println!(
            "conservation held in every polld run: on every interface, and end to end from gen to the sink"
        );
    } else {
        println!("CONSERVATION VIOLATED in some polld run: an unbalanced ledger above, or see `polld run --json`");
        std::process::exit(1);
    }
}
