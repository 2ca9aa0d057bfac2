//! The process figures `/metrics` serves, against what this process can see of itself
//! another way. One test in its own binary: no other test opens files while it counts.

use std::time::{SystemTime, UNIX_EPOCH};

use polld_control::metrics::ProcessStats;

/// The soft limit of `Max open files` in `/proc/self/limits`; `None` when unlimited.
fn max_open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft = line["Max open files".len()..].split_whitespace().next();
    soft.unwrap().parse().ok()
}

fn open_fds_now() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// `VmRSS` in `/proc/self/status`, bytes.
fn vm_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap();
    kb * 1024
}

/// The CPU time of the whole process so far, seconds.
fn process_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

#[test]
fn the_process_figures_are_what_proc_says_in_their_units() {
    let stats = ProcessStats::read().unwrap();
    assert_eq!(stats.open_fds, open_fds_now());
    let files: Vec<std::fs::File> = (0..3)
        .map(|_| std::fs::File::open("/proc/self/stat").unwrap())
        .collect();
    assert_eq!(ProcessStats::read().unwrap().open_fds, stats.open_fds + 3);
    drop(files);
    assert_eq!(stats.max_fds, max_open_files());

    // Resident memory in bytes, not pages or kB: 64 MiB written shows.
    let rss_before = ProcessStats::read().unwrap().resident_bytes;
    let block = std::hint::black_box(vec![1u8; 64 << 20]);
    let stats = ProcessStats::read().unwrap();
    let rss_after = vm_rss();
    assert!(
        stats.resident_bytes >= rss_before + (48 << 20),
        "{rss_before} then {}",
        stats.resident_bytes
    );
    // VmRSS is the same figure, read a moment later.
    let apart = stats.resident_bytes.abs_diff(rss_after);
    assert!(
        apart < 4 << 20,
        "{} against VmRSS {rss_after}",
        stats.resident_bytes
    );
    assert!(stats.virtual_bytes >= stats.resident_bytes);
    drop(block);

    // CPU time in seconds: busy until a quarter second of CPU is spent, then the figure is
    // the process's CPU clock to a few ticks (the kernel reports it in ticks).
    let mut spin = 0u64;
    while process_cpu() < 0.25 {
        spin = std::hint::black_box(spin.wrapping_add(1));
    }
    let before = process_cpu();
    let cpu = ProcessStats::read().unwrap().cpu_seconds;
    let after = process_cpu();
    let tick = 1.0 / rustix::param::clock_ticks_per_second() as f64;
    assert!(
        cpu >= before - 2.0 * tick && cpu <= after + tick,
        "{cpu} s against the CPU clock's {before}..{after} s"
    );

    // Started after this test binary was built, and not after now (the boot time it is
    // counted from is a whole second).
    let built = std::fs::metadata(std::env::current_exe().unwrap())
        .unwrap()
        .modified()
        .unwrap();
    let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
    let started = stats.start_time_seconds;
    assert!(
        started >= secs(built) - 1.0 && started <= secs(SystemTime::now()),
        "started {started}, built {}",
        secs(built)
    );
}
