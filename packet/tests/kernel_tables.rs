//! The router on the kernel's tables (`tables = "kernel"`): a frame to a next hop without
//! a neighbour entry is dropped by its reason and its next hop handed to the control plane,
//! to ask the kernel to resolve it, once per `arp.retry_ms` while it stays unknown; once
//! the kernel's entry is in, the next frames forward and nothing is asked. With a way to
//! the kernel ([`ToKernel`]), that frame, and a frame whose route leaves by an interface
//! polld does not poll, are handed to the kernel with their TTL or hop limit decremented;
//! what the kernel refuses as too big gets polld's ICMP error with the kernel's MTU.

mod common;

use common::*;
use polld_core::Verdict;
use polld_packet::forwarder::{Refused, ToKernel};
use polld_packet::route::{NextHop, Reject, Route};
use polld_packet::wire::Ipv4Packet;
use polld_packet::PacketDrop;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

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

/// A kernel that keeps what it is handed, or refuses it with `refusal`.
#[derive(Debug, Default, Clone)]
struct Kernel {
    handed: Arc<Mutex<Vec<Vec<u8>>>>,
    refusal: Option<Refused>,
}

impl ToKernel for Kernel {
    fn send(&mut self, packet: &[u8]) -> Result<(), Refused> {
        match self.refusal {
            Some(refused) => Err(refused),
            None => {
                self.handed.lock().unwrap().push(packet.to_vec());
                Ok(())
            }
        }
    }
}

impl Kernel {
    fn taken(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.handed.lock().unwrap())
    }
}

/// [`rig`] with a way to the kernel that refuses with `refusal`, and 10.8.0.0/16 and
/// 2001:db8:8::/48 out of an interface polld does not poll.
fn rig_to_kernel(refusal: Option<Refused>) -> (Rig, Kernel) {
    let mut rig = rig();
    let kernel = Kernel {
        refusal,
        ..Kernel::default()
    };
    rig.fwd.set_to_kernel(Box::new(kernel.clone()));
    let next_hop = NextHop::Reject(Reject::Unpolled);
    let routes = rig.fwd.routes_mut();
    routes.insert("10.8.0.0/16".parse().unwrap(), Route { out: 0, next_hop });
    let next_hop = NextHop::Reject(Reject::Unpolled);
    routes.insert6(
        "2001:db8:8::/48".parse().unwrap(),
        Route { out: 0, next_hop },
    );
    (rig, kernel)
}

#[test]
fn unpolled_routes_and_unresolved_next_hops_are_handed_to_the_kernel_one_hop_on() {
    let (mut rig, kernel) = rig_to_kernel(None);
    rig.fwd.set_now(SEC);
    let v4 = |dst| Ip::udp("10.0.1.2", dst, 9, 32);
    let v6 = |dst| Ip6::udp("2001:db8:1::2", dst, 9, 32);
    for (dst, unresolved) in [("10.8.0.1", false), ("10.9.0.1", true)] {
        let packet = v4(dst);
        assert_eq!(rig.verdict_from_a(&packet), Verdict::Kernel, "{dst}");
        let handed = kernel.taken();
        assert_eq!(handed.len(), 1, "{dst}");
        let ip = Ipv4Packet::new_checked(&handed[0][..]).unwrap();
        assert_eq!(ip.ttl(), packet.ttl - 1, "{dst}: the hop is polld's");
        assert!(ip.check_checksum().is_ok(), "{dst}");
        let mut expected = packet.bytes();
        expected[8] -= 1;
        expected[10..12].copy_from_slice(&handed[0][10..12]);
        assert_eq!(handed[0], expected, "{dst}: the datagram, no link padding");
        assert_eq!(asks(&mut rig).len(), usize::from(unresolved), "{dst}");
    }
    for (dst, unresolved) in [("2001:db8:8::1", false), ("2001:db8:9::1", true)] {
        let packet = v6(dst);
        assert_eq!(rig.verdict_from_a(&packet), Verdict::Kernel, "{dst}");
        let handed = kernel.taken();
        let mut expected = packet.bytes();
        expected[7] -= 1;
        assert_eq!(handed, [expected], "{dst}: hop limit - 1, nothing else");
        assert_eq!(asks(&mut rig).len(), usize::from(unresolved), "{dst}");
    }
    let c = *rig.fwd.counters();
    assert_eq!(
        (c.to_kernel, c.to_kernel_unpolled, c.to_kernel_unresolved),
        (4, 2, 2)
    );
    assert_eq!(rig.sent.total, 0, "no ICMP error, no ARP");
    // The kernel's entry is in: polld forwards again.
    rig.fwd
        .set_neighbour(ip("10.0.2.2").into(), Some(mac(2, 2)));
    assert_eq!(
        rig.verdict_from_a(&v4("10.9.0.1")),
        Verdict::Forward { out: 1 }
    );
    assert_eq!(kernel.taken().len(), 0);
    // polld's own checks come first: a TTL of 1 is polld's to answer.
    let mut last_hop = v4("10.8.0.1");
    last_hop.ttl = 1;
    assert_eq!(rig.drop_from_a(&last_hop), PacketDrop::TtlExceeded);
    assert_eq!(kernel.taken().len(), 0);
}

#[test]
fn what_the_kernel_refuses_is_dropped_by_its_reason() {
    let (mut rig, kernel) = rig_to_kernel(Some(Refused::Failed));
    rig.fwd.set_now(SEC);
    let cases = [
        (
            rig.drop_from_a(&Ip::udp("10.0.1.2", "10.8.0.1", 9, 32)),
            PacketDrop::UnpolledRoute,
        ),
        (
            rig.drop_from_a(&Ip::udp("10.0.1.2", "10.9.0.1", 9, 32)),
            PacketDrop::Unresolved,
        ),
        (
            rig.drop_from_a(&Ip6::udp("2001:db8:1::2", "2001:db8:8::1", 9, 32)),
            PacketDrop::UnpolledRoute,
        ),
        (
            rig.drop_from_a(&Ip6::udp("2001:db8:1::2", "2001:db8:9::1", 9, 32)),
            PacketDrop::NeighbourUnknown,
        ),
    ];
    for (got, expected) in cases {
        assert_eq!(got, expected);
    }
    assert_eq!(rig.fwd.counters().to_kernel, 0);
    assert_eq!(kernel.taken().len(), 0);
}

#[test]
fn too_big_for_the_kernels_route_gets_polld_s_icmp_error_with_its_mtu() {
    let (mut rig, kernel) = rig_to_kernel(Some(Refused::TooBig { mtu: 1000 }));
    rig.fwd.set_now(SEC);
    let mut big = Ip::udp("10.0.1.2", "10.8.0.1", 9, 1400);
    big.dont_fragment = true;
    assert_eq!(rig.drop_from_a(&big), PacketDrop::Oversize);
    let big6 = Ip6::udp("2001:db8:1::2", "2001:db8:8::1", 9, 1400);
    assert_eq!(rig.drop_from_a(&big6), PacketDrop::Oversize);
    let errors = rig.sent.take();
    assert_eq!(errors.len(), 2, "{errors:?}");
    let (out, frag_needed) = &errors[0];
    assert_eq!(*out, 0, "back to the sender");
    // ICMP destination unreachable, fragmentation needed, MTU 1000, quoting the
    // datagram as it arrived (TTL 64).
    assert_eq!((frag_needed[34], frag_needed[35]), (3, 4));
    assert_eq!(frag_needed[40..42], 1000u16.to_be_bytes());
    assert_eq!(frag_needed[42 + 8], big.ttl);
    let (_, too_big) = &errors[1];
    // ICMPv6 packet too big, MTU 1000, quoting the packet with its hop limit.
    assert_eq!(too_big[54], 2);
    assert_eq!(too_big[58..62], 1000u32.to_be_bytes());
    assert_eq!(too_big[62 + 7], big6.hop_limit);
    assert_eq!(rig.fwd.counters().cantfrag, 2);
    assert_eq!(kernel.taken().len(), 0);
}

#[test]
fn a_datagram_without_df_too_big_for_the_kernels_route_is_handed_as_fragments() {
    /// Takes what fits `mtu`, refuses the rest as too big, as the kernel does.
    #[derive(Debug, Clone, Default)]
    struct Mtu(Arc<Mutex<Vec<Vec<u8>>>>);
    impl ToKernel for Mtu {
        fn send(&mut self, packet: &[u8]) -> Result<(), Refused> {
            if packet.len() > 1000 {
                return Err(Refused::TooBig { mtu: 1000 });
            }
            self.0.lock().unwrap().push(packet.to_vec());
            Ok(())
        }
    }
    let (mut rig, _) = rig_to_kernel(None);
    let kernel = Mtu::default();
    rig.fwd.set_to_kernel(Box::new(kernel.clone()));
    let big = Ip::udp("10.0.1.2", "10.8.0.1", 9, 1400);
    assert_eq!(rig.verdict_from_a(&big), Verdict::Kernel);
    let pieces = kernel.0.lock().unwrap().clone();
    assert_eq!(pieces.len(), 2);
    let data: usize = pieces
        .iter()
        .map(|p| {
            let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
            assert!(p.len() <= 1000 && ip.check_checksum().is_ok());
            assert_eq!(ip.ttl(), big.ttl - 1);
            ip.payload().len()
        })
        .sum();
    assert_eq!(data, big.payload.len());
    let c = rig.fwd.counters();
    assert_eq!(
        (c.to_kernel_unpolled, c.fragmented, c.ofragments),
        (1, 1, 2)
    );
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
