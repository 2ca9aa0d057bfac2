//! `polld run` configuration files with several poll CPUs: interfaces and their queues or
//! fanout sockets assigned to CPUs, and each mistake at its line with the fix.

use polld_runtime::config::RunConfig;

mod good_config;
use good_config::{parse, GOOD};

fn two_cpus() -> String {
    GOOD.replace("cpu = 1", "cpus = [0, 1]")
        .replace("mac = \"02:00:00:00:02:01\"", "cpu = 0\nmac = \"02:00:00:00:02:01\"")
        .replace(
            "[[routes]]",
            r#"[[interfaces]]
name = "veth3"
mac = "02:00:00:00:03:01"
addresses = ["10.0.3.1/24"]

[[interfaces]]
name = "veth4"
cpu = 1
mac = "02:00:00:00:04:01"
addresses = ["10.0.4.1/24"]

[[routes]]
prefix = "10.8.0.0/16"
gateway = "10.0.4.2"

[[routes]]"#,
        )
        .replace(
            "\"kern.polling.controller\" = \"time\"",
            "\"kern.polling.controller\" = \"time\"\n\"net.ifpoll.1.pollhz\" = 2000\n\"dev.veth4.mode\" = \"polling\"",
        )
}

#[test]
fn interfaces_go_to_their_cpu_or_round_robin_and_each_cpu_gets_its_routes_and_knobs() {
    let c = parse(&two_cpus()).unwrap();
    let cpus: Vec<(&str, Option<usize>)> =
        c.devices.iter().map(|d| (d.name.as_str(), d.cpu)).collect();
    assert_eq!(
        cpus,
        vec![
            ("veth1", Some(0)),
            ("veth2", Some(0)),
            ("veth3", Some(1)),
            ("veth4", Some(1))
        ]
    );
    let parts = c.per_cpu();
    assert_eq!(parts.len(), 2);
    let (cpu0, part0) = &parts[0];
    let (cpu1, part1) = &parts[1];
    assert_eq!((*cpu0, *cpu1), (0, 1));
    let names = |p: &RunConfig| p.devices.iter().map(|d| d.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(part0), ["veth1", "veth2"]);
    assert_eq!(names(part1), ["veth3", "veth4"]);
    assert_eq!(
        part1.devices[0].entry, 2,
        "errors still name the file's entry"
    );
    let gateways = |p: &RunConfig| {
        p.packet
            .routes
            .iter()
            .map(|r| r.gateway.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(gateways(part0), ["10.0.2.2"]);
    assert_eq!(gateways(part1), ["10.0.4.2"]);
    let knobs = |p: &RunConfig| p.knobs.iter().map(|k| k.name.clone()).collect::<Vec<_>>();
    assert!(!knobs(part0)
        .iter()
        .any(|k| k.contains("pollhz") || k.starts_with("dev.")));
    assert!(knobs(part1).contains(&"kern.polling.hz".to_string()));
    assert!(knobs(part1).contains(&"dev.veth4.mode".to_string()));
    assert!(knobs(part0).contains(&"kern.polling.user_frac".to_string()));
    assert!(knobs(part1).contains(&"kern.polling.user_frac".to_string()));
}

#[test]
fn cpu_mistakes_name_the_field_and_the_fix() {
    let err = parse(&two_cpus().replace("cpu = 0\n", "cpu = 5\n")).unwrap_err();
    assert!(
        err.contains("interfaces[1].cpu: CPU 5 is not a poll CPU; the poll CPUs are [0, 1]"),
        "{err}"
    );
    let err = parse(&two_cpus().replace("cpus = [0, 1]", "cpus = [0, 1]\ncpu = 1")).unwrap_err();
    assert!(
        err.contains("daemon.cpu: `cpu` pins the one poll thread, and `cpus` starts one per CPU"),
        "{err}"
    );
    let bridge = "mode = \"bridge\"\n[daemon]\ncpus = [0, 1]\n\n[[interfaces]]\nname = \"veth1\"\n\n[[interfaces]]\nname = \"veth2\"\n";
    let err = parse(bridge).unwrap_err();
    assert!(err.contains("a bridge floods to every port"), "{err}");
}

fn queued(extra1: &str, extra2: &str) -> String {
    format!(
        r#"
[daemon]
cpus = [0, 1]

[[interfaces]]
name = "veth1"
backend = "af_xdp"
{extra1}
mac = "02:00:00:00:01:02"
addresses = ["10.0.1.2/24"]

[[interfaces]]
name = "veth2"
{extra2}
mac = "02:00:00:00:02:01"
addresses = ["10.0.2.1/24"]
"#
    )
}

#[test]
fn a_bridge_port_split_into_queues_names_its_queues_key() {
    let bridge = |extra1: &str, extra2: &str| {
        let config = format!("mode = \"bridge\"\n{}", queued(extra1, extra2));
        config
            .lines()
            .filter(|l| !l.starts_with("addresses"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let err = parse(&bridge("queues = 2", "")).unwrap_err();
    assert!(
        err.contains("interfaces[0].queues: a bridge floods to every port")
            && err.contains("remove `queues` from veth1"),
        "{err}"
    );
    let err = parse(&bridge("", "fanout = 2")).unwrap_err();
    assert!(
        err.contains("interfaces[1].fanout:") && err.contains("remove `fanout` from veth2"),
        "{err}"
    );
}

#[test]
fn queues_and_fanout_put_one_queue_of_each_interface_on_each_cpu() {
    let c = parse(&queued("queues = [0, 1]", "fanout = 2\ncpus = [1, 0]")).unwrap();
    assert_eq!(c.devices[0].queues, [0, 1]);
    assert_eq!(
        c.devices[0].queue_cpus,
        [0, 1],
        "round-robin: queue k on cpus[k]"
    );
    assert_eq!(c.devices[1].queues, [0, 1]);
    assert_eq!(c.devices[1].queue_cpus, [1, 0]);
    assert_eq!(c.devices[0].cpu, None);
    let parts = c.per_cpu();
    for (cpu, part) in &parts {
        let mine: Vec<(&str, Option<usize>)> = part
            .devices
            .iter()
            .map(|d| (d.name.as_str(), d.this_queue))
            .collect();
        let want = match cpu {
            0 => [("veth1", Some(0)), ("veth2", Some(1))],
            _ => [("veth1", Some(1)), ("veth2", Some(0))],
        };
        assert_eq!(mine, want, "CPU {cpu}");
        // Each CPU has both networks: it routes between them itself.
        assert_eq!(part.packet.interfaces.len(), 2);
    }
    let c = parse(&queued("queues = 2", "")).unwrap();
    assert_eq!(c.devices[0].queues, [0, 1]);
    assert_eq!(
        c.devices[1].cpu,
        Some(0),
        "a whole interface still goes round-robin"
    );
}

#[test]
fn queue_mistakes_name_the_field_and_the_fix() {
    let cases: [(String, &str); 14] = [
        (
            queued("fanout = 2", ""),
            "interfaces[0].fanout: fanout is AF_PACKET's PACKET_FANOUT; on backend af_xdp write `queues = N`",
        ),
        (
            queued("", "queues = 2"),
            "interfaces[1].queues: backend af_packet has no per-queue sockets; write `fanout = N`",
        ),
        (
            queued("", "backend = \"tap\"\nqueues = 2"),
            "interfaces[1].queues: a TAP here has one queue; for several CPUs use several TAPs",
        ),
        (
            queued("", "backend = \"tap\"\nfanout = 2"),
            "interfaces[1].fanout: a TAP here has one queue; for several CPUs use several TAPs",
        ),
        (
            queued("queues = [0, 1, 2]", ""),
            "interfaces[0].queues: 3 queues on 2 poll CPU(s) ([daemon] cpus = [0, 1]); each CPU polls one queue of an interface: at most 2",
        ),
        (
            queued("queues = [1, 1]", ""),
            "interfaces[0].queues: queue 1 is listed twice",
        ),
        (
            queued("queues = 2\ncpus = [0, 7]", ""),
            "interfaces[0].cpus: CPU 7 is not a poll CPU; the poll CPUs are [0, 1]",
        ),
        (
            queued("queues = 2\ncpus = [0]", ""),
            "interfaces[0].cpus: 1 CPU(s) for 2 queue(s); list one CPU per queue",
        ),
        (
            queued("queues = 2\ncpu = 1", ""),
            "interfaces[0].cpu: with `queues` each queue has its own CPU; write `cpus = [..]`",
        ),
        (
            queued("queues = 2", "").replace("cpus = [0, 1]", "cpu = 1"),
            "interfaces[0].queues: each queue is polled by its own CPU, and there is one poll thread; list the poll CPUs in [daemon] cpus",
        ),
        (
            queued("queue = 1\nqueues = 2", ""),
            "interfaces[0].queue: `queue` opens one receive queue and `queues` several",
        ),
        // On AF_PACKET the errors name `fanout`, the key the file gave.
        (
            queued("", "fanout = 2\ncpu = 1"),
            "interfaces[1].cpu: with `fanout` each queue has its own CPU; write `cpus = [..]`",
        ),
        (
            queued("", "fanout = 3"),
            "interfaces[1].fanout: 3 queues on 2 poll CPU(s) ([daemon] cpus = [0, 1])",
        ),
        (
            queued("", "fanout = 2").replace("cpus = [0, 1]", "cpu = 1"),
            "interfaces[1].fanout: each queue is polled by its own CPU, and there is one poll thread",
        ),
    ];
    for (text, want) in cases {
        let err = parse(&text).unwrap_err();
        assert!(err.contains(want), "{err}\nwanted: {want}");
        assert!(err.starts_with("fwd.toml:"), "{err}");
    }
}
