//! polld's XDP programs, loaded and attached through the raw `bpf(2)` system call.
//!
//! No libbpf and no C toolchain: the programs are assembled in Rust ([`insn`], [`programs`])
//! and loaded at run time. Two programs exist:
//! - [`RedirectProgram`]: frames go to the AF_XDP socket of their receive queue (the
//!   [`AfXdp`](crate::afxdp::AfXdp) backend), or to the kernel when no socket is bound;
//!   a variant passes to the kernel what polld never forwards: the host's own IPv4 and
//!   IPv6 traffic and ARP ([`LocalAddresses`]), multicast, neighbour discovery and the
//!   other ethertypes;
//! - [`CountProgram`]: counts packets and bytes per CPU, then drops, for a sink at rates
//!   user space cannot reach.
//!
//! Attaching returns an [`XdpLink`]: the program is attached through a `bpf_link`, so it is
//! detached when the link is dropped, when the process exits, and when it crashes.
//! [`XdpMode::Auto`] tries native (driver) XDP first and falls back to generic (skb) XDP.

mod insn;
mod programs;
mod sys;

use std::fmt;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::error::OpenError;

/// Why an XDP or AF_XDP operation failed; the message names the object and the fix.
#[derive(Debug)]
pub enum XdpError {
    /// No interface of that name in this network namespace.
    NoSuchInterface(String),
    /// A failure the device layer shares with the other backends (an invalid name).
    Open(OpenError),
    /// The kernel refused for lack of privilege.
    PermissionDenied { action: String, source: io::Error },
    /// The verifier rejected a program; `log` is what it said.
    VerifierRejected {
        program: &'static str,
        source: io::Error,
        log: String,
    },
    /// An interface already has an XDP program this one cannot replace.
    Busy { ifname: String, source: io::Error },
    /// Zero-copy was required but the driver cannot do it.
    ZeroCopyUnsupported { ifname: String, queue: u32 },
    /// Any other failed system call, with what it was doing.
    Os { action: String, source: io::Error },
}

impl XdpError {
    /// Classifies an OS error from `action`: privilege errors get their own variant.
    pub(crate) fn os(action: impl Into<String>, source: io::Error) -> XdpError {
        let action = action.into();
        match source.raw_os_error() {
            Some(libc::EPERM) => XdpError::PermissionDenied { action, source },
            _ => XdpError::Os { action, source },
        }
    }
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpError::NoSuchInterface(name) => write!(
                f,
                "no interface `{name}` in this network namespace (list them with `ip link show`)"
            ),
            XdpError::Open(e) => e.fmt(f),
            XdpError::PermissionDenied { action, source } => write!(
                f,
                "{action}: {source}: XDP programs and AF_XDP sockets need CAP_BPF and \
                 CAP_NET_ADMIN (and CAP_NET_RAW for the socket): run as root or grant them \
                 with `setcap cap_bpf,cap_net_admin,cap_net_raw+ep`"
            ),
            XdpError::VerifierRejected {
                program,
                source,
                log,
            } => write!(
                f,
                "the kernel verifier rejected XDP program `{program}`: {source}\nverifier log:\n{}",
                log.trim_end()
            ),
            XdpError::Busy { ifname, source } => write!(
                f,
                "`{ifname}` already has an XDP program ({source}); see `ip link show {ifname}` \
                 and remove it with `ip link set dev {ifname} xdp off` if it is stale"
            ),
            XdpError::ZeroCopyUnsupported { ifname, queue } => write!(
                f,
                "`{ifname}` queue {queue} does not support AF_XDP zero-copy; use copy mode"
            ),
            XdpError::Os { action, source } => write!(f, "{action}: {source}"),
        }
    }
}

impl From<OpenError> for XdpError {
    fn from(e: OpenError) -> Self {
        XdpError::Open(e)
    }
}

impl std::error::Error for XdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            XdpError::PermissionDenied { source, .. }
            | XdpError::VerifierRejected { source, .. }
            | XdpError::Busy { source, .. }
            | XdpError::Os { source, .. } => Some(source),
            XdpError::Open(e) => e.source(),
            XdpError::NoSuchInterface(_) | XdpError::ZeroCopyUnsupported { .. } => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, XdpError>;

/// The interface index of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(ifname: &str) -> Result<u32> {
    crate::iface::index_here(ifname).map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))
}

/// Where an XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum XdpMode {
    /// Native first, generic if the driver refuses native XDP.
    #[default]
    Auto,
    /// In the driver, before an skb exists (veth, most NICs).
    Native,
    /// In the network stack on an skb: works everywhere, slower.
    Generic,
}

/// A loaded XDP program (not yet attached anywhere); the kernel frees it with the last fd.
#[derive(Debug)]
struct XdpProgram {
    fd: OwnedFd,
    name: &'static str,
}

/// Room for the verifier's explanation when a program is rejected.
const VERIFIER_LOG_SIZE: usize = 1 << 20;

impl XdpProgram {
    fn load(name: &'static str, insns: &[insn::Insn]) -> Result<XdpProgram> {
        match sys::prog_load(insns, name, None) {
            Ok(fd) => Ok(XdpProgram { fd, name }),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                Err(XdpError::os(format!("loading XDP program `{name}`"), e))
            }
            // Load again with a log buffer so the error says why (as libbpf does).
            Err(first) => {
                let mut log = vec![0u8; VERIFIER_LOG_SIZE];
                let source = match sys::prog_load(insns, name, Some(&mut log)) {
                    Ok(fd) => return Ok(XdpProgram { fd, name }),
                    Err(e) => e,
                };
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let mut text = String::from_utf8_lossy(&log[..end]).into_owned();
                if text.is_empty() {
                    text = format!("(empty; first attempt failed with: {first})");
                }
                Err(XdpError::VerifierRejected {
                    program: name,
                    source,
                    log: text,
                })
            }
        }
    }

    fn attach(&self, ifname: &str, mode: XdpMode) -> Result<XdpLink> {
        let ifindex = ifindex(ifname)?;
        let link = |flags: u32| sys::link_create(self.fd.as_fd(), ifindex, flags);
        let attached = |link: OwnedFd, mode: XdpMode| XdpLink {
            link,
            ifname: ifname.to_string(),
            ifindex,
            mode,
        };
        let failed = |e: io::Error, mode: &str| match e.raw_os_error() {
            Some(libc::EBUSY | libc::EEXIST) => XdpError::Busy {
                ifname: ifname.to_string(),
                source: e,
            },
            Some(libc::ENODEV) => XdpError::NoSuchInterface(ifname.to_string()),
            _ => XdpError::os(
                format!(
                    "attaching XDP program `{}` to `{ifname}` in {mode} mode",
                    self.name
                ),
                e,
            ),
        };
        let result = match mode {
            XdpMode::Native => link(sys::XDP_FLAGS_DRV_MODE)
                .map(|l| attached(l, XdpMode::Native))
                .map_err(|e| failed(e, "native")),
            XdpMode::Generic => link(sys::XDP_FLAGS_SKB_MODE)
                .map(|l| attached(l, XdpMode::Generic))
                .map_err(|e| failed(e, "generic")),
            XdpMode::Auto => match link(sys::XDP_FLAGS_DRV_MODE) {
                Ok(l) => Ok(attached(l, XdpMode::Native)),
                Err(e) => match failed(e, "native") {
                    // Only a driver that cannot do native XDP is worth a second try.
                    XdpError::Os { source, .. } => {
                        eprintln!(
                            "polld: xdp: `{ifname}` refused native XDP ({source}); \
                             trying generic (skb) mode"
                        );
                        link(sys::XDP_FLAGS_SKB_MODE)
                            .map(|l| attached(l, XdpMode::Generic))
                            .map_err(|e| failed(e, "generic"))
                    }
                    fatal => Err(fatal),
                },
            },
        };
        if let Ok(link) = &result {
            eprintln!(
                "polld: xdp: program `{}` attached to `{ifname}` in {} mode",
                self.name,
                link.mode_name()
            );
        }
        result
    }
}

/// An XDP program attached to an interface through a `bpf_link`. Dropping it detaches the
/// program; so does the death of the process, because the kernel closes the link fd.
#[derive(Debug)]
pub struct XdpLink {
    link: OwnedFd,
    ifname: String,
    ifindex: u32,
    mode: XdpMode,
}

impl XdpLink {
    /// The mode the program runs in: [`XdpMode::Native`] or [`XdpMode::Generic`].
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn mode_name(&self) -> &'static str {
        match self.mode {
            XdpMode::Native => "native (driver)",
            _ => "generic (skb)",
        }
    }
}

/// The link's fd; the program stays attached while any duplicate of it is open, in any
/// process.
impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.link.as_fd()
    }
}

/// Packets and bytes counted by a [`CountProgram`], summed over all CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpCounts {
    pub packets: u64,
    pub bytes: u64,
}

/// The program that counts frames and bytes in a per-CPU array, then drops them.
#[derive(Debug)]
pub struct CountProgram {
    program: XdpProgram,
    counters: OwnedFd,
    possible_cpus: usize,
}

impl CountProgram {
    pub fn load() -> Result<CountProgram> {
        let possible_cpus = possible_cpus()?;
        let counters = sys::map_create(
            sys::BPF_MAP_TYPE_PERCPU_ARRAY,
            4,
            std::mem::size_of::<[u64; 2]>() as u32,
            1,
            "polld_counts",
        )
        .map_err(|e| XdpError::os("creating the XDP counter map", e))?;
        let program = XdpProgram::load(
            "polld_count",
            &programs::count_and_drop(counters.as_raw_fd()),
        )?;
        Ok(CountProgram {
            program,
            counters,
            possible_cpus,
        })
    }

    /// Attaches this program; the counters keep counting across attachments.
    pub fn attach(&self, ifname: &str, mode: XdpMode) -> Result<XdpLink> {
        self.program.attach(ifname, mode)
    }

    /// The counters summed over all CPUs.
    pub fn counts(&self) -> Result<XdpCounts> {
        // A per-CPU lookup returns one 8-byte-aligned value per possible CPU.
        let mut values = vec![0u8; 16 * self.possible_cpus];
        sys::map_lookup(self.counters.as_fd(), 0, &mut values)
            .map_err(|e| XdpError::os("reading the XDP counter map", e))?;
        let word = |chunk: &[u8]| u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
        Ok(values
            .chunks_exact(16)
            .fold(XdpCounts::default(), |sum, cpu| XdpCounts {
                packets: sum.packets + word(&cpu[..8]),
                bytes: sum.bytes + word(&cpu[8..]),
            }))
    }
}

/// The number of CPUs the kernel may ever bring up: the size of per-CPU map values.
fn possible_cpus() -> Result<usize> {
    const PATH: &str = "/sys/devices/system/cpu/possible";
    let text =
        std::fs::read_to_string(PATH).map_err(|e| XdpError::os(format!("reading {PATH}"), e))?;
    parse_cpu_list(&text).ok_or_else(|| XdpError::Os {
        action: format!("parsing {PATH}"),
        source: io::Error::new(io::ErrorKind::InvalidData, format!("bad CPU list {text:?}")),
    })
}

/// Counts the CPUs in a kernel CPU list such as `0-3,8-11` (highest index + 1, as libbpf
/// does, since per-CPU values are indexed by CPU number).
fn parse_cpu_list(text: &str) -> Option<usize> {
    let mut highest = None;
    for range in text.trim().split(',') {
        let last = range.rsplit('-').next()?;
        let last: usize = last.parse().ok()?;
        highest = highest.max(Some(last));
    }
    highest.map(|h| h + 1)
}

/// The program that hands frames to AF_XDP sockets: `bpf_redirect_map(&xsks_map,
/// ctx->rx_queue_index, XDP_PASS)`. Queues without a socket pass frames to the kernel.
#[derive(Debug)]
pub struct RedirectProgram {
    program: XdpProgram,
    xsks: OwnedFd,
    queues: u32,
    /// The variant that passes the host's own traffic: its maps of addresses.
    local: Option<LocalAddresses>,
}

impl RedirectProgram {
    /// Loads the program with room for sockets on queues `0..queues`; every frame goes to
    /// the socket.
    pub fn load(queues: u32) -> Result<RedirectProgram> {
        let xsks = xsk_map(queues)?;
        let program = XdpProgram::load(
            "polld_redirect",
            &programs::redirect_to_xsk(xsks.as_raw_fd()),
        )?;
        Ok(RedirectProgram {
            program,
            xsks,
            queues: queues.max(1),
            local: None,
        })
    }

    /// Like [`load`](Self::load), but what polld never forwards goes to the kernel instead
    /// (see [`programs::redirect_to_xsk_except_local`]): ARP, IPv4 and IPv6 for the
    /// addresses of [`local_addresses`](Self::local_addresses), multicast, neighbour
    /// discovery and the other ethertypes. No address is the host's until one is added.
    pub fn load_passing_local(queues: u32) -> Result<RedirectProgram> {
        let xsks = xsk_map(queues)?;
        let local = LocalAddresses::create()?;
        let program = XdpProgram::load(
            "polld_redir_loc",
            &programs::redirect_to_xsk_except_local(
                xsks.as_raw_fd(),
                local.v4.as_raw_fd(),
                local.v6.as_raw_fd(),
            ),
        )?;
        Ok(RedirectProgram {
            program,
            xsks,
            queues: queues.max(1),
            local: Some(local),
        })
    }

    /// The addresses whose frames go to the kernel, for the program that passes them
    /// ([`load_passing_local`](Self::load_passing_local)); `None` for the other.
    pub fn local_addresses(&self) -> Option<&LocalAddresses> {
        self.local.as_ref()
    }

    pub fn attach(&self, ifname: &str, mode: XdpMode) -> Result<XdpLink> {
        self.program.attach(ifname, mode)
    }

    /// Frames arriving on `queue` go to the bound AF_XDP socket `xsk` from now on.
    pub fn insert_socket(&self, queue: u32, xsk: BorrowedFd<'_>) -> Result<()> {
        if queue >= self.queues {
            return Err(XdpError::Os {
                action: format!("registering an AF_XDP socket for queue {queue}"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the XSKMAP holds queues 0..{}", self.queues),
                ),
            });
        }
        let fd = xsk.as_raw_fd() as u32;
        sys::map_update(self.xsks.as_fd(), &queue.to_ne_bytes(), &fd.to_ne_bytes()).map_err(|e| {
            XdpError::os(
                format!("registering the AF_XDP socket of queue {queue} in the XSKMAP"),
                e,
            )
        })
    }
}

/// The host's addresses a [`RedirectProgram`] passes to the kernel: two BPF hash maps,
/// IPv4 and IPv6, keyed by the address's bytes as on the wire. Changes take effect for
/// the next frame; the maps outlive the handle while the program uses them.
#[derive(Debug)]
pub struct LocalAddresses {
    v4: OwnedFd,
    v6: OwnedFd,
}

impl LocalAddresses {
    /// How many addresses of each family the maps hold.
    pub const CAPACITY: u32 = 4096;

    fn create() -> Result<LocalAddresses> {
        let map = |key_size, name| {
            sys::map_create(sys::BPF_MAP_TYPE_HASH, key_size, 1, Self::CAPACITY, name)
                .map_err(|e| XdpError::os(format!("creating the map of local addresses {name}"), e))
        };
        Ok(LocalAddresses {
            v4: map(4, "polld_local")?,
            v6: map(16, "polld_local6")?,
        })
    }

    /// A second handle on the same maps, for a thread that keeps them up to date.
    pub fn try_clone(&self) -> Result<LocalAddresses> {
        let dup = |fd: &OwnedFd| {
            fd.try_clone()
                .map_err(|e| XdpError::os("duplicating a map of local addresses", e))
        };
        Ok(LocalAddresses {
            v4: dup(&self.v4)?,
            v6: dup(&self.v6)?,
        })
    }

    fn map_of(&self, addr: IpAddr) -> (BorrowedFd<'_>, Vec<u8>) {
        match addr {
            IpAddr::V4(a) => (self.v4.as_fd(), a.octets().to_vec()),
            IpAddr::V6(a) => (self.v6.as_fd(), a.octets().to_vec()),
        }
    }

    /// Frames for `addr` go to the kernel from now on.
    pub fn insert(&self, addr: IpAddr) -> Result<()> {
        let (map, key) = self.map_of(addr);
        sys::map_update(map, &key, &[1])
            .map_err(|e| XdpError::os(format!("adding local address {addr}"), e))
    }

    /// Frames for `addr` go to the socket again; removing an absent one is no error.
    pub fn remove(&self, addr: IpAddr) -> Result<()> {
        let (map, key) = self.map_of(addr);
        match sys::map_delete(map, &key) {
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => {
                Err(XdpError::os(format!("removing local address {addr}"), e))
            }
            _ => Ok(()),
        }
    }
}

fn xsk_map(queues: u32) -> Result<OwnedFd> {
    sys::map_create(sys::BPF_MAP_TYPE_XSKMAP, 4, 4, queues.max(1), "polld_xsks")
        .map_err(|e| XdpError::os("creating the XSKMAP for AF_XDP sockets", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_count_up_to_the_highest_cpu() {
        assert_eq!(parse_cpu_list("0\n"), Some(1));
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn a_rejected_program_carries_the_verifier_log() {
        polld_testsupport::require_root!("needs root to load a BPF program");
        // `return r0` with r0 never written: the verifier must refuse it.
        let err = XdpProgram::load("polld_bad", &[insn::Insn::exit()]).unwrap_err();
        match &err {
            XdpError::VerifierRejected { program, log, .. } => {
                assert_eq!(*program, "polld_bad");
                assert!(log.contains("R0 !read_ok"), "{log}");
            }
            other => panic!("expected a verifier rejection, got {other}"),
        }
        assert!(err.to_string().contains("verifier log"), "{err}");
    }

    #[test]
    fn permission_errors_name_the_capabilities() {
        let err = XdpError::os("loading", io::Error::from_raw_os_error(libc::EPERM));
        let text = err.to_string();
        assert!(matches!(err, XdpError::PermissionDenied { .. }));
        assert!(
            text.contains("CAP_BPF") && text.contains("CAP_NET_ADMIN"),
            "{text}"
        );
    }

    #[test]
    fn a_missing_interface_is_named() {
        let err = ifindex("polld-nosuch0").unwrap_err();
        assert!(err.to_string().contains("polld-nosuch0"), "{err}");
    }
}
