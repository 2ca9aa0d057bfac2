//! Measures the candidate ways to read frames from a TAP, to choose the TAP device's
//! receive path (`polld_dev::tap`).
//!
//! A namespace holds TAP `tapr0`; a thread on `--sender-cpu` floods it from the kernel
//! side with an AF_XDP socket (copy mode, as `polld gen` does; 60-byte frames), so the TAP's queue
//! towards the reader stays full. A reader on `--cpu` drains the fd for `--secs` with
//! each candidate in turn (`--runs` rounds, interleaved, to spread the noise of a shared
//! machine):
//! - `read`: glibc `read()`, one frame per call (the tun driver returns one frame per
//!   `read`/`readv`, so `readv` is the same call);
//! - `syscall`: the same read through `syscall(SYS_read)`, without glibc's
//!   cancellation-point bookkeeping;
//! - `uring-N`: io_uring, N read requests on the fd submitted with one
//!   `io_uring_enter` per batch (non-blocking fd: an empty queue completes with EAGAIN).
//!
//! It prints, per candidate, the median frames/s read, the share of read attempts that
//! found the queue empty (if not ~0, the sender, not the reader, was the limit), and
//! the busy time of the reader's CPU per frame read (from /proc/stat, so that work the
//! kernel does for io_uring outside the reader thread counts too).
//!
//! Run as root: `cargo run --release -p polld-dev --example tap_rates -- [--secs 2] [--runs 3] [--cpu 1] [--sender-cpu 0]`

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, types, IoUring};
use polld_core::device::Device;
use polld_dev::afxdp::{AfXdp, AfXdpConfig};
use polld_dev::netns::{in_netns, Netns};
use polld_dev::tap::Tap;

const TAP: &str = "tapr0";
const FRAME_LEN: usize = 60;
const BUFFER: usize = 2048;

struct Options {
    secs: f64,
    runs: usize,
    cpu: usize,
    sender_cpu: usize,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        secs: 2.0,
        runs: 3,
        cpu: 1,
        sender_cpu: 0,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else {
            return Err(format!("{} needs a value", pair[0]));
        };
        let number: f64 = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
        match flag.as_str() {
            "--secs" => options.secs = number,
            "--runs" => options.runs = number as usize,
            "--cpu" => options.cpu = number as usize,
            "--sender-cpu" => options.sender_cpu = number as usize,
            _ => {
                return Err(format!(
                    "unknown option {flag}; use --secs, --runs, --cpu, --sender-cpu"
                ))
            }
        }
    }
    Ok(options)
}

fn pin(cpu: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    let _ = rustix::thread::sched_setaffinity(None, &set);
}

/// Busy time of `cpu` so far, in ns (every /proc/stat field but idle and iowait).
fn cpu_busy_ns(cpu: usize) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let label = format!("cpu{cpu} ");
    let ticks: Vec<u64> = stat
        .lines()
        .find(|l| l.starts_with(&label))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    let hz = rustix::param::clock_ticks_per_second().max(1);
    (ticks.iter().take(8).sum::<u64>() - idle) * 1_000_000_000 / hz
}

/// A UDP frame to an address nobody owns, broadcast so the TAP's kernel side sends it.
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x09, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((FRAME_LEN - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f
}

/// What one candidate did in one run.
struct Drained {
    frames: u64,
    attempts: u64,
    cpu_busy_ns: u64,
}

/// Reads on `cpu` for `secs` with `read_some`, which makes `.1` read attempts and
/// returns how many got a frame.
fn drain(cpu: usize, secs: f64, mut read_some: impl FnMut() -> (usize, usize)) -> Drained {
    let busy_start = cpu_busy_ns(cpu);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let (mut frames, mut attempts) = (0u64, 0u64);
    while Instant::now() < end {
        for _ in 0..64 {
            let (got, tried) = read_some();
            frames += got as u64;
            attempts += tried as u64;
        }
    }
    Drained {
        frames,
        attempts,
        cpu_busy_ns: cpu_busy_ns(cpu) - busy_start,
    }
}

fn read_glibc(fd: RawFd, buf: &mut [u8]) -> (usize, usize) {
    // SAFETY: reads into `buf`, at most its length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    ((n > 0) as usize, 1)
}

fn read_syscall(fd: RawFd, buf: &mut [u8]) -> (usize, usize) {
    // SAFETY: reads into `buf`, at most its length, through syscall(2).
    let n = unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) };
    ((n > 0) as usize, 1)
}

/// io_uring with `depth` read requests per `io_uring_enter`.
struct UringReader {
    ring: IoUring,
    buffers: Vec<Vec<u8>>,
}

impl UringReader {
    fn new(depth: usize) -> UringReader {
        UringReader {
            ring: IoUring::new(depth as u32).expect("io_uring_setup"),
            buffers: vec![vec![0; BUFFER]; depth],
        }
    }

    fn read_batch(&mut self, fd: RawFd) -> (usize, usize) {
        let depth = self.buffers.len();
        for (i, buf) in self.buffers.iter_mut().enumerate() {
            let read = opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), BUFFER as u32)
                .build()
                .user_data(i as u64);
            // SAFETY: the buffer outlives the request: we wait for every completion below.
            unsafe {
                self.ring
                    .submission()
                    .push(&read)
                    .expect("ring sized to depth")
            };
        }
        self.ring.submit_and_wait(depth).expect("io_uring_enter");
        (
            self.ring.completion().filter(|c| c.result() > 0).count(),
            depth,
        )
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let options = parse_options().unwrap_or_else(|e| {
        eprintln!("tap_rates: {e}");
        std::process::exit(2)
    });
    if !polld_dev::netns::is_root() {
        eprintln!("tap_rates: needs root (namespaces, TAP, AF_XDP)");
        std::process::exit(2);
    }
    let ns = Netns::create("taprate").expect("create the namespace");
    let tap = in_netns(ns.name(), || Tap::open(TAP))
        .expect("enter the namespace")
        .unwrap_or_else(|e| panic!("{e}"));
    ns.ip(&["link", "set", TAP, "txqueuelen", "1000", "up"])
        .expect("bring the TAP up");
    let fd = tap
        .capabilities()
        .interrupt_fd
        .expect("a TAP has an fd")
        .as_raw_fd();

    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (stop, ns_name, cpu) = (stop.clone(), ns.name().to_string(), options.sender_cpu);
        std::thread::spawn(move || {
            polld_dev::netns::enter(&ns_name).expect("enter the namespace");
            pin(cpu);
            let mut dev = AfXdp::open(TAP, 0, &AfXdpConfig::default()).expect("AF_XDP");
            let frame = frame();
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    let _ = dev.send(&frame);
                }
                dev.flush();
            }
        })
    };
    pin(options.cpu);
    std::thread::sleep(Duration::from_millis(200));

    let names = ["read", "syscall", "uring-8", "uring-64"];
    let mut rates = vec![Vec::new(); names.len()];
    let mut empty = vec![Vec::new(); names.len()];
    let mut costs = vec![Vec::new(); names.len()];
    let mut buf = vec![0u8; BUFFER];
    for _ in 0..options.runs {
        for (k, name) in names.iter().enumerate() {
            let (cpu, secs) = (options.cpu, options.secs);
            let run = match *name {
                "read" => drain(cpu, secs, || read_glibc(fd, &mut buf)),
                "syscall" => drain(cpu, secs, || read_syscall(fd, &mut buf)),
                uring => {
                    let depth = uring.trim_start_matches("uring-").parse().unwrap();
                    let mut reader = UringReader::new(depth);
                    drain(cpu, secs, || reader.read_batch(fd))
                }
            };
            rates[k].push(run.frames as f64 / secs);
            empty[k].push(100.0 * (run.attempts - run.frames) as f64 / run.attempts.max(1) as f64);
            costs[k].push(run.cpu_busy_ns as f64 / run.frames.max(1) as f64);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = sender.join();
    println!(
        "TAP read candidates, 60-byte frames, reader on CPU{}, AF_XDP flood from CPU{}, median of {} x {} s:",
        options.cpu, options.sender_cpu, options.runs, options.secs
    );
    println!(
        "{:<10} {:>12} {:>12} {:>20}",
        "candidate",
        "frames/s",
        "empty reads",
        format!("CPU{} ns/frame", options.cpu)
    );
    for (k, name) in names.iter().enumerate() {
        println!(
            "{:<10} {:>12.0} {:>11.1}% {:>20.0}",
            name,
            median(rates[k].clone()),
            median(empty[k].clone()),
            median(costs[k].clone())
        );
    }
}
