//! Where the testbed puts the kernel's receive work, on the real kernel (needs root; skips,
//! saying so, without it): the placement modes, the NAPI threads' CPUs and priorities,
//! and the programs spawned in the namespaces. Each test uses its own namespace prefix.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

use common::{ping, root, two_cpus, up};
use polld_testbed::{command_in, status, Placement, Role, TestbedError, UpOptions};

#[test]
fn napi_threaded_placement_pins_each_kthread_to_the_receivers_cpu() {
    if !root() {
        return;
    }
    let testbed = up("napi", UpOptions::default());
    let report = testbed.report().placement.clone();
    if !two_cpus() {
        assert!(
            report.warnings.iter().any(|w| w.contains("only one CPU")),
            "{report:?}"
        );
        return;
    }
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let layout = testbed.layout();
    let status = status(layout);
    for (iface, placed) in layout.ifaces().into_iter().zip(&report.interfaces) {
        let cpu = if iface.role == Role::Gen { 0 } else { 1 };
        assert_eq!(
            (placed.applied, placed.cpu),
            (Placement::NapiThreaded, Some(cpu))
        );
        let threaded = Command::new("ip")
            .args(["netns", "exec", &iface.ns, "cat"])
            .arg(format!("/sys/class/net/{}/threaded", iface.name))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&threaded.stdout).trim(),
            "1",
            "{}",
            iface.name
        );
        let seen = status
            .namespaces
            .iter()
            .find(|n| n.name == iface.ns)
            .and_then(|n| n.interfaces.iter().find(|i| i.name == iface.name))
            .unwrap();
        assert_eq!(seen.threaded, Some(true));
        assert!(!seen.napi.is_empty(), "{} has no NAPI", iface.name);
        for napi in &seen.napi {
            assert_eq!(
                napi.cpus.as_deref(),
                Some(cpu.to_string().as_str()),
                "{napi:?}"
            );
        }
    }
}

#[test]
fn sink_rx_realtime_puts_only_the_sinks_napi_thread_above_polld() {
    if !root() {
        return;
    }
    let testbed = up(
        "rtsink",
        UpOptions {
            sink_rx_realtime: true,
            ..UpOptions::default()
        },
    );
    let report = testbed.report().placement.clone();
    if !two_cpus() {
        assert!(
            report
                .warnings
                .iter()
                .any(|w| w.contains("sink rx realtime")),
            "{report:?}"
        );
        return;
    }
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    let layout = testbed.layout();
    for iface in layout.ifaces() {
        let napis = polld_testbed::napi::napi_of(&iface.ns, &iface.name).unwrap();
        assert!(!napis.is_empty(), "{} has no NAPI", iface.name);
        for napi in napis {
            let pid = napi.pid.expect("a threaded NAPI has a kthread");
            let want = if iface.role == Role::Sink {
                (libc::SCHED_FIFO, polld_testbed::placement::SINK_RX_PRIORITY)
            } else {
                (libc::SCHED_OTHER, 0)
            };
            assert_eq!(policy_of(pid), want, "{}", iface.name);
        }
    }
}

#[test]
fn spawned_programs_run_in_their_namespace_on_the_cpu_asked_for() {
    if !root() {
        return;
    }
    let testbed = up(
        "spawn",
        UpOptions {
            placement: Placement::None,
            ..UpOptions::default()
        },
    );
    let cpu = if two_cpus() { 1 } else { 0 };
    let mut child = testbed
        .command_in(Role::Fwd, Some(cpu), "sh")
        .unwrap()
        .args([
            "-c",
            "grep Cpus_allowed_list /proc/self/status; ip -br addr show veth1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        text.contains(&format!("Cpus_allowed_list:\t{cpu}\n")),
        "{text}"
    );
    assert!(text.contains("10.0.1.2/24"), "{text}");
    let err = command_in(&testbed.layout().gen_ns, Some(100_000), "true").unwrap_err();
    assert!(matches!(err, TestbedError::InvalidCpu(_)), "{err}");
}

#[test]
fn napi_threaded_placement_survives_an_xdp_receiver_attaching_to_veth1() {
    if !root() {
        return;
    }
    let testbed = up("xdp", UpOptions::default());
    let layout = testbed.layout();
    let napi_of_veth1 = || {
        let status = status(layout);
        let fwd = &status.namespaces[1];
        fwd.interfaces
            .iter()
            .find(|i| i.name == "veth1")
            .unwrap()
            .napi
            .clone()
    };
    let before = napi_of_veth1();
    let (counter, link) = polld_dev::netns::in_netns(&layout.fwd_ns, || {
        let counter = polld_dev::xdp::CountProgram::load()?;
        let link = counter.attach("veth1", polld_dev::xdp::XdpMode::Native)?;
        Ok::<_, polld_dev::xdp::XdpError>((counter, link))
    })
    .unwrap()
    .unwrap();
    // The XDP program drops what it counts: fwd's address no longer answers.
    assert!(!ping(&testbed, Role::Gen, "10.0.1.2", "3"));
    assert!(
        counter.counts().unwrap().packets >= 3,
        "XDP on veth1 saw no frames"
    );
    // With one CPU, placement none is in force: there is no NAPI kthread to keep.
    if two_cpus() {
        let during = napi_of_veth1();
        assert_eq!(
            during.iter().map(|n| n.pid).collect::<Vec<_>>(),
            before.iter().map(|n| n.pid).collect::<Vec<_>>(),
            "attaching XDP replaced veth1's NAPI kthread"
        );
        assert!(
            during
                .iter()
                .all(|n| n.pid.is_some() && n.cpus.as_deref() == Some("1")),
            "{during:?}"
        );
    }
    drop(link);
    assert!(ping(&testbed, Role::Gen, "10.0.1.2", "1"));
}

#[test]
fn the_napi_threads_of_fwd_are_timed_through_their_napi_ids() {
    if !root() {
        return;
    }
    let testbed = up("krx", UpOptions::default());
    let fwd = testbed.layout().fwd_ns.clone();
    let ifaces = vec!["veth1".to_string(), "veth2".to_string()];
    let before = polld_testbed::demo::kernel_rx_ns(&fwd, &ifaces);
    // Pings from gen to fwd's own address: veth1's NAPI thread receives them.
    assert!(ping(&testbed, Role::Gen, "10.0.1.2", "5"));
    let after = polld_testbed::demo::kernel_rx_ns(&fwd, &ifaces);
    assert!(after > before, "before {before} ns, after {after} ns");
    // An interface the namespace does not have has no threads, and costs nothing.
    assert_eq!(
        polld_testbed::demo::kernel_rx_ns(&fwd, &["nosuch0".to_string()]),
        0
    );
}

/// The scheduling policy and priority of thread `pid`.
fn policy_of(pid: u32) -> (i32, i32) {
    polld_dev::sys::scheduler_of(pid as libc::pid_t).unwrap()
}

#[test]
fn realtime_rx_raises_the_receive_kthreads_of_the_roles_asked_for_until_dropped() {
    use polld_testbed::napi::napi_of;
    use polld_testbed::placement::{RealtimeRx, RX_FIFO_PRIORITY};
    if !root() {
        return;
    }
    if !polld_testsupport::skip::cpus_or_skip(2, "the receive kthreads are placed only with two") {
        return;
    }
    // The sink's kthread starts above polld, so giving back means its old priority.
    let testbed = up(
        "rtrx",
        UpOptions {
            sink_rx_realtime: true,
            ..UpOptions::default()
        },
    );
    let layout = testbed.layout();
    let pids = |role: Role| -> Vec<u32> {
        layout
            .ifaces()
            .into_iter()
            .filter(|i| i.role == role)
            .flat_map(|i| napi_of(&i.ns, &i.name).unwrap())
            .filter_map(|n| n.pid)
            .collect()
    };
    let (fwd, sink, gen) = (pids(Role::Fwd), pids(Role::Sink), pids(Role::Gen));
    assert!(!fwd.is_empty() && !sink.is_empty() && !gen.is_empty());
    let raised = RealtimeRx::raise(layout, &[Role::Fwd, Role::Sink]).unwrap();
    for &pid in fwd.iter().chain(&sink) {
        assert_eq!(
            policy_of(pid),
            (libc::SCHED_FIFO, RX_FIFO_PRIORITY),
            "{pid}"
        );
    }
    for &pid in &gen {
        assert_eq!(
            policy_of(pid),
            (libc::SCHED_OTHER, 0),
            "gen's {pid} untouched"
        );
    }
    drop(raised);
    for &pid in &fwd {
        assert_eq!(policy_of(pid), (libc::SCHED_OTHER, 0), "{pid} given back");
    }
    for &pid in &sink {
        let before = (libc::SCHED_FIFO, polld_testbed::placement::SINK_RX_PRIORITY);
        assert_eq!(policy_of(pid), before, "{pid} given back");
    }
}

#[test]
fn realtime_rx_names_an_interface_without_a_napi_kthread() {
    use polld_testbed::placement::RealtimeRx;
    if !root() {
        return;
    }
    let options = UpOptions {
        placement: Placement::Rps,
        ..UpOptions::default()
    };
    let testbed = up("rtrps", options);
    let e = RealtimeRx::raise(testbed.layout(), &[Role::Fwd]).unwrap_err();
    assert!(
        e.to_string().contains("veth1") && e.to_string().contains("napi-threaded"),
        "{e}"
    );
}
