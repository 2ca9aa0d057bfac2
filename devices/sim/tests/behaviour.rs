//! What the core issue says polld must show, on virtual time: livelock and its cure,
//! user_frac holding, conservation across mode switches, em-style bounded batches
//! (docs/algorithm.md §9 behaviour 14), and clear errors for bad scenarios.

use polld_core::{DropReason, Mode, Poller, TxDrop};
use polld_sim::scenario::{check_conservation, report};
use polld_sim::{rizzo, Arrivals, CpuCosts, NicConfig, Scenario, Sim, UserTask};

mod common;
use common::{forwarding, user_percent_until};

const MS: u64 = 1_000_000;

/// One stream forwarded from in0 to out0 at `pps`, both NICs in `mode`.
fn one_stream(pps: f64, mode: Mode, ff: bool, user: UserTask, knobs: &[(&str, &str)]) -> Scenario {
    let ff = [("net.inet.ip.fastforwarding", if ff { "1" } else { "0" })];
    let knobs: Vec<_> = ff.iter().chain(knobs).copied().collect();
    forwarding("one stream", Arrivals::Constant { pps }, mode, user, &knobs)
}

fn delivered(s: &Scenario) -> f64 {
    let mut sim = s.build().unwrap();
    sim.run_until((s.duration_ms * 1e6) as u64);
    check_conservation(&sim).unwrap();
    report(&s.name, &sim).delivered_pps
}

#[test]
fn interrupts_without_fastforwarding_livelock_and_polling_cures_it() {
    let rates: Vec<f64> = (1..=12).map(|k| k as f64 * 20_000.0).collect();
    let curve: Vec<f64> = rates
        .iter()
        .map(|&r| delivered(&one_stream(r, Mode::Interrupt, false, UserTask::None, &[])))
        .collect();
    let (peak_i, &peak) = curve
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap();
    assert!(
        peak_i > 0 && peak_i < rates.len() - 1,
        "rises then falls: {curve:?}"
    );
    let flood = 4.0 * rates[peak_i];
    let at_flood = delivered(&one_stream(
        flood,
        Mode::Interrupt,
        false,
        UserTask::None,
        &[],
    ));
    assert!(
        at_flood < 0.10 * peak,
        "interrupt mode at 4x the peak input ({flood}) delivers {at_flood}, peak {peak}"
    );
    // Polling at the same inputs holds at least 95 % of its own peak.
    let idle = [("kern.polling.idle_poll", "1")];
    let polled: Vec<f64> = rates
        .iter()
        .chain([flood].iter())
        .map(|&r| delivered(&one_stream(r, Mode::Polling, false, UserTask::None, &idle)))
        .collect();
    let poll_peak = polled.iter().cloned().fold(0.0, f64::max);
    let poll_flood = *polled.last().unwrap();
    assert!(
        poll_flood >= 0.95 * poll_peak,
        "polling at the flood {poll_flood}, peak {poll_peak}"
    );
}

#[test]
fn user_frac_holds_under_a_flood_with_a_cpu_bound_user_task() {
    for uf in ["10", "50", "90"] {
        let knobs = [
            ("kern.polling.user_frac", uf),
            ("kern.polling.burst_max", "1000"),
        ];
        let s = one_stream(2_000_000.0, Mode::Polling, true, UserTask::Spin, &knobs);
        let mut sim = s.build().unwrap();
        sim.run_until(200 * MS); // converge
        let user = user_percent_until(&mut sim, 1_200 * MS);
        let want: f64 = uf.parse().unwrap();
        assert!(
            (user - want).abs() <= 5.0,
            "user_frac={uf}: user got {user:.1}%"
        );
        check_conservation(&sim).unwrap();
    }
}

#[test]
fn with_idle_poll_and_no_user_task_the_devices_get_the_whole_cpu() {
    let knobs = [("kern.polling.idle_poll", "1")];
    let s = one_stream(2_000_000.0, Mode::Polling, true, UserTask::None, &knobs);
    let mut sim = s.build().unwrap();
    sim.run_until(500 * MS);
    let c = sim.split;
    assert!(
        c.pct(c.device_ns()) > 99.0,
        "devices got {:.2}%",
        c.pct(c.device_ns())
    );
    assert_eq!(c.idle_ns, 0);
    // And they take more than hz * burst_max, thanks to the idle poller.
    let rx = sim.nic(0).stats.received as f64 / 0.5;
    assert!(rx > 150_000.0, "rx {rx}");
}

#[test]
fn switching_modes_under_load_loses_no_frame() {
    let mut s = one_stream(300_000.0, Mode::Interrupt, true, UserTask::Spin, &[]);
    s.nics[0].arrivals = Arrivals::Poisson { pps: 300_000.0 };
    let mut sim = s.build().unwrap();
    let plan = [
        (Mode::Polling, "1"),
        (Mode::Adaptive, "1"),
        (Mode::Busy, "0"),
        (Mode::Interrupt, "0"),
        (Mode::Polling, "0"),
        (Mode::Adaptive, "0"),
        (Mode::Interrupt, "1"),
        (Mode::Busy, "1"),
        (Mode::Polling, "1"),
    ];
    let mut t = 0;
    for (mode, ff) in plan {
        t += 37 * MS;
        sim.run_until(t);
        check_conservation(&sim).unwrap();
        let dp = sim.dataplane_mut();
        dp.sysctl_set("net.inet.ip.fastforwarding", ff).unwrap();
        for i in 0..2 {
            dp.set_mode(i, mode).unwrap();
        }
        assert_eq!(dp.interfaces()[0].mode(), mode);
        assert_eq!(dp.poller().is_registered(0), mode == Mode::Polling);
    }
    sim.run_until(t + 50 * MS);
    check_conservation(&sim).unwrap();
    let c = sim.dataplane().interfaces()[0].counters();
    assert!(c.forwarded > 20_000, "traffic flowed: {c:?}");
    assert!(c.interrupts > 0 && c.polls > 0 && c.tasks > 0);
}

/// FreeBSD 6's `kern.polling.enable`: 1 polls every interface, 0 takes every polling one
/// out; it reads 1 only while all poll. `poll_in_trap` takes only 0, and says why.
#[test]
fn polling_enable_switches_every_interface_and_poll_in_trap_is_refused_with_the_reason() {
    let s = one_stream(100_000.0, Mode::Interrupt, true, UserTask::None, &[]);
    let mut sim = s.build().unwrap();
    sim.run_until(10 * MS);
    let dp = sim.dataplane_mut();
    assert_eq!(dp.sysctl_get("kern.polling.enable").as_deref(), Some("0"));
    dp.set_mode(1, Mode::Adaptive).unwrap();
    dp.sysctl_set("kern.polling.enable", "1").unwrap();
    assert_eq!(dp.sysctl_get("kern.polling.enable").as_deref(), Some("1"));
    assert!((0..2).all(|i| dp.interfaces()[i].mode() == Mode::Polling));
    assert_eq!(dp.poller().handlers(), 2);
    sim.run_until(30 * MS);
    let dp = sim.dataplane_mut();
    // One interface out by hand: enable reads 0; writing 0 takes the other out too.
    dp.set_mode(0, Mode::Busy).unwrap();
    assert_eq!(dp.sysctl_get("kern.polling.enable").as_deref(), Some("0"));
    dp.sysctl_set("kern.polling.enable", "0").unwrap();
    assert_eq!(
        dp.interfaces()[0].mode(),
        Mode::Busy,
        "not polling: unchanged"
    );
    assert_eq!(dp.interfaces()[1].mode(), Mode::Interrupt);
    assert_eq!(dp.poller().handlers(), 0);
    for bad in ["2", "-1", "on"] {
        let e = dp.sysctl_set("kern.polling.enable", bad).unwrap_err();
        assert!(e.to_string().contains("kern.polling.enable"), "{e}");
    }
    assert_eq!(
        dp.interfaces()[0].mode(),
        Mode::Busy,
        "refused writes change nothing"
    );
    assert_eq!(
        dp.sysctl_get("kern.polling.poll_in_trap").as_deref(),
        Some("0")
    );
    dp.sysctl_set("kern.polling.poll_in_trap", "0").unwrap();
    let e = dp
        .sysctl_set("kern.polling.poll_in_trap", "5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("system call") && e.contains("idle_poll"), "{e}");
    sim.run_until(50 * MS);
    check_conservation(&sim).unwrap();
}

#[test]
fn a_polling_interface_that_disappears_is_deregistered_and_picked_up_when_it_returns() {
    let s = one_stream(100_000.0, Mode::Polling, true, UserTask::None, &[]);
    let mut sim = s.build().unwrap();
    sim.run_until(20 * MS);
    let before = sim.dataplane().interfaces()[0].counters().forwarded;
    assert!(before > 0);
    sim.dataplane_mut()
        .interface_mut(0)
        .dev_mut()
        .set_link(polld_core::LinkState::Gone);
    sim.dataplane_mut().check_status(0);
    let events = sim.dataplane_mut().take_events();
    assert_eq!(
        events,
        vec![polld_core::Event::Gone {
            ifname: "in0".into()
        }]
    );
    assert!(!sim.dataplane().poller().is_registered(0));
    assert!(sim.dataplane().poller().is_registered(1), "the other stays");
    sim.run_until(40 * MS);
    let gone = sim.dataplane().interfaces()[0].counters().forwarded;
    sim.dataplane_mut()
        .interface_mut(0)
        .dev_mut()
        .set_link(polld_core::LinkState::Up);
    sim.dataplane_mut().check_status(0);
    assert!(
        sim.dataplane().poller().is_registered(0),
        "registered again"
    );
    assert_eq!(sim.dataplane().interfaces()[0].mode(), Mode::Polling);
    sim.run_until(60 * MS);
    check_conservation(&sim).unwrap();
    let after = sim.dataplane().interfaces()[0].counters().forwarded;
    assert!(after > gone + 1000, "forwarding resumed: {gone} -> {after}");
}

/// docs/algorithm.md §9 behaviour 14: backlog N, limit L: the task runs ceil(N/L) times, no interrupt while work
/// remains, the ring is released once per run, the limit counts frames not descriptors,
/// and L = -1 drains everything in one run.
#[test]
fn adaptive_mode_handles_bounded_batches_like_em() {
    for (n, limit) in [(250usize, "100"), (250, "-1"), (99, "100"), (300, "7")] {
        let mut nic = NicConfig::new("em0", Arrivals::None);
        nic.descriptors_per_frame = 3; // jumbo frames on 2 KiB buffers
        nic.rx_ring = 3 * 300;
        let costs = CpuCosts::default();
        let mut sim = Sim::new(
            Poller::default(),
            vec![nic],
            vec![None],
            costs,
            UserTask::None,
            1,
        );
        let dp = sim.dataplane_mut();
        dp.set_mode(0, Mode::Adaptive).unwrap();
        dp.sysctl_set("dev.em0.rx_process_limit", limit).unwrap();
        dp.interface_mut(0).dev_mut().inject(n);
        sim.run_until(50 * MS);
        let iface = &sim.dataplane().interfaces()[0];
        let l: i64 = limit.parse().unwrap();
        let runs = if l < 0 {
            1
        } else {
            n.div_ceil(l as usize) as u64
        };
        assert_eq!(iface.counters().rx_packets, n as u64);
        assert_eq!(iface.counters().tasks, runs, "N={n} L={limit}");
        assert_eq!(
            iface.counters().interrupts,
            1,
            "no interrupt while work remains"
        );
        assert_eq!(
            iface.dev().stats.rx_publishes,
            runs,
            "one ring release per batch"
        );
        assert!(!iface.task_queued());
        assert!(sim.dataplane().interrupt_armed(0), "re-armed once drained");
    }
}

#[test]
fn interrupt_mode_input_queue_overflow_is_a_named_drop() {
    let s = one_stream(400_000.0, Mode::Interrupt, false, UserTask::None, &[]);
    let mut sim = s.build().unwrap();
    sim.run_until(100 * MS);
    check_conservation(&sim).unwrap();
    let c = sim.dataplane().interfaces()[0].counters();
    assert!(c.drops.get(DropReason::IntrQueueFull) > 0, "{c:?}");
}

#[test]
fn frames_too_long_for_the_output_are_counted_there_not_lost() {
    let mut s = one_stream(10_000.0, Mode::Polling, true, UserTask::None, &[]);
    s.nics[0].frame_len = 1000;
    s.nics[1].max_frame = 600;
    let mut sim = s.build().unwrap();
    sim.run_until(100 * MS);
    check_conservation(&sim).unwrap();
    let ifs = sim.dataplane().interfaces();
    let (input, output) = (ifs[0].counters(), ifs[1].counters());
    assert!(input.forwarded > 500, "{input:?}");
    assert_eq!(output.tx_packets, input.forwarded);
    assert_eq!(output.tx_drops.get(TxDrop::TooLong), input.forwarded);
    assert_eq!(ifs[1].dev().stats.tx_wire, 0);
}

#[test]
fn the_rizzo_table_has_the_seed_shape() {
    let t = rizzo::table(300.0).unwrap();
    let row = |name: &str| t.rows.iter().find(|r| r.test == name).unwrap().clone();
    let tx = row("Transmit");
    assert!(
        tx.polling > tx.interrupt && tx.polling > 140_000.0,
        "{tx:?}"
    );
    let cpu = row("Rx CPU load");
    assert!(cpu.interrupt > 1.5 * cpu.polling, "{cpu:?}");
    let one = row("Forwarding 1 stream");
    assert!(
        one.interrupt > 130_000.0 && one.polling > 140_000.0,
        "{one:?}"
    );
    let noff = row("Forwarding 1 stream, no fast forwarding");
    assert!(noff.interrupt < 0.01 * noff.polling, "livelock: {noff:?}");
    for name in ["Forwarding 2 streams", "Forwarding 4 streams"] {
        let r = row(name);
        assert!(
            r.interrupt < 0.05 * r.polling && r.polling > 148_000.0,
            "{r:?}"
        );
    }
}

#[test]
fn bad_scenarios_get_errors_naming_the_problem() {
    let nic_a = "[[nic]]\nname = \"a\"\n";
    let cases = [
        (
            format!("duration_ms = 10\n{nic_a}route = \"b\"\n"),
            "route 'b'",
        ),
        (format!("duration_ms = 10\n{nic_a}{nic_a}"), "defined twice"),
        (
            format!("duration_ms = 10\n[knobs]\n\"kern.polling.user_frac\" = 100\n{nic_a}"),
            "0..99",
        ),
        (
            format!("duration_ms = 10\n[knobs]\n\"kern.polling.nope\" = 1\n{nic_a}"),
            "unknown oid",
        ),
        (format!("duration_ms = 10\n{nic_a}speed = 3\n"), "line 4"),
        (
            format!("duration_ms = 10\n{nic_a}mode = \"turbo\"\n"),
            "turbo",
        ),
        (format!("duration_ms = 0\n{nic_a}"), "duration_ms"),
        ("duration_ms = 10\n".to_string(), "nic"),
        (format!("duration_ms = 10\n{nic_a}rx_ring = 0\n"), "rx_ring"),
        (
            format!("duration_ms = 10\nuser = {{ kind = \"generator\", nic = 3 }}\n{nic_a}"),
            "generator",
        ),
    ];
    for (text, needle) in cases {
        let err = Scenario::from_toml("bad.toml", &text).unwrap_err();
        assert!(
            err.contains("bad.toml") && err.contains(needle),
            "{needle}: {err}"
        );
    }
}
