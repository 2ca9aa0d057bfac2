//! Every config in examples/ passes `polld run --check`, in a network namespace that has
//! the interfaces it names (root only; CI runs as root).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Dir, POLLD};
use polld_dev::netns::Netns;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

/// `polld run --check -c PATH --netns NS --socket DIR/polld.sock`: its output, which
/// must say the configuration is OK.
fn check_passes(path: &Path, ns: &Netns, dir: &Dir) -> String {
    let out = Command::new(POLLD)
        .args(["run", "--check", "--netns", ns.name(), "--socket"])
        .arg(dir.0.join("polld.sock"))
        .arg("-c")
        .arg(path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("configuration OK"),
        "{}: {}{}",
        path.display(),
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// A namespace with enp1s0f0 and enp1s0f1, each a veth with `queues` receive queues.
fn two_nics(queues: u32) -> Netns {
    let ns = Netns::create("ex").unwrap();
    let q = queues.to_string();
    for (nic, peer) in [("enp1s0f0", "peer0"), ("enp1s0f1", "peer1")] {
        ns.ip(&[
            "link",
            "add",
            nic,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            peer,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ])
        .unwrap();
        ns.ip(&["link", "set", nic, "up"]).unwrap();
        ns.ip(&["link", "set", peer, "up"]).unwrap();
    }
    ns
}

/// Every file in examples/, so that a new one cannot go unchecked.
const CHECKED: [&str; 4] = [
    "router-two-nics.toml",
    "router-taps-netns.toml",
    "per-cpu-queues.toml",
    "auto-mode.toml",
];

#[test]
fn every_example_is_checked_here() {
    let mut files: Vec<String> = std::fs::read_dir(example(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut checked = CHECKED.map(String::from).to_vec();
    checked.sort();
    assert_eq!(files, checked);
}

#[test]
fn the_router_between_two_nics_passes_check() {
    require_root!();
    let (ns, dir) = (two_nics(1), Dir::new("ex-two-nics"));
    let out = check_passes(&example("router-two-nics.toml"), &ns, &dir);
    assert!(
        out.contains("queue(s) 0 of enp1s0f0's 1 receive queue(s)"),
        "{out}"
    );
}

#[test]
fn auto_mode_passes_check() {
    require_root!();
    let (ns, dir) = (two_nics(1), Dir::new("ex-auto"));
    check_passes(&example("auto-mode.toml"), &ns, &dir);
}

#[test]
fn per_cpu_queues_pass_check() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    let (ns, dir) = (two_nics(2), Dir::new("ex-percpu"));
    let out = check_passes(&example("per-cpu-queues.toml"), &ns, &dir);
    assert!(out.contains("[daemon] cpus = [0, 1]"), "{out}");
    assert!(
        out.contains("queue(s) 0, 1 of enp1s0f1's 2 receive queue(s)"),
        "{out}"
    );
}

#[test]
fn the_router_between_taps_in_namespaces_passes_check() {
    require_root!();
    // The TAP testbed's namespaces gen, fwd and sink, under names of this test's own.
    let [gen, fwd, sink] = ["exgen", "exfwd", "exsink"].map(|p| Netns::create(p).unwrap());
    let dir = Dir::new("ex-taps");
    let text = std::fs::read_to_string(example("router-taps-netns.toml"))
        .unwrap()
        .replace("netns = \"gen\"", &format!("netns = {:?}", gen.name()))
        .replace("netns = \"sink\"", &format!("netns = {:?}", sink.name()));
    assert_eq!(
        text.matches(gen.name()).count() + text.matches(sink.name()).count(),
        2
    );
    let path = dir.0.join("router-taps-netns.toml");
    std::fs::write(&path, text).unwrap();
    let out = check_passes(&path, &fwd, &dir);
    assert!(out.contains("creating the TAP device"), "{out}");
}
