//! Per-CPU polling on real traffic (root only, 2 CPUs): polld with `[daemon] cpus = [0, 1]`
//! polls one TAP pair on each CPU, each CPU with its own `net.ifpoll.N.rx.user_frac`
//! (90 on CPU0, 85 on CPU1), and a CPU-bound competitor on each CPU gets its CPU's
//! `user_frac` ± 5 points while polld works through a flood queued on both CPUs, measured
//! from the competitor's own CPU time (`/proc/PID/schedstat`). Conservation holds on every
//! interface of both CPUs.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use common::{counter, stop, testbed_of, values, Dir, Polld, POLLD};
use polld_testbed::share::{measure_per_cpu_shares, PerCpuRow, PerCpuTrial};
use polld_testbed::{polld_config_per_cpu, Devices, Layout, PolldSetup, Testbed};

/// A TAP testbed unique to `tag` with a second TAP pair, on a machine with 2 CPUs or more
/// (one poll thread on each); `None` (skipped, said on stderr) with fewer.
fn two_pairs(tag: &str) -> Option<(Testbed, Layout)> {
    if !polld_testsupport::skip::cpus_or_skip(2, "a poll thread on each") {
        return None;
    }
    let mut tb = testbed_of(tag, Devices::Tap);
    let second = tb.add_tap_pair(1).expect("second TAP pair");
    Some((tb, second))
}

#[test]
fn control_requests_reach_the_cpu_they_name_and_ping_crosses_each_cpu() {
    require_root!();
    let Some((tb, second)) = two_pairs("pk") else {
        return;
    };
    let dir = Dir::new("percpu-ctl");
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    let setup = PolldSetup {
        backend: "tap",
        mode: "polling",
        socket: &socket,
        cpu: None,
        realtime: false,
        knobs: &[
            ("net.ifpoll.1.pollhz", "2000"),
            ("kern.polling.user_frac", "40"),
        ],
    };
    let pairs = [(tb.layout(), 0), (&second, 1)];
    std::fs::write(&config, polld_config_per_cpu(&pairs, &setup)).unwrap();
    let polld = Polld::start(&tb, &config, &socket);

    // The config's knobs: kern.polling.* on every CPU, net.ifpoll.1.* on CPU1 only.
    let got = values(&polld, &["net.ifpoll"]);
    let get = |name: &str| {
        got.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("{name} missing in {got:?}"))
    };
    assert_eq!(get("net.ifpoll.0.rx.user_frac"), "40");
    assert_eq!(get("net.ifpoll.1.rx.user_frac"), "40");
    assert_eq!(get("net.ifpoll.1.pollhz"), "2000");
    assert_ne!(get("net.ifpoll.0.pollhz"), "2000");
    assert_eq!(get("net.ifpoll.0.rx.handlers"), "2");
    assert_eq!(get("net.ifpoll.1.rx.handlers"), "2");
    // A write to one CPU changes that CPU only; kern.polling.* reads the first CPU's.
    polld.ok(&["ctl", "net.ifpoll.1.rx.user_frac=70"]);
    assert_eq!(counter(&polld, "net.ifpoll.1.rx.user_frac"), 70);
    assert_eq!(counter(&polld, "net.ifpoll.0.rx.user_frac"), 40);
    assert_eq!(counter(&polld, "kern.polling.user_frac"), 40);
    // Refusals name the knob and the fix.
    let out = polld.run(&["ctl", "net.ifpoll.5.pollhz=100"]);
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("CPU 5 has no poll thread; the poll CPUs are [0, 1]"),
        "{text}"
    );
    let out = polld.run(&["ctl", "net.ifpoll.1.rx.user_frac=100"]);
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("net.ifpoll.1.rx.user_frac"), "{text}");
    assert_eq!(counter(&polld, "net.ifpoll.1.rx.user_frac"), 70);
    // An interface's knob goes to its CPU; ifconfig lists every CPU's interfaces in order.
    polld.ok(&["ctl", "dev.tap2.mode=interrupt"]);
    assert_eq!(counter(&polld, "net.ifpoll.1.rx.handlers"), 1);
    assert_eq!(counter(&polld, "net.ifpoll.0.rx.handlers"), 2);
    let ifconfig = polld.ok(&["ifconfig"]);
    let order: Vec<usize> = ["tap0", "tap1", "tap2", "tap3"]
        .iter()
        .map(|n| {
            ifconfig
                .find(&format!("{n}:"))
                .unwrap_or_else(|| panic!("{n} in {ifconfig}"))
        })
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{ifconfig}");
    // Each CPU forwards its own pair: a ping from gen crosses CPU0 (tap0 to tap1) and
    // CPU1 (tap2 to tap3).
    for layout in [tb.layout(), &second] {
        let dst = layout.veth3.addr.to_string();
        let src = layout.veth0.addr.to_string();
        let out = tb
            .command_in(polld_testbed::Role::Gen, None, "ping")
            .unwrap()
            .args(["-c", "2", "-i", "0.2", "-W", "2", "-I", &src, &dst])
            .output()
            .unwrap();
        assert!(out.status.success(), "ping {dst}: {out:?}");
    }
    let threads = polld.ok(&["ctl", "polld.percpu"]);
    assert!(threads.contains("polld.percpu.1.work_ns"), "{threads}");
    let interfaces = stop(polld);
    assert_eq!(interfaces.len(), 4, "{interfaces:?}");
}

#[test]
fn a_competitor_on_each_poll_cpu_keeps_that_cpus_user_frac() {
    require_root!();
    let Some((tb, second)) = two_pairs("pc") else {
        return;
    };
    let dir = Dir::new("percpu");
    let trial = PerCpuTrial {
        cpus: vec![(0, tb.layout().clone(), 90), (1, second, 85)],
        fill: 1.5,
        warm_up: 0.3,
        window: 1.2,
    };
    let polld = std::path::Path::new(POLLD);
    let within = |r: &PerCpuRow| (r.competitor_percent - f64::from(r.user_frac)).abs() <= 5.0;
    let mut rows = measure_per_cpu_shares(&tb, polld, &dir.0, &trial).expect("per-CPU trial");
    // A 2-CPU CI machine runs other work now and then; one window hit by it says nothing
    // about polld, two in a row do.
    if !rows.iter().all(within) {
        eprintln!("measuring again after {rows:?}");
        rows = measure_per_cpu_shares(&tb, polld, &dir.0, &trial).expect("per-CPU trial");
    }
    for r in &rows {
        eprintln!(
            "CPU{} user_frac {}: competitor {:.1} %, polld {:.1} %, forwarded {:.0}/s, backlog left {}",
            r.cpu, r.user_frac, r.competitor_percent, r.polld_cpu_percent, r.forwarded_pps, r.backlog_left
        );
        assert!(r.conserved, "conservation on CPU{}: {r:?}", r.cpu);
        assert!(r.backlog_left > 0, "the flood ran dry in the window: {r:?}");
        assert!(
            r.forwarded_pps > 10_000.0,
            "polld forwards on CPU{}: {r:?}",
            r.cpu
        );
        assert!(within(r), "CPU{}: {r:?}", r.cpu);
    }
}
