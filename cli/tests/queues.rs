//! Interfaces split into queues over two poll CPUs, on real traffic (root only, 2 CPUs):
//! polld with `[daemon] cpus = [0, 1]` forwards veth1 to veth2 on the veth testbed, both
//! interfaces with two queues (AF_PACKET `fanout = 2`, AF_XDP `queues = 2`), one queue of
//! each on each CPU. Two `polld gen` on CPU0 and CPU1 send so that both queues get frames;
//! both CPUs forward, each through its own queue of veth2, and conservation holds on
//! every queue and on each interface's totals. The AF_XDP queues are then reopened
//! together after veth1 is deleted and created again.
//!
//! Its own test binary, so that no other test of this crate runs on the CPUs meanwhile.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{count, counter, ip, ip_in, stop, testbed, values, Dir, Polld, POLLD};
use polld_testbed::{polld_config, PolldSetup, Role, Testbed};
use polld_testsupport::eventually;
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
/// interfaces while a generator on each CPU sends; with `reopen`, then deletes veth1 and
/// creates it again, and sends again once polld has reopened both queues. Returns the
/// final report's rows.
fn forward_on_two_queues(tag: &str, backend: &str, split: &str, reopen: bool) -> Vec<Value> {
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
    send_from_both_cpus(&tb);
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
    if reopen {
        let rx = |q: u32| counter(&polld, &format!("dev.veth1.queue{q}.rx_packets"));
        let before = [rx(0), rx(1)];
        recreate_veth1(&tb, &polld);
        send_from_both_cpus(&tb);
        eventually(
            "both queues receive again after the reopen",
            Duration::from_secs(10),
            || (0..2).all(|q| rx(q) > before[q as usize] + 1000),
        );
        for q in [0, 1] {
            assert!(
                rx(q) > before[q as usize] + 1000,
                "queue {q} after the reopen"
            );
        }
    }
    stop(polld)
}

/// Sends 20 kpps for 1 s from a generator on CPU0 and one on CPU1, 8 flows each; returns
/// when both are done. AF_PACKET sends with
/// qdisc bypass, on the transmit queue of its CPU: the frames of the generator on CPU k
/// reach veth1's receive queue k (AF_XDP); the flows spread over the fanout group's hash
/// (AF_PACKET).
fn send_from_both_cpus(tb: &Testbed) {
    let l = tb.layout();
    let gens: Vec<_> = [0, 1]
        .iter()
        .map(|&cpu| {
            tb.command_in(Role::Gen, Some(cpu), POLLD)
                .unwrap()
                .args([
                    "gen",
                    &l.veth0.name,
                    "--backend",
                    "af_packet",
                    "--rate",
                    "20k",
                ])
                .args(["--flows", "8", "--duration", "1", "-i", "0"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for g in gens {
        let out = g.wait_with_output().unwrap();
        assert!(out.status.success(), "polld gen: {out:?}");
    }
}

/// Deletes the veth1/veth0 pair and creates it again, two queues each, with the same
/// names, MACs and gen's address; waits until polld has reopened both queues of veth1.
fn recreate_veth1(tb: &Testbed, polld: &Polld) {
    let l = tb.layout();
    // Each queue is reopened by its own CPU: both must be back.
    let link = || {
        let links = values(polld, &["dev.veth1.queue0.link", "dev.veth1.queue1.link"]);
        links
            .iter()
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    ip_in(&l.fwd_ns, &["link", "del", &l.veth1.name]);
    let queues = ["numrxqueues", "2", "numtxqueues", "2"];
    let mut add = vec!["link", "add", &l.veth1.name];
    add.extend(queues);
    add.extend([
        "netns",
        &l.fwd_ns,
        "type",
        "veth",
        "peer",
        "name",
        &l.veth0.name,
    ]);
    add.extend(queues);
    add.extend(["netns", &l.gen_ns]);
    ip(&add);
    ip_in(
        &l.gen_ns,
        &["addr", "add", &l.veth0.cidr(), "dev", &l.veth0.name],
    );
    for (ns, iface) in [(&l.fwd_ns, &l.veth1), (&l.gen_ns, &l.veth0)] {
        ip_in(
            ns,
            &["link", "set", &iface.name, "address", &iface.mac, "up"],
        );
    }
    eventually("veth1 reopened (up up)", Duration::from_secs(20), || {
        link() == "up up"
    });
}

/// The final report's row `name`.
fn row<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {rows:?}"))
}

/// Both queues of veth1 received and forwarded, each through a queue of veth2; the
/// totals are the sums (conservation on every row: [`stop`]).
fn assert_both_cpus_forwarded(rows: &[Value]) {
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
}

/// One test, the backends in turn: two at once would put four generators on two CPUs.
/// AF_XDP's queues are also reopened together after their interface went away and came
/// back (one XDP program for both).
#[test]
fn af_packet_fanout_and_af_xdp_queues_forward_on_both_cpus_and_conserve_per_queue() {
    require_root!();
    if !common::two_cpus() {
        return;
    }
    assert_both_cpus_forwarded(&forward_on_two_queues(
        "qf",
        "af_packet",
        "fanout = 2",
        false,
    ));
    assert_both_cpus_forwarded(&forward_on_two_queues("qx", "af_xdp", "queues = 2", true));
}
