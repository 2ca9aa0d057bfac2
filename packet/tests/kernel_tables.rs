//! The router on the kernel's tables (`tables = "kernel"`): a frame to a next hop without
//! a neighbour entry is dropped by its reason and its next hop handed to the control plane,
//! to ask the kernel to resolve it, once per `arp.retry_ms` while it stays unknown; once
//! the kernel's entry is in, the next frames forward and nothing is asked.

mod common;

use common::*;
use polld_core::Verdict;
use polld_packet::route::{NextHop, Route};
use polld_packet::PacketDrop;
use std::net::IpAddr;

const KERNEL: &str = r#"
tables = "kernel"

[[interfaces]]
name = "veth1"
mac = "02:00:00:00:01:01"

[[interfaces]]
name = "veth2"
mac = "02:00:00:00:02:01"
"#;

/// The rig on the kernel's tables: 10.0.1.1/24 and 2001:db8:1::1/64 on port 0,
/// 10.0.2.1/24 and 2001:db8:2::1/64 on port 1, 10.9.0.0/16 via 10.0.2.2 and
/// 2001:db8:9::/48 via 2001:db8:2::2, no neighbours yet.
fn rig() -> Rig {
    let mut rig = Rig::of(KERNEL);
    for (dev, net) in [
        (0, "10.0.1.1/24"),
        (0, "2001:db8:1::1/64"),
        (1, "10.0.2.1/24"),
        (1, "2001:db8:2::1/64"),
    ] {
        assert!(rig.fwd.add_address(dev, net.parse().unwrap()));
    }
    let next_hop = NextHop::Gateway(ip("10.0.2.2"));
    let route = Route { out: 1, next_hop };
    rig.fwd
        .routes_mut()
        .insert("10.9.0.0/16".parse().unwrap(), route);
    let next_hop = NextHop::Gateway(ip6("2001:db8:2::2"));
    let route = Route { out: 1, next_hop };
    rig.fwd
        .routes_mut()
        .insert6("2001:db8:9::/48".parse().unwrap(), route);
    rig
}

fn asks(rig: &mut Rig) -> Vec<(usize, IpAddr)> {
    rig.fwd.take_kernel_asks().collect()
}

#[test]
fn an_unresolved_next_hop_is_asked_of_the_kernel_once_per_retry_then_forwards() {
    let v4 = Ip::udp("10.0.1.2", "10.9.0.1", 9, 32).frame(host_a(), r1());
    let v6 = Ip6::udp("2001:db8:1::2", "2001:db8:9::1", 9, 32).frame(host_a(), r1());
    let cases = [
        (v4, "10.0.2.2".parse().unwrap(), PacketDrop::Unresolved),
        (
            v6,
            "2001:db8:2::2".parse().unwrap(),
            PacketDrop::NeighbourUnknown,
        ),
    ];
    for (frame, next_hop, reason) in cases {
        let mut rig = rig();
        let send = |rig: &mut Rig| rig.process(0, &mut frame.clone());
        rig.fwd.set_now(SEC);
        assert_eq!(send(&mut rig), reason.verdict());
        assert_eq!(asks(&mut rig), [(1, next_hop)], "{reason:?}");
        // Within the retry interval (arp.retry_ms, 1 s): dropped, not asked again.
        assert_eq!(send(&mut rig), reason.verdict());
        assert_eq!(asks(&mut rig), [], "{reason:?}");
        assert_eq!(rig.sent.total, 0, "{reason:?}: no ICMP error, no ARP");
        rig.fwd.set_now(2 * SEC + 1);
        assert_eq!(send(&mut rig), reason.verdict());
        assert_eq!(asks(&mut rig), [(1, next_hop)], "{reason:?}: asked again");
        // The kernel resolved it: forwarded, nothing asked.
        rig.fwd.set_neighbour(next_hop, Some(mac(2, 2)));
        assert_eq!(send(&mut rig), Verdict::Forward { out: 1 });
        assert_eq!(asks(&mut rig), [], "{reason:?}");
    }
}

#[test]
fn a_multipath_route_forwards_each_flow_by_its_hash_out_of_every_next_hop() {
    let mut rig = rig();
    let routes = rig.fwd.routes_mut();
    let hop = |out, gw: &str| {
        (
            Route {
                out,
                next_hop: NextHop::Gateway(ip(gw)),
            },
            1,
        )
    };
    routes.insert_multipath(
        "10.9.0.0/16".parse().unwrap(),
        &[hop(0, "10.0.1.3"), hop(1, "10.0.2.2")],
    );
    let hop6 = |out, gw: &str| {
        (
            Route {
                out,
                next_hop: NextHop::Gateway(ip6(gw)),
            },
            1,
        )
    };
    routes.insert6_multipath(
        "2001:db8:9::/48".parse().unwrap(),
        &[hop6(0, "2001:db8:1::3"), hop6(1, "2001:db8:2::2")],
    );
    for gw in ["10.0.1.3", "10.0.2.2", "2001:db8:1::3", "2001:db8:2::2"] {
        rig.fwd.set_neighbour(gw.parse().unwrap(), Some(mac(3, 3)));
    }
    let flows = |port: u16| {
        [
            Ip::udp("10.0.1.2", "10.9.0.1", port, 32).frame(host_a(), r1()),
            Ip6::udp("2001:db8:1::2", "2001:db8:9::1", port, 32).frame(host_a(), r1()),
        ]
    };
    let mut outs = [[0u32; 2]; 2];
    for port in 1000..1064 {
        for (family, frame) in flows(port).into_iter().enumerate() {
            let Verdict::Forward { out } = rig.process(0, &mut frame.clone()) else {
                panic!("flow to port {port} not forwarded")
            };
            assert_eq!(
                rig.process(0, &mut frame.clone()),
                Verdict::Forward { out },
                "a flow keeps its next hop"
            );
            outs[family][out] += 1;
        }
    }
    assert!(outs.iter().flatten().all(|&n| n > 8), "{outs:?}");
}
