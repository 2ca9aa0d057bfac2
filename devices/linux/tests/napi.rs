//! The netdev netlink client and the kernel receive threads on a real veth: NAPI ids and
//! kthread pids from `napi-get`, per-NAPI settings written and restored with `napi-set`,
//! and the threads' CPU time, in a namespace the test creates and deletes. Also the
//! per-device interrupt deferral in sysfs (the way on Linux 6.1): written, recorded in the
//! state file, restored on drop, and restored by the next start from the state file a
//! killed polld left; the test thread mounts the namespace's sysfs privately, as `ip
//! netns exec` does.

#[macro_use]
mod common;

use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use polld_dev::irq_defer::{self, DeferSettings, Deferral, StateFile, SysfsDevice, Writer};
use polld_dev::kernel_rx::{FoundBy, RxCpuTime, RxWork};
use polld_dev::napi::{self, NapiSettings};
use polld_dev::netns::{self, in_netns, veth_pair, Netns, VethEnd};
use rustix::mount::{
    mount, mount_change, unmount, MountFlags, MountPropagationFlags, UnmountFlags,
};
use rustix::thread::UnshareFlags;

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

/// Runs `f` on a thread of its own mount namespace, inside network namespace `ns`, with
/// that namespace's sysfs mounted at a temporary directory; gives `f` its `class/net`.
fn with_own_sysfs<T: Send + 'static>(ns: &str, f: impl FnOnce(&Path) -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        // SAFETY: a mount namespace of this thread's own: no descriptor table is split.
        unsafe { rustix::thread::unshare_unsafe(UnshareFlags::NEWNS) }.expect("unshare");
        mount_change(
            "/",
            MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
        )
        .expect("making / private");
        netns::enter(&ns).unwrap();
        let dir = std::env::temp_dir().join(format!("polld-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        mount("sysfs", &dir, "sysfs", MountFlags::empty(), None::<&CStr>).expect("mounting sysfs");
        let result = f(&dir.join("class/net"));
        let _ = unmount(&dir, UnmountFlags::DETACH);
        let _ = std::fs::remove_dir(&dir);
        result
    })
    .join()
    .unwrap()
}

fn state_file() -> PathBuf {
    Path::new(irq_defer::STATE_DIR).join(format!("irq-deferral.{}", std::process::id()))
}

#[test]
fn a_sysfs_deferral_is_recorded_restored_on_drop_and_after_a_kill() {
    require_root!();
    let ns = threaded_veth("irq-defer");
    // The host's sysfs does not show the namespace's `da`: refused, with the fix.
    let ifindex = netns::in_netns(ns.name(), || napi::ifindex("na").unwrap()).unwrap();
    let host = SysfsDevice::new(Path::new(irq_defer::SYSFS_NET), "na");
    let refused = host.check(ifindex).unwrap_err();
    assert!(refused.contains("ip netns exec"), "{refused}");

    with_own_sysfs(ns.name(), move |root| {
        let dev = SysfsDevice::new(root, "na");
        dev.check(ifindex).unwrap();
        let before = dev.read().unwrap();
        let wanted = DeferSettings {
            defer_hard_irqs: 2,
            gro_flush_timeout_ns: 2_000_000,
        };
        let deferral = Deferral::apply(Writer::Sysfs(dev.clone()), "na", ifindex, wanted).unwrap();
        let deferred = NapiSettings {
            defer_hard_irqs: 2,
            gro_flush_timeout_ns: 2_000_000,
            irq_suspend_timeout_ns: 0,
        };
        assert_eq!(dev.read().unwrap(), deferred);
        // Recorded, with the old values, before anything could kill polld (the other
        // tests of this process may have entries of their own in the file).
        let recorded = StateFile::parse(&std::fs::read_to_string(state_file()).unwrap()).unwrap();
        assert_eq!(recorded.pid, std::process::id());
        let ours = sysfs_entries(&recorded);
        assert_eq!(ours.len(), 1, "{recorded:?}");
        assert_eq!((ours[0].ifname.as_str(), ours[0].saved), ("na", before));
        // A clean exit: restored, and no longer recorded.
        drop(deferral);
        assert_eq!(dev.read().unwrap(), before);
        let now = std::fs::read_to_string(state_file()).unwrap_or_default();
        assert!(!now.contains("sysfs"), "{now}");

        // A SIGKILL: the values stay deferred and the file stays; its owner is gone.
        dev.write(&deferred).unwrap();
        let left = tempdir();
        let dead = StateFile {
            pid: u32::MAX - 1,
            entries: ours,
            ..recorded
        };
        let file = left.join(format!("irq-deferral.{}", dead.pid));
        std::fs::write(&file, dead.render()).unwrap();
        let log = irq_defer::restore_leftovers_in(&left, root, |n| napi::ifindex(n).ok());
        assert_eq!(log.len(), 1, "{log:?}");
        assert!(log[0].contains("na: restored"), "{log:?}");
        assert_eq!(dev.read().unwrap(), before);
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(&left);
    });
}

/// The sysfs entries of a state file.
fn sysfs_entries(state: &StateFile) -> Vec<irq_defer::SavedEntry> {
    state
        .entries
        .iter()
        .filter(|e| e.path == irq_defer::DeferPath::Sysfs)
        .cloned()
        .collect()
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polld-irq-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
