//! `polld run` forwarding by the kernel's own tables (`tables = "kernel"`, the default
//! on AF_PACKET with a config of `[[interfaces]]` only) on the veth testbed (root only):
//! the routes, addresses and neighbours of fwd's kernel are followed while a flood runs,
//! each change seen in polld's counters; a next hop the kernel has no entry for is asked
//! of the kernel, which resolves it.

mod common;

use std::time::Duration;

use common::{counter, ip_in, stop, testbed, Dir, Polld, Running, POLLD};
use polld_testbed::{Role, Testbed};
use polld_testsupport::eventually;

/// The flooded prefix, and the address in it gen sends to.
const PREFIX: &str = "10.9.0.0/16";
const DST: &str = "10.9.0.1";
/// A next hop on veth2's network without a neighbour entry until the test adds one.
const OTHER_HOP: &str = "10.0.2.77";

/// The config: the two interfaces, backend and mode, nothing else.
fn interfaces_only(socket: &std::path::Path) -> String {
    let mut c = format!("[daemon]\nsocket = {:?}\n", socket.display().to_string());
    for name in ["veth1", "veth2"] {
        c += &format!(
            "\n[[interfaces]]\nname = {name:?}\nbackend = \"af_packet\"\nmode = \"polling\"\n"
        );
    }
    c
}

/// `polld gen` from gen to [`DST`] through fwd at 2000 frames a second, until dropped.
fn flood(tb: &Testbed) -> Running {
    let l = tb.layout();
    let child = tb
        .command_in(Role::Gen, None, POLLD)
        .unwrap()
        .args(["gen", &l.veth0.name, "-i", "0", "--rate", "2000"])
        .args(["--duration", "600", "--dst-ip", DST])
        .args(["--src-ip", &l.veth0.addr.to_string()])
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
    let dir = Dir::new(&format!("{}-kernel-tables", l.prefix));
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("fwd.toml");
    std::fs::write(&config, interfaces_only(&socket)).unwrap();
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
    let _flood = flood(&tb);

    // The route in the kernel's table before start: forwarded to sink.
    grows(&polld, "dev.veth1.forwarded", "start");
    // Replaced by one through a next hop the kernel has no neighbour for.
    ip_in(fwd, &["route", "replace", PREFIX, "via", OTHER_HOP]);
    grows(&polld, "dev.veth1.drops.unresolved", "the route's replace");
    // The neighbour appears: forwarded again; it goes: unresolved again.
    let mac = l.veth3.mac.as_str();
    let neigh = ["lladdr", mac, "dev", "veth2", "nud", "permanent"];
    ip_in(
        fwd,
        &[&["neigh", "replace", OTHER_HOP][..], &neigh].concat(),
    );
    grows(&polld, "dev.veth1.forwarded", "the neighbour's add");
    ip_in(fwd, &["neigh", "del", OTHER_HOP, "dev", "veth2"]);
    grows(
        &polld,
        "dev.veth1.drops.unresolved",
        "the neighbour's delete",
    );
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
        "dev.veth1.drops.unpolled_route",
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
