//! The README's traffic example on the testbed, as written (root only; CI runs as root):
//! `polld gen veth0 --flows 4 ...` through polld reaches `polld sink veth3` in all four
//! flows, and flows that cannot be forwarded are counted lost by the sink, which never
//! saw them, thanks to the generator's end-of-run record.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{testbed, Dir, Polld, POLLD};
use polld_testbed::{PolldSetup, Testbed};
use serde_json::Value;

/// The `"type": "summary"` line of JSON-lines output.
fn summary(out: Vec<u8>) -> Value {
    let text = String::from_utf8(out).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "summary")
        .unwrap_or_else(|| panic!("no summary in {text}"))
}

/// `polld sink veth3 --netns SINK -i 1 --json` for a few seconds around
/// `polld gen veth0 --netns GEN --rate 20k --size 60 --flows 4 --duration 1 -i 1 EXTRA`
/// (the README's, slower and shorter, with `--json`); returns both summaries.
fn gen_into_sink(tb: &Testbed, extra: &[&str]) -> (Value, Value) {
    let l = tb.layout();
    let sink = Command::new(POLLD)
        .args(["sink", "veth3", "--netns", &l.sink_ns, "-i", "1", "--json"])
        .args(["--duration", "3"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let gen = Command::new(POLLD)
        .args(["gen", "veth0", "--netns", &l.gen_ns, "--rate", "20k"])
        .args([
            "--size",
            "60",
            "--flows",
            "4",
            "--duration",
            "1",
            "-i",
            "1",
            "--json",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(gen.status.success(), "{gen:?}");
    let out = sink.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (summary(out.stdout), summary(gen.stdout))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

#[test]
fn the_readme_gen_example_delivers_every_flow_and_unroutable_flows_count_as_lost() {
    require_root!();
    let tb = testbed("x");
    let dir = Dir::new("examples");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    let config = polld_testbed::polld_config(
        tb.layout(),
        &PolldSetup {
            backend: "af_packet",
            mode: "polling",
            socket: &socket,
            cpu: None,
            realtime: false,
            knobs: &[],
        },
    );
    std::fs::write(&path, config).unwrap();
    let polld = Polld::start(&tb, &path, &socket);

    // Every frame sent is received or counted lost (a loaded machine may lose a few).
    let (sink, gen) = gen_into_sink(&tb, &[]);
    let a = &sink["analysis"];
    let (sent, received, lost) = (
        n(&gen["frames"]),
        n(&a["sequence"]["received"]),
        n(&a["sequence"]["lost"]),
    );
    eprintln!("as written: sent {sent}, sink {a}");
    assert_eq!(n(&a["flows"]), 4, "every flow arrives: {a}");
    assert_eq!(n(&a["flows_issued"]), 4, "{a}");
    assert_eq!(received + lost, sent, "{a}");
    assert!(lost * 100 < sent, "{a}");

    // Each flow its own addresses: flow 1 comes from polld's own address (a martian),
    // flows 2 and 3 go to addresses without a neighbour. The sink never sees them, and
    // still counts them lost.
    let (sink, gen) = gen_into_sink(&tb, &["--vary", "src-ip,dst-ip"]);
    let a = &sink["analysis"];
    let (sent, received, lost) = (
        n(&gen["frames"]),
        n(&a["sequence"]["received"]),
        n(&a["sequence"]["lost"]),
    );
    eprintln!("--vary src-ip,dst-ip: sent {sent}, sink {a}");
    assert_eq!(n(&a["flows"]), 1, "{a}");
    assert_eq!(n(&a["flows_issued"]), 4, "{a}");
    assert_eq!(received + lost, sent, "{a}");
    assert!(lost >= sent / 4 * 3, "three flows of four lost: {a}");
    polld.stop();
}
