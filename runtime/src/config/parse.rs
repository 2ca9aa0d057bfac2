//! Reading the file: the daemon's tables and each interface's device keys taken out,
//! the rest handed to the packet stage, everything validated into a [`RunConfig`]. Each
//! table, interface entry, list entry and knob is read on its own, so that one mistake
//! does not hide the next; the checks that read the whole file run once each part was
//! read whole.

use std::path::Path;

use polld_middleware::FaultConfig;
use polld_packet::config::{InterfaceConfig, RouteConfig, StaticArpConfig};
use polld_packet::{PacketConfig, Rule};

use super::cpus::{assign_cpus, check_shared_umem};
use super::errors::{locate, typed_all, RunConfigErrors};
use super::keys::{DeviceKeys, DEVICE_KEYS};
use super::locate::{field_on_line, line_of_offset};
use super::netns::{
    in_namespace_of, kernel_addresses, kernel_forwarding, kernel_mac, kernel_mtu, no_such_interface,
};
use super::queues::queue_keys;
use super::{Backend, DaemonConfig, DeviceConfig, RunConfig, RunConfigError};

impl RunConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<RunConfig, RunConfigErrors> {
        let whole = |message: String| RunConfigError {
            path: path.to_path_buf(),
            line: None,
            message,
        };
        let bytes = std::fs::read(path).map_err(|e| {
            whole(format!(
                "file: cannot read the config file: {e}; check the path given to -c"
            ))
        })?;
        let source =
            String::from_utf8(bytes).map_err(|e| not_utf8(path, e.as_bytes(), e.utf8_error()))?;
        RunConfig::parse(path, &source)
    }

    /// Parses and validates `source`, reporting every error against `path`.
    pub fn parse(path: &Path, source: &str) -> Result<RunConfig, RunConfigErrors> {
        let doc = source
            .parse::<toml_edit::ImDocument<String>>()
            .map_err(|e| syntax_error(path, source, e.span(), e.message()))?;
        let top: toml::Table = toml::from_str(source)
            .map_err(|e: toml::de::Error| syntax_error(path, source, e.span(), e.message()))?;
        let mut report = Report {
            path,
            source,
            doc: &doc,
            errors: Vec::new(),
        };
        let config = report.config(top);
        match (RunConfigErrors::new(report.errors), config) {
            (None, Some(config)) => Ok(config),
            (Some(errors), _) => Err(errors),
            (None, None) => unreachable!("a configuration is refused with its errors"),
        }
    }
}

/// A file that is not UTF-8: where its first byte that is not.
fn not_utf8(path: &Path, bytes: &[u8], e: std::str::Utf8Error) -> RunConfigError {
    let at = e.valid_up_to();
    let text = String::from_utf8_lossy(bytes);
    let before = String::from_utf8_lossy(&bytes[..at]);
    let line = line_of_offset(&before, before.len());
    let column = at - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    RunConfigError {
        path: path.to_path_buf(),
        line: Some(line),
        message: format!(
            "{}: the file is not UTF-8: byte {:#04x} at line {line}, column {column} is not \
             a UTF-8 character; save the file as UTF-8 (`iconv -f latin1 -t utf-8 FILE`)",
            field_on_line(&text, line),
            bytes[at]
        ),
    }
}

/// A TOML syntax error: the field of its line, what the parser says, and what it
/// expected there.
fn syntax_error(
    path: &Path,
    source: &str,
    span: Option<std::ops::Range<usize>>,
    message: &str,
) -> RunConfigErrors {
    let mut line = span.map_or(1, |s| line_of_offset(source, s.start));
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let problem = lines.next().unwrap_or("invalid TOML");
    if problem.contains("array") {
        // The parser fails where the list should have ended: point at where it starts.
        let opened = |l: &str| l.contains("= [") && l.matches('[').count() > l.matches(']').count();
        let before: Vec<&str> = source.lines().take(line).collect();
        if let Some(start) = before.iter().rposition(|l| opened(l)) {
            line = start + 1;
        }
    }
    let expected: Vec<&str> = lines.collect();
    let fix = match expected.is_empty() {
        true => "write it as TOML: key = value, a string in quotes, a list in [ ], a table \
                 header on a line of its own"
            .to_string(),
        false => format!(
            "{} (a string in quotes, a list in [ ], a table header on a line of its own)",
            expected.join(", ")
        ),
    };
    RunConfigError {
        path: path.to_path_buf(),
        line: Some(line),
        message: format!(
            "{}: TOML syntax error: {problem}; {fix}",
            field_on_line(source, line)
        ),
    }
    .into()
}

/// The errors of one file, each at its line.
pub(super) struct Report<'a> {
    pub(super) path: &'a Path,
    pub(super) source: &'a str,
    pub(super) doc: &'a toml_edit::ImDocument<String>,
    pub(super) errors: Vec<RunConfigError>,
}

/// The `[[interfaces]]` entries, read.
pub(super) struct Interfaces {
    pub(super) devices: Vec<DeviceConfig>,
    /// Each entry's keys for the packet stage.
    stage: Vec<toml::Value>,
    /// Whether each entry gives `mtu` (else it is the kernel's) and `mode`.
    explicit_mtu: Vec<bool>,
    pub(super) explicit_mode: Vec<bool>,
    /// Whether every entry is a table (`[interfaces]`, one table, counts as one entry).
    whole: bool,
}

impl Report<'_> {
    /// `message` about `field`, at its line.
    pub(super) fn at_field(&mut self, field: &str, message: String) {
        self.at_line(locate(self.doc, self.source, field), message);
    }

    /// `message` at `line` (`None`: the file as a whole).
    pub(super) fn at_line(&mut self, line: Option<usize>, message: String) {
        self.errors.push(RunConfigError {
            path: self.path.to_path_buf(),
            line,
            message,
        });
    }

    /// Each `(field, message)` at its field's line.
    pub(super) fn all(&mut self, problems: Vec<(String, String)>) {
        for (field, message) in problems {
            self.at_field(&field, message);
        }
    }

    /// The whole file read, with every error reported; `None` when there is one.
    fn config(&mut self, mut top: toml::Table) -> Option<RunConfig> {
        let daemon = top.remove("daemon").map(|v| self.daemon(v));
        let knobs = top.remove("knobs").map(|v| self.knobs_table(v));
        let interfaces = self.interfaces(top.remove("interfaces"));
        let (profile, knobs) = self.knobs(knobs.unwrap_or_default());
        let daemon = daemon.unwrap_or(Some(DaemonConfig::default()));
        let mut packet = self.packet(top, &interfaces.stage);
        self.mode_knobs(&interfaces, &knobs);
        // The checks below read the daemon, the devices and the stage together: they run
        // when each was read whole, as a key taken out for its mistake would make them
        // report what is not wrong.
        let (Some(daemon), Some(packet), false) = (
            daemon,
            packet.as_mut(),
            !interfaces.whole || interfaces.devices.len() < interfaces.stage.len(),
        ) else {
            return None;
        };
        let mut devices = interfaces.devices;
        let unread = self.read_the_kernel(&devices, packet, &interfaces.explicit_mtu);
        self.choose_tables(&mut devices, packet);
        // An interface whose MAC could not be read is reported for why, not for the MAC.
        let unread_mac = |field: &str| {
            unread
                .iter()
                .any(|i| field == format!("interfaces[{i}].mac"))
        };
        for e in packet
            .problems()
            .into_iter()
            .filter(|e| !unread_mac(&e.field))
        {
            self.at_field(&e.field, format!("{}: {}", e.field, e.message));
        }
        if let Err((field, message)) = assign_cpus(&daemon, &mut devices, packet) {
            self.at_field(&field, message);
        }
        if let Err(message) = check_shared_umem(&daemon, &devices) {
            self.at_field("daemon.af_xdp_shared_umem", message);
        }
        for (field, message) in check_pass_local(&devices, packet.mode) {
            self.at_field(&field, message);
        }
        self.errors.is_empty().then(|| RunConfig {
            path: self.path.to_path_buf(),
            daemon,
            profile,
            knobs,
            devices,
            packet: packet.clone(),
            source: self.source.to_string(),
        })
    }

    /// Where the router's tables come from (`tables`), decided when the file does not
    /// say: the kernel's where every interface is the kernel's (AF_PACKET, AF_XDP) and
    /// the file writes no tables of its own, else the file's. The kernel's tables are
    /// one namespace's and a TAP is polld's own link, so `tables = "kernel"` needs every
    /// interface in one namespace and none a TAP. With the kernel's tables an AF_XDP
    /// interface passes the host's frames to the kernel unless the file says
    /// `pass_local = false`.
    fn choose_tables(&mut self, devices: &mut [DeviceConfig], packet: &mut PacketConfig) {
        use polld_packet::Tables;
        let kernels = devices.iter().all(|d| d.backend != Backend::Tap);
        let writes_tables = !packet.routes.is_empty()
            || !packet.static_arp.is_empty()
            || packet.interfaces.iter().any(|i| !i.addresses.is_empty());
        let router = packet.mode == polld_packet::Mode::Router;
        match packet.tables {
            None if router && kernels && !writes_tables => packet.tables = Some(Tables::Kernel),
            None if router => packet.tables = Some(Tables::File),
            _ => {}
        }
        if !packet.kernel_tables() {
            return;
        }
        for dev in devices.iter_mut().filter(|d| d.backend == Backend::AfXdp) {
            dev.pass_local.get_or_insert(true);
        }
        if let Some(tap) = devices.iter().find(|d| d.backend == Backend::Tap) {
            self.at_field(
                "tables",
                format!(
                    "tables: \"kernel\" takes the tables of the interfaces' kernel, and {} is \
                     a TAP, polld's own link; set tables = \"file\" and write the addresses \
                     and routes here, or use af_packet or af_xdp",
                    tap.name
                ),
            );
        }
        if let Some(other) = devices.iter().find(|d| d.netns != devices[0].netns) {
            self.at_field(
                "tables",
                format!(
                    "tables: the kernel's tables are one namespace's, and {} is in another \
                     namespace than {}; put every interface in one namespace (`netns`), or set \
                     tables = \"file\" and write the addresses and routes here",
                    other.name, devices[0].name
                ),
            );
        }
    }

    /// `[daemon]`, every mistake of it reported; `None` if it has one.
    fn daemon(&mut self, value: toml::Value) -> Option<DaemonConfig> {
        if !value.is_table() {
            self.at_field(
                "daemon",
                format!(
                    "daemon: {} is not a table; write the header [daemon] on a line of its \
                     own and its keys below it",
                    kind_of(&value)
                ),
            );
            return None;
        }
        let empty_cpus = value
            .get("cpus")
            .and_then(toml::Value::as_array)
            .is_some_and(|a| a.is_empty());
        let (daemon, problems) = typed_all::<DaemonConfig>(value, "daemon");
        let failed = !problems.is_empty();
        self.all(problems);
        if let Some(daemon) = &daemon {
            self.daemon_values(daemon);
        }
        if empty_cpus {
            self.at_field(
                "daemon.cpus",
                "daemon.cpus: an empty list starts no poll thread; list the poll CPUs, e.g. \
                 cpus = [0, 1], or remove `cpus` for one poll thread"
                    .to_string(),
            );
        }
        daemon.filter(|_| !failed && !empty_cpus)
    }

    /// The `[daemon]` values each checked on its own.
    fn daemon_values(&mut self, daemon: &DaemonConfig) {
        if let Some(socket) = daemon.socket.as_ref().filter(|s| s.is_relative()) {
            self.at_field(
                "daemon.socket",
                format!(
                    "daemon.socket: {socket:?} is a relative path, which would depend on the \
                     directory polld starts in; write an absolute path, e.g. \
                     \"/run/polld/polld.sock\""
                ),
            );
        }
        if let Some(addr) = daemon.metrics {
            if !addr.ip().is_loopback() && !daemon.metrics_public {
                self.at_field(
                    "daemon.metrics",
                    format!(
                        "daemon.metrics: {addr} is not a loopback address, and /metrics has no \
                         authentication; use \"127.0.0.1:{}\", or add metrics_public = true \
                         to [daemon] to serve every counter to the network",
                        addr.port()
                    ),
                );
            }
        }
    }

    /// The `[[interfaces]]` entries: each one's device keys read and checked; an entry
    /// with a mistake has no device (so `devices` is shorter than `stage`).
    fn interfaces(&mut self, value: Option<toml::Value>) -> Interfaces {
        let mut whole = true;
        let entries = match value {
            None => Vec::new(),
            Some(toml::Value::Array(entries)) => entries,
            Some(table @ toml::Value::Table(_)) => {
                self.at_field(
                    "interfaces",
                    "interfaces: [interfaces] makes one table, and interfaces is a list with \
                     an entry per interface; write the header with double brackets: \
                     [[interfaces]], once before each interface's keys"
                        .to_string(),
                );
                vec![table]
            }
            Some(other) => {
                self.at_field(
                    "interfaces",
                    format!(
                        "interfaces: {} is not a list of tables; write [[interfaces]], then \
                         name = \"IFNAME\" and its other keys, once per interface",
                        kind_of(&other)
                    ),
                );
                whole = false;
                Vec::new()
            }
        };
        let mut read = Interfaces {
            devices: Vec::new(),
            stage: Vec::new(),
            explicit_mtu: Vec::new(),
            explicit_mode: Vec::new(),
            whole,
        };
        for (i, entry) in entries.into_iter().enumerate() {
            read.explicit_mtu.push(entry.get("mtu").is_some());
            read.explicit_mode.push(entry.get("mode").is_some());
            let toml::Value::Table(entry) = entry else {
                read.whole = false;
                self.at_field(
                    &format!("interfaces[{i}]"),
                    format!(
                        "interfaces[{i}]: {} is not a table; write [[interfaces]] and the \
                         interface's keys below it",
                        kind_of(&entry)
                    ),
                );
                continue;
            };
            let (device_part, stage_part): (toml::Table, toml::Table) = entry
                .clone()
                .into_iter()
                .partition(|(k, _)| DEVICE_KEYS.contains(&k.as_str()));
            read.stage.push(toml::Value::Table(stage_part));
            if let Some(device) = self.device(i, &entry, device_part) {
                read.devices.push(device);
            }
        }
        read
    }

    /// The device of `[[interfaces]]` entry `i`, if its device keys are right.
    fn device(
        &mut self,
        i: usize,
        entry: &toml::Table,
        device_part: toml::Table,
    ) -> Option<DeviceConfig> {
        let name = entry
            .get("name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let (keys, problems) = typed_all::<DeviceKeys>(
            toml::Value::Table(device_part.clone()),
            &format!("interfaces[{i}]"),
        );
        let failed = !problems.is_empty();
        self.all(problems);
        let keys = keys.filter(|_| !failed)?;
        if let Some(Err(e)) = keys.fault.as_ref().map(FaultConfig::validate) {
            let field = format!("interfaces[{i}].fault.{}", e.field);
            self.at_field(&field, format!("interfaces[{i}].{e}"));
            return None;
        }
        let queues = match queue_keys(i, &keys, &device_part) {
            Ok(queues) => queues,
            Err((field, message)) => {
                self.at_field(&field, message);
                return None;
            }
        };
        Some(DeviceConfig {
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
            pass_local: keys.pass_local,
        })
    }

    /// The packet stage's part: the top-level tables and each interface's stage keys.
    /// Each entry of its lists is read on its own, so that every mistake is reported.
    fn packet(&mut self, mut top: toml::Table, interfaces: &[toml::Value]) -> Option<PacketConfig> {
        top.insert("interfaces".into(), toml::Value::Array(interfaces.to_vec()));
        let mut failed = false;
        for key in ["interfaces", "routes", "static_arp", "rules"] {
            let Some(toml::Value::Array(items)) = top.get(key) else {
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let prefix = format!("{key}[{i}]");
                let problems = match key {
                    "interfaces" => typed_all::<InterfaceConfig>(item.clone(), &prefix).1,
                    "routes" => typed_all::<RouteConfig>(item.clone(), &prefix).1,
                    "static_arp" => typed_all::<StaticArpConfig>(item.clone(), &prefix).1,
                    _ => typed_all::<Rule>(item.clone(), &prefix).1,
                };
                failed |= !problems.is_empty();
                self.all(problems);
            }
            if failed {
                // Read on their own above: the rest of the stage is read without them.
                top.insert(key.into(), toml::Value::Array(Vec::new()));
            }
        }
        let (packet, problems) = typed_all::<PacketConfig>(toml::Value::Table(top), "");
        failed |= !problems.is_empty();
        self.all(problems);
        packet.filter(|_| !failed)
    }

    /// What the file leaves to the kernel (an interface's MAC and MTU) read from it, and
    /// what the file asks of an interface checked against it: its name, its namespace,
    /// and that a TAP's addresses are not the kernel's on its other end. Returns the
    /// interfaces refused before their MAC could be read.
    fn read_the_kernel(
        &mut self,
        devices: &[DeviceConfig],
        packet: &mut PacketConfig,
        explicit_mtu: &[bool],
    ) -> Vec<usize> {
        let mut unread = Vec::new();
        for (i, dev) in devices.iter().enumerate() {
            let field = format!("interfaces[{i}].name");
            if let Some(why) = bad_name(&dev.name) {
                self.at_field(&field, format!("{field}: {why}"));
                unread.push(i);
                continue;
            }
            let exists = in_namespace_of(dev, || polld_dev::iface::exists(&dev.name));
            let router = packet.mode == polld_packet::Mode::Router;
            let no_mac = router && packet.interfaces[i].mac.is_none();
            match (&dev.netns, &exists) {
                // The MAC defaults to the interface's own: say why there is none.
                (Some(ns), None) if no_mac => {
                    let field = format!("interfaces[{i}].netns");
                    self.at_field(
                        &field,
                        format!(
                            "{field}: there is no network namespace {ns:?}, so the \
                             interface's MAC cannot be read from it; fix the name (`ip netns \
                             list`), or create it first (`ip netns add {ns}`)"
                        ),
                    );
                    unread.push(i);
                    continue;
                }
                (_, Some(Ok(false))) if no_mac && dev.backend != Backend::Tap => {
                    self.at_field(&field, no_such_interface(i, dev));
                    unread.push(i);
                    continue;
                }
                _ => {}
            }
            if no_mac {
                packet.interfaces[i].mac = kernel_mac(dev);
            }
            if !explicit_mtu[i] {
                if let Some(mtu) = kernel_mtu(dev) {
                    packet.interfaces[i].mtu = mtu;
                }
            }
            if dev.backend == Backend::AfPacket && matches!(exists, Some(Ok(true))) {
                if let Some(message) = forwarded_twice(i, dev) {
                    self.at_field(&format!("interfaces[{i}].backend"), message);
                }
            }
            // A TAP's kernel end is polld's neighbour on the link: an address it has
            // would be on the link twice. (AF_PACKET and AF_XDP share the interface with
            // the kernel, whose address there is the testbed's kernel-forwarding set-up.)
            if dev.backend == Backend::Tap && matches!(exists, Some(Ok(true))) {
                let kernel = kernel_addresses(dev);
                for (k, net) in packet.interfaces[i].addresses.iter().enumerate() {
                    if kernel.contains(&net.addr()) {
                        let field = format!("interfaces[{i}].addresses[{k}]");
                        self.at_field(
                            &field,
                            format!(
                                "{field}: the kernel already has {} on {}, the TAP's other \
                                 end, so the link would have it twice; give polld another \
                                 address of {}, or take it from the kernel (`ip addr del {net} \
                                 dev {}`)",
                                net.addr(),
                                dev.name,
                                net.network(),
                                dev.name
                            ),
                        );
                    }
                }
            }
        }
        unread
    }
}

/// Why AF_PACKET cannot poll `dev`, if the kernel forwards what it receives there: the
/// kernel keeps every frame AF_PACKET copies to polld, so each packet would be forwarded
/// twice, once by each.
fn forwarded_twice(i: usize, dev: &DeviceConfig) -> Option<String> {
    let on = kernel_forwarding(dev);
    if on.is_empty() {
        return None;
    }
    let place = dev
        .netns
        .as_ref()
        .map(|ns| format!(" in network namespace {ns:?}"))
        .unwrap_or_default();
    let exec = dev
        .netns
        .as_ref()
        .map(|ns| format!("ip netns exec {ns} "))
        .unwrap_or_default();
    let fixes: Vec<String> = on
        .iter()
        .map(|sysctl| format!("`{exec}sysctl -w {sysctl}=0`"))
        .collect();
    let set: Vec<String> = on.iter().map(|sysctl| format!("{sysctl} = 1")).collect();
    Some(format!(
        "interfaces[{i}].backend: the kernel forwards what it receives on {:?}{place} ({}), \
         and AF_PACKET reads a copy of each frame the kernel keeps, so every packet would be \
         forwarded twice; turn the kernel's forwarding there off ({}), or use backend = \
         \"af_xdp\", which takes the frames from the kernel",
        dev.name,
        set.join(", "),
        fixes.join(", ")
    ))
}

/// `pass_local` where it means something: an AF_XDP interface of a router (a bridge
/// forwards every frame, the host's included).
fn check_pass_local(devices: &[DeviceConfig], mode: polld_packet::Mode) -> Vec<(String, String)> {
    let refused = |dev: &DeviceConfig| match (dev.backend, mode) {
        (Backend::AfXdp, polld_packet::Mode::Router) => None,
        (Backend::AfXdp, _) => Some(
            "the bridge forwards every frame, the host's included, so none is left for the \
             kernel; remove `pass_local` or set mode = \"router\""
                .to_string(),
        ),
        (backend, _) => Some(format!(
            "backend {:?} takes no frame from the kernel (AF_PACKET reads a copy, a TAP is \
             polld's own), so there is nothing to pass; remove `pass_local`, or use \
             backend = \"af_xdp\"",
            backend.name()
        )),
    };
    devices
        .iter()
        .filter(|dev| dev.pass_local == Some(true))
        .filter_map(|dev| {
            let field = format!("interfaces[{}].pass_local", dev.entry);
            refused(dev).map(|why| (field.clone(), format!("{field}: {why}")))
        })
        .collect()
}

/// Why `name` cannot be a Linux interface polld polls, if it cannot.
fn bad_name(name: &str) -> Option<String> {
    /// IFNAMSIZ, less the terminating NUL.
    const MAX: usize = 15;
    if name.len() > MAX {
        return Some(format!(
            "{name:?} is {} bytes long, and a Linux interface name has at most {MAX} \
             (IFNAMSIZ); use the interface's real name (`ip link`), {MAX} bytes at most",
            name.len()
        ));
    }
    if name == "lo" {
        return Some(
            "\"lo\" is the loopback interface, which carries no frames to poll; name a \
             network interface (`ip link`)"
                .to_string(),
        );
    }
    None
}

/// What a TOML value is, in words.
pub(super) fn kind_of(value: &toml::Value) -> &'static str {
    match value {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a fractional number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "a list",
        toml::Value::Table(_) => "a table",
    }
}
