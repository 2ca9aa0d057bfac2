//! dist/polld.service: a Type=notify unit whose polld sends READY=1 once its interfaces
//! are open, with every capability polld may need in its bounding set (root only for the
//! run; CI runs as root).

mod common;

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
fn the_unit_is_type_notify_and_bounds_polld_to_the_capabilities_it_may_need() {
    assert_eq!(setting("Type"), ["notify"]);
    assert_eq!(setting("ExecReload"), ["/bin/kill", "-HUP", "$MAINPID"]);
    let mut all: Vec<&str> = Cap::ALL.iter().map(|c| c.name()).collect();
    all.sort();
    for key in ["CapabilityBoundingSet", "AmbientCapabilities"] {
        let mut listed = setting(key);
        listed.sort();
        assert_eq!(listed, all, "{key}");
    }
    // It checks the file before starting, and runs the same file.
    let config = "/etc/polld/polld.toml";
    assert_eq!(
        setting("ExecStartPre")[1..],
        ["run", "--check", "-c", config]
    );
    assert_eq!(setting("ExecStart")[1..], ["run", "-c", config]);
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
