//! Longest-prefix match over fixed-width keys: a multibit trie with 8-bit strides and
//! controlled prefix expansion, updated in place.
//!
//! A node covers one byte of the key and has 256 slots. A prefix of length `L > 0` lives
//! in the node at depth `(L - 1) / 8` on its path and is expanded over the
//! `2^(8 - r)` slots it covers there (`r` its length within that byte; `/0` covers every
//! slot of the root). Each slot holds the length and value of the longest prefix stored
//! in its node that covers it, and the child node for the next byte, if any. A lookup
//! reads one slot per byte of the key until there is no child, remembering the last
//! prefix seen: at most 4 slot reads for IPv4 and 16 for IPv6, however many prefixes the
//! table holds. Values are stored once each however many prefixes share them (routes
//! share a few next hops), so the value a lookup ends at is usually in cache.
//!
//! Inserting or removing one prefix touches one node's slots (at most 256) plus the
//! nodes on its path; a node left without prefixes or children is freed. The prefixes
//! themselves are kept in a hash map by (length, network), which answers exact-match
//! queries and, on removal, which shorter prefix of the node now covers a slot.

use crate::fasthash::FastMap;

/// A key type: an unsigned integer read most significant byte first.
pub trait LpmKey: Copy + Eq + std::hash::Hash + std::fmt::Debug {
    /// Key width in bits (a multiple of 8).
    const BITS: u8;
    /// The byte at `depth` (0 = most significant).
    fn byte(self, depth: u8) -> u8;
    /// The key with all but the first `len` bits cleared.
    fn masked(self, len: u8) -> Self;
    /// The key with the byte at `depth` replaced by `byte`.
    fn with_byte(self, depth: u8, byte: u8) -> Self;
}

impl LpmKey for u32 {
    const BITS: u8 = 32;
    fn byte(self, depth: u8) -> u8 {
        (self >> (24 - 8 * u32::from(depth))) as u8
    }
    fn masked(self, len: u8) -> u32 {
        self & crate::net::mask(len)
    }
    fn with_byte(self, depth: u8, byte: u8) -> u32 {
        let shift = 24 - 8 * u32::from(depth);
        (self & !(0xFF << shift)) | (u32::from(byte) << shift)
    }
}

impl LpmKey for u128 {
    const BITS: u8 = 128;
    fn byte(self, depth: u8) -> u8 {
        (self >> (120 - 8 * u32::from(depth))) as u8
    }
    fn masked(self, len: u8) -> u128 {
        self & crate::net::mask6(len)
    }
    fn with_byte(self, depth: u8, byte: u8) -> u128 {
        let shift = 120 - 8 * u32::from(depth);
        (self & !(0xFF << shift)) | (u128::from(byte) << shift)
    }
}

const NONE: u32 = u32::MAX;
const STRIDE: u8 = 8;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// The longest prefix of this node covering the slot: its value's index in
    /// `Lpm::values` above 8 bits, its length below ([`pack`]).
    best: u32,
    /// The node for the next byte.
    child: u32,
}

const EMPTY: Slot = Slot {
    best: NONE,
    child: NONE,
};
const SLOTS: usize = 256;

/// The most distinct values a table holds: their index has 24 bits in a slot.
pub const MAX_VALUES: usize = (1 << 24) - 1;

fn pack(value: u32, len: u8) -> u32 {
    (value << 8) | u32::from(len)
}

fn unpack(best: u32) -> (usize, u8) {
    ((best >> 8) as usize, best as u8)
}

/// The depth of the node a prefix of length `len` lives in, and its length within
/// that node's byte (0 only for the empty prefix).
fn place(len: u8) -> (u8, u8) {
    if len == 0 {
        (0, 0)
    } else {
        let depth = (len - 1) / STRIDE;
        (depth, len - depth * STRIDE)
    }
}

/// A longest-prefix-match table from prefixes of `K` to values `V`.
#[derive(Clone, Debug)]
pub struct Lpm<K, V> {
    /// The slots of every node, node `n` at `n * 256`: one array, so that a lookup
    /// costs one memory access per byte.
    slots: Vec<Slot>,
    /// Per node, its prefixes plus its children: the node is freed at zero.
    used: Vec<u32>,
    free_nodes: Vec<u32>,
    /// Each distinct value once, with the number of prefixes holding it (0: free).
    values: Vec<(V, u32)>,
    value_index: FastMap<V, u32>,
    free_values: Vec<u32>,
    /// Every prefix, by (length, network), to its value's index.
    by_prefix: FastMap<(u8, K), u32>,
}

impl<K: LpmKey, V: Clone + Eq + std::hash::Hash> Default for Lpm<K, V> {
    fn default() -> Self {
        Lpm {
            slots: vec![EMPTY; SLOTS],
            used: vec![0],
            free_nodes: Vec::new(),
            values: Vec::new(),
            value_index: FastMap::default(),
            free_values: Vec::new(),
            by_prefix: FastMap::default(),
        }
    }
}

impl<K: LpmKey, V: Clone + Eq + std::hash::Hash> Lpm<K, V> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.by_prefix.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_prefix.is_empty()
    }

    /// Trie nodes allocated (each 256 slots), for memory accounting.
    pub fn nodes(&self) -> usize {
        self.used.len() - self.free_nodes.len()
    }

    /// The value stored for exactly this prefix.
    pub fn get(&self, key: K, len: u8) -> Option<&V> {
        let &i = self.by_prefix.get(&(len, key.masked(len)))?;
        Some(&self.values[i as usize].0)
    }

    /// The longest prefix covering `key`: its network, length and value.
    pub fn lookup(&self, key: K) -> Option<(K, u8, &V)> {
        let mut node = 0u32;
        let mut best = NONE;
        for depth in 0..K::BITS / STRIDE {
            let slot = self.slots[node as usize * SLOTS + usize::from(key.byte(depth))];
            if slot.best != NONE {
                best = slot.best;
            }
            if slot.child == NONE {
                break;
            }
            node = slot.child;
        }
        if best == NONE {
            return None;
        }
        let (value, len) = unpack(best);
        Some((key.masked(len), len, &self.values[value].0))
    }

    /// The index of `value`, stored if new, with one more prefix holding it.
    fn hold(&mut self, value: V) -> u32 {
        if let Some(&i) = self.value_index.get(&value) {
            self.values[i as usize].1 += 1;
            return i;
        }
        let i = match self.free_values.pop() {
            Some(i) => {
                self.values[i as usize] = (value.clone(), 1);
                i
            }
            None => {
                assert!(
                    self.values.len() < MAX_VALUES,
                    "more than {MAX_VALUES} distinct values"
                );
                self.values.push((value.clone(), 1));
                (self.values.len() - 1) as u32
            }
        };
        self.value_index.insert(value, i);
        i
    }

    /// One prefix fewer holds value `i`; returns the value.
    fn release_value(&mut self, i: u32) -> V {
        let (value, holders) = &mut self.values[i as usize];
        *holders -= 1;
        if *holders == 0 {
            self.value_index.remove(value);
            self.free_values.push(i);
        }
        value.clone()
    }

    /// Stores `value` for the prefix (`key` with host bits ignored, `len` at most
    /// `K::BITS`), returning the value it replaces.
    pub fn insert(&mut self, key: K, len: u8, value: V) -> Option<V> {
        assert!(len <= K::BITS, "prefix length {len} above {}", K::BITS);
        let key = key.masked(len);
        let index = self.hold(value);
        let previous = self.by_prefix.insert((len, key), index);
        let (depth, rel) = place(len);
        let node = match previous {
            Some(_) => self.path(key, depth).and_then(|p| p.last().copied()),
            None => None,
        };
        let node = node.unwrap_or_else(|| {
            let node = self.node_for(key, depth);
            self.used[node as usize] += 1;
            node
        });
        let (first, count) = Self::span(key, depth, rel);
        for slot in &mut self.slots[node as usize * SLOTS + first..][..count] {
            if slot.best == NONE || unpack(slot.best).1 <= len {
                slot.best = pack(index, len);
            }
        }
        previous.map(|old| self.release_value(old))
    }

    /// Removes the prefix, returning its value.
    pub fn remove(&mut self, key: K, len: u8) -> Option<V> {
        let key = key.masked(len);
        let index = self.by_prefix.remove(&(len, key))?;
        let value = self.release_value(index);
        let (depth, rel) = place(len);
        let path = self.path(key, depth).expect("a stored prefix has its node");
        let node = *path.last().expect("the root is on every path");
        let (first, count) = Self::span(key, depth, rel);
        for s in first..first + count {
            // Of the prefixes of this node covering the slot, one has each length.
            let at = node as usize * SLOTS + s;
            if self.slots[at].best != NONE && unpack(self.slots[at].best).1 == len {
                self.slots[at].best = self.covering(key, depth, s as u8);
            }
        }
        self.release(key, &path);
        Some(value)
    }

    /// The first slot and the number of slots a prefix of length `rel` within the byte
    /// at `depth` covers.
    fn span(key: K, depth: u8, rel: u8) -> (usize, usize) {
        let count = 1usize << (STRIDE - rel);
        let first = usize::from(key.byte(depth)) & !(count - 1);
        (first, count)
    }

    /// The longest remaining prefix of the node at `depth` on `key`'s path that covers
    /// slot `s`.
    fn covering(&self, key: K, depth: u8, s: u8) -> u32 {
        let with_slot = key.with_byte(depth, s);
        let shortest = if depth == 0 { 0 } else { 1 };
        (shortest..=STRIDE)
            .rev()
            .find_map(|rel| {
                let len = STRIDE * depth + rel;
                let value = self.by_prefix.get(&(len, with_slot.masked(len)))?;
                Some(pack(*value, len))
            })
            .unwrap_or(NONE)
    }

    /// The node at `depth` on `key`'s path, created with the nodes above it as needed.
    fn node_for(&mut self, key: K, depth: u8) -> u32 {
        let mut node = 0u32;
        for d in 0..depth {
            let b = usize::from(key.byte(d));
            let child = self.slots[node as usize * SLOTS + b].child;
            node = if child != NONE {
                child
            } else {
                let new = match self.free_nodes.pop() {
                    Some(n) => {
                        let at = n as usize * SLOTS;
                        self.slots[at..at + SLOTS].fill(EMPTY);
                        n
                    }
                    None => {
                        self.slots.resize(self.slots.len() + SLOTS, EMPTY);
                        self.used.push(0);
                        (self.used.len() - 1) as u32
                    }
                };
                self.slots[node as usize * SLOTS + b].child = new;
                self.used[node as usize] += 1;
                new
            };
        }
        node
    }

    /// The nodes from the root down to depth `depth` on `key`'s path, if they exist.
    fn path(&self, key: K, depth: u8) -> Option<Vec<u32>> {
        let mut path = vec![0u32];
        for d in 0..depth {
            let node = *path.last()? as usize;
            let child = self.slots[node * SLOTS + usize::from(key.byte(d))].child;
            if child == NONE {
                return None;
            }
            path.push(child);
        }
        Some(path)
    }

    /// Drops one use of the last node of `path` and frees the nodes the removal left
    /// empty, bottom up (never the root).
    fn release(&mut self, key: K, path: &[u32]) {
        let mut depth = path.len() - 1;
        self.used[path[depth] as usize] -= 1;
        while depth > 0 && self.used[path[depth] as usize] == 0 {
            self.free_nodes.push(path[depth]);
            let parent = path[depth - 1] as usize;
            self.slots[parent * SLOTS + usize::from(key.byte(depth as u8 - 1))].child = NONE;
            self.used[parent] -= 1;
            depth -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn insert_lookup_replace_remove() {
        let mut t: Lpm<u32, u8> = Lpm::new();
        assert_eq!(t.insert(0, 0, 0), None);
        assert_eq!(t.insert(0x0A00_0000, 8, 1), None);
        assert_eq!(t.insert(0x0A01_0000, 16, 2), None);
        assert_eq!(t.insert(0x0A01_0203, 32, 3), None);
        assert_eq!(t.insert(0x0A01_0000, 16, 4), Some(2));
        let hit = |t: &Lpm<u32, u8>, k| t.lookup(k).map(|(_, l, v)| (l, *v));
        assert_eq!(hit(&t, 0x0A01_0203), Some((32, 3)));
        assert_eq!(hit(&t, 0x0A01_0204), Some((16, 4)));
        assert_eq!(hit(&t, 0x0A02_0000), Some((8, 1)));
        assert_eq!(hit(&t, 0xC0A8_0001), Some((0, 0)));
        assert_eq!(t.remove(0x0A01_0000, 16), Some(4));
        assert_eq!(hit(&t, 0x0A01_0204), Some((8, 1)));
        assert_eq!(t.remove(0x0A01_0203, 32), Some(3));
        assert_eq!(t.remove(0x0A01_0203, 32), None);
        assert_eq!(hit(&t, 0x0A01_0203), Some((8, 1)));
        assert_eq!(t.nodes(), 1, "emptied nodes are freed");
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0x0A00_0000, 8), Some(&1));
    }

    /// The reference: the longest stored prefix covering `key`, by a scan.
    fn naive<K: LpmKey>(stored: &[(K, u8, usize)], key: K) -> Option<(u8, usize)> {
        stored
            .iter()
            .filter(|(k, l, _)| key.masked(*l) == *k)
            .max_by_key(|(_, l, _)| *l)
            .map(|&(_, l, v)| (l, v))
    }

    /// Applies `ops` (insert when the flag is set, else remove) to a table and to the
    /// reference, and compares lookups of `probes` after every operation.
    fn check<K: LpmKey>(ops: &[(K, u8, bool)], probes: &[K]) -> Result<(), TestCaseError> {
        let mut table: Lpm<K, usize> = Lpm::new();
        let mut stored: Vec<(K, u8, usize)> = Vec::new();
        for (n, &(key, len, insert)) in ops.iter().enumerate() {
            let key = key.masked(len);
            let at = stored.iter().position(|&(k, l, _)| (k, l) == (key, len));
            if insert {
                // Few distinct values, shared by many prefixes, as routes share next hops.
                let value = n % 3;
                let old = table.insert(key, len, value);
                prop_assert_eq!(old, at.map(|i| stored[i].2));
                match at {
                    Some(i) => stored[i].2 = value,
                    None => stored.push((key, len, value)),
                }
            } else {
                let old = table.remove(key, len);
                prop_assert_eq!(old, at.map(|i| stored.remove(i).2));
            }
            prop_assert_eq!(table.len(), stored.len());
            for &p in probes {
                let got = table.lookup(p).map(|(_, l, v)| (l, *v));
                prop_assert_eq!(got, naive(&stored, p));
            }
        }
        if stored.is_empty() {
            prop_assert_eq!(table.nodes(), 1);
            prop_assert!(table.value_index.is_empty());
        }
        Ok(())
    }

    proptest! {
        /// IPv4-width keys from a small space so that prefixes nest, collide and are
        /// removed again.
        #[test]
        fn v4_agrees_with_a_scan(
            ops in proptest::collection::vec((0u32..64, 0u8..=32, proptest::bool::weighted(0.7)), 0..60),
            probes in proptest::collection::vec(0u32..64, 1..20),
        ) {
            let spread = |x: u32| x.rotate_right(6) | (x & 3) << 8;
            let ops: Vec<(u32, u8, bool)> = ops.into_iter().map(|(k, l, i)| (spread(k), l, i)).collect();
            let probes: Vec<u32> = probes.into_iter().map(spread).collect();
            check(&ops, &probes)?;
        }

        #[test]
        fn v6_agrees_with_a_scan(
            ops in proptest::collection::vec((0u128..64, 0u8..=128, proptest::bool::weighted(0.7)), 0..60),
            probes in proptest::collection::vec(0u128..64, 1..20),
        ) {
            let spread = |x: u128| x.rotate_right(6) | (x & 3) << 60;
            let ops: Vec<(u128, u8, bool)> = ops.into_iter().map(|(k, l, i)| (spread(k), l, i)).collect();
            let probes: Vec<u128> = probes.into_iter().map(spread).collect();
            check(&ops, &probes)?;
        }
    }
}
