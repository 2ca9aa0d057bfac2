//! The netdev netlink client and the kernel receive threads on a real veth: NAPI ids and
//! kthread pids from `napi-get`, per-NAPI settings written and restored with `napi-set`,
//! and the threads' CPU time, in a namespace the test creates and deletes.

#[macro_use]
mod common;

use std::sync::Arc;

use polld_dev::irq_defer::{DeferSettings, Deferral, Writer};
use polld_dev::kernel_rx::{FoundBy, RxCpuTime, RxWork};
use polld_dev::napi::{self, NapiSettings};
use polld_dev::netns::{in_netns, veth_pair, Netns, VethEnd};

/// One namespace holding both ends of a veth pair, `a` with threaded NAPI (GRO on gives
/// a veth its NAPI instances).
fn threaded_veth(prefix: &str) -> Netns {
    let ns = Netns::create(prefix).unwrap();
    let end = |name, mac| VethEnd {
        ns: &ns,
        name,
        mac,
        addr: None,
    };
    veth_pair(
        end("na", "02:00:00:00:0a:01"),
        end("nb", "02:00:00:00:0a:02"),
    )
    .unwrap();
    ns.exec("ethtool", &["-K", "na", "gro", "on"]).unwrap();
    ns.exec("sh", &["-c", "echo 1 > /sys/class/net/na/threaded"])
        .unwrap();
    ns
}

#[test]
fn napi_ids_threads_and_their_cpu_time_are_found_in_the_interfaces_namespace() {
    require_root!();
    let ns = threaded_veth("napi-find");
    let work = in_netns(ns.name(), || RxWork::find("na")).unwrap();
    assert_eq!(work.found_by, FoundBy::Netlink);
    assert!(!work.napi_ids.is_empty(), "{work:?}");
    assert_eq!(work.threads.len(), work.napi_ids.len(), "{work:?}");
    for thread in &work.threads {
        assert!(
            thread.name.starts_with("napi/na-"),
            "thread {thread} is not na's"
        );
        assert!(!thread.cpus.is_empty(), "{thread}");
    }
    // Pinned to one CPU, a thread's time counts on that CPU; otherwise elsewhere.
    let pid = work.threads[0].pid;
    let cpu = work.threads[0].cpus[0];
    std::process::Command::new("taskset")
        .args(["-pc", &cpu.to_string(), &pid.to_string()])
        .output()
        .unwrap();
    let work = in_netns(ns.name(), || RxWork::find("na")).unwrap();
    let time = RxCpuTime::read(std::slice::from_ref(&work), Some(cpu));
    let name = &work.threads[0].name;
    assert_eq!(work.threads[0].cpus, [cpu]);
    assert!(!time.elsewhere.contains(name), "{time:?}");
    let other_cpu = RxCpuTime::read(std::slice::from_ref(&work), Some(cpu + 1));
    assert!(other_cpu.elsewhere.contains(name), "{other_cpu:?}");
    assert!(other_cpu.on_cpu_ns <= other_cpu.total_ns);
    // A missing interface is named; and in a namespace without `na`, the threads of
    // this namespace's `na` are not taken for its own.
    let missing = in_netns(ns.name(), || napi::napis_of("nosuch0")).unwrap();
    assert!(missing
        .unwrap_err()
        .to_string()
        .contains("no interface nosuch0"));
    let other = Netns::create("napi-other").unwrap();
    let elsewhere = in_netns(other.name(), || RxWork::find("na")).unwrap();
    assert!(elsewhere.threads.is_empty(), "{elsewhere:?}");
}

#[test]
fn per_napi_settings_are_written_and_read_back() {
    require_root!();
    let ns = threaded_veth("napi-set");
    in_netns(ns.name(), || {
        let napis = napi::napis_of("na").unwrap();
        let id = napis[0].id;
        let before = napi::napi_get(id).unwrap().settings.expect("Linux 6.13+");
        let wanted = NapiSettings {
            defer_hard_irqs: 3,
            gro_flush_timeout_ns: 200_000,
            irq_suspend_timeout_ns: 20_000_000,
        };
        napi::napi_set(id, &wanted).unwrap();
        assert_eq!(napi::napi_get(id).unwrap().settings, Some(wanted));
        napi::napi_set(id, &before).unwrap();
        assert_eq!(napi::napi_get(id).unwrap().settings, Some(before));
        // An id that does not exist is refused with the kernel's reason.
        let error = napi::napi_set(u32::MAX, &wanted).unwrap_err().to_string();
        assert!(error.contains(&format!("NAPI {}", u32::MAX)), "{error}");
    })
    .unwrap();
}

#[test]
fn a_netlink_deferral_restores_the_old_settings_when_dropped() {
    require_root!();
    let ns = threaded_veth("napi-tune");
    in_netns(ns.name(), || {
        let id = napi::napis_of("na").unwrap()[0].id;
        let before = napi::napi_get(id).unwrap().settings.unwrap();
        let wanted = DeferSettings {
            defer_hard_irqs: 2,
            gro_flush_timeout_ns: 2_000_000,
        };
        let netdev = Arc::new(napi::Netdev::open().unwrap());
        let writer = Writer::Netlink {
            netdev,
            napi_id: id,
        };
        let ifindex = napi::ifindex("na").unwrap();
        let deferral = Deferral::apply(writer.clone(), "na", ifindex, wanted).unwrap();
        // A second socket of the same NAPI shares the change; the last one restores.
        let second = Deferral::apply(writer, "na", ifindex, wanted).unwrap();
        let now = napi::napi_get(id).unwrap().settings.unwrap();
        assert_eq!(
            (now.defer_hard_irqs, now.gro_flush_timeout_ns),
            (2, 2_000_000)
        );
        drop(deferral);
        assert_eq!(napi::napi_get(id).unwrap().settings, Some(now));
        drop(second);
        assert_eq!(napi::napi_get(id).unwrap().settings, Some(before));
    })
    .unwrap();
}
