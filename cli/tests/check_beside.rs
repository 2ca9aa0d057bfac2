//! `polld run --check` beside a running polld: it checks the file all the same, skips
//! what the running daemon holds (its control socket, its metrics address) and says so,
//! as text and with `--json` (root only; CI runs as root).

mod common;

use std::process::{Command, Output};

use common::{two_taps, Dir, Polld, POLLD};
use polld_testsupport::Edit;
use serde_json::Value;

/// `polld run --check [--json] -c PATH --netns NS`.
fn check(path: &std::path::Path, ns: &str, json: bool) -> Output {
    let mut cmd = Command::new(POLLD);
    cmd.args(["run", "--check", "-c"]).arg(path);
    cmd.args(["--netns", ns]);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

#[test]
fn check_beside_a_running_polld_skips_what_it_holds_and_checks_the_rest() {
    require_root!();
    let ns = polld_dev::netns::Netns::create("beside").unwrap();
    let dir = Dir::new("check-beside");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("polld.toml");
    let metrics = "127.0.0.1:9187";
    let text = Edit::of(&two_taps(&socket, "polling", &[]))
        .daemon("metrics", metrics)
        .to_toml();
    std::fs::write(&path, &text).unwrap();
    let _polld = Polld::start_in(ns.name(), &path, &socket, &[]);

    let out = check(&path, ns.name(), false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("configuration OK"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "skipped (a running polld holds it): control socket {}: a polld is serving there",
            socket.display()
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("the metrics address {metrics}: in use")),
        "{stdout}"
    );
    assert!(
        stdout.contains("knob(s), applied as `run` applies them"),
        "{stdout}"
    );

    let out = check(&path, ns.name(), true);
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    let skipped = json["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 2, "{json}");

    // A mistake is still found beside the running daemon.
    let bad = text.replace("mode = \"polling\"", "mode = \"pollin\"");
    std::fs::write(&path, bad).unwrap();
    let out = check(&path, ns.name(), true);
    assert!(!out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["errors"].to_string().contains("mode"), "{json}");
}
