//! Measures what the XDP consumers of polld-dev take from a veth pair: the count-and-drop
//! program, and the AF_XDP device busy-polling or sleeping in `poll()`.
//!
//! Placement follows docs/measuring.md: the generator (AF_PACKET `sendmmsg`, 64 frames per
//! call, 60-byte frames) runs on CPU0 in namespace b; the AF_XDP receiver on CPU1 in
//! namespace a. veth runs the receive side (XDP included) on the sender's CPU.
//!
//! `tx` reverses the roles: the AF_XDP device transmits from CPU1 and the count program on
//! the peer counts what arrives.
//!
//! Run as root: `cargo run --release -p polld-dev --example xdp_rates -- [count|busy|poll|tx] [secs]`

use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use polld_core::Device;
use polld_dev::afxdp::{AfXdp, AfXdpConfig};
use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};
use polld_dev::xdp::{CountProgram, XdpMode};
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags};

const FRAME: [u8; 60] = {
    let mut f = [0u8; 60];
    // dst 02:00:00:00:0a:01, src 02:00:00:00:0a:02, ethertype 0x88b5
    f[0] = 2;
    f[4] = 0x0a;
    f[5] = 1;
    f[6] = 2;
    f[10] = 0x0a;
    f[11] = 2;
    f[12] = 0x88;
    f[13] = 0xb5;
    f
};

fn pin_to_cpu(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Sends 60-byte frames on `vb` with `sendmmsg` until `stop`, counting them in `sent`.
fn generate(stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) {
    pin_to_cpu(0);
    // Protocol 0: the socket receives nothing.
    let fd = polld_dev::afpacket::raw_socket("vb", 0).expect("a raw socket on vb");
    const BATCH: usize = 64;
    // Every message is the same frame.
    let iov = [IoSlice::new(&FRAME)];
    let mut no_control: Vec<SendAncillaryBuffer<'_, '_, '_>> =
        (0..BATCH).map(|_| SendAncillaryBuffer::default()).collect();
    let mut msgs: Vec<MMsgHdr<'_>> = no_control
        .iter_mut()
        .map(|control| MMsgHdr::new(&iov, control))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(n @ 1..) = rustix::net::sendmmsg(&fd, &mut msgs, SendFlags::empty()) {
            sent.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "busy".into());
    let secs: u64 = args.next().map_or(3, |s| s.parse().expect("seconds"));
    let a = Netns::create("xr-a").unwrap();
    let b = Netns::create("xr-b").unwrap();
    veth_pair(
        VethEnd {
            ns: &a,
            name: "va",
            mac: "02:00:00:00:0a:01",
            addr: None,
        },
        VethEnd {
            ns: &b,
            name: "vb",
            mac: "02:00:00:00:0a:02",
            addr: None,
        },
    )
    .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let b_name = b.name().to_string();
    let offered;
    let received = match mode.as_str() {
        "count" => {
            let (counter, _link) = in_netns(a.name(), || {
                let counter = CountProgram::load().unwrap();
                let link = counter.attach("va", XdpMode::Auto).unwrap();
                (counter, link)
            })
            .unwrap();
            let generator = {
                let (stop, sent) = (stop.clone(), sent.clone());
                std::thread::spawn(move || in_netns(&b_name, || generate(stop, sent)))
            };
            // Let the generator reach its pace before the window opens.
            std::thread::sleep(Duration::from_millis(300));
            let (start, sent_start) = (
                counter.counts().unwrap().packets,
                sent.load(Ordering::Relaxed),
            );
            std::thread::sleep(Duration::from_secs(secs));
            let received = counter.counts().unwrap().packets - start;
            offered = sent.load(Ordering::Relaxed) - sent_start;
            stop.store(true, Ordering::Relaxed);
            generator.join().unwrap().unwrap();
            received
        }
        "busy" | "poll" => {
            let blocking = mode == "poll";
            let mut dev = in_netns(a.name(), || AfXdp::open("va", 0, &AfXdpConfig::default()))
                .unwrap()
                .unwrap();
            pin_to_cpu(1);
            let generator = {
                let (stop, sent) = (stop.clone(), sent.clone());
                std::thread::spawn(move || in_netns(&b_name, || generate(stop, sent)))
            };
            let sent_start = sent.load(Ordering::Relaxed);
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut received = 0u64;
            let mut wakeups = 0u64;
            while Instant::now() < deadline {
                let n = dev.receive(64, &mut |_| {});
                received += n as u64;
                if n == 0 && blocking {
                    dev.set_interrupt(true);
                    let timeout = rustix::event::Timespec {
                        tv_sec: 0,
                        tv_nsec: 100_000_000,
                    };
                    let caps = dev.capabilities();
                    let fd = caps.interrupt_fd.unwrap();
                    let mut pfd = [rustix::event::PollFd::new(
                        &fd,
                        rustix::event::PollFlags::IN,
                    )];
                    let _ = rustix::event::poll(&mut pfd, Some(&timeout));
                    dev.set_interrupt(false);
                    wakeups += 1;
                }
            }
            offered = sent.load(Ordering::Relaxed) - sent_start;
            stop.store(true, Ordering::Relaxed);
            generator.join().unwrap().unwrap();
            let stats = dev.stats().unwrap();
            println!(
                "wakeups/pkt {:.3}; fill-ring wakeups {}; kernel drops: rx_dropped {} \
                 rx_ring_full {} fill_ring_empty {}",
                wakeups as f64 / received.max(1) as f64,
                stats.fill_wakeups,
                stats.rx_dropped,
                stats.rx_ring_full,
                stats.fill_ring_empty
            );
            received
        }
        "tx" => {
            // AF_XDP transmits from va on CPU1; the count program on vb measures arrivals.
            let mut dev = in_netns(a.name(), || AfXdp::open("va", 0, &AfXdpConfig::default()))
                .unwrap()
                .unwrap();
            let (counter, _link) = in_netns(b.name(), || {
                let counter = CountProgram::load().unwrap();
                let link = counter.attach("vb", XdpMode::Auto).unwrap();
                (counter, link)
            })
            .unwrap();
            pin_to_cpu(1);
            let mut frame = FRAME;
            frame.copy_within(0..6, 6);
            frame[5] = 2;
            frame[11] = 1;
            let start = counter.counts().unwrap().packets;
            let deadline = Instant::now() + Duration::from_secs(secs);
            let mut accepted = 0u64;
            while Instant::now() < deadline {
                for _ in 0..64 {
                    if dev.send(&frame).is_ok() {
                        accepted += 1;
                    }
                }
                dev.flush();
            }
            offered = accepted;
            let stats = dev.stats().unwrap();
            println!(
                "tx kicks/pkt {:.3}; tx_full {}; completed {}",
                stats.tx_kicks as f64 / accepted.max(1) as f64,
                stats.tx_full,
                stats.tx_completed
            );
            counter.counts().unwrap().packets - start
        }
        other => panic!("unknown mode {other}: use count, busy, poll or tx"),
    };
    let secs = secs as f64;
    println!(
        "{mode}: offered {:.0} kpps, received {:.0} kpps",
        offered as f64 / secs / 1e3,
        received as f64 / secs / 1e3
    );
}
