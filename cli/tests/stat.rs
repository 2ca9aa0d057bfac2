//! Issue 5 on the namespace testbed (root only; CI runs as root): `polld stat --json`
//! under load in interrupt and polling mode and as `kern.polling.user_frac` moves,
//! `polld ctl --save` surviving a restart and an interrupted save, and `/metrics`
//! matching `polld ctl` at the same moment. Without a daemon: `polld stat` says plainly
//! that none runs and how to start one.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{gen, testbed, Dir, Polld, POLLD};
use polld_testbed::{PolldSetup, Testbed, UpOptions};
use serde_json::Value;

fn fwd_cpu() -> usize {
    UpOptions::default().cpus.fwd
}

/// The testbed's polld config on AF_XDP, the poll thread pinned to the fwd CPU.
fn config(
    tb: &Testbed,
    socket: &Path,
    mode: &str,
    realtime: bool,
    knobs: &[(&str, &str)],
) -> String {
    polld_testbed::polld_config(
        tb.layout(),
        &PolldSetup {
            backend: "af_xdp",
            mode,
            socket,
            cpu: Some(fwd_cpu()),
            realtime,
            knobs,
        },
    )
}

/// `polld ctl -n NAME`.
fn value(polld: &Polld, name: &str) -> String {
    polld.ok(&["ctl", "-n", name]).trim().to_string()
}

/// `polld stat --json -w SECS`.
fn stat(polld: &Polld, secs: &str) -> Value {
    serde_json::from_str(&polld.ok(&["stat", "--json", "-w", secs])).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn stat_says_plainly_when_no_polld_runs_and_how_to_start_one() {
    let out = Command::new(POLLD)
        .args(["stat", "--once", "--socket", "/nonexistent/polld.sock"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no polld is running at /nonexistent/polld.sock")
            && err.contains("polld run -c FILE"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn stat_shows_interrupts_go_away_with_polling() {
    require_root!();
    let tb = testbed("f");
    let dir = Dir::new("flood");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    let knobs = [
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.each_burst", "50"),
    ];
    // SCHED_FIFO: the poll thread's share of its CPU is then set by its controller, not
    // by whatever else (other tests, builds) runs there.
    std::fs::write(&path, config(&tb, &socket, "interrupt", true, &knobs)).unwrap();
    let polld = Polld::start(&tb, &path, &socket);

    // Interrupt mode at a load the handler keeps up with: one wakeup per few frames.
    let load = gen(&tb, "20k", 8);
    std::thread::sleep(Duration::from_millis(1500));
    let s = stat(&polld, "2");
    let veth1 = &s["interfaces"][0];
    eprintln!("interrupt mode, 20k/s: {veth1}");
    assert_eq!(veth1["mode"], "interrupt");
    assert!(f(&veth1["rx_pps"]) > 5_000.0, "{veth1}");
    assert!(f(&veth1["interrupts_per_s"]) > 1_000.0, "{veth1}");
    assert_eq!(s["cpu"]["cpu"], fwd_cpu());
    assert_eq!(s["cpu"]["pinned"], true);
    drop(load);

    // Polling under the same load, then under a flood: no wakeups from the device.
    polld.ok(&["ifconfig", "veth1", "polling"]);
    polld.ok(&["ifconfig", "veth2", "polling"]);
    let load = gen(&tb, "20k", 5);
    std::thread::sleep(Duration::from_millis(1500));
    let s = stat(&polld, "2");
    let veth1 = &s["interfaces"][0];
    eprintln!("polling mode, 20k/s: {veth1}");
    assert_eq!(veth1["mode"], "polling");
    assert!(f(&veth1["rx_pps"]) > 5_000.0, "{veth1}");
    assert!(f(&veth1["interrupts_per_s"]) < 5.0, "{veth1}");
    assert!(f(&veth1["polls_per_s"]) > 100.0, "{veth1}");
    drop(load);

    // The CPU split under a flood is not asserted here: on veth the kernel's receive
    // threads, not polld, do most of the device work, so polld's own share says little
    // about user_frac, and on a busy machine it says less. The promise (a competitor keeps
    // user_frac of the poll CPU) is measured on the TAP testbed, where polld owns the work.
    polld.stop();
}

#[test]
fn saved_knobs_and_modes_survive_a_restart_and_an_interrupted_save_changes_nothing() {
    require_root!();
    let tb = testbed("v");
    let dir = Dir::new("save");
    let socket = dir.0.join("polld.sock");
    let path = dir.0.join("fwd.toml");
    std::fs::write(&path, config(&tb, &socket, "interrupt", false, &[])).unwrap();
    let polld = Polld::start(&tb, &path, &socket);
    polld.ok(&["ifconfig", "veth1", "polling"]);
    polld.ok(&["ifconfig", "veth2", "mode", "adaptive"]);
    let out = polld.ok(&[
        "ctl",
        "kern.polling.user_frac=30",
        "kern.polling.burst_max=1000",
        "kern.polling.each_burst=500",
        "kern.polling.controller=time",
        "dev.veth2.rx_process_limit=64",
        "--save",
    ]);
    assert!(
        out.contains("[knobs] \"kern.polling.each_burst\" = 500"),
        "{out}"
    );
    assert!(
        out.contains("interfaces veth1: mode = \"polling\""),
        "{out}"
    );
    let saved = std::fs::read_to_string(&path).unwrap();
    assert!(
        saved.starts_with("# polld in "),
        "the comment is kept: {saved}"
    );
    assert_eq!(
        polld.ok(&["ctl", "--save"]).trim_end(),
        format!(
            "{}: already holds the running knobs and modes",
            path.display()
        )
    );

    // A save whose write fails part-way (the file size limit) leaves the file as it was.
    polld.ok(&["ctl", "kern.polling.user_frac=40"]);
    let mut save = Command::new(POLLD);
    save.args(["ctl", "--save"]).env("POLLD_SOCKET", &socket);
    polld_dev::sys::limit_file_size_at_exec(&mut save, 64);
    let out = save.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("cannot write the new version of") && err.contains("the file is unchanged"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), saved);
    let files: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files.len(), 2, "no temporary file left: {files:?}");
    polld.ok(&["ctl", "kern.polling.user_frac=30"]);
    polld.stop();

    // Restarted from the saved file, polld comes up as it was.
    let polld = Polld::start(&tb, &path, &socket);
    for (name, expected) in [
        ("kern.polling.user_frac", "30"),
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.each_burst", "500"),
        ("kern.polling.controller", "time"),
        ("dev.veth2.rx_process_limit", "64"),
        ("dev.veth1.mode", "polling"),
        ("dev.veth2.mode", "adaptive"),
    ] {
        assert_eq!(value(&polld, name), expected, "{name}");
    }
    polld.stop();
}

/// GET `path` from the metrics server inside fwd, with `method`.
fn http(tb: &Testbed, method: &str, path: &str) -> (u16, String) {
    let request = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    polld_dev::netns::in_netns(&tb.layout().fwd_ns, move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect("127.0.0.1:9101").unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        (code, body.to_string())
    })
    .unwrap()
}

#[test]
fn metrics_equal_ctl_at_the_same_moment_and_bad_requests_are_refused() {
    require_root!();
    let tb = testbed("x");
    let dir = Dir::new("metrics");
    let socket = dir.0.join("polld.sock");

    // A public address without metrics_public is refused before anything starts.
    let bad = dir.0.join("bad.toml");
    std::fs::write(
        &bad,
        config(&tb, &socket, "interrupt", false, &[]).replacen(
            "[daemon]\n",
            "[daemon]\nmetrics = \"0.0.0.0:9101\"\n",
            1,
        ),
    )
    .unwrap();
    let out = Command::new(POLLD)
        .args(["run", "--check", "-c"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:5: daemon.metrics: 0.0.0.0:9101 is not a loopback address"),
        "{err}"
    );

    let path = dir.0.join("fwd.toml");
    std::fs::write(
        &path,
        config(&tb, &socket, "interrupt", false, &[]).replacen(
            "[daemon]\n",
            "[daemon]\nmetrics = true\n",
            1,
        ),
    )
    .unwrap();
    let polld = Polld::start(&tb, &path, &socket);
    let mut traffic = gen(&tb, "10k", 1);
    traffic.0.wait().unwrap();
    // Interrupt mode and no traffic: the counters stand still.
    std::thread::sleep(Duration::from_millis(500));
    let (code, body) = http(&tb, "GET", "/metrics");
    assert_eq!(code, 200);
    let ctl: Value = serde_json::from_str(&polld.ok(&["ctl", "-a", "--json"])).unwrap();
    let scraped: Vec<(&str, &str)> = body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .collect();
    let metric = |name: &str| {
        scraped
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| panic!("{name} not scraped"))
    };
    let mut compared = 0;
    for e in ctl["entries"].as_array().unwrap() {
        let (name, value) = (e["name"].as_str().unwrap(), e["value"].as_str().unwrap());
        let expected = match name.split_once('.') {
            Some(("dev", rest)) => match rest.split_once('.') {
                Some((ifname, "rx_packets" | "tx_packets" | "forwarded" | "interrupts")) => {
                    let leaf = rest.rsplit('.').next().unwrap();
                    format!("polld_interface_{leaf}_total{{interface=\"{ifname}\"}}")
                }
                Some((ifname, leaf)) if leaf.starts_with("drops.") => format!(
                    "polld_interface_drops_total{{interface=\"{ifname}\",reason=\"{}\"}}",
                    &leaf[6..]
                ),
                _ => continue,
            },
            Some(("kern", "polling.lost_polls")) => "polld_polling_lost_polls_total".into(),
            Some(("kern", "polling.burst")) => "polld_polling_burst".into(),
            _ => continue,
        };
        assert_eq!(metric(&expected), value, "{expected} against {name}");
        compared += 1;
    }
    assert!(compared > 40, "{compared}");
    assert_ne!(
        metric("polld_interface_rx_packets_total{interface=\"veth1\"}"),
        "0"
    );
    assert_eq!(http(&tb, "GET", "/").0, 404);
    assert_eq!(http(&tb, "POST", "/metrics").0, 405);
    polld.stop();
}
