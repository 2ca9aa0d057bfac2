//! The testbed on the real kernel (needs root; skips, saying so, without it). Each test
//! uses its own namespace prefix, and its `Testbed` removes the namespaces when dropped,
//! also when the test panics.

mod common;

use std::os::fd::AsFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{ping, prefix, root, two_cpus, up};
use polld_testbed::{
    down, status, Layout, Placement, Role, Testbed, TestbedArgs, TestbedError, UpOptions,
};
use rustix::net::sockopt::Timeout;
use rustix::net::{recv, RecvFlags};

/// A child that is killed (by its pid) and reaped when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn up_creates_the_three_namespaces_with_the_baseline_topology() {
    if !root() {
        return;
    }
    let testbed = up("topo", UpOptions::default());
    let layout = testbed.layout();
    let status = status(layout);
    assert!(status.up, "{status:#?}");
    for ns in &status.namespaces {
        assert!(ns.exists, "{}", ns.name);
        let lo = ns.interfaces.iter().find(|i| i.name == "lo").unwrap();
        assert!(lo.admin_up, "loopback of {} is down", ns.name);
        assert_eq!(ns.ip_forward, Some(false), "{}", ns.name);
        assert!(ns.errors.is_empty(), "{:?}", ns.errors);
    }
    for iface in layout.ifaces() {
        let ns = status
            .namespaces
            .iter()
            .find(|n| n.name == iface.ns)
            .unwrap();
        let seen = ns.interfaces.iter().find(|i| i.name == iface.name).unwrap();
        assert_eq!(seen.mac, iface.mac);
        assert_eq!(seen.addresses, vec![iface.cidr()]);
        assert!(seen.admin_up);
        let peer = layout.peer_of(iface);
        let neighbour = ns
            .neighbours
            .iter()
            .find(|n| n.addr == peer.addr.to_string() && n.dev == iface.name)
            .unwrap_or_else(|| panic!("no neighbour for {} on {}", peer.addr, iface.name));
        assert_eq!(neighbour.mac.as_deref(), Some(peer.mac.as_str()));
        assert_eq!(neighbour.state, vec!["PERMANENT"]);
    }
    let [gen, fwd, sink] = [
        &status.namespaces[0],
        &status.namespaces[1],
        &status.namespaces[2],
    ];
    assert!(
        gen.routes
            .contains(&"10.0.2.0/24 via 10.0.1.2 dev veth0".to_string()),
        "{:?}",
        gen.routes
    );
    assert!(
        sink.routes
            .contains(&"10.0.1.0/24 via 10.0.2.1 dev veth3".to_string()),
        "{:?}",
        sink.routes
    );
    assert!(fwd
        .neighbours
        .iter()
        .any(|n| n.addr == "10.0.2.100" && n.mac.as_deref() == Some("02:00:00:00:02:02")));
}

#[test]
fn the_kernel_alone_carries_ping_and_iperf3_in_wire_sized_frames_with_kernel_forwarding() {
    if !root() {
        return;
    }
    for placement in [Placement::NapiThreaded, Placement::Rps, Placement::None] {
        let testbed = up(
            &format!("kf{}", placement.name()),
            UpOptions {
                kernel_forwarding: true,
                placement,
                ..UpOptions::default()
            },
        );
        let before = testbed.counters("veth3").unwrap();
        assert!(
            ping(&testbed, Role::Gen, "10.0.2.2", "3"),
            "gen→sink ping, {placement:?}"
        );
        assert!(
            ping(&testbed, Role::Sink, "10.0.1.1", "1"),
            "sink→gen ping, {placement:?}"
        );
        let after = testbed.counters("veth3").unwrap();
        assert!(
            after.rx_packets >= before.rx_packets + 3,
            "{before:?} → {after:?}"
        );
        // A user-space forwarder on veth1 must only ever see wire-sized frames: no TSO
        // super-frames from gen, no GRO merging by threaded NAPI.
        let capture = Capture::start(&testbed.layout().fwd_ns, "veth1");
        let report = iperf3(&testbed);
        let (frames, largest) = capture.stop();
        let received = report["end"]["sum_received"]["bytes"].as_u64();
        assert!(
            received > Some(0),
            "iperf3 moved no bytes, {placement:?}: {report:#}"
        );
        assert!(
            frames > 100,
            "the capture on veth1 saw only {frames} frames"
        );
        assert!(
            largest <= 1514,
            "veth1 received a {largest}-byte frame with {placement:?}"
        );
    }
}

/// One second of iperf3 TCP from gen to sink; its JSON report.
fn iperf3(testbed: &Testbed) -> serde_json::Value {
    let _server = Reaped(
        testbed
            .command_in(Role::Sink, None, "iperf3")
            .unwrap()
            .args(["-s", "-1"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The server needs a moment to listen; retry the client until it connects. iperf3
    // 3.12 exits 0 even when it cannot connect, so its JSON says whether it ran.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let output = testbed
            .command_in(Role::Gen, None, "iperf3")
            .unwrap()
            .args(["-c", "10.0.2.2", "-t", "1", "-J"])
            .output()
            .unwrap();
        let report: serde_json::Value =
            serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
        if report["error"].is_null() || Instant::now() > deadline {
            return report;
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// Counts the frames an AF_PACKET socket receives on an interface, and the largest.
struct Capture {
    stop: Arc<AtomicBool>,
    reader: thread::JoinHandle<(u64, usize)>,
}

impl Capture {
    fn start(ns: &str, iface: &str) -> Capture {
        let iface = iface.to_string();
        let socket = polld_dev::netns::in_netns(ns, move || {
            let protocol = (libc::ETH_P_ALL as u16).to_be();
            let fd = polld_dev::afpacket::raw_socket(&iface, protocol)
                .unwrap_or_else(|e| panic!("AF_PACKET socket: {e}"));
            polld_dev::sys::set_packet_option(fd.as_fd(), libc::PACKET_IGNORE_OUTGOING, 1).unwrap();
            let timeout = Some(Duration::from_millis(100));
            rustix::net::sockopt::set_socket_timeout(&fd, Timeout::Recv, timeout).unwrap();
            fd
        })
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let reader = thread::spawn(move || {
            let (mut frames, mut largest) = (0, 0);
            let mut buffer = [0u8; 2048];
            while !stopped.load(Ordering::Relaxed) {
                // MSG_TRUNC: the frame's real length, even if larger than the buffer.
                if let Ok((_, n)) = recv(&socket, &mut buffer[..], RecvFlags::TRUNC) {
                    if n > 0 {
                        frames += 1;
                        largest = largest.max(n);
                    }
                }
            }
            (frames, largest)
        });
        Capture { stop, reader }
    }

    fn stop(self) -> (u64, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.reader.join().unwrap()
    }
}

#[test]
fn without_kernel_forwarding_fwd_receives_but_does_not_forward() {
    if !root() {
        return;
    }
    let testbed = up("nofwd", UpOptions::default());
    let (rx_before, tx_before) = (
        testbed.counters("veth1").unwrap(),
        testbed.counters("veth2").unwrap(),
    );
    assert!(
        !ping(&testbed, Role::Gen, "10.0.2.2", "3"),
        "fwd forwarded without ip_forward"
    );
    let (rx_after, tx_after) = (
        testbed.counters("veth1").unwrap(),
        testbed.counters("veth2").unwrap(),
    );
    assert!(
        rx_after.rx_packets >= rx_before.rx_packets + 3,
        "pings never reached fwd"
    );
    assert_eq!(
        tx_after.tx_packets, tx_before.tx_packets,
        "fwd sent something towards sink"
    );
    // fwd's own address still answers: the link works, only forwarding is off.
    assert!(ping(&testbed, Role::Gen, "10.0.1.2", "1"));
}

#[test]
fn down_cleans_up_after_a_crashed_run_and_tolerates_missing_namespaces() {
    if !root() {
        return;
    }
    let layout = Layout::new(&prefix("crash"));
    std::mem::forget(Testbed::up(&layout, &UpOptions::default()).unwrap());
    // One namespace already gone: down must still remove the others.
    Command::new("ip")
        .args(["netns", "del", &layout.sink_ns])
        .status()
        .unwrap();
    let report = down(&layout).unwrap();
    assert_eq!(
        report.removed,
        vec![layout.gen_ns.clone(), layout.fwd_ns.clone()]
    );
    assert_eq!(report.absent, vec![layout.sink_ns.clone()]);
    assert!(status(&layout).namespaces.iter().all(|ns| !ns.exists));
    let again = down(&layout).unwrap();
    assert!(again.removed.is_empty());
    assert_eq!(again.absent.len(), 3);
}

#[test]
fn up_twice_names_the_namespaces_and_force_recreates_them() {
    if !root() {
        return;
    }
    let first = up("twice", UpOptions::default());
    let layout = first.layout().clone();
    let err = Testbed::up(&layout, &UpOptions::default()).unwrap_err();
    match &err {
        TestbedError::AlreadyExists { namespaces, .. } => {
            assert_eq!(
                namespaces,
                &layout.namespaces().map(str::to_string).to_vec()
            )
        }
        other => panic!("expected AlreadyExists, got {other}"),
    }
    assert!(err.to_string().contains("polld testbed down"), "{err}");
    let second = Testbed::up(
        &layout,
        &UpOptions {
            force: true,
            ..UpOptions::default()
        },
    )
    .unwrap();
    assert_eq!(second.report().replaced.len(), 3);
    // The first value's namespaces are gone; only `second` may tear down now.
    first.keep();
    assert!(status(&layout).up);
    drop(second);
    assert!(status(&layout).namespaces.iter().all(|ns| !ns.exists));
}

fn status_json(prefix: &str) -> serde_json::Value {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TestbedArgs,
    }
    let cli = Cli::try_parse_from(["testbed", "status", "--json", "--prefix", prefix]).unwrap();
    let mut out = Vec::new();
    polld_testbed::run(&cli.args, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn status_json_reflects_the_kernel_including_rps_placement() {
    if !root() {
        return;
    }
    let testbed = up(
        "json",
        UpOptions {
            placement: Placement::Rps,
            ..UpOptions::default()
        },
    );
    let layout = testbed.layout();
    let json = status_json(&layout.prefix);
    assert_eq!(json["up"], true);
    let fwd = &json["namespaces"][1];
    assert_eq!(fwd["name"], layout.fwd_ns.as_str());
    assert_eq!(fwd["ip_forward"], false);
    let veth1 = fwd["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "veth1")
        .unwrap();
    assert_eq!(veth1["mac"], "02:00:00:00:01:02");
    assert!(veth1["counters"]["rx_packets"].is_u64());
    // Cross-check rps_cpus with the file itself, read inside the namespace.
    let file = Command::new("ip")
        .args([
            "netns",
            "exec",
            &layout.fwd_ns,
            "cat",
            "/sys/class/net/veth1/queues/rx-0/rps_cpus",
        ])
        .output()
        .unwrap();
    let file = String::from_utf8_lossy(&file.stdout);
    assert_eq!(veth1["rps_cpus"], file.trim());
    if two_cpus() {
        assert_eq!(
            u64::from_str_radix(file.trim(), 16).unwrap(),
            0b10,
            "veth1 RPS to CPU1"
        );
        let placed = &testbed.report().placement.interfaces[1];
        assert_eq!((placed.applied, placed.cpu), (Placement::Rps, Some(1)));
    }

    // Reality changes, status follows.
    Command::new("ip")
        .args(["-n", &layout.fwd_ns, "link", "set", "veth2", "down"])
        .status()
        .unwrap();
    let json = status_json(&layout.prefix);
    assert_eq!(json["up"], false);
    let veth2 = json["namespaces"][1]["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "veth2")
        .cloned()
        .unwrap();
    assert_eq!(veth2["admin_up"], false);
}
