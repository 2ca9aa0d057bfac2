//! The guest's boot files: a Debian kernel (`linux-image-*-cloud-amd64`) and an
//! initramfs made of busybox (`busybox-static`), the virtio modules of that kernel, the
//! polld and polld-lab binaries and the host's `chrt` (util-linux; busybox has none), with the shared
//! libraries `ldd` names, at their host paths.
//!
//! The initramfs is an uncompressed `newc` cpio (the kernel unpacks it without a
//! decompressor, which under software emulation is the fastest way in). It is cached in
//! [`CACHE_DIR`] under a key made of the polld binaries' bytes, the kernel's release and
//! image, the libraries and busybox, and the init script: a new polld build (or kernel)
//! gets a new initramfs, the same one is reused.
//!
//! The guest's init mounts proc, sys, devtmpfs and tmpfs, loads the modules in
//! dependency order, brings up loopback and runs `polld-lab testbed guest-agent` (see
//! [`super::agent`]) for ever; everything else (addresses, sysctls) the host does
//! through the agent.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::sys;
use crate::TestbedError;

/// Where built initramfs images are kept.
pub const CACHE_DIR: &str = "/var/cache/polld/vm";

/// Where polld is in the guest (on its PATH).
pub const GUEST_POLLD: &str = "/usr/bin/polld";

/// Where polld-lab is in the guest, beside polld: it runs the agent.
pub const GUEST_LAB: &str = "/usr/bin/polld-lab";

/// The host's `chrt`, copied to the same path in the guest: the host sets the guest's
/// `ksoftirqd` policy with it (`guest::set_device_work`).
pub const CHRT: &str = "/usr/bin/chrt";

/// The kernel modules the guest needs: virtio-pci for the devices, virtio-net for eth0 and
/// eth1, virtio-console for the agent's port. They are loaded with what they depend on
/// (virtio, virtio_ring, virtio_pci_modern_dev, virtio_pci_legacy_dev, failover,
/// net_failover), in the order `modules.dep` gives. XDP sockets and BPF are built into the
/// Debian cloud kernel.
pub const MODULES: [&str; 3] = ["virtio_pci", "virtio_net", "virtio_console"];

/// A kernel to boot: its image and its modules directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kernel {
    pub release: String,
    pub image: PathBuf,
    pub modules: PathBuf,
}

/// The boot files of a guest.
#[derive(Clone, Debug)]
pub struct Image {
    pub kernel: Kernel,
    pub initramfs: PathBuf,
    /// The initramfs was built now (not found in the cache).
    pub built: bool,
}

/// The kernel to boot: `POLLD_VM_KERNEL` (a vmlinuz path) if set, else the newest
/// `/boot/vmlinuz-*-cloud-amd64` whose modules are installed.
pub fn find_kernel() -> Result<Kernel, TestbedError> {
    if let Ok(path) = std::env::var("POLLD_VM_KERNEL") {
        let image = PathBuf::from(&path);
        let release = image
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("vmlinuz-"))
            .ok_or_else(|| {
                TestbedError::Failed(format!(
                    "POLLD_VM_KERNEL={path} is not a /boot/vmlinuz-RELEASE file: point it at one"
                ))
            })?
            .to_string();
        return kernel_of(&release, image);
    }
    let mut releases: Vec<String> = fs::read_dir("/boot")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| n.strip_prefix("vmlinuz-").map(str::to_string))
                .filter(|r| r.ends_with("-cloud-amd64"))
                .collect()
        })
        .unwrap_or_default();
    releases.sort_by_key(|r| version_key(r));
    let release = releases.pop().ok_or_else(|| {
        TestbedError::Failed(
            "no guest kernel: /boot has no vmlinuz-*-cloud-amd64; install one with \
             `apt-get install linux-image-cloud-amd64` (or set POLLD_VM_KERNEL to a vmlinuz \
             whose modules are in /lib/modules)"
                .to_string(),
        )
    })?;
    let image = Path::new("/boot").join(format!("vmlinuz-{release}"));
    kernel_of(&release, image)
}

/// Orders `6.1.0-9-cloud-amd64` before `6.1.0-56-cloud-amd64`: numbers as numbers.
fn version_key(release: &str) -> Vec<u64> {
    release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

fn kernel_of(release: &str, image: PathBuf) -> Result<Kernel, TestbedError> {
    let modules = Path::new("/lib/modules").join(release);
    if !image.is_file() {
        return Err(TestbedError::Failed(format!(
            "the guest kernel {} does not exist: install linux-image-cloud-amd64",
            image.display()
        )));
    }
    if !modules.is_dir() {
        return Err(TestbedError::Failed(format!(
            "the modules of kernel {release} are missing ({} does not exist): reinstall \
             linux-image-{release}",
            modules.display()
        )));
    }
    Ok(Kernel {
        release: release.to_string(),
        image,
        modules,
    })
}

/// The `.ko` files of `wanted` and of every module they depend on, each after its
/// dependencies (the order to insmod them in), by `modules.dep`.
fn module_files(kernel: &Kernel, wanted: &[&str]) -> Result<Vec<PathBuf>, TestbedError> {
    let dep = fs::read_to_string(kernel.modules.join("modules.dep")).map_err(|e| {
        TestbedError::Failed(format!(
            "cannot read {}/modules.dep ({e}): reinstall linux-image-{}",
            kernel.modules.display(),
            kernel.release
        ))
    })?;
    let deps: Vec<(&str, Vec<&str>)> = dep
        .lines()
        .filter_map(|line| {
            let (module, needs) = line.split_once(':')?;
            Some((module, needs.split_whitespace().collect()))
        })
        .collect();
    let mut order: Vec<&str> = Vec::new();
    fn visit<'a>(module: &'a str, deps: &[(&'a str, Vec<&'a str>)], order: &mut Vec<&'a str>) {
        if order.contains(&module) {
            return;
        }
        if let Some((_, needs)) = deps.iter().find(|(m, _)| *m == module) {
            for need in needs {
                visit(need, deps, order);
            }
        }
        order.push(module);
    }
    for name in wanted {
        let file = format!("/{name}.ko");
        let module = deps
            .iter()
            .map(|(m, _)| *m)
            .find(|m| m.ends_with(&file))
            .ok_or_else(|| {
                TestbedError::Failed(format!(
                    "kernel {} has no module {name}.ko (compressed modules are not \
                     supported): use a linux-image-*-cloud-amd64 kernel",
                    kernel.release
                ))
            })?;
        visit(module, &deps, &mut order);
    }
    Ok(order.iter().map(|m| kernel.modules.join(m)).collect())
}

/// `virtio_net` for `.../virtio_net.ko`.
fn module_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".ko").to_string())
        .unwrap_or_default()
}

/// The shared libraries `binary` needs, with the dynamic loader, as `ldd` prints them.
fn libraries(binary: &Path) -> Result<Vec<PathBuf>, TestbedError> {
    let out = sys::output("ldd", &[&binary.to_string_lossy()])?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // A static binary needs nothing.
        let err = String::from_utf8_lossy(&out.stderr);
        if text.contains("not a dynamic executable") || err.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(TestbedError::Failed(format!(
            "`ldd {}` failed: {}",
            binary.display(),
            err.trim()
        )));
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        if line.contains("not found") {
            return Err(TestbedError::Failed(format!(
                "{} needs a library that is not installed: {}",
                binary.display(),
                line.trim()
            )));
        }
        let path = match line.split_once("=>") {
            Some((_, target)) => target.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(path) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// The init script the guest runs as PID 1; it loads `modules` in order.
fn init_script(modules: &[String]) -> String {
    let modules: Vec<String> = modules
        .iter()
        .map(|m| format!("/lib/modules/{m}.ko"))
        .collect();
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
exec </dev/console >/dev/console 2>&1
echo "polld-vm: init on $(uname -r)"
for m in {modules}; do
  insmod "$m" || echo "polld-vm: insmod $m failed"
done
ip link set lo up
echo "polld-vm: starting the agent"
while :; do
  {GUEST_LAB} testbed guest-agent
  echo "polld-vm: the agent exited with status $?"
  sleep 1
done
"#,
        modules = modules.join(" ")
    )
}

/// The boot files for `polld` (with polld-lab beside it): the kernel, and the initramfs
/// from the cache or built now.
pub fn image(polld: &Path) -> Result<Image, TestbedError> {
    let kernel = find_kernel()?;
    let busybox = Path::new("/bin/busybox");
    if !busybox.is_file() {
        return Err(TestbedError::MissingTool {
            program: "busybox".into(),
            package: "busybox-static".into(),
        });
    }
    let lab = polld.with_file_name("polld-lab");
    let [polld_bytes, lab_bytes] = [polld, lab.as_path()].map(|binary| {
        fs::read(binary).map_err(|e| {
            TestbedError::Failed(format!(
                "cannot read {} for the guest: {e}; the guest needs polld and polld-lab from \
                 the same build, side by side",
                binary.display()
            ))
        })
    });
    let (polld_bytes, lab_bytes) = (polld_bytes?, lab_bytes?);
    let chrt = Path::new(CHRT);
    if !chrt.is_file() {
        return Err(TestbedError::MissingTool {
            program: "chrt".into(),
            package: "util-linux".into(),
        });
    }
    let mut libs = libraries(polld)?;
    libs.extend(libraries(&lab)?);
    libs.extend(libraries(chrt)?);
    libs.sort();
    libs.dedup();
    let modules = module_files(&kernel, &MODULES)?;
    let names: Vec<String> = modules.iter().map(|m| module_name(m)).collect();
    let init = init_script(&names);

    // The cache key: everything the image is made of.
    let mut key = Fnv::new();
    key.add(&polld_bytes);
    key.add(&lab_bytes);
    key.add(kernel.release.as_bytes());
    key.add(init.as_bytes());
    for path in libs.iter().chain(&modules).chain([
        &kernel.image,
        &busybox.to_path_buf(),
        &chrt.to_path_buf(),
    ]) {
        key.add(path.to_string_lossy().as_bytes());
        if let Ok(meta) = fs::metadata(path) {
            key.add(&meta.len().to_le_bytes());
            key.add(&meta.modified().map_or(0, mtime_ns).to_le_bytes());
        }
    }
    let initramfs = Path::new(CACHE_DIR).join(format!("initramfs-{:016x}.cpio", key.0));
    if initramfs.is_file() {
        return Ok(Image {
            kernel,
            initramfs,
            built: false,
        });
    }

    let mut cpio = Cpio::default();
    for dir in [
        "bin",
        "sbin",
        "usr",
        "usr/bin",
        "usr/sbin",
        "lib",
        "lib/modules",
        "proc",
        "sys",
        "dev",
        "tmp",
        "run",
        "etc",
        "root",
    ] {
        cpio.dir(dir);
    }
    cpio.char_device("dev/console", 5, 1);
    cpio.file("init", 0o755, init.as_bytes());
    cpio.file("bin/busybox", 0o755, &read(busybox)?);
    cpio.file(GUEST_POLLD.trim_start_matches('/'), 0o755, &polld_bytes);
    cpio.file(GUEST_LAB.trim_start_matches('/'), 0o755, &lab_bytes);
    cpio.file(CHRT.trim_start_matches('/'), 0o755, &read(chrt)?);
    for lib in &libs {
        let inside = lib.to_string_lossy().trim_start_matches('/').to_string();
        cpio.parents(&inside);
        cpio.file(&inside, 0o755, &read(lib)?);
    }
    for (name, path) in names.iter().zip(&modules) {
        cpio.file(&format!("lib/modules/{name}.ko"), 0o644, &read(path)?);
    }
    let bytes = cpio.finish();

    fs::create_dir_all(CACHE_DIR)
        .map_err(|e| TestbedError::Failed(format!("cannot create {CACHE_DIR}: {e}")))?;
    prune_cache();
    let partial = initramfs.with_extension(format!("partial.{}", std::process::id()));
    fs::File::create(&partial)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| fs::rename(&partial, &initramfs))
        .map_err(|e| {
            let _ = fs::remove_file(&partial);
            TestbedError::Failed(format!("cannot write {}: {e}", initramfs.display()))
        })?;
    Ok(Image {
        kernel,
        initramfs,
        built: true,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TestbedError> {
    fs::read(path).map_err(|e| TestbedError::Failed(format!("cannot read {}: {e}", path.display())))
}

fn mtime_ns(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Removes cached images not used for a day (each polld build leaves one).
fn prune_cache() {
    const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
    let Ok(dir) = fs::read_dir(CACHE_DIR) else {
        return;
    };
    for entry in dir.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > DAY);
        if old {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// FNV-1a, 64 bits: a stable hash for the cache key (the same on every build of polld).
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// A `newc` cpio archive, as the kernel's initramfs unpacker reads it.
#[derive(Default)]
struct Cpio {
    bytes: Vec<u8>,
    inode: u32,
    dirs: BTreeSet<String>,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.inode += 1;
        let fields = [
            self.inode,
            mode,
            0,
            0,
            if mode & 0o040000 != 0 { 2 } else { 1 },
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.bytes.extend_from_slice(b"070701");
        for field in fields {
            self.bytes
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    fn dir(&mut self, name: &str) {
        if self.dirs.insert(name.to_string()) {
            self.entry(name, 0o040755, (0, 0), &[]);
        }
    }

    /// The directories above `path`, outermost first.
    fn parents(&mut self, path: &str) {
        let parts: Vec<&str> = path.split('/').collect();
        for end in 1..parts.len() {
            self.dir(&parts[..end].join("/"));
        }
    }

    fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, (0, 0), data);
    }

    fn char_device(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, 0o020600, (major, minor), &[]);
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpio_archive_lists_its_entries_to_cpio() {
        let mut cpio = Cpio::default();
        cpio.parents("lib/x86_64-linux-gnu/libc.so.6");
        cpio.file("lib/x86_64-linux-gnu/libc.so.6", 0o755, b"hello");
        cpio.char_device("console", 5, 1);
        let bytes = cpio.finish();
        assert_eq!(bytes.len() % 4, 0);
        let Ok(mut child) = std::process::Command::new("cpio")
            .args(["-t", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            eprintln!("skipped: no cpio to read the archive back");
            return;
        };
        child.stdin.take().unwrap().write_all(&bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "lib\nlib/x86_64-linux-gnu\nlib/x86_64-linux-gnu/libc.so.6\nconsole\n"
        );
    }

    #[test]
    fn kernel_releases_sort_by_their_numbers() {
        let mut releases = [
            "6.1.0-56-cloud-amd64",
            "6.1.0-9-cloud-amd64",
            "6.12.1-cloud-amd64",
        ];
        releases.sort_by_key(|r| version_key(r));
        assert_eq!(
            releases,
            [
                "6.1.0-9-cloud-amd64",
                "6.1.0-56-cloud-amd64",
                "6.12.1-cloud-amd64"
            ]
        );
    }

    #[test]
    fn modules_come_after_what_they_depend_on() {
        let dir = std::env::temp_dir().join(format!("polld-modules-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("modules.dep"),
            "kernel/virtio.ko: kernel/virtio_ring.ko\nkernel/virtio_ring.ko:\n\
             kernel/failover.ko:\nkernel/virtio_net.ko: kernel/failover.ko kernel/virtio.ko \
             kernel/virtio_ring.ko\n",
        )
        .unwrap();
        let kernel = Kernel {
            release: "test".into(),
            image: dir.join("vmlinuz"),
            modules: dir.clone(),
        };
        let files = module_files(&kernel, &["virtio_net", "virtio"]).unwrap();
        let names: Vec<String> = files.iter().map(|f| module_name(f)).collect();
        assert_eq!(names, ["failover", "virtio_ring", "virtio", "virtio_net"]);
        let err = module_files(&kernel, &["e1000"]).unwrap_err().to_string();
        assert!(err.contains("no module e1000.ko"), "{err}");
        let init = init_script(&names);
        assert!(
            init.contains("/lib/modules/virtio_ring.ko /lib/modules/virtio.ko"),
            "{init}"
        );
        assert!(
            init.contains("/usr/bin/polld-lab testbed guest-agent"),
            "{init}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}
