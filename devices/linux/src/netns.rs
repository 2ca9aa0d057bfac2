//! Network namespaces and veth pairs for tests, the testbed and `--netns`.
//!
//! [`Netns`] owns a namespace it created and deletes it when dropped, also when a test
//! panics, so tests leave nothing behind. [`enter`] moves the calling thread into an
//! existing namespace; [`in_netns`] runs a closure on a fresh thread inside one.

use std::fmt;
use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// An error from a namespace operation, naming the command or file that failed.
#[derive(Debug)]
pub struct NetnsError(pub String);

impl fmt::Display for NetnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NetnsError {}

pub type Result<T> = std::result::Result<T, NetnsError>;

/// Runs `ip ARGS`, turning a failure into an error that quotes the command and its stderr.
pub fn ip(args: &[&str]) -> Result<String> {
    run("ip", args)
}

/// Runs a command to completion; a non-zero exit is an error quoting the command line.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(program).args(args).output().map_err(|e| {
        NetnsError(format!(
            "cannot run `{program}`: {e} (is iproute2 installed?)"
        ))
    })?;
    if !out.status.success() {
        return Err(NetnsError(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A network namespace this process created; deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace named `{prefix}-{pid}-{n}`, unique across concurrent tests,
    /// with its loopback up.
    pub fn create(prefix: &str) -> Result<Netns> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Netns::create_named(&name)
    }

    /// Creates a namespace with exactly this name.
    pub fn create_named(name: &str) -> Result<Netns> {
        ip(&["netns", "add", name])?;
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip ARGS` inside this namespace.
    pub fn ip(&self, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Runs a program inside this namespace (`ip netns exec`).
    pub fn exec(&self, program: &str, args: &[&str]) -> Result<String> {
        let mut full = vec!["netns", "exec", self.name.as_str(), program];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// A `Command` that will run `program` inside this namespace, for processes
    /// that must run in the background (iperf3 servers, polld itself).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str(), program]);
        c
    }

    /// Writes a sysctl inside this namespace (`net.ipv4.ip_forward=1`).
    pub fn sysctl(&self, assignment: &str) -> Result<()> {
        self.exec("sysctl", &["-qw", assignment]).map(drop)
    }

    /// Gives up ownership: the namespace is no longer deleted on drop.
    pub fn into_name(self) -> String {
        let name = self.name.clone();
        std::mem::forget(self);
        name
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace also deletes the veth ends inside it.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// One end of a veth pair: the namespace it lives in, its name, MAC and IPv4 address/prefix.
#[derive(Clone, Copy, Debug)]
pub struct VethEnd<'a> {
    pub ns: &'a Netns,
    pub name: &'a str,
    pub mac: &'a str,
    pub addr: Option<&'a str>,
}

/// Creates a veth pair between two namespaces, sets MACs, addresses, and brings both up.
pub fn veth_pair(a: VethEnd<'_>, b: VethEnd<'_>) -> Result<()> {
    ip(&[
        "link",
        "add",
        a.name,
        "netns",
        a.ns.name(),
        "type",
        "veth",
        "peer",
        "name",
        b.name,
        "netns",
        b.ns.name(),
    ])?;
    for end in [a, b] {
        end.ns.ip(&["link", "set", end.name, "address", end.mac])?;
        if let Some(addr) = end.addr {
            end.ns.ip(&["addr", "add", addr, "dev", end.name])?;
        }
        end.ns.ip(&["link", "set", end.name, "up"])?;
    }
    Ok(())
}

/// Whether this process runs as root: namespaces, raw sockets and BPF need it, so the
/// integration tests that use them skip (saying so) without it.
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Moves the calling thread into the namespace `name` (as `ip netns exec` would).
pub fn enter(name: &str) -> Result<()> {
    let path = format!("/var/run/netns/{name}");
    let file = File::open(&path).map_err(|e| {
        NetnsError(format!(
            "network namespace `{name}` not found ({path}: {e}); list them with `ip netns list`"
        ))
    })?;
    let network = Some(rustix::thread::LinkNameSpaceType::Network);
    rustix::thread::move_into_link_name_space(file.as_fd(), network).map_err(|e| {
        NetnsError(format!(
            "cannot enter network namespace `{name}`: {} (needs CAP_SYS_ADMIN: run as root)",
            std::io::Error::from(e)
        ))
    })
}

/// The inode number of the initial network namespace (`PROC_NET_INIT_INO`, fixed by the
/// kernel).
const INIT_NET_INO: u64 = 0xEFFF_FFF9;

/// The calling thread's network namespace in words, for messages: "network namespace
/// `fwd`" for a named one (/var/run/netns), "the host's network namespace" for the
/// initial one.
pub fn describe_current() -> String {
    use std::os::unix::fs::MetadataExt;
    let id = |path: &std::path::Path| std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
    let Some(current) = id("/proc/thread-self/ns/net".as_ref()) else {
        return "the current network namespace".to_string();
    };
    if current.1 == INIT_NET_INO {
        return "the host's network namespace".to_string();
    }
    let named = std::fs::read_dir("/var/run/netns").ok().and_then(|dir| {
        dir.flatten()
            .find(|e| id(&e.path()) == Some(current))
            .map(|e| e.file_name().to_string_lossy().into_owned())
    });
    match named {
        Some(name) => format!("network namespace `{name}`"),
        None => "the current (unnamed) network namespace".to_string(),
    }
}

/// Runs `f` on a new thread inside namespace `name` and returns its result.
pub fn in_netns<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T> {
    let name = name.to_string();
    std::thread::spawn(move || -> Result<T> {
        enter(&name)?;
        Ok(f())
    })
    .join()
    .map_err(|_| NetnsError("thread inside the namespace panicked".into()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_created_connected_and_removed() {
        polld_testsupport::require_root!("needs root to create namespaces");
        let a = Netns::create("pt-a").unwrap();
        let b = Netns::create("pt-b").unwrap();
        let name_a = a.name().to_string();
        veth_pair(
            VethEnd {
                ns: &a,
                name: "va",
                mac: "02:00:00:00:aa:01",
                addr: Some("10.99.0.1/24"),
            },
            VethEnd {
                ns: &b,
                name: "vb",
                mac: "02:00:00:00:aa:02",
                addr: Some("10.99.0.2/24"),
            },
        )
        .unwrap();
        a.exec("ping", &["-c", "1", "-W", "2", "10.99.0.2"])
            .unwrap();
        let index_inside = in_netns(a.name(), || crate::iface::index_here("va"));
        assert!(
            index_inside.unwrap().is_ok(),
            "va is visible inside its namespace"
        );
        drop(a);
        assert!(!ip(&["netns", "list"]).unwrap().contains(&name_a));
    }

    #[test]
    fn entering_a_missing_namespace_names_it() {
        let err = in_netns("polld-no-such-ns", || ()).unwrap_err();
        assert!(err.0.contains("polld-no-such-ns"), "{err}");
    }
}
