//! A bounded map whose entries age out: the storage behind the ARP cache and the bridge's
//! MAC table.
//!
//! An entry older than `max_age` is invisible to lookups. When the map is full, inserting
//! a new key evicts the least recently refreshed entry (an aged-out one, if any, since
//! those are the oldest). Eviction scans the map: O(capacity), paid only on inserts into
//! a full table.

use std::collections::HashMap;
use std::hash::Hash;

/// Occupancy of a bounded table, for the stats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TableStats {
    /// Entries held (aged-out ones not yet replaced included).
    pub entries: usize,
    /// Entries evicted to make room.
    pub evictions: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct AgingMap<K, V> {
    entries: HashMap<K, Aged<V>>,
    capacity: usize,
    max_age_ns: u64,
    evictions: u64,
}

#[derive(Clone, Debug)]
pub(crate) struct Aged<V> {
    pub value: V,
    pub refreshed_ns: u64,
}

impl<K: Hash + Eq + Copy, V> AgingMap<K, V> {
    /// `capacity` is at least 1 (config validation guarantees it).
    pub fn new(capacity: usize, max_age_ns: u64) -> Self {
        AgingMap {
            entries: HashMap::with_capacity(capacity.min(1 << 16)),
            capacity: capacity.max(1),
            max_age_ns,
            evictions: 0,
        }
    }

    /// The live entry for `key` and its age.
    pub fn get(&self, key: &K, now_ns: u64) -> Option<(&V, u64)> {
        let entry = self.entries.get(key)?;
        let age = now_ns.saturating_sub(entry.refreshed_ns);
        (age <= self.max_age_ns).then_some((&entry.value, age))
    }

    /// The entry for `key`, live or aged out.
    pub fn get_any_mut(&mut self, key: &K) -> Option<&mut Aged<V>> {
        self.entries.get_mut(key)
    }

    /// Stores `value` for `key`, refreshed at `now_ns`, evicting the oldest entry if the
    /// key is new and the map is full.
    pub fn insert(&mut self, key: K, value: V, now_ns: u64) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.refreshed_ns)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
                self.evictions += 1;
            }
        }
        self.entries.insert(
            key,
            Aged {
                value,
                refreshed_ns: now_ns,
            },
        );
    }

    /// The entries live at `now_ns`, in no particular order.
    pub fn live(&self, now_ns: u64) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.entries
            .iter()
            .filter(move |(_, e)| now_ns.saturating_sub(e.refreshed_ns) <= self.max_age_ns)
            .map(|(k, e)| (k, &e.value))
    }

    pub fn max_age_ns(&self) -> u64 {
        self.max_age_ns
    }

    pub fn stats(&self) -> TableStats {
        self.stats_with(0)
    }

    /// [`AgingMap::stats`] of a table that holds `statics` permanent entries besides.
    pub fn stats_with(&self, statics: usize) -> TableStats {
        TableStats {
            entries: self.entries.len() + statics,
            evictions: self.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_out_and_evicts_oldest() {
        let mut m = AgingMap::new(2, 100);
        m.insert(1, 'a', 0);
        m.insert(2, 'b', 10);
        assert_eq!(m.get(&1, 100), Some((&'a', 100)));
        assert_eq!(m.get(&1, 101), None);
        m.insert(1, 'a', 50); // refresh: now 2 is the oldest
        m.insert(3, 'c', 60);
        assert_eq!(
            m.stats(),
            TableStats {
                entries: 2,
                evictions: 1
            }
        );
        assert!(m.get(&2, 60).is_none());
        assert!(m.get(&1, 60).is_some() && m.get(&3, 60).is_some());
    }
}
