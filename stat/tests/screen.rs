//! The `polld stat` screen from fixed samples, no daemon: the rates and the CPU split
//! computed from two samples, and the layout rendered into ratatui's TestBackend at
//! several sizes down to 80x24.

use polld_control::proto::daemon_entry;
use polld_core::SysctlEntry;
use polld_stat::sample::{CpuTimes, Sample, Snapshot};
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
        // 40 % of the time in device work, 0 busy polling, 10 % idle polling.
        entry(daemon_entry::WORK_NS, 400_000_000 * t),
        entry(daemon_entry::BUSY_POLL_NS, 0),
        entry(daemon_entry::IDLE_POLL_NS, 100_000_000 * t),
    ]);
    e
}

/// Two samples one second apart; the core was busy `busy_percent` of that second.
fn samples(interfaces: usize, busy_percent: u64) -> (Sample, Sample) {
    let mut before = Sample::from_entries(entries(interfaces, 10));
    let mut after = Sample::from_entries(entries(interfaces, 11));
    before.cpu_times = Some(CpuTimes {
        busy: 1000,
        total: 5000,
    });
    after.cpu_times = Some(CpuTimes {
        busy: 1000 + busy_percent,
        total: 5100,
    });
    (before, after)
}

fn snapshot(interfaces: usize) -> Snapshot {
    let (before, after) = samples(interfaces, 70);
    Snapshot::between(&before, &after)
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
    assert!(close(s.cpu.device, 40.0));
    assert!(close(s.cpu.busy.unwrap(), 70.0));
    assert!(close(s.cpu.user.unwrap(), 30.0));
    assert!(close(s.cpu.idle.unwrap(), 30.0));
    assert!(close(s.cpu.idle_poll, 10.0));
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
}

#[test]
fn user_time_is_never_negative_and_an_unknown_cpu_gives_no_split() {
    // Device work measured above the core's busy time (timer granularity): user is 0.
    let (before, after) = samples(1, 30);
    let s = Snapshot::between(&before, &after);
    assert!(close(s.cpu.device, 40.0));
    assert!(close(s.cpu.user.unwrap(), 0.0));
    assert!(close(s.cpu.idle.unwrap(), 70.0));

    let mut before = Sample::from_entries(entries(1, 1));
    let mut after = Sample::from_entries(entries(1, 2));
    before.cpu_times = None;
    after.cpu_times = None;
    let s = Snapshot::between(&before, &after);
    assert_eq!((s.cpu.busy, s.cpu.user, s.cpu.idle), (None, None, None));
    assert!(close(s.cpu.device, 40.0));
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
        assert!(row(&rows, "CPU1 busy").contains("70.0%"), "{all}");

        // The bars: filled in proportion, all the same width, closed on the right.
        let inner = usize::from(width) - 18;
        for (label, fill, percent) in [
            ("device", '=', 40.0),
            ("user", '>', 30.0),
            ("idle", '-', 30.0),
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
            ["veth1", "polling", "up", "0", "1000", "200000", "190000", "10000"]
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
