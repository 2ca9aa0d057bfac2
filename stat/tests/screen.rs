//! The `polld stat` screen from fixed samples, no daemon: the rates and the CPU split
//! computed from two samples, and the layout rendered into ratatui's TestBackend at
//! several sizes down to 80x24.

use polld_control::daemon::daemon_entry;
use polld_core::SysctlEntry;
use polld_stat::sample::{CpuTimes, ProcStat, Sample, Snapshot};
use polld_stat::screen::{self, Status};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn entry(name: &str, value: impl ToString) -> SysctlEntry {
    SysctlEntry {
        name: name.to_string(),
        value: value.to_string(),
        descr: String::new(),
        writable: false,
    }
}

/// A daemon's entries: `n` interfaces, counters scaled by `t` (seconds since start).
fn entries(interfaces: usize, t: u64) -> Vec<SysctlEntry> {
    let mut e = vec![
        entry("kern.polling.hz", 1000),
        entry("kern.polling.controller", "classic"),
        entry("kern.polling.user_frac", 50),
        entry("kern.polling.burst", 312),
        entry("kern.polling.burst_max", 1000),
        entry("kern.polling.each_burst", 50),
        entry("kern.polling.handlers", interfaces),
        entry("kern.polling.residual_burst", 7),
        entry("kern.polling.lost_polls", 3 + 40 * t),
        entry("kern.polling.phase", 2),
        entry("kern.polling.stalled", 1),
        entry("kern.polling.idle_poll", 0),
        entry("kern.polling.kern_load", 45),
    ];
    for i in 0..interfaces {
        let p = format!("dev.veth{i}.");
        let polling = i % 2 == 1;
        e.push(entry(
            &format!("{p}mode"),
            if polling { "polling" } else { "interrupt" },
        ));
        e.push(entry(&format!("{p}link"), "up"));
        e.push(entry(
            &format!("{p}interrupts"),
            if polling { 5 } else { 4000 * t },
        ));
        // The device's own: about one per frame batch in interrupt mode, none polling.
        e.push(entry(
            &format!("{p}device_interrupts"),
            if polling { 20 } else { 3500 * t },
        ));
        e.push(entry(
            &format!("{p}polls"),
            if polling { 1000 * t } else { 0 },
        ));
        e.push(entry(&format!("{p}rx_packets"), 200_000 * t));
        e.push(entry(&format!("{p}tx_packets"), 190_000 * t));
        e.push(entry(&format!("{p}drops.rx_ring_full"), 9_000 * t));
        e.push(entry(&format!("{p}drops.ttl_exceeded"), 1_000 * t));
        e.push(entry(&format!("{p}drops.no_route"), 0));
    }
    e.extend([
        entry(daemon_entry::CONFIG, "/etc/polld/fwd.toml"),
        entry(daemon_entry::PID, 4242),
        entry(daemon_entry::CPU, 1),
        entry(daemon_entry::CPU_PINNED, 1),
        entry(daemon_entry::CLOCK_NS, 5_000_000_000 + t * 1_000_000_000),
        // 40 % of the time in device work, 0 busy polling, 10 % idle polling; the thread
        // ran 52 % (its own overhead besides).
        entry(daemon_entry::WORK_NS, 400_000_000 * t),
        entry(daemon_entry::BUSY_POLL_NS, 0),
        entry(daemon_entry::IDLE_POLL_NS, 100_000_000 * t),
        entry(daemon_entry::THREAD_CPU_NS, 520_000_000 * t),
        // The kernel's receive thread, pinned to CPU1, ran 30 %.
        entry(daemon_entry::KERNEL_RX_NS, 300_000_000 * t),
        entry(daemon_entry::KERNEL_RX_ON_CPU_NS, 300_000_000 * t),
        entry(
            daemon_entry::KERNEL_RX_THREADS,
            "napi/veth1-8193 (pid 812, CPU1)",
        ),
        entry(daemon_entry::KERNEL_RX_ELSEWHERE, ""),
        entry(daemon_entry::KERNEL_RX_FOUND_BY, "netlink"),
    ]);
    e
}

/// `entries` with `name` set to `value`.
fn with(mut entries: Vec<SysctlEntry>, name: &str, value: impl ToString) -> Vec<SysctlEntry> {
    entries.retain(|e| e.name != name);
    entries.push(entry(name, value));
    entries
}

/// `/proc/stat` with CPU1 busy `busy` ticks of `total`, `softirq` of them softirq, and
/// CPU0 as busy as CPU1 (the `cpu` line sums both).
fn proc_stat(busy: u64, softirq: u64, total: u64) -> ProcStat {
    let cpu1 = CpuTimes {
        busy,
        softirq,
        steal: 0,
        total,
    };
    ProcStat {
        cpus: [(0, cpu1), (1, cpu1)].into_iter().collect(),
        all: CpuTimes {
            busy: 2 * busy,
            softirq: 2 * softirq,
            steal: 0,
            total: 2 * total,
        },
    }
}

/// Two samples one second apart; each core was busy `busy_percent` of that second, 2 %
/// of it in softirq.
fn samples(interfaces: usize, busy_percent: u64) -> (Sample, Sample) {
    let mut before = Sample::from_entries(entries(interfaces, 10));
    let mut after = Sample::from_entries(entries(interfaces, 11));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1000 + busy_percent, 52, 5100));
    (before, after)
}

fn snapshot(interfaces: usize) -> Snapshot {
    let (before, after) = samples(interfaces, 90);
    Snapshot::between(&before, &after)
}

/// The shares that must add up to 100.
fn total(s: &Snapshot) -> f64 {
    let c = &s.cpu;
    c.device
        + c.busy_poll
        + c.idle_poll
        + c.kernel_rx
        + c.softirq.unwrap()
        + c.user.unwrap()
        + c.idle.unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn rates_and_the_cpu_split_come_from_the_difference_of_two_samples() {
    let s = snapshot(2);
    assert!(close(s.interval_s, 1.0));
    assert_eq!(s.pid, 4242);
    assert_eq!(s.config, "/etc/polld/fwd.toml");
    assert_eq!(s.cpu.cpu, Some(1));
    assert!(s.cpu.pinned);
    assert_eq!(s.cpu.cpus, 1);
    assert!(close(s.cpu.device, 40.0));
    assert!(close(s.cpu.idle_poll, 10.0));
    assert!(close(s.cpu.kernel_rx, 30.0));
    assert!(close(s.cpu.softirq.unwrap(), 2.0));
    assert!(close(s.cpu.busy.unwrap(), 90.0));
    // user is what is left of busy: 90 - 40 - 10 - 30 - 2.
    assert!(close(s.cpu.user.unwrap(), 8.0));
    assert!(close(s.cpu.idle.unwrap(), 10.0));
    assert!(close(total(&s), 100.0));
    assert!(close(s.cpu.polld_thread.unwrap(), 52.0));
    assert_eq!(s.cpu.kernel_rx_threads, "napi/veth1-8193 (pid 812, CPU1)");
    assert_eq!(s.cpu.kernel_rx_found_by, "netlink");
    assert_eq!(s.cpu.notes.len(), 1, "{:?}", s.cpu.notes);
    assert!(s.cpu.notes[0].starts_with("softirq counts everyone's"));
    assert!(close(s.scheduler.lost_polls_per_s, 40.0));
    assert_eq!(s.scheduler.burst, 312);
    let names: Vec<&str> = s.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["veth0", "veth1"]);
    let v0 = &s.interfaces[0];
    assert_eq!(v0.mode, "interrupt");
    assert!(close(v0.interrupts_per_s, 4000.0));
    assert!(close(v0.rx_pps, 200_000.0));
    assert!(close(v0.tx_pps, 190_000.0));
    assert!(close(v0.drops_per_s, 10_000.0));
    // Non-zero reasons only, largest first.
    assert_eq!(v0.drops_by_reason.len(), 2);
    assert_eq!(v0.drops_by_reason[0].0, "rx_ring_full");
    assert!(close(s.interfaces[1].polls_per_s, 1000.0));
    assert!(close(s.interfaces[1].interrupts_per_s, 0.0));
    // The device's own interrupts, beside polld's wakeups.
    assert!(close(v0.device_interrupts_per_s.unwrap(), 3500.0));
    assert!(close(s.interfaces[1].device_interrupts_per_s.unwrap(), 0.0));
}

#[test]
fn measured_time_above_proc_stat_busy_leaves_user_at_zero_and_still_adds_to_100() {
    // /proc/stat saw 60 % busy; polld and the kernel thread measured 82 %.
    let (before, after) = samples(1, 60);
    let s = Snapshot::between(&before, &after);
    assert!(close(s.cpu.user.unwrap(), 0.0));
    assert!(close(s.cpu.busy.unwrap(), 82.0));
    assert!(close(s.cpu.idle.unwrap(), 18.0));
    assert!(close(total(&s), 100.0));
    assert!(
        s.cpu
            .notes
            .iter()
            .any(|n| n.contains("exceeds the CPU's busy 60.0% by 22.0")),
        "{:?}",
        s.cpu.notes
    );

    let mut before = Sample::from_entries(entries(1, 1));
    let mut after = Sample::from_entries(entries(1, 2));
    before.proc_stat = None;
    after.proc_stat = None;
    let s = Snapshot::between(&before, &after);
    assert_eq!((s.cpu.busy, s.cpu.user, s.cpu.idle), (None, None, None));
    assert_eq!(s.cpu.softirq, None);
    assert!(close(s.cpu.device, 40.0));
}

#[test]
fn an_unpinned_daemon_is_split_over_all_cpus_even_when_it_moved_between_samples() {
    let unpinned = |t, cpu| {
        with(
            with(entries(1, t), daemon_entry::CPU_PINNED, 0),
            daemon_entry::CPU,
            cpu,
        )
    };
    let mut before = Sample::from_entries(unpinned(10, 0));
    let mut after = Sample::from_entries(unpinned(11, 1));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1090, 52, 5100));
    let s = Snapshot::between(&before, &after);
    assert!(!s.cpu.pinned);
    assert_eq!(s.cpu.cpus, 2);
    // Shares of two CPUs: half of one CPU's figures.
    assert!(close(s.cpu.device, 20.0));
    assert!(close(s.cpu.kernel_rx, 15.0));
    assert!(close(s.cpu.busy.unwrap(), 90.0));
    assert!(close(total(&s), 100.0));
    assert!(s.cpu.notes[0].starts_with("polld is not pinned: shares are of all 2 CPUs"));
    let text = text_80(&s);
    assert!(
        text.starts_with("polld stat  pid 4242  2 CPUs (not pinned, last ran on CPU1)"),
        "{text}"
    );
    assert!(text.contains("2 CPUs busy  90.0%"), "{text}");
}

#[test]
fn the_split_says_what_it_cannot_know() {
    // The thread ran less than the monotonic clock booked as device work: preempted.
    let preempted = |t| with(entries(1, t), daemon_entry::THREAD_CPU_NS, 300_000_000 * t);
    // The kernel thread may run anywhere: its time is not on CPU1.
    let anywhere = |e| {
        with(
            with(e, daemon_entry::KERNEL_RX_ON_CPU_NS, 0),
            daemon_entry::KERNEL_RX_ELSEWHERE,
            "napi/veth1-8193",
        )
    };
    let mut before = Sample::from_entries(anywhere(preempted(10)));
    let mut after = Sample::from_entries(anywhere(preempted(11)));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1090, 52, 5100));
    let s = Snapshot::between(&before, &after);
    assert!(close(s.cpu.kernel_rx, 0.0));
    assert!(close(s.cpu.kernel_rx_anywhere, 30.0));
    // Device work is what the thread ran (30 %), not the 50 % the monotonic clock booked:
    // the 20 it waited are others' time, here the user's (90 busy - 30 - 2 softirq).
    assert!(close(s.cpu.device + s.cpu.idle_poll, 30.0));
    assert!(close(s.cpu.user.unwrap(), 58.0));
    assert!(close(total(&s), 100.0));
    let notes = s.cpu.notes.join("\n");
    assert!(
        notes.contains("it was preempted during device work"),
        "{notes}"
    );
    assert!(
        notes.contains(
            "napi/veth1-8193 may run on other CPUs: not in this split (30.0% of a CPU anywhere)"
        ),
        "{notes}"
    );
    // Each note is on the screen, wrapped to the width.
    let text = text_80(&s);
    assert!(text.lines().all(|l| l.chars().count() <= 80));
    assert!(
        text.contains("note: device work 50.0% by the monotonic clock"),
        "{text}"
    );
}

#[test]
fn a_daemon_without_the_thread_clock_gets_no_preemption_note() {
    let old = |t| {
        entries(1, t)
            .into_iter()
            .filter(|e| e.name != daemon_entry::THREAD_CPU_NS)
            .collect::<Vec<_>>()
    };
    let mut before = Sample::from_entries(old(10));
    let mut after = Sample::from_entries(old(11));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1090, 52, 5100));
    let s = Snapshot::between(&before, &after);
    assert_eq!(s.cpu.polld_thread, None);
    assert!(
        !s.cpu.notes.iter().any(|n| n.contains("preempted")),
        "{:?}",
        s.cpu.notes
    );
    assert!(text_80(&s).contains("polld thread     -%"));
}

#[test]
fn proc_stat_gives_each_cpu_and_all_of_them_with_softirq() {
    let text = "cpu  200 0 100 1500 20 5 30 3 0 0\n\
                cpu0 100 0 50 800 10 2 10 0 0 0\n\
                cpu1 100 0 50 700 10 3 20 3 0 0\n\
                intr 12345 0 0\n\
                ctxt 999\n";
    let p = ProcStat::parse(text).unwrap();
    assert_eq!(p.cpus.len(), 2);
    // busy = user + nice + system + irq + softirq + steal (not idle, not iowait).
    assert_eq!(
        p.cpus[&1],
        CpuTimes {
            busy: 176,
            softirq: 20,
            steal: 3,
            total: 886
        }
    );
    assert_eq!(
        p.all,
        CpuTimes {
            busy: 338,
            softirq: 30,
            steal: 3,
            total: 1858
        }
    );
    assert_eq!(CpuTimes::parse(text, 0).unwrap().busy, 162);
    assert_eq!(CpuTimes::parse(text, 2), None);
    assert_eq!(ProcStat::parse("intr 1\n"), None);
}

#[test]
fn busy_is_the_wall_time_a_cpu_did_not_idle_not_the_ticks_that_saw_it_busy() {
    // One second (USER_HZ ticks) in which the CPU idled half the time (idle is measured at
    // each idle entry and exit) but a poller in step with the scheduler tick was running at
    // only a tenth of the ticks (user and system time are sampled there).
    let hz = polld_stat::sample::clock_ticks() as u64;
    let before = CpuTimes {
        busy: 1000,
        softirq: 0,
        steal: 0,
        total: 5000,
    };
    let after = CpuTimes {
        busy: 1000 + hz / 10,
        softirq: 0,
        steal: 0,
        total: 5000 + hz / 10 + hz / 2,
    };
    let busy = after.busy_percent_since(&before, 1_000_000_000, 1).unwrap();
    assert!((busy - 50.0).abs() < 0.5, "{busy}");
    // Two CPUs' line over the same second: the idle half of one CPU is a quarter of both.
    let both = after.busy_percent_since(&before, 1_000_000_000, 2).unwrap();
    assert!((both - 75.0).abs() < 0.5, "{both}");
    assert_eq!(after.busy_percent_since(&before, 0, 1), None);
}

/// `--once` at 80 columns, every second.
fn text_80(s: &Snapshot) -> String {
    let status = Status {
        interval_s: 1.0,
        problem: None,
    };
    screen::to_text(s, &status, 80)
}

/// The screen rendered at `width` x `height`, one string per row.
fn render(snapshot: &Snapshot, status: &Status, width: u16, height: u16) -> Vec<String> {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
    terminal
        .draw(|frame| screen::draw(frame, Some(snapshot), status))
        .unwrap();
    screen::buffer_text(terminal.backend().buffer())
        .lines()
        .map(str::to_string)
        .collect()
}

fn row<'a>(rows: &'a [String], starts: &str) -> &'a str {
    rows.iter()
        .find(|r| r.trim_start().starts_with(starts))
        .unwrap_or_else(|| panic!("no row starting with {starts:?} in\n{}", rows.join("\n")))
}

/// Cells of `fill` in the bar of `row` and the bar's inner width.
fn bar(row: &str, fill: char) -> (usize, usize) {
    let inner = row.split('|').nth(1).unwrap();
    (
        inner.chars().filter(|&c| c == fill).count(),
        inner.chars().count(),
    )
}

#[test]
fn the_screen_shows_bars_scheduler_and_one_row_per_device_at_every_size() {
    let s = snapshot(2);
    let status = Status {
        interval_s: 1.0,
        problem: None,
    };
    for (width, height) in [(80, 24), (100, 30), (132, 43)] {
        let rows = render(&s, &status, width, height);
        assert_eq!(rows.len(), usize::from(height));
        assert!(rows.iter().all(|r| r.chars().count() <= usize::from(width)));
        let all = rows.join("\n");
        assert!(
            rows[0].starts_with("polld stat  pid 4242  CPU1 pinned"),
            "{all}"
        );
        assert!(rows[0].ends_with("q quits"), "{all}");
        assert!(row(&rows, "CPU1 busy").contains("90.0%"), "{all}");
        assert!(
            row(&rows, "CPU1 busy").contains("polld thread  52.0%"),
            "{all}"
        );
        assert_eq!(
            row(&rows, "kernel rx"),
            "kernel rx (netlink): napi/veth1-8193 (pid 812, CPU1)"
        );

        // The bars: filled in proportion, all the same width, closed on the right.
        let inner = usize::from(width) - 18;
        for (label, fill, percent) in [
            ("device", '=', 40.0),
            ("kern rx", '#', 30.0),
            ("softirq", '~', 2.0),
            ("user", '>', 8.0),
            ("idle", '-', 10.0),
        ] {
            let r = row(&rows, label);
            assert!(r.contains(&format!("{percent:.1}%")), "{label}: {r}");
            let (filled, width_seen) = bar(r, fill);
            assert_eq!(width_seen, inner, "{label}: {r}");
            assert_eq!(
                filled,
                (percent / 100.0 * inner as f64).round() as usize,
                "{r}"
            );
            assert!(r.ends_with('|'));
        }
        let scale = row(&rows, "0 ");
        assert!(scale.ends_with("100"), "{scale}");

        let scheduler = row(&rows, "polling");
        for part in [
            "burst 312/1000",
            "each_burst 50",
            "residual_burst 7",
            "phase 2",
        ] {
            assert!(scheduler.contains(part), "{part}: {scheduler}");
        }
        let losses = row(&rows, "lost_polls");
        assert!(losses.contains("lost_polls 443 (40/s)") && losses.contains("stalled 1"));

        let header = row(&rows, "interface");
        for column in [
            "mode",
            "dev irq/s",
            "intr/s",
            "polls/s",
            "in pkt/s",
            "out pkt/s",
            "drops/s",
        ] {
            assert!(header.contains(column), "{column}: {header}");
        }
        let v0: Vec<&str> = row(&rows, "veth0 ").split_whitespace().collect();
        assert_eq!(
            v0,
            [
                "veth0",
                "interrupt",
                "up",
                "3500",
                "4000",
                "0",
                "200000",
                "190000",
                "10000"
            ]
        );
        let v1: Vec<&str> = row(&rows, "veth1 ").split_whitespace().collect();
        assert_eq!(
            v1,
            ["veth1", "polling", "up", "0", "0", "1000", "200000", "190000", "10000"]
        );
        assert!(all.contains("drops/s by reason"));
        let drops = rows
            .iter()
            .filter(|r| r.contains("rx_ring_full 9000  ttl_exceeded 1000"));
        assert_eq!(drops.count(), 2, "{all}");
    }
}

#[test]
fn too_many_interfaces_for_the_height_are_counted_not_overdrawn() {
    let s = snapshot(20);
    let status = Status {
        interval_s: 2.0,
        problem: Some("polld stopped answering; retrying every 2.0 s".into()),
    };
    let rows = render(&s, &status, 80, 24);
    let all = rows.join("\n");
    assert!(all.contains("more interfaces"), "{all}");
    assert!(rows[0].contains("every 2.0 s"));
    // The problem keeps the last row.
    assert_eq!(rows[23], "polld stopped answering; retrying every 2.0 s");
    let shown = rows.iter().filter(|r| r.starts_with("veth")).count();
    assert!(shown > 0 && shown < 20 * 2, "{all}");
}

#[test]
fn once_prints_the_same_screen_as_plain_text_without_terminal_control() {
    let s = snapshot(2);
    let status = Status {
        interval_s: 1.0,
        problem: None,
    };
    let text = screen::to_text(&s, &status, 80);
    assert!(!text.contains('\x1b'));
    let on_terminal = render(&s, &status, 80, text.lines().count() as u16).join("\n") + "\n";
    assert_eq!(text, on_terminal);
    // JSON carries the same numbers.
    let json: serde_json::Value = serde_json::to_value(&s).unwrap();
    assert_eq!(json["interfaces"][0]["interrupts_per_s"], 4000.0);
    assert_eq!(json["cpu"]["device"], 40.0);
    assert_eq!(json["scheduler"]["burst"], 312);
}

#[test]
fn a_daemon_with_poll_cpus_gets_one_ifpoll_row_per_cpu_with_its_own_scheduler_and_time() {
    // Two poll CPUs (net.ifpoll.0, net.ifpoll.2), as polld run with [daemon] cpus lists them.
    let per_cpu = |t: u64| {
        let mut e = entries(2, t);
        for (cpu, user_frac, burst, work_ms) in [(0, 90, 40, 100), (2, 50, 300, 480)] {
            let p = format!("net.ifpoll.{cpu}");
            e.push(entry(&format!("{p}.pollhz"), 4000));
            e.push(entry(&format!("{p}.rx.user_frac"), user_frac));
            e.push(entry(&format!("{p}.rx.burst"), burst));
            e.push(entry(&format!("{p}.rx.burst_max"), 1000));
            e.push(entry(&format!("{p}.rx.handlers"), 1));
            e.push(entry(&format!("{p}.rx.kern_frac"), 100 - user_frac));
            e.push(entry(&format!("{p}.rx.lost_polls"), 2 * t));
            e.push(entry(
                &format!("polld.percpu.{cpu}.work_ns"),
                t * work_ms * 1_000_000,
            ));
            e.push(entry(
                &format!("polld.percpu.{cpu}.thread_cpu_ns"),
                t * (work_ms + 10) * 1_000_000,
            ));
        }
        Sample::from_entries(e)
    };
    let s = Snapshot::between(&per_cpu(10), &per_cpu(11));
    let cpus: Vec<(usize, u64, u64)> = s
        .per_cpu
        .iter()
        .map(|c| (c.cpu, c.scheduler.user_frac, c.scheduler.burst))
        .collect();
    assert_eq!(cpus, vec![(0, 90, 40), (2, 50, 300)]);
    assert!(close(s.per_cpu[0].device, 10.0), "{:?}", s.per_cpu[0]);
    assert!(close(s.per_cpu[1].polld_thread, 49.0), "{:?}", s.per_cpu[1]);
    assert!(close(s.per_cpu[1].scheduler.lost_polls_per_s, 2.0));
    let text = text_80(&s);
    let rows: Vec<String> = text.lines().map(str::to_string).collect();
    assert!(row(&rows, "ifpoll").contains("user_frac"), "{text}");
    let cpu2 = row(&rows, "CPU2 ");
    for cell in ["4000", "50", "300/1000", "48.0", "49.0"] {
        assert!(cpu2.contains(cell), "{cell} missing in {cpu2:?}");
    }
    // One poll thread: no ifpoll rows.
    assert!(!text_80(&snapshot(2)).contains("ifpoll"));
}

#[test]
fn on_a_cpu_others_keep_busy_a_preempted_poll_thread_is_not_counted_twice() {
    // A CPU-bound process and the kernel's receive thread (60 %) share the poll CPU: the
    // CPU never idles, and the poll thread ran 30 % while the monotonic clock booked 50 %
    // as device and idle-poll work (the rest of that it waited, preempted, while the others
    // ran: their time, counted in their own shares).
    let busy = |t| {
        with(
            with(
                with(entries(1, t), daemon_entry::THREAD_CPU_NS, 300_000_000 * t),
                daemon_entry::KERNEL_RX_NS,
                600_000_000 * t,
            ),
            daemon_entry::KERNEL_RX_ON_CPU_NS,
            600_000_000 * t,
        )
    };
    let mut before = Sample::from_entries(busy(10));
    let mut after = Sample::from_entries(busy(11));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1100, 52, 5100));
    let s = Snapshot::between(&before, &after);
    assert!(close(total(&s), 100.0), "{:?}", s.cpu);
    // Device and idle-poll work in their 4:1 ratio, within the thread's 30 %.
    assert!(close(s.cpu.device, 24.0), "{:?}", s.cpu);
    assert!(close(s.cpu.idle_poll, 6.0), "{:?}", s.cpu);
    assert!(close(s.cpu.user.unwrap(), 8.0), "{:?}", s.cpu);
    assert!(close(s.cpu.idle.unwrap(), 0.0), "{:?}", s.cpu);
}

#[test]
fn a_slowed_tick_shows_its_stride_beside_hz() {
    let lost_polls = |s: &Snapshot| {
        text_80(s)
            .lines()
            .find(|l| l.contains("lost_polls"))
            .unwrap()
            .to_string()
    };
    // At hz, the line says hz alone.
    let plain = lost_polls(&snapshot(2));
    assert!(plain.ends_with("hz 1000"), "{plain}");
    let before = Sample::from_entries(with(entries(2, 10), "kern.polling.stride", 1));
    let after = Sample::from_entries(with(entries(2, 11), "kern.polling.stride", 4));
    let slowed = Snapshot::between(&before, &after);
    assert_eq!(slowed.scheduler.stride, 4);
    let line = lost_polls(&slowed);
    assert!(line.ends_with("hz 1000  stride 4"), "{line}");
}

#[test]
fn frames_the_watchdog_found_are_shown_only_for_the_devices_that_lost_wakeups() {
    let status = Status {
        interval_s: 1.0,
        problem: None,
    };
    let title = "frames found by the watchdog (lost wakeups)";
    let none = render(&snapshot(2), &status, 80, 24).join("\n");
    assert!(!none.contains(title), "{none}");
    // veth0 lost wakeups: 30 frames found since start, 4 of them in the last second.
    let mut before = Sample::from_entries(with(entries(2, 10), "dev.veth0.watchdog_frames", 26));
    let mut after = Sample::from_entries(with(entries(2, 11), "dev.veth0.watchdog_frames", 30));
    before.proc_stat = Some(proc_stat(1000, 50, 5000));
    after.proc_stat = Some(proc_stat(1090, 52, 5100));
    let s = Snapshot::between(&before, &after);
    assert_eq!(
        (
            s.interfaces[0].watchdog_frames,
            s.interfaces[1].watchdog_frames
        ),
        (30, 0)
    );
    let rows = render(&s, &status, 80, 24);
    let all = rows.join("\n");
    assert!(all.contains(title), "{all}");
    assert_eq!(row(&rows, title), title);
    let found: Vec<_> = rows.iter().filter(|r| r.contains("since start")).collect();
    assert_eq!(found.len(), 1, "{all}");
    assert_eq!(found[0].trim_end(), "veth0      4/s, 30 since start");
}
