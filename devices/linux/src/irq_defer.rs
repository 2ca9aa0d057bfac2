//! Keeping a device's interrupt masked while polld polls it: the kernel's
//! `napi_defer_hard_irqs` and `gro_flush_timeout`, written where the kernel has them and
//! put back afterwards, even after polld was killed.
//!
//! With both set, a NAPI poll that found work does not re-enable the device's interrupt:
//! the flush timer takes the queue back only if nobody polls it for `gro_flush_timeout`.
//! Preferred busy polling ([`crate::busy_poll`]) polls it from polld's thread more often
//! than that, so the interrupt stays off. Two ways to write them ([`DeferPath`]):
//! - **netlink per-NAPI** (`napi-set` of the netdev family, Linux 6.13+): only the NAPI
//!   instance of polld's queue;
//! - **sysfs per-device** (`/sys/class/net/IF/napi_defer_hard_irqs` and
//!   `gro_flush_timeout`, Linux 5.10+, the only way on 6.1): every queue of the device.
//!
//! [`choose`] picks one (`[daemon] irq_deferral`: `auto` prefers netlink); [`Deferral`]
//! saves the old values, writes the new ones and puts the old ones back when the last
//! socket using them lets go. Every value changed is also written to a state file,
//! `/run/polld/irq-deferral.PID`, rewritten at each change: a polld killed by SIGKILL
//! cannot restore, so the next one does, first thing ([`restore_leftovers`]), for the
//! files of dead owners in its own network namespace.
//!
//! sysfs shows the interfaces of the namespace that mounted it, not the calling thread's:
//! [`SysfsDevice::check`] refuses a directory that is another namespace's interface.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::napi::{NapiSettings, Netdev};

/// Where sysfs lists network devices.
pub const SYSFS_NET: &str = "/sys/class/net";
/// Where the state files live.
pub const STATE_DIR: &str = "/run/polld";
/// State files are `irq-deferral.<pid>`.
const STATE_PREFIX: &str = "irq-deferral.";

/// Which way `[daemon] irq_deferral` asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeferChoice {
    /// Per-NAPI netlink where the kernel has it, else the device's sysfs.
    #[default]
    Auto,
    /// Per-NAPI netlink only.
    Netlink,
    /// The device's sysfs, even where per-NAPI netlink exists.
    Sysfs,
}

impl DeferChoice {
    pub fn name(self) -> &'static str {
        match self {
            DeferChoice::Auto => "auto",
            DeferChoice::Netlink => "netlink",
            DeferChoice::Sysfs => "sysfs",
        }
    }
}

/// The way the deferral is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferPath {
    Netlink,
    Sysfs,
}

impl DeferPath {
    /// As `polld ifconfig` says it.
    pub fn name(self) -> &'static str {
        match self {
            DeferPath::Netlink => "netlink per-NAPI",
            DeferPath::Sysfs => "sysfs per-device",
        }
    }

    fn word(self) -> &'static str {
        match self {
            DeferPath::Netlink => "napi",
            DeferPath::Sysfs => "sysfs",
        }
    }
}

/// The way to take, given the choice and what each way offers (`Err`: why not).
pub fn choose(
    choice: DeferChoice,
    netlink: Result<(), String>,
    sysfs: Result<(), String>,
) -> Result<DeferPath, String> {
    match (choice, netlink, sysfs) {
        (DeferChoice::Auto | DeferChoice::Netlink, Ok(()), _) => Ok(DeferPath::Netlink),
        (DeferChoice::Auto | DeferChoice::Sysfs, _, Ok(())) => Ok(DeferPath::Sysfs),
        (DeferChoice::Auto, Err(n), Err(s)) => Err(format!(
            "neither per-NAPI netlink ({n}) nor sysfs per-device ({s})"
        )),
        (DeferChoice::Netlink, Err(n), _) => Err(format!(
            "[daemon] irq_deferral = \"netlink\": {n}; set irq_deferral = \"auto\" to use \
             the device's sysfs instead"
        )),
        (DeferChoice::Sysfs, _, Err(s)) => Err(format!("[daemon] irq_deferral = \"sysfs\": {s}")),
    }
}

/// A device's directory in sysfs, and the two files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysfsDevice {
    dir: PathBuf,
    ifname: String,
}

const DEFER_FILE: &str = "napi_defer_hard_irqs";
const FLUSH_FILE: &str = "gro_flush_timeout";

impl SysfsDevice {
    /// `ifname`'s directory under `root` (normally [`SYSFS_NET`]).
    pub fn new(root: &Path, ifname: &str) -> SysfsDevice {
        SysfsDevice {
            dir: root.join(ifname),
            ifname: ifname.to_string(),
        }
    }

    /// Whether this directory is interface `ifindex` of the caller's namespace and its
    /// two files can be written; else why not, naming the device and the fix.
    pub fn check(&self, ifindex: u32) -> Result<(), String> {
        let name = &self.ifname;
        let shown = fs::read_to_string(self.dir.join("ifindex"))
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        if shown != Some(ifindex) {
            return Err(format!(
                "{} is not this namespace's {name} (sysfs shows the namespace that mounted \
                 it): start polld with `ip netns exec NS polld run ...`, which mounts \
                 the namespace's own sysfs",
                self.dir.display()
            ));
        }
        for file in [DEFER_FILE, FLUSH_FILE] {
            let path = self.dir.join(file);
            if let Err(e) = OpenOptions::new().write(true).open(&path) {
                return Err(match e.kind() {
                    io::ErrorKind::NotFound => format!(
                        "{name}: no {} (the kernel has no per-device interrupt deferral \
                         before Linux 5.10)",
                        path.display()
                    ),
                    _ => format!(
                        "{name}: cannot write {}: {e} (sysfs read-only here, or polld \
                         without CAP_NET_ADMIN: run polld as root with /sys mounted \
                         read-write)",
                        path.display()
                    ),
                });
            }
        }
        Ok(())
    }

    pub fn read(&self) -> Result<NapiSettings, String> {
        Ok(NapiSettings {
            defer_hard_irqs: self.read_number(DEFER_FILE)? as u32,
            gro_flush_timeout_ns: self.read_number(FLUSH_FILE)?,
            irq_suspend_timeout_ns: 0,
        })
    }

    pub fn write(&self, settings: &NapiSettings) -> Result<(), String> {
        self.write_number(DEFER_FILE, u64::from(settings.defer_hard_irqs))?;
        self.write_number(FLUSH_FILE, settings.gro_flush_timeout_ns)
    }

    fn read_number(&self, file: &str) -> Result<u64, String> {
        let path = self.dir.join(file);
        let text = fs::read_to_string(&path)
            .map_err(|e| format!("{}: reading {}: {e}", self.ifname, path.display()))?;
        text.trim().parse().map_err(|_| {
            format!(
                "{}: {} holds {:?}, not a number",
                self.ifname,
                path.display(),
                text.trim()
            )
        })
    }

    fn write_number(&self, file: &str, value: u64) -> Result<(), String> {
        let path = self.dir.join(file);
        fs::write(&path, value.to_string()).map_err(|e| {
            format!(
                "{}: writing {value} to {}: {e} (needs root and /sys mounted read-write)",
                self.ifname,
                path.display()
            )
        })
    }
}

/// Where a deferral is written: the device's sysfs directory, or one NAPI instance
/// through a netdev socket of the device's namespace.
#[derive(Clone, Debug)]
pub enum Writer {
    Sysfs(SysfsDevice),
    Netlink { netdev: Arc<Netdev>, napi_id: u32 },
}

impl Writer {
    pub fn path(&self) -> DeferPath {
        match self {
            Writer::Sysfs(_) => DeferPath::Sysfs,
            Writer::Netlink { .. } => DeferPath::Netlink,
        }
    }

    fn read(&self) -> Result<NapiSettings, String> {
        match self {
            Writer::Sysfs(dev) => dev.read(),
            Writer::Netlink { netdev, napi_id } => netdev
                .napi_get(*napi_id)
                .map_err(|e| e.to_string())?
                .settings
                .ok_or_else(|| {
                    format!("NAPI {napi_id}: no per-NAPI settings (needs Linux 6.13 or later)")
                }),
        }
    }

    fn write(&self, settings: &NapiSettings) -> Result<(), String> {
        match self {
            Writer::Sysfs(dev) => dev.write(settings),
            Writer::Netlink { netdev, napi_id } => netdev
                .napi_set(*napi_id, settings)
                .map_err(|e| e.to_string()),
        }
    }

    fn napi_id(&self) -> u32 {
        match self {
            Writer::Sysfs(_) => 0,
            Writer::Netlink { napi_id, .. } => *napi_id,
        }
    }
}

/// What one change is about: a device (sysfs) or a NAPI instance (netlink) of one
/// interface of one namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Target {
    path: DeferPath,
    netns: u64,
    ifname: String,
    ifindex: u32,
    napi_id: u32,
}

/// A change in force: what was there before, and how many sockets rely on it.
struct Applied {
    target: Target,
    writer: Writer,
    saved: NapiSettings,
    users: usize,
}

/// Every change this process has in force.
static APPLIED: Mutex<Vec<Applied>> = Mutex::new(Vec::new());

/// The deferral of one socket's device or NAPI; the old values come back when the last
/// [`Deferral`] of the same target is dropped.
#[derive(Debug)]
pub struct Deferral {
    target: Target,
}

impl Deferral {
    /// Writes `wanted` through `writer` for interface `ifname` (`ifindex` in the calling
    /// thread's namespace), saving the old values first, unless this process already
    /// did for the same target.
    pub fn apply(
        writer: Writer,
        ifname: &str,
        ifindex: u32,
        wanted: DeferSettings,
    ) -> Result<Deferral, String> {
        let target = Target {
            path: writer.path(),
            netns: thread_netns().unwrap_or(0),
            ifname: ifname.to_string(),
            ifindex,
            napi_id: writer.napi_id(),
        };
        let mut applied = APPLIED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = applied.iter_mut().find(|a| a.target == target) {
            a.users += 1;
            return Ok(Deferral { target });
        }
        let saved = writer.read()?;
        let settings = NapiSettings {
            defer_hard_irqs: wanted.defer_hard_irqs,
            gro_flush_timeout_ns: wanted.gro_flush_timeout_ns,
            irq_suspend_timeout_ns: saved.irq_suspend_timeout_ns,
        };
        // Recorded before the write: a kill between the two leaves a file to restore.
        applied.push(Applied {
            target: target.clone(),
            writer: writer.clone(),
            saved,
            users: 1,
        });
        record(&applied);
        if let Err(e) = writer.write(&settings) {
            // A partial sysfs write (the first file) is undone too.
            let _ = writer.write(&saved);
            applied.pop();
            record(&applied);
            return Err(e);
        }
        Ok(Deferral { target })
    }

    pub fn path(&self) -> DeferPath {
        self.target.path
    }
}

impl Drop for Deferral {
    fn drop(&mut self) {
        let mut applied = APPLIED.lock().unwrap_or_else(|e| e.into_inner());
        let Some(i) = applied.iter().position(|a| a.target == self.target) else {
            return;
        };
        applied[i].users -= 1;
        if applied[i].users > 0 {
            return;
        }
        let a = applied.remove(i);
        if let Err(e) = a.writer.write(&a.saved) {
            eprintln!(
                "polld: {}: could not restore its interrupt deferral ({}): {e}",
                a.target.ifname,
                a.target.path.name()
            );
        }
        record(&applied);
    }
}

/// What polld writes while it polls a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeferSettings {
    /// Polls that may find nothing before the interrupt is re-enabled.
    pub defer_hard_irqs: u32,
    /// How long the kernel waits for a poll before it takes the queue back, ns.
    pub gro_flush_timeout_ns: u64,
}

/// Rewrites this process's state file (removes it when nothing is changed); a failure
/// is printed, not fatal: the values are still restored on a clean exit.
fn record(applied: &[Applied]) {
    let dir = Path::new(STATE_DIR);
    let pid = std::process::id();
    let path = dir.join(format!("{STATE_PREFIX}{pid}"));
    if applied.is_empty() {
        let _ = fs::remove_file(&path);
        return;
    }
    let state = StateFile {
        pid,
        start_time: process_start_time(pid).unwrap_or(0),
        entries: applied
            .iter()
            .map(|a| SavedEntry {
                path: a.target.path,
                netns: a.target.netns,
                ifname: a.target.ifname.clone(),
                ifindex: a.target.ifindex,
                napi_id: a.target.napi_id,
                saved: a.saved,
            })
            .collect(),
    };
    let written = fs::create_dir_all(dir).and_then(|()| {
        let tmp = dir.join(format!(".{STATE_PREFIX}{pid}.tmp"));
        let mut file = fs::File::create(&tmp)?;
        file.write_all(state.render().as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, &path)
    });
    if let Err(e) = written {
        eprintln!(
            "polld: cannot record the interrupt deferral in {}: {e}; after a SIGKILL the \
             old values would not be restored",
            path.display()
        );
    }
}

/// The contents of a state file: whose it is, and what to put back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateFile {
    pub pid: u32,
    /// The owner's start time (`/proc/PID/stat`), so a reused pid is not taken for it.
    pub start_time: u64,
    pub entries: Vec<SavedEntry>,
}

/// One value changed: where, and what was there before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedEntry {
    pub path: DeferPath,
    /// The network namespace's inode.
    pub netns: u64,
    pub ifname: String,
    pub ifindex: u32,
    /// 0 for sysfs.
    pub napi_id: u32,
    pub saved: NapiSettings,
}

impl StateFile {
    /// One line per entry after the owner's:
    /// `sysfs NETNS IFNAME IFINDEX NAPI DEFER FLUSH_NS SUSPEND_NS`.
    pub fn render(&self) -> String {
        let mut text = format!(
            "# interrupt deferral changed by polld; restored by the next polld if this one is gone\n\
             owner {} {}\n",
            self.pid, self.start_time
        );
        for e in &self.entries {
            let _ = writeln!(
                text,
                "{} {} {} {} {} {} {} {}",
                e.path.word(),
                e.netns,
                e.ifname,
                e.ifindex,
                e.napi_id,
                e.saved.defer_hard_irqs,
                e.saved.gro_flush_timeout_ns,
                e.saved.irq_suspend_timeout_ns
            );
        }
        text
    }

    pub fn parse(text: &str) -> Result<StateFile, String> {
        let mut owner = None;
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("line {}: {line:?}", n + 1);
            let num = |w: &str| w.parse::<u64>().map_err(|_| bad());
            match words.as_slice() {
                [] => {}
                [first, ..] if first.starts_with('#') => {}
                ["owner", pid, start] => owner = Some((num(pid)? as u32, num(start)?)),
                [path, netns, ifname, ifindex, napi, defer, flush, suspend] => {
                    let path = match *path {
                        "sysfs" => DeferPath::Sysfs,
                        "napi" => DeferPath::Netlink,
                        _ => return Err(bad()),
                    };
                    entries.push(SavedEntry {
                        path,
                        netns: num(netns)?,
                        ifname: ifname.to_string(),
                        ifindex: num(ifindex)? as u32,
                        napi_id: num(napi)? as u32,
                        saved: NapiSettings {
                            defer_hard_irqs: num(defer)? as u32,
                            gro_flush_timeout_ns: num(flush)?,
                            irq_suspend_timeout_ns: num(suspend)?,
                        },
                    });
                }
                _ => return Err(bad()),
            }
        }
        let (pid, start_time) = owner.ok_or("no owner line")?;
        Ok(StateFile {
            pid,
            start_time,
            entries,
        })
    }
}

/// What the next polld does with a state file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leftover {
    /// Its owner still runs (or is this process): not ours to touch.
    Owned,
    /// Restore the entries of this namespace; the others belong to another namespace,
    /// whose next polld restores them.
    Restore {
        here: Vec<SavedEntry>,
        elsewhere: Vec<SavedEntry>,
    },
}

/// Decides about `state`: `start_time_of` gives a running process's start time.
pub fn leftover(
    state: &StateFile,
    own_pid: u32,
    netns: u64,
    start_time_of: impl Fn(u32) -> Option<u64>,
) -> Leftover {
    let alive = state.pid == own_pid || start_time_of(state.pid) == Some(state.start_time);
    if alive {
        return Leftover::Owned;
    }
    let (here, elsewhere) = state
        .entries
        .iter()
        .cloned()
        .partition(|e| e.netns == netns);
    Leftover::Restore { here, elsewhere }
}

/// Puts `entry`'s values back if its interface is still the one changed (`ifindex_of`:
/// the index of a name in this namespace); says what it did.
pub fn restore_entry(
    entry: &SavedEntry,
    sysfs_root: &Path,
    ifindex_of: impl Fn(&str) -> Option<u32>,
) -> String {
    let name = &entry.ifname;
    if ifindex_of(name) != Some(entry.ifindex) {
        return format!("{name}: gone since, nothing to restore");
    }
    let restored = match entry.path {
        DeferPath::Sysfs => {
            let dev = SysfsDevice::new(sysfs_root, name);
            dev.check(entry.ifindex)
                .and_then(|()| dev.write(&entry.saved))
        }
        DeferPath::Netlink => Netdev::open()
            .map_err(|e| e.to_string())
            .and_then(|netdev| {
                let napi = netdev.napi_get(entry.napi_id).map_err(|e| e.to_string())?;
                if napi.ifindex != entry.ifindex {
                    return Err(format!("NAPI {} is no longer {name}'s", entry.napi_id));
                }
                netdev
                    .napi_set(entry.napi_id, &entry.saved)
                    .map_err(|e| e.to_string())
            }),
    };
    match restored {
        Ok(()) => format!(
            "{name}: restored napi_defer_hard_irqs {} and gro_flush_timeout {} ns ({}{})",
            entry.saved.defer_hard_irqs,
            entry.saved.gro_flush_timeout_ns,
            entry.path.name(),
            if entry.napi_id != 0 {
                format!(", NAPI {}", entry.napi_id)
            } else {
                String::new()
            }
        ),
        Err(e) => format!("{name}: could not restore its interrupt deferral: {e}"),
    }
}

/// At start, before any device is opened: restores what polld processes that are gone
/// (killed) left changed in this namespace, and removes their state files. Returns one
/// line per thing done, for the log.
pub fn restore_leftovers() -> Vec<String> {
    restore_leftovers_in(Path::new(STATE_DIR), Path::new(SYSFS_NET), |name| {
        crate::napi::ifindex(name).ok()
    })
}

/// [`restore_leftovers`] with its directories and interface lookup given.
pub fn restore_leftovers_in(
    dir: &Path,
    sysfs_root: &Path,
    ifindex_of: impl Fn(&str) -> Option<u32>,
) -> Vec<String> {
    let Ok(files) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let netns = thread_netns().unwrap_or(0);
    let mut log = Vec::new();
    for file in files.flatten() {
        let path = file.path();
        let is_state = file
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(STATE_PREFIX));
        if !is_state {
            continue;
        }
        let state = match fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| StateFile::parse(&text))
        {
            Ok(state) => state,
            Err(e) => {
                log.push(format!("{}: unreadable, left as is: {e}", path.display()));
                continue;
            }
        };
        let Leftover::Restore { here, elsewhere } =
            leftover(&state, std::process::id(), netns, process_start_time)
        else {
            continue;
        };
        for entry in &here {
            log.push(format!(
                "{} (polld {} gone): {}",
                path.display(),
                state.pid,
                restore_entry(entry, sysfs_root, &ifindex_of)
            ));
        }
        if elsewhere.is_empty() {
            let _ = fs::remove_file(&path);
        } else {
            let rest = StateFile {
                entries: elsewhere,
                ..state
            };
            let _ = fs::write(&path, rest.render());
            log.push(format!(
                "{}: {} change(s) in other network namespaces left for a polld started there",
                path.display(),
                rest.entries.len()
            ));
        }
    }
    log
}

/// The calling thread's network namespace, by the inode of its handle.
pub fn thread_netns() -> Option<u64> {
    fs::metadata("/proc/thread-self/ns/net")
        .ok()
        .map(|m| m.ino())
}

/// A running process's start time, in clock ticks since boot (`/proc/PID/stat` field 22).
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

fn parse_start_time(stat: &str) -> Option<u64> {
    // After the command's closing parenthesis: state is field 3, starttime field 22.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: DeferPath, netns: u64, ifname: &str) -> SavedEntry {
        SavedEntry {
            path,
            netns,
            ifname: ifname.into(),
            ifindex: 2,
            napi_id: if path == DeferPath::Netlink { 8193 } else { 0 },
            saved: NapiSettings {
                defer_hard_irqs: 0,
                gro_flush_timeout_ns: 20_000,
                irq_suspend_timeout_ns: 0,
            },
        }
    }

    #[test]
    fn auto_prefers_netlink_and_falls_back_to_sysfs_and_says_why_not() {
        let ok = || Ok(());
        let no = |why: &str| Err(why.to_string());
        assert_eq!(
            choose(DeferChoice::Auto, ok(), ok()),
            Ok(DeferPath::Netlink)
        );
        // Linux 6.1: no per-NAPI settings.
        assert_eq!(
            choose(DeferChoice::Auto, no("before 6.13"), ok()),
            Ok(DeferPath::Sysfs)
        );
        assert_eq!(choose(DeferChoice::Sysfs, ok(), ok()), Ok(DeferPath::Sysfs));
        let neither = choose(DeferChoice::Auto, no("before 6.13"), no("eth0: read-only"));
        assert_eq!(
            neither,
            Err(
                "neither per-NAPI netlink (before 6.13) nor sysfs per-device (eth0: read-only)"
                    .into()
            )
        );
        let forced = choose(DeferChoice::Netlink, no("before 6.13"), ok()).unwrap_err();
        assert!(forced.contains("irq_deferral = \"auto\""), "{forced}");
        let forced = choose(DeferChoice::Sysfs, ok(), no("eth0: read-only")).unwrap_err();
        assert!(forced.contains("eth0: read-only"), "{forced}");
    }

    fn state(pid: u32, start_time: u64, entries: Vec<SavedEntry>) -> StateFile {
        StateFile {
            pid,
            start_time,
            entries,
        }
    }

    #[test]
    fn a_state_file_round_trips_and_refuses_garbage() {
        let netns = 4026531840;
        let entries = vec![
            entry(DeferPath::Sysfs, netns, "eth0"),
            entry(DeferPath::Netlink, netns, "eth1"),
        ];
        let state = state(4242, 987_654, entries);
        assert_eq!(StateFile::parse(&state.render()), Ok(state));
        assert!(StateFile::parse("sysfs 1 eth0 2 0 0 0 0\n")
            .unwrap_err()
            .contains("owner"));
        assert!(StateFile::parse("owner 1 2\nbogus 1 eth0 2 0 0 0 0\n")
            .unwrap_err()
            .contains("line 2"));
    }

    #[test]
    fn only_a_dead_owner_s_changes_in_this_namespace_are_restored() {
        let entries = vec![
            entry(DeferPath::Sysfs, 7, "eth0"),
            entry(DeferPath::Sysfs, 8, "eth1"),
        ];
        let state = state(4242, 100, entries);
        // Alive: the pid runs with the same start time.
        assert_eq!(leftover(&state, 1, 7, |_| Some(100)), Leftover::Owned);
        // This process's own file.
        assert_eq!(leftover(&state, 4242, 7, |_| None), Leftover::Owned);
        // Gone, or the pid reused by a later process.
        for start in [None, Some(555)] {
            assert_eq!(
                leftover(&state, 1, 7, |_| start),
                Leftover::Restore {
                    here: vec![state.entries[0].clone()],
                    elsewhere: vec![state.entries[1].clone()],
                }
            );
        }
    }

    /// A directory laid out as sysfs shows a device.
    fn fake_sysfs(ifname: &str, ifindex: u32, defer: u32, flush: u64) -> tempdir::Dir {
        let root = tempdir::Dir::new();
        let dev = root.path().join(ifname);
        fs::create_dir(&dev).unwrap();
        fs::write(dev.join("ifindex"), format!("{ifindex}\n")).unwrap();
        fs::write(dev.join(DEFER_FILE), format!("{defer}\n")).unwrap();
        fs::write(dev.join(FLUSH_FILE), format!("{flush}\n")).unwrap();
        root
    }

    #[test]
    fn a_killed_polld_s_sysfs_values_come_back_at_the_next_start() {
        // The killed polld had set 2 and 2 ms; before, 0 and 20 µs.
        let sysfs = fake_sysfs("eth0", 2, 2, 2_000_000);
        let state_dir = tempdir::Dir::new();
        let here = entry(DeferPath::Sysfs, thread_netns().unwrap(), "eth0");
        let dead = state(u32::MAX - 1, 1, vec![here]); // no such process
        let file = state_dir.path().join(format!("{STATE_PREFIX}{}", dead.pid));
        fs::write(&file, dead.render()).unwrap();
        let log = restore_leftovers_in(state_dir.path(), sysfs.path(), |n| {
            (n == "eth0").then_some(2)
        });
        assert_eq!(log.len(), 1, "{log:?}");
        assert!(log[0].contains("eth0: restored napi_defer_hard_irqs 0 and gro_flush_timeout 20000 ns (sysfs per-device)"), "{log:?}");
        let dev = SysfsDevice::new(sysfs.path(), "eth0");
        assert_eq!(
            dev.read().unwrap(),
            entry(DeferPath::Sysfs, 0, "eth0").saved
        );
        assert!(!file.exists(), "the state file is removed once restored");
        // An interface since replaced (another index) is left alone.
        let log = restore_entry(&dead.entries[0], sysfs.path(), |_| Some(3));
        assert_eq!(log, "eth0: gone since, nothing to restore");
    }

    #[test]
    fn sysfs_of_another_namespace_or_without_the_files_is_refused_with_the_fix() {
        let sysfs = fake_sysfs("eth0", 2, 0, 0);
        let dev = SysfsDevice::new(sysfs.path(), "eth0");
        assert_eq!(dev.check(2), Ok(()));
        let other = dev.check(5).unwrap_err();
        assert!(other.contains("ip netns exec"), "{other}");
        fs::remove_file(sysfs.path().join("eth0").join(FLUSH_FILE)).unwrap();
        let old_kernel = dev.check(2).unwrap_err();
        assert!(
            old_kernel.contains("eth0: no ") && old_kernel.contains("5.10"),
            "{old_kernel}"
        );
        let garbage = SysfsDevice::new(sysfs.path(), "eth0");
        fs::write(sysfs.path().join("eth0").join(FLUSH_FILE), "x\n").unwrap();
        assert!(garbage.read().unwrap_err().contains("not a number"));
    }

    #[test]
    fn the_start_time_is_field_22_even_with_spaces_in_the_command() {
        let stat = "812 (napi/veth 1) S 2 0 0 0 -1 2129984 0 0 0 0 0 7 0 0 20 0 1 0 4567 0 0";
        assert_eq!(parse_start_time(stat), Some(4567));
        assert!(process_start_time(std::process::id()).is_some());
    }

    /// A temporary directory, removed on drop.
    mod tempdir {
        use std::path::{Path, PathBuf};
        use std::sync::atomic::{AtomicU32, Ordering};

        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                static N: AtomicU32 = AtomicU32::new(0);
                let path = std::env::temp_dir().join(format!(
                    "polld-irq-defer-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
