//! The VM testbed (`polld testbed up --devices vm`): the forwarder is a qemu guest with
//! two virtio-net NICs, so polld meets a real driver, its interrupts and its NAPI.
//!
//! ```text
//!   gen (host netns)            qemu guest (1 vCPU)              sink (host netns)
//!   tap0 10.0.1.1  =virtio-net=  eth0 10.0.1.2   polld
//!                                eth1 10.0.2.1  =virtio-net=  tap1 10.0.2.2
//! ```
//!
//! - The guest boots a Debian kernel with an initramfs of busybox, the virtio modules and
//!   a polld binary (this one, or `--polld PATH` / `POLLD_VM_POLLD`), see [`image`].
//! - qemu opens two persistent TAPs made in the host namespace under names derived from
//!   the prefix; once the guest answers, they move into gen and sink as `tap0` and `tap1`
//!   and get the TAP testbed's MACs, addresses, neighbours and routes. The NICs have the
//!   MACs of veth1 and veth2, so eth0 is `virtio0` and eth1 `virtio1` in the guest's
//!   `/proc/interrupts` (`virtio0-input.0`, ...).
//! - In the guest eth0 and eth1 have their addresses, static neighbours for gen, sink and
//!   the unowned destination, ip_forward 0 (1 with `--kernel-forwarding`), rp_filter and
//!   IPv6 off, as fwd on the veth testbed.
//! - KVM is used when the CPU has vmx/svm and `/dev/kvm` opens and the guest then boots
//!   in time; otherwise software emulation (TCG). [`GuestState::accel`] says which and why.
//! - Commands run in the guest through an agent on a virtio-serial port ([`agent`]):
//!   `polld testbed exec -- CMD...`.
//! - Everything about a guest is in its state directory [`state_dir`]: `guest.json`
//!   ([`GuestState`]), `qemu.pid`, `console.log` (the guest's serial console), the agent's
//!   socket. `down` stops qemu (by the pid it wrote, after checking its command line).

pub mod agent;
pub mod demo;
pub mod guest;
pub mod image;
pub(crate) mod state;
mod status;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde::{Deserialize, Serialize};

use crate::layout::Layout;
use crate::sys;
use crate::TestbedError;
pub use agent::Response;
pub use state::{console_tail, guest_name, guest_state, state_dir, GuestState};
use state::{save, STATE_ROOT};
pub use status::{guest_status, GuestStatus};

/// The guest's memory, MiB.
const MEMORY_MIB: u32 = 768;

/// How long a guest may take to answer after qemu started, under TCG and KVM.
const BOOT_TIMEOUT_TCG: Duration = Duration::from_secs(180);
const BOOT_TIMEOUT_KVM: Duration = Duration::from_secs(30);

/// Which accelerator qemu uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM if it works here, else software emulation.
    #[default]
    Auto,
    /// KVM only: fail if it does not work.
    Kvm,
    /// Software emulation (TCG) only.
    Tcg,
}

/// How the guest is built and booted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmOptions {
    /// The polld binary put in the guest, with polld-lab from the same directory.
    pub polld: PathBuf,
    pub accel: Accel,
}

impl Default for VmOptions {
    /// `POLLD_VM_POLLD` if set, else this executable; accelerator `auto`.
    fn default() -> VmOptions {
        let polld = std::env::var_os("POLLD_VM_POLLD")
            .map(PathBuf::from)
            .unwrap_or_else(crate::process::current_polld);
        VmOptions {
            polld,
            accel: Accel::Auto,
        }
    }
}

/// The host TAP names for `prefix`: short (IFNAMSIZ) and unique per prefix.
fn host_tap_names(prefix: &str) -> [String; 2] {
    let mut hash: u32 = 0x811c_9dc5;
    for b in prefix.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    [format!("pv{hash:08x}g"), format!("pv{hash:08x}s")]
}

/// Builds the image, boots the guest on TAPs that then move into gen and sink, and
/// configures both sides. The namespaces of `layout` must exist. On failure the guest
/// and its TAPs are gone again.
pub(crate) fn boot(
    layout: &Layout,
    options: &VmOptions,
    kernel_forwarding: bool,
    warnings: &mut Vec<String>,
) -> Result<GuestState, TestbedError> {
    let qemu = "qemu-system-x86_64";
    if sys::output(qemu, &["-version"]).is_err() {
        return Err(TestbedError::MissingTool {
            program: qemu.into(),
            package: "qemu-system-x86".into(),
        });
    }
    let prefix = &layout.prefix;
    let dir = state_dir(prefix);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)
        .map_err(|e| TestbedError::Failed(format!("cannot create {}: {e}", dir.display())))?;
    // The guest gets its own copies, so a rebuild of the binaries cannot change what runs:
    // polld, and polld-lab from beside it (the guest's agent).
    let polld = dir.join("polld");
    let copied = [
        ("polld", options.polld.clone()),
        ("polld-lab", options.polld.with_file_name("polld-lab")),
    ]
    .iter()
    .try_for_each(|(name, binary)| {
        fs::copy(binary, dir.join(name)).map(drop).map_err(|e| {
            TestbedError::Failed(format!(
                "cannot copy the {name} binary {} for the guest: {e}",
                binary.display()
            ))
        })
    });
    let booted = copied.and_then(|_| image::image(&polld)).and_then(|image| {
        let taps = host_tap_names(prefix);
        for tap in &taps {
            let _ = sys::run("ip", &["link", "del", tap]);
            sys::run("ip", &["tuntap", "add", "dev", tap, "mode", "tap"])?;
        }
        let (accel, reason) = choose_accel(options.accel)?;
        let started = Instant::now();
        let mut state = GuestState {
            pid: 0,
            accel: accel.to_string(),
            accel_reason: reason,
            boot_ms: 0,
            kernel: image.kernel.release.clone(),
            initramfs: image.initramfs.clone(),
            initramfs_built: image.built,
            polld: polld.clone(),
            console_log: dir.join("console.log"),
            memory_mib: MEMORY_MIB,
            host_taps: taps,
        };
        state.pid = start_qemu(layout, &image, &state)?;
        save(prefix, &state)?;
        let timeout = if accel == "kvm" {
            BOOT_TIMEOUT_KVM
        } else {
            BOOT_TIMEOUT_TCG
        };
        match wait_for_agent(prefix, state.pid, timeout) {
            Ok(()) => {}
            Err(e) if accel == "kvm" && options.accel == Accel::Auto => {
                // KVM that opens but does not run a guest: fall back to TCG.
                kill_qemu(prefix, state.pid);
                state.accel = "tcg".into();
                state.accel_reason =
                    format!("KVM did not boot the guest ({e}): software emulation");
                let _ = fs::remove_file(&state.console_log);
                state.pid = start_qemu(layout, &image, &state)?;
                save(prefix, &state)?;
                wait_for_agent(prefix, state.pid, BOOT_TIMEOUT_TCG)?;
            }
            Err(e) => return Err(e),
        }
        state.boot_ms = started.elapsed().as_millis() as u64;
        save(prefix, &state)?;
        Ok(state)
    });
    let configured = booted.and_then(|state| {
        place_taps(layout, &state.host_taps)?;
        crate::links::configure_links(layout)?;
        configure_guest(layout, kernel_forwarding, warnings)?;
        Ok(state)
    });
    if configured.is_err() {
        let _ = stop(prefix);
    }
    configured
}

/// The accelerator for `wanted`, and why.
fn choose_accel(wanted: Accel) -> Result<(&'static str, String), TestbedError> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has_vt = flags.split_whitespace().any(|f| f == "vmx" || f == "svm");
    let kvm_open = fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| e.to_string());
    let kvm = match (has_vt, kvm_open) {
        (true, Ok(_)) => Ok(()),
        (false, _) => Err("the CPU has no vmx/svm (/proc/cpuinfo)".to_string()),
        (true, Err(e)) => Err(format!("/dev/kvm: {e}")),
    };
    match (wanted, kvm) {
        (Accel::Tcg, _) => Ok(("tcg", "software emulation, as asked (--accel tcg)".into())),
        (Accel::Kvm | Accel::Auto, Ok(())) => Ok(("kvm", "KVM (/dev/kvm, vmx/svm)".into())),
        (Accel::Kvm, Err(why)) => Err(TestbedError::Failed(format!(
            "KVM does not work here: {why}; use `--accel tcg` (software emulation)"
        ))),
        (Accel::Auto, Err(why)) => Ok(("tcg", format!("no KVM ({why}): software emulation"))),
    }
}

/// Starts qemu daemonized; returns its pid.
fn start_qemu(
    layout: &Layout,
    image: &image::Image,
    state: &GuestState,
) -> Result<u32, TestbedError> {
    let dir = state_dir(&layout.prefix);
    let pidfile = dir.join("qemu.pid");
    let socket = dir.join("agent.sock");
    let _ = fs::remove_file(&pidfile);
    let _ = fs::remove_file(&socket);
    let path = |p: &Path| p.to_string_lossy().into_owned();
    let mut args: Vec<String> = vec![
        "-name".into(),
        format!("polld-{}", guest_name(&layout.prefix)),
        "-accel".into(),
        state.accel.clone(),
        "-cpu".into(),
        if state.accel == "kvm" { "host" } else { "max" }.into(),
        "-smp".into(),
        "1".into(),
        "-m".into(),
        state.memory_mib.to_string(),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-serial".into(),
        format!("file:{}", path(&state.console_log)),
        "-kernel".into(),
        path(&image.kernel.image),
        "-initrd".into(),
        path(&image.initramfs),
        "-append".into(),
        "console=ttyS0 panic=-1 net.ifnames=0 rdinit=/init".into(),
    ];
    // The NICs first, so that they are virtio0 (eth0) and virtio1 (eth1).
    for (i, (tap, iface)) in state
        .host_taps
        .iter()
        .zip([&layout.veth1, &layout.veth2])
        .enumerate()
    {
        args.push("-netdev".into());
        args.push(format!("tap,id=n{i},ifname={tap},script=no,downscript=no"));
        args.push("-device".into());
        args.push(format!("virtio-net-pci,netdev=n{i},mac={}", iface.mac));
    }
    args.extend(
        [
            "-device",
            "virtio-serial-pci",
            "-chardev",
            &format!("socket,id=agent,path={},server=on,wait=off", path(&socket)),
            "-device",
            &format!("virtserialport,chardev=agent,name={}", agent::PORT_NAME),
            "-daemonize",
            "-pidfile",
            &path(&pidfile),
        ]
        .map(String::from),
    );
    let mut command = Command::new("qemu-system-x86_64");
    command.args(&args);
    // qemu outlives us (-daemonize): it must not keep the descriptors we inherited open,
    // such as the machine lock `flock` holds for its command. They close at its exec.
    polld_dev::sys::close_inherited_at_exec(&mut command);
    let out = command
        .output()
        .map_err(|e| TestbedError::Failed(format!("cannot run qemu-system-x86_64: {e}")))?;
    if !out.status.success() {
        return Err(TestbedError::Failed(format!(
            "qemu-system-x86_64 did not start the guest: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let pid = fs::read_to_string(&pidfile)
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| {
            TestbedError::Failed(format!(
                "qemu-system-x86_64 started but wrote no pid to {}",
                pidfile.display()
            ))
        })?;
    Ok(pid)
}

/// Whether `pid` is the qemu of this guest (its command line names its state directory).
pub(super) fn is_our_qemu(prefix: &str, pid: u32) -> bool {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let dir = state_dir(prefix);
    String::from_utf8_lossy(&cmdline).contains(&*dir.join("agent.sock").to_string_lossy())
}

/// Waits until the guest's agent runs a command, or fails with the console's last lines.
fn wait_for_agent(prefix: &str, pid: u32, timeout: Duration) -> Result<(), TestbedError> {
    let dir = state_dir(prefix);
    let deadline = Instant::now() + timeout;
    let not_booted = |why: String| {
        // The state directory goes with the guest; the console stays for a look.
        let kept = Path::new(STATE_ROOT).join(format!("{}.console.log", guest_name(prefix)));
        let _ = fs::copy(dir.join("console.log"), &kept);
        TestbedError::Failed(format!(
            "the guest did not boot: {why}. Its console (kept in {}) ends with:\n{}",
            kept.display(),
            console_tail(prefix, 25)
        ))
    };
    let mut client = agent::Client::connect(&dir.join("agent.sock"), &dir.join("agent.lock"))?;
    loop {
        if !is_our_qemu(prefix, pid) {
            return Err(not_booted("qemu exited".into()));
        }
        if Instant::now() >= deadline {
            return Err(not_booted(format!(
                "its agent did not answer within {} s",
                timeout.as_secs()
            )));
        }
        let probe = client.request(
            &["true".to_string()],
            "",
            Duration::from_secs(2),
            Duration::from_secs(2),
        );
        if probe.is_ok_and(|r| r.exit_code() == 0) {
            return Ok(());
        }
    }
}

/// Moves the host TAPs qemu holds into gen and sink as `tap0` and `tap1`, with their
/// MACs and addresses, up.
fn place_taps(layout: &Layout, host_taps: &[String; 2]) -> Result<(), TestbedError> {
    for (host, iface) in host_taps.iter().zip(layout.kernel_ifaces()) {
        let ns = iface.ns.as_str();
        sys::run("ip", &["link", "set", "dev", host, "netns", ns])?;
        sys::ip_in(
            ns,
            &[
                "link",
                "set",
                "dev",
                host,
                "name",
                &iface.name,
                "address",
                &iface.mac,
            ],
        )?;
        sys::ip_in(ns, &["addr", "add", &iface.cidr(), "dev", &iface.name])?;
        sys::ip_in(ns, &["link", "set", &iface.name, "up"])?;
    }
    Ok(())
}

/// The guest's side: sysctls, eth0 and eth1 up with their addresses, static neighbours.
fn configure_guest(
    layout: &Layout,
    kernel_forwarding: bool,
    warnings: &mut Vec<String>,
) -> Result<(), TestbedError> {
    let forward = u8::from(kernel_forwarding);
    let mut script = format!(
        "set -e\n\
         sysctl -qw net.ipv4.ip_forward={forward} net.ipv4.conf.all.rp_filter=0 \
         net.ipv4.conf.default.rp_filter=0\n"
    );
    for iface in [&layout.veth1, &layout.veth2] {
        let peer = layout.peer_of(iface);
        script += &format!(
            "sysctl -qw net.ipv6.conf.{name}.disable_ipv6=1 || echo 'IPv6 left on for {name}' >&2\n\
             sysctl -qw net.ipv4.conf.{name}.rp_filter=0\n\
             ip link set {name} up\n\
             ip addr add {cidr} dev {name}\n\
             arp -i {name} -s {peer_ip} {peer_mac}\n",
            name = iface.name,
            cidr = iface.cidr(),
            peer_ip = peer.addr,
            peer_mac = peer.mac,
        );
    }
    script += &format!(
        "arp -i {} -s {} {}\n",
        layout.veth2.name, layout.unowned_dst, layout.unowned_mac
    );
    let response = exec(
        &layout.prefix,
        &["sh".into(), "-c".into(), script],
        "",
        Duration::from_secs(60),
    )?;
    if response.exit_code() != 0 {
        return Err(TestbedError::Failed(format!(
            "configuring the guest's eth0 and eth1 failed: {}{}",
            response.stderr.trim(),
            response.error.as_deref().unwrap_or("")
        )));
    }
    warnings.extend(response.stderr.lines().map(|l| format!("guest: {l}")));
    Ok(())
}

/// Runs `argv` in the guest of `prefix` with `stdin`, killed after `timeout`.
pub fn exec(
    prefix: &str,
    argv: &[String],
    stdin: &str,
    timeout: Duration,
) -> Result<Response, TestbedError> {
    let dir = state_dir(prefix);
    if guest_state(prefix).is_none() {
        let flag = if prefix.is_empty() {
            String::new()
        } else {
            format!(" --prefix {prefix}")
        };
        return Err(TestbedError::Failed(format!(
            "no guest {} is up: start one with `polld testbed up --devices vm{flag}`",
            guest_name(prefix)
        )));
    }
    agent::Client::connect(&dir.join("agent.sock"), &dir.join("agent.lock"))?
        .exec(argv, stdin, timeout)
}

/// SIGTERM, then SIGKILL after 5 s, to the qemu of this guest.
fn kill_qemu(prefix: &str, pid: u32) {
    if !is_our_qemu(prefix, pid) {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    // The qemu this guest started, checked by its command line.
    sys::signal(pid, Signal::TERM);
    while is_our_qemu(prefix, pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if is_our_qemu(prefix, pid) {
        sys::signal(pid, Signal::KILL);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops the guest of `prefix` if there is one: qemu, TAPs left in the host namespace,
/// its state directory. Returns qemu's pid if it was running.
pub(crate) fn stop(prefix: &str) -> Result<Option<u32>, TestbedError> {
    let dir = state_dir(prefix);
    if !dir.exists() {
        return Ok(None);
    }
    let pid = fs::read_to_string(dir.join("qemu.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok());
    let running = pid.filter(|&pid| is_our_qemu(prefix, pid));
    if let Some(pid) = running {
        kill_qemu(prefix, pid);
    }
    for tap in host_tap_names(prefix) {
        if sys::run("ip", &["link", "show", "dev", &tap]).is_ok() {
            sys::run("ip", &["link", "del", &tap])?;
        }
    }
    fs::remove_dir_all(&dir)
        .map_err(|e| TestbedError::Failed(format!("cannot remove {}: {e}", dir.display())))?;
    Ok(running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_tap_names_fit_ifnamsiz_and_differ_by_prefix() {
        let [g, s] =
            host_tap_names("a-very-long-prefix-of-sixty-four-characters-.................");
        assert!(g.len() <= 15 && s.len() <= 15, "{g} {s}");
        assert_ne!(g, s);
        assert_ne!(host_tap_names("t1"), host_tap_names("t2"));
    }

    #[test]
    fn tcg_is_chosen_when_asked_and_kvm_refused_with_the_fix_when_missing() {
        let (accel, why) = choose_accel(Accel::Tcg).unwrap();
        assert_eq!(accel, "tcg");
        assert!(why.contains("--accel tcg"), "{why}");
        match choose_accel(Accel::Kvm) {
            Ok((accel, _)) => assert_eq!(accel, "kvm"),
            Err(e) => assert!(e.to_string().contains("use `--accel tcg`"), "{e}"),
        }
    }
}
