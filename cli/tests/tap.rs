//! polld on the TAP testbed (root only): gen's tap0 and sink's tap1 are joined by nothing
//! but polld, which opens them in their namespaces (`netns = ...`). Ping, iperf3 TCP and
//! UDP and `polld gen`/`polld sink` pass through it in interrupt and polling modes, and
//! bad input (a missing namespace, a name that is not a TAP, a TAP another process holds,
//! a namespace deleted while polld runs) is a clear error or a logged, counted event.
//! Every run ends with SIGINT, exit 0 and conservation on every interface.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    count, counter, ip, ping, ping_tcp_udp, start_router, stop, testbed_of, values, warm_up, Dir,
    POLLD,
};
use polld_testbed::{polld_config, Devices, PolldSetup, Role, Testbed};
use polld_testsupport::eventually;
use serde_json::Value;

/// `polld run` on `config` in fwd, expected to fail: its standard error.
fn refused(tb: &Testbed, config: &str, tag: &str) -> String {
    let dir = Dir::new(tag);
    let path = dir.0.join("bad.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(POLLD)
        .args(["run", "-c"])
        .arg(&path)
        .args(["--netns", &tb.layout().fwd_ns])
        .output()
        .unwrap();
    assert!(!out.status.success(), "polld accepted {config}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The testbed's polld config, with `from` replaced by `to`.
fn config_with(tb: &Testbed, dir: &Dir, from: &str, to: &str) -> String {
    let config = polld_config(
        tb.layout(),
        &PolldSetup {
            backend: "tap",
            mode: "polling",
            socket: &dir.0.join("polld.sock"),
            cpu: None,
            realtime: false,
            knobs: &[],
        },
    );
    assert!(config.contains(from), "{config}");
    config.replacen(from, to, 1)
}

#[test]
fn ping_iperf3_gen_and_sink_pass_through_polld_on_taps_in_interrupt_and_polling_modes() {
    require_root!();
    let tb = testbed_of("tp", Devices::Tap);
    let l = tb.layout().clone();
    let mut port = 15301;
    for mode in ["interrupt", "polling"] {
        let (_dir, polld) = start_router(&tb, "tap", mode);
        ping_tcp_udp(&tb, port, mode);
        port += 2;

        // polld gen on gen's TAP, polld sink on sink's, through polld.
        let sink = Command::new(POLLD)
            .args(["sink", "tap1", "--netns", &l.sink_ns, "--json", "-i", "0"])
            .args(["--duration", "3"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let gen = Command::new(POLLD)
            .args(["gen", "tap0", "--netns", &l.gen_ns, "--json", "-i", "0"])
            .args(["--rate", "20k", "--duration", "1"])
            .output()
            .unwrap();
        assert!(gen.status.success(), "polld gen: {gen:?}");
        let sink = sink.wait_with_output().unwrap();
        assert!(sink.status.success(), "polld sink: {sink:?}");
        let last = |out: &[u8]| -> Value {
            let text = String::from_utf8_lossy(out).into_owned();
            serde_json::from_str(text.lines().last().unwrap()).unwrap()
        };
        let (sent, received) = (last(&gen.stdout), last(&sink.stdout));
        // A slot the generator's thread reached too late is skipped, never sent, and
        // counted: the second's 20000 slots are sent or skipped, and every frame sent
        // arrives.
        let frames = sent["frames"].as_u64().unwrap();
        assert_eq!(
            frames + sent["skipped"].as_u64().unwrap(),
            20_000,
            "{mode}: {sent}"
        );
        assert_eq!(
            received["analysis"]["sequence"]["received"], frames,
            "{mode}: {received}"
        );

        let interfaces = stop(polld);
        let tap0 = &interfaces[0];
        assert_eq!(tap0["mode"], mode);
        assert!(count(tap0, "forwarded") > 20_000, "{mode}: {tap0}");
        let interrupts = count(tap0, "interrupts");
        match mode {
            "polling" => assert_eq!(interrupts, 0, "{mode}: {tap0}"),
            _ => assert!(interrupts > 0, "{mode}: {tap0}"),
        }
    }
}

#[test]
fn a_missing_namespace_a_non_tap_and_a_busy_tap_are_refused_by_name() {
    require_root!();
    let tb = testbed_of("tb", Devices::Tap);
    let l = tb.layout().clone();
    let dir = Dir::new("tap-bad");

    let missing = config_with(
        &tb,
        &dir,
        &format!("netns = {:?}", l.gen_ns),
        "netns = \"polld-no-such-ns\"",
    );
    let err = refused(&tb, &missing, "tap-missing");
    assert!(
        err.contains("polld-no-such-ns") && err.contains("ip netns list"),
        "{err}"
    );
    // The error points at the line of the netns key.
    let line = missing
        .lines()
        .position(|l| l.contains("polld-no-such-ns"))
        .unwrap()
        + 1;
    assert!(err.contains(&format!("bad.toml:{line}:")), "{err}");

    // gen's loopback is no TAP, nor any interface polld polls.
    let not_tap = config_with(&tb, &dir, "name = \"tap0\"", "name = \"lo\"");
    let err = refused(&tb, &not_tap, "tap-lo");
    assert!(
        err.contains("interfaces[0].name: \"lo\" is the loopback interface"),
        "{err}"
    );

    // A TAP another polld holds.
    let (_dir, first) = start_router(&tb, "tap", "interrupt");
    let busy = config_with(&tb, &dir, "polld.sock", "second.sock");
    let err = refused(&tb, &busy, "tap-busy");
    assert!(
        err.contains("tap0") && err.contains("already attached to another process"),
        "{err}"
    );
    warm_up(&tb);
    stop(first);
}

#[test]
fn a_namespace_deleted_while_polld_runs_makes_its_tap_gone_and_a_new_one_is_attached() {
    require_root!();
    let tb = testbed_of("tn", Devices::Tap);
    let l = tb.layout().clone();
    let (_dir, polld) = start_router(&tb, "tap", "polling");
    warm_up(&tb);

    ip(&["netns", "del", &l.sink_ns]);
    eventually("polld sees tap1 gone", Duration::from_secs(10), || {
        values(&polld, &["dev.tap1.link"])[0].1 == "gone"
    });
    assert_eq!(counter(&polld, "kern.polling.handlers"), 1, "deregistered");
    // Frames towards the gone interface are counted, not lost.
    assert_eq!(ping(&tb, 2), 0);
    // polld still serves tap0: it answers pings to its own address there.
    let own = tb
        .command_in(Role::Gen, None, "ping")
        .unwrap()
        .args(["-c", "2", "-i", "0.2", "-W", "1"])
        .arg(l.veth1.addr.to_string())
        .output()
        .unwrap();
    assert!(own.status.success(), "{own:?}");

    // The namespace returns with its TAP, as the testbed made it.
    let sink = &l.sink_ns;
    ip(&["netns", "add", sink]);
    ip(&["-n", sink, "tuntap", "add", "dev", "tap1", "mode", "tap"]);
    ip(&["-n", sink, "link", "set", "tap1", "address", &l.veth3.mac]);
    ip(&["-n", sink, "addr", "add", &l.veth3.cidr(), "dev", "tap1"]);
    ip(&["-n", sink, "link", "set", "tap1", "up"]);
    let peer = l.veth2.addr.to_string();
    ip(&[
        "-n",
        sink,
        "neigh",
        "replace",
        &peer,
        "lladdr",
        &l.veth2.mac,
        "dev",
        "tap1",
    ]);
    ip(&["-n", sink, "route", "add", &l.veth0.network(), "via", &peer]);
    eventually("tap1 attached again", Duration::from_secs(10), || {
        counter(&polld, "kern.polling.handlers") == 2
    });
    warm_up(&tb);
    assert_eq!(ping(&tb, 3), 3, "forwarding resumed");
    let interfaces = stop(polld);
    assert!(
        count(&interfaces[0], "drops.link_down") + count(&interfaces[0], "drops.tx_ring_full") >= 2
    );
}

/// How many of polld's TAP fds (`/dev/net/tun`) are in one of its epoll sets, from
/// `/proc/PID/fdinfo` (an epoll fd lists each watched fd as `tfd:`).
fn taps_waited_on(pid: u32) -> usize {
    let fds = |dir: &str| -> Vec<(String, std::path::PathBuf)> {
        std::fs::read_dir(format!("/proc/{pid}/{dir}"))
            .map(|d| {
                d.flatten()
                    .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let taps: Vec<String> = fds("fd")
        .into_iter()
        .filter(|(_, p)| std::fs::read_link(p).is_ok_and(|l| l.as_os_str() == "/dev/net/tun"))
        .map(|(n, _)| n)
        .collect();
    fds("fdinfo")
        .iter()
        .filter_map(|(_, p)| std::fs::read_to_string(p).ok())
        .flat_map(|info| {
            info.lines()
                .filter_map(|l| l.strip_prefix("tfd:"))
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect::<Vec<_>>()
        })
        .filter(|fd| taps.contains(fd))
        .count()
}

/// In interrupt mode an idle polld sleeps on both TAPs' fds. Under a flood its thread has
/// work without sleeping, so it reads the interrupt lines from the devices and the fds
/// leave the epoll set (waited on, each would cost polld gen a wakeup callback per frame
/// on its CPU); once the flood ends and the thread sleeps, it waits on them again.
#[test]
fn a_flooded_interrupt_handler_reads_its_lines_and_sleeps_on_them_again_when_idle() {
    require_root!();
    let tb = testbed_of("ti", Devices::Tap);
    let (_dir, polld) = start_router(&tb, "tap", "interrupt");
    let pid = polld.pid();
    eventually(
        "idle polld waits on both TAPs",
        Duration::from_secs(10),
        || taps_waited_on(pid) == 2,
    );
    {
        let _flood = common::gen(&tb, "unlimited", 30);
        eventually(
            "flooded polld reads its lines instead of waiting on them",
            Duration::from_secs(30),
            || taps_waited_on(pid) == 0,
        );
    }
    eventually(
        "polld waits on both TAPs again",
        Duration::from_secs(10),
        || taps_waited_on(pid) == 2,
    );
    let interfaces = stop(polld);
    assert!(count(&interfaces[0], "interrupts") > 0, "{}", interfaces[0]);
}
