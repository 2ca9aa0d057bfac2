//! Several virtual CPUs (docs/algorithm.md §8, behaviour 15): each CPU's poller holds its
//! own `user_frac` whatever the load on the others, every CPU conserves its frames, and
//! `net.ifpoll.N.*` reaches CPU N only.

use polld_core::Mode;
use polld_sim::scenario::report;
use polld_sim::{smp, Arrivals, NicConfig, Scenario, UserTask};

/// One CPU: a queue at `pps` forwarded to a fast port, polled, beside a CPU-bound process.
fn cpu(pps: f64) -> Scenario {
    let mut input = NicConfig::new("rx", Arrivals::Poisson { pps });
    input.route = Some("tx".into());
    input.mode = Mode::Polling;
    let mut output = NicConfig::new("tx", Arrivals::None);
    output.mode = Mode::Polling;
    output.line_pps = 10_000_000.0;
    let mut s = Scenario {
        name: format!("{pps} pps"),
        duration_ms: 1000.0,
        seed: 3,
        user: UserTask::Spin,
        knobs: Default::default(),
        costs: Default::default(),
        nics: vec![input, output],
    };
    for (k, v) in [
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.controller", "time"),
        ("net.inet.ip.fastforwarding", "1"),
    ] {
        s.knobs.insert(k.into(), toml::Value::String(v.into()));
    }
    s
}

#[test]
fn each_cpu_holds_its_own_user_frac_under_its_own_load_and_conserves_its_frames() {
    // CPU0 and CPU1 flooded with different user_frac, CPU2 lightly loaded.
    let mut cpus = vec![cpu(2_000_000.0), cpu(1_000_000.0), cpu(30_000.0)];
    smp::set_knob(&mut cpus, "kern.polling.user_frac", "50").unwrap();
    smp::set_knob(&mut cpus, "net.ifpoll.0.rx.user_frac", "30").unwrap();
    smp::set_knob(&mut cpus, "net.ifpoll.1.rx.user_frac", "70").unwrap();
    // run() fails if any CPU's frames are not all accounted for.
    let r = smp::run(&cpus).unwrap();
    let user: Vec<f64> = r.cpus.iter().map(|c| c.cpu_pct.user).collect();
    assert!((user[0] - 30.0).abs() <= 5.0, "CPU0 user {user:?}");
    assert!((user[1] - 70.0).abs() <= 5.0, "CPU1 user {user:?}");
    // Light load: the devices take what they need, far below 100 - user_frac.
    assert!(user[2] > 80.0, "CPU2 user {user:?}");
    assert_eq!(r.cpus[2].nics[0].nic.rx_ring_full, 0, "CPU2 drops nothing");
    // The flooded CPUs forward what their own budget allows: the CPU with more left to
    // the devices forwards more although it is offered less.
    assert!(r.cpus[0].delivered_pps > r.cpus[1].delivered_pps);
}

#[test]
fn a_cpu_does_exactly_what_it_would_do_alone() {
    let mut cpus = vec![cpu(2_000_000.0), cpu(400_000.0)];
    smp::set_knob(&mut cpus, "net.ifpoll.1.pollhz", "2000").unwrap();
    let together = smp::run(&cpus).unwrap();
    let mut alone = cpu(400_000.0);
    alone
        .knobs
        .insert("kern.polling.hz".into(), toml::Value::String("2000".into()));
    let mut sim = alone.build().unwrap();
    sim.run_until(1000 * 1_000_000);
    let alone = report("alone", &sim);
    assert_eq!(together.cpus[1].cpu_ns, alone.cpu_ns);
    assert_eq!(together.cpus[1].ticks, alone.ticks);
    assert_eq!(together.cpus[1].ticks, 2000);
    assert_eq!(together.cpus[0].ticks, 1000);
}

#[test]
fn a_knob_for_a_cpu_that_is_not_simulated_is_refused_by_name() {
    let mut cpus = vec![cpu(1000.0), cpu(1000.0)];
    let e = smp::set_knob(&mut cpus, "net.ifpoll.2.rx.user_frac", "10").unwrap_err();
    assert!(
        e.contains("net.ifpoll.2.rx.user_frac: CPU 2 is not simulated; the CPUs are 0..1"),
        "{e}"
    );
    // A bad value is refused by the CPU's own validation, naming the knob.
    smp::set_knob(&mut cpus, "net.ifpoll.1.rx.user_frac", "100").unwrap();
    let e = smp::run(&cpus).unwrap_err();
    assert!(e.starts_with("CPU 1: ") && e.contains("user_frac"), "{e}");
}

#[test]
fn scaling_spreads_a_fixed_load_over_more_cpus_each_keeping_user_frac_while_saturated() {
    let t = smp::scaling(4_000_000.0, 50, 300.0).unwrap();
    let cpus: Vec<usize> = t.rows.iter().map(|r| r.cpus).collect();
    assert_eq!(cpus, smp::SCALING_CPUS);
    for w in t.rows.windows(2) {
        assert!(w[1].delivered > w[0].delivered, "{:?}", t.rows);
    }
    for r in t.rows.iter().filter(|r| r.ring_drops > 0.0) {
        assert!(
            r.user_min >= 45.0 && r.user_max <= 60.0,
            "saturated CPUs keep about user_frac: {r:?}"
        );
    }
    assert!(t.render().contains("cost model"));
}
