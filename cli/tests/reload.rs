//! SIGHUP: a running polld reads its config file again and applies the modes and knobs
//! that changed; a bad file is refused with a logged error and polld goes on with the
//! config it has (root only; CI runs as root). `polld ctl reload` does the same and waits
//! for the outcome, failing with the file's mistakes.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{signal, two_taps, Dir, Polld, POLLD};
use polld_testsupport::eventually;
use rustix::process::Signal;

/// A polld started by the test, killed if still running when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `polld ctl -n NAME` against `socket`.
fn ctl(socket: &str, name: &str) -> String {
    let out = Command::new(POLLD)
        .args(["ctl", "-n", name])
        .env("POLLD_SOCKET", socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Waits until `name` reads `want` (the reload thread applies it soon after SIGHUP).
fn wait_for(socket: &str, name: &str, want: &str) {
    eventually(
        &format!("{name} becomes {want}"),
        Duration::from_secs(20),
        || ctl(socket, name) == want,
    );
}

fn hangup(polld: &Running) {
    signal(&polld.0, Signal::HUP);
}

/// Waits until polld's stderr (a file) has `text`; returns it.
fn wait_logged(log: &std::path::Path, text: &str) -> String {
    eventually(
        &format!("polld logs {text:?}"),
        Duration::from_secs(20),
        || {
            let logged = std::fs::read_to_string(log).unwrap_or_default();
            logged.contains(text).then_some(logged)
        },
    )
}

#[test]
fn sighup_applies_mode_and_knob_changes_and_refuses_a_bad_file() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("hup").unwrap();
    let dir = Dir::new("reload");
    let socket_path = dir.0.join("polld.sock");
    let socket = socket_path.to_str().unwrap();
    let path = dir.0.join("polld.toml");
    let log = dir.0.join("stderr");
    std::fs::write(&path, two_taps(&socket_path, "interrupt", &[])).unwrap();
    let polld = Running(
        Command::new(POLLD)
            .args(["run", "--netns", ns.name(), "-c"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    eventually(
        "polld's control socket exists",
        Duration::from_secs(20),
        || std::path::Path::new(socket).exists(),
    );
    let default_frac = ctl(socket, "kern.polling.user_frac");
    assert_ne!(default_frac, "17");
    assert_eq!(ctl(socket, "dev.tap0.mode"), "interrupt");

    // Mode and knob changed in the file: applied at SIGHUP.
    let changed = two_taps(&socket_path, "polling", &[("kern.polling.user_frac", 17)]);
    std::fs::write(&path, &changed).unwrap();
    hangup(&polld);
    wait_for(socket, "kern.polling.user_frac", "17");
    assert_eq!(ctl(socket, "dev.tap0.mode"), "polling");
    wait_logged(&log, "polld: SIGHUP: kern.polling.user_frac: ");

    // A file that does not parse, then one with a knob value the dataplane refuses:
    // each refused as a whole, logged, and polld goes on as it was.
    std::fs::write(
        &path,
        changed.replace("mode = \"polling\"", "mode = \"polling"),
    )
    .unwrap();
    hangup(&polld);
    wait_logged(
        &log,
        "the file is refused, polld goes on with the config it has",
    );
    let refused = two_taps(
        &socket_path,
        "interrupt",
        &[("kern.polling.user_frac", 150)],
    );
    std::fs::write(&path, refused).unwrap();
    hangup(&polld);
    let logged = wait_logged(
        &log,
        "knobs.\"kern.polling.user_frac\": 150 is out of range",
    );
    assert_eq!(logged.matches("the file is refused").count(), 2, "{logged}");
    assert_eq!(ctl(socket, "kern.polling.user_frac"), "17");
    assert_eq!(
        ctl(socket, "dev.tap0.mode"),
        "polling",
        "a refused file changes nothing"
    );

    // The knob left the file: back to its default.
    std::fs::write(&path, two_taps(&socket_path, "polling", &[])).unwrap();
    hangup(&polld);
    wait_for(socket, "kern.polling.user_frac", &default_frac);

    // Still running, and stops as usual.
    signal(&polld.0, Signal::INT);
    let mut polld = polld;
    let status = polld.0.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn ctl_reload_applies_a_good_file_and_fails_naming_the_mistake_of_a_bad_one() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("ctlreload").unwrap();
    let dir = Dir::new("ctlreload");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("polld.toml");
    std::fs::write(&path, two_taps(&socket, "interrupt", &[])).unwrap();
    let polld = Polld::start_in(ns.name(), &path, &socket, &[]);
    let read = |name: &str| polld.ok(&["ctl", "-n", name]).trim().to_string();
    assert_eq!(read("polld.reloads"), "0");
    assert_eq!(read("polld.reload_time"), "0");

    // A good file: applied by the time the command returns.
    let good = two_taps(&socket, "polling", &[("kern.polling.user_frac", 17)]);
    std::fs::write(&path, &good).unwrap();
    assert!(polld.ok(&["ctl", "reload"]).ends_with(": reloaded\n"));
    assert_eq!(read("kern.polling.user_frac"), "17");
    assert_eq!(read("dev.tap0.mode"), "polling");
    assert_eq!(read("polld.reloads"), "1");
    assert_ne!(read("polld.reload_time"), "0");

    // A bad file: the command fails with the mistake, and polld goes on as it was.
    let bad = two_taps(&socket, "interrupt", &[("kern.polling.user_frac", 150)]);
    std::fs::write(&path, bad).unwrap();
    let out = polld.run(&["ctl", "reload"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr.contains("knobs.\"kern.polling.user_frac\": 150 is out of range")
            && stderr.contains("the file is refused"),
        "{stderr}"
    );
    assert_eq!(read("polld.reload_failures"), "1");
    assert_eq!(read("polld.reloads"), "1");
    assert_eq!(read("kern.polling.user_frac"), "17");
    assert_eq!(read("dev.tap0.mode"), "polling");

    // The file mended: the next reload applies it and clears the error.
    std::fs::write(&path, good.replace("17", "18")).unwrap();
    polld.ok(&["ctl", "reload"]);
    assert_eq!(read("kern.polling.user_frac"), "18");
    assert_eq!(read("polld.reload_error"), "");
    polld.stop();
}
