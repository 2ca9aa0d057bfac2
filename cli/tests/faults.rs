//! Faults under a flood on the namespace testbed (root only; CI runs as root): a link
//! going down and up, SIGKILL and a restart (on veth with AF_XDP, and on the TAP
//! testbed), a control-socket storm. polld keeps forwarding what it can, and every frame
//! that reached it is accounted for.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    assert_conserved, ip_in, router_config, testbed, testbed_of, Dir, Polld, Running, POLLD,
};
use polld_testbed::{Devices, Testbed};
use polld_testsupport::eventually;
use serde_json::Value;

/// `polld gen` on gen's end of the testbed (veth0 or tap0) at `rate` for `secs`, killed
/// (by its pid) on drop.
fn flood(tb: &Testbed, rate: &str, secs: u32) -> Running {
    let l = tb.layout();
    let child = Command::new(POLLD)
        .args(["gen", &l.veth0.name, "--netns", &l.gen_ns, "-i", "0"])
        .args(["--rate", rate, "--duration", &secs.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

fn value(polld: &Polld, name: &str) -> String {
    polld.ok(&["ctl", "-n", name]).trim().to_string()
}

/// Frames forwarded from the receive interface `input` (veth1 or tap0).
fn forwarded_from(polld: &Polld, input: &str) -> u64 {
    value(polld, &format!("dev.{input}.forwarded"))
        .parse()
        .unwrap()
}

fn forwarded(polld: &Polld) -> u64 {
    forwarded_from(polld, "veth1")
}

/// How many frames polld forwards from `input` over `window`.
fn forwarding_from(polld: &Polld, input: &str, window: Duration) -> u64 {
    let before = forwarded_from(polld, input);
    std::thread::sleep(window);
    forwarded_from(polld, input) - before
}

fn forwarding(polld: &Polld, window: Duration) -> u64 {
    forwarding_from(polld, "veth1", window)
}

/// Waits (up to 6 one-second windows) for a window in which polld forwards more than `least`
/// frames from veth1; returns the last window's count. A window on a shared machine can be
/// spoilt by unrelated work, so one slow window is not a verdict.
fn resumes(polld: &Polld, least: u64) -> u64 {
    let mut last = 0;
    for _ in 0..6 {
        last = forwarding(polld, Duration::from_secs(1));
        if last > least {
            break;
        }
    }
    last
}

/// Waits (up to 20 s) until a restarted polld answers on its control socket.
fn answers(polld: &Polld) {
    eventually(
        "the restarted polld answers",
        Duration::from_secs(20),
        || {
            polld
                .run(&["ctl", "-n", "kern.polling.handlers"])
                .status
                .success()
        },
    );
}

/// Stops polld and checks conservation on every interface.
fn stop_conserved(polld: Polld) {
    let interfaces: Vec<Value> = serde_json::from_str(&polld.stop()).unwrap();
    for iface in &interfaces {
        assert_conserved(iface);
    }
}

#[test]
fn a_link_going_down_and_up_under_a_flood_loses_nothing_unaccounted() {
    require_root!();
    let tb = testbed("l");
    let fwd = tb.layout().fwd_ns.clone();
    let dir = Dir::new("linkflap");
    let (path, socket) = router_config(&tb, &dir, "af_xdp", "polling", None, false, &[]);
    let polld = Polld::start(&tb, &path, &socket);
    let _flood = flood(&tb, "50k", 16);
    assert!(resumes(&polld, 10_000) > 10_000, "polld does not forward");

    ip_in(&fwd, &["link", "set", "veth2", "down"]);
    eventually("polld sees veth2 down", Duration::from_secs(5), || {
        value(&polld, "dev.veth2.link") == "down"
    });
    ip_in(&fwd, &["link", "set", "veth2", "up"]);
    // polld forwards by fwd's kernel tables, and the kernel flushed veth2's neighbours
    // when it went down, the permanent ones too: they are set again, as on a box whose
    // neighbours are static (the flood's destination answers no ARP).
    let l = tb.layout();
    for (ip, mac) in [
        (l.veth3.addr, &l.veth3.mac),
        (l.unowned_dst, &l.unowned_mac),
    ] {
        let ip = ip.to_string();
        let replace = ["neigh", "replace", &ip, "lladdr", mac, "dev", "veth2"];
        ip_in(&fwd, &[&replace[..], &["nud", "permanent"]].concat());
    }
    eventually(
        "veth2 comes back up in polld",
        Duration::from_secs(5),
        || value(&polld, "dev.veth2.link") == "up",
    );
    // veth's carrier takes a moment; then forwarding resumes at the offered rate.
    std::thread::sleep(Duration::from_millis(500));
    let after = resumes(&polld, 10_000);
    assert!(after > 10_000, "forwarding did not resume: {after} in 1 s");
    stop_conserved(polld);
}

#[test]
fn after_sigkill_no_xdp_program_stays_and_a_restart_reclaims_the_socket() {
    require_root!();
    let tb = testbed("k");
    let fwd = tb.layout().fwd_ns.clone();
    let dir = Dir::new("sigkill");
    let (path, socket) = router_config(&tb, &dir, "af_xdp", "polling", None, false, &[]);
    let polld = Polld::start(&tb, &path, &socket);
    assert!(ip_in(&fwd, &["link", "show", "veth1"]).contains("xdp"));
    let _flood = flood(&tb, "50k", 16);
    assert!(resumes(&polld, 10_000) > 10_000, "polld does not forward");

    polld.kill();
    assert!(socket.exists(), "a killed polld leaves its socket file");
    for ifname in ["veth1", "veth2"] {
        let link = ip_in(&fwd, &["link", "show", ifname]);
        assert!(
            !link.contains("xdp"),
            "stale XDP program on {ifname}: {link}"
        );
    }

    let polld = Polld::start(&tb, &path, &socket);
    answers(&polld);
    assert_eq!(value(&polld, "kern.polling.handlers"), "2");
    assert!(ip_in(&fwd, &["link", "show", "veth1"]).contains("xdp"));
    let after = resumes(&polld, 10_000);
    assert!(
        after > 10_000,
        "the restarted polld does not forward: {after} in 1 s"
    );
    stop_conserved(polld);
}

/// The first line of `ip -n NS link show TAP`, which starts with the interface index.
fn tap_link(ns: &str, tap: &str) -> String {
    ip_in(ns, &["link", "show", tap])
        .lines()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn after_sigkill_on_the_tap_testbed_a_restart_reattaches_the_same_taps_and_forwards() {
    require_root!();
    let tb = testbed_of("K", Devices::Tap);
    let l = tb.layout().clone();
    let taps = [(&l.gen_ns, "tap0"), (&l.sink_ns, "tap1")];
    let index = |line: &str| line.split(':').next().unwrap().to_string();
    let indexes: Vec<String> = taps.iter().map(|(ns, t)| index(&tap_link(ns, t))).collect();
    let dir = Dir::new("sigkill-tap");
    let (path, socket) = router_config(&tb, &dir, "tap", "polling", None, false, &[]);
    let polld = Polld::start(&tb, &path, &socket);
    let _flood = flood(&tb, "50k", 10);
    let deadline = Instant::now() + Duration::from_secs(5);
    while forwarding_from(&polld, "tap0", Duration::from_millis(300)) < 3_000 {
        assert!(Instant::now() < deadline, "polld does not forward on TAP");
    }

    polld.kill();
    assert!(socket.exists(), "a killed polld leaves its socket file");
    // The persistent TAPs outlive the process that held them, without a reader.
    for ((ns, tap), before) in taps.iter().zip(&indexes) {
        let link = tap_link(ns, tap);
        assert_eq!(&index(&link), before, "{tap} was recreated: {link}");
        assert!(
            link.contains("NO-CARRIER"),
            "{tap} still has a reader: {link}"
        );
    }

    // The same config again: the same TAPs reattached, the stale socket reclaimed.
    let polld = Polld::start(&tb, &path, &socket);
    answers(&polld);
    assert_eq!(value(&polld, "kern.polling.handlers"), "2");
    for ((ns, tap), before) in taps.iter().zip(&indexes) {
        let link = tap_link(ns, tap);
        assert_eq!(&index(&link), before, "{tap} was recreated: {link}");
        assert!(!link.contains("NO-CARRIER"), "{tap} has no reader: {link}");
        assert!(
            ip_in(ns, &["addr", "show", tap]).contains("10.0."),
            "{tap} lost its address"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let after = forwarding_from(&polld, "tap0", Duration::from_millis(500));
        if after > 5_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted polld does not forward: {after} in 0.5 s"
        );
    }
    stop_conserved(polld);
}

/// One control exchange: the reply, or "" when the server closed without one.
fn exchange(socket: &std::path::Path, request: &[u8]) -> String {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return String::new();
    };
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(request);
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    reply
}

#[test]
fn a_control_socket_storm_is_answered_or_refused_while_forwarding_goes_on() {
    require_root!();
    let tb = testbed("t");
    let dir = Dir::new("storm");
    let (path, socket) = router_config(&tb, &dir, "af_packet", "polling", None, false, &[]);
    let polld = Polld::start(&tb, &path, &socket);
    let _flood = flood(&tb, "50k", 8);
    let before = forwarded(&polld);
    let start = Instant::now();

    // 32 clients at once, each 10 exchanges: listings, writes, garbage, and silence
    // (which holds a connection until the server's read timeout).
    let clients: Vec<_> = (0..32)
        .map(|c| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                let mut answered = 0;
                for i in 0..10 {
                    let request: &[u8] = match (c + i) % 5 {
                        0 | 3 => b"{\"op\":\"list\",\"prefix\":\"kern.polling\"}\n",
                        1 => b"{\"op\":\"set\",\"assignments\":[[\"kern.polling.user_frac\",\"50\"]]}\n",
                        2 => b"garbage\n",
                        _ => b"",
                    };
                    let reply = exchange(&socket, request);
                    if reply.contains("entries") || reply.contains("results") {
                        answered += 1;
                    }
                }
                answered
            })
        })
        .collect();
    let answered: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let took = start.elapsed();
    let during = forwarded(&polld) - before;
    eprintln!(
        "storm: {answered} of 192 well-formed requests answered in {took:?}; {during} frames forwarded meanwhile"
    );
    assert!(answered > 0, "no request answered");
    assert!(
        during > 10_000,
        "forwarding stalled during the storm: {during}"
    );
    assert_eq!(
        value(&polld, "kern.polling.handlers"),
        "2",
        "polld still answers"
    );
    stop_conserved(polld);
}
