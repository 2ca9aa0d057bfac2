//! The VM testbed's smoke test: a qemu guest (software emulation here) with two
//! virtio-net NICs forwards through polld in the guest, every frame accounted for, and the
//! NIC's receive interrupts (`virtio0-input.0` in the guest's /proc/interrupts) are
//! compared between interrupt mode and polling at the same moderate load, in one run.
//!
//! Needs root, qemu-system-x86, a `linux-image-*-cloud-amd64` and busybox-static
//! (`.ci/deps` installs them). Without them it skips, saying so; with
//! `POLLD_REQUIRE_ROOT` set (CI) it fails instead.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{one_document, POLLD};
use polld_testbed::entries::conserved;
use polld_testbed::vm::demo::VmDemoArgs;
use polld_testbed::vm::guest::DeviceWork;
use polld_testbed::vm::{self, guest, image};
use polld_testbed::{counters, Accel, Devices, Layout, PolldSetup, Testbed, UpOptions, VmOptions};
use serde_json::Value;

/// Frames per phase, and their rate: a moderate load for a guest under software
/// emulation, which forwards about 9 kpps at most.
const FRAMES: u64 = 3000;
const RATE_PPS: u64 = 1000;

/// What the guest needs; the reason it cannot run, if any.
fn missing_requirement() -> Option<String> {
    if Command::new("qemu-system-x86_64")
        .arg("-version")
        .output()
        .is_err()
    {
        return Some(
            "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)".into(),
        );
    }
    if let Err(e) = image::find_kernel() {
        return Some(e.to_string());
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("busybox is not installed (apt-get install busybox-static)".into());
    }
    None
}

/// True when the test may go on: root, and the guest's packages; else skips, or fails
/// under `POLLD_REQUIRE_ROOT`.
fn can_boot_a_guest() -> bool {
    if !polld_testsupport::root_or_skip("needs root for namespaces, TAPs and qemu") {
        return false;
    }
    let Some(missing) = missing_requirement() else {
        return true;
    };
    polld_testsupport::skip_unless(
        false,
        &format!("cannot run: {missing}; .ci/deps installs what it needs"),
    )
}

/// Runs `script` in the guest; its stdout (a failure panics).
fn guest(prefix: &str, script: &str) -> String {
    vm::guest::sh(prefix, script, "").unwrap()
}

/// One phase: both interfaces in `mode`, `FRAMES` frames from gen at `RATE_PPS`. Returns
/// (frames gen sent, gen's own drops, virtio0-input.0 interrupts per second over gen's
/// sending time, whether polld says eth0's receive work is in its budget).
fn phase(layout: &Layout, mode: &str) -> (u64, u64, f64, bool) {
    let prefix = &layout.prefix;
    guest::set_mode(prefix, mode).unwrap();
    let before = guest::interrupts(prefix, guest::ETH0_RX_IRQ).unwrap();
    let started = Instant::now();
    let gen = guest::gen_through_guest(Path::new(POLLD), layout, &RATE_PPS.to_string())
        .args(["--count", &FRAMES.to_string()])
        .output()
        .unwrap();
    let sending = started.elapsed();
    let after = guest::interrupts(prefix, guest::ETH0_RX_IRQ).unwrap();
    let stdout = String::from_utf8_lossy(&gen.stdout);
    assert!(
        gen.status.success(),
        "polld gen: {stdout} {}",
        String::from_utf8_lossy(&gen.stderr)
    );
    let summary: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("polld gen printed no summary: {stdout}"));
    // The counted frames and the end-of-run records after them.
    let sent = summary["frames"].as_u64().unwrap() + summary["end_records"].as_u64().unwrap_or(0);
    let gen_drops = summary["dropped"].as_u64().unwrap_or(0);
    let (in_budget, rx_work) = guest::rx_work(prefix, "eth0").unwrap();
    eprintln!(
        "{mode}: gen sent {sent} in {:.1} s; virtio0-input.0 took {} interrupts; rx work in polld's budget: {in_budget} ({rx_work})",
        sending.as_secs_f64(),
        after - before,
    );
    let per_s = (after - before) as f64 / sending.as_secs_f64();
    (sent, gen_drops, per_s, in_budget)
}

#[test]
fn a_guest_forwards_every_frame_through_polld_and_its_nic_interrupts_are_counted() {
    if !can_boot_a_guest() {
        return;
    }
    let layout = Layout::with_devices(&format!("v{}-", std::process::id()), Devices::Vm);
    let prefix = layout.prefix.clone();
    let vm_options = VmOptions {
        polld: POLLD.into(),
        accel: Accel::Auto,
    };
    let tb = Testbed::up_vm(&layout, &UpOptions::default(), &vm_options).unwrap();
    let guest_state = tb.report().guest.clone().unwrap();
    eprintln!(
        "guest up in {:.1} s with {} ({})",
        guest_state.boot_ms as f64 / 1000.0,
        guest_state.accel,
        guest_state.accel_reason
    );

    // The guest runs the polld of this build.
    let host_version = Command::new(POLLD).arg("--version").output().unwrap();
    assert_eq!(
        guest(&prefix, "polld --version"),
        String::from_utf8_lossy(&host_version.stdout)
    );

    // The guest's device work goes to interrupt priority and back to Linux's default.
    let softirq = guest::ksoftirqd_pid(&prefix).unwrap();
    let policy = || guest(&prefix, &format!("chrt -p {softirq}"));
    guest::set_device_work(&prefix, DeviceWork::InterruptPriority).unwrap();
    let fifo = policy();
    assert!(
        fifo.contains("SCHED_FIFO") && fifo.contains(&format!(": {}", guest::INTERRUPT_PRIORITY)),
        "{fifo}"
    );
    guest::set_device_work(&prefix, DeviceWork::Fair).unwrap();
    let fair = policy();
    assert!(fair.contains("SCHED_OTHER"), "{fair}");

    // polld in the guest, on eth0 and eth1, as fwd on the other testbeds.
    let polld = guest::start_polld(
        &layout,
        &PolldSetup {
            backend: "af_xdp",
            mode: "interrupt",
            socket: Path::new(guest::POLLD_SOCKET),
            cpu: None,
            realtime: false,
            knobs: &[],
        },
    )
    .unwrap();

    let (gen_ns, sink_ns) = (&layout.veth0.ns, &layout.veth3.ns);
    let tap0_before = counters(gen_ns, &layout.veth0.name).unwrap();
    let tap1_before = counters(sink_ns, &layout.veth3.name).unwrap();
    let eth0_before = guest::net_dev(&prefix, "eth0").unwrap();
    let eth1_before = guest::net_dev(&prefix, "eth1").unwrap();

    let (sent_i, gen_drops_i, interrupt_irqs, _) = phase(&layout, "interrupt");
    let (sent_p, gen_drops_p, polling_irqs, in_budget) = phase(&layout, "polling");
    // Let the last frames through before counting.
    std::thread::sleep(Duration::from_secs(2));

    let tap0_after = counters(gen_ns, &layout.veth0.name).unwrap();
    let tap1_after = counters(sink_ns, &layout.veth3.name).unwrap();
    let eth0_after = guest::net_dev(&prefix, "eth0").unwrap();
    let eth1_after = guest::net_dev(&prefix, "eth1").unwrap();
    let report = guest::stop_polld(&prefix, polld).unwrap();
    assert!(conserved(&report), "polld's own counters: {report}");
    let polld_drops = guest::polld_drops(&report);

    // Every frame gen sent reached sink's TAP or was dropped somewhere, by name.
    let sent = sent_i + sent_p;
    let delivered = tap1_after.rx_packets - tap1_before.rx_packets;
    let drops = [
        ("gen", gen_drops_i + gen_drops_p),
        (
            "tap0 tx_dropped",
            tap0_after.tx_dropped - tap0_before.tx_dropped,
        ),
        (
            "guest eth0 rx drop",
            eth0_after.rx_drop - eth0_before.rx_drop,
        ),
        ("polld drops", polld_drops),
        (
            "guest eth1 tx drop",
            eth1_after.tx_drop - eth1_before.tx_drop,
        ),
        (
            "tap1 rx_dropped",
            tap1_after.rx_dropped - tap1_before.rx_dropped,
        ),
    ];
    let dropped: u64 = drops.iter().map(|(_, n)| n).sum();
    eprintln!(
        "sent {sent}, sink's tap1 received {delivered}, drops {drops:?}; guest eth0 rx {}, eth1 tx {}",
        eth0_after.rx_packets - eth0_before.rx_packets,
        eth1_after.tx_packets - eth1_before.tx_packets
    );
    assert!(sent >= 2 * FRAMES, "gen sent {sent}");
    assert_eq!(sent, delivered + dropped, "drops {drops:?}");
    assert!(
        delivered >= sent * 9 / 10,
        "a moderate load is forwarded: {delivered} of {sent}"
    );

    // The NIC's receive interrupts are counted: in interrupt mode about one a frame.
    assert!(
        interrupt_irqs > 0.2 * RATE_PPS as f64,
        "interrupt mode: virtio0-input.0 took {interrupt_irqs:.0}/s at {RATE_PPS} frames/s"
    );
    let ratio = polling_irqs / interrupt_irqs;
    eprintln!(
        "virtio0-input.0 interrupts/s: interrupt mode {interrupt_irqs:.0}, polling {polling_irqs:.0} ({ratio:.3}x)"
    );
    if in_budget {
        // Preferred busy polling keeps the NIC's interrupt masked while polld polls.
        assert!(
            ratio <= 0.1,
            "polling with the receive work in polld's budget took {ratio:.3}x interrupt mode's interrupts"
        );
    }

    // `polld demo --devices vm --json` on this guest, its shortest: its output is one JSON
    // document (its progress lines go to stderr).
    let mut out = Vec::new();
    let args = VmDemoArgs {
        user_frac: 50,
        duration: 1.0,
        json: true,
    };
    vm::demo::run(args, &tb, Path::new(POLLD), &mut out).unwrap();
    let keys = ["accel", "rows", "livelock", "tcp"];
    one_document("polld demo --devices vm", &out, &keys);

    drop(tb);
    assert!(vm::guest_state(&prefix).is_none(), "down removed the guest");
}

#[test]
fn without_a_guest_exec_says_how_to_start_one_and_a_missing_binary_is_named() {
    if !can_boot_a_guest() {
        return;
    }
    let prefix = format!("w{}-", std::process::id());
    let err = vm::exec(&prefix, &["true".into()], "", Duration::from_secs(5))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("polld testbed up --devices vm --prefix {prefix}")),
        "{err}"
    );
    let layout = Layout::with_devices(&prefix, Devices::Vm);
    let options = VmOptions {
        polld: "/nonexistent/polld".into(),
        accel: Accel::Tcg,
    };
    let err = Testbed::up_vm(&layout, &UpOptions::default(), &options)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot copy the polld binary /nonexistent/polld"),
        "{err}"
    );
    // Nothing is left behind.
    assert!(vm::guest_state(&prefix).is_none());
    for ns in [&layout.gen_ns, &layout.sink_ns] {
        assert!(!Path::new("/run/netns").join(ns).exists(), "{ns} is left");
    }
}

/// `polld bench seeds --devices vm` runs the curve and the share steps; asked for one it
/// does not run, it says which it runs and where the others are, before it brings up
/// anything.
#[test]
fn the_guest_seeds_bench_refuses_a_step_it_does_not_run_naming_the_ones_it_does() {
    let out = Command::new(POLLD)
        .args(["bench", "seeds", "--devices", "vm", "--steps", "curve,tcp"])
        .args(["--prefix", &format!("r{}-", std::process::id())])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`polld bench seeds --devices vm` runs curve and share, not tcp")
            && stderr.contains("`polld demo --devices vm`"),
        "{stderr}"
    );
}
