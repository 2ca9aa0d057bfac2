//! The poll threads' entries as one table: each CPU's `kern.polling.*` under its
//! `net.ifpoll.N.*` name, the first CPU's as `kern.polling.*`, the stage's counters summed
//! over the CPUs, a queued interface's counters summed over its queues and each queue
//! listed as `dev.<if>.queue<N>.*`, the threads' own entries as `polld.percpu.N.*`.

use polld_control::daemon::daemon_entry;
use polld_core::dataplane::{DEV_NODE, IP_NODE};
use polld_core::ifpoll::per_cpu_name;
use polld_core::{Interface, LinkState, SysctlEntry};

use crate::queues::queue_name;

/// The per-thread daemon entries, listed per CPU under `polld.percpu.N.`.
const PER_THREAD: [&str; 5] = [
    daemon_entry::CPU,
    daemon_entry::WORK_NS,
    daemon_entry::BUSY_POLL_NS,
    daemon_entry::IDLE_POLL_NS,
    daemon_entry::THREAD_CPU_NS,
];

/// Whether an interface's read-only number (by its leaf name) is a state, which no sum
/// over queues means: the link's, and auto mode's polling flag.
pub(super) fn is_state(leaf: &str) -> bool {
    [LinkState::LINK.name, Interface::<()>::AUTO_POLLING.name].contains(&leaf)
}

/// One poll CPU's whole list of entries: the CPU, its queues (interface, queue number),
/// the entries.
pub type CpuEntries<'a> = (usize, &'a [(String, u32)], Vec<SysctlEntry>);

/// The poll threads' entries as one table (module docs): `per_cpu` holds each CPU's
/// list, the first poll CPU first.
pub fn merge(per_cpu: &[CpuEntries]) -> Vec<SysctlEntry> {
    let mut merged: Vec<SysctlEntry> = Vec::new();
    let mut ifpoll: Vec<SysctlEntry> = Vec::new();
    let mut threads: Vec<SysctlEntry> = Vec::new();
    let mut queues: Vec<SysctlEntry> = Vec::new();
    for (k, (cpu, mine, entries)) in per_cpu.iter().enumerate() {
        for e in entries {
            let queue = mine.iter().find_map(|(i, q)| {
                let leaf = e.name.strip_prefix(&format!("{DEV_NODE}.{i}."))?;
                Some(format!("{DEV_NODE}.{}.{leaf}", queue_name(i, *q)))
            });
            if let Some(name) = &queue {
                // A view of one queue: writes go to `dev.<if>.*`, which reaches every queue.
                queues.push(SysctlEntry {
                    name: name.clone(),
                    writable: false,
                    ..e.clone()
                });
            }
            if let Some(name) = per_cpu_name(*cpu, &e.name) {
                ifpoll.push(SysctlEntry { name, ..e.clone() });
                if k > 0 {
                    continue;
                }
            }
            if PER_THREAD.contains(&e.name.as_str()) {
                threads.push(SysctlEntry {
                    name: polld_control::daemon::per_cpu(*cpu, &e.name),
                    ..e.clone()
                });
            }
            match merged.iter_mut().find(|m| m.name == e.name) {
                None => merged.push(e.clone()),
                Some(m) if summed(e) || (queue.is_some() && summed_over_queues(e)) => {
                    let sum =
                        m.value.parse::<u64>().unwrap_or(0) + e.value.parse::<u64>().unwrap_or(0);
                    m.value = sum.to_string();
                }
                Some(_) => {}
            }
        }
    }
    merged.extend(queues);
    merged.extend(ifpoll);
    merged.extend(threads);
    merged
}

/// Whether an entry of a queued interface is the sum over its queues: the read-only
/// numbers but the link's state and auto mode's polling flag.
fn summed_over_queues(e: &SysctlEntry) -> bool {
    let leaf = e.name.rsplit('.').next().unwrap_or_default();
    !e.writable && e.value.parse::<u64>().is_ok() && !is_state(leaf)
}

/// Whether an entry is the sum over the CPUs: the stage's read-only counters.
fn summed(e: &SysctlEntry) -> bool {
    !e.writable
        && e.name
            .strip_prefix(IP_NODE)
            .is_some_and(|leaf| leaf.starts_with('.'))
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The value of entry `name` of `merged`, which must have it.
    fn value<'a>(merged: &'a [SysctlEntry], name: &str) -> &'a str {
        merged
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.value.as_str())
            .unwrap_or_else(|| panic!("{name} missing from {merged:?}"))
    }

    fn entry(name: &str, value: &str, writable: bool) -> SysctlEntry {
        SysctlEntry {
            name: name.to_string(),
            value: value.to_string(),
            descr: String::new(),
            writable,
        }
    }

    #[test]
    fn merge_names_each_cpu_sums_counters_and_keeps_the_first_cpus_knobs() {
        let cpu = |user_frac: &str, burst: &str, dropped: &str, work: &str, ifname: &str| {
            vec![
                entry("kern.polling.user_frac", user_frac, true),
                entry("kern.polling.burst", burst, false),
                entry("net.inet.ip.fastforwarding", "1", true),
                entry("net.inet.ip.no_route", dropped, false),
                entry(&format!("dev.{ifname}.rx_packets"), "7", false),
                entry("polld.work_ns", work, false),
                entry("polld.pid", "42", false),
                entry("polld.default.kern.polling.user_frac", "50", false),
            ]
        };
        let merged = merge(&[
            (0, &[], cpu("30", "100", "1", "1000", "tap0")),
            (1, &[], cpu("70", "5", "2", "500", "tap2")),
        ]);
        let get = |name: &str| value(&merged, name);
        assert_eq!(get("kern.polling.user_frac"), "30");
        assert_eq!(get("kern.polling.burst"), "100");
        assert_eq!(get("net.ifpoll.0.rx.user_frac"), "30");
        assert_eq!(get("net.ifpoll.1.rx.user_frac"), "70");
        assert_eq!(get("net.ifpoll.1.rx.burst"), "5");
        assert_eq!(get("net.inet.ip.no_route"), "3");
        assert_eq!(get("dev.tap0.rx_packets"), "7");
        assert_eq!(get("dev.tap2.rx_packets"), "7");
        assert_eq!(get("polld.work_ns"), "1000");
        assert_eq!(get("polld.percpu.1.work_ns"), "500");
        assert_eq!(get("polld.pid"), "42");
        assert_eq!(get("polld.default.kern.polling.user_frac"), "50");
        let names: Vec<&str> = merged.iter().map(|e| e.name.as_str()).collect();
        assert!(!names.iter().any(|n| n.contains(".queue")), "{names:?}");
        let unique: std::collections::HashSet<&&str> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "duplicates in {names:?}");
    }

    #[test]
    fn a_queued_interface_is_listed_per_queue_and_its_counters_summed() {
        let cpu = |rx: &str, link: &str| {
            vec![
                entry("dev.veth1.rx_packets", rx, false),
                entry("dev.veth1.queued", "1", false),
                entry("dev.veth1.link", link, false),
                entry("dev.veth1.auto_polling", "1", false),
                entry("dev.veth1.mode", "polling", true),
                entry("dev.veth2.rx_packets", "5", false),
            ]
        };
        let (q0, q1) = ([("veth1".to_string(), 0)], [("veth1".to_string(), 1)]);
        let merged = merge(&[(0, &q0, cpu("10", "up")), (1, &q1, cpu("32", "down"))]);
        let get = |name: &str| value(&merged, name);
        assert_eq!(get("dev.veth1.rx_packets"), "42");
        assert_eq!(get("dev.veth1.queued"), "2");
        assert_eq!(get("dev.veth1.queue0.rx_packets"), "10");
        assert_eq!(get("dev.veth1.queue1.rx_packets"), "32");
        assert_eq!(get("dev.veth1.queue1.link"), "down");
        // States and settings are not sums: the first CPU's.
        assert_eq!(get("dev.veth1.link"), "up");
        assert_eq!(get("dev.veth1.auto_polling"), "1");
        assert_eq!(get("dev.veth1.mode"), "polling");
        // An interface polled whole is not summed over the CPUs that list it.
        assert_eq!(get("dev.veth2.rx_packets"), "5");
    }
}
