//! The kernel's tables over rtnetlink, in a namespace the test creates and deletes: a dump
//! holds what `ip` configured (IPv4 and IPv6 routes of every kind, multipath, addresses,
//! neighbours), a change made with `ip` afterwards arrives as a change, and a burst larger
//! than the socket's buffer is reported as an overrun, after which a dump is whole again.
//! A packet handed to the kernel on its raw IP sockets is sent as it is, or refused as
//! too big with the MTU of its route.

#[macro_use]
mod common;

use std::net::IpAddr;
use std::time::Duration;

use polld_dev::kernel_tables::{
    Address, Change, KernelTables, NextHop, Prefix, RouteKind, Snapshot, MAIN_TABLE,
};
use polld_dev::netns::{in_netns, Netns};

/// A namespace with interfaces `d0` (10.9.0.1/24, 2001:db8:9::1/64) and `d1` (10.9.1.1/24),
/// each a veth whose peer is up in the same namespace; `ifindex` of each.
fn namespace() -> (Netns, u32, u32) {
    let ns = Netns::create("pt-rtnl").unwrap();
    for (name, v4) in [("d0", "10.9.0.1/24"), ("d1", "10.9.1.1/24")] {
        let peer = format!("p{name}");
        ns.ip(&["link", "add", name, "type", "veth", "peer", "name", &peer])
            .unwrap();
        ns.ip(&["link", "set", &peer, "up"]).unwrap();
        ns.ip(&["link", "set", name, "up"]).unwrap();
        ns.ip(&["addr", "add", v4, "dev", name]).unwrap();
    }
    ns.ip(&["addr", "add", "2001:db8:9::1/64", "dev", "d0", "nodad"])
        .unwrap();
    let index = |name: &str| -> u32 {
        let out = ns.ip(&["-o", "link", "show", name]).unwrap();
        out.split(':').next().unwrap().trim().parse().unwrap()
    };
    let (d0, d1) = (index("d0"), index("d1"));
    (ns, d0, d1)
}

fn prefix(text: &str) -> Prefix {
    let (addr, len) = text.split_once('/').unwrap();
    Prefix {
        addr: addr.parse().unwrap(),
        len: len.parse().unwrap(),
    }
}

fn main_route<'a>(snapshot: &'a Snapshot, dest: &str) -> &'a polld_dev::kernel_tables::Route {
    snapshot
        .routes
        .iter()
        .find(|r| r.table == MAIN_TABLE && r.dest == prefix(dest))
        .unwrap_or_else(|| panic!("no {dest} in {:#?}", snapshot.routes))
}

#[test]
fn a_dump_holds_the_routes_addresses_and_neighbours_ip_configured() {
    require_root!();
    let (ns, d0, d1) = namespace();
    for route in [
        "192.0.2.0/24 via 10.9.0.2 metric 7",
        "blackhole 198.51.100.0/24",
        "unreachable 198.51.101.0/24",
        "prohibit 198.51.102.0/24",
        "203.0.113.0/24 nexthop via 10.9.0.2 weight 1 nexthop via 10.9.1.2 weight 3",
    ] {
        let args: Vec<&str> = ["route", "add"]
            .into_iter()
            .chain(route.split(' '))
            .collect();
        ns.ip(&args).unwrap();
    }
    ns.ip(&[
        "-6",
        "route",
        "add",
        "2001:db8:1::/48",
        "via",
        "2001:db8:9::2",
    ])
    .unwrap();
    ns.ip(&[
        "neigh",
        "add",
        "10.9.0.2",
        "lladdr",
        "02:00:00:00:09:02",
        "dev",
        "d0",
        "nud",
        "permanent",
    ])
    .unwrap();
    ns.ip(&[
        "-6",
        "neigh",
        "add",
        "2001:db8:9::2",
        "lladdr",
        "02:00:00:00:09:03",
        "dev",
        "d0",
    ])
    .unwrap();

    let snapshot = in_netns(ns.name(), || {
        KernelTables::open(1 << 20).unwrap().dump().unwrap()
    })
    .unwrap();

    let gw = |ip: &str| Some(ip.parse::<IpAddr>().unwrap());
    let r = main_route(&snapshot, "192.0.2.0/24");
    assert_eq!((r.kind, r.metric), (RouteKind::Unicast, 7));
    assert_eq!(
        r.next_hops,
        [NextHop {
            gateway: gw("10.9.0.2"),
            ifindex: d0,
            weight: 1
        }]
    );
    assert_eq!(
        main_route(&snapshot, "198.51.100.0/24").kind,
        RouteKind::Blackhole
    );
    assert_eq!(
        main_route(&snapshot, "198.51.101.0/24").kind,
        RouteKind::Unreachable
    );
    assert_eq!(
        main_route(&snapshot, "198.51.102.0/24").kind,
        RouteKind::Prohibit
    );
    let multipath = &main_route(&snapshot, "203.0.113.0/24").next_hops;
    assert_eq!(
        multipath,
        &[
            NextHop {
                gateway: gw("10.9.0.2"),
                ifindex: d0,
                weight: 1
            },
            NextHop {
                gateway: gw("10.9.1.2"),
                ifindex: d1,
                weight: 3
            },
        ]
    );
    let v6 = main_route(&snapshot, "2001:db8:1::/48");
    assert_eq!(v6.next_hops[0].gateway, gw("2001:db8:9::2"));
    // The connected routes the addresses made.
    assert_eq!(
        main_route(&snapshot, "10.9.1.0/24").next_hops[0].ifindex,
        d1
    );
    assert_eq!(
        main_route(&snapshot, "2001:db8:9::/64").next_hops[0].gateway,
        None
    );
    // The box's own addresses: in the local table, and as addresses.
    assert!(snapshot
        .routes
        .iter()
        .any(|r| r.kind == RouteKind::Local && r.dest == prefix("10.9.0.1/32")));
    for (ifindex, addr) in [
        (d0, "10.9.0.1/24"),
        (d1, "10.9.1.1/24"),
        (d0, "2001:db8:9::1/64"),
    ] {
        let address = Address {
            ifindex,
            prefix: prefix(addr),
        };
        assert!(
            snapshot.addresses.contains(&address),
            "{address:?} in {:?}",
            snapshot.addresses
        );
    }
    let neighbour = |ip: &str| {
        snapshot
            .neighbours
            .iter()
            .find(|n| n.ip == ip.parse::<IpAddr>().unwrap())
            .unwrap_or_else(|| panic!("no {ip} in {:?}", snapshot.neighbours))
    };
    assert_eq!(neighbour("10.9.0.2").mac, Some([2, 0, 0, 0, 9, 2]));
    assert_eq!(neighbour("2001:db8:9::2").ifindex, d0);
}

#[test]
fn a_change_made_with_ip_arrives_as_a_change_and_a_burst_past_the_buffer_as_an_overrun() {
    require_root!();
    let (ns, d0, d1) = namespace();
    let name = ns.name().to_string();
    ns.ip(&["route", "add", "192.0.2.0/24", "via", "10.9.0.2"])
        .unwrap();
    let changes = in_netns(ns.name(), move || {
        // The smallest buffer the kernel grants: a few dozen notifications.
        let mut tables = KernelTables::open(0).unwrap();
        let before = tables.dump().unwrap();
        let replace = |via: &str| {
            polld_dev::netns::ip(&["-n", &name, "route", "replace", "192.0.2.0/24", "via", via])
                .unwrap()
        };
        replace("10.9.1.2");
        let mut seen = Vec::new();
        polld_testsupport::eventually("the replaced route", Duration::from_secs(10), || {
            seen.extend(tables.changes().unwrap());
            seen.iter().any(|c| {
                matches!(c, Change::Route(r) if r.dest.len == 24
                && r.next_hops.first().is_some_and(|h| h.ifindex == d1))
            })
        });
        // A thousand routes at once: more notifications than the buffer holds.
        let batch: String = (0..1000)
            .map(|i| format!("route add 172.16.{}.{}/32 dev d0\n", i / 250, i % 250))
            .collect();
        let file = std::env::temp_dir().join(format!("polld-rtnl-{}.batch", std::process::id()));
        std::fs::write(&file, batch).unwrap();
        polld_dev::netns::ip(&["-n", &name, "-batch", file.to_str().unwrap()]).unwrap();
        let _ = std::fs::remove_file(&file);
        let overrun = tables.changes().unwrap();
        let after = tables.dump().unwrap();
        (before, seen, overrun, after)
    })
    .unwrap();
    let (before, seen, overrun, after) = changes;
    assert_eq!(main_route(&before, "192.0.2.0/24").next_hops[0].ifindex, d0);
    assert!(!seen.contains(&Change::Overrun), "{seen:?}");
    assert_eq!(
        overrun.last(),
        Some(&Change::Overrun),
        "{} changes",
        overrun.len()
    );
    let host_routes = after
        .routes
        .iter()
        .filter(|r| {
            r.table == MAIN_TABLE
                && r.dest.len == 32
                && r.dest.addr.to_string().starts_with("172.16.")
        })
        .count();
    assert_eq!(host_routes, 1000);
    assert_eq!(main_route(&after, "192.0.2.0/24").next_hops[0].ifindex, d1);
}

#[test]
fn asked_to_resolve_a_next_hop_the_kernel_finds_its_link_layer_address() {
    require_root!();
    let (ns, d0, _) = namespace();
    // d0's peer, 10.9.0.2 in a namespace of its own, answers ARP.
    let peer = Netns::create("pt-rtnl-peer").unwrap();
    ns.ip(&["link", "set", "pd0", "netns", peer.name()])
        .unwrap();
    peer.ip(&["addr", "add", "10.9.0.2/24", "dev", "pd0"])
        .unwrap();
    peer.ip(&["link", "set", "pd0", "up"]).unwrap();
    let peer_mac = {
        let out = peer.ip(&["-o", "link", "show", "pd0"]).unwrap();
        let word = out
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1);
        word.unwrap().to_string()
    };
    let hop: IpAddr = "10.9.0.2".parse().unwrap();
    let seen = in_netns(ns.name(), move || {
        let mut tables = KernelTables::open(1 << 16).unwrap();
        let before = tables.dump().unwrap();
        assert!(!before.neighbours.iter().any(|n| n.ip == hop), "{before:?}");
        tables.resolve(d0, hop).unwrap();
        let mut seen = Vec::new();
        polld_testsupport::eventually("the resolved neighbour", Duration::from_secs(10), || {
            seen.extend(tables.changes().unwrap());
            seen.iter()
                .any(|c| matches!(c, Change::Neighbour(n) if n.ip == hop && n.mac.is_some()))
        });
        seen
    })
    .unwrap();
    let resolved = seen.iter().find_map(|c| match c {
        Change::Neighbour(n) if n.ip == hop && n.mac.is_some() => Some(*n),
        _ => None,
    });
    let n = resolved.unwrap();
    assert_eq!(n.ifindex, d0);
    let mac: String = n
        .mac
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert_eq!(mac, peer_mac);
}

/// An IPv4 or IPv6 UDP packet of `len` bytes to `dst` from a source that is not the
/// namespace's, DF set.
fn packet(dst: IpAddr, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len];
    match dst {
        IpAddr::V4(dst) => {
            p[0] = 0x45;
            p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            p[6] = 0x40;
            (p[8], p[9]) = (7, 17);
            p[12..16].copy_from_slice(&[198, 18, 0, 5]);
            p[16..20].copy_from_slice(&dst.octets());
        }
        IpAddr::V6(dst) => {
            p[0] = 0x60;
            p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
            (p[6], p[7]) = (17, 7);
            p[8..24].copy_from_slice(
                &"2001:db8:99::5"
                    .parse::<std::net::Ipv6Addr>()
                    .unwrap()
                    .octets(),
            );
            p[24..40].copy_from_slice(&dst.octets());
        }
    }
    p
}

#[test]
fn a_packet_handed_on_a_raw_socket_is_sent_or_refused_with_its_routes_mtu() {
    require_root!();
    let (ns, _, _) = namespace();
    ns.ip(&["link", "set", "d1", "mtu", "1280"]).unwrap();
    ns.ip(&["route", "add", "198.51.100.0/24", "dev", "d1"])
        .unwrap();
    let results = in_netns(ns.name(), || {
        let raw = polld_dev::raw_ip::RawIp::open().unwrap();
        let v4: IpAddr = "198.51.100.1".parse().unwrap();
        let v6: IpAddr = "2001:db8:9::5".parse().unwrap();
        [
            raw.send(&packet(v4, 1000)),
            raw.send(&packet(v4, 1400)),
            raw.send(&packet(v6, 1400)),
            raw.send(&packet(v6, 1600)),
        ]
        .map(|r| match r {
            Ok(()) => "sent".to_string(),
            Err(polld_dev::raw_ip::SendError::TooBig(mtu)) => format!("too big {mtu}"),
            Err(e) => format!("{e:?}"),
        })
    })
    .unwrap();
    assert_eq!(results, ["sent", "too big 1280", "sent", "too big 1500"]);
}
