//! Everyday tools through polld as through the Linux kernel (root only), IPv6 and IPv4:
//! ping with DF above the next link's MTU (packet too big, then the learned path MTU),
//! traceroute over UDP, ICMP and TCP, tracepath, traceroute to the route kinds that
//! forward nothing, iperf3 over TCP and UDP, and ping and TCP to the box's own
//! addresses.
//!
//! Topology (namespaces of this test's own): gen `a0` — fwd `r0` | fwd `r1` (MTU 1280) —
//! sink `b0` (MTU 1280), IPv4 and IPv6 on both links. Every tool runs twice from gen:
//! with the kernel forwarding in fwd, then with polld forwarding there as it runs on a
//! box's own NICs: AF_XDP, the kernel's tables, and `pass_local` (on by default) so the
//! box's own addresses, ARP and neighbour discovery stay the kernel's. The kernel's
//! forwarding stays on, as a router's would: AF_XDP takes the frames before the kernel
//! sees them, and the kernel's forwarded-datagram counters must not move while polld
//! runs, so every packet that crossed was polld's. The kernels' per-destination ICMP rate
//! limits are off (polld's stays as it comes), so that each run sees every answer however
//! close the tools follow each other. Tool outputs carry timings: what is compared is what they found, parsed
//! (replies, errors and their senders, path MTUs, hops with their addresses and marks).

mod common;

use std::net::SocketAddr;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::{tcp_connects, Dir, Line, Polld, Running};
use polld_dev::netns::Netns;
use polld_testsupport::eventually;

/// The programs the test runs, with the Debian packages that have them (`.ci/deps`).
const TOOLS: [(&str, &str); 6] = [
    ("ping", "iputils-ping"),
    ("traceroute", "traceroute"),
    ("tracepath", "iputils-tracepath"),
    ("iperf3", "iperf3"),
    ("ethtool", "ethtool"),
    ("ss", "iproute2"),
];

/// One address family's side of the topology.
struct Family {
    name: &'static str,
    /// Options that pick the family (`-6`, or none).
    flag: &'static [&'static str],
    /// fwd's addresses on gen's and sink's links, and gen's and sink's own.
    fwd_gen_side: &'static str,
    fwd_sink_side: &'static str,
    sink: &'static str,
    /// The largest ping payload that fits the 1280-byte link, and one above it.
    fits: u32,
    /// Route kinds of fwd's kernel that forward nothing, their prefixes and a
    /// destination in each, and last a destination fwd has no route for; gen routes them
    /// all to fwd.
    rejected: [(&'static str, &'static str, &'static str); 4],
    /// How long the kernel needs after an ICMP error to gen before it sends gen the error
    /// of a route that forwards nothing: IPv4's come from a per-host bucket of one a
    /// second (`net.ipv4.route.error_cost`, a global sysctl), which the ICMP errors' own
    /// limit empties when it is off; IPv6's have no such bucket.
    reject_gap: Duration,
}

const V6: Family = Family {
    name: "IPv6",
    flag: &["-6"],
    fwd_gen_side: "2001:db8:1::1",
    fwd_sink_side: "2001:db8:2::1",
    sink: "2001:db8:2::2",
    fits: 1280 - 40 - 8,
    rejected: [
        ("unreachable", "2001:db8:91::/64", "2001:db8:91::1"),
        ("prohibit", "2001:db8:92::/64", "2001:db8:92::1"),
        ("blackhole", "2001:db8:93::/64", "2001:db8:93::1"),
        ("no route", "", "2001:db8:94::1"),
    ],
    reject_gap: Duration::ZERO,
};

const V4: Family = Family {
    name: "IPv4",
    flag: &[],
    fwd_gen_side: "10.0.1.1",
    fwd_sink_side: "10.0.2.1",
    sink: "10.0.2.2",
    fits: 1280 - 20 - 8,
    rejected: [
        ("unreachable", "10.91.0.0/16", "10.91.0.1"),
        ("prohibit", "10.92.0.0/16", "10.92.0.1"),
        ("blackhole", "10.93.0.0/16", "10.93.0.1"),
        ("no route", "", "10.94.0.1"),
    ],
    reject_gap: Duration::from_millis(1200),
};

/// A ping payload above the 1280-byte link's MTU.
const TOO_BIG: u32 = 1400;

fn topology() -> Line {
    let sysctls = [
        // Addresses usable at once.
        "net.ipv6.conf.default.accept_dad=0",
        // Every answer, however close the probes come.
        "net.ipv4.icmp_ratelimit=0",
        "net.ipv6.icmp.ratelimit=0",
    ];
    let macs = [
        "02:00:00:00:07:01",
        "02:00:00:00:07:02",
        "02:00:00:00:08:01",
        "02:00:00:00:08:02",
    ];
    let t = Line::create("tl", &sysctls, macs);
    for (ns, dev, addr) in [
        (&t.gen, "a0", "2001:db8:1::2/64"),
        (&t.fwd, "r0", "2001:db8:1::1/64"),
        (&t.fwd, "r1", "2001:db8:2::1/64"),
        (&t.sink, "b0", "2001:db8:2::2/64"),
    ] {
        ns.ip(&["addr", "add", addr, "dev", dev]).unwrap();
        // No transmit offloads: polld forwards frames as they are, and a 64 KB TCP
        // segment or a checksum left for the NIC would not survive.
        ns.exec("ethtool", &["-K", dev, "tx", "off"]).unwrap();
    }
    for (ns, dev) in [(&t.fwd, "r1"), (&t.sink, "b0")] {
        ns.ip(&["link", "set", dev, "mtu", "1280"]).unwrap();
    }
    for (ns, prefix, via) in [
        (&t.gen, "10.0.2.0/24", "10.0.1.1"),
        (&t.gen, "10.64.0.0/10", "10.0.1.1"),
        (&t.gen, "2001:db8:2::/64", "2001:db8:1::1"),
        (&t.gen, "2001:db8:90::/44", "2001:db8:1::1"),
        (&t.sink, "10.0.1.0/24", "10.0.2.1"),
        (&t.sink, "2001:db8:1::/64", "2001:db8:2::1"),
    ] {
        ns.ip(&["route", "add", prefix, "via", via]).unwrap();
    }
    for family in [&V6, &V4] {
        for (kind, prefix, _) in &family.rejected[..3] {
            t.fwd.ip(&["route", "add", kind, prefix]).unwrap();
        }
    }
    for sysctl in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
        t.fwd.sysctl(sysctl).unwrap();
    }
    t
}

/// What one run of `program ARGS` in `ns` printed, both streams (ping and traceroute
/// report errors on either), whatever its exit status.
fn output(ns: &Netns, program: &str, args: &[&str]) -> String {
    let out: Output = ns.command(program).args(args).output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

/// `text` without the timings of a tool's output ("0.220", "ms", "0.018ms", "time=…",
/// "rtt …" lines), words joined by one space, line by line, consecutive repeats once.
fn without_timings(text: &str) -> Vec<String> {
    let timing = |w: &str| {
        let number = w.trim_end_matches("ms");
        w == "ms"
            || w.starts_with("time=")
            || (number.contains('.') && number.parse::<f64>().is_ok())
    };
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with("rtt ") || line.starts_with("---") || line.trim().is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().filter(|w| !timing(w)).collect();
        let line = words.join(" ");
        if lines.last() != Some(&line) {
            lines.push(line);
        }
    }
    lines
}

/// What ping found: each reply, error and local error, and the count received, without
/// timings or the statistics' times.
fn ping_outcome(text: &str) -> String {
    without_timings(text)
        .into_iter()
        .filter(|l| !l.starts_with("PING "))
        .map(|l| match l.split_once(" packet loss") {
            // "2 packets transmitted, 2 received, 0% packet loss, time 1011ms"
            Some((counts, _)) => counts.to_string(),
            None => l,
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What traceroute found: per hop, the addresses that answered (each once, `*` if none)
/// and the marks (`!N`, `!X`, `!H`…), without timings.
fn traceroute_outcome(text: &str) -> String {
    let mut hops = Vec::new();
    for line in without_timings(text).iter().skip(1) {
        let mut words = line.split_whitespace();
        let Some(hop) = words.next() else { continue };
        let mut addresses: Vec<&str> = Vec::new();
        let mut marks: Vec<&str> = Vec::new();
        for w in words {
            let list = if w.starts_with('!') {
                &mut marks
            } else if w == "*" {
                continue;
            } else {
                &mut addresses
            };
            if !list.contains(&w) {
                list.push(w);
            }
        }
        if addresses.is_empty() {
            addresses.push("*");
        }
        let mut words = vec![hop.to_string(), addresses.join(",")];
        words.extend(marks.iter().map(|m| m.to_string()));
        hops.push(words.join(" "));
    }
    hops.join("; ")
}

/// What tracepath found: its lines without timings ("2: 2001:db8:1::1 pmtu 1280",
/// "Resume: pmtu 1280 hops 2 back 2").
fn tracepath_outcome(text: &str) -> String {
    without_timings(text).join("; ")
}

/// The path MTU `ns` holds for `dst` (`ip route get`), if it learned one.
fn learned_mtu(ns: &Netns, dst: &str) -> String {
    let route = ns.ip(&["route", "get", dst]).unwrap();
    let mut words = route.split_whitespace();
    match words.find(|w| *w == "mtu").and_then(|_| words.next()) {
        Some(mtu) => format!("path MTU {mtu}"),
        None => "no path MTU".to_string(),
    }
}

/// Forgets the path MTUs gen and sink learned.
fn forget_path_mtus(t: &Line) {
    for ns in [&t.gen, &t.sink] {
        for family in ["-4", "-6"] {
            ns.ip(&[family, "route", "flush", "cache"]).unwrap();
        }
    }
}

/// An iperf3 run of 2 s from gen to sink (UDP at 10 Mbit/s if `udp`): "completed" when
/// the client ends without error, carried data and (UDP) lost under half: a sanity
/// bound, the machine may be loaded; rates are not compared.
fn iperf3(t: &Line, family: &Family, port: u16, udp: bool) -> String {
    let port = port.to_string();
    let server = t
        .sink
        .command("iperf3")
        .args(["-s", "-1", "-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Running(server);
    eventually(
        &format!("iperf3 -s listens on port {port} in sink"),
        Duration::from_secs(10),
        || !output(&t.sink, "ss", &["-Hltn", &format!("sport = :{port}")]).is_empty(),
    );
    let mut args = vec!["-c", family.sink, "-p", port.as_str(), "-t", "2", "-J"];
    if udp {
        args.extend(["-u", "-b", "10M"]);
    }
    let out = t.gen.command("iperf3").args(&args).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let end = &report["end"];
    let carried = if udp {
        let lost = end["sum"]["lost_percent"].as_f64().unwrap_or(100.0);
        end["sum"]["packets"].as_u64().unwrap_or(0) > 0 && lost < 50.0
    } else {
        end["sum_received"]["bytes"].as_u64().unwrap_or(0) > 0
    };
    if out.status.success() && report["error"].is_null() && carried {
        "completed".to_string()
    } else {
        format!("failed: {}", String::from_utf8_lossy(&out.stdout))
    }
}

/// Pings sink from gen in both families until one answers: every neighbour on the way
/// resolved.
fn warm_up(t: &Line) {
    for family in [&V6, &V4] {
        eventually(
            &format!("{} ping from gen to sink answers", family.name),
            Duration::from_secs(20),
            || {
                let args = [family.flag, &["-n", "-c", "1", "-W", "1", family.sink]].concat();
                output(&t.gen, "ping", &args).contains(" 1 received")
            },
        );
    }
}

/// Every tool in both families, from gen; each outcome named. `port` is the first of the
/// TCP and UDP ports used.
fn run_tools(t: &Line, port: u16) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut note = |name: String, outcome: String| found.push((name, outcome));
    let gen = &t.gen;
    let mut port = port;
    let mut next_port = || {
        port += 1;
        port
    };
    for family in [&V6, &V4] {
        let f = family.name;
        let ping = |extra: &[&str]| {
            let args = [family.flag, &["-n", "-W", "2"], extra, &[family.sink]].concat();
            ping_outcome(&output(gen, "ping", &args))
        };
        let (too_big, fits) = (TOO_BIG.to_string(), family.fits.to_string());

        // Path MTU discovery: the router's error, what gen learned from it, then DF
        // packets that fit, and larger ones gen fragments to the learned MTU.
        forget_path_mtus(t);
        note(
            format!("{f} ping -M do -s {too_big}"),
            ping(&["-c", "1", "-M", "do", "-s", &too_big]),
        );
        note(format!("{f} learned"), learned_mtu(gen, family.sink));
        note(
            format!("{f} ping -M do -s {too_big} again"),
            ping(&["-c", "1", "-M", "do", "-s", &too_big]),
        );
        note(
            format!("{f} ping -M do -s {fits}"),
            ping(&["-c", "2", "-i", "0.2", "-M", "do", "-s", &fits]),
        );
        note(
            format!("{f} ping -M want -s {too_big}"),
            ping(&["-c", "2", "-i", "0.2", "-M", "want", "-s", &too_big]),
        );

        note(format!("{f} ping -t 1"), ping(&["-c", "1", "-t", "1"]));

        forget_path_mtus(t);
        let args = [family.flag, &["-n", family.sink]].concat();
        note(
            format!("{f} tracepath"),
            tracepath_outcome(&output(gen, "tracepath", &args)),
        );
        for (method, option) in [("UDP", None), ("ICMP", Some("-I")), ("TCP", Some("-T"))] {
            let mut args = [family.flag, &["-n", "-w", "2", "-m", "5"][..]].concat();
            args.extend(option);
            args.push(family.sink);
            note(
                format!("{f} traceroute {method}"),
                traceroute_outcome(&output(gen, "traceroute", &args)),
            );
        }
        // One probe at a time, each after the kernel's credit for it is back; two to a
        // hop, so that one answer lost on a loaded machine changes nothing.
        for (kind, _, dst) in family.rejected {
            std::thread::sleep(family.reject_gap);
            let args = [
                family.flag,
                &["-n", "-N", "1", "-q", "2", "-w", "1", "-m", "2", dst],
            ]
            .concat();
            note(
                format!("{f} traceroute to {kind}"),
                traceroute_outcome(&output(gen, "traceroute", &args)),
            );
        }
        note(
            format!("{f} iperf3 TCP"),
            iperf3(t, family, next_port(), false),
        );
        note(
            format!("{f} iperf3 UDP"),
            iperf3(t, family, next_port(), true),
        );

        // The box's own addresses, on the link gen is on and across it (one hop away
        // even so).
        let args = [
            family.flag,
            &["-n", "-w", "2", "-m", "5", family.fwd_sink_side],
        ]
        .concat();
        note(
            format!("{f} traceroute to {}", family.fwd_sink_side),
            traceroute_outcome(&output(gen, "traceroute", &args)),
        );
        for own in [family.fwd_gen_side, family.fwd_sink_side] {
            let args = [family.flag, &["-n", "-c", "2", "-i", "0.2", "-W", "2", own]].concat();
            note(
                format!("{f} ping {own}"),
                ping_outcome(&output(gen, "ping", &args)),
            );
            let at = SocketAddr::new(own.parse().unwrap(), next_port());
            let tcp = tcp_connects(&t.fwd, gen, at);
            note(format!("{f} TCP to {at}"), format!("connects: {tcp}"));
        }
    }
    found
}

/// The kernel's forwarded datagrams in `ns`: IPv4's `ForwDatagrams` and IPv6's
/// `Ip6OutForwDatagrams`.
fn kernel_forwarded(ns: &Netns) -> (u64, u64) {
    let snmp = ns.exec("cat", &["/proc/net/snmp"]).unwrap();
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip: "));
    let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "ForwDatagrams")
        .unwrap();
    let v4 = values.split_whitespace().nth(at).unwrap().parse().unwrap();
    let snmp6 = ns.exec("cat", &["/proc/net/snmp6"]).unwrap();
    let v6 = snmp6
        .lines()
        .find_map(|l| l.strip_prefix("Ip6OutForwDatagrams"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (v4, v6)
}

/// The tools missing from `PATH`, with their packages.
fn missing_tools() -> Vec<String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    TOOLS
        .iter()
        .filter(|(tool, _)| !std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .map(|(tool, package)| format!("{tool} (apt-get install {package})"))
        .collect()
}

#[test]
fn everyday_tools_behave_through_polld_as_through_linux() {
    require_root!();
    let missing = missing_tools();
    if !polld_testsupport::skip::skip_unless(
        missing.is_empty(),
        &format!("needs {} (.ci/deps installs them)", missing.join(", ")),
    ) {
        return;
    }
    let t = topology();

    warm_up(&t);
    let linux = run_tools(&t, 17_100);

    let dir = Dir::new("tools");
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    let mut text = format!("[daemon]\nsocket = {:?}\n", socket.display().to_string());
    for name in ["r0", "r1"] {
        text += &format!("\n[[interfaces]]\nname = {name:?}\nbackend = \"af_xdp\"\n");
    }
    std::fs::write(&config, text).unwrap();
    let before = kernel_forwarded(&t.fwd);
    let polld = Polld::start_in(t.fwd.name(), &config, &socket, &[]);
    warm_up(&t);
    let ours = run_tools(&t, 17_200);
    let after = kernel_forwarded(&t.fwd);
    let interfaces = common::stop(polld);

    let mut report = String::new();
    for ((name, linux), (_, ours)) in linux.iter().zip(&ours) {
        let same = if linux == ours { "same" } else { "DIFFERENT" };
        report += &format!("{name}: {same}\n  linux: {linux}\n  polld: {ours}\n");
    }
    eprintln!("{report}");
    assert_eq!(
        before, after,
        "the kernel forwarded (IPv4, IPv6 datagrams) while polld ran\n{report}"
    );
    let forwarded = common::count(&interfaces[0], "forwarded");
    assert!(forwarded > 1000, "polld forwarded {forwarded} from r0");
    for ((name, linux), (_, ours)) in linux.iter().zip(&ours) {
        assert_eq!(
            linux, ours,
            "{name}: polld differs from Linux\n{report}\npolld's interfaces: {interfaces:#?}"
        );
    }
    // What both must have found, lest the comparison hold of two failures.
    let expected = [
        (
            "IPv6 ping -M do -s 1400",
            "From 2001:db8:1::1 icmp_seq=1 Packet too big: mtu=1280",
        ),
        ("IPv6 learned", "path MTU 1280"),
        (
            "IPv6 ping -t 1",
            "From 2001:db8:1::1 icmp_seq=1 Time exceeded: Hop limit",
        ),
        ("IPv6 traceroute to 2001:db8:2::1", "1 2001:db8:2::1"),
        ("IPv6 ping -M want -s 1400", "2 received"),
        ("IPv6 tracepath", "Resume: pmtu 1280 hops 2 back 2"),
        ("IPv6 traceroute TCP", "1 2001:db8:1::1; 2 2001:db8:2::2"),
        ("IPv6 traceroute to prohibit", "1 2001:db8:1::1 !X"),
        ("IPv6 iperf3 UDP", "completed"),
        (
            "IPv4 ping -M do -s 1400",
            "From 10.0.1.1 icmp_seq=1 Frag needed and DF set (mtu = 1280)",
        ),
        ("IPv4 learned", "path MTU 1280"),
        ("IPv4 traceroute ICMP", "1 10.0.1.1; 2 10.0.2.2"),
        ("IPv4 traceroute to unreachable", "1 10.0.1.1 !H"),
        ("IPv4 iperf3 TCP", "completed"),
    ];
    for (name, part) in expected {
        let (_, outcome) = ours.iter().find(|(n, _)| n == name).unwrap();
        assert!(outcome.contains(part), "{name}: {outcome:?} lacks {part:?}");
    }
}

#[test]
fn outcomes_keep_what_the_tools_found_without_timings() {
    let ping = "PING 2001:db8:2::2(2001:db8:2::2) 1400 data bytes\n\
                From 2001:db8:1::1 icmp_seq=1 Packet too big: mtu=1280\n\n\
                --- 2001:db8:2::2 ping statistics ---\n\
                1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms\n";
    assert_eq!(
        ping_outcome(ping),
        "From 2001:db8:1::1 icmp_seq=1 Packet too big: mtu=1280; \
         1 packets transmitted, 0 received, +1 errors, 100%"
    );
    let replies = "1408 bytes from 10.0.2.2: icmp_seq=1 ttl=63 time=0.247 ms\n\
                   rtt min/avg/max/mdev = 0.247/0.300/0.354/0.053 ms\n";
    assert_eq!(
        ping_outcome(replies),
        "1408 bytes from 10.0.2.2: icmp_seq=1 ttl=63"
    );
    let traceroute = "traceroute to 10.92.0.1 (10.92.0.1), 3 hops max, 60 byte packets\n \
                      1  10.0.1.1  0.063 ms !X * *\n \
                      2  * * *\n \
                      3  10.0.2.2  0.015 ms  10.0.2.9  0.004 ms  10.0.2.2  0.004 ms\n";
    assert_eq!(
        traceroute_outcome(traceroute),
        "1 10.0.1.1 !X; 2 *; 3 10.0.2.2,10.0.2.9"
    );
    let tracepath = " 1?: [LOCALHOST]                        0.019ms pmtu 1500\n \
                     1:  2001:db8:1::1                                         0.045ms \n \
                     1:  2001:db8:1::1                                         0.007ms \n \
                     2:  2001:db8:1::1                                         0.010ms pmtu 1280\n \
                     2:  2001:db8:2::2                                         0.014ms reached\n     \
                     Resume: pmtu 1280 hops 2 back 2 \n";
    assert_eq!(
        tracepath_outcome(tracepath),
        "1?: [LOCALHOST] pmtu 1500; 1: 2001:db8:1::1; 2: 2001:db8:1::1 pmtu 1280; \
         2: 2001:db8:2::2 reached; Resume: pmtu 1280 hops 2 back 2"
    );
}
