//! The reference pages, from the declarations: every key of the config file
//! (docs/config.md, from the config modules' commented examples, which `polld man` also
//! puts in polld.toml(5)), every knob and counter `polld ctl -a` lists (docs/knobs.md)
//! and every family `/metrics` serves (docs/metrics.md).
//!
//! Both are read off a dataplane on one unopened interface named `IF`, with the router
//! stage and the daemon's own `polld.*` entries, exactly as `polld run` declares them: a
//! new knob or counter appears here by being declared, with its description, default
//! and allowed values. `cli/tests/reference.rs` fails when the pages in docs/ differ from
//! what this module writes (`POLLD_BLESS=1` rewrites them).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use polld_control::daemon::DaemonStatus;
use polld_control::metrics::scrape;
use polld_core::{Dataplane, Kind, Poller, Reading};
use polld_packet::{PacketConfig, Stage};

use crate::check::Unopened;

/// The interface name the reference's per-interface entries are listed under.
pub const IF: &str = "IF";

/// Every entry of a daemon with one interface `IF`, defaults as declared.
pub fn declared_entries() -> Vec<Reading> {
    let router: PacketConfig = toml::from_str(
        "[[interfaces]]\nname = \"IF\"\nmac = \"02:00:00:00:00:01\"\naddresses = [\"192.0.2.1/24\"]\n",
    )
    .expect("a router on one interface is a valid packet config");
    let stage = Stage::new(&router, &[IF]).expect("a router on one interface is a valid stage");
    let dp = Dataplane::new(Poller::default(), vec![Unopened(IF.to_string())], stage);
    let mut entries = dp.readings();
    entries.extend(DaemonStatus::default().readings());
    entries
}

/// What each node is, in the order the page lists them.
const NODES: [(&str, &str); 4] = [
    (
        polld_core::poll::NODE,
        "The scheduler: FreeBSD's `kern.polling.*` under its names and rules, and polld's \
         own additions. With `[daemon] cpus`, `net.ifpoll.N.*` holds CPU N's copy of each \
         (`net.ifpoll.N.pollhz` is its `hz`, `net.ifpoll.N.rx.*` the rest); writing \
         `kern.polling.*` writes every CPU's.",
    ),
    (
        polld_core::dataplane::IP_NODE,
        "The packet stage (the IPv4 router): its switches and its counters.",
    ),
    (
        "dev.IF",
        "Each interface, under its own name (`dev.veth1.*`): its mode and settings, link, \
         counters, and drops by reason. An interface split into queues also has \
         `dev.IF.queueN.*`, of which `dev.IF.*` are the sums.",
    ),
    (
        polld_control::daemon::daemon_entry::NODE,
        "The daemon's own: the poll thread, its CPU split and the kernel's receive work \
         (read-only). With `[daemon] cpus`, `polld.percpu.N.*` holds each poll thread's.",
    ),
];

/// docs/config.md.
pub fn config_markdown() -> String {
    format!(
        "# The configuration file\n\n\
         `polld run -c FILE` reads a TOML file: the daemon's settings, the knobs applied at \
         start, the interfaces, and the packet stage's tables. Every key is optional but \
         each interface's `name`. `polld run --check -c FILE` checks a file without opening \
         anything (`--json` for scripts); every mistake of a file is reported, each as \
         `FILE:LINE: field: what is wrong; the fix`, and an unknown key or knob with the \
         nearest valid name. The first example below is a valid file. SIGHUP \
         makes a running polld read its file again and apply its modes and knobs. The knobs \
         are in [knobs.md](knobs.md); `examples/` has complete files. This page is \
         generated from the code (`cargo test -p polld --test reference` fails when it \
         drifts; `POLLD_BLESS=1` rewrites it).\n\n\
         ## The daemon, the knobs and the interfaces\n\n```toml\n{}```\n\n\
         ## The packet stage\n\n\
         The router's (or bridge's) tables sit at the top level of the same file, beside \
         `[[interfaces]]`, whose entries also take the keys below. With every optional \
         table at its default:\n\n```toml\n{}```\n",
        crate::config::annotated_example(),
        polld_packet::config::annotated_example()
    )
}

/// docs/knobs.md.
pub fn knobs_markdown() -> String {
    let entries = declared_entries();
    let mut md = String::from(
        "# Knobs and counters\n\n\
         Every entry `polld ctl -a` lists, by node, as declared in the code: its kind, its \
         default (knobs) and what a write may give. Write a knob with \
         `polld ctl NAME=VALUE`, or under `[knobs]` in the config file; a value outside \
         what it allows is refused with the allowed range and changes nothing. Counters \
         only grow; gauges go up and down. This page is generated from the declarations \
         (`cargo test -p polld --test reference` fails when it drifts; \
         `POLLD_BLESS=1` rewrites it).\n",
    );
    for (node, what) in NODES {
        let mut rows: Vec<&Reading> = entries.iter().filter(|r| r.node == node).collect();
        if node == "dev.IF" {
            rows = entries
                .iter()
                .filter(|r| r.node == format!("dev.{IF}"))
                .collect();
        }
        let _ = writeln!(md, "\n## `{node}.*`\n\n{what}\n");
        let knobs: Vec<&&Reading> = rows.iter().filter(|r| r.kind == Kind::Knob).collect();
        if !knobs.is_empty() {
            md.push_str("| knob | default | allowed | description |\n|---|---|---|---|\n");
            for r in knobs {
                let allowed = r
                    .allowed
                    .as_deref()
                    .expect("a knob's write says what it allows");
                let _ = writeln!(
                    md,
                    "| `{}` | {} | {} | {} |",
                    r.leaf,
                    cell(&r.value.to_string()),
                    cell(allowed),
                    cell(&r.descr)
                );
            }
            md.push('\n');
        }
        let read_only: Vec<&&Reading> = rows.iter().filter(|r| r.kind != Kind::Knob).collect();
        if !read_only.is_empty() {
            md.push_str("| entry | kind | description |\n|---|---|---|\n");
            for r in read_only {
                let kind = if r.kind == Kind::Counter {
                    "counter"
                } else {
                    "gauge"
                };
                let _ = writeln!(md, "| `{}` | {kind} | {} |", r.leaf, cell(&r.descr));
            }
        }
    }
    md
}

/// docs/metrics.md.
pub fn metrics_markdown() -> String {
    // The process families' samples are left out: the page lists names, not values.
    let text = scrape(&declared_entries(), None);
    // Family name -> (type, help, label names of its first sample).
    let mut families: BTreeMap<String, (String, String, String)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_string()).or_default().1 = help.to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_string()).or_default().0 = kind.to_string();
        } else if !line.starts_with('#') {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let labels = line[name_end..]
                .strip_prefix('{')
                .and_then(|l| l.split_once('}'))
                .map(|(inner, _)| label_names(inner))
                .unwrap_or_default();
            let family = families.entry(line[..name_end].to_string()).or_default();
            if family.2.is_empty() {
                family.2 = labels;
            }
        }
    }
    let mut md = String::from(
        "# Metrics\n\n\
         What `[daemon] metrics = \"ADDR:PORT\"` serves at `GET /metrics`, in the Prometheus \
         text format: every family, its type, its labels and its help (the entry's \
         description). The names follow the entries of docs/knobs.md: \
         `dev.IF.rx_packets` is `polld_interface_rx_packets_total{interface=\"IF\"}`, \
         `kern.polling.burst` is `polld_polling_burst`, `polld.work_ns` is \
         `polld_device_work_seconds_total`. With `[daemon] cpus` each poll CPU adds \
         `polld_ifpoll_*{cpu=\"N\"}` and `polld_percpu_*{cpu=\"N\"}`. Beside them, what \
         every exporter serves about itself: `polld_build_info`, whose labels say the \
         version, the commit and the compiler, and the `process_*` families of the \
         Prometheus client libraries' process collector (CPU time, memory, file \
         descriptors, start time), read from `/proc` at each scrape. Generated from the \
         declarations (`cargo test -p polld --test reference`; `POLLD_BLESS=1` rewrites \
         it).\n\n\
         | family | type | labels | help |\n|---|---|---|---|\n",
    );
    for (name, (kind, help, labels)) in &families {
        let _ = writeln!(
            md,
            "| `{name}` | {kind} | {} | {} |",
            cell(labels),
            cell(help)
        );
    }
    md
}

/// The label names of `a="x",b="y"`.
fn label_names(inner: &str) -> String {
    inner
        .split("\",")
        .filter_map(|pair| pair.split_once('=').map(|(k, _)| k.trim()))
        .filter(|k| !k.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Text fit for one cell of a Markdown table.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_of_the_daemon_is_described() {
        let entries = declared_entries();
        for r in &entries {
            let node = if r.node == format!("dev.{IF}") {
                "dev.IF"
            } else {
                r.node.as_str()
            };
            assert!(
                NODES.iter().any(|(n, _)| *n == node) || node == "polld.default",
                "the reference does not list the node of {}",
                r.name()
            );
        }
        let md = knobs_markdown();
        assert!(md.contains("| `user_frac` | 50 | 0 to 99 |"), "{md}");
        assert!(md.contains("| `rx_packets` | counter |"), "{md}");
    }

    #[test]
    fn label_names_are_read_off_a_sample() {
        assert_eq!(
            label_names(r#"interface="veth1",reason="ttl_exceeded""#),
            "interface, reason"
        );
        assert_eq!(label_names(""), "");
    }
}
