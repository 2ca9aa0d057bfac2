//! The `polld run` configuration file, and errors that point at its lines.
//!
//! The file is the packet stage's configuration ([`polld_packet::PacketConfig`]: mode,
//! interfaces, routes, static ARP, rules, ...) plus what the daemon needs to run it:
//!
//! ```toml
//! [daemon]                       # all optional
//! socket = "/run/polld/polld.sock"
//! cpu = 1                        # pin the poll thread to this CPU
//! cpus = [0, 1]                  # or: one poll thread per CPU, each pinned, each with
//!                                # its own poller (net.ifpoll.N.*); not with `cpu`
//! realtime = true                # SCHED_FIFO for the poll thread
//! metrics = "127.0.0.1:9101"     # serve GET /metrics (Prometheus); a port number or
//!                                # `true` (port 9101) mean loopback
//! metrics_public = false         # true allows a non-loopback metrics address
//! af_xdp_shared_umem = true      # the af_xdp interfaces of a poll thread share one UMEM:
//!                                # forwarded frames leave without a user-space copy
//! irq_deferral = "auto"          # af_xdp while polling: how the device's interrupt is
//!                                # kept masked: "auto" (per-NAPI netlink on Linux 6.13+,
//!                                # else the device's sysfs), "netlink" or "sysfs"
//!
//! [knobs]                        # any writable sysctl, applied in order at start
//! profile = "freebsd"            # the defaults they apply over: polld (default) or
//!                                # freebsd (kern_poll.c's: classic, burst_max 150, ...)
//! "kern.polling.user_frac" = 50
//! "kern.polling.idle_poll" = 0
//! "net.inet.ip.fastforwarding" = 1
//!
//! [[interfaces]]
//! name = "veth1"
//! backend = "af_xdp"             # af_packet (default), af_xdp or tap
//! netns = "gen"                  # the network namespace the interface lives in
//!                                # (`ip netns list`); default: polld's own
//! mode = "polling"               # interrupt (default), polling, adaptive, busy or auto
//! queue = 0                      # af_xdp: the receive queue
//! cpu = 1                        # with [daemon] cpus: the CPU that polls it (default:
//!                                # round-robin over `cpus` in file order)
//! queues = [0, 1]                # af_xdp, with [daemon] cpus: one socket per receive
//!                                # queue (or `queues = 2`: 0 and 1), each polled by its
//!                                # own CPU; not with `queue` or `cpu`
//! fanout = 2                     # af_packet, with [daemon] cpus: that many sockets in
//!                                # one PACKET_FANOUT group (hash), each polled by its
//!                                # own CPU
//! cpus = [1, 0]                  # with queues or fanout: the CPU of each (default: the
//!                                # first of [daemon] cpus for the first, and so on)
//! mac = "02:00:00:00:01:02"      # default: the interface's own MAC
//! addresses = ["10.0.1.2/24"]
//! mtu = 1500                     # the largest IP packet sent out of it (default: the
//!                                # kernel's MTU of the interface, else 1500); bigger ones
//!                                # are fragmented (DF clear) or refused with ICMP (DF set)
//!
//! [interfaces.fault]             # a test tool: seeded faults on this interface, rates
//! seed = 1                       # per mille, each counted by name (see polld-middleware)
//! rx_drop = 10                   # also rx_truncate, rx_corrupt, rx_duplicate, tx_fail
//!
//! [[routes]]
//! prefix = "0.0.0.0/0"
//! gateway = "10.0.2.2"
//! ```
//!
//! Every error names the file and the line, says what is wrong and how to fix it.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use polld_core::knobs::PROFILE_KEY;
use polld_core::{Mode, Profile};
use polld_middleware::FaultConfig;
use polld_packet::{ConfigError, PacketConfig};
use serde::Deserialize;

/// The commented example file of this module's documentation, every key with what it
/// does: what `polld man` writes into polld.toml(5).
pub fn annotated_example() -> String {
    polld_packet::config::doc_example(include_str!("config.rs"))
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
    /// Run the poll thread SCHED_FIFO, so clock ticks are not delayed by other work.
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
                .ok_or_else(|| E::custom(format!("port {port} is out of range 1..65535")))?;
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

/// A configuration problem, with its place in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfigError {
    pub path: PathBuf,
    /// 1-based; `None` when the problem is not on one line (a missing table).
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for RunConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

impl std::error::Error for RunConfigError {}

impl RunConfigError {
    /// The message in its parts, as the messages are written: the field at fault (before
    /// the first `: `, when it is a field path), what is wrong, and the fix (after the
    /// first `; `).
    pub fn parts(&self) -> (Option<&str>, &str, Option<&str>) {
        let (field, rest) = match self.message.split_once(": ") {
            Some((field, rest)) if !field.contains(' ') => (Some(field), rest),
            _ => (None, self.message.as_str()),
        };
        match rest.split_once("; ") {
            Some((problem, fix)) => (field, problem, Some(fix)),
            None => (field, rest, None),
        }
    }
}

/// The file as serde sees it: the daemon's tables, and the rest for the packet stage.
#[derive(Deserialize)]
struct RunFile {
    #[serde(default)]
    daemon: DaemonConfig,
    #[serde(default)]
    knobs: toml::Table,
    #[serde(default)]
    interfaces: Vec<toml::Table>,
    #[serde(flatten)]
    packet: toml::Table,
}

/// The keys of an `[[interfaces]]` entry that belong to the device, not the stage.
#[derive(Deserialize)]
struct DeviceKeys {
    #[serde(default)]
    backend: Backend,
    #[serde(default)]
    mode: ModeName,
    #[serde(default)]
    queue: u32,
    #[serde(default)]
    netns: Option<String>,
    #[serde(default)]
    cpu: Option<usize>,
    #[serde(default)]
    queues: Option<QueueList>,
    #[serde(default)]
    fanout: Option<u32>,
    #[serde(default)]
    cpus: Option<Vec<usize>>,
    fault: Option<FaultConfig>,
}

/// `queues = N` (queues 0..N) or `queues = [ids]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum QueueList {
    Count(u32),
    Ids(Vec<u32>),
}

struct ModeName(Mode);

impl Default for ModeName {
    /// FreeBSD's default: polling is off until asked for.
    fn default() -> Self {
        ModeName(Mode::Interrupt)
    }
}

impl<'de> Deserialize<'de> for ModeName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map(ModeName).map_err(|_| {
            serde::de::Error::custom(format!(
                "unknown mode {s:?}; use interrupt, polling, adaptive, busy or auto"
            ))
        })
    }
}

/// The keys [`RunFile`] reads itself; every other top-level key is the packet stage's.
const RUN_FILE_KEYS: [&str; 3] = ["daemon", "knobs", "interfaces"];

const DEVICE_KEYS: [&str; 9] = [
    "backend", "mode", "queue", "netns", "cpu", "fault", "queues", "fanout", "cpus",
];

impl RunConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<RunConfig, RunConfigError> {
        let source = std::fs::read_to_string(path).map_err(|e| RunConfigError {
            path: path.to_path_buf(),
            line: None,
            message: format!("cannot read the config file: {e}; check the path given to -c"),
        })?;
        RunConfig::parse(path, &source)
    }

    /// Parses and validates `source`, reporting errors against `path`.
    pub fn parse(path: &Path, source: &str) -> Result<RunConfig, RunConfigError> {
        let fail = |line: Option<usize>, message: String| RunConfigError {
            path: path.to_path_buf(),
            line,
            message,
        };
        let doc = source
            .parse::<toml_edit::ImDocument<String>>()
            .map_err(|e| {
                let line = e.span().map(|s| line_of_offset(source, s.start));
                fail(line, e.message().to_string())
            })?;
        let locate = |field: &str| field_line(&doc, source, field);
        let file: RunFile = serde_path_to_error::deserialize(toml::Deserializer::new(source))
            .map_err(|e| {
                let path = e.path().to_string();
                let e = e.into_inner();
                let line = e.span().map(|s| line_of_offset(source, s.start));
                fail(line, described(&path, e.message()))
            })?;

        let mut devices = Vec::new();
        let mut stage_interfaces = Vec::new();
        let mut explicit_mtu = Vec::new();
        for (i, entry) in file.interfaces.iter().enumerate() {
            let (device_part, stage_part): (toml::Table, toml::Table) = entry
                .clone()
                .into_iter()
                .partition(|(k, _)| DEVICE_KEYS.contains(&k.as_str()));
            let keys: DeviceKeys = typed(
                toml::Value::Table(device_part.clone()),
                &format!("interfaces[{i}]"),
            )
            .map_err(|(field, message)| fail(locate(&field), message))?;
            let name = entry
                .get("name")
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string();
            if let Some(Err(e)) = keys.fault.as_ref().map(FaultConfig::validate) {
                let field = format!("interfaces[{i}].fault.{}", e.field);
                return Err(fail(locate(&field), format!("interfaces[{i}].{e}")));
            }
            let queues = queue_keys(i, &keys, &device_part)
                .map_err(|(field, message)| fail(locate(&field), message))?;
            devices.push(DeviceConfig {
                entry: i,
                name,
                netns: keys.netns,
                backend: keys.backend,
                mode: keys.mode.0,
                queue: keys.queue,
                cpu: keys.cpu,
                queues,
                queue_cpus: keys.cpus.unwrap_or_default(),
                this_queue: None,
                fault: keys.fault,
            });
            explicit_mtu.push(stage_part.contains_key("mtu"));
            stage_interfaces.push(toml::Value::Table(stage_part));
        }
        let mut packet = file.packet;
        packet.insert("interfaces".into(), toml::Value::Array(stage_interfaces));
        let mut packet: PacketConfig = typed(toml::Value::Table(packet), "")
            .map_err(|(field, message)| fail(locate(&field), message))?;
        for (i, dev) in devices.iter().enumerate() {
            if packet.mode == polld_packet::Mode::Router && packet.interfaces[i].mac.is_none() {
                // The MAC defaults to the interface's own: say so when there is none.
                let missing = in_namespace_of(dev, || polld_dev::iface::exists(&dev.name));
                if dev.backend != Backend::Tap && matches!(missing, Some(Ok(false))) {
                    let field = format!("interfaces[{i}].name");
                    return Err(fail(locate(&field), no_such_interface(i, dev)));
                }
                packet.interfaces[i].mac = kernel_mac(dev);
            }
            if !explicit_mtu[i] {
                if let Some(mtu) = kernel_mtu(dev) {
                    packet.interfaces[i].mtu = mtu;
                }
            }
        }
        let config_error =
            |e: ConfigError| fail(locate(&e.field), format!("{}: {}", e.field, e.message));
        packet.validate().map_err(config_error)?;

        let mut profile = Profile::default();
        if let Some(value) = file.knobs.get(PROFILE_KEY) {
            profile = value.as_str().and_then(Profile::named).ok_or_else(|| {
                let names: Vec<String> = Profile::ALL
                    .iter()
                    .map(|p| format!("\"{}\"", p.name()))
                    .collect();
                fail(
                    key_line(source, PROFILE_KEY),
                    format!(
                        "knobs.profile: {value} is not a profile; write profile = {}",
                        names.join(" or ")
                    ),
                )
            })?;
        }
        let knobs = file
            .knobs
            .iter()
            .filter(|(name, _)| name.as_str() != PROFILE_KEY)
            .map(|(name, value)| {
                let value = match value {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Integer(n) => n.to_string(),
                    toml::Value::Boolean(b) => (*b as u8).to_string(),
                    other => {
                        return Err(fail(
                            key_line(source, name),
                            format!("knobs.\"{name}\": {other} is not a number or a word; write e.g. \"{name}\" = 50"),
                        ))
                    }
                };
                Ok(KnobSetting {
                    line: key_line(source, name).unwrap_or(0),
                    name: name.clone(),
                    value,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut knobs = knobs;
        // Apply in file order, as a user reading the file expects.
        knobs.sort_by_key(|k| k.line);
        if let Some(addr) = file.daemon.metrics {
            if !addr.ip().is_loopback() && !file.daemon.metrics_public {
                return Err(fail(
                    locate("daemon.metrics"),
                    format!(
                        "daemon.metrics: {addr} is not a loopback address, and /metrics has no \
                         authentication; use \"127.0.0.1:{}\", or add metrics_public = true \
                         to [daemon] to serve every counter to the network",
                        addr.port()
                    ),
                ));
            }
        }
        assign_cpus(&file.daemon, &mut devices, &packet)
            .map_err(|(field, message)| fail(locate(&field), message))?;
        check_shared_umem(&file.daemon, &devices)
            .map_err(|message| fail(locate("daemon.af_xdp_shared_umem"), message))?;
        Ok(RunConfig {
            path: path.to_path_buf(),
            daemon: file.daemon,
            profile,
            knobs,
            devices,
            packet,
            source: source.to_string(),
        })
    }

    /// An error about a field such as `interfaces[1].queue`, at its line.
    pub fn error_at_field(&self, field: &str, message: String) -> RunConfigError {
        let line = self
            .source
            .parse::<toml_edit::ImDocument<String>>()
            .ok()
            .and_then(|doc| field_line(&doc, &self.source, field));
        RunConfigError {
            path: self.path.clone(),
            line,
            message,
        }
    }

    /// An error about the key `key` of this file, at its line.
    pub fn error_at_key(&self, key: &str, message: String) -> RunConfigError {
        RunConfigError {
            path: self.path.clone(),
            line: key_line(&self.source, key),
            message,
        }
    }
}

/// An error about key `key` of `[[interfaces]]` entry `i`: the field, and the message
/// naming it.
fn interface_error(i: usize, key: &str, why: String) -> (String, String) {
    let field = format!("interfaces[{i}].{key}");
    let message = format!("{field}: {why}");
    (field, message)
}

/// The queues of an `[[interfaces]]` entry (`queues` on AF_XDP, `fanout` on AF_PACKET),
/// checked against its backend and its other keys; empty for a device polled whole. The
/// error names the field and the fix.
fn queue_keys(
    i: usize,
    keys: &DeviceKeys,
    given: &toml::Table,
) -> Result<Vec<u32>, (String, String)> {
    let refuse = |key: &str, why: String| Err(interface_error(i, key, why));
    let several_taps = "a TAP here has one queue: for several CPUs use several TAPs, one \
                        [[interfaces]] entry each with its own `cpu`";
    if given.contains_key("queue") && keys.backend != Backend::AfXdp {
        let why = match keys.backend {
            Backend::Tap => "a TAP has one queue, and polld reads it whole".to_string(),
            _ => "AF_PACKET receives from every queue of the interface".to_string(),
        };
        return refuse(
            "queue",
            format!(
                "`queue` is the AF_XDP receive queue to open, and this interface is {}: {why}; \
                 remove `queue`, or use backend = \"af_xdp\" to poll one receive queue",
                keys.backend.name()
            ),
        );
    }
    let queues: Vec<u32> = match (&keys.queues, keys.fanout) {
        (Some(_), Some(_)) => {
            return refuse(
                "fanout",
                "`queues` (AF_XDP) and `fanout` (AF_PACKET) are two ways to split one \
                 interface; keep the one of its backend"
                    .to_string(),
            )
        }
        (None, None) => {
            if given.contains_key("cpus") {
                return refuse(
                    "cpus",
                    "`cpus` lists the CPU of each queue, and this interface has none; use \
                     `cpu = N`, or add `queues` (af_xdp) or `fanout` (af_packet)"
                        .to_string(),
                );
            }
            return Ok(Vec::new());
        }
        (None, Some(n)) => {
            match keys.backend {
                Backend::AfPacket => {}
                Backend::AfXdp => {
                    return refuse(
                        "fanout",
                        "fanout is AF_PACKET's PACKET_FANOUT; on backend af_xdp write \
                         `queues = N` (one socket per receive queue)"
                            .to_string(),
                    )
                }
                Backend::Tap => return refuse("fanout", several_taps.to_string()),
            }
            if n == 0 {
                return refuse(
                    "fanout",
                    "0 sockets; write fanout = 2 or more (one per poll CPU)".to_string(),
                );
            }
            (0..n).collect()
        }
        (Some(list), None) => {
            match keys.backend {
                Backend::AfXdp => {}
                Backend::AfPacket => {
                    return refuse(
                        "queues",
                        "backend af_packet has no per-queue sockets; write `fanout = N` to \
                         spread the interface over N sockets, or backend = \"af_xdp\""
                            .to_string(),
                    )
                }
                Backend::Tap => return refuse("queues", several_taps.to_string()),
            }
            let ids = match list {
                QueueList::Count(n) => (0..*n).collect(),
                QueueList::Ids(ids) => ids.clone(),
            };
            if ids.is_empty() {
                return refuse(
                    "queues",
                    "no queue listed; write e.g. queues = [0, 1] or queues = 2".to_string(),
                );
            }
            if let Some(q) = ids
                .iter()
                .enumerate()
                .find_map(|(k, q)| ids[..k].contains(q).then_some(q))
            {
                return refuse(
                    "queues",
                    format!("queue {q} is listed twice; list each once"),
                );
            }
            if given.contains_key("queue") {
                return refuse(
                    "queue",
                    "`queue` opens one receive queue and `queues` several; keep one of them"
                        .to_string(),
                );
            }
            ids
        }
    };
    if given.contains_key("cpu") {
        return refuse(
            "cpu",
            format!(
                "with `{}` each queue has its own CPU: write `cpus = [..]`, one per queue, or \
                 leave it out (round-robin)",
                keys.backend.queues_key()
            ),
        );
    }
    Ok(queues)
}

/// An explicit `af_xdp_shared_umem = true` needs two AF_XDP interfaces on one poll thread
/// to share anything: otherwise it says which interfaces cannot.
pub(crate) fn check_shared_umem(
    daemon: &DaemonConfig,
    devices: &[DeviceConfig],
) -> Result<(), String> {
    if daemon.af_xdp_shared_umem != Some(true) {
        return Ok(());
    }
    let af_xdp = |cpu: Option<usize>| {
        devices
            .iter()
            .filter(|d| d.backend == Backend::AfXdp && d.cpu == cpu)
            .count()
    };
    let threads: Vec<Option<usize>> = if daemon.cpus.is_empty() {
        vec![None]
    } else {
        daemon.cpus.iter().map(|&c| Some(c)).collect()
    };
    if threads.iter().any(|&cpu| af_xdp(cpu) >= 2) {
        return Ok(());
    }
    let others: Vec<String> = devices
        .iter()
        .filter(|d| d.backend != Backend::AfXdp)
        .map(|d| format!("{} is {}", d.name, d.backend.name()))
        .collect();
    let why = if others.is_empty() {
        "no poll thread has two of them".to_string()
    } else {
        others.join(", ")
    };
    Err(format!(
        "daemon.af_xdp_shared_umem = true: a UMEM is shared by AF_XDP sockets only, and needs \
         two or more interfaces with backend = \"af_xdp\" polled by one thread ({why}); \
         use backend = \"af_xdp\", or remove af_xdp_shared_umem"
    ))
}

/// With `[daemon] cpus`, sets each device's poll CPU (its `cpu`, else round-robin);
/// without, refuses an interface `cpu`. A bridge floods to every port, and polld does not
/// hand frames between CPUs, so its ports must share one CPU. The error names the field.
fn assign_cpus(
    daemon: &DaemonConfig,
    devices: &mut [DeviceConfig],
    packet: &PacketConfig,
) -> Result<(), (String, String)> {
    if daemon.cpus.is_empty() {
        if let Some(i) = devices.iter().position(|d| !d.queues.is_empty()) {
            let key = devices[i].backend.queues_key();
            let why = format!(
                "each queue is polled by its own CPU, and there is one poll thread; list the \
                 poll CPUs in [daemon] cpus = [..], or remove `{key}` here"
            );
            return Err(interface_error(i, key, why));
        }
        if let Some(i) = devices.iter().position(|d| d.cpu.is_some()) {
            let why = "there is one poll thread; list the poll CPUs in [daemon] cpus = [..] to \
                       poll interfaces on several CPUs, or remove `cpu` here";
            return Err(interface_error(i, "cpu", why.to_string()));
        }
        return Ok(());
    }
    if daemon.cpu.is_some() {
        let message = "daemon.cpu and daemon.cpus: `cpu` pins the one poll thread, `cpus` \
                       starts one per CPU; keep one of them"
            .to_string();
        return Err(("daemon.cpu".to_string(), message));
    }
    for (i, d) in devices.iter_mut().enumerate() {
        d.queue_cpus = queue_cpus(i, d, &daemon.cpus)?;
    }
    let whole: Vec<usize> = (0..devices.len())
        .filter(|&i| devices[i].queues.is_empty())
        .collect();
    let wanted: Vec<Option<usize>> = whole.iter().map(|&i| devices[i].cpu).collect();
    let assigned = polld_core::ifpoll::assign(&daemon.cpus, &wanted).map_err(|e| {
        let field = match &e {
            polld_core::ifpoll::AssignError::NotAPollCpu { index, .. } => {
                format!("interfaces[{}].cpu", whole[*index])
            }
            _ => "daemon.cpus".to_string(),
        };
        let message = match e {
            polld_core::ifpoll::AssignError::NotAPollCpu { index, cpu, cpus } => {
                polld_core::ifpoll::AssignError::NotAPollCpu {
                    index: whole[index],
                    cpu,
                    cpus,
                }
                .to_string()
            }
            e => format!("daemon.cpus: {e}"),
        };
        (field, message)
    })?;
    for (&i, cpu) in whole.iter().zip(&assigned) {
        devices[i].cpu = Some(*cpu);
    }
    let polled = |c: &usize| {
        devices
            .iter()
            .any(|d| d.cpu == Some(*c) || d.queue_cpus.contains(c))
    };
    if let Some(idle) = daemon.cpus.iter().find(|c| !polled(c)) {
        let message = format!(
            "daemon.cpus: CPU {idle} polls no interface; remove it from `cpus`, or give an \
             interface `cpu = {idle}`"
        );
        return Err(("daemon.cpus".to_string(), message));
    }
    if packet.mode == polld_packet::Mode::Bridge {
        if let Some(i) = devices.iter().position(|d| !d.queues.is_empty()) {
            let key = devices[i].backend.queues_key();
            let why = format!(
                "a bridge floods to every port and polld does not hand frames between poll \
                 CPUs, so a bridge port is polled whole by one CPU: remove `{key}` from {}",
                devices[i].name
            );
            return Err(interface_error(i, key, why));
        }
        if let Some(i) = assigned.iter().position(|c| *c != assigned[0]) {
            let why = format!(
                "a bridge floods to every port and polld does not hand frames between poll \
                 CPUs; {} is on CPU {} and {} on CPU {}: give every port the same `cpu`",
                devices[0].name, assigned[0], devices[i].name, assigned[i]
            );
            return Err(interface_error(i, "cpu", why));
        }
    }
    Ok(())
}

/// The poll CPU of each queue of device `i`: its `cpus` (one per queue, each a poll CPU,
/// no CPU twice), else the poll CPUs in order. A CPU polls at most one queue of an
/// interface, so there are at most as many queues as poll CPUs.
fn queue_cpus(i: usize, d: &DeviceConfig, cpus: &[usize]) -> Result<Vec<usize>, (String, String)> {
    let n = d.queues.len();
    let key = d.backend.queues_key();
    let refuse = |key: &str, why: String| Err(interface_error(i, key, why));
    if n > cpus.len() {
        return refuse(
            key,
            format!(
                "{n} queues on {} poll CPU(s) ([daemon] cpus = {cpus:?}); each CPU polls one \
                 queue of an interface: at most {}, or add CPUs to [daemon] cpus",
                cpus.len(),
                cpus.len()
            ),
        );
    }
    if d.queue_cpus.is_empty() {
        return Ok(cpus[..n].to_vec());
    }
    if d.queue_cpus.len() != n {
        return refuse(
            "cpus",
            format!(
                "{} CPU(s) for {n} queue(s); list one CPU per queue, in the order of `{key}`",
                d.queue_cpus.len()
            ),
        );
    }
    for (k, cpu) in d.queue_cpus.iter().enumerate() {
        if !cpus.contains(cpu) {
            return refuse(
                "cpus",
                format!(
                    "CPU {cpu} is not a poll CPU; the poll CPUs are {cpus:?} ([daemon] cpus): \
                     add {cpu} there or pick one of them"
                ),
            );
        }
        if d.queue_cpus[..k].contains(cpu) {
            return refuse(
                "cpus",
                format!("CPU {cpu} is listed twice; each CPU polls one queue of an interface"),
            );
        }
    }
    Ok(d.queue_cpus.clone())
}

impl RunConfig {
    /// The poll CPUs (`[daemon] cpus`), each with the part of this config it runs: its
    /// interfaces, and the routes and static ARP entries whose addresses are on their
    /// networks. Every CPU is a router of its own interfaces (polld does not hand frames
    /// between CPUs): a frame for a network on another CPU is dropped as `no_route`. An
    /// interface with queues is in the part of every CPU that polls one of them.
    pub fn per_cpu(&self) -> Vec<(usize, RunConfig)> {
        self.daemon
            .cpus
            .iter()
            .map(|&cpu| {
                let mine: Vec<bool> = self
                    .devices
                    .iter()
                    .map(|d| d.cpu == Some(cpu) || d.queue_cpus.contains(&cpu))
                    .collect();
                let on_mine = |ip: Ipv4Addr| {
                    self.packet
                        .interfaces
                        .iter()
                        .zip(&mine)
                        .any(|(ifc, &m)| m && ifc.addresses.iter().any(|a| a.contains(ip)))
                };
                let mut part = self.clone();
                part.devices = pick(&self.devices, &mine);
                for d in &mut part.devices {
                    d.this_queue = d.queue_cpus.iter().position(|&c| c == cpu);
                }
                part.packet.interfaces = pick(&self.packet.interfaces, &mine);
                part.packet.routes.retain(|r| on_mine(r.gateway));
                part.packet.static_arp.retain(|a| on_mine(a.ip));
                part.knobs = self
                    .knobs
                    .iter()
                    .filter_map(|k| self.knob_for_cpu(k, cpu, &part.devices))
                    .collect();
                (cpu, part)
            })
            .collect()
    }

    /// A `[knobs]` write as poll CPU `cpu` applies it: `net.ifpoll.N.*` as the
    /// `kern.polling.*` of CPU N only, `dev.<if>.*` on the CPU of that interface only,
    /// anything else (`kern.polling.*` included) on every CPU. A name no CPU would take
    /// goes to the first one, which refuses it by name.
    fn knob_for_cpu(
        &self,
        k: &KnobSetting,
        cpu: usize,
        mine: &[DeviceConfig],
    ) -> Option<KnobSetting> {
        let first = self.daemon.cpus.first() == Some(&cpu);
        if let Some((n, kern)) = polld_core::ifpoll::kern_name(&k.name) {
            if !self.daemon.cpus.contains(&n) {
                return first.then(|| k.clone());
            }
            return (n == cpu).then(|| KnobSetting {
                name: kern,
                ..k.clone()
            });
        }
        if let Some(rest) = k.name.strip_prefix("dev.") {
            let ifname = rest.rsplit_once('.').map_or(rest, |(i, _)| i);
            let known = self.devices.iter().any(|d| d.name == ifname);
            let here = mine.iter().any(|d| d.name == ifname);
            return (here || (!known && first)).then(|| k.clone());
        }
        Some(k.clone())
    }
}

/// The items of `all` whose flag in `mine` is set.
fn pick<T: Clone>(all: &[T], mine: &[bool]) -> Vec<T> {
    all.iter()
        .zip(mine)
        .filter(|(_, &m)| m)
        .map(|(x, _)| x.clone())
        .collect()
}

/// The error for an interface polld must open but which its namespace does not have.
pub fn no_such_interface(i: usize, dev: &DeviceConfig) -> String {
    let (place, fix) = match &dev.netns {
        Some(ns) => (
            format!("network namespace `{ns}`"),
            "check `netns` and the name (`ip -n NAME link`)".to_string(),
        ),
        None => (
            polld_dev::netns::describe_current(),
            "run polld in the namespace that has it (--netns NAME; `ip netns list`), or check \
             the name (`ip link`)"
                .to_string(),
        ),
    };
    format!(
        "interfaces[{i}].name: there is no interface {:?} in {place}; {fix}",
        dev.name
    )
}

/// Runs `read` in the interface's namespace (its `netns`, or polld's own); `None` when
/// that namespace cannot be entered (it is missing: `run` reports that by name).
pub fn in_namespace_of<T>(dev: &DeviceConfig, read: impl FnOnce() -> T) -> Option<T> {
    match &dev.netns {
        Some(name) => polld_dev::iface::Namespace::named(name)
            .and_then(|ns| ns.enter_while(&dev.name, read))
            .ok(),
        None => Some(read()),
    }
}

/// The MAC the kernel gives the interface, if it exists in its namespace.
fn kernel_mac(dev: &DeviceConfig) -> Option<polld_packet::wire::MacAddr> {
    in_namespace_of(dev, || polld_dev::iface::hardware_address(&dev.name).ok())
        .flatten()
        .map(polld_packet::wire::MacAddr)
}

/// The MTU the kernel gives the interface, if it exists in its namespace and the
/// forwarder can use it (68 and up, RFC 791's minimum).
fn kernel_mtu(dev: &DeviceConfig) -> Option<u16> {
    let mtu = in_namespace_of(dev, || polld_dev::iface::mtu(&dev.name).ok()).flatten()?;
    (mtu >= 68).then(|| mtu.min(u32::from(u16::MAX)) as u16)
}

fn line_of_offset(source: &str, offset: usize) -> usize {
    source[..offset.min(source.len())].matches('\n').count() + 1
}

/// The first line where `key` is written as a key (`key =`, `"key" =`) or a table header
/// (`[key]`, `[[key]]`).
fn key_line(source: &str, key: &str) -> Option<usize> {
    let quoted = format!("\"{key}\"");
    source
        .lines()
        .position(|l| {
            let l = l.trim_start();
            let assigned = l
                .strip_prefix(key)
                .or_else(|| l.strip_prefix(&quoted))
                .is_some_and(|r| r.trim_start().starts_with('='));
            let header = l.starts_with('[')
                && l.trim_start_matches('[')
                    .strip_prefix(key)
                    .is_some_and(|r| r.starts_with(']'));
            assigned || header
        })
        .map(|i| i + 1)
}

/// The line of a field path such as `routes[1].gateway` or `interfaces[0].addresses[2]`:
/// the deepest part of the path found in the document.
fn field_line(doc: &toml_edit::ImDocument<String>, source: &str, field: &str) -> Option<usize> {
    let mut item: &toml_edit::Item = doc.as_item();
    let mut span = None;
    for segment in field.split('.') {
        let (key, index) = match segment.split_once('[') {
            Some((k, rest)) => (k, rest.trim_end_matches(']').parse::<usize>().ok()),
            None => (segment, None),
        };
        let Some(next) = item.get(key) else { break };
        item = next;
        span = item.span().or(span);
        if let Some(i) = index {
            let Some(next) = item.get(i) else { break };
            item = next;
            span = item.span().or(span);
        }
    }
    span.map(|s| line_of_offset(source, s.start))
}

/// `value` deserialized as a `T` found at `prefix` (`interfaces[0]`, or "" for the top):
/// on error, the field path and the message [`described`] gives.
fn typed<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
) -> Result<T, (String, String)> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (prefix, inner.as_str()) {
            (p, ".") => p.to_string(),
            ("", i) => i.to_string(),
            (p, i) if i.starts_with('[') => format!("{p}{i}"),
            (p, i) => format!("{p}.{i}"),
        };
        let message = described(&path, e.into_inner().message());
        (path, message)
    })
}

/// A serde error at `path` (`interfaces[0].cpu`) as a user reads it: the field, what was
/// given and what is expected; an unknown key with the valid keys of its table and the
/// nearest one; a missing key with what to add.
fn described(path: &str, message: &str) -> String {
    let at = |text: String| match path {
        "" | "." => text,
        p => format!("{p}: {text}"),
    };
    let quoted = |text: &str| -> Vec<String> {
        text.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (key, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
        let key = key.trim_matches('`');
        // serde puts an unknown key in the path of the table that has it.
        let table = path
            .strip_suffix(key)
            .map(|t| t.trim_end_matches('.'))
            .unwrap_or(path);
        // The keys serde lists are one part's; the other part of the table reads the rest.
        let others: &[&str] = match table.strip_prefix("interfaces[") {
            _ if table.is_empty() => &RUN_FILE_KEYS,
            Some(rest) if rest.ends_with(']') && !rest.contains('.') => &DEVICE_KEYS,
            _ => &[],
        };
        let mut valid = quoted(expected);
        valid.extend(others.iter().map(|k| k.to_string()));
        valid.sort();
        valid.dedup();
        let place = match table {
            "" => "at the top of the file".to_string(),
            t => format!("in {t}"),
        };
        let nearest = valid
            .iter()
            .map(|k| (strsim::levenshtein(k, key), k))
            .filter(|(d, k)| *d <= (k.len() / 3).max(2))
            .min()
            .map(|(_, k)| format!("did you mean `{k}`? "))
            .unwrap_or_default();
        return format!(
            "unknown key `{key}` {place}; {nearest}the valid keys are {}",
            valid.join(", ")
        );
    }
    if let Some(key) = message.strip_prefix("missing field ") {
        let key = key.trim_matches('`');
        let what = match key {
            "name" => "name = \"IFNAME\", the interface this entry is for".to_string(),
            k => format!("{k} = ..."),
        };
        return at(format!("`{key}` is missing; add {what}"));
    }
    let leaf = path.rsplit('.').next().unwrap_or(path);
    let (leaf, element) = match leaf.split_once('[') {
        Some((k, _)) => (k, true),
        None => (leaf, false),
    };
    let expectation = match (leaf, element) {
        ("cpu", _) | ("cpus", true) => Some("a CPU number (0, 1, ...: a CPU polld may run on)"),
        ("cpus", false) => Some("a list of CPU numbers, e.g. [0, 1]"),
        ("queue", _) | ("queues", true) => Some("a receive queue number (0, 1, ...)"),
        ("queues", false) => {
            Some("a queue count or a list of queue numbers (queues = 2 or [0, 1])")
        }
        ("fanout", _) => Some("a number of sockets (2 or more)"),
        ("mtu", _) => Some("an MTU from 68 to 65535"),
        _ => None,
    };
    let given = ["invalid value: ", "invalid type: "]
        .iter()
        .find_map(|p| message.strip_prefix(p))
        .and_then(|rest| rest.split_once(", expected "));
    match (given, expectation) {
        (Some((value, expected)), expectation) => {
            // `integer `-1``, `string "x"`: the value as written.
            let value = match value.split_once(['`', '"']) {
                Some((_, v)) if value.contains('`') => v.trim_end_matches('`').to_string(),
                Some((kind, _)) => value[kind.len()..].to_string(),
                None => value.to_string(),
            };
            let expected = expectation
                .map(str::to_string)
                .unwrap_or_else(|| plain_type(expected));
            at(format!("{value} is not {expected}"))
        }
        // An untagged enum (`queues`) says only that nothing matched.
        (None, Some(expected)) if message.starts_with("data did not match") => {
            at(format!("not {expected}"))
        }
        _ => at(message.to_string()),
    }
}

/// A serde expectation in words: `u16` as "a whole number from 0 to 65535".
fn plain_type(expected: &str) -> String {
    let max = match expected {
        "u8" => u64::from(u8::MAX),
        "u16" => u64::from(u16::MAX),
        "u32" => u64::from(u32::MAX),
        "u64" | "usize" => return "a whole number, 0 or more".to_string(),
        "i64" | "i32" => return "a whole number".to_string(),
        "a sequence" => return "a list [..]".to_string(),
        other => return other.to_string(),
    };
    format!("a whole number from 0 to {max}")
}
