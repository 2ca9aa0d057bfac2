//! `polld run` forwarding real traffic on the namespace testbed (root only; CI runs as
//! root): ping and iperf3 TCP and UDP through every mode on AF_PACKET and AF_XDP, run-time
//! changes during a TCP transfer, interfaces that go and come back, malformed frames,
//! privileges, and the control socket under abuse. Every run ends with SIGINT, exit 0 and
//! the conservation of every interface's counters.

mod common;

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use common::{
    count, counter, ip_in, iperf3, ping, ping_tcp_udp, start_router, stop, tcp_bytes, testbed,
    values, warm_up, Dir, Polld, POLLD,
};
use polld_testbed::{Iface, Layout, PolldSetup, Role};
use polld_testsupport::{eventually, ConfigFile, Interface};

const MODES: [&str; 4] = ["interrupt", "polling", "adaptive", "busy"];

/// A command running polld as `nobody` (uid and gid 65534), in network namespace `netns`
/// if given. The binary is copied to a directory nobody can reach: the build tree may
/// sit below a directory only root may enter.
fn polld_as_nobody(dir: &std::path::Path, netns: Option<&str>) -> Command {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.join("polld");
    // Copied by `cp`, not in this process: a file this multi-threaded test process holds
    // open for writing is inherited by any child another test thread forks meanwhile, and
    // exec of the copy then fails with ETXTBSY ("Text file busy").
    let cp = Command::new("cp").arg(POLLD).arg(&copy).status().unwrap();
    assert!(cp.success(), "cp {POLLD} {}", copy.display());
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    match netns {
        // nsenter enters the namespace as root, then becomes nobody (its supplementary
        // groups dropped) before exec.
        Some(ns) => {
            let mut cmd = Command::new("nsenter");
            cmd.arg(format!("--net=/run/netns/{ns}"))
                .args(["--setuid", "65534", "--setgid", "65534", "--"])
                .arg(copy);
            cmd
        }
        None => {
            let mut cmd = Command::new(copy);
            // With a uid to set, the child also drops its supplementary groups before exec.
            cmd.uid(65534).gid(65534);
            cmd
        }
    }
}

#[test]
fn ping_and_iperf3_pass_through_every_mode_on_af_packet_and_af_xdp() {
    require_root!();
    let tb = testbed("m");
    let mut port = 15201;
    for backend in ["af_packet", "af_xdp"] {
        for mode in MODES {
            let (_dir, polld) = start_router(&tb, backend, mode);
            ping_tcp_udp(&tb, port, &format!("{backend} {mode}"));
            port += 2;
            let interfaces = stop(polld);
            let veth1 = &interfaces[0];
            assert_eq!(veth1["mode"], mode);
            assert!(
                count(veth1, "forwarded") > 1000,
                "{backend} {mode}: {veth1}"
            );
            // The mode really is in force: interrupts only where they are armed.
            let interrupts = count(veth1, "interrupts");
            match mode {
                "polling" | "busy" => assert_eq!(interrupts, 0, "{backend} {mode}"),
                _ => assert!(interrupts > 0, "{backend} {mode}"),
            }
            if mode == "adaptive" {
                assert!(count(veth1, "tasks") > 0);
            }
        }
    }
}

#[test]
fn mode_and_knob_changes_during_an_iperf3_tcp_run_keep_the_connection() {
    require_root!();
    let tb = testbed("c");
    for backend in ["af_packet", "af_xdp"] {
        let (_dir, polld) = start_router(&tb, backend, "interrupt");
        warm_up(&tb);
        let changes: Vec<Vec<&str>> = vec![
            vec!["ifconfig", "veth1", "polling"],
            vec![
                "ctl",
                "kern.polling.user_frac=30",
                "kern.polling.idle_poll=1",
            ],
            vec!["ifconfig", "veth2", "mode", "adaptive"],
            vec![
                "ctl",
                "kern.polling.hz=2000",
                "kern.polling.controller=time",
            ],
            vec!["ifconfig", "veth1", "mode", "busy"],
            vec!["ctl", "net.inet.ip.fastforwarding=0"],
            vec!["ifconfig", "veth2", "polling"],
            vec!["ifconfig", "veth1", "-polling"],
            vec![
                "ctl",
                "net.inet.ip.fastforwarding=1",
                "kern.polling.idle_poll=0",
            ],
            vec!["ifconfig", "veth2", "-polling"],
        ];
        let socket = polld.socket.clone();
        let changer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(800));
            for args in changes {
                let out = Command::new(POLLD)
                    .args(&args)
                    .env("POLLD_SOCKET", &socket)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{args:?}: {out:?}");
                std::thread::sleep(Duration::from_millis(400));
            }
        });
        let tcp = iperf3(&tb, 15301, 6, false);
        changer.join().unwrap();
        assert!(tcp_bytes(&tcp) > 1_000_000, "{backend}: {tcp}");
        let interfaces = stop(polld);
        assert_eq!(interfaces[0]["mode"], "interrupt");
        assert_eq!(interfaces[1]["mode"], "interrupt");
    }
}

/// Deletes the fwd–sink veth pair, checks polld goes on serving, then recreates it.
#[test]
fn an_interface_deleted_while_running_is_dropped_and_picked_up_when_it_returns() {
    require_root!();
    let tb = testbed("g");
    let l = tb.layout().clone();
    for backend in ["af_packet", "af_xdp"] {
        // The file's tables: the kernel's follower knows the interfaces by the index they
        // had at start, and the returning veth2 has another.
        let dir = Dir::new(&format!("g-{backend}"));
        let (config, socket) = (dir.0.join("fwd.toml"), dir.0.join("polld.sock"));
        let interface = |iface: &Iface| {
            Interface::new(&iface.name)
                .backend(backend)
                .mode("polling")
                .mac(&iface.mac)
                .address(&iface.cidr())
        };
        let text = ConfigFile::new()
            .socket(&socket)
            .interface(interface(&l.veth1))
            .interface(interface(&l.veth2))
            .static_arp(l.veth0.addr, &l.veth0.mac)
            .static_arp(l.veth3.addr, &l.veth3.mac)
            .to_toml();
        std::fs::write(&config, text).unwrap();
        let polld = Polld::start(&tb, &config, &socket);
        warm_up(&tb);
        ip_in(&l.fwd_ns, &["link", "del", "veth2"]);
        eventually(
            &format!("{backend}: polld sees veth2 gone"),
            Duration::from_secs(10),
            || values(&polld, &["dev.veth2.link"])[0].1 == "gone",
        );
        assert_eq!(counter(&polld, "kern.polling.handlers"), 1, "deregistered");
        // polld still serves the other interface: it answers pings to its own address.
        let own = tb
            .command_in(Role::Gen, None, "ping")
            .unwrap()
            .args(["-c", "3", "-i", "0.2", "-W", "1"])
            .arg(l.veth1.addr.to_string())
            .output()
            .unwrap();
        assert!(own.status.success(), "{backend}: {own:?}");
        // The pair returns, as the testbed made it.
        ip_in(
            &l.fwd_ns,
            &[
                "link",
                "add",
                "veth2",
                "address",
                &l.veth2.mac,
                "type",
                "veth",
                "peer",
                "name",
                "veth3",
                "address",
                &l.veth3.mac,
                "netns",
                &l.sink_ns,
            ],
        );
        ip_in(&l.fwd_ns, &["addr", "add", &l.veth2.cidr(), "dev", "veth2"]);
        ip_in(&l.fwd_ns, &["link", "set", "veth2", "up"]);
        ip_in(
            &l.sink_ns,
            &["addr", "add", &l.veth3.cidr(), "dev", "veth3"],
        );
        ip_in(&l.sink_ns, &["link", "set", "veth3", "up"]);
        ip_in(
            &l.sink_ns,
            &[
                "route",
                "add",
                &l.veth0.network(),
                "via",
                &l.veth2.addr.to_string(),
            ],
        );
        eventually(
            &format!("{backend}: veth2 picked up again"),
            Duration::from_secs(10),
            || counter(&polld, "kern.polling.handlers") == 2,
        );
        warm_up(&tb);
        assert_eq!(ping(&tb, 3), 3, "{backend}: forwarding resumed");
        stop(polld);
    }
}

fn checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn mac(text: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (b, part) in m.iter_mut().zip(text.split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap();
    }
    m
}

/// An Ethernet/IPv4/UDP frame from gen to the unowned destination behind fwd, with the
/// IPv4 header built by `ip` from a valid one.
fn frame(l: &Layout, payload: usize, edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(mac(&l.veth1.mac));
    f.extend(mac(&l.veth0.mac));
    f.extend([0x08, 0x00]);
    let total = (20 + 8 + payload) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend(l.veth0.addr.octets());
    ip.extend(l.unowned_dst.octets());
    f.extend(ip);
    f.extend([0x30, 0x39, 0x00, 0x09]);
    f.extend(((8 + payload) as u16).to_be_bytes());
    f.extend([0, 0]);
    f.extend(std::iter::repeat_n(0xab, payload));
    edit(&mut f);
    f
}

fn fix_ip_checksum(f: &mut [u8]) {
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f[24..26].copy_from_slice(&[0, 0]);
    let c = checksum(&f[14..14 + ihl.min(f.len() - 14)]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn malformed_frames_are_counted_by_reason_and_polld_keeps_forwarding() {
    require_root!();
    let tb = testbed("b");
    let l = tb.layout().clone();
    // Let a 1600-byte frame reach polld, whose configured IP MTU stays 1500.
    for (ns, dev) in [(&l.gen_ns, "veth0"), (&l.fwd_ns, "veth1")] {
        let out = Command::new("ip")
            .args(["-n", ns, "link", "set", dev, "mtu", "2000"])
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    let (_dir, polld) = start_router(&tb, "af_packet", "polling");
    warm_up(&tb);
    let good = |f: &mut Vec<u8>| fix_ip_checksum(f);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", frame(&l, 18, good)[..30].to_vec()),
        (
            "bad_ihl",
            frame(&l, 18, |f| {
                f[14] = 0x44;
                fix_ip_checksum(f)
            }),
        ),
        (
            "bad_checksum",
            frame(&l, 18, |f| {
                fix_ip_checksum(f);
                f[25] ^= 0xff
            }),
        ),
        (
            "bad_version",
            frame(&l, 18, |f| {
                f[14] = 0x65;
                fix_ip_checksum(f)
            }),
        ),
        (
            "bad_length",
            frame(&l, 18, |f| {
                f[16..18].copy_from_slice(&400u16.to_be_bytes());
                fix_ip_checksum(f)
            }),
        ),
        (
            "ttl_exceeded",
            frame(&l, 18, |f| {
                f[22] = 1;
                fix_ip_checksum(f)
            }),
        ),
        (
            "ip_options",
            frame(&l, 18, |f| {
                // IHL 6: one malformed option before the UDP header, a record route
                // whose length (1) is below 2; well-formed options are forwarded.
                f.splice(34..34, [7, 1, 0, 0]);
                f[14] = 0x46;
                let total = (f.len() - 14) as u16;
                f[16..18].copy_from_slice(&total.to_be_bytes());
                fix_ip_checksum(f)
            }),
        ),
        (
            "fragment",
            // RFC 1858: a first fragment too short to hold the UDP header.
            frame(&l, 0, |f| {
                f.truncate(14 + 20 + 4);
                f[16..18].copy_from_slice(&24u16.to_be_bytes());
                f[20] = 0x20; // MF
                fix_ip_checksum(f)
            }),
        ),
        (
            "vlan",
            frame(&l, 18, |f| {
                fix_ip_checksum(f);
                f.splice(12..12, [0x81, 0x00, 0x00, 0x07]);
            }),
        ),
        (
            "oversize",
            // Larger than veth2's MTU with DF set; with DF clear it would be fragmented.
            frame(&l, 1600 - 42, |f| {
                f[20] = 0x40;
                fix_ip_checksum(f)
            }),
        ),
        (
            "unknown_ethertype",
            // 0x88B5: IEEE 802 local experimental, which polld does not handle.
            frame(&l, 18, |f| {
                f[12] = 0x88;
                f[13] = 0xb5
            }),
        ),
    ];
    let before: Vec<u64> = cases
        .iter()
        .map(|(reason, _)| counter(&polld, &format!("dev.veth1.drops.{reason}")))
        .collect();
    let frames: Vec<Vec<u8>> = cases.iter().map(|(_, f)| f.clone()).collect();
    polld_dev::netns::in_netns(&l.gen_ns, move || {
        let mut dev = polld_dev::afpacket::AfPacket::open("veth0", Default::default()).unwrap();
        use polld_core::Device;
        for f in &frames {
            for _ in 0..3 {
                dev.send(f).unwrap();
            }
            dev.flush();
        }
    })
    .unwrap();
    // Wait until every reason has counted its three frames (or the deadline passes), then
    // require exactly three: more would be a frame counted twice.
    let dropped = |polld: &Polld| -> Vec<u64> {
        cases
            .iter()
            .zip(&before)
            .map(|((reason, _), before)| {
                counter(polld, &format!("dev.veth1.drops.{reason}")) - before
            })
            .collect()
    };
    eventually(
        "three frames dropped for each reason",
        Duration::from_secs(5),
        || dropped(&polld).iter().all(|&n| n >= 3),
    );
    for ((reason, _), n) in cases.iter().zip(dropped(&polld)) {
        assert_eq!(n, 3, "three frames dropped as {reason}");
    }
    // After all of them, polld still forwards.
    assert_eq!(ping(&tb, 3), 3, "polld survived and forwards");
    stop(polld);
}

#[test]
fn without_privileges_polld_names_the_missing_capability_and_drops_the_rest_after_setup() {
    require_root!();
    let tb = testbed("p");
    let dir = std::env::temp_dir().join(format!("polld-priv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // nobody must read the config (whatever the umask) to get as far as the capabilities.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = dir.join("fwd.toml");
    std::fs::write(
        &config,
        polld_testbed::polld_config(
            tb.layout(),
            &PolldSetup {
                backend: "af_xdp",
                mode: "polling",
                socket: &dir.join("s.sock"),
                cpu: None,
                realtime: false,
                knobs: &[],
            },
        ),
    )
    .unwrap();
    // In fwd, whose kernel has the interfaces polld takes its MACs and tables from.
    let mut cmd = polld_as_nobody(&dir.join("bin"), Some(&tb.layout().fwd_ns));
    cmd.args(["run", "-c"]).arg(&config);
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for cap in ["CAP_NET_RAW", "CAP_BPF", "CAP_NET_ADMIN", "setcap"] {
        assert!(err.contains(cap), "{cap} not named: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();

    // As root it starts, and keeps only what reopening an AF_XDP interface needs.
    let (_dir, polld) = start_router(&tb, "af_xdp", "polling");
    let status = std::fs::read_to_string(format!("/proc/{}/status", polld.pid())).unwrap();
    let kept = (1u64 << 12) | (1 << 13) | (1 << 39);
    for field in ["CapEff:", "CapPrm:", "CapBnd:"] {
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        let bits = u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap();
        assert_eq!(bits, kept, "{line}");
    }
    stop(polld);
}

#[test]
fn garbage_on_the_control_socket_is_refused_and_forwarding_goes_on() {
    require_root!();
    let tb = testbed("s");
    let (_dir, polld) = start_router(&tb, "af_packet", "polling");
    warm_up(&tb);
    let exchange = |bytes: &[u8]| -> String {
        let mut s = std::os::unix::net::UnixStream::connect(&polld.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(bytes);
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        reply
    };
    assert!(exchange(b"{\"op\":\"format_disk\"}\n").contains("error"));
    assert!(exchange(b"not json at all\n").contains("error"));
    let big = vec![b'x'; 200_000];
    assert!(exchange(&big).contains("too large"));
    // A well-formed request still works, and so does forwarding.
    let listed = values(&polld, &["kern.polling.handlers"]);
    assert_eq!(listed[0].1, "2");
    assert_eq!(ping(&tb, 3), 3);
    // A non-root caller is refused with a clear message.
    let bin = std::env::temp_dir().join(format!("polld-nobody-{}", std::process::id()));
    let mut cmd = polld_as_nobody(&bin, None);
    cmd.args(["ctl", "-a", "--socket"]).arg(&polld.socket);
    let out = cmd.output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("permission denied"));
    std::fs::remove_dir_all(&bin).unwrap();
    stop(polld);
}
