//! The IPv6 neighbour table: next hop → MAC, from static entries and from the neighbour
//! discovery messages polld hands up to the host (RFC 4861), which resolves them.
//!
//! polld sends no neighbour solicitations (it only answers those for its own
//! addresses): the host's stack resolves next hops, and the advertisements that answer
//! it pass through polld on their way up, which learns from them. An entry learned is usable for the ARP cache's `max_age`; static
//! entries never age and learning never overrides them. Entries can be added and
//! removed one at a time while the table is in use, so a control plane can mirror the
//! host's neighbour table into it.

use crate::fasthash::FastMap;
use crate::table::{AgingMap, TableStats};
use crate::wire::MacAddr;
use std::net::Ipv6Addr;

#[derive(Clone, Debug)]
pub struct Neighbours {
    learned: AgingMap<Ipv6Addr, MacAddr>,
    statics: FastMap<Ipv6Addr, MacAddr>,
    /// When resolving each unknown next hop was last asked for ([`Neighbours::ask_due`]).
    asked: AgingMap<Ipv6Addr, ()>,
}

impl Neighbours {
    /// `capacity` bounds the learned entries (statics are extra) and the unknown next hops
    /// whose resolution was asked for; `retry_ns` is how often one is asked for again.
    pub fn new(capacity: usize, max_age_ns: u64, retry_ns: u64) -> Self {
        Neighbours {
            learned: AgingMap::new(capacity, max_age_ns),
            statics: FastMap::default(),
            asked: AgingMap::new(capacity, retry_ns),
        }
    }

    /// Whether to ask for `ip`, a next hop without an entry, to be resolved at `now_ns`:
    /// once, then at most once per `retry_ns` while it stays unknown.
    pub fn ask_due(&mut self, ip: Ipv6Addr, now_ns: u64) -> bool {
        let due = self.asked.get(&ip, now_ns).is_none();
        if due {
            self.asked.insert(ip, (), now_ns);
        }
        due
    }

    /// A permanent entry, replacing any other for `ip`.
    pub fn add_static(&mut self, ip: Ipv6Addr, mac: MacAddr) {
        self.statics.insert(ip, mac);
    }

    /// Removes the permanent entry for `ip`, returning its MAC.
    pub fn remove_static(&mut self, ip: Ipv6Addr) -> Option<MacAddr> {
        self.statics.remove(&ip)
    }

    /// Removes every permanent entry.
    pub fn clear_statics(&mut self) {
        self.statics.clear();
    }

    /// Records that `ip` is at `mac`, seen at `now_ns` (static entries stay).
    pub fn learn(&mut self, ip: Ipv6Addr, mac: MacAddr, now_ns: u64) {
        if !self.statics.contains_key(&ip) {
            self.learned.insert(ip, mac, now_ns);
        }
    }

    /// The MAC `ip` is at now, if known and fresh.
    pub fn lookup(&self, ip: Ipv6Addr, now_ns: u64) -> Option<MacAddr> {
        if let Some(&mac) = self.statics.get(&ip) {
            return Some(mac);
        }
        self.learned.get(&ip, now_ns).map(|(mac, _)| *mac)
    }

    /// [`crate::arp_cache::ArpCache::entries`] for IPv6.
    pub fn entries(&self, now_ns: u64) -> impl Iterator<Item = (Ipv6Addr, MacAddr, bool)> + '_ {
        let learned = self
            .learned
            .live(now_ns)
            .map(|(&ip, &mac)| (ip, mac, false));
        self.statics
            .iter()
            .map(|(&ip, &mac)| (ip, mac, true))
            .chain(learned)
    }

    pub fn stats(&self) -> TableStats {
        self.learned.stats_with(self.statics.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statics_win_and_learned_entries_age() {
        let mut n = Neighbours::new(4, 100, 10);
        let (a, b): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::a".parse().unwrap(),
            "2001:db8::b".parse().unwrap(),
        );
        let (m1, m2) = (MacAddr([2, 0, 0, 0, 0, 1]), MacAddr([2, 0, 0, 0, 0, 2]));
        n.add_static(a, m1);
        n.learn(a, m2, 0);
        n.learn(b, m2, 0);
        assert_eq!(n.lookup(a, 50), Some(m1));
        assert_eq!(n.lookup(b, 100), Some(m2));
        assert_eq!(n.lookup(b, 101), None);
        assert_eq!(n.remove_static(a), Some(m1));
        assert_eq!(n.lookup(a, 0), None, "the learned answer was never stored");
        assert_eq!(n.stats().entries, 1);
    }

    #[test]
    fn an_unknown_next_hop_is_asked_for_once_per_retry() {
        let mut n = Neighbours::new(4, 100, 10);
        let a: Ipv6Addr = "2001:db8::a".parse().unwrap();
        assert!(n.ask_due(a, 0));
        assert!(!n.ask_due(a, 10));
        assert!(n.ask_due(a, 11));
        assert!(n.ask_due("2001:db8::b".parse().unwrap(), 11));
    }
}
