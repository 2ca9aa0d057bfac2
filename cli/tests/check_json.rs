//! `polld run --check --json`: one JSON object on stdout, whether the file passes or not;
//! and what `--check` verifies beyond the file itself (root only; CI runs as root).

mod common;

use std::path::Path;
use std::process::Command;

use common::{two_taps, Dir, POLLD};
use serde_json::Value;

/// The 1-based line of `text` that starts with `start` (`\n` ends it).
fn line_of(text: &str, start: &str) -> usize {
    1 + text[..text.find(&format!("\n{start}")).expect(start) + 1]
        .matches('\n')
        .count()
}

/// `polld run --check --json -c PATH`: the exit status and stdout parsed.
fn check_json(dir: &Dir, text: &str) -> (bool, Value) {
    let path = dir.0.join("polld.toml");
    std::fs::write(&path, text).unwrap();
    let out = Command::new(POLLD)
        .args(["run", "--check", "--json", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    (out.status.success(), json)
}

#[test]
fn check_json_says_ok_with_what_it_checked_or_each_error_with_its_line_and_fix() {
    require_root!();
    let dir = Dir::new("check-json");
    let good = two_taps(&dir.0.join("polld.sock"), "polling", &[]);
    let (ok, json) = check_json(&dir, &good);
    assert!(ok, "{json}");
    assert_eq!(json["ok"], true);
    assert!(json["checked"].as_array().unwrap().len() >= 2, "{json}");
    assert!(json["not_checked"]
        .to_string()
        .contains("creating the TAP device"));

    let bad = good.replace("name = \"tap1\"\n", "name = \"tap1\"\nqueue = 3\n");
    let (ok, json) = check_json(&dir, &bad);
    assert!(!ok);
    assert_eq!(json["ok"], false);
    let error = &json["errors"][0];
    assert_eq!(error["path"], dir.0.join("polld.toml").to_str().unwrap());
    assert_eq!(error["line"], line_of(&bad, "queue = 3"));
    assert_eq!(error["field"], "interfaces[1].queue");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("a TAP has one queue"),
        "{error}"
    );
    assert!(
        error["fix"].as_str().unwrap().starts_with("remove `queue`"),
        "{error}"
    );

    // A syntax error has a line and no field.
    let bad = good.replace("mac = \"02:00:00:00:02:01\"", "mac = ");
    let (ok, json) = check_json(&dir, &bad);
    assert!(!ok);
    assert_eq!(
        json["errors"][0]["line"],
        line_of(&bad, "mac = \n"),
        "{json}"
    );
}

#[test]
fn check_refuses_a_metrics_address_already_taken() {
    require_root!();
    let dir = Dir::new("check-metrics");
    // A loopback address of this test's own: once `taken` is dropped, no other test's
    // connection (their source address is 127.0.0.1) can hold the port on it.
    let pid = std::process::id();
    let ip = format!(
        "127.{}.{}.{}",
        1 + (pid >> 16) % 200,
        (pid >> 8) & 0xff,
        1 + (pid & 0xff) % 254
    );
    let taken = std::net::TcpListener::bind(format!("{ip}:0")).unwrap();
    let addr = taken.local_addr().unwrap();
    let good = two_taps(&dir.0.join("polld.sock"), "polling", &[]);
    let text = good.replace("[daemon]\n", &format!("[daemon]\nmetrics = \"{addr}\"\n"));
    let (ok, json) = check_json(&dir, &text);
    assert!(!ok, "{json}");
    let error = &json["errors"][0];
    assert_eq!(error["line"], line_of(&text, "metrics = "), "{error}");
    assert_eq!(error["field"], "daemon.metrics");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains(&format!("cannot listen on {addr}")),
        "{error}"
    );
    drop(taken);
    let (ok, json) = check_json(&dir, &text);
    assert!(ok, "{json}");
    assert!(
        json["checked"]
            .to_string()
            .contains(&format!("{addr} is free")),
        "{json}"
    );
    assert!(!Path::new(&dir.0.join("polld.sock")).exists());
}
