//! `polld run` config files for tests, built key by key and serialised as TOML, instead
//! of text written by hand: a value is always quoted and escaped as TOML wants, a table
//! always lands where it belongs, and a key the runtime does not know fails this module's
//! own test (it parses what it builds with `polld_runtime::config::RunConfig`).
//!
//! ```
//! use polld_testsupport::{ConfigFile, Interface};
//! let text = ConfigFile::new()
//!     .socket("/run/polld/test.sock")
//!     .knob("kern.polling.user_frac", 50)
//!     .interface(Interface::new("tap0").backend("tap").mode("polling").address("10.0.1.1/24"))
//!     .to_toml();
//! assert!(text.contains("[[interfaces]]\nname = \"tap0\"\nbackend = \"tap\""));
//! ```

use std::path::Path;

use polld_middleware::FaultConfig;
use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// A whole `polld run` file: `[daemon]`, `[knobs]` in the order given, the interfaces
/// and the static ARP entries.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ConfigFile {
    daemon: Daemon,
    #[serde(serialize_with = "in_order", skip_serializing_if = "Vec::is_empty")]
    knobs: Vec<(String, toml::Value)>,
    interfaces: Vec<Interface>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    static_arp: Vec<StaticArp>,
}

/// `[daemon]`.
#[derive(Clone, Debug, Default, Serialize)]
struct Daemon {
    #[serde(skip_serializing_if = "Option::is_none")]
    socket: Option<String>,
}

/// One `[[interfaces]]` entry: the device's keys, then the packet stage's.
#[derive(Clone, Debug, Serialize)]
pub struct Interface {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mac: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    addresses: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fault: Option<FaultConfig>,
}

/// One `[[static_arp]]` entry.
#[derive(Clone, Debug, Serialize)]
struct StaticArp {
    ip: String,
    mac: String,
}

/// The knobs as a table in the order they were given: `polld run` applies them in file
/// order.
fn in_order<S: Serializer>(knobs: &[(String, toml::Value)], s: S) -> Result<S::Ok, S::Error> {
    let mut map = s.serialize_map(Some(knobs.len()))?;
    for (name, value) in knobs {
        map.serialize_entry(name, value)?;
    }
    map.end()
}

impl ConfigFile {
    pub fn new() -> ConfigFile {
        ConfigFile::default()
    }

    /// `[daemon] socket`: the control socket.
    pub fn socket(mut self, path: impl AsRef<Path>) -> ConfigFile {
        self.daemon.socket = Some(path.as_ref().display().to_string());
        self
    }

    /// A `[knobs]` write, after those given before it.
    pub fn knob(mut self, name: &str, value: impl Into<toml::Value>) -> ConfigFile {
        self.knobs.push((name.to_string(), value.into()));
        self
    }

    /// The next `[[interfaces]]` entry.
    pub fn interface(mut self, interface: Interface) -> ConfigFile {
        self.interfaces.push(interface);
        self
    }

    /// A `[[static_arp]]` entry: `ip` is at `mac`.
    pub fn static_arp(mut self, ip: impl ToString, mac: &str) -> ConfigFile {
        self.static_arp.push(StaticArp {
            ip: ip.to_string(),
            mac: mac.to_string(),
        });
        self
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a config file serialises")
    }
}

impl Interface {
    /// An entry for interface `name`, every other key left to its default.
    pub fn new(name: &str) -> Interface {
        Interface {
            name: name.to_string(),
            backend: None,
            mode: None,
            mac: None,
            addresses: Vec::new(),
            fault: None,
        }
    }

    /// `backend`: `af_packet`, `af_xdp` or `tap`.
    pub fn backend(mut self, backend: &str) -> Interface {
        self.backend = Some(backend.to_string());
        self
    }

    /// `mode`: `interrupt`, `polling`, `adaptive`, `busy` or `auto`.
    pub fn mode(mut self, mode: &str) -> Interface {
        self.mode = Some(mode.to_string());
        self
    }

    /// `mac`, `02:00:00:00:01:01`.
    pub fn mac(mut self, mac: &str) -> Interface {
        self.mac = Some(mac.to_string());
        self
    }

    /// One more of its `addresses`, with its prefix length (`10.0.1.1/24`).
    pub fn address(mut self, cidr: &str) -> Interface {
        self.addresses.push(cidr.to_string());
        self
    }

    /// `[interfaces.fault]`: faults injected on it (a test tool).
    pub fn fault(mut self, fault: FaultConfig) -> Interface {
        self.fault = Some(fault);
        self
    }
}

/// A config file written elsewhere (the testbed's), changed key by key. Its TOML form comes
/// back with its keys sorted and without comments, so a file with `[knobs]`, applied in
/// file order, is refused.
#[derive(Clone, Debug)]
pub struct Edit(toml::Table);

impl Edit {
    pub fn of(text: &str) -> Edit {
        let file: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(
            !file.contains_key("knobs"),
            "Edit would sort the [knobs], which apply in file order: build the file with \
             ConfigFile instead\n{text}"
        );
        Edit(file)
    }

    /// `[daemon] key = value`.
    pub fn daemon(mut self, key: &str, value: impl Into<toml::Value>) -> Edit {
        let daemon = self.0.entry("daemon").or_insert(toml::Table::new().into());
        daemon
            .as_table_mut()
            .expect("[daemon] is a table")
            .insert(key.to_string(), value.into());
        self
    }

    /// `[interfaces.fault]` of the entry of interface `name`.
    pub fn fault(mut self, name: &str, fault: FaultConfig) -> Edit {
        let entry = self
            .0
            .get_mut("interfaces")
            .and_then(|v| v.as_array_mut())
            .and_then(|list| {
                list.iter_mut()
                    .filter_map(|e| e.as_table_mut())
                    .find(|e| e.get("name").and_then(|n| n.as_str()) == Some(name))
            })
            .unwrap_or_else(|| panic!("no [[interfaces]] entry for {name}"));
        let fault = toml::Value::try_from(fault).expect("a fault table");
        entry.insert("fault".to_string(), fault);
        self
    }

    /// The file's text.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.0).expect("a config file serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use polld_runtime::config::RunConfig;

    #[test]
    fn what_it_builds_is_a_config_the_runtime_reads_as_built() {
        let text = ConfigFile::new()
            .socket("/tmp/a \"quoted\" dir/polld.sock")
            .knob("kern.polling.user_frac", 17)
            .knob("kern.polling.controller", "time")
            .interface(
                Interface::new("eth10")
                    .backend("af_xdp")
                    .mode("adaptive")
                    .address("10.9.1.1/24")
                    .mac("02:00:00:00:0a:01"),
            )
            .interface(
                Interface::new("eth11")
                    .address("10.9.2.1/24")
                    .mac("02:00:00:00:0b:01")
                    .fault(FaultConfig {
                        seed: 3,
                        tx_fail: 100,
                        ..FaultConfig::default()
                    }),
            )
            .static_arp("10.9.2.2", "02:00:00:00:0b:02")
            .to_toml();
        let c = RunConfig::parse(Path::new("built.toml"), &text)
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(
            c.daemon.socket.as_deref(),
            Some(Path::new("/tmp/a \"quoted\" dir/polld.sock"))
        );
        let knobs: Vec<(&str, &str)> = c
            .knobs
            .iter()
            .map(|k| (k.name.as_str(), k.value.as_str()))
            .collect();
        assert_eq!(
            knobs,
            [
                ("kern.polling.user_frac", "17"),
                ("kern.polling.controller", "time")
            ],
            "in the order given"
        );
        assert_eq!(c.devices.len(), 2);
        assert_eq!(c.devices[0].mode, polld_core::Mode::Adaptive);
        assert_eq!(c.devices[1].mode, polld_core::Mode::Interrupt);
        assert_eq!(c.devices[1].fault.map(|f| f.tx_fail), Some(100));
        assert_eq!(
            c.packet.interfaces[1].addresses[0].to_string(),
            "10.9.2.1/24"
        );
        assert_eq!(c.packet.static_arp[0].ip.to_string(), "10.9.2.2");
    }

    #[test]
    fn an_edit_changes_the_keys_it_names_and_keeps_the_rest() {
        let text = ConfigFile::new()
            .socket("/tmp/polld.sock")
            .interface(
                Interface::new("veth1")
                    .mac("02:00:00:00:01:01")
                    .address("10.0.1.1/24"),
            )
            .interface(
                Interface::new("veth2")
                    .mac("02:00:00:00:02:01")
                    .address("10.0.2.1/24"),
            )
            .static_arp("10.0.2.2", "02:00:00:00:02:02")
            .to_toml();
        let fault = FaultConfig {
            seed: 4,
            rx_drop: 50,
            ..FaultConfig::default()
        };
        let edited = Edit::of(&format!("# a comment\n{text}"))
            .daemon("af_xdp_shared_umem", false)
            .fault("veth2", fault)
            .to_toml();
        let c = RunConfig::parse(Path::new("edited.toml"), &edited)
            .unwrap_or_else(|e| panic!("{e}\n{edited}"));
        assert_eq!(c.daemon.af_xdp_shared_umem, Some(false));
        assert_eq!(
            c.daemon.socket.as_deref(),
            Some(Path::new("/tmp/polld.sock"))
        );
        assert_eq!(
            (c.devices[0].fault, c.devices[1].fault),
            (None, Some(fault))
        );
        assert_eq!(
            c.packet.interfaces[1].addresses[0].to_string(),
            "10.0.2.1/24"
        );
        assert_eq!(c.packet.static_arp.len(), 1);
    }

    #[test]
    #[should_panic(expected = "Edit would sort the [knobs]")]
    fn an_edit_refuses_a_file_with_knobs() {
        Edit::of("[knobs]\n\"kern.polling.user_frac\" = 17\n");
    }
}
