//! AF_PACKET and TAP devices on real interfaces, inside namespaces this test creates.
//!
//! IPv6 is disabled in every namespace so that the kernel sends nothing of its own
//! (router solicitations, MLD) and frame counts can be exact. Test frames use the
//! local-experimental ethertype 0x88b5, which the receiving kernel ignores.

#[macro_use]
mod common;

use std::thread::sleep;
use std::time::{Duration, Instant};

use polld_core::device::{Device, LinkState, TxDrop, TxFull};
use polld_dev::afpacket::{AfPacket, AfPacketConfig};
use polld_dev::iface::Namespace;
use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};
use polld_dev::tap::Tap;
use polld_testsupport::eventually;

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0xa1, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0xa1, 0x02];
const TEST_ETHERTYPE: [u8; 2] = [0x88, 0xb5];
const PATIENCE: Duration = Duration::from_secs(10);

fn quiet_namespace(prefix: &str) -> Netns {
    let ns = Netns::create(prefix).unwrap();
    ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
    ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
    ns
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// Namespaces `a` and `b` joined by veth `pva` (MAC_A) ↔ `pvb` (MAC_B), both up.
struct VethPair {
    a: Netns,
    b: Netns,
}

impl VethPair {
    fn new() -> VethPair {
        let pair = VethPair {
            a: quiet_namespace("pdev-a"),
            b: quiet_namespace("pdev-b"),
        };
        pair.connect();
        pair
    }

    fn connect(&self) {
        let (mac_a, mac_b) = (mac_text(MAC_A), mac_text(MAC_B));
        veth_pair(
            VethEnd {
                ns: &self.a,
                name: "pva",
                mac: &mac_a,
                addr: None,
            },
            VethEnd {
                ns: &self.b,
                name: "pvb",
                mac: &mac_b,
                addr: None,
            },
        )
        .unwrap();
    }
}

fn open_in(ns: &Netns, interface: &'static str, config: AfPacketConfig) -> AfPacket {
    in_netns(ns.name(), move || AfPacket::open(interface, config))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A frame from MAC_A to MAC_B of `len` bytes whose payload starts with `seq`.
fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(len);
    frame.extend_from_slice(&MAC_B);
    frame.extend_from_slice(&MAC_A);
    frame.extend_from_slice(&TEST_ETHERTYPE);
    frame.extend_from_slice(&seq.to_be_bytes());
    while frame.len() < len {
        frame.push((seq as usize + frame.len()) as u8);
    }
    frame
}

fn is_test_frame(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == TEST_ETHERTYPE
}

/// Sends every frame, flushing whenever the batch is full, until the kernel took all.
fn send_all(device: &mut impl Device, frames: &[Vec<u8>]) {
    let deadline = Instant::now() + PATIENCE;
    for frame in frames {
        while device.send(frame) == Err(TxFull) {
            assert!(Instant::now() < deadline, "transmit stayed full");
            device.flush();
        }
    }
    device.flush();
}

fn flush_until_sent(device: &mut AfPacket) {
    eventually("the pending frames are sent", PATIENCE, || {
        device.tx_stats().pending == 0 || {
            device.flush();
            false
        }
    });
}

/// Receives until `want` frames arrived (or the patience ran out), `budget` per call.
fn receive_frames(device: &mut impl Device, want: usize, budget: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + PATIENCE;
    let mut frames = Vec::new();
    while frames.len() < want && Instant::now() < deadline {
        let asked = budget.min(want - frames.len());
        let handed = device.receive(asked, &mut |f| frames.push(f.to_vec()));
        assert!(
            handed <= asked,
            "receive handed {handed} frames for a budget of {asked}"
        );
        if handed == 0 {
            sleep(Duration::from_millis(1));
        }
    }
    frames
}

/// Receives whatever arrives until nothing came for `quiet`.
fn receive_until_quiet(device: &mut impl Device, quiet: Duration) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut last_arrival = Instant::now();
    while last_arrival.elapsed() < quiet {
        if device.receive(64, &mut |f| frames.push(f.to_vec())) > 0 {
            last_arrival = Instant::now();
        } else {
            sleep(Duration::from_millis(1));
        }
    }
    frames
}

fn wait_for_state(device: &mut impl Device, want: LinkState) {
    let what = format!("link state of {} becomes {want:?}", device.name());
    eventually(&what, PATIENCE, || device.check_status() == want);
}

#[test]
fn frames_cross_the_veth_intact_in_order_and_exactly_once() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let mut receiver = open_in(&pair.b, "pvb", AfPacketConfig::default());
    let sizes = [60, 61, 64, 128, 333, 1000, 1514];
    let frames: Vec<Vec<u8>> = (0..3000u32)
        .map(|seq| test_frame(seq, sizes[seq as usize % sizes.len()]))
        .collect();

    let mut received = Vec::new();
    for chunk in frames.chunks(200) {
        send_all(&mut sender, chunk);
        flush_until_sent(&mut sender);
        received.extend(receive_frames(&mut receiver, chunk.len(), 64));
    }
    assert_eq!(received.len(), frames.len());
    for (seq, (got, sent)) in received.iter().zip(&frames).enumerate() {
        assert!(got == sent, "frame {seq} differs");
    }
    let extra = receive_until_quiet(&mut receiver, Duration::from_millis(100));
    assert!(extra.is_empty(), "{} unexpected frames", extra.len());
    let stats = sender.tx_stats();
    assert_eq!((stats.sent, stats.dropped(), stats.pending), (3000, 0, 0));
    assert_eq!(receiver.hw_stats().rx_ring_full, 0);
}

#[test]
fn frames_too_long_to_transmit_are_counted_as_transmit_drops() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let mut receiver = open_in(&pair.b, "pvb", AfPacketConfig::default());
    // 1600 bytes: within a 2048-byte slot but over the 1500-byte MTU (the kernel says
    // EMSGSIZE); 3000 bytes: over the slot itself.
    let frames = [
        test_frame(0, 60),
        test_frame(1, 1600),
        test_frame(2, 3000),
        test_frame(3, 60),
    ];
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);
    let received = receive_frames(&mut receiver, 2, 64);
    assert_eq!(received, [frames[0].clone(), frames[3].clone()]);
    let drops = sender.hw_stats().tx_drops;
    assert_eq!(drops.get(TxDrop::TooLong), 2, "{drops:?}");
    assert_eq!(drops.total(), 2, "{drops:?}");
    let stats = sender.tx_stats();
    assert_eq!((stats.sent, stats.dropped(), stats.pending), (2, 2, 0));
}

#[test]
fn a_partially_consumed_block_is_resumed_by_the_next_receive() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let mut receiver = open_in(&pair.b, "pvb", AfPacketConfig::default());
    let frames: Vec<Vec<u8>> = (0..100).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);

    eventually("a block is handed over", PATIENCE, || receiver.rx_ready());
    let first = receive_frames(&mut receiver, 3, 3);
    assert_eq!(first.len(), 3);
    assert!(
        receiver.rx_ready(),
        "the rest of the block is still waiting"
    );
    let rest = receive_frames(&mut receiver, 97, 3);
    let received: Vec<Vec<u8>> = first.into_iter().chain(rest).collect();
    assert!(received == frames, "frames lost, repeated or reordered");
    assert!(!receiver.rx_ready());
}

#[test]
fn own_transmissions_are_not_received() {
    require_root!();
    let pair = VethPair::new();
    pair.a
        .ip(&["addr", "add", "10.98.0.1/24", "dev", "pva"])
        .unwrap();
    pair.b
        .ip(&["addr", "add", "10.98.0.2/24", "dev", "pvb"])
        .unwrap();
    let mut device = open_in(&pair.a, "pva", AfPacketConfig::default());
    let frames: Vec<Vec<u8>> = (0..20).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut device, &frames);
    flush_until_sent(&mut device);
    // The kernel's own output (ARP request, echo requests) passes the packet taps too.
    pair.a
        .exec("ping", &["-c", "3", "-i", "0.2", "-W", "5", "10.98.0.2"])
        .unwrap();

    let received = receive_until_quiet(&mut device, Duration::from_millis(200));
    assert!(
        received.len() >= 4,
        "expected ARP and echo replies, got {}",
        received.len()
    );
    for frame in &received {
        assert_eq!(frame[6..12], MAC_B, "received a frame sent from this side");
    }
}

#[test]
fn receive_ring_overflow_is_counted_in_hw_stats() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let tiny = AfPacketConfig {
        block_size: 4096,
        block_count: 2,
        ..AfPacketConfig::default()
    };
    let mut receiver = open_in(&pair.b, "pvb", tiny);
    let frames: Vec<Vec<u8>> = (0..500).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);
    assert_eq!(sender.tx_stats().sent, 500);

    let received = receive_until_quiet(&mut receiver, Duration::from_millis(300));
    let ring_full = receiver.hw_stats().rx_ring_full;
    assert!(ring_full > 0, "8 KiB of ring cannot hold 500 frames");
    assert_eq!(received.len() as u64 + ring_full, 500);
    // Reading the kernel counter resets it; the device keeps the total.
    assert_eq!(receiver.hw_stats().rx_ring_full, ring_full);
}

/// Whether the device's interrupt fd reports an error (EPOLLERR) right now.
fn poll_error(device: &impl Device) -> bool {
    let mut pollfd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(&device.capabilities().interrupt_fd.unwrap()),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll writes only the revents of the one pollfd we own; no waiting.
    let rc = unsafe { libc::poll(&mut pollfd, 1, 0) };
    rc > 0 && pollfd.revents & libc::POLLERR != 0
}

#[test]
fn link_state_follows_the_interface_and_a_recreated_one_is_reopened_on_request() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let mut receiver = open_in(&pair.b, "pvb", AfPacketConfig::default());
    wait_for_state(&mut receiver, LinkState::Up);

    pair.b.ip(&["link", "set", "pvb", "down"]).unwrap();
    assert!(
        poll_error(&receiver),
        "a downed link leaves ENETDOWN pending on the socket"
    );
    wait_for_state(&mut receiver, LinkState::Down);
    assert!(!poll_error(&receiver), "check_status consumed the error");
    pair.b.ip(&["link", "set", "pvb", "up"]).unwrap();
    wait_for_state(&mut receiver, LinkState::Up);

    pair.b.ip(&["link", "del", "pvb"]).unwrap();
    wait_for_state(&mut receiver, LinkState::Gone);
    assert_eq!(sender.check_status(), LinkState::Gone);

    pair.connect();
    // A status check only reports: the devices are bound to the old interfaces.
    assert_eq!(receiver.check_status(), LinkState::Gone);
    assert_eq!(sender.check_status(), LinkState::Gone);
    receiver.reopen().unwrap_or_else(|e| panic!("{e}"));
    wait_for_state(&mut receiver, LinkState::Up);
    sender.reopen().unwrap_or_else(|e| panic!("{e}"));
    let frames: Vec<Vec<u8>> = (0..10).map(|seq| test_frame(seq, 100)).collect();
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);
    let received = receive_frames(&mut receiver, 10, 64);
    assert!(received == frames, "frames after recreation");
}

#[test]
fn a_lost_carrier_a_rename_and_a_successor_under_the_old_name_are_all_seen() {
    require_root!();
    let pair = VethPair::new();
    let mut receiver = open_in(&pair.b, "pvb", AfPacketConfig::default());
    wait_for_state(&mut receiver, LinkState::Up);
    // The peer going down takes pvb's carrier, not pvb.
    pair.a.ip(&["link", "set", "pva", "down"]).unwrap();
    wait_for_state(&mut receiver, LinkState::Down);
    pair.a.ip(&["link", "set", "pva", "up"]).unwrap();
    wait_for_state(&mut receiver, LinkState::Up);
    // Renamed while up (the socket sees no error): the name is no longer there.
    pair.b.ip(&["link", "set", "pvb", "name", "pvr"]).unwrap();
    assert!(!poll_error(&receiver));
    assert_eq!(receiver.check_status(), LinkState::Gone);
    // Another interface, up, under the old name is not the one the socket is bound to.
    pair.b
        .ip(&["link", "add", "pvb", "type", "veth", "peer", "name", "pvc"])
        .unwrap();
    pair.b.ip(&["link", "set", "pvb", "up"]).unwrap();
    assert_eq!(receiver.check_status(), LinkState::Gone);
    pair.b.ip(&["link", "del", "pvb"]).unwrap();
    // Its own name back: the same interface, found again.
    pair.b.ip(&["link", "set", "pvr", "name", "pvb"]).unwrap();
    assert_eq!(receiver.check_status(), LinkState::Up);
}

#[test]
fn a_missing_interface_is_named_with_the_fix() {
    require_root!();
    let ns = quiet_namespace("pdev-m");
    let err = in_netns(ns.name(), || {
        AfPacket::open("veth9", AfPacketConfig::default())
            .err()
            .map(|e| e.to_string())
    })
    .unwrap();
    assert_eq!(
        err.as_deref(),
        Some("interface veth9 not found; list interfaces with `ip link`")
    );
}

#[test]
fn a_bad_ring_geometry_is_refused_before_the_kernel_sees_it() {
    let config = AfPacketConfig {
        block_size: 1000,
        ..AfPacketConfig::default()
    };
    let err = AfPacket::open("lo", config).err().unwrap().to_string();
    assert!(
        err.contains("lo") && err.contains("multiple of the page size"),
        "{err}"
    );
}

#[test]
fn a_fanout_group_shares_frames_without_duplicating_them() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let grouped = AfPacketConfig {
        fanout_group: Some(7),
        ..AfPacketConfig::default()
    };
    let mut first = open_in(&pair.b, "pvb", grouped.clone());
    let mut second = open_in(&pair.b, "pvb", grouped);
    let frames: Vec<Vec<u8>> = (0..200).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);
    let mut received = receive_until_quiet(&mut first, Duration::from_millis(200));
    received.extend(receive_until_quiet(&mut second, Duration::from_millis(200)));
    received.sort_by_key(|f| u32::from_be_bytes(f[14..18].try_into().unwrap()));
    assert!(received == frames, "{} frames for 200 sent", received.len());
}

#[test]
fn open_fanout_joins_its_members_in_a_new_group_of_its_own() {
    require_root!();
    let pair = VethPair::new();
    let mut sender = open_in(&pair.a, "pva", AfPacketConfig::default());
    let open = || {
        in_netns(pair.b.name(), || {
            AfPacket::open_fanout("pvb", 2, AfPacketConfig::default())
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (mut members, other) = (open(), open());
    let group = |m: &[AfPacket]| {
        m.iter()
            .map(|d| d.config().fanout_group)
            .collect::<Vec<_>>()
    };
    let ids = group(&members);
    assert!(ids[0].is_some() && ids[0] == ids[1], "{ids:?}");
    assert_ne!(
        group(&other)[0],
        ids[0],
        "each call makes a group of its own"
    );
    drop(other);
    let frames: Vec<Vec<u8>> = (0..200).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut sender, &frames);
    flush_until_sent(&mut sender);
    let mut received = Vec::new();
    for m in members.iter_mut() {
        received.extend(receive_until_quiet(m, Duration::from_millis(200)));
    }
    received.sort_by_key(|f| u32::from_be_bytes(f[14..18].try_into().unwrap()));
    assert!(received == frames, "{} frames for 200 sent", received.len());
}

#[test]
fn tap_frames_go_both_ways_between_the_fd_and_the_kernel() {
    require_root!();
    let ns = quiet_namespace("pdev-t");
    let mut tap = in_netns(ns.name(), || Tap::open("ptap0"))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(tap.created(), "ptap0 did not exist: the device created it");
    ns.ip(&["link", "set", "ptap0", "up"]).unwrap();
    wait_for_state(&mut tap, LinkState::Up);
    // The kernel side of the TAP, seen through an AF_PACKET socket on the interface.
    let mut kernel_side = open_in(&ns, "ptap0", AfPacketConfig::default());

    let into_kernel: Vec<Vec<u8>> = (0..20)
        .map(|seq| test_frame(seq, 60 + seq as usize))
        .collect();
    send_all(&mut tap, &into_kernel);
    let seen_by_kernel = receive_frames(&mut kernel_side, 20, 64);
    assert!(
        seen_by_kernel == into_kernel,
        "frames written to the TAP fd"
    );

    let out_of_kernel: Vec<Vec<u8>> = (100..120).map(|seq| test_frame(seq, 200)).collect();
    send_all(&mut kernel_side, &out_of_kernel);
    flush_until_sent(&mut kernel_side);
    let read_from_tap: Vec<Vec<u8>> = receive_until_quiet(&mut tap, Duration::from_millis(200))
        .into_iter()
        .filter(|f| is_test_frame(f))
        .collect();
    assert!(
        read_from_tap == out_of_kernel,
        "frames transmitted on the TAP interface"
    );

    ns.ip(&["link", "set", "ptap0", "down"]).unwrap();
    wait_for_state(&mut tap, LinkState::Down);
}

#[test]
fn a_persistent_tap_in_a_named_namespace_is_attached_to_from_outside_it() {
    require_root!();
    let ns = quiet_namespace("pdev-p");
    ns.ip(&["tuntap", "add", "dev", "ptap2", "mode", "tap"])
        .unwrap();
    // Opened from this thread's namespace, which does not hold ptap2.
    let netns = Namespace::named(ns.name()).unwrap();
    let mut tap = Tap::open_in(netns, "ptap2").unwrap_or_else(|e| panic!("{e}"));
    assert!(!tap.created(), "ptap2 existed: the device attached to it");
    assert_eq!(tap.netns_name(), Some(ns.name()));
    ns.ip(&["link", "set", "ptap2", "up"]).unwrap();
    wait_for_state(&mut tap, LinkState::Up);
    // A second reader is refused: the TAP is busy.
    let busy = Tap::open_in(Namespace::named(ns.name()).unwrap(), "ptap2").err();
    let busy = busy.expect("ptap2 is attached already").to_string();
    assert!(
        busy.contains("already attached to another process"),
        "{busy}"
    );
    let missing = Namespace::named("polld-no-such-ns")
        .err()
        .unwrap()
        .to_string();
    assert!(missing.contains("ip netns list"), "{missing}");
}

#[test]
fn a_tap_cannot_take_over_another_kind_of_interface() {
    require_root!();
    let ns = quiet_namespace("pdev-u");
    let err = in_netns(ns.name(), || Tap::open("lo").err().map(|e| e.to_string())).unwrap();
    let err = err.expect("lo is not a TAP");
    assert!(
        err.contains("lo") && err.contains("not a TAP interface"),
        "{err}"
    );
}

#[test]
fn tap_queue_overflow_is_counted_in_hw_stats() {
    require_root!();
    let ns = quiet_namespace("pdev-q");
    let mut tap = in_netns(ns.name(), || Tap::open("ptap1"))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"));
    ns.ip(&["link", "set", "ptap1", "txqueuelen", "100", "up"])
        .unwrap();
    wait_for_state(&mut tap, LinkState::Up);
    // One frame per sendmmsg: a refusal in the middle of a batch is not reported, so the
    // device retries that frame, and the TAP would count the second refusal as well.
    let one_by_one = AfPacketConfig {
        tx_batch: 1,
        ..AfPacketConfig::default()
    };
    let mut kernel_side = open_in(&ns, "ptap1", one_by_one);
    // Five times the queue the TAP holds for its reader, which reads nothing meanwhile.
    let frames: Vec<Vec<u8>> = (0..500).map(|seq| test_frame(seq, 60)).collect();
    send_all(&mut kernel_side, &frames);
    flush_until_sent(&mut kernel_side);
    // The TAP refuses what it cannot queue, and the sending socket hears ENOBUFS.
    let sender = kernel_side.tx_stats();
    assert_eq!(sender.sent + sender.dropped(), 500);

    let read = receive_until_quiet(&mut tap, Duration::from_millis(200));
    // The counter is read at status checks.
    assert_eq!(tap.check_status(), LinkState::Up);
    let queue_full = tap.hw_stats().rx_ring_full;
    assert!(queue_full > 0, "a 100-frame queue cannot hold 500 frames");
    assert_eq!(read.len() as u64 + queue_full, 500);
    assert_eq!(sender.drops.get(TxDrop::NoBufs), queue_full);
}

/// Runs `f` on a thread whose effective capability set lacks `capability` (capabilities
/// are per thread, so the rest of the process keeps them).
fn without_capability<T: Send>(capability: u32, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut caps = polld_dev::caps::get().unwrap();
                caps.effective &= !(1 << capability);
                polld_dev::caps::set(&caps).unwrap();
                f()
            })
            .join()
            .unwrap()
    })
}

#[test]
fn missing_capabilities_are_named() {
    require_root!();
    const CAP_NET_ADMIN: u32 = 12;
    const CAP_NET_RAW: u32 = 13;
    let ns = quiet_namespace("pdev-c");
    let afpacket = in_netns(ns.name(), || {
        without_capability(CAP_NET_RAW, || {
            AfPacket::open("lo", AfPacketConfig::default())
                .err()
                .map(|e| e.to_string())
        })
    })
    .unwrap()
    .expect("AF_PACKET without CAP_NET_RAW");
    assert!(
        afpacket.contains("lo") && afpacket.contains("needs CAP_NET_RAW"),
        "{afpacket}"
    );

    let tap = in_netns(ns.name(), || {
        without_capability(CAP_NET_ADMIN, || {
            Tap::open("ptap2").err().map(|e| e.to_string())
        })
    })
    .unwrap()
    .expect("TAP creation without CAP_NET_ADMIN");
    assert!(
        tap.contains("ptap2") && tap.contains("needs CAP_NET_ADMIN"),
        "{tap}"
    );
}
