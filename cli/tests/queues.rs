//! Interfaces split into queues over two poll CPUs, on real traffic (root only, 2 CPUs):
//! polld with `[daemon] cpus = [0, 1]` forwards veth1 to veth2 on the veth testbed, both
//! interfaces with two queues (AF_PACKET `fanout = 2`, AF_XDP `queues = 2`), one queue of
//! each on each CPU. Two `polld gen` on CPU0 and CPU1 send so that both queues get frames;
//! both CPUs forward, each through its own queue of veth2, and conservation holds on
//! every queue and on each interface's totals.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use std::process::Stdio;

use common::{count, stop, testbed, values, Dir, Polld, POLLD};
use polld_testbed::{polld_config, PolldSetup, Role, Testbed};
use serde_json::Value;

/// Gives the testbed's four veth ends two queues each: a sender's CPU picks its transmit
/// queue, and a veth hands a frame to the peer's receive queue of that number.
fn two_queues(tb: &Testbed) {
    let l = tb.layout();
    for (ns, iface) in [
        (&l.gen_ns, &l.veth0.name),
        (&l.fwd_ns, &l.veth1.name),
        (&l.fwd_ns, &l.veth2.name),
        (&l.sink_ns, &l.veth3.name),
    ] {
        let out = std::process::Command::new("ip")
            .args([
                "netns", "exec", ns, "ethtool", "-L", iface, "rx", "2", "tx", "2",
            ])
            .output()
            .expect("ethtool");
        assert!(out.status.success(), "ethtool -L {iface}: {out:?}");
    }
}

/// Runs polld with `backend` and `split` (`fanout = 2`, `queues = 2`) on both fwd
/// interfaces while a generator on each CPU sends; returns the final report's rows and
/// the frames the generators sent that veth0 delivered (not dropped as `tx_dropped`: the
/// receiving veth's queue was full, before any socket saw them).
fn forward_on_two_queues(tag: &str, backend: &str, split: &str) -> (Vec<Value>, u64) {
    let tb = testbed(tag);
    two_queues(&tb);
    let dir = Dir::new(&format!("queues-{tag}"));
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    let setup = PolldSetup {
        backend,
        mode: "polling",
        socket: &socket,
        cpu: None,
        realtime: false,
        knobs: &[],
    };
    let text = polld_config(tb.layout(), &setup)
        .replacen("[daemon]\n", "[daemon]\ncpus = [0, 1]\n", 1)
        .replace(
            &format!("backend = {backend:?}"),
            &format!("backend = {backend:?}\n{split}"),
        );
    std::fs::write(&config, text).unwrap();
    let polld = Polld::start(&tb, &config, &socket);
    // AF_PACKET sends with qdisc bypass, on the transmit queue of its CPU: the frames of
    // the generator on CPU k reach veth1's receive queue k (AF_XDP). Eight flows spread
    // over the fanout group's hash (AF_PACKET).
    let gens: Vec<_> = [0, 1]
        .iter()
        .map(|&cpu| {
            tb.command_in(Role::Gen, Some(cpu), POLLD)
                .unwrap()
                .args(["gen", &tb.layout().veth0.name, "--backend", "af_packet"])
                .args([
                    "--rate",
                    "20k",
                    "--flows",
                    "8",
                    "--duration",
                    "1",
                    "-i",
                    "0",
                ])
                .arg("--json")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut sent = 0;
    for g in gens {
        let out = g.wait_with_output().unwrap();
        assert!(out.status.success(), "polld gen: {out:?}");
        let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
        // The end-of-run records are frames too, and polld forwards them.
        sent += summary["frames"].as_u64().unwrap() + summary["end_records"].as_u64().unwrap();
    }
    sent -= tb.counters(&tb.layout().veth0.name).unwrap().tx_dropped;
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Each queue's counters, and the interface's as their sum.
    let got = values(&polld, &["dev.veth1"]);
    let get = |name: &str| -> u64 {
        got.iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name} missing in {got:?}"))
            .1
            .parse()
            .unwrap()
    };
    for leaf in ["rx_packets", "forwarded"] {
        let total = get(&format!("dev.veth1.{leaf}"));
        let queues =
            get(&format!("dev.veth1.queue0.{leaf}")) + get(&format!("dev.veth1.queue1.{leaf}"));
        assert_eq!(total, queues, "dev.veth1.{leaf} is the sum of its queues'");
    }
    let ifconfig = polld.ok(&["ifconfig"]);
    assert!(ifconfig.contains("veth1.queue1"), "{ifconfig}");
    (stop(polld), sent)
}

/// The final report's row `name`.
fn row<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {rows:?}"))
}

/// Both queues of veth1 received and forwarded, each through a queue of veth2; the
/// totals are the sums (conservation on every row: [`stop`]); every frame delivered to
/// veth1 (`sent`) reached its sockets' rings or was dropped there for want of room.
fn assert_both_cpus_forwarded((rows, sent): (Vec<Value>, u64)) {
    let rows = &rows[..];
    for q in ["veth1.queue0", "veth1.queue1"] {
        let r = row(rows, q);
        assert!(count(r, "forwarded") > 1000, "{q} forwarded: {r}");
    }
    for q in ["veth2.queue0", "veth2.queue1"] {
        let r = row(rows, q);
        assert!(count(r, "tx_packets") > 1000, "{q} sent: {r}");
    }
    for (iface, leaf) in [
        ("veth1", "rx_packets"),
        ("veth1", "forwarded"),
        ("veth2", "tx_packets"),
    ] {
        let sum = count(row(rows, &format!("{iface}.queue0")), leaf)
            + count(row(rows, &format!("{iface}.queue1")), leaf);
        assert_eq!(count(row(rows, iface), leaf), sum, "{iface} {leaf}");
    }
    let veth1 = row(rows, "veth1");
    let arrived = count(veth1, "rx_packets") + count(veth1, "drops.rx_ring_full");
    assert!(
        arrived >= sent,
        "veth1: {arrived} frames of the {sent} sent"
    );
}

/// One test, the backends in turn: two at once would put four generators on two CPUs.
#[test]
fn af_packet_fanout_and_af_xdp_queues_forward_on_both_cpus_and_conserve_per_queue() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    assert_both_cpus_forwarded(forward_on_two_queues("qf", "af_packet", "fanout = 2"));
    assert_both_cpus_forwarded(forward_on_two_queues("qx", "af_xdp", "queues = 2"));
}
