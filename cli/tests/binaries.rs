//! The daemon and the lab are two binaries: `polld`, the one a unit starts with
//! capabilities, has no lab code in it and lists no lab command; `polld COMMAND` runs
//! polld-lab beside it for the lab's commands, and says how to install it when it is not
//! there.

mod common;

use std::process::Command;

use common::{Dir, POLLD, POLLD_LAB};

/// Strings only the lab's code holds: the guest agent's port and its init script, the
/// testbed's guest image, the seeds bench.
const LAB_STRINGS: [&str; 4] = [
    polld_testbed::vm::agent::PORT_NAME,
    "polld-vm: starting the agent",
    polld_testbed::vm::image::CACHE_DIR,
    "polld bench seeds",
];

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn the_daemon_binary_holds_none_of_the_labs_code() {
    let daemon = std::fs::read(POLLD).unwrap();
    let lab = std::fs::read(POLLD_LAB).unwrap();
    for s in LAB_STRINGS {
        assert!(contains(&lab, s), "the lab should hold {s:?}");
        assert!(!contains(&daemon, s), "{POLLD} holds the lab's {s:?}");
    }
}

#[test]
fn polld_help_lists_no_lab_command() {
    let out = Command::new(POLLD).arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let commands = help.split("Commands:").nth(1).unwrap();
    let commands = commands.split("Options:").next().unwrap();
    for line in commands.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(!polld::lab::is_command(name), "{name} in {help}");
    }
    assert!(help.contains("polld-lab"), "{help}");
}

#[test]
fn polld_runs_the_lab_for_its_commands() {
    let out = Command::new(POLLD)
        .args(["-q", "demo", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Usage: polld demo"), "{help}");
    let out = Command::new(POLLD)
        .args(["sim", "--scenario", "rizzo", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let lab = Command::new(POLLD_LAB)
        .args(["sim", "--scenario", "rizzo", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.stdout, lab.stdout, "the same command, the same answer");
}

#[test]
fn without_the_lab_beside_it_polld_says_how_to_install_it() {
    let dir = Dir::new("lonely-daemon");
    let daemon = dir.0.join("polld");
    std::fs::copy(POLLD, &daemon).unwrap();
    let out = Command::new(&daemon).args(["demo"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("polld-lab, which is not installed beside")
            && err.contains("cargo install --locked --path cli --bin polld-lab"),
        "{err}"
    );
    // Its own commands need nothing of the lab.
    let out = Command::new(&daemon)
        .args(["man", "--out"])
        .arg(dir.0.join("man"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn an_unknown_command_is_refused_as_clap_refuses_it() {
    let out = Command::new(POLLD).arg("nosuch").output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("unrecognized subcommand 'nosuch'"), "{err}");
}
