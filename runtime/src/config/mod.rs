//! The `polld run` configuration file, and errors that point at its lines.
//!
//! The file is the packet stage's configuration ([`polld_packet::PacketConfig`]: mode,
//! interfaces, routes, static ARP, rules, ...) plus what the daemon needs to run it:
//!
//! ```toml
//! [daemon]                       # all optional
//! socket = "/run/polld/polld.sock"   # an absolute path, in a directory that exists
//! cpus = [0, 1]                  # one poll thread per CPU, each pinned, each with its
//!                                # own poller (net.ifpoll.N.*); without `cpus`, one
//!                                # poll thread, pinned by `cpu = 1` if given (not both)
//! realtime = true                # SCHED_FIFO: the poll thread, the control thread above it
//! metrics = "127.0.0.1:9101"     # serve GET /metrics (Prometheus); a port number or
//!                                # `true` (port 9101) mean loopback
//! metrics_public = false         # true allows a non-loopback metrics address
//! af_xdp_shared_umem = true      # the af_xdp interfaces of a poll thread share one UMEM:
//!                                # forwarded frames leave without a user-space copy
//!                                # (true needs two of them on one poll thread)
//! irq_deferral = "auto"          # af_xdp while polling: how the device's interrupt is
//!                                # kept masked: "auto" (per-NAPI netlink on Linux 6.13+,
//!                                # else the device's sysfs), "netlink" or "sysfs"
//!
//! [knobs]                        # any writable sysctl, applied in order at start; quote
//!                                # the dotted names, give integers or words
//! profile = "freebsd"            # the defaults they apply over: polld (default) or
//!                                # freebsd (kern_poll.c's: classic, burst_max 150, ...)
//! "kern.polling.user_frac" = 50
//! "kern.polling.idle_poll" = 0
//! "net.inet.ip.fastforwarding" = 1
//!
//! [[interfaces]]
//! name = "veth1"                 # at most 15 bytes, as Linux names interfaces
//! backend = "af_xdp"             # af_packet (default), af_xdp or tap
//! mode = "polling"               # interrupt (default), polling, adaptive, busy or auto
//! queue = 0                      # af_xdp: the receive queue
//! pass_local = true              # af_xdp: what polld never forwards goes to the kernel:
//!                                # the host's own IPv4 and IPv6 (ping, ssh), ARP,
//!                                # neighbour discovery, multicast, other ethertypes
//!                                # (default: true where tables = "kernel", else
//!                                # false: every frame goes to polld)
//! cpu = 1                        # with [daemon] cpus: the CPU that polls it (default:
//!                                # round-robin over `cpus` in file order)
//! mac = "02:00:00:00:01:02"      # default: the interface's own MAC
//! addresses = ["10.0.1.2/24"]    # not one the kernel has on the interface
//! mtu = 1500                     # the largest IP packet sent out of it (default: the
//!                                # kernel's MTU of the interface, else 1500); bigger ones
//!                                # are fragmented (DF clear) or refused with ICMP (DF set)
//!
//! [interfaces.fault]             # a test tool: seeded faults on this interface, rates
//! seed = 1                       # per mille, each counted by name (see polld-middleware)
//! rx_drop = 10                   # also rx_truncate, rx_corrupt, rx_duplicate, tx_fail,
//!                                # wakeup_loss (wakeups lost)
//!
//! [[interfaces]]
//! name = "veth2"
//! backend = "af_xdp"
//! mode = "polling"
//! cpu = 1                        # with veth1 on CPU 1: their frames share one UMEM
//! mac = "02:00:00:00:02:01"
//! addresses = ["10.0.2.1/24"]
//!
//! [[interfaces]]
//! name = "veth3"
//! backend = "af_xdp"
//! mode = "polling"
//! queues = [0, 1]                # af_xdp, with [daemon] cpus: one socket per receive
//!                                # queue (or `queues = 2`: 0 and 1), each polled by its
//!                                # own CPU; not with `queue` or `cpu`
//! cpus = [1, 0]                  # with queues or fanout: the CPU of each (default: the
//!                                # first of [daemon] cpus for the first, and so on)
//! mac = "02:00:00:00:03:01"
//! addresses = ["10.0.3.1/24"]
//!
//! [[interfaces]]
//! name = "eth0"
//! netns = "gen"                  # the network namespace the interface lives in
//!                                # (`ip netns list`); default: polld's own
//! fanout = 2                     # af_packet, with [daemon] cpus: that many sockets in
//!                                # one PACKET_FANOUT group (hash), each polled by its
//!                                # own CPU
//! mac = "02:00:00:00:04:01"
//! addresses = ["10.0.4.1/24"]
//!
//! [[routes]]
//! prefix = "0.0.0.0/0"
//! gateway = "10.0.2.2"
//! ```
//!
//! Every error names the file, the line and the field, says what is wrong and how to fix
//! it; a file with several mistakes is refused with all of them.

//! The parts, one job each:
//! - `parse`: reading the file into a [`RunConfig`];
//! - `errors`: [`RunConfigError`] and [`RunConfigErrors`], and serde's messages as a
//!   user reads them;
//! - `locate`: the line a field or key is written on;
//! - `queues`: `queues` and `fanout` expanded into an interface's queues;
//! - `cpus`: the poll CPUs assigned, and the part of the config each one runs;
//! - `netns`: what is read from an interface's network namespace.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use polld_core::{Mode, Profile};
use polld_middleware::FaultConfig;
use polld_packet::PacketConfig;
use serde::Deserialize;

mod cpus;
mod errors;
mod keys;
mod knobs;
mod locate;
mod netns;
mod parse;
mod queues;

pub(crate) use cpus::check_shared_umem;
pub use errors::{RunConfigError, RunConfigErrors};
pub use netns::{in_namespace_of, no_such_interface};

/// The commented example file of this module's documentation, every key with what it
/// does: what `polld man` writes into polld.toml(5).
pub fn annotated_example() -> String {
    polld_packet::config::doc_example(include_str!("mod.rs"))
}

/// How polld reaches an interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// AF_PACKET with a TPACKET_V3 receive ring; sendmmsg with qdisc bypass.
    #[default]
    AfPacket,
    /// AF_XDP behind polld's own XDP redirect program.
    AfXdp,
    /// A TAP interface: attached to if it exists (a persistent TAP, `ip tuntap add`),
    /// created (and gone again when polld exits) if not.
    Tap,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::AfPacket => "af_packet",
            Backend::AfXdp => "af_xdp",
            Backend::Tap => "tap",
        }
    }

    /// The `[[interfaces]]` key that splits an interface of this backend over several poll
    /// CPUs, for errors about it: `fanout` on AF_PACKET, `queues` otherwise (a TAP has
    /// neither, and its error names the key the file gave).
    fn queues_key(self) -> &'static str {
        match self {
            Backend::AfPacket => "fanout",
            Backend::AfXdp | Backend::Tap => "queues",
        }
    }
}

/// The `[daemon]` table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfig {
    /// The control socket; default [`polld_control::client::DEFAULT_SOCKET`].
    pub socket: Option<PathBuf>,
    /// Pin the poll thread to this CPU.
    pub cpu: Option<usize>,
    /// One poll thread per CPU listed, each pinned to its CPU (DragonFly's ifpoll); empty:
    /// one poll thread, pinned by `cpu` if given.
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Run the poll thread SCHED_FIFO, so clock ticks are not delayed by other work, and
    /// the control socket's thread one priority above it, so `polld ctl` is answered
    /// while interrupt work under a flood keeps the poll thread busy.
    #[serde(default)]
    pub realtime: bool,
    /// Serve GET /metrics here (Prometheus text format); `None` when off.
    #[serde(default, deserialize_with = "metrics_address")]
    pub metrics: Option<SocketAddr>,
    /// Allow a `metrics` address other than loopback.
    #[serde(default)]
    pub metrics_public: bool,
    /// Whether the AF_XDP interfaces of one poll thread share one UMEM, so a frame
    /// forwarded between them leaves without a copy in user space; unset:
    /// [`SHARED_UMEM_DEFAULT`].
    pub af_xdp_shared_umem: Option<bool>,
    /// How preferred busy polling keeps a polled device's interrupt masked
    /// ([`polld_dev::irq_defer`]).
    #[serde(default)]
    pub irq_deferral: polld_dev::irq_defer::DeferChoice,
}

/// `af_xdp_shared_umem` when the file does not say.
pub const SHARED_UMEM_DEFAULT: bool = true;

impl DaemonConfig {
    /// Whether the AF_XDP interfaces of a poll thread share one UMEM.
    pub fn shared_umem(&self) -> bool {
        self.af_xdp_shared_umem.unwrap_or(SHARED_UMEM_DEFAULT)
    }
}

/// The port `metrics = true` listens on (the 91xx range of Prometheus exporters).
pub const DEFAULT_METRICS_PORT: u16 = 9101;

/// `metrics`: `false`, `true` (loopback, [`DEFAULT_METRICS_PORT`]), a port number
/// (loopback), or `"ADDRESS:PORT"`.
fn metrics_address<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    struct Visitor;
    impl serde::de::Visitor<'_> for Visitor {
        type Value = Option<SocketAddr>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("\"127.0.0.1:9101\", a port number, or true/false")
        }
        fn visit_bool<E: serde::de::Error>(self, on: bool) -> Result<Self::Value, E> {
            Ok(on.then_some(SocketAddr::from((
                Ipv4Addr::LOCALHOST,
                DEFAULT_METRICS_PORT,
            ))))
        }
        fn visit_i64<E: serde::de::Error>(self, port: i64) -> Result<Self::Value, E> {
            let port = u16::try_from(port)
                .ok()
                .filter(|&p| p != 0)
                .ok_or_else(|| {
                    E::custom(format!(
                        "port {port} is out of range; write a port from 1 to 65535"
                    ))
                })?;
            Ok(Some(SocketAddr::from((Ipv4Addr::LOCALHOST, port))))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            text.parse().map(Some).map_err(|_| {
                E::custom(format!(
                    "{text:?} is not ADDRESS:PORT; write e.g. \"127.0.0.1:9101\" or \"[::1]:9101\""
                ))
            })
        }
    }
    d.deserialize_any(Visitor)
}

/// One device: how to open it and its mode. Its addresses live in the packet config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConfig {
    /// Its place among the file's `[[interfaces]]`, for errors about its fields.
    pub entry: usize,
    pub name: String,
    /// The network namespace the interface lives in; `None`: polld's own.
    pub netns: Option<String>,
    pub backend: Backend,
    pub mode: Mode,
    pub queue: u32,
    /// The poll CPU, with `[daemon] cpus`: the entry's `cpu`, else round-robin. `None`
    /// for an interface with `queues`.
    pub cpu: Option<usize>,
    /// An interface polled by several CPUs, one device each: its AF_XDP receive queues
    /// (`queues`), or its AF_PACKET fanout members numbered 0..N (`fanout`). Empty: one
    /// device, polled whole by `cpu`.
    pub queues: Vec<u32>,
    /// The poll CPU of each of `queues`: the entry's `cpus`, else `[daemon] cpus` in order.
    pub queue_cpus: Vec<usize>,
    /// In the part of the config one poll CPU runs ([`RunConfig::per_cpu`]): which of
    /// `queues` is that CPU's.
    pub this_queue: Option<usize>,
    /// Faults to inject (a test tool), from `[interfaces.fault]`.
    pub fault: Option<FaultConfig>,
    /// AF_XDP: what polld never forwards goes to the kernel
    /// ([`polld_dev::afxdp::AfXdpConfig::pass_local`]): as the file says, else on where
    /// the tables are the kernel's (the host's addresses, ARP and neighbour discovery are
    /// the kernel's then), off with the file's tables (polld answers for its addresses).
    pub pass_local: Option<bool>,
}

/// A knob write from `[knobs]`, with the line it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnobSetting {
    pub name: String,
    pub value: String,
    pub line: usize,
}

/// A whole, validated `polld run` configuration.
#[derive(Clone, Debug)]
pub struct RunConfig {
    pub path: PathBuf,
    pub daemon: DaemonConfig,
    /// `[knobs] profile`: the knob defaults `knobs` apply over.
    pub profile: Profile,
    pub knobs: Vec<KnobSetting>,
    pub devices: Vec<DeviceConfig>,
    pub packet: PacketConfig,
    /// The file's text, to point later errors (a knob the dataplane refuses) at a line.
    source: String,
}
