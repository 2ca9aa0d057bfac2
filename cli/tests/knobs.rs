//! FreeBSD's polling switches on a running polld (root only; CI runs as root):
//! `kern.polling.idle_poll` runs in its own idle-priority thread and leaves the poll
//! thread's policy alone.

mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{gen, router_config, testbed, Dir, Polld};
use polld_testbed::{Testbed, UpOptions};
use polld_testsupport::eventually;

/// Held by each test here: the CPU shares one measures must not include the other's polld.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn fwd_cpu() -> usize {
    UpOptions::default().cpus.fwd
}

/// The testbed's polld config on AF_PACKET, pinned to the fwd CPU.
fn config(tb: &Testbed, dir: &Dir, mode: &str, realtime: bool) -> (PathBuf, PathBuf) {
    router_config(tb, dir, "af_packet", mode, Some(fwd_cpu()), realtime, &[])
}

fn value(polld: &Polld, name: &str) -> u64 {
    polld.ok(&["ctl", "-n", name]).trim().parse().unwrap()
}

/// The scheduling policy of thread `tid` (SCHED_OTHER 0, SCHED_FIFO 1, SCHED_IDLE 5).
fn policy(tid: u32) -> i32 {
    let (p, _) = polld_dev::sys::scheduler_of(tid as libc::pid_t)
        .unwrap_or_else(|e| panic!("sched_getscheduler({tid}) failed: {e}"));
    p
}

/// The thread of process `pid` named `name`.
fn thread_named(pid: u32, name: &str) -> u32 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|t| t.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .find(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|c| c.trim() == name)
        })
        .unwrap_or_else(|| panic!("polld has no thread named {name}"))
}

fn thread_cpu() -> Duration {
    Duration::from_nanos(polld_dev::clock::thread_cpu_ns())
}

/// The share of `cpu` a CPU-bound thread pinned there gets over `window`.
fn competitor_share(cpu: usize, window: Duration) -> f64 {
    std::thread::spawn(move || {
        // Pins this thread only.
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).unwrap();
        let (start, cpu0) = (Instant::now(), thread_cpu());
        let mut x = 0u64;
        while start.elapsed() < window {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        (thread_cpu() - cpu0).as_secs_f64() / start.elapsed().as_secs_f64()
    })
    .join()
    .unwrap()
}

#[test]
fn idle_poll_runs_in_its_own_idle_thread_and_leaves_the_poll_threads_policy_alone() {
    require_root!();
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = testbed("i");
    let dir = Dir::new("idle");
    let (path, socket) = config(&tb, &dir, "polling", true);
    let polld = Polld::start(&tb, &path, &socket);
    let poll_thread = polld.pid();
    let idle_thread = thread_named(polld.pid(), polld_runtime::idle::THREAD_NAME);
    assert_eq!(policy(poll_thread), libc::SCHED_FIFO);
    assert_eq!(policy(idle_thread), libc::SCHED_IDLE);
    // The control thread one above the poll thread: a request gets in while the poll
    // thread runs interrupt work under a flood.
    let control = thread_named(polld.pid(), "polld-control");
    let scheduler = |tid: u32| polld_dev::sys::scheduler_of(tid as libc::pid_t).unwrap();
    let (_, poll_priority) = scheduler(poll_thread);
    assert_eq!(scheduler(control), (libc::SCHED_FIFO, poll_priority + 1));

    // Light traffic throughout: frames keep waking the idle poller, which must still
    // take only CPU nobody else wants (its passes run when the CPU idles, never at the
    // poll thread's priority on a frame's interrupt).
    let traffic = gen(&tb, "20000", 7);
    std::thread::sleep(Duration::from_millis(300));
    let window = Duration::from_secs(2);
    // The two shares are taken one after the other: an unrelated process that lands on
    // the CPU during one window and not the other says nothing about the idle poller, so
    // a pair outside the bound is measured once more.
    let measure = || {
        polld.ok(&["ctl", "kern.polling.idle_poll=0"]);
        let forwarded = value(&polld, "dev.veth1.forwarded");
        let share_off = competitor_share(fwd_cpu(), window);
        let idle_ns = value(&polld, "polld.idle_poll_ns");
        polld.ok(&["ctl", "kern.polling.idle_poll=1"]);
        let idle_ns_after = eventually("idle polling runs", Duration::from_secs(10), || {
            Some(value(&polld, "polld.idle_poll_ns")).filter(|&after| after > idle_ns)
        });
        let share_on = competitor_share(fwd_cpu(), window);
        assert!(
            value(&polld, "dev.veth1.forwarded") > forwarded,
            "no frame was forwarded while the shares were measured"
        );
        eprintln!(
            "competitor share under 20 kpps: idle_poll=0 {share_off:.3}, idle_poll=1 {share_on:.3}; idle poll time {} us",
            (idle_ns_after - idle_ns) / 1000
        );
        (share_off, share_on)
    };
    let (mut share_off, mut share_on) = measure();
    if share_on <= 0.8 * share_off {
        (share_off, share_on) = measure();
    }
    assert!(
        share_on > 0.8 * share_off,
        "a working idle poller took the competitor's CPU: {share_on:.3} against {share_off:.3}"
    );
    // Once the traffic stops, the idle thread polls, finds the rings empty and sleeps on
    // the devices' interrupts.
    drop(traffic);
    eventually(
        "the idle poller sleeps on the interrupts",
        Duration::from_secs(10),
        || value(&polld, "kern.polling.idlepoll_sleeping") == 1,
    );
    polld.ok(&["ctl", "kern.polling.idle_poll=0"]);
    // The poll thread never changed policy; ticks still run SCHED_FIFO.
    assert_eq!(policy(poll_thread), libc::SCHED_FIFO);
    assert_eq!(policy(idle_thread), libc::SCHED_IDLE);
    let cycles = value(&polld, "kern.polling.cycles");
    eventually(
        "ticks run: kern.polling.cycles grows",
        Duration::from_secs(10),
        || value(&polld, "kern.polling.cycles") > cycles,
    );
    polld.stop();
}

/// The tutorials' `sysctl kern.polling.enable=1` through `polld ctl`, with FreeBSD's
/// validation; `poll_in_trap` refused with the reason.
#[test]
fn polling_enable_switches_every_interface_and_poll_in_trap_says_why_not() {
    require_root!();
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tb = testbed("e");
    let dir = Dir::new("enable");
    let (path, socket) = config(&tb, &dir, "interrupt", false);
    let polld = Polld::start(&tb, &path, &socket);
    let modes = |polld: &Polld| {
        let out = polld.ok(&["ctl", "-n", "dev.veth1.mode", "dev.veth2.mode"]);
        out.split_whitespace().map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(value(&polld, "kern.polling.enable"), 0);
    polld.ok(&["ctl", "kern.polling.enable=1"]);
    assert_eq!(modes(&polld), ["polling", "polling"]);
    assert_eq!(value(&polld, "kern.polling.handlers"), 2);
    assert_eq!(value(&polld, "kern.polling.enable"), 1);
    polld.ok(&["ifconfig", "veth2", "-polling"]);
    assert_eq!(value(&polld, "kern.polling.enable"), 0);
    polld.ok(&["ctl", "kern.polling.enable=0"]);
    assert_eq!(modes(&polld), ["interrupt", "interrupt"]);
    for (write, says) in [
        ("kern.polling.enable=2", "out of range (allowed 0..1)"),
        ("kern.polling.poll_in_trap=1", "system call"),
    ] {
        let out = polld.run(&["ctl", write]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{write}: {stderr}"
        );
    }
    assert_eq!(modes(&polld), ["interrupt", "interrupt"]);
    polld.stop();
}
