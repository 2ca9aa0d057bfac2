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

    // A syntax error has its line, the field written there and what TOML expected.
    let bad = good.replace("mac = \"02:00:00:00:02:01\"", "mac = ");
    let (ok, json) = check_json(&dir, &bad);
    assert!(!ok);
    let error = &json["errors"][0];
    assert_eq!(error["line"], line_of(&bad, "mac = \n"), "{json}");
    assert_eq!(error["field"], "interfaces[1].mac", "{json}");
    assert!(
        error["fix"]
            .as_str()
            .unwrap()
            .contains("a string in quotes"),
        "{json}"
    );
}

/// Every error of `json`: its line, field and fix, each checked to be filled.
fn errors_of(json: &Value) -> Vec<(u64, String, String)> {
    json["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors: {json}"))
        .iter()
        .map(|e| {
            for key in ["path", "field", "message", "fix"] {
                assert!(
                    e[key].as_str().is_some_and(|s| !s.is_empty()),
                    "{key} not filled: {e}"
                );
            }
            let text = |key: &str| e[key].as_str().unwrap().to_string();
            (e["line"].as_u64().unwrap(), text("field"), text("fix"))
        })
        .collect()
}

#[test]
fn check_json_lists_every_mistake_of_a_file_each_with_its_line_field_and_fix() {
    require_root!();
    let dir = Dir::new("check-json-all");
    let good = two_taps(&dir.0.join("polld.sock"), "polling", &[]);
    let bad = format!(
        "[[knobs]]\n\"kern.polling.user_frac\" = true\nkern.polling.hz = 1000\n\n{}",
        good.replace(
            "[daemon]\n",
            "[daemon]\nsockett = \"/run/x.sock\"\ncpus = []\n"
        )
        .replace("10.82.2.1/24", "10.82.2.1/33")
    );
    let (ok, json) = check_json(&dir, &bad);
    assert!(!ok);
    let errors = errors_of(&json);
    let fields: Vec<&str> = errors.iter().map(|(_, f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        [
            "knobs",
            "knobs.\"kern.polling.user_frac\"",
            "knobs.\"kern.polling.hz\"",
            "daemon.sockett",
            "daemon.cpus",
            "interfaces[1].addresses[0]",
        ],
        "{json}"
    );
    let lines: Vec<u64> = errors.iter().map(|(l, _, _)| *l).collect();
    let expected = [
        line_of(&format!("\n{bad}"), "[[knobs]]") - 1,
        line_of(&bad, "\"kern.polling.user_frac\" = true"),
        line_of(&bad, "kern.polling.hz = 1000"),
        line_of(&bad, "sockett"),
        line_of(&bad, "cpus = []"),
        line_of(&bad, "addresses = [\"10.82.2.1/33\"]"),
    ];
    assert_eq!(lines, expected.map(|l| l as u64), "{json}");
    assert!(errors[0].2.contains("[knobs]"), "{json}");
    assert!(errors[2].2.contains("\"kern.polling.hz\" = 1000"), "{json}");
    assert!(errors[3].2.contains("did you mean `socket`?"), "{json}");

    // [interfaces] for [[interfaces]]: the field and the fix.
    let one = "[interfaces]\nname = \"tap0\"\nbackend = \"tap\"\nmac = \"02:00:00:00:01:01\"\n";
    let (ok, json) = check_json(&dir, one);
    assert!(!ok);
    let errors = errors_of(&json);
    assert_eq!(errors.len(), 1, "{json}");
    assert_eq!((errors[0].0, errors[0].1.as_str()), (1, "interfaces"));
    assert!(errors[0].2.contains("[[interfaces]]"), "{json}");
}

#[test]
fn without_the_capabilities_check_reports_the_files_own_mistakes_too() {
    require_root!();
    let dir = Dir::new("check-json-caps");
    let good = two_taps(
        &dir.0.join("polld.sock"),
        "polling",
        &[("kern.polling.user_frac", 100)],
    );
    let path = dir.0.join("polld.toml");
    std::fs::write(&path, &good).unwrap();
    // As an unprivileged user: no capability at all.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(POLLD)
        .args(["run", "--check", "--json", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    let errors = errors_of(&json);
    let fields: Vec<&str> = errors.iter().map(|(_, f, _)| f.as_str()).collect();
    assert_eq!(
        fields,
        ["knobs.\"kern.polling.user_frac\"", "interfaces[0].backend"],
        "{json}"
    );
    assert!(
        json.to_string().contains("CAP_NET_ADMIN is missing"),
        "{json}"
    );
    assert!(errors[0].2.contains("write a value in 0..99"), "{json}");
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
