//! `polld run` forwarding by the kernel's own tables (`tables = "kernel"`, the default
//! on AF_PACKET with a config of `[[interfaces]]` only) on the veth testbed (root only):
//! the routes, addresses and neighbours of fwd's kernel are followed while a flood runs,
//! each change seen in polld's counters; a next hop the kernel has no entry for is asked
//! of the kernel, which resolves it; a multipath route spreads a flood of many flows
//! over its next hops. What polld hands the kernel arrives, every frame counted from gen
//! to the sink: a flood routed out of an interface polld does not poll, and the first
//! frames to a next hop the kernel has not resolved yet.

mod common;

use std::time::Duration;

use common::{
    count, counter, ip_in, one_document, signal, stop, testbed, Dir, Polld, Running, POLLD,
};
use polld_testbed::{Role, Testbed};
use polld_testsupport::eventually;
use rustix::process::Signal;
use serde_json::Value;

/// The flooded prefix, and the address in it gen sends to.
const PREFIX: &str = "10.9.0.0/16";
const DST: &str = "10.9.0.1";
/// A next hop on veth2's network without a neighbour entry until the test adds one.
const OTHER_HOP: &str = "10.0.2.77";

/// The config: the interfaces `names`, backend and mode, nothing else.
fn interfaces_only(socket: &std::path::Path, names: &[&str]) -> String {
    let mut c = format!("[daemon]\nsocket = {:?}\n", socket.display().to_string());
    for name in names {
        c += &format!(
            "\n[[interfaces]]\nname = {name:?}\nbackend = \"af_packet\"\nmode = \"polling\"\n"
        );
    }
    c
}

/// `polld gen` from gen (from `src`) to `dst` through fwd at 2000 frames a second in
/// `flows` flows (their ports differ), until dropped.
fn flood(tb: &Testbed, src: &str, dst: &str, flows: u32) -> Running {
    let l = tb.layout();
    let child = tb
        .command_in(Role::Gen, None, POLLD)
        .unwrap()
        .args(["gen", &l.veth0.name, "-i", "0", "--rate", "2000"])
        .args(["--duration", "600", "--dst-ip", dst, "--src-ip", src])
        .args(["--flows", &flows.to_string()])
        .args(["--src-mac", &l.veth0.mac, "--dst-mac", &l.veth1.mac])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Running(child)
}

/// Waits until counter `name` grew by 100 from now: the flood takes that path.
fn grows(polld: &Polld, name: &str, after: &str) -> u64 {
    let start = counter(polld, name);
    eventually(
        &format!("{name} grows after {after}"),
        Duration::from_secs(30),
        || counter(polld, name) > start + 100,
    );
    counter(polld, name)
}

#[test]
fn the_kernels_routes_kinds_and_neighbours_are_followed_under_a_flood() {
    require_root!();
    let tb = testbed("kt");
    let l = tb.layout();
    let fwd = l.fwd_ns.as_str();
    let sink = l.veth3.addr.to_string();
    ip_in(fwd, &["route", "add", PREFIX, "via", &sink]);
    let (_dir, config, socket) = config_in(&tb, "kernel-tables");
    let polld = Polld::start(&tb, &config, &socket);
    // The kernel's addresses are polld's, and followed.
    let shown = polld.ok(&["ifconfig", "veth1"]);
    let inet = format!("\tinet {}\n", l.veth1.cidr());
    assert!(
        shown.contains(&inet) && shown.contains("\ttables kernel\n"),
        "{shown}"
    );
    ip_in(fwd, &["addr", "add", "10.0.5.1/24", "dev", "veth1"]);
    eventually(
        "ifconfig shows an address added",
        Duration::from_secs(30),
        || {
            polld
                .ok(&["ifconfig", "veth1"])
                .contains("\tinet 10.0.5.1/24\n")
        },
    );
    let _flood = flood(&tb, &l.veth0.addr.to_string(), DST, 1);

    // The route in the kernel's table before start: forwarded to sink.
    grows(&polld, "dev.veth1.forwarded", "start");
    // Replaced by one through a next hop the kernel has no neighbour for: handed to the
    // kernel, which tries to resolve it.
    ip_in(fwd, &["route", "replace", PREFIX, "via", OTHER_HOP]);
    grows(&polld, "dev.veth1.to_kernel", "the route's replace");
    // The neighbour appears: forwarded again; it goes: handed again.
    let mac = l.veth3.mac.as_str();
    let neigh = ["lladdr", mac, "dev", "veth2", "nud", "permanent"];
    ip_in(
        fwd,
        &[&["neigh", "replace", OTHER_HOP][..], &neigh].concat(),
    );
    grows(&polld, "dev.veth1.forwarded", "the neighbour's add");
    ip_in(fwd, &["neigh", "del", OTHER_HOP, "dev", "veth2"]);
    grows(&polld, "dev.veth1.to_kernel", "the neighbour's delete");
    // The kinds that forward nothing, each by its reason.
    for (kind, reason) in [
        ("blackhole", "blackhole"),
        ("unreachable", "unreachable"),
        ("prohibit", "prohibited"),
    ] {
        ip_in(fwd, &["route", "replace", kind, PREFIX]);
        grows(&polld, &format!("dev.veth1.drops.{reason}"), kind);
    }
    // Out of an interface polld does not poll: the kernel's.
    ip_in(
        fwd,
        &["link", "add", "kt0", "type", "veth", "peer", "name", "kt1"],
    );
    ip_in(fwd, &["link", "set", "kt0", "up"]);
    ip_in(fwd, &["route", "replace", PREFIX, "dev", "kt0"]);
    grows(
        &polld,
        "net.inet.ip.to_kernel_unpolled",
        "a route out of kt0",
    );
    // Gone: no route.
    ip_in(fwd, &["route", "del", PREFIX]);
    grows(&polld, "dev.veth1.drops.no_route", "the route's delete");
    // And back, after all of it.
    ip_in(fwd, &["route", "add", PREFIX, "via", &sink]);
    grows(&polld, "dev.veth1.forwarded", "the route's add");
    // The kernel forgets sink's link-layer address, and nothing in fwd talks to sink:
    // polld asks the kernel to resolve it, and forwarding resumes by itself.
    let asked = counter(&polld, "polld.tables_resolves");
    ip_in(fwd, &["neigh", "del", &sink, "dev", "veth2"]);
    eventually(
        "polld asks the kernel to resolve sink",
        Duration::from_secs(30),
        || counter(&polld, "polld.tables_resolves") > asked,
    );
    grows(
        &polld,
        "dev.veth1.forwarded",
        "the kernel resolved sink again",
    );
    // What polld holds, in its entries: the connected networks, the flooded prefix and
    // the added address's network, from one dump and the changes since.
    assert!(counter(&polld, "polld.tables_routes") >= 4);
    assert!(counter(&polld, "polld.tables_changes") >= 10);
    assert_eq!(counter(&polld, "polld.tables_dumps"), 1);
    assert!(counter(&polld, "polld.tables_time") > 0);
    drop(_flood);
    stop(polld);
}

/// Starts `polld sink` on `iface` in sink's namespace for `secs` seconds, and waits until
/// its packet socket is open.
fn sink_on(tb: &Testbed, iface: &str, secs: u32) -> std::process::Child {
    let open = |tb: &Testbed| {
        let out = tb
            .command_in(Role::Sink, None, "cat")
            .unwrap()
            .arg("/proc/net/packet")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count() > 1
    };
    assert!(!open(tb), "no packet socket in sink before the sink starts");
    let child = tb
        .command_in(Role::Sink, None, POLLD)
        .unwrap()
        .args(["sink", iface, "--backend", "af_packet", "--json", "-i", "0"])
        .args(["--duration", &secs.to_string()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    eventually(
        "the sink's packet socket is open",
        Duration::from_secs(20),
        || open(tb),
    );
    child
}

/// `polld gen` from gen to [`DST`] through fwd: `frames` frames at 2000 a second, waited
/// for; its JSON summary.
fn gen_counted(tb: &Testbed, frames: u32) -> Value {
    let l = tb.layout();
    let out = tb
        .command_in(Role::Gen, None, POLLD)
        .unwrap()
        .args(["gen", &l.veth0.name, "-i", "0", "--json", "--rate", "2000"])
        .args(["--count", &frames.to_string(), "--duration", "60"])
        .args(["--dst-ip", DST, "--src-ip", &l.veth0.addr.to_string()])
        .args(["--src-mac", &l.veth0.mac, "--dst-mac", &l.veth1.mac])
        .output()
        .unwrap();
    assert!(out.status.success(), "polld gen: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("polld gen --json: {e}: {stdout}"))
}

/// Runs a counted flood through polld (started on `tb` with only its interfaces) to a
/// sink on `iface` in sink's namespace, after `setup` routed [`PREFIX`] in fwd; checks
/// that every frame is accounted for end to end and returns polld's final counters of
/// veth1 and the stage's handed counts (`to_kernel_unpolled`, `to_kernel_unresolved`).
fn counted_flood(tb: &Testbed, iface: &str, setup: impl FnOnce()) -> (Value, u64, u64) {
    let (_dir, config, socket) = config_in(tb, "handoff");
    setup();
    let polld = Polld::start(tb, &config, &socket);
    let sink = sink_on(tb, iface, 20);
    let gen = gen_counted(tb, 2000);
    let out = sink.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let sink: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("polld sink --json: {e}: {stdout}"));
    let handed = (
        counter(&polld, "net.inet.ip.to_kernel_unpolled"),
        counter(&polld, "net.inet.ip.to_kernel_unresolved"),
    );
    let interfaces = stop(polld);
    let veth1 = interfaces
        .iter()
        .find(|i| i["name"] == "veth1")
        .unwrap()
        .clone();
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    let seq = &sink["analysis"]["sequence"];
    let (received, lost) = (n(&seq["received"]), n(&seq["lost"]));
    let end_records = n(&sink["analysis"]["end_records"]);
    let sent = n(&gen["frames"]);
    // Lost before polld: gen's own drops, veth0's ring; and what polld dropped.
    let before = n(&gen["dropped"]) + gen["link_dropped"].as_u64().unwrap_or(0);
    let polld_drops: u64 = veth1["counters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[0].as_str().is_some_and(|name| name.starts_with("drops.")))
        .map(|c| n(&c[1]))
        .sum();
    let through = count(&veth1, "forwarded") + count(&veth1, "to_kernel");
    let ledger = format!(
        "gen sent {sent} (dropped {before}); polld veth1: forwarded + to_kernel {through}, \
         dropped {polld_drops}; sink: received {received} + end records {end_records}, \
         lost {lost}"
    );
    assert!(sent > 0 && received > 0, "{ledger}");
    assert_eq!(received + lost, sent, "the sink's count: {ledger}");
    assert_eq!(
        through,
        received + end_records,
        "what polld passed on arrived, and nothing else: {ledger}"
    );
    assert_eq!(
        lost,
        before + polld_drops,
        "every frame lost is named: {ledger}"
    );
    (veth1, handed.0, handed.1)
}

#[test]
fn a_route_out_of_an_interface_polld_does_not_poll_is_forwarded_by_the_kernel() {
    require_root!();
    let tb = testbed("ku");
    let l = tb.layout();
    let (fwd, sink) = (l.fwd_ns.as_str(), l.sink_ns.as_str());
    let (veth1, unpolled, unresolved) = counted_flood(&tb, "kt1", || {
        // A link of the kernel's alone, fwd's kt0 to sink's kt1, and the flooded prefix
        // routed out of it.
        let pair = ["link", "add", "kt0", "type", "veth", "peer", "name", "kt1"];
        ip_in(fwd, &[&pair[..], &["netns", sink]].concat());
        ip_in(fwd, &["addr", "add", "10.0.7.1/24", "dev", "kt0"]);
        ip_in(fwd, &["link", "set", "kt0", "up"]);
        ip_in(sink, &["addr", "add", "10.0.7.2/24", "dev", "kt1"]);
        ip_in(sink, &["link", "set", "kt1", "up"]);
        ip_in(
            fwd,
            &["route", "add", PREFIX, "via", "10.0.7.2", "dev", "kt0"],
        );
    });
    assert_eq!(count(&veth1, "forwarded"), 0, "{veth1}");
    assert!(count(&veth1, "to_kernel") > 0, "{veth1}");
    assert_eq!((unpolled, unresolved), (count(&veth1, "to_kernel"), 0));
}

#[test]
fn the_first_frames_to_a_next_hop_the_kernel_has_not_resolved_arrive() {
    require_root!();
    let tb = testbed("kr");
    let l = tb.layout();
    let (fwd, sink) = (l.fwd_ns.as_str(), l.sink_ns.as_str());
    let (veth1, unpolled, unresolved) = counted_flood(&tb, "veth3", || {
        // A next hop sink answers ARP for, which fwd's kernel has never resolved.
        ip_in(
            sink,
            &["addr", "add", &format!("{OTHER_HOP}/24"), "dev", "veth3"],
        );
        ip_in(fwd, &["route", "add", PREFIX, "via", OTHER_HOP]);
    });
    // The first frames went by the kernel while it resolved; the rest by polld.
    assert!(unresolved > 0, "{veth1}");
    assert_eq!((unpolled, count(&veth1, "to_kernel")), (0, unresolved));
    assert!(count(&veth1, "forwarded") > 0, "{veth1}");
}

/// Writes the config of [`interfaces_only`] in a scratch directory; the directory, the
/// config and the control socket.
fn config_in(tb: &Testbed, tag: &str) -> (Dir, std::path::PathBuf, std::path::PathBuf) {
    let dir = Dir::new(&format!("{}-{tag}", tb.layout().prefix));
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    std::fs::write(&config, interfaces_only(&socket, &["veth1", "veth2"])).unwrap();
    (dir, config, socket)
}

#[test]
fn notifications_lost_to_a_full_socket_make_polld_read_the_tables_again() {
    require_root!();
    let tb = testbed("ko");
    let l = tb.layout();
    let fwd = l.fwd_ns.as_str();
    let sink = l.veth3.addr.to_string();
    let (dir, config, socket) = config_in(&tb, "overrun");
    let polld = Polld::start(&tb, &config, &socket);
    assert_eq!(counter(&polld, "polld.tables_dumps"), 1);
    // polld reads nothing while stopped; meanwhile 20,000 routes and the flooded prefix
    // come in one batch, far more notifications than its socket holds.
    let mut batch = format!("route add {PREFIX} via {sink}\n");
    for i in 0..20_000u32 {
        batch += &format!("route add 198.18.{}.{}/32 via {sink}\n", i / 256, i % 256);
    }
    let file = dir.0.join("routes.batch");
    std::fs::write(&file, batch).unwrap();
    signal(polld.child(), Signal::STOP);
    let added = std::process::Command::new("ip")
        .args(["-n", fwd, "-batch"])
        .arg(&file)
        .status();
    signal(polld.child(), Signal::CONT);
    assert!(added.unwrap().success(), "ip -batch");
    // The kernel's IPv4 routes of the main table, one per prefix as polld holds them.
    let kernel = ip_in(fwd, &["-4", "route", "show", "table", "main"])
        .lines()
        .count() as u64;
    assert!(kernel > 20_000, "{kernel} routes");
    eventually(
        "polld reads the tables again after the overrun",
        Duration::from_secs(60),
        || counter(&polld, "polld.tables_dumps") > 1,
    );
    eventually(
        "polld holds the kernel's routes",
        Duration::from_secs(60),
        || counter(&polld, "polld.tables_routes") == kernel,
    );
    // And forwards by the route that came during the overrun.
    let _flood = flood(&tb, &l.veth0.addr.to_string(), DST, 1);
    grows(&polld, "dev.veth1.forwarded", "the overrun");
    drop(_flood);
    stop(polld);
}

#[test]
fn a_namespace_without_routes_out_of_polled_interfaces_gets_a_clear_message() {
    require_root!();
    let tb = testbed("kn");
    let fwd = tb.layout().fwd_ns.as_str();
    for dev in ["veth1", "veth2"] {
        ip_in(fwd, &["addr", "flush", "dev", dev]);
    }
    ip_in(fwd, &["route", "flush", "table", "main"]);
    let (_dir, config, socket) = config_in(&tb, "no-routes");
    // polld runs in fwd (`--netns`): the namespace is its own.
    let warning = "kernel tables: no route of polld's namespace leads out of veth1, veth2";
    let fix = "`ip addr add 10.0.1.1/24 dev veth1`";
    let (_, log) = Polld::start(&tb, &config, &socket).stop_with_log();
    assert!(log.contains(warning) && log.contains(fix), "{log}");
    // With an address, its connected route leads out of veth1: no warning.
    ip_in(fwd, &["addr", "add", "10.0.1.2/24", "dev", "veth1"]);
    let _ = std::fs::remove_file(&socket);
    let (_, log) = Polld::start(&tb, &config, &socket).stop_with_log();
    assert!(!log.contains("no route of"), "{log}");
}

#[test]
fn a_multipath_route_spreads_a_flood_of_many_flows_over_its_next_hops() {
    require_root!();
    let tb = testbed("mp");
    let l = tb.layout();
    let (fwd, sink) = (l.fwd_ns.as_str(), l.sink_ns.as_str());
    // A second link from fwd to sink: mp0 (polled) in fwd, mp1 in sink.
    ip_in(
        fwd,
        &[
            "link", "add", "mp0", "type", "veth", "peer", "name", "mp1", "netns", sink,
        ],
    );
    for (ns, dev, v4) in [(fwd, "mp0", "10.0.6.1/24"), (sink, "mp1", "10.0.6.2/24")] {
        ip_in(ns, &["addr", "add", v4, "dev", dev]);
        ip_in(ns, &["link", "set", dev, "up"]);
    }
    // IPv6 on mp0-mp1 too (2001:db8:6::/64; veth2-veth3 has the testbed's), with a
    // permanent neighbour in fwd as the testbed gives veth3: its IPv6 is quiet (no
    // link-local address to solicit from).
    for (ns, dev, v6) in [
        (fwd, "mp0", "2001:db8:6::1/64"),
        (sink, "mp1", "2001:db8:6::2/64"),
    ] {
        ipv6_on(ns, dev);
        ip_in(ns, &["addr", "add", v6, "dev", dev, "nodad"]);
    }
    let shown = ip_in(sink, &["-j", "link", "show", "mp1"]);
    let mp1_mac = serde_json::from_str::<Value>(&shown).unwrap()[0]["address"]
        .as_str()
        .unwrap()
        .to_string();
    ip_in(
        fwd,
        &[
            "-6",
            "neigh",
            "replace",
            "2001:db8:6::2",
            "lladdr",
            &mp1_mac,
            "dev",
            "mp0",
            "nud",
            "permanent",
        ],
    );
    let dir = Dir::new(&format!("{}-multipath", l.prefix));
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    let names = ["veth1", "veth2", "mp0"];
    std::fs::write(&config, interfaces_only(&socket, &names)).unwrap();
    let polld = Polld::start(&tb, &config, &socket);
    let (veth2, mp0) = ("dev.veth2.tx_packets", "dev.mp0.tx_packets");
    let sink4 = l.veth3.addr.to_string();
    let families = [
        (
            "-4",
            PREFIX,
            DST,
            l.veth0.addr.to_string(),
            sink4,
            "10.0.6.2",
        ),
        (
            "-6",
            "2001:db8:9::/48",
            "2001:db8:9::1",
            l.veth0.addr6.to_string(),
            l.veth3.addr6.to_string(),
            "2001:db8:6::2",
        ),
    ];
    for (family, prefix, dst, src, via_veth2, via_mp0) in families {
        let multipath = [
            family, "route", "replace", prefix, "nexthop", "via", &via_veth2, "dev", "veth2",
            "nexthop", "via", via_mp0, "dev", "mp0", "weight", "2",
        ];
        ip_in(fwd, &multipath);
        let flood = flood(&tb, &src, dst, 256);
        // Both next hops take flows.
        grows(&polld, veth2, &format!("{family} multipath route"));
        grows(&polld, mp0, &format!("{family} multipath route"));
        // One next hop: everything moves to veth2, and mp0 sends nothing more. IPv4
        // replaces the route; IPv6 deletes the next hop through mp0, which the kernel
        // says as that next hop gone alone (the route keeps the other).
        let single: &[&str] = match family {
            "-4" => &[
                "route", "replace", prefix, "via", &via_veth2, "dev", "veth2",
            ],
            _ => &["route", "del", prefix, "via", via_mp0, "dev", "mp0"],
        };
        ip_in(fwd, &[&[family][..], single].concat());
        grows(&polld, veth2, &format!("{family} single path"));
        let left = counter(&polld, mp0);
        grows(&polld, veth2, &format!("{family} single path, again"));
        assert_eq!(counter(&polld, mp0), left, "{family}: mp0 still sends");
        drop(flood);
        ip_in(fwd, &[family, "route", "del", prefix]);
    }
    stop(polld);
}

/// Turns IPv6 on for `dev` of namespace `ns` (the testbed leaves it off, so that no
/// router or neighbour solicitation adds frames no test sent).
fn ipv6_on(ns: &str, dev: &str) {
    let assignment = format!("net.ipv6.conf.{dev}.disable_ipv6=0");
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw", &assignment])
        .output()
        .unwrap();
    assert!(out.status.success(), "{assignment} in {ns}: {out:?}");
}

/// The row of `listing` (polld netstat -rn or arp -an) for `destination`, split in
/// columns; `None` when it has none.
fn row(listing: &str, destination: &str) -> Option<Vec<String>> {
    let arp = format!("({destination})");
    listing
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|c| c.first().is_some_and(|d| d == destination) || c.get(1) == Some(&arp))
}

#[test]
fn netstat_and_arp_list_the_kernels_routes_and_neighbours_as_they_change() {
    require_root!();
    let tb = testbed("ns");
    let l = tb.layout();
    let fwd = l.fwd_ns.as_str();
    let (_dir, config, socket) = config_in(&tb, "netstat");
    let polld = Polld::start(&tb, &config, &socket);
    let sink = l.veth3.addr.to_string();
    let (v4, v6, neighbour) = ("10.7.0.0/16", "2001:db8:7::/48", "10.0.2.99");
    let mac = "02:00:00:00:99:99";
    ipv6_on(fwd, "veth2");
    ip_in(
        fwd,
        &["addr", "add", "2001:db8:77::1/64", "dev", "veth2", "nodad"],
    );
    ip_in(fwd, &["route", "add", v4, "via", &sink]);
    ip_in(
        fwd,
        &[
            "-6",
            "route",
            "add",
            v6,
            "via",
            "2001:db8:77::2",
            "dev",
            "veth2",
        ],
    );
    let neigh = ["lladdr", mac, "dev", "veth2", "nud", "permanent"];
    ip_in(
        fwd,
        &[&["neigh", "replace", neighbour][..], &neigh].concat(),
    );
    let routes = |family: &str| polld.ok(&["netstat", "-rn", "-f", family]);
    let arp = || polld.ok(&["arp", "-an"]);
    eventually(
        "netstat and arp show the added entries",
        Duration::from_secs(30),
        || {
            row(&routes("inet"), v4).is_some()
                && row(&routes("inet6"), v6).is_some()
                && row(&arp(), neighbour).is_some()
        },
    );
    assert_eq!(
        row(&routes("inet"), v4).unwrap(),
        [v4, &sink, "UG", "veth2"]
    );
    assert_eq!(
        row(&routes("inet6"), v6).unwrap(),
        [v6, "2001:db8:77::2", "UG", "veth2"]
    );
    let line = row(&arp(), neighbour).unwrap().join(" ");
    assert_eq!(
        line,
        format!("? ({neighbour}) at {mac} on veth2 permanent [ethernet]")
    );
    // The headings count the routes; --json is one document with both families.
    let text = polld.ok(&["netstat", "-rn"]);
    assert!(
        text.contains("\nInternet6: ") && text.contains("(kernel tables, last update"),
        "{text}"
    );
    let out = polld.run(&["netstat", "-rn", "--json"]);
    let json = one_document("polld netstat -rn", &out.stdout, &["inet", "inet6"]);
    let inet = &json["inet"];
    assert_eq!(inet["source"], "kernel");
    assert_eq!(
        inet["total"].as_u64(),
        Some(counter(&polld, "polld.tables_routes"))
    );
    let listed = inet["rows"].as_array().unwrap();
    assert!(
        listed
            .iter()
            .any(|r| r["destination"] == v4 && r["gateway"] == sink.as_str()),
        "{inet}"
    );
    // Deleted: gone from the listings.
    ip_in(fwd, &["route", "del", v4]);
    ip_in(fwd, &["-6", "route", "del", v6]);
    ip_in(fwd, &["neigh", "del", neighbour, "dev", "veth2"]);
    eventually(
        "netstat and arp drop the deleted entries",
        Duration::from_secs(30),
        || {
            row(&routes("inet"), v4).is_none()
                && row(&routes("inet6"), v6).is_none()
                && row(&arp(), neighbour).is_none()
        },
    );
    stop(polld);
}
