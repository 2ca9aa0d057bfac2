//! The box stays reachable over an interface polld takes with AF_XDP (root only): with
//! `pass_local`, ping and ping -6 (global and link-local) reach the host's own addresses
//! and TCP connects over IPv4 and IPv6 while polld runs on the interface; without it,
//! polld takes every frame and the host goes deaf. With only `[[interfaces]]` in the
//! file, polld forwards by the kernel's tables, and `pass_local` is on by default.

mod common;

use common::{tcp_connects, Dir, Polld};
use polld_dev::netns::{veth_pair, Netns, VethEnd};

/// The box (`va`, 10.77.0.1/24, 2001:db8:77::1/64) and its peer (`vb`, .2 and ::2),
/// IPv6 on without duplicate address detection, so addresses are usable at once.
fn namespaces() -> (Netns, Netns) {
    let host = Netns::create("reach-host").unwrap();
    let peer = Netns::create("reach-peer").unwrap();
    for ns in [&host, &peer] {
        ns.sysctl("net.ipv6.conf.default.accept_dad=0").unwrap();
    }
    veth_pair(
        VethEnd {
            ns: &host,
            name: "va",
            mac: "02:00:00:00:0a:01",
            addr: Some("10.77.0.1/24"),
        },
        VethEnd {
            ns: &peer,
            name: "vb",
            mac: "02:00:00:00:0a:02",
            addr: Some("10.77.0.2/24"),
        },
    )
    .unwrap();
    host.ip(&["addr", "add", "2001:db8:77::1/64", "dev", "va"])
        .unwrap();
    peer.ip(&["addr", "add", "2001:db8:77::2/64", "dev", "vb"])
        .unwrap();
    (host, peer)
}

/// polld on `va` with AF_XDP and the interface's `keys` besides.
fn start(host: &Netns, dir: &Dir, keys: &str) -> Polld {
    let socket = dir.0.join("polld.sock");
    let config = dir.0.join("host.toml");
    let text = format!(
        "[daemon]\nsocket = {socket:?}\n\n[[interfaces]]\nname = \"va\"\nbackend = \
         \"af_xdp\"\n{keys}"
    );
    std::fs::write(&config, text).unwrap();
    Polld::start_in(host.name(), &config, &socket, &[])
}

#[test]
fn the_host_answers_ping_ping6_and_tcp_over_an_af_xdp_interface_with_pass_local() {
    require_root!();
    let (host, peer) = namespaces();
    let link_local = {
        let out = host
            .ip(&["-6", "-o", "addr", "show", "dev", "va", "scope", "link"])
            .unwrap();
        let word = out.split_whitespace().skip_while(|w| *w != "inet6").nth(1);
        word.and_then(|w| w.split('/').next()).unwrap().to_string()
    };
    // Two tries: the peer's first may go to a neighbour entry left failing by the
    // phase before.
    let ping = |to: &str| peer.exec("ping", &["-c", "2", "-W", "2", to]).is_ok();
    let tcp = |at: &str| tcp_connects(&host, &peer, at.parse().unwrap());
    let dir = Dir::new("host-reachable");

    // Every frame goes to polld: the host's own addresses go dark.
    // polld's own address 10.77.0.9 (not the host's): file tables.
    let own = "addresses = [\"10.77.0.9/24\"]\n";
    let polld = start(&host, &dir, &format!("pass_local = false\n{own}"));
    assert!(!ping("10.77.0.1"), "polld takes the ARP and the ping");
    assert!(!ping("2001:db8:77::1"), "polld takes the ping -6");
    assert!(!tcp("10.77.0.1:7701"), "polld takes the TCP handshake");
    polld.stop();

    // The peer forgets what the phase before left in its neighbour table (failed entries).
    peer.ip(&["neigh", "flush", "dev", "vb"]).unwrap();
    let polld = start(&host, &dir, &format!("pass_local = true\n{own}"));
    assert!(ping("10.77.0.1"), "ping reaches the host");
    assert!(ping("2001:db8:77::1"), "ping -6 reaches the host");
    assert!(
        ping(&format!("{link_local}%vb")),
        "ping -6 of the link-local address reaches the host"
    );
    assert!(tcp("10.77.0.1:7702"), "TCP over IPv4 reaches the host");
    assert!(
        tcp("[2001:db8:77::1]:7703"),
        "TCP over IPv6 reaches the host"
    );
    // polld's own address is still polld's: it answers the ping itself.
    assert!(ping("10.77.0.9"), "polld answers for its own address");
    polld.stop();

    // The kernel's tables, and by default the host's frames passed to it.
    peer.ip(&["neigh", "flush", "dev", "vb"]).unwrap();
    let polld = start(&host, &dir, "");
    assert!(ping("10.77.0.1"), "ping reaches the host by default");
    assert!(
        ping("2001:db8:77::1"),
        "ping -6 reaches the host by default"
    );
    assert!(tcp("10.77.0.1:7704"), "TCP reaches the host by default");
    polld.stop();
}
