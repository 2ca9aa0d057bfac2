//! The Prometheus text exposition format (version 0.0.4) of a running polld's entries.
//!
//! [`exposition_of`] renames the typed readings of a [`Request::Snapshot`](crate::proto::Request::Snapshot) the Prometheus
//! way:
//!
//! ```text
//! dev.veth1.rx_packets           polld_interface_rx_packets_total{interface="veth1"}
//! dev.veth1.drops.ttl_exceeded   polld_interface_drops_total{interface="veth1",reason="ttl_exceeded"}
//! dev.veth2.tx_drops.too_long    polld_interface_tx_drops_total{interface="veth2",reason="too_long"}
//! dev.veth1.mode                 polld_interface_mode{interface="veth1",mode="polling"} 1 (0 for the others)
//! dev.veth1.link                 polld_interface_link{interface="veth1",state="up"} 1 (0 for the others)
//! dev.veth1.queued               polld_interface_queued{interface="veth1"}          (a gauge)
//! kern.polling.burst             polld_polling_burst                                 (a gauge)
//! kern.polling.lost_polls        polld_polling_lost_polls_total                      (a counter)
//! kern.polling.controller        polld_polling_controller{controller="classic"} 1
//! net.inet.ip.intr_queue_len     polld_ip_intr_queue_len
//! polld.work_ns                  polld_device_work_seconds_total                     (seconds)
//! polld.kernel_rx_ns             polld_kernel_rx_seconds_total                       (seconds)
//! polld.kernel_rx_found_by       polld_kernel_rx_found_by{method="netlink"} 1
//! polld.cpu                      polld_poll_thread_cpu
//! net.ifpoll.1.rx.burst          polld_ifpoll_burst{cpu="1"}                         ([daemon] cpus)
//! polld.percpu.1.work_ns         polld_percpu_device_work_seconds_total{cpu="1"}
//! ```
//!
//! Each family's TYPE comes from the entry's declaration ([`polld_core::sysctl`]):
//! counters end in `_total`, gauges and knobs do not; its HELP is the entry's
//! description. A declaration may say more ([`polld_core::sysctl::Metric`]): the daemon's
//! time accounts name their family in seconds and its help, `polld.cpu` its own name,
//! `polld.kernel_rx_found_by` its label ([`crate::daemon`]); the drops by reason take
//! their label from their family ([`polld_core::dataplane::INTERFACE_FAMILIES`]).

use std::fmt::Write as _;

use polld_core::dataplane::{IfSettings, DEV_NODE, INTERFACE_FAMILIES, IP_NODE};
use polld_core::ifpoll::kern_name;
use polld_core::sysctl::Metric;
use polld_core::{Kind, Knobs, LinkState, Mode, Reading, SysctlEntry};

use crate::daemon::{daemon_entry, metric_of, split_per_cpu};
use crate::server::answer::typed;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A family's Prometheus type: what the entry's declaration says it is (a knob is a
/// level you set, so a gauge).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Type {
    Counter,
    Gauge,
}

impl From<Kind> for Type {
    fn from(kind: Kind) -> Type {
        match kind {
            Kind::Counter => Type::Counter,
            Kind::Knob | Kind::Gauge => Type::Gauge,
        }
    }
}

/// One metric family being assembled: its samples in order of appearance.
struct Family {
    name: String,
    help: String,
    kind: Type,
    samples: Vec<(Vec<(&'static str, String)>, String)>,
}

/// The families in first-seen order (Prometheus wants each family's samples together).
#[derive(Default)]
pub(super) struct Families(Vec<Family>);

impl Families {
    /// The family `name`, added without samples if it is new; its index.
    pub(super) fn declare(&mut self, name: String, help: &str, kind: Type) -> usize {
        match self.0.iter().position(|f| f.name == name) {
            Some(i) => i,
            None => {
                self.0.push(Family {
                    name,
                    help: help.to_string(),
                    kind,
                    samples: Vec::new(),
                });
                self.0.len() - 1
            }
        }
    }

    /// A sample of the family `name`, declared by its first sample.
    pub(super) fn add(
        &mut self,
        name: String,
        help: &str,
        kind: Type,
        labels: Vec<(&'static str, String)>,
        value: String,
    ) {
        let i = self.declare(name, help, kind);
        self.0[i].samples.push((labels, value));
    }

    /// The text exposition of every family, in order.
    pub(super) fn render(&self) -> String {
        let mut text = String::new();
        for family in &self.0 {
            let kind = match family.kind {
                Type::Counter => "counter",
                Type::Gauge => "gauge",
            };
            let help = family.help.replace('\\', "\\\\").replace('\n', "\\n");
            let _ = writeln!(text, "# HELP {} {help}", family.name);
            let _ = writeln!(text, "# TYPE {} {kind}", family.name);
            for (labels, value) in &family.samples {
                text.push_str(&family.name);
                if !labels.is_empty() {
                    let labels: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                        .collect();
                    let _ = write!(text, "{{{}}}", labels.join(","));
                }
                let _ = writeln!(text, " {value}");
            }
        }
        text
    }
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One 0/1 sample per choice, 1 for `current`: how Prometheus shows an enumeration.
fn one_of(current: &str, choices: &[&str]) -> Vec<(String, String)> {
    choices
        .iter()
        .map(|c| (c.to_string(), ((*c == current) as u8).to_string()))
        .collect()
}

/// The entries of a [`Request::List`](crate::proto::Request::List) answer in the Prometheus text format, typed by
/// their declarations ([`typed`]).
pub fn exposition(entries: &[SysctlEntry]) -> String {
    let readings = typed(entries.iter().cloned());
    exposition_of(&readings)
}

/// The metric name of a numeric entry: counters end in `_total`.
fn metric(base: String, kind: Kind) -> String {
    match kind {
        Kind::Counter => base + "_total",
        Kind::Knob | Kind::Gauge => base,
    }
}

/// The readings of a [`Request::Snapshot`](crate::proto::Request::Snapshot) answer in the Prometheus text format: each
/// family's type and HELP come from the entry's declaration.
pub fn exposition_of(readings: &[Reading]) -> String {
    families_of(readings).render()
}

/// The families of `readings`, as [`exposition_of`] renders them.
pub(super) fn families_of(readings: &[Reading]) -> Families {
    let mut families = Families::default();
    let modes: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
    let links = LinkState::ALL.map(LinkState::name);
    for r in readings {
        let (leaf, kind, help) = (r.leaf.as_str(), r.kind, r.descr.as_str());
        let number = r.value.int().map(|n| n.to_string());
        let interface = r
            .node
            .strip_prefix(DEV_NODE)
            .and_then(|n| n.strip_prefix('.'));
        if let Some(ifname) = interface {
            let interface = || ("interface", ifname.to_string());
            let choices = if leaf == IfSettings::MODE.name {
                Some(("mode", "Interface mode: 1 for the current one", &modes[..]))
            } else if leaf == LinkState::LINK.name {
                Some(("state", "Link state: 1 for the current one", &links[..]))
            } else {
                None
            };
            if let Some((label, help, choices)) = choices {
                for (choice, value) in one_of(&r.value.to_string(), choices) {
                    families.add(
                        format!("polld_interface_{leaf}"),
                        help,
                        Type::Gauge,
                        vec![interface(), (label, choice)],
                        value,
                    );
                }
            } else if let Some(value) = number {
                let by_key = INTERFACE_FAMILIES
                    .iter()
                    .find_map(|family| Some((family, family.key(leaf)?)));
                let (base, labels) = match by_key {
                    Some((family, key)) => (
                        format!("polld_interface_{}", family.name),
                        vec![interface(), (family.label, key.to_string())],
                    ),
                    None => (format!("polld_interface_{leaf}"), vec![interface()]),
                };
                families.add(metric(base, kind), help, kind.into(), labels, value);
            }
        } else if r.node == daemon_entry::NODE {
            daemon_metric(&mut families, r);
        } else if let Some((cpu, kern)) = kern_name(&r.name()) {
            let leaf = kern.trim_start_matches(&format!("{}.", polld_core::poll::NODE));
            let cpu = vec![("cpu", cpu.to_string())];
            let base = format!("polld_ifpoll_{leaf}");
            add_by_node(&mut families, base, r, label_of(leaf), cpu);
        } else if let Some((cpu, account)) = split_per_cpu(&r.name()) {
            let account = account.trim_start_matches(&format!("{}.", daemon_entry::NODE));
            if let (Some(Metric::Seconds { name, help }), Some(ns)) =
                (metric_of(account), r.value.int())
            {
                families.add(
                    name.replacen("polld_", "polld_percpu_", 1),
                    help,
                    Type::Counter,
                    vec![("cpu", cpu.to_string())],
                    seconds(ns as u64),
                );
            }
        } else {
            let prefix = match r.node.as_str() {
                polld_core::poll::NODE => "polling",
                IP_NODE => "ip",
                _ => continue,
            };
            let base = format!("polld_{prefix}_{leaf}");
            add_by_node(&mut families, base, r, label_of(leaf), Vec::new());
        }
    }
    families
}

/// An entry as the family `base` its node names it by, with `labels`: a number by its
/// declared kind, a word as one sample labelled `label` with it.
fn add_by_node(
    families: &mut Families,
    base: String,
    r: &Reading,
    label: &'static str,
    mut labels: Vec<(&'static str, String)>,
) {
    match r.value.int() {
        Some(n) => families.add(
            metric(base, r.kind),
            &r.descr,
            r.kind.into(),
            labels,
            n.to_string(),
        ),
        None => {
            labels.push((label, r.value.to_string()));
            families.add(base, &r.descr, Type::Gauge, labels, "1".into())
        }
    }
}

/// Nanoseconds as seconds, exactly.
fn seconds(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// The label of a word-valued entry: its own name for the controller
/// (`controller="classic"`), else `value`.
fn label_of(leaf: &str) -> &'static str {
    if leaf == Knobs::CONTROLLER.name {
        Knobs::CONTROLLER.name
    } else {
        "value"
    }
}

/// The daemon's own `polld.*` entries, as each is declared ([`Metric`]): the time
/// accounts in seconds, a number under a name of its own, the others as `polld_<leaf>`.
fn daemon_metric(families: &mut Families, r: &Reading) {
    let Some(metric) = metric_of(&r.leaf) else {
        return;
    };
    match metric {
        Metric::Seconds { name, help } => {
            if let Some(ns) = r.value.int() {
                families.add(
                    name.to_string(),
                    help,
                    Type::Counter,
                    Vec::new(),
                    seconds(ns as u64),
                );
            }
        }
        Metric::Named(name) => {
            if let Some(n) = r.value.int() {
                families.add(
                    name.into(),
                    &r.descr,
                    Type::Gauge,
                    Vec::new(),
                    n.to_string(),
                );
            }
        }
        Metric::Labelled(label) => {
            add_by_node(families, format!("polld_{}", r.leaf), r, label, Vec::new())
        }
        Metric::ByNode => add_by_node(
            families,
            format!("polld_{}", r.leaf),
            r,
            "value",
            Vec::new(),
        ),
        Metric::Hidden => {}
    }
}
