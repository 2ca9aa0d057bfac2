//! XDP programs and the AF_XDP device on a veth pair between two fresh namespaces.
//!
//! Topology: namespace `a` holds `va` (where the programs and the AF_XDP socket sit),
//! namespace `b` holds its peer `vb`, from which raw AF_PACKET sockets send and receive.
//! IPv6 is off in both namespaces so that no router solicitation disturbs exact counts,
//! but for the test of `pass_local`, which sends those to the kernel. Needs root;
//! skipped otherwise.

#[macro_use]
mod common;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use polld_core::{Device, LinkState, TxDrop, TxFull};
use polld_dev::afxdp::SharedUmem;
use polld_dev::afxdp::{AfXdp, AfXdpConfig, BindMode};
use polld_dev::busy_poll::{self, BusyPoll, BusyPollConfig};
use polld_dev::irq_defer::DeferChoice;
use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};
use polld_dev::xdp::{CountProgram, RedirectProgram, XdpError, XdpLink, XdpMode};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{RecvFlags, SendFlags};

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x01];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0x0a, 0x02];
/// IEEE "local experimental" ethertype: no stack in either namespace reacts to it.
const ETHERTYPE: u16 = 0x88b5;
/// Generous: the VM is small and shared.
const TIMEOUT: Duration = Duration::from_secs(20);

struct Pair {
    a: Netns,
    b: Netns,
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// Two fresh namespaces with IPv6 off, so that nothing but the test's frames moves.
fn quiet_namespaces() -> (Netns, Netns) {
    let a = Netns::create("xdp-a").unwrap();
    let b = Netns::create("xdp-b").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.all.disable_ipv6=1").unwrap();
        ns.sysctl("net.ipv6.conf.default.disable_ipv6=1").unwrap();
    }
    (a, b)
}

fn pair() -> Pair {
    let (a, b) = quiet_namespaces();
    veth_between(a, b)
}

/// `va` in `a`, `vb` in `b`, with the test's MACs, up.
fn veth_between(a: Netns, b: Netns) -> Pair {
    let (mac_a, mac_b) = (mac_text(MAC_A), mac_text(MAC_B));
    veth_pair(
        VethEnd {
            ns: &a,
            name: "va",
            mac: &mac_a,
            addr: None,
        },
        VethEnd {
            ns: &b,
            name: "vb",
            mac: &mac_b,
            addr: None,
        },
    )
    .unwrap();
    Pair { a, b }
}

/// Runs `f` inside namespace `ns` (sockets and links keep that namespace afterwards).
fn inside<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    in_netns(ns.name(), f).unwrap()
}

fn xdp_attached(ns: &Netns, ifname: &str) -> bool {
    ns.ip(&["link", "show", ifname])
        .unwrap()
        .contains("prog/xdp")
}

/// A frame from `src` to `dst` carrying `seq`, `len` bytes long (at least 60).
fn frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u32 ^ seq) as u8));
    f
}

/// A raw AF_PACKET socket bound to one interface, for the peer side of the tests.
struct RawSocket {
    fd: OwnedFd,
}

impl RawSocket {
    /// Opened in the calling thread's namespace; `receive` decides whether it sees frames
    /// (those the interface receives: not its own transmissions).
    fn open(ifname: &str, receive: bool) -> RawSocket {
        let protocol = if receive {
            (libc::ETH_P_ALL as u16).to_be()
        } else {
            0
        };
        let fd = polld_dev::afpacket::raw_socket(ifname, protocol).unwrap();
        if receive {
            polld_dev::sys::set_packet_option(fd.as_fd(), libc::PACKET_IGNORE_OUTGOING, 1).unwrap();
        }
        RawSocket { fd }
    }

    /// Sends a frame, waiting while the veth queue pushes back (ENOBUFS).
    fn send(&self, frame: &[u8]) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match rustix::net::send(&self.fd, frame, SendFlags::empty()) {
                Ok(n) if n == frame.len() => return,
                result => assert!(
                    result == Err(Errno::NOBUFS) && Instant::now() < deadline,
                    "send: {result:?}"
                ),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next incoming frame of our ethertype, or `None` after `TIMEOUT`.
    fn receive(&self) -> Option<Vec<u8>> {
        let deadline = Instant::now() + TIMEOUT;
        let mut buf = vec![0u8; 2048];
        while Instant::now() < deadline {
            if !readable(self.fd.as_fd(), Duration::from_millis(100)) {
                continue;
            }
            let received = rustix::net::recv(&self.fd, &mut buf[..], RecvFlags::DONTWAIT);
            if let Ok((n @ 14.., _)) = received {
                if buf[12..14] == ETHERTYPE.to_be_bytes() {
                    return Some(buf[..n].to_vec());
                }
            }
        }
        None
    }
}

fn readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let mut pfd = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    let timeout = Timespec::try_from(timeout).unwrap();
    let ready = rustix::event::poll(&mut pfd, Some(&timeout));
    ready.is_ok_and(|n| n > 0) && pfd[0].revents().contains(PollFlags::IN)
}

/// The device's interrupt descriptor, borrowed from it.
fn interrupt_fd(dev: &AfXdp) -> BorrowedFd<'_> {
    dev.capabilities()
        .interrupt_fd
        .expect("AF_XDP has an interrupt fd")
}

/// Calls `check` until it returns true or `TIMEOUT` passes.
fn eventually(mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + TIMEOUT;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    check()
}

/// Receives from `dev` until `count` frames arrived (or `TIMEOUT`), returning them.
fn receive_frames(dev: &mut AfXdp, count: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    eventually(|| {
        dev.receive(64, &mut |f| got.push(f.to_vec()));
        got.len() >= count
    });
    got
}

#[test]
fn all_programs_pass_the_verifier() {
    require_root!();
    CountProgram::load().unwrap();
    RedirectProgram::load(4).unwrap();
    RedirectProgram::load_passing_local(4).unwrap();
}

#[test]
fn dropping_the_link_detaches_the_program() {
    require_root!();
    let p = pair();
    let link = inside(&p.a, || {
        CountProgram::load().unwrap().attach("va", XdpMode::Auto)
    })
    .unwrap();
    assert_eq!(link.mode(), XdpMode::Native, "veth supports native XDP");
    assert!(xdp_attached(&p.a, "va"));
    drop(link);
    // The kernel detaches once the last reference to the link's fd is gone; a process
    // another test forks in the meantime holds one until it execs.
    assert!(
        eventually(|| !xdp_attached(&p.a, "va")),
        "no XDP program after the link closed"
    );
}

#[test]
fn drivers_without_native_xdp_fall_back_to_generic() {
    require_root!();
    let p = pair();
    // The loopback driver has no native XDP.
    let link = inside(&p.a, || {
        CountProgram::load().unwrap().attach("lo", XdpMode::Auto)
    })
    .unwrap();
    assert_eq!(link.mode(), XdpMode::Generic);
    assert!(xdp_attached(&p.a, "lo"));
    let native = inside(&p.b, || {
        CountProgram::load().unwrap().attach("lo", XdpMode::Native)
    });
    assert!(native.is_err(), "forced native mode must fail on lo");
}

#[test]
fn a_second_program_on_the_interface_is_reported_busy() {
    require_root!();
    let p = pair();
    let (first, second) = inside(&p.a, || {
        let prog = CountProgram::load().unwrap();
        (
            prog.attach("va", XdpMode::Native),
            prog.attach("va", XdpMode::Native),
        )
    });
    first.unwrap();
    let err = second.unwrap_err();
    assert!(matches!(err, XdpError::Busy { .. }), "{err}");
    assert!(err.to_string().contains("va"), "{err}");
}

#[test]
fn a_missing_interface_is_named_in_the_error() {
    require_root!();
    let p = pair();
    let err = inside(&p.a, || {
        CountProgram::load().unwrap().attach("vnone", XdpMode::Auto)
    })
    .unwrap_err();
    assert!(matches!(err, XdpError::NoSuchInterface(_)), "{err}");
    assert!(err.to_string().contains("vnone"), "{err}");
    let err = inside(&p.a, || AfXdp::open("vnone", 0, &AfXdpConfig::default())).unwrap_err();
    assert!(err.to_string().contains("vnone"), "{err}");
}

/// The kernel releases a link when the last process holding its fd dies, even by SIGKILL.
/// The child inherits the only copy of the link fd (the parent closes its own), so its
/// death is what must detach the program.
#[test]
fn a_killed_holder_leaves_no_program_attached() {
    require_root!();
    let p = pair();
    let link = inside(&p.a, || {
        CountProgram::load().unwrap().attach("va", XdpMode::Auto)
    })
    .unwrap();
    let link_fd = link.as_fd().as_raw_fd();
    let mut command = Command::new("sleep");
    command.arg("600").stdin(Stdio::null());
    // SAFETY: the hook only calls dup2 and fcntl, which are async-signal-safe. Fd 3 in the
    // child is the link, without close-on-exec. When the link already is fd 3, dup2 does
    // nothing (close-on-exec stays set), so the flag is cleared directly.
    unsafe {
        command.pre_exec(move || {
            let rc = if link_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(link_fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let mut child = command.spawn().unwrap();
    drop(link);
    assert!(
        xdp_attached(&p.a, "va"),
        "the child's copy keeps the program attached"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        eventually(|| !xdp_attached(&p.a, "va")),
        "the program outlived its killed holder"
    );
}

#[test]
fn count_and_drop_counts_exactly_the_frames_sent() {
    require_root!();
    let p = pair();
    let (counter, _link) = inside(&p.a, || {
        let counter = CountProgram::load().unwrap();
        let link = counter.attach("va", XdpMode::Auto).unwrap();
        (counter, link)
    });
    const N: u32 = 1000;
    const LEN: usize = 100;
    inside(&p.b, || {
        let sock = RawSocket::open("vb", false);
        for seq in 0..N {
            sock.send(&frame(MAC_A, MAC_B, seq, LEN));
        }
    });
    assert!(
        eventually(|| counter.counts().unwrap().packets >= u64::from(N)),
        "counted {:?}",
        counter.counts().unwrap()
    );
    // Settle, then the count must be exact: nothing extra, nothing lost.
    std::thread::sleep(Duration::from_millis(200));
    let counts = counter.counts().unwrap();
    assert_eq!(counts.packets, u64::from(N));
    assert_eq!(counts.bytes, u64::from(N) * LEN as u64);
}

/// 64 receive and 64 transmit frames: the smallest rings.
fn small() -> AfXdpConfig {
    AfXdpConfig {
        rx_frames: 64,
        tx_frames: 64,
        ..AfXdpConfig::default()
    }
}

fn open_afxdp(ns: &Netns, config: AfXdpConfig) -> AfXdp {
    inside(ns, move || AfXdp::open("va", 0, &config)).unwrap()
}

#[test]
fn afxdp_on_veth_binds_in_copy_mode_and_refuses_forced_zero_copy() {
    require_root!();
    let p = pair();
    let dev = open_afxdp(&p.a, AfXdpConfig::default());
    assert!(!dev.zero_copy(), "veth has no AF_XDP zero-copy");
    assert_eq!(dev.xdp_mode(), XdpMode::Native);
    drop(dev);
    assert!(
        !xdp_attached(&p.a, "va"),
        "closing the socket detaches the program"
    );
    let config = AfXdpConfig {
        bind_mode: BindMode::ZeroCopy,
        ..AfXdpConfig::default()
    };
    let err = inside(&p.a, move || AfXdp::open("va", 0, &config)).unwrap_err();
    assert!(matches!(err, XdpError::ZeroCopyUnsupported { .. }), "{err}");
}

#[test]
fn a_veth_socket_has_no_napi_id_at_bind_so_busy_polling_waits_but_its_options_read_back() {
    require_root!();
    let p = pair();
    let busy = BusyPoll::new(BusyPollConfig::for_polling(50, 1000, DeferChoice::Auto));
    let config = AfXdpConfig {
        busy_poll: Some(busy.clone()),
        ..AfXdpConfig::default()
    };
    let dev = open_afxdp(&p.a, config);
    let fd = interrupt_fd(&dev);
    assert_eq!(busy_poll::incoming_napi_id(fd).unwrap(), 0);
    assert_eq!(dev.busy_poll(), Some(&busy));
    // Not polling: off, whatever the device offers.
    let status = busy.status();
    assert_eq!(status.path_name(), "off", "{status:?}");
    assert!(!status.in_budget);
    // Polling, without a NAPI id: it waits for one and says so, outside the budget.
    busy.set_polling(true);
    let status = busy.status();
    assert!(!status.in_budget && !busy.polls_napi(), "{status:?}");
    assert_eq!(status.path_name(), "unavailable", "{status:?}");
    assert!(status.detail.contains("NAPI id"), "{status:?}");
    busy.set_polling(false);
    // The options were set on the socket at bind, and read back (the budget only where
    // the kernel answers getsockopt for it).
    let options = busy_poll::socket_options(fd).unwrap();
    assert!(options.prefer);
    assert!(matches!(options.budget, None | Some(50)), "{options:?}");
    assert!(options.usecs > 0);
    // Closing the socket detaches it.
    drop(dev);
    assert!(
        busy.status().detail.contains("no socket"),
        "{:?}",
        busy.status()
    );
}

#[test]
fn afxdp_receives_frames_byte_exact_and_accounts_for_all() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    let sent: Vec<Vec<u8>> = (0..200)
        .map(|seq| frame(MAC_A, MAC_B, seq, 60 + (seq as usize * 7) % 1400))
        .collect();
    let to_send = sent.clone();
    inside(&p.b, move || {
        let sock = RawSocket::open("vb", false);
        to_send.iter().for_each(|f| sock.send(f));
    });
    let got = receive_frames(&mut dev, sent.len());
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "frames arrive in order and byte-exact");
    let stats = dev.stats().unwrap();
    assert_eq!(
        stats.rx_frames + stats.rx_dropped + stats.rx_ring_full,
        sent.len() as u64
    );
    assert_eq!(
        stats.rx_bytes,
        sent.iter().map(|f| f.len() as u64).sum::<u64>()
    );
}

#[test]
fn afxdp_refills_so_more_frames_than_the_umem_holds_pass() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, small());
    let sender = inside(&p.b, || RawSocket::open("vb", false));
    const ROUNDS: u32 = 20;
    const BURST: u32 = 32;
    let mut received = 0u64;
    for round in 0..ROUNDS {
        for i in 0..BURST {
            sender.send(&frame(MAC_A, MAC_B, round * BURST + i, 60));
        }
        let got = receive_frames(&mut dev, BURST as usize);
        for (i, f) in got.iter().enumerate() {
            assert_eq!(f[14..18], (round * BURST + i as u32).to_be_bytes());
        }
        received += got.len() as u64;
    }
    assert_eq!(received, u64::from(ROUNDS * BURST), "10x the receive pool");
    let stats = dev.stats().unwrap();
    assert_eq!(stats.rx_dropped + stats.rx_ring_full, 0, "{stats:?}");
    let hw = dev.hw_stats();
    assert_eq!((hw.rx_ring_full, hw.rx_no_buffer), (0, 0));
}

#[test]
fn frames_arriving_while_the_fill_ring_is_empty_are_dropped_as_no_buffer_not_ring_full() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, small());
    // Nothing received meanwhile: the 64 fill-ring frames carry the first 64, and the kernel
    // finds the fill ring empty before it looks at the rx ring, so every later frame is a
    // fill-ring-empty drop (`rx_dropped` in copy mode), the rx ring never full.
    const SENT: u64 = 200;
    inside(&p.b, || {
        let sock = RawSocket::open("vb", false);
        (0..SENT as u32).for_each(|seq| sock.send(&frame(MAC_A, MAC_B, seq, 60)));
    });
    // Counted before anything is received (receiving refills the fill ring).
    assert!(eventually(|| dev.hw_stats().rx_no_buffer == SENT - 64));
    let (stats, hw) = (dev.stats().unwrap(), dev.hw_stats());
    assert_eq!(hw.rx_no_buffer, stats.rx_dropped);
    assert_eq!((hw.rx_ring_full, stats.rx_ring_full), (0, 0), "{stats:?}");
    assert_eq!(receive_frames(&mut dev, 64).len(), 64);
    // The kernel counted each empty fill ring it found; in copy mode each cost a frame.
    assert!(stats.fill_ring_empty >= hw.rx_no_buffer, "{stats:?}");
}

#[test]
fn afxdp_interrupt_fd_polls_readable_when_frames_wait() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    dev.set_interrupt(true);
    assert!(!readable(interrupt_fd(&dev), Duration::ZERO));
    assert!(!dev.rx_ready());
    inside(&p.b, || {
        RawSocket::open("vb", false).send(&frame(MAC_A, MAC_B, 1, 60))
    });
    assert!(readable(interrupt_fd(&dev), TIMEOUT));
    assert!(dev.rx_ready());
    assert_eq!(receive_frames(&mut dev, 1).len(), 1);
    assert!(!dev.rx_ready());
}

#[test]
fn afxdp_transmits_frames_the_peer_receives() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    let peer = inside(&p.b, || RawSocket::open("vb", true));
    let sent: Vec<Vec<u8>> = (0..50)
        .map(|seq| frame(MAC_B, MAC_A, seq, 60 + seq as usize * 13))
        .collect();
    for f in &sent {
        dev.send(f).unwrap();
    }
    dev.flush();
    for expected in &sent {
        let got = peer.receive().expect("the peer receives every frame");
        assert_eq!(&got, expected);
    }
    assert!(eventually(|| {
        dev.flush();
        dev.stats().unwrap().tx_completed == sent.len() as u64
    }));
}

#[test]
fn afxdp_transmits_more_frames_than_its_pool_and_reports_tx_full() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, small());
    let (counter, _link) = count_at_vb(&p);
    const N: u32 = 64 * 20;
    let mut refused = 0u64;
    let mut seq = 0;
    let deadline = Instant::now() + TIMEOUT;
    while seq < N && Instant::now() < deadline {
        match dev.send(&frame(MAC_B, MAC_A, seq, 60)) {
            Ok(()) => seq += 1,
            Err(TxFull) => {
                refused += 1;
                dev.flush();
            }
        }
    }
    dev.flush();
    assert_eq!(seq, N, "all frames queued before the deadline");
    assert!(refused > 0, "a 64-frame pool must push back");
    assert!(
        eventually(|| {
            dev.flush();
            counter.counts().unwrap().packets == u64::from(N)
        }),
        "peer counted {:?}, stats {:?}",
        counter.counts().unwrap(),
        dev.stats().unwrap()
    );
    let stats = dev.stats().unwrap();
    assert_eq!(stats.tx_frames, u64::from(N));
    assert_eq!(stats.tx_full, refused);
    assert_eq!(stats.tx_invalid_descs, 0);
}

/// A counting program on the peer `vb` (native XDP, which also gives veth its NAPI), and
/// the link that keeps it attached.
fn count_at_vb(p: &Pair) -> (CountProgram, XdpLink) {
    inside(&p.b, || {
        let counter = CountProgram::load().unwrap();
        let link = counter.attach("vb", XdpMode::Native).unwrap();
        (counter, link)
    })
}

/// Pins task `pid` (0: the calling thread) to `cpu`.
fn pin(pid: libc::pid_t, cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let task = rustix::thread::Pid::from_raw(pid);
    let pinned = rustix::thread::sched_setaffinity(task, &set);
    assert_eq!(pinned, Ok(()), "pinning {pid} to CPU {cpu}");
}

/// Makes the calling thread SCHED_FIFO at `priority`, or SCHED_OTHER at 0.
fn schedule(priority: i32) {
    let policy = if priority > 0 {
        libc::SCHED_FIFO
    } else {
        libc::SCHED_OTHER
    };
    polld_dev::sys::set_scheduler(0, policy, priority).unwrap();
}

#[test]
fn a_frame_the_device_drops_after_a_kick_took_it_is_a_transmit_drop() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    // The peer receives through threaded NAPI (XDP gives veth its NAPI), its kthread on
    // this test's CPU: while the sender runs SCHED_FIFO there, the peer's 256-slot ring
    // cannot drain, and veth (qdisc noqueue) drops what does not fit.
    let (counter, _link) = count_at_vb(&p);
    // Through `ip netns exec`, which mounts the namespace's own sysfs.
    p.b.exec("sh", &["-c", "echo 1 > /sys/class/net/vb/threaded"])
        .unwrap();
    let kthread = inside(&p.b, || polld_dev::napi::napis_of("vb").unwrap()[0].pid)
        .expect("threaded NAPI has a kthread");
    let cpu = rustix::thread::sched_getcpu();
    pin(kthread as libc::pid_t, cpu);
    // The send buffer must not be what stops the kicks first (a 64-byte frame's skb
    // holds about 1 KB of it): the device's ring must.
    rustix::net::sockopt::set_socket_send_buffer_size_force(interrupt_fd(&dev), 64 << 20).unwrap();
    const N: u64 = 1024;
    // Queued only: `send` does not kick.
    for seq in 0..N as u32 {
        dev.send(&frame(MAC_B, MAC_A, seq, 60)).unwrap();
    }
    // Two flushes before the peer may run, realtime for as short as that takes, and polls
    // of the socket between them: in copy mode `xsk_poll` transmits by itself, and what
    // it sends into the full ring is dropped without an EBUSY to any call of polld's.
    let mut dev = std::thread::spawn(move || {
        pin(0, cpu);
        schedule(10);
        dev.flush();
        for _ in 0..8 {
            let socket = interrupt_fd(&dev);
            let mut pfd = [PollFd::from_borrowed_fd(
                socket,
                PollFlags::IN | PollFlags::OUT,
            )];
            let no_wait = Timespec::try_from(Duration::ZERO).unwrap();
            let _ = rustix::event::poll(&mut pfd, Some(&no_wait));
        }
        dev.flush();
        schedule(0);
        dev
    })
    .join()
    .unwrap();
    let dropped = |dev: &mut AfXdp| dev.hw_stats().tx_drops.get(TxDrop::NoBufs);
    assert!(
        eventually(|| {
            dev.flush();
            let stats = dev.stats().unwrap();
            stats.tx_completed == N && counter.counts().unwrap().packets + dropped(&mut dev) == N
        }),
        "peer counted {:?}, stats {:?}",
        counter.counts().unwrap(),
        dev.stats().unwrap()
    );
    let stats = dev.stats().unwrap();
    assert!(
        stats.tx_dropped > 0,
        "the full ring dropped nothing: {stats:?}"
    );
    // A kick stops at the first drop; kicking on dropped every frame past the ring's 256
    // (768 of these 1024) before the peer could run.
    assert!(
        dropped(&mut dev) < 64,
        "kicks went on into a full device: {stats:?}"
    );
}

#[test]
fn afxdp_frames_too_long_to_transmit_are_counted_as_transmit_drops() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    let (counter, _link) = count_at_vb(&p);
    // 1600 bytes: within a 2048-byte UMEM frame but over the 1500-byte MTU; 3000 bytes:
    // over the UMEM frame itself.
    for (seq, len) in [(0, 60), (1, 1600), (2, 3000), (3, 60)] {
        dev.send(&frame(MAC_B, MAC_A, seq, len)).unwrap();
    }
    dev.flush();
    assert!(
        eventually(|| {
            dev.flush();
            dev.hw_stats().tx_drops.total() == 2 && counter.counts().unwrap().packets == 2
        }),
        "peer counted {:?}, drops {:?}, stats {:?}",
        counter.counts().unwrap(),
        dev.hw_stats().tx_drops,
        dev.stats().unwrap()
    );
    assert_eq!(dev.hw_stats().tx_drops.get(TxDrop::TooLong), 2);
}

#[test]
fn afxdp_status_follows_the_interface() {
    require_root!();
    let p = pair();
    let mut dev = open_afxdp(&p.a, AfXdpConfig::default());
    assert_eq!(dev.name(), "va");
    assert_eq!(dev.check_status(), LinkState::Up);
    p.a.ip(&["link", "set", "va", "down"]).unwrap();
    assert_eq!(dev.check_status(), LinkState::Down);
    p.a.ip(&["link", "del", "va"]).unwrap();
    assert_eq!(dev.check_status(), LinkState::Gone);
}

/// Two namespaces with IPv6 on (without duplicate address detection, so addresses are
/// usable at once), `va` and `vb` between them with IPv4 and IPv6 addresses.
fn pair_with_ipv6() -> Pair {
    let a = Netns::create("xdp6-a").unwrap();
    let b = Netns::create("xdp6-b").unwrap();
    for ns in [&a, &b] {
        ns.sysctl("net.ipv6.conf.default.accept_dad=0").unwrap();
    }
    let p = veth_between(a, b);
    for (ns, dev, end) in [(&p.a, "va", 1), (&p.b, "vb", 2)] {
        ns.ip(&["addr", "add", &format!("10.77.0.{end}/24"), "dev", dev])
            .unwrap();
        ns.ip(&["addr", "add", &format!("2001:db8:77::{end}/64"), "dev", dev])
            .unwrap();
    }
    p
}

/// `va`'s link-local address, as `ping -6 ADDRESS%vb` from `b` names it.
fn link_local(ns: &Netns, dev: &str) -> String {
    let out = ns.ip(&["-6", "-o", "addr", "show", "dev", dev, "scope", "link"]);
    let out = out.unwrap();
    let word = out.split_whitespace().skip_while(|w| *w != "inet6").nth(1);
    word.and_then(|w| w.split('/').next())
        .unwrap_or_else(|| panic!("no link-local address on {dev}: {out}"))
        .to_string()
}

/// An IPv4 frame from `b` to `dst` (UDP, 20 bytes of header, no payload).
fn ipv4_frame(dst: [u8; 4]) -> Vec<u8> {
    let mut f = [MAC_A, MAC_B].concat();
    f.extend([
        0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 77, 0, 2,
    ]);
    f.extend(dst);
    f.extend([0; 8]);
    f.resize(60, 0);
    f
}

/// An IPv6 frame from `b`'s address to `dst` carrying `next_header` and `payload`.
fn ipv6_frame(dst: std::net::Ipv6Addr, next_header: u8, payload: &[u8]) -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8:77::2".parse().unwrap();
    let mut f = [MAC_A, MAC_B].concat();
    f.extend([0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend((payload.len() as u16).to_be_bytes());
    f.extend([next_header, 64]);
    f.extend(src.octets());
    f.extend(dst.octets());
    f.extend(payload);
    f
}

#[test]
fn afxdp_passing_local_keeps_the_host_reachable_over_ipv4_and_ipv6() {
    require_root!();
    let p = pair_with_ipv6();
    let va_link_local = link_local(&p.a, "va");
    let ping = |args: &[&str]| {
        let mut all = vec!["-c", "1", "-W", "2"];
        all.extend(args);
        p.b.exec("ping", &all).is_ok()
    };
    let ping_link_local = || ping(&["-6", &format!("{va_link_local}%vb")]);

    // By default the socket takes every frame: the host goes deaf, IPv4 and IPv6.
    let dev = open_afxdp(&p.a, AfXdpConfig::default());
    assert!(!ping(&["10.77.0.1"]), "the socket steals the ping");
    assert!(
        !ping(&["-6", "2001:db8:77::1"]),
        "the socket steals the ping -6"
    );
    assert!(!ping_link_local(), "the socket steals the link-local ping");
    drop(dev);

    let config = AfXdpConfig {
        pass_local: true,
        ..AfXdpConfig::default()
    };
    let mut dev = open_afxdp(&p.a, config);
    // Neighbour discovery (solicitations to the solicited-node multicast group, then
    // advertisements to the host's addresses) and the pings themselves reach the kernel.
    assert!(
        ping(&["10.77.0.1"]),
        "ARP and ICMP for 10.77.0.1 reach the kernel"
    );
    assert!(
        ping(&["-6", "2001:db8:77::1"]),
        "ND and ICMPv6 reach the kernel"
    );
    assert!(ping_link_local(), "the link-local address answers");

    // What polld forwards (to addresses not the host's) reaches the socket, and only
    // that: not multicast, neighbour discovery to any address, nor another ethertype.
    let other: std::net::Ipv6Addr = "2001:db8:77::9".parse().unwrap();
    let forwarded = [
        ipv4_frame([10, 77, 0, 9]),
        ipv6_frame(other, 17, &[0; 8]),
        ipv4_frame([10, 78, 0, 1]),
    ];
    let neighbour_solicitation = [135, 0, 0, 0, 0, 0, 0, 0];
    let the_kernels = [
        ipv4_frame([224, 0, 0, 5]),
        ipv4_frame([10, 77, 0, 255]),
        ipv6_frame("ff02::1".parse().unwrap(), 17, &[0; 8]),
        ipv6_frame("ff0e::1".parse().unwrap(), 17, &[0; 8]),
        ipv6_frame(other, 58, &neighbour_solicitation),
        frame(MAC_A, MAC_B, 1, 60),
    ];
    let to_send: Vec<Vec<u8>> = the_kernels.iter().chain(&forwarded).cloned().collect();
    inside(&p.b, move || {
        let sock = RawSocket::open("vb", false);
        to_send.iter().for_each(|f| sock.send(f));
    });
    let got = receive_frames(&mut dev, forwarded.len());
    assert!(
        got == forwarded,
        "only the forwarded frames reach the socket"
    );

    // An address the host gains is its own at once, and one it loses is no longer.
    p.a.ip(&["addr", "add", "2001:db8:78::1/64", "dev", "va"])
        .unwrap();
    p.b.ip(&["route", "add", "2001:db8:78::/64", "dev", "vb"])
        .unwrap();
    assert!(
        eventually(|| ping(&["-6", "2001:db8:78::1"])),
        "an address added while the socket is open answers"
    );
    p.a.ip(&["addr", "del", "2001:db8:78::1/64", "dev", "va"])
        .unwrap();
    let lost = ipv6_frame("2001:db8:78::1".parse().unwrap(), 17, &[0; 8]);
    let sent = lost.clone();
    let mut got = Vec::new();
    let sock = inside(&p.b, || RawSocket::open("vb", false));
    assert!(
        eventually(|| {
            sock.send(&sent);
            dev.receive(64, &mut |f| got.push(f.to_vec()));
            got.contains(&sent)
        }),
        "frames for a removed address go to the socket again"
    );
}

#[test]
fn afxdp_sockets_on_two_queues_share_one_program() {
    require_root!();
    let (a, b) = quiet_namespaces();
    let queues = ["numtxqueues", "2", "numrxqueues", "2"];
    let mut args = vec!["link", "add", "va"];
    args.extend(queues);
    args.extend(["netns", a.name(), "type", "veth", "peer", "name", "vb"]);
    args.extend(queues);
    args.extend(["netns", b.name()]);
    polld_dev::netns::ip(&args).unwrap();
    a.ip(&["link", "set", "va", "address", &mac_text(MAC_A), "up"])
        .unwrap();
    b.ip(&["link", "set", "vb", "address", &mac_text(MAC_B), "up"])
        .unwrap();

    let mut devs = inside(&a, || {
        AfXdp::open_queues("va", &[0, 1], &AfXdpConfig::default())
    })
    .unwrap();
    assert_eq!(devs.iter().map(|d| d.queue()).collect::<Vec<_>>(), [0, 1]);
    const N: usize = 100;
    inside(&b, || {
        let sock = RawSocket::open("vb", false);
        (0..N as u32).for_each(|seq| sock.send(&frame(MAC_A, MAC_B, seq, 60)));
    });
    let mut received = 0;
    eventually(|| {
        for dev in devs.iter_mut() {
            received += dev.receive(64, &mut |_| {});
        }
        received >= N
    });
    assert_eq!(received, N, "every frame reached one of the two sockets");

    let last = devs.pop().unwrap();
    drop(devs);
    assert!(
        xdp_attached(&a, "va"),
        "the remaining socket keeps the program"
    );
    drop(last);
    assert!(!xdp_attached(&a, "va"));
}

#[test]
fn afxdp_on_a_missing_queue_says_so() {
    require_root!();
    let p = pair();
    let err = inside(&p.a, || AfXdp::open("va", 5, &AfXdpConfig::default())).unwrap_err();
    assert!(err.to_string().contains("queue 5"), "{err}");
    assert!(
        err.to_string()
            .contains("does the interface have this queue"),
        "{err}"
    );
}

/// A second veth pair between the same namespaces: `va2` in `a`, `vb2` in `b`.
fn second_pair(p: &Pair) {
    let (mac_a, mac_b) = (mac_text(MAC_A), mac_text(MAC_B));
    veth_pair(
        VethEnd {
            ns: &p.a,
            name: "va2",
            mac: &mac_a,
            addr: None,
        },
        VethEnd {
            ns: &p.b,
            name: "vb2",
            mac: &mac_b,
            addr: None,
        },
    )
    .unwrap();
}

#[test]
fn sockets_of_a_shared_umem_send_each_others_frames_without_a_copy() {
    require_root!();
    let p = pair();
    second_pair(&p);
    // Small rings, so that 20 rounds circulate every frame through the spare list.
    let config = small();
    let umem = SharedUmem::new(2, &config).unwrap();
    let (c, u) = (config.clone(), umem.clone());
    let mut input = inside(&p.a, move || AfXdp::open_shared("va", 0, &c, &u)).unwrap();
    let (c, u) = (config.clone(), umem.clone());
    let mut output = inside(&p.a, move || AfXdp::open_shared("va2", 0, &c, &u)).unwrap();
    assert!(input.shares_umem() && output.shares_umem());
    assert_eq!(input.capabilities().pool, Some(umem.pool()));
    let sender = inside(&p.b, || RawSocket::open("vb", false));
    let peer = inside(&p.b, || RawSocket::open("vb2", true));
    const ROUNDS: u32 = 20;
    const BURST: u32 = 32;
    for round in 0..ROUNDS {
        let sent: Vec<Vec<u8>> = (0..BURST)
            .map(|i| frame(MAC_A, MAC_B, round * BURST + i, 60 + i as usize))
            .collect();
        sent.iter().for_each(|f| sender.send(f));
        let mut loans = Vec::new();
        assert!(eventually(|| {
            input
                .lending()
                .unwrap()
                .receive_lending(64, &mut |f, loan| {
                    // Rewritten in place, as the stage rewrites MACs: here the destination.
                    f[..6].copy_from_slice(&MAC_B);
                    loans.push(loan);
                    true
                });
            loans.len() == BURST as usize
        }));
        for loan in loans {
            output.lending().unwrap().send_loan(loan).unwrap();
        }
        output.flush();
        for expected in &sent {
            let mut expected = expected.clone();
            expected[..6].copy_from_slice(&MAC_B);
            assert_eq!(peer.receive().expect("forwarded"), expected);
        }
    }
    // Every frame went out of `output` as a loan, none was copied, none lost.
    assert!(eventually(|| {
        output.flush();
        output.stats().unwrap().tx_completed == u64::from(ROUNDS * BURST)
    }));
    let (i, o) = (input.stats().unwrap(), output.stats().unwrap());
    assert_eq!(o.tx_lent, u64::from(ROUNDS * BURST));
    assert_eq!(o.tx_frames, o.tx_lent);
    assert_eq!(
        i.rx_frames,
        u64::from(ROUNDS * BURST),
        "10x the receive frames"
    );
    assert_eq!(i.rx_dropped + i.rx_ring_full, 0, "{i:?}");
}

#[test]
fn a_shared_umem_refuses_a_member_too_many_or_of_other_sizes() {
    require_root!();
    let p = pair();
    second_pair(&p);
    let config = AfXdpConfig::default();
    let umem = SharedUmem::new(1, &config).unwrap();
    let (c, u) = (config.clone(), umem.clone());
    let _first = inside(&p.a, move || AfXdp::open_shared("va", 0, &c, &u)).unwrap();
    let (c, u) = (config.clone(), umem.clone());
    let err = inside(&p.a, move || AfXdp::open_shared("va2", 0, &c, &u)).unwrap_err();
    assert!(err.to_string().contains("room for 1 sockets"), "{err}");
    let other = AfXdpConfig {
        tx_frames: 64,
        ..AfXdpConfig::default()
    };
    let err = inside(&p.a, move || AfXdp::open_shared("va2", 0, &other, &umem)).unwrap_err();
    assert!(err.to_string().contains("same frame size"), "{err}");
}
