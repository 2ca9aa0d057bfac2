//! The per-device interrupt deferral in sysfs (the way on Linux 6.1) on a real veth: written,
//! recorded in the state file, restored on drop, and restored by the next start from
//! the state file a killed polld left. The veth lives in a namespace the test creates;
//! the test thread mounts that namespace's sysfs privately, as `ip netns exec` does.

#[macro_use]
mod common;

use std::ffi::CString;
use std::path::{Path, PathBuf};

use polld_dev::irq_defer::{self, DeferSettings, Deferral, StateFile, SysfsDevice, Writer};
use polld_dev::napi::{self, NapiSettings};
use polld_dev::netns::{self, veth_pair, Netns, VethEnd};

/// Runs `f` on a thread of its own mount namespace, inside network namespace `ns`, with
/// that namespace's sysfs mounted at a temporary directory; gives `f` its `class/net`.
fn with_own_sysfs<T: Send + 'static>(ns: &str, f: impl FnOnce(&Path) -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        // SAFETY: plain unshare/mount calls on this thread's own namespaces and a fresh
        // directory; their results are checked.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0, "unshare");
            let root = CString::new("/").unwrap();
            let none = CString::new("none").unwrap();
            let flags = libc::MS_REC | libc::MS_PRIVATE;
            let rc = libc::mount(
                none.as_ptr(),
                root.as_ptr(),
                std::ptr::null(),
                flags,
                std::ptr::null(),
            );
            assert_eq!(rc, 0, "making / private");
        }
        netns::enter(&ns).unwrap();
        let dir = std::env::temp_dir().join(format!("polld-sysfs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = CString::new(dir.to_str().unwrap()).unwrap();
        let sysfs = CString::new("sysfs").unwrap();
        // SAFETY: mounts sysfs on our own directory, in this thread's private namespace.
        let rc = unsafe {
            libc::mount(
                sysfs.as_ptr(),
                target.as_ptr(),
                sysfs.as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, 0, "mounting sysfs: {}", std::io::Error::last_os_error());
        let result = f(&dir.join("class/net"));
        // SAFETY: unmounts what this thread mounted.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
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
    let ns = Netns::create("irqdefer").unwrap();
    let end = |name, mac| VethEnd {
        ns: &ns,
        name,
        mac,
        addr: None,
    };
    veth_pair(
        end("da", "02:00:00:00:0d:01"),
        end("db", "02:00:00:00:0d:02"),
    )
    .unwrap();
    // The host's sysfs does not show the namespace's `da`: refused, with the fix.
    let ifindex = netns::in_netns(ns.name(), || napi::ifindex("da").unwrap()).unwrap();
    let host = SysfsDevice::new(Path::new(irq_defer::SYSFS_NET), "da");
    let refused = host.check(ifindex).unwrap_err();
    assert!(refused.contains("ip netns exec"), "{refused}");

    with_own_sysfs(ns.name(), move |root| {
        let dev = SysfsDevice::new(root, "da");
        dev.check(ifindex).unwrap();
        let before = dev.read().unwrap();
        let wanted = DeferSettings {
            defer_hard_irqs: 2,
            gro_flush_timeout_ns: 2_000_000,
        };
        let deferral = Deferral::apply(Writer::Sysfs(dev.clone()), "da", ifindex, wanted).unwrap();
        let deferred = NapiSettings {
            defer_hard_irqs: 2,
            gro_flush_timeout_ns: 2_000_000,
            irq_suspend_timeout_ns: 0,
        };
        assert_eq!(dev.read().unwrap(), deferred);
        // Recorded, with the old values, before anything could kill polld.
        let recorded = StateFile::parse(&std::fs::read_to_string(state_file()).unwrap()).unwrap();
        assert_eq!(recorded.pid, std::process::id());
        assert_eq!(recorded.entries.len(), 1);
        assert_eq!(
            (
                recorded.entries[0].ifname.as_str(),
                recorded.entries[0].saved
            ),
            ("da", before)
        );
        // A clean exit: restored, and the file is gone.
        drop(deferral);
        assert_eq!(dev.read().unwrap(), before);
        assert!(!state_file().exists());

        // A SIGKILL: the values stay deferred and the file stays; its owner is gone.
        dev.write(&deferred).unwrap();
        let left = tempdir();
        let dead = StateFile {
            pid: u32::MAX - 1,
            ..recorded
        };
        let file = left.join(format!("irq-deferral.{}", dead.pid));
        std::fs::write(&file, dead.render()).unwrap();
        let log = irq_defer::restore_leftovers_in(&left, root, |n| napi::ifindex(n).ok());
        assert_eq!(log.len(), 1, "{log:?}");
        assert!(log[0].contains("da: restored"), "{log:?}");
        assert_eq!(dev.read().unwrap(), before);
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(&left);
    });
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polld-irq-state-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
