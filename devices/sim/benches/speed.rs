//! Speed of the scheduler machinery and of the simulator. Run: `cargo bench -p polld-sim`.
//! Prints the machine and ratios against baselines measured in the same run.

use std::hint::black_box;
use std::time::Instant;

use polld_core::{HandlerId, PollCmd, PollHandlers, Poller};
use polld_sim::{Arrivals, CpuCosts, NicConfig, Sim, UserTask};

/// A null device: every handler call "processes" what it is offered, doing nothing.
struct Null(u64);
impl PollHandlers for Null {
    fn poll(&mut self, id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        self.0 = black_box(self.0 + id as u64 + count as u64);
        count
    }
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cores} cores, {cpu}, kernel {}", kernel.trim())
}

fn main() {
    println!("machine: {}", machine());
    const CYCLES: u64 = 200_000;
    const H: usize = 4;

    // 1. Poll-cycle machinery per packet, null devices, burst at 150, each_burst 5.
    let mut p = Poller::default();
    for id in 0..H {
        p.register(id).unwrap();
    }
    let mut null = Null(0);
    let mut now = 0u64;
    let t = Instant::now();
    for _ in 0..CYCLES {
        p.hardclock(now, 1);
        while p.netisr_poll(now, &mut null) {
            p.netisr_pollmore(now);
        }
        p.netisr_pollmore(now);
        now += 1_000_000;
    }
    let sched = t.elapsed().as_nanos() as f64;
    let packets = (p.state().chunks * 5 * H as u64) as f64;
    // Baseline: the same handler calls, made directly.
    let chunks = p.state().chunks;
    let t = Instant::now();
    for _ in 0..chunks {
        for id in 0..H {
            black_box(null.poll(id, PollCmd::PollOnly, black_box(5)));
        }
    }
    let direct = t.elapsed().as_nanos() as f64;
    println!(
        "poll cycle machinery: {:.2} ns/packet through the scheduler vs {:.2} ns/packet calling handlers directly (ratio {:.2}); burst {}",
        sched / packets,
        direct / packets,
        sched / direct.max(1.0),
        p.state().burst
    );

    // 2. Zero traffic at hz=1000: what one tick of polling costs when the devices are empty.
    let mut empty = Poller::default();
    for id in 0..H {
        empty.register(id).unwrap();
    }
    struct Empty;
    impl PollHandlers for Empty {
        fn poll(&mut self, _: HandlerId, _: PollCmd, _: u32) -> u32 {
            0
        }
    }
    let t = Instant::now();
    for k in 0..CYCLES {
        let now = k * 1_000_000;
        empty.hardclock(now, 1);
        while empty.netisr_poll(now, &mut Empty) {
            empty.netisr_pollmore(now);
        }
        empty.netisr_pollmore(now);
    }
    let per_tick = t.elapsed().as_nanos() as f64 / CYCLES as f64;
    println!(
        "zero traffic, {H} interfaces, hz=1000: {per_tick:.0} ns per tick of scheduler work = {:.4} % of a core (timer wakeups not included)",
        per_tick * 1000.0 / 1e9 * 100.0
    );

    // 3. The simulator: 10 s of virtual time at 1 Mpps, polling with idle_poll.
    let mut input = NicConfig::new("in0", Arrivals::Poisson { pps: 1_000_000.0 });
    input.route = Some("out0".into());
    let mut output = NicConfig::new("out0", Arrivals::None);
    output.line_pps = 10_000_000.0;
    let mut sim = Sim::new(
        Poller::default(),
        vec![input, output],
        vec![Some(1), None],
        CpuCosts::default(),
        UserTask::None,
        1,
    );
    for i in 0..2 {
        sim.dataplane_mut()
            .set_mode(i, polld_core::Mode::Polling)
            .unwrap();
    }
    sim.dataplane_mut()
        .sysctl_set("kern.polling.idle_poll", "1")
        .unwrap();
    sim.dataplane_mut()
        .sysctl_set("kern.polling.burst_max", "1000")
        .unwrap();
    let t = Instant::now();
    sim.run_until(10_000_000_000);
    let wall = t.elapsed().as_secs_f64();
    println!(
        "polld sim: 10 s of virtual time at 1 Mpps ({} frames) in {wall:.2} s of real time: {:.1}x faster than real time",
        sim.nic(0).stats.arrived,
        10.0 / wall
    );
}
