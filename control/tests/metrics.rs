//! `GET /metrics`: the Prometheus text format of a daemon's entries, served over HTTP
//! from what the poll thread answers, equal to what `polld ctl -a --json` shows.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::Daemon;
use polld_control::metrics::{
    exposition, MetricsServer, CLIENT_TIMEOUT, CONTENT_TYPE, MAX_CLIENTS, MAX_REQUEST_BYTES,
};
use polld_core::SysctlEntry;
use polld_sim::{Arrivals, NicConfig};

/// Sends `request` raw; returns the status code, the headers and the body.
fn http(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (code, head.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    http(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"))
}

/// `name{labels}` → value, from the text format.
fn samples(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').unwrap();
            (name.to_string(), value.to_string())
        })
        .collect()
}

fn value<'a>(samples: &'a [(String, String)], name: &str) -> &'a str {
    samples
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no sample {name}"))
}

#[test]
fn scraped_values_equal_what_ctl_reads_at_the_same_moment() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    let (code, head, body) = get(server.addr(), "/metrics");
    assert_eq!(code, 200, "{head}");
    assert!(head.contains(&format!("Content-Type: {CONTENT_TYPE}")));
    let json: serde_json::Value = serde_json::from_str(&daemon.ctl_ok(&["-a", "--json"])).unwrap();
    let scraped = samples(&body);
    let mut compared = 0;
    for e in json["entries"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap();
        let v = e["value"].as_str().unwrap();
        let metric = if let Some(rest) = name.strip_prefix("dev.") {
            let (ifname, leaf) = rest.split_once('.').unwrap();
            match leaf.strip_prefix("drops.") {
                Some(reason) => format!(
                    "polld_interface_drops_total{{interface=\"{ifname}\",reason=\"{reason}\"}}"
                ),
                None if [
                    "rx_packets",
                    "rx_bytes",
                    "tx_packets",
                    "tx_bytes",
                    "interrupts",
                    "polls",
                    "forwarded",
                ]
                .contains(&leaf) =>
                {
                    format!("polld_interface_{leaf}_total{{interface=\"{ifname}\"}}")
                }
                None => continue,
            }
        } else if let Some(leaf) = name.strip_prefix("kern.polling.") {
            match leaf {
                "lost_polls" | "stalled" | "cycles" => format!("polld_polling_{leaf}_total"),
                "burst" | "burst_max" | "user_frac" | "phase" | "residual_burst" => {
                    format!("polld_polling_{leaf}")
                }
                _ => continue,
            }
        } else {
            continue;
        };
        assert_eq!(value(&scraped, &metric), v, "{metric} against {name}");
        compared += 1;
    }
    // Two interfaces with seven counters and the dataplane's five drop reasons each (the
    // simulator's stage declares none of its own), and the scheduler's eight.
    assert!(compared >= 32, "only {compared} compared");
    // The simulated NIC sim0 is flooded: its drops are not all zero.
    assert!(scraped
        .iter()
        .any(|(n, v)| n.starts_with("polld_interface_drops_total{interface=\"sim0\"") && v != "0"));
    assert_eq!(
        value(
            &scraped,
            "polld_interface_mode{interface=\"sim0\",mode=\"interrupt\"}"
        ),
        "1"
    );
    assert_eq!(
        value(
            &scraped,
            "polld_interface_mode{interface=\"sim0\",mode=\"polling\"}"
        ),
        "0"
    );
}

#[test]
fn a_scrape_counts_the_bytes_of_the_frames_through_the_simulated_nics() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    let scraped = samples(&get(server.addr(), "/metrics").2);
    let number = |family: &str, ifname: &str| -> u64 {
        value(&scraped, &format!("{family}{{interface=\"{ifname}\"}}"))
            .parse()
            .unwrap()
    };
    // Every simulated frame is as long as the NIC's configuration says, forwarded as it
    // came (sim0 to sim1).
    let frame_len = NicConfig::new("any", Arrivals::None).frame_len as u64;
    for ifname in common::INTERFACES {
        for way in ["rx", "tx"] {
            let packets = number(&format!("polld_interface_{way}_packets_total"), ifname);
            let bytes = number(&format!("polld_interface_{way}_bytes_total"), ifname);
            assert_eq!(bytes, packets * frame_len, "{ifname} {way}");
        }
    }
    assert!(number("polld_interface_tx_bytes_total", "sim1") > 0);
}

/// The `[workspace.package] version` of the workspace's Cargo.toml.
fn workspace_version() -> String {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let toml: toml::Value = toml::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    toml["workspace"]["package"]["version"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The commit `git rev-parse HEAD` gives in the workspace, `unknown` outside a checkout;
/// `None` when a checkout cannot be asked (no git installed).
fn workspace_commit() -> Option<String> {
    let workspace = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    if !std::path::Path::new(workspace).join(".git").exists() {
        return Some("unknown".into());
    }
    let out = std::process::Command::new("git")
        .args(["-C", workspace, "rev-parse", "HEAD"])
        .output()
        .ok()?;
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}

#[test]
fn a_scrape_says_which_build_runs_and_how_the_process_fares() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    let (_, _, body) = get(server.addr(), "/metrics");
    let scraped = samples(&body);
    let build: Vec<&(String, String)> = scraped
        .iter()
        .filter(|(n, _)| n.starts_with("polld_build_info{"))
        .collect();
    assert_eq!(build.len(), 1, "{body}");
    let (labels, one) = build[0];
    assert_eq!(one, "1");
    assert!(
        labels.contains(&format!("version=\"{}\"", workspace_version())),
        "{labels}"
    );
    if let Some(commit) = workspace_commit() {
        assert!(labels.contains(&format!("commit=\"{commit}\"")), "{labels}");
    }
    assert!(labels.contains("rustc=\"1."), "{labels}");
    assert!(body.contains("# TYPE polld_build_info gauge\n"));

    let number = |name: &str| -> f64 { value(&scraped, name).parse().unwrap() };
    let open = number("process_open_fds");
    // At least stdin, stdout, stderr, the listener and the control socket.
    assert!(open >= 5.0, "{open}");
    assert!(number("process_max_fds") >= open);
    assert!(number("process_resident_memory_bytes") > 1e6);
    assert!(number("process_virtual_memory_bytes") >= number("process_resident_memory_bytes"));
    assert!(number("process_cpu_seconds_total") >= 0.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = number("process_start_time_seconds");
    assert!(started <= now && started > 1.5e9, "{started} at {now}");
    assert!(body.contains("# TYPE process_cpu_seconds_total counter\n"));
    assert!(body.contains("# TYPE process_open_fds gauge\n"));
}

#[test]
fn other_paths_methods_and_garbage_are_refused_with_their_status() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    let addr = server.addr();
    assert_eq!(get(addr, "/").0, 404);
    assert_eq!(get(addr, "/metricsx").0, 404);
    assert_eq!(get(addr, "/metrics?name[]=x").0, 200);
    let (code, head, _) = http(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(code, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    assert_eq!(http(addr, "DELETE /metrics HTTP/1.0\r\n\r\n").0, 405);
    assert_eq!(http(addr, "hello\r\n\r\n").0, 400);
    assert_eq!(http(addr, "GET /metrics SPDY/3\r\n\r\n").0, 400);
    let (code, head, body) = http(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!((code, body.as_str()), (200, ""), "{head}");
    let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
    assert_eq!(http(addr, &big).0, 431);
    // A client that connects and says nothing costs its own slot only for a while.
    let silent = TcpStream::connect(addr).unwrap();
    assert_eq!(get(addr, "/metrics").0, 200);
    drop(silent);
}

/// Whether the server still holds `stream` open: nothing to read yet, and no end.
fn held_open(stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let held =
        matches!(stream.peek(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    held
}

#[test]
fn idle_and_half_sent_requests_never_keep_a_scrape_waiting() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    let addr = server.addr();
    // 200 clients: half connect and say nothing, half send part of a request and wait.
    let idle: Vec<TcpStream> = (0..200)
        .map(|i| {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
            if i % 2 == 1 {
                s.write_all(b"GET /metr").unwrap();
            }
            s
        })
        .collect();
    let asked = Instant::now();
    let (code, head, _) = get(addr, "/metrics");
    let waited = asked.elapsed();
    assert_eq!(code, 200, "{head}");
    // Served one at a time, each of the 200 would have had its CLIENT_TIMEOUT first (400 s);
    // the bound only leaves room for a loaded machine.
    assert!(
        waited < CLIENT_TIMEOUT * 10,
        "the scrape waited {waited:?} behind 200 idle clients"
    );
    // The server accepted every earlier client before the scrape, and holds at most
    // MAX_CLIENTS of them: the rest were closed to make room.
    let held = idle.iter().filter(|s| held_open(s)).count();
    assert!(held <= MAX_CLIENTS, "{held} idle clients held open");
}

#[test]
fn a_client_holds_at_most_max_request_bytes_and_then_is_refused() {
    let daemon = Daemon::start();
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), daemon.requester()).unwrap();
    // A head that never ends: refused once it passes the bound, not buffered on.
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let endless = format!(
        "GET /metrics HTTP/1.1\r\nX: {}",
        "a".repeat(MAX_REQUEST_BYTES + 1)
    );
    stream.write_all(endless.as_bytes()).unwrap();
    let mut answer = [0u8; 12];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 431");
}

#[test]
fn a_silent_poll_thread_gives_503_not_a_hang() {
    let daemon = Daemon::start();
    let requester = daemon.requester();
    drop(daemon);
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), requester).unwrap();
    assert_eq!(get(server.addr(), "/metrics").0, 503);
}

fn entry(name: &str, value: &str, descr: &str) -> SysctlEntry {
    SysctlEntry {
        name: name.into(),
        value: value.into(),
        descr: descr.into(),
        writable: false,
    }
}

#[test]
fn families_are_grouped_typed_and_escaped() {
    let entries = [
        entry("dev.a.rx_packets", "5", "Frames received"),
        entry("dev.a.queued", "2", "Queued"),
        entry("dev.a.drops.ttl_exceeded", "1", "Frames dropped, by reason"),
        entry("dev.vlan.7.rx_packets", "6", "Frames received"),
        entry(
            "dev.vlan.7.drops.ttl_exceeded",
            "3",
            "Frames dropped, by reason",
        ),
        entry("kern.polling.lost_polls", "9", "Lost \\ polls\nsecond line"),
        entry("polld.work_ns", "1500000001", "x"),
        entry("polld.config", "/x\"y", "x"),
    ];
    let text = exposition(&entries);
    let expected = "\
# HELP polld_interface_rx_packets_total Frames received
# TYPE polld_interface_rx_packets_total counter
polld_interface_rx_packets_total{interface=\"a\"} 5
polld_interface_rx_packets_total{interface=\"vlan.7\"} 6
# HELP polld_interface_queued Queued
# TYPE polld_interface_queued gauge
polld_interface_queued{interface=\"a\"} 2
# HELP polld_interface_drops_total Frames dropped, by reason
# TYPE polld_interface_drops_total counter
polld_interface_drops_total{interface=\"a\",reason=\"ttl_exceeded\"} 1
polld_interface_drops_total{interface=\"vlan.7\",reason=\"ttl_exceeded\"} 3
# HELP polld_polling_lost_polls_total Lost \\\\ polls\\nsecond line
# TYPE polld_polling_lost_polls_total counter
polld_polling_lost_polls_total 9
# HELP polld_device_work_seconds_total Time in device work: handlers, tasks, ticks, polls, input queue
# TYPE polld_device_work_seconds_total counter
polld_device_work_seconds_total 1.500000001
";
    assert_eq!(text, expected);
}

#[test]
fn the_kernel_receive_work_and_the_poll_threads_cpu_time_are_their_own_metrics() {
    let entries = [
        entry("polld.thread_cpu_ns", "2000000000", "x"),
        entry("polld.kernel_rx_ns", "3000000000", "x"),
        entry("polld.kernel_rx_on_cpu_ns", "2500000000", "x"),
        entry(
            "polld.kernel_rx_threads",
            "napi/veth1-8193 (pid 812, CPU1)",
            "x",
        ),
        entry("polld.kernel_rx_found_by", "netlink", "How found"),
    ];
    let text = exposition(&entries);
    let got = samples(&text);
    assert_eq!(
        value(&got, "polld_poll_thread_cpu_seconds_total"),
        "2.000000000"
    );
    assert_eq!(value(&got, "polld_kernel_rx_seconds_total"), "3.000000000");
    assert_eq!(
        value(&got, "polld_kernel_rx_on_poll_cpu_seconds_total"),
        "2.500000000"
    );
    assert_eq!(
        value(&got, "polld_kernel_rx_found_by{method=\"netlink\"}"),
        "1"
    );
    assert!(
        text.contains("# TYPE polld_kernel_rx_seconds_total counter"),
        "{text}"
    );
}

#[test]
fn the_last_reload_says_when_it_ended_and_whether_it_was_applied() {
    let reloads = |ok: &str| {
        exposition(&[
            entry("polld.reloads", "3", "Applied"),
            entry("polld.reload_failures", "1", "Refused"),
            entry("polld.reload_time", "1765000000", "When"),
            entry("polld.reload_ok", ok, "Applied or refused"),
            entry(
                "polld.reload_error",
                "kern.polling.hz: 7 is out of range",
                "Why",
            ),
        ])
    };
    let text = reloads("0");
    let got = samples(&text);
    assert_eq!(value(&got, "polld_reloads_total"), "3");
    assert_eq!(value(&got, "polld_reload_failures_total"), "1");
    assert_eq!(
        value(&got, "polld_last_reload_timestamp_seconds"),
        "1765000000"
    );
    assert_eq!(value(&got, "polld_last_reload_successful"), "0");
    let applied = samples(&reloads("1"));
    assert_eq!(value(&applied, "polld_last_reload_successful"), "1");
    assert!(
        text.contains("# TYPE polld_reloads_total counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE polld_last_reload_successful gauge\n"),
        "{text}"
    );
    // The reason is for people (`polld ctl polld.reload_error`), not a label.
    assert_eq!(got.len(), 4, "{text}");
}

#[test]
fn each_poll_cpu_has_its_scheduler_and_time_under_a_cpu_label() {
    let entries = [
        entry("net.ifpoll.0.rx.burst", "40", "Burst"),
        entry("net.ifpoll.1.rx.burst", "300", "Burst"),
        entry("net.ifpoll.1.rx.lost_polls", "7", "Lost"),
        entry("net.ifpoll.1.rx.controller", "time", "Controller"),
        entry("net.ifpoll.1.pollhz", "4000", "Hz"),
        entry("polld.percpu.1.work_ns", "1500000000", "x"),
        entry("polld.percpu.1.thread_cpu_ns", "2000000000", "x"),
    ];
    let text = exposition(&entries);
    let got = samples(&text);
    assert_eq!(value(&got, "polld_ifpoll_burst{cpu=\"0\"}"), "40");
    assert_eq!(value(&got, "polld_ifpoll_burst{cpu=\"1\"}"), "300");
    assert_eq!(value(&got, "polld_ifpoll_lost_polls_total{cpu=\"1\"}"), "7");
    assert_eq!(value(&got, "polld_ifpoll_hz{cpu=\"1\"}"), "4000");
    assert_eq!(
        value(
            &got,
            "polld_ifpoll_controller{cpu=\"1\",controller=\"time\"}"
        ),
        "1"
    );
    assert_eq!(
        value(&got, "polld_percpu_device_work_seconds_total{cpu=\"1\"}"),
        "1.500000000"
    );
    assert_eq!(
        value(
            &got,
            "polld_percpu_poll_thread_cpu_seconds_total{cpu=\"1\"}"
        ),
        "2.000000000"
    );
    assert!(text.contains("# TYPE polld_ifpoll_burst gauge"), "{text}");
}
