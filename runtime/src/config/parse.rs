//! Reading the file: the daemon's tables and each interface's device keys taken out,
//! the rest handed to the packet stage, everything validated into a [`RunConfig`].

use std::path::Path;

use polld_core::knobs::PROFILE_KEY;
use polld_core::Profile;
use polld_middleware::FaultConfig;
use polld_packet::{ConfigError, PacketConfig};

use super::cpus::{assign_cpus, check_shared_umem};
use super::errors::{described, typed};
use super::keys::{DeviceKeys, RunFile, DEVICE_KEYS};
use super::locate::{field_line, key_line, line_of_offset};
use super::netns::{in_namespace_of, kernel_mac, kernel_mtu, no_such_interface};
use super::queues::queue_keys;
use super::{Backend, DeviceConfig, KnobSetting, RunConfig, RunConfigError};

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
}
