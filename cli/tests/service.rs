//! dist/polld.service: a Type=notify unit whose polld sends READY=1 once its interfaces
//! are open, RELOADING=1 and READY=1 around a reload, and WATCHDOG=1 while its poll
//! threads make progress (root only for the runs; CI runs as root); run by a user of its
//! own, which `systemd-analyze` verifies and rates at most 3.0 exposed.

mod common;

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{signal, Dir, POLLD};
use polld_runtime::caps::Cap;
use polld_testsupport::{ConfigFile, Interface};
use rustix::process::Signal;

const UNIT: &str = include_str!("../../dist/polld.service");

/// The words of the unit's `key=` line.
fn setting(key: &str) -> Vec<&'static str> {
    let line = UNIT
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in dist/polld.service"));
    line.split_whitespace().collect()
}

#[test]
fn the_unit_is_type_notify_with_a_watchdog_and_a_reload_that_waits_for_polld() {
    assert_eq!(setting("Type"), ["notify"]);
    assert_eq!(
        setting("ExecReload"),
        ["/usr/local/bin/polld", "ctl", "reload"]
    );
    assert_eq!(setting("User"), ["polld"]);
    assert_eq!(setting("RuntimeDirectoryPreserve"), ["yes"]);
    // Above two status ticks (runtime/src/notify.rs).
    let watchdog = setting("WatchdogSec")[0];
    let secs: u64 = watchdog.strip_suffix('s').unwrap().parse().unwrap();
    assert!(secs >= 1, "{watchdog}");
    // The capabilities it grants are ones polld may need, the same in both lines.
    let all: Vec<&str> = Cap::ALL.iter().map(|c| c.name()).collect();
    let bounding = setting("CapabilityBoundingSet");
    assert_eq!(setting("AmbientCapabilities"), bounding);
    for cap in &bounding {
        assert!(all.contains(cap), "{cap} is not one polld uses");
    }
    // It checks the file before starting, and runs the same file.
    let config = "/etc/polld/polld.toml";
    assert_eq!(
        setting("ExecStartPre")[1..],
        ["run", "--check", "-c", config]
    );
    assert_eq!(setting("ExecStart")[1..], ["run", "-c", config]);
    // The user the unit runs as is the one dist/polld.sysusers creates.
    let sysusers = include_str!("../../dist/polld.sysusers");
    assert!(
        sysusers.lines().any(|l| l.starts_with("u polld ")),
        "{sysusers}"
    );
}

/// `systemd-analyze ARGS UNIT` on the unit with the binary under test in place of
/// /usr/local/bin/polld; `None` when systemd-analyze does not run here (see
/// [`polld_testsupport::skip::skip_unless`]).
fn analyze(args: &[&str]) -> Option<std::process::Output> {
    let runs = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !polld_testsupport::skip::skip_unless(runs, "needs systemd-analyze (systemd)") {
        return None;
    }
    let dir = Dir::new(args[0]);
    let unit = dir.0.join("polld.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/polld", POLLD)).unwrap();
    let out = Command::new("systemd-analyze")
        .args(args)
        .arg(&unit)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    Some(out)
}

#[test]
fn systemd_analyze_verifies_the_unit() {
    let Some(out) = analyze(&["verify", "--man=no"]) else {
        return;
    };
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!said.contains("polld.service"), "{said}");
}

#[test]
fn systemd_analyze_rates_the_unit_exposure_at_most_3() {
    let Some(out) = analyze(&["security", "--offline=yes"]) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| l.split_once("Overall exposure level for polld.service: "))
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in {text}"));
    assert!(level <= 3.0, "exposure {level}:\n{text}");
}

#[test]
fn polld_sends_ready_to_notify_socket_once_its_interfaces_are_open() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("notify").unwrap();
    let dir = Dir::new("notify");
    let socket = dir.0.join("polld.sock");
    let notify = dir.0.join("notify.sock");
    let listener = UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let path = dir.0.join("polld.toml");
    let text = ConfigFile::new()
        .socket(&socket)
        .interface(
            Interface::new("tap0")
                .backend("tap")
                .mac("02:00:00:00:01:01")
                .address("10.83.1.1/24"),
        )
        .to_toml();
    std::fs::write(&path, text).unwrap();
    let mut polld = Command::new(POLLD)
        .args(["run", "--netns", ns.name(), "-c"])
        .arg(&path)
        .env("NOTIFY_SOCKET", &notify)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 256];
    let received = listener.recv(&mut buf);
    // When READY=1 arrives, the interfaces are open and the control socket answers.
    let tap_there = ns.ip(&["link", "show", "dev", "tap0"]).is_ok();
    let answers = socket.exists();
    signal(&polld, Signal::TERM);
    let status = polld.wait().unwrap();
    let n = received.unwrap_or_else(|e| panic!("no notification in {:?}: {e}", started.elapsed()));
    let message = String::from_utf8_lossy(&buf[..n]);
    assert!(message.lines().any(|l| l == "READY=1"), "{message:?}");
    assert!(
        message
            .lines()
            .any(|l| l == format!("MAINPID={}", polld.id())),
        "{message:?}"
    );
    assert!(tap_there && answers, "READY=1 before the devices were open");
    assert!(status.success(), "{status}");
}

/// The notifications polld sends to a socket of the test's, as systemd would read them.
struct Notifications(UnixDatagram);

impl Notifications {
    fn bind(path: &std::path::Path) -> Notifications {
        let socket = UnixDatagram::bind(path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        Notifications(socket)
    }

    /// Every message received within `within`, each as its lines.
    fn during(&self, within: Duration) -> Vec<String> {
        self.read(within, |_| false)
    }

    /// Reads until a message has the line `line`, for at most `within`; returns every
    /// message read.
    fn until(&self, line: &str, within: Duration) -> Vec<String> {
        let got = self.read(within, |m| m.lines().any(|l| l == line));
        assert!(has(&got, line), "no {line} in {within:?}: {got:?}");
        got
    }

    /// The messages received within `within`, up to the first that is `last`.
    fn read(&self, within: Duration, last: impl Fn(&str) -> bool) -> Vec<String> {
        let start = Instant::now();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while start.elapsed() < within {
            if let Ok(n) = self.0.recv(&mut buf) {
                got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                if last(got.last().unwrap()) {
                    break;
                }
            }
        }
        got
    }
}

fn has(messages: &[String], line: &str) -> bool {
    messages.iter().any(|m| m.lines().any(|l| l == line))
}

/// A polld on one TAP in `ns`, told of `notify` and a watchdog of 1 s.
fn watched_polld(
    ns: &polld_dev::netns::Netns,
    dir: &Dir,
    notify: &std::path::Path,
    extra: &[&str],
) -> std::process::Child {
    let path = dir.0.join("polld.toml");
    let text = ConfigFile::new()
        .socket(dir.0.join("polld.sock"))
        .interface(
            Interface::new("tap0")
                .backend("tap")
                .mac("02:00:00:00:01:01")
                .address("10.84.1.1/24"),
        )
        .to_toml();
    std::fs::write(&path, text).unwrap();
    Command::new(POLLD)
        .args(["run", "--netns", ns.name(), "-c"])
        .arg(&path)
        .args(extra)
        .env("NOTIFY_SOCKET", notify)
        .env("WATCHDOG_USEC", "1000000")
        .env_remove("WATCHDOG_PID")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn polld_feeds_the_watchdog_and_says_reloading_then_ready_around_a_reload() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("watchdog").unwrap();
    let dir = Dir::new("watchdog");
    let notify = dir.0.join("notify.sock");
    let messages = Notifications::bind(&notify);
    let mut polld = watched_polld(&ns, &dir, &notify, &[]);
    messages.until("READY=1", Duration::from_secs(30));
    // Idle, it still makes progress: WATCHDOG=1 each half second.
    let fed = messages.during(Duration::from_millis(1800));
    let watchdogs = fed.iter().filter(|m| m.as_str() == "WATCHDOG=1\n").count();
    assert!(watchdogs >= 2, "{fed:?}");

    let reload = Command::new(POLLD)
        .args(["ctl", "reload", "--socket"])
        .arg(dir.0.join("polld.sock"))
        .output()
        .unwrap();
    assert!(reload.status.success(), "{reload:?}");
    let around = messages.until("READY=1", Duration::from_secs(10));
    let reloading = around
        .iter()
        .position(|m| m.lines().next() == Some("RELOADING=1"))
        .unwrap_or_else(|| panic!("no RELOADING=1 before READY=1: {around:?}"));
    let usec = around[reloading]
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(usec.is_some_and(|u| u > 0), "{around:?}");
    assert!(has(
        &messages.during(Duration::from_millis(1200)),
        "WATCHDOG=1"
    ));

    signal(&polld, Signal::TERM);
    assert!(polld.wait().unwrap().success());
}

#[test]
fn a_poll_thread_that_stops_making_progress_stops_the_watchdog() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("stall").unwrap();
    let dir = Dir::new("stall");
    let notify = dir.0.join("notify.sock");
    let messages = Notifications::bind(&notify);
    // The --pcap recording goes to a pipe nobody reads: once the pipe is full, the poll
    // thread blocks in its write, as on a hung disk.
    let prefix = dir.0.join("rec");
    let fifo = dir.0.join("rec.tap0.pcap");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let _unread = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let mut polld = watched_polld(&ns, &dir, &notify, &["--pcap", prefix.to_str().unwrap()]);
    messages.until("READY=1", Duration::from_secs(30));
    assert!(has(
        &messages.during(Duration::from_millis(1200)),
        "WATCHDOG=1"
    ));

    ns.ip(&["addr", "add", "10.84.1.2/24", "dev", "tap0"])
        .unwrap();
    ns.ip(&[
        "neigh",
        "replace",
        "10.84.1.1",
        "lladdr",
        "02:00:00:00:01:01",
        "dev",
        "tap0",
    ])
    .unwrap();
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            "ping",
            "-f",
            "-q",
            "-s",
            "1400",
            "-w",
            "4",
        ])
        .arg("10.84.1.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    // A WATCHDOG=1 of the period the stall began in may still come; none after.
    messages.during(Duration::from_millis(600));
    let after = messages.during(Duration::from_millis(2000));
    assert!(!has(&after, "WATCHDOG=1"), "{after:?}");
    // Stuck, not gone: systemd would kill and restart it.
    assert!(polld.try_wait().unwrap().is_none(), "polld exited");
    polld.kill().unwrap();
    polld.wait().unwrap();
}
