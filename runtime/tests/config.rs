//! `polld run` configuration files: what a valid file yields, and that every mistake is
//! reported at its file and line with the fix.

use std::path::Path;

use polld_core::{Mode, Profile};
use polld_runtime::config::{Backend, RunConfig};

mod good_config;
use good_config::{parse, GOOD};

#[test]
fn a_valid_file_yields_devices_knobs_in_file_order_and_the_packet_config() {
    let c = parse(GOOD).unwrap();
    assert_eq!(c.daemon.cpu, Some(1));
    assert_eq!(c.devices.len(), 2);
    assert_eq!(c.devices[0].backend, Backend::AfXdp);
    assert_eq!(c.devices[0].mode, Mode::Polling);
    // Defaults: AF_PACKET, interrupt mode (polling is off until asked for, as in FreeBSD).
    assert_eq!(c.devices[1].backend, Backend::AfPacket);
    assert_eq!(c.devices[1].mode, Mode::Interrupt);
    let knobs: Vec<(&str, &str, usize)> = c
        .knobs
        .iter()
        .map(|k| (k.name.as_str(), k.value.as_str(), k.line))
        .collect();
    assert_eq!(
        knobs,
        vec![
            ("kern.polling.user_frac", "30", 7),
            ("net.inet.ip.fastforwarding", "1", 8),
            ("kern.polling.controller", "time", 9),
        ]
    );
    assert_eq!(c.packet.interfaces.len(), 2);
    assert_eq!(c.packet.routes.len(), 1);
}

#[test]
fn mistakes_are_reported_at_file_and_line_with_the_fix() {
    let cases: &[(&str, &str, &str)] = &[
        // (replace this, with that, expect this in the error)
        ("backend = \"af_xdp\"", "backend = \"dpdk\"", "fwd.toml:13: interfaces[0].backend: unknown variant `dpdk`"),
        ("mode = \"polling\"", "mode = \"poll\"", "fwd.toml:14: interfaces[0].mode: unknown mode \"poll\"; use interrupt, polling, adaptive, busy or auto"),
        ("cpu = 1", "cpuz = 1", "fwd.toml:4: daemon.cpuz: unknown key `cpuz` in daemon; did you mean `cpu`? the valid keys are af_xdp_shared_umem, cpu, cpus, irq_deferral, metrics, metrics_public, realtime, socket"),
        ("cpu = 1", "cpus = 1", "fwd.toml:4: daemon.cpus: 1 is not a list of CPU numbers; write e.g. cpus = [0, 1]"),
        ("cpu = 1", "cpus = [0, 0]", "fwd.toml:4: daemon.cpus: CPU 0 is listed twice"),
        ("cpu = 1", "cpus = [0, 1, 2]", "fwd.toml:4: daemon.cpus: CPU 2 polls no interface"),
        ("queue = 0", "cpu = 0", "fwd.toml:15: interfaces[0].cpu: there is one poll thread; list the poll CPUs in [daemon] cpus"),
        ("gateway = \"10.0.2.2\"", "gateway = \"10.0.9.9\"", "fwd.toml:26: routes[0].gateway: 10.0.9.9 is not on a connected network"),
        ("[[routes]]", "[[rotues]]", "fwd.toml:24: rotues: unknown key `rotues` at the top of the file; did you mean `routes`? the valid keys are arp, bridge, daemon, default_action, icmp, interfaces, knobs, mode, routes, rules, static_arp"),
        ("addresses = [\"10.0.1.2/24\"]", "addresses = [\"10.0.1.2/33\"]", "fwd.toml:17:"),
        ("mac = \"02:00:00:00:02:01\"", "mac = \"02:00:00:00:01:02\"", "fwd.toml:21: interfaces[1].mac"),
        ("socket = \"/tmp/polld-test.sock\"", "socket = ", "fwd.toml:3:"),
        ("\"kern.polling.user_frac\" = 30", "\"kern.polling.user_frac\" = [30]", "fwd.toml:7: knobs"),
    ];
    for (from, to, expected) in cases {
        assert!(GOOD.contains(from), "bad case {from}");
        let err = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
        assert!(
            err.contains(expected),
            "{from} -> {to}: got {err:?}, expected {expected:?}"
        );
    }
}

#[test]
fn the_knobs_profile_is_read_apart_from_the_knobs_and_checked() {
    assert_eq!(parse(GOOD).unwrap().profile, Profile::Polld);
    let freebsd = GOOD.replace("[knobs]\n", "[knobs]\nprofile = \"freebsd\"\n");
    let c = parse(&freebsd).unwrap();
    assert_eq!(c.profile, Profile::FreeBsd);
    assert!(c.knobs.iter().all(|k| k.name != "profile"), "{:?}", c.knobs);
    assert_eq!(c.knobs.len(), 3);
    let err = parse(&GOOD.replace("[knobs]\n", "[knobs]\nprofile = \"bsd\"\n")).unwrap_err();
    assert_eq!(
        err,
        "fwd.toml:7: knobs.profile: \"bsd\" is not a profile; write profile = \"polld\" or \"freebsd\""
    );
}

#[test]
fn type_errors_name_the_field_and_say_what_is_expected() {
    let cases: &[(&str, &str, &str)] = &[
        // (replace this, with that, the whole error)
        ("queue = 0", "cpu = -1", "fwd.toml:15: interfaces[0].cpu: -1 is not a CPU number; write one of the CPUs polld may run on: 0, 1, ..."),
        ("cpu = 1", "cpu = -1", "fwd.toml:4: daemon.cpu: -1 is not a CPU number; write one of the CPUs polld may run on: 0, 1, ..."),
        ("mac = \"02:00:00:00:02:01\"", "mtu = 1000000", "fwd.toml:21: interfaces[1].mtu: 1000000 is not an MTU from 68 to 65535; use 1500 for Ethernet"),
        ("mac = \"02:00:00:00:02:01\"", "mtu = \"big\"", "fwd.toml:21: interfaces[1].mtu: \"big\" is not an MTU from 68 to 65535; use 1500 for Ethernet"),
        ("queue = 0", "queue = true", "fwd.toml:15: interfaces[0].queue: true is not a receive queue number; write 0, 1, ..."),
        ("queue = 0", "queues = \"all\"", "fwd.toml:15: interfaces[0].queues: not a queue count or a list of queue numbers; write queues = 2 or queues = [0, 1]"),
        ("socket = \"/tmp/polld-test.sock\"", "realtime = 1", "fwd.toml:3: daemon.realtime: 1 is not a boolean; write true or false, without quotes"),
    ];
    for (from, to, expected) in cases {
        assert!(GOOD.contains(from), "bad case {from}");
        let err = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
        assert_eq!(&err, expected, "{from} -> {to}");
    }
}

#[test]
fn a_missing_name_points_at_its_own_entry() {
    let err = parse(&GOOD.replace("name = \"veth2\"\n", "")).unwrap_err();
    assert_eq!(
        err,
        "fwd.toml:19: interfaces[1].name: `name` is missing; add name = \"IFNAME\", the interface this entry is for"
    );
}

#[test]
fn an_unknown_key_lists_every_valid_key_of_its_table_and_the_nearest() {
    let err = parse(&GOOD.replace(
        "addresses = [\"10.0.2.1/24\"]",
        "adresses = [\"10.0.2.1/24\"]",
    ))
    .unwrap_err();
    assert_eq!(
        err,
        "fwd.toml:22: interfaces[1].adresses: unknown key `adresses` in interfaces[1]; did you mean `addresses`? the valid \
         keys are addresses, backend, cpu, cpus, fanout, fault, mac, mode, mtu, name, netns, pass_local, \
         queue, queues"
    );
    // Nothing near: no guess, still the list.
    let err = parse(&GOOD.replace("cpu = 1", "xyzzy = 1")).unwrap_err();
    assert!(
        err.starts_with(
            "fwd.toml:4: daemon.xyzzy: unknown key `xyzzy` in daemon; the valid keys are af_xdp_shared_umem,"
        ),
        "{err}"
    );
}

#[test]
fn queue_is_refused_where_there_is_no_queue_to_choose() {
    let tap = GOOD.replace("backend = \"af_xdp\"", "backend = \"tap\"");
    let err = parse(&tap.replace("queue = 0", "queue = 3")).unwrap_err();
    assert_eq!(
        err,
        "fwd.toml:15: interfaces[0].queue: `queue` is the AF_XDP receive queue to open, and this \
         interface is tap: a TAP has one queue, and polld reads it whole; remove `queue`, or use \
         backend = \"af_xdp\" to poll one receive queue"
    );
    let packet = GOOD.replace("backend = \"af_xdp\"", "backend = \"af_packet\"");
    let err = parse(&packet).unwrap_err();
    assert!(
        err.contains("interfaces[0].queue: `queue` is the AF_XDP receive queue to open, and this interface is af_packet: AF_PACKET receives from every queue"),
        "{err}"
    );
}

/// GOOD with two poll CPUs and four interfaces: veth1 and veth2 on CPU 0 (round-robin and
/// `cpu`), veth3 on CPU 1 (round-robin), veth4 on CPU 1 (`cpu`).
#[test]
fn an_unreadable_file_names_the_path() {
    let err = RunConfig::load(Path::new("/nonexistent/polld.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("/nonexistent/polld.toml: file: cannot read"),
        "{err}"
    );
}

#[test]
fn a_file_without_interfaces_says_what_to_add() {
    let err = parse("[daemon]\ncpu = 0\n").unwrap_err();
    assert!(err.contains("add one [[interfaces]] entry"), "{err}");
}

/// GOOD with `lines` added to its `[daemon]` table (after `cpu = 1`: line 5).
fn with_daemon(lines: &str) -> String {
    GOOD.replacen("cpu = 1\n", &format!("cpu = 1\n{lines}\n"), 1)
}

#[test]
fn metrics_listen_on_loopback_unless_made_public() {
    let addr = |text: &str| parse(&with_daemon(text)).unwrap().daemon.metrics;
    assert_eq!(parse(GOOD).unwrap().daemon.metrics, None);
    assert_eq!(addr("metrics = false"), None);
    assert_eq!(
        addr("metrics = true"),
        Some("127.0.0.1:9101".parse().unwrap())
    );
    assert_eq!(
        addr("metrics = 9200"),
        Some("127.0.0.1:9200".parse().unwrap())
    );
    assert_eq!(
        addr("metrics = \"[::1]:9101\""),
        Some("[::1]:9101".parse().unwrap())
    );
    assert_eq!(
        addr("metrics = \"0.0.0.0:9101\"\nmetrics_public = true"),
        Some("0.0.0.0:9101".parse().unwrap())
    );
}

#[test]
fn metrics_mistakes_are_refused_at_their_line_with_the_fix() {
    let err = parse(&with_daemon("metrics = \"0.0.0.0:9101\"")).unwrap_err();
    assert!(
        err.starts_with("fwd.toml:5: daemon.metrics: 0.0.0.0:9101 is not a loopback address"),
        "{err}"
    );
    assert!(
        err.contains("metrics_public = true") && err.contains("127.0.0.1:9101"),
        "{err}"
    );
    let err = parse(&with_daemon("metrics = \"localhost\"")).unwrap_err();
    assert!(
        err.starts_with("fwd.toml:5:") && err.contains("is not ADDRESS:PORT"),
        "{err}"
    );
    let err = parse(&with_daemon("metrics = 70000")).unwrap_err();
    assert!(err.contains("port 70000 is out of range"), "{err}");
    let err = parse(&with_daemon("metrics = 1.5")).unwrap_err();
    assert!(
        err.contains("\"127.0.0.1:9101\", a port number, or true/false"),
        "{err}"
    );
}

#[test]
fn an_interface_may_name_its_network_namespace() {
    let text = GOOD
        .replace(
            "name = \"veth1\"\nbackend = \"af_xdp\"",
            "name = \"tap0\"\nnetns = \"gen\"\nbackend = \"tap\"",
        )
        .replace("queue = 0\n", "");
    let c = parse(&text).unwrap();
    assert_eq!(c.devices[0].name, "tap0");
    assert_eq!(c.devices[0].netns.as_deref(), Some("gen"));
    assert_eq!(c.devices[0].backend, Backend::Tap);
    assert_eq!(c.devices[1].netns, None, "default: polld's own namespace");
    let err = parse(&GOOD.replace("queue = 0", "netns = 7")).unwrap_err();
    assert!(err.contains("interfaces[0].netns"), "{err}");
}

#[test]
fn a_fault_table_is_read_and_its_mistakes_are_refused_at_their_line() {
    let with_fault = |table: &str| {
        GOOD.replace(
            "addresses = [\"10.0.1.2/24\"]",
            &format!("addresses = [\"10.0.1.2/24\"]\n\n[interfaces.fault]\n{table}"),
        )
    };
    let c = parse(&with_fault("seed = 9\nrx_drop = 5\ntx_fail = 1000\n")).unwrap();
    let fault = c.devices[0].fault.unwrap();
    assert_eq!((fault.seed, fault.rx_drop, fault.tx_fail), (9, 5, 1000));
    assert_eq!(c.devices[1].fault, None);
    // The packet stage does not see the table.
    assert_eq!(c.packet.interfaces.len(), 2);

    let err = parse(&with_fault("seed = 9\nrx_corrupt = 1500\n")).unwrap_err();
    assert_eq!(
        err,
        "fwd.toml:21: interfaces[0].fault.rx_corrupt = 1500: a rate is per mille, use 0 to 1000"
    );
    let err = parse(&with_fault("rx_drops = 5\n")).unwrap_err();
    assert!(
        err.starts_with("fwd.toml:20: interfaces[0].fault.rx_drops: unknown key `rx_drops` in interfaces[0].fault; did you mean `rx_drop`? the valid keys are rx_corrupt, rx_drop,"),
        "{err}"
    );
}

/// A network namespace of this test's own with one TAP `k0` (MTU 9000, 10.0.1.1/24
/// given to the kernel), deleted when dropped.
struct KernelSide(String);

impl KernelSide {
    fn new(tag: &str) -> KernelSide {
        let ns = format!("polld-cfg-{tag}-{}", std::process::id());
        let ip = |args: &[&str]| {
            let ok = std::process::Command::new("ip")
                .args(args)
                .status()
                .unwrap();
            assert!(ok.success(), "ip {args:?}");
        };
        ip(&["netns", "add", &ns]);
        let side = KernelSide(ns.clone());
        ip(&["-n", &ns, "tuntap", "add", "dev", "k0", "mode", "tap"]);
        ip(&["-n", &ns, "link", "set", "k0", "mtu", "9000"]);
        ip(&["-n", &ns, "addr", "add", "10.0.1.1/24", "dev", "k0"]);
        side
    }
}

impl Drop for KernelSide {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

#[test]
fn an_interface_takes_the_kernels_mtu_and_mac_and_a_tap_may_not_take_its_address() {
    polld_testsupport::require_root!("needs root to create a network namespace");
    let side = KernelSide::new("mtu");
    let entry = |extra: &str| {
        format!(
            "[[interfaces]]\nname = \"k0\"\nnetns = \"{}\"\nbackend = \"tap\"\naddresses = [\"10.0.1.2/24\"]\n{extra}",
            side.0
        )
    };
    let c = parse(&entry("")).unwrap();
    assert_eq!(c.packet.interfaces[0].mtu, 9000);
    assert!(c.packet.interfaces[0].mac.is_some());
    assert_eq!(
        parse(&entry("mtu = 1400")).unwrap().packet.interfaces[0].mtu,
        1400
    );
    // The address of the TAP's kernel end: the link would have it twice.
    let taken = entry("").replace("10.0.1.2/24", "10.0.1.1/24");
    let err = parse(&taken).unwrap_err();
    assert!(
        err.contains(
            "fwd.toml:5: interfaces[0].addresses[0]: the kernel already has 10.0.1.1 on k0"
        ),
        "{err}"
    );
    assert!(err.contains("`ip addr del 10.0.1.1/24 dev k0`"), "{err}");
    // An interface this namespace does not have keeps the default.
    let c = parse(GOOD).unwrap();
    assert!(c.packet.interfaces.iter().all(|i| i.mtu == 1500));
}

#[test]
fn af_packet_is_refused_beside_a_kernel_that_forwards_on_the_interface() {
    polld_testsupport::require_root!("needs root to create a network namespace");
    let side = KernelSide::new("fwd");
    let sysctl = |assignment: &str| {
        let ok = std::process::Command::new("ip")
            .args(["netns", "exec", &side.0, "sysctl", "-qw", assignment])
            .status()
            .unwrap();
        assert!(ok.success(), "sysctl {assignment}");
    };
    let entry = |backend: &str| {
        format!(
            "[[interfaces]]\nname = \"k0\"\nnetns = \"{}\"\nbackend = \"{backend}\"\naddresses = [\"10.0.1.2/24\"]\n",
            side.0
        )
    };
    sysctl("net.ipv4.ip_forward=0");
    sysctl("net.ipv6.conf.all.forwarding=0");
    parse(&entry("af_packet")).expect("the kernel forwards nothing: AF_PACKET may poll k0");

    // AF_PACKET reads a copy of what the kernel keeps: both would forward it.
    sysctl("net.ipv4.conf.k0.forwarding=1");
    let err = parse(&entry("af_packet")).unwrap_err();
    assert!(
        err.contains(
            "fwd.toml:4: interfaces[0].backend: the kernel forwards what it receives on \"k0\""
        ) && err.contains("(net.ipv4.conf.k0.forwarding = 1)")
            && err.contains("forwarded twice"),
        "{err}"
    );
    let fix = format!(
        "`ip netns exec {} sysctl -w net.ipv4.conf.k0.forwarding=0`",
        side.0
    );
    assert!(
        err.contains(&fix) && err.contains("backend = \"af_xdp\""),
        "{err}"
    );
    // AF_XDP takes the frames from the kernel: nothing is forwarded twice.
    parse(&entry("af_xdp")).expect("AF_XDP beside a forwarding kernel");

    // IPv6 forwards by `all`, where the interface has IPv6.
    sysctl("net.ipv4.conf.k0.forwarding=0");
    sysctl("net.ipv6.conf.all.forwarding=1");
    let err = parse(&entry("af_packet")).unwrap_err();
    assert!(
        err.contains("sysctl -w net.ipv6.conf.all.forwarding=0`"),
        "{err}"
    );
    assert!(!err.contains("net.ipv4"), "{err}");
    sysctl("net.ipv6.conf.k0.disable_ipv6=1");
    parse(&entry("af_packet")).expect("k0 has no IPv6 to forward");
}

/// Two interfaces split over two poll CPUs: veth1 on AF_XDP queues, veth2 fanned out on
/// AF_PACKET; `extra1` and `extra2` go into their entries.
#[test]
fn the_annotated_example_of_every_key_is_a_valid_file() {
    // docs/config.md and polld.toml(5) show it: a reader copies it.
    let example = polld_runtime::config::annotated_example();
    let c = parse(&example).unwrap_or_else(|e| panic!("{e}\n{example}"));
    assert_eq!(c.daemon.cpus, vec![0, 1]);
    assert_eq!(c.devices.len(), 4);
    assert_eq!(c.knobs.len(), 3);
    assert_eq!(c.profile, Profile::FreeBsd);
    for key in [
        "socket",
        "realtime",
        "metrics_public",
        "irq_deferral",
        "queue",
        "fanout",
        "netns",
        "mtu",
        "seed",
    ] {
        assert!(
            example.contains(&format!("\n{key} = ")),
            "{key} is not shown"
        );
    }
}
