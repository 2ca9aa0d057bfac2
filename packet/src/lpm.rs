//! Longest-prefix match over fixed-width keys: a multibit trie with 8-bit strides whose
//! nodes are stored compressed (poptrie-style bitmaps and popcounts), updated in place.
//!
//! Logically a node covers one byte of the key and has 256 slots. A prefix of length
//! `L > 0` lives in the node at depth `(L - 1) / 8` on its path and covers the
//! `2^(8 - r)` slots it expands to there (`r` its length within that byte; `/0` covers
//! every slot of the root). A slot's *best* is the longest prefix of its node covering
//! it, and a slot may lead to a child node for the next byte. A lookup reads one node per
//! byte of the key until there is no child, remembering the last best seen: at most 4
//! nodes for IPv4 and 16 for IPv6, however many prefixes the table holds.
//!
//! A node does not store its 256 slots. Neighbouring slots mostly share their best (a /20
//! covers 16 slots of its node, most slots of a sparse node have none), so a node keeps
//! one best per run of equal ones and a bitmap of the slots where a run starts; a second
//! bitmap marks the slots with a child, and a node's children are consecutive in the
//! node arena, in slot order. A slot's best and child are found by counting the bits
//! below it. A node is 80 bytes plus 4 per run, so the whole table stays small enough to
//! be mostly in cache (a lookup's cost is its cache misses): a full IPv4 table fits in
//! tens of megabytes, and a random IPv6 /48 costs a few small nodes, not a 256-slot node
//! per byte of its path. Nodes and bests live in arenas indexed by `u32`, in blocks of a
//! power-of-two length recycled by length. Values are stored once each however many
//! prefixes share them (routes share a few next hops), so the value a lookup ends at is
//! usually in cache.
//!
//! Inserting or removing one prefix rewrites the runs of one node (expanded to its 256
//! bests, the prefix's span changed, compressed again) and creates the nodes on its path
//! or frees those the removal left without prefixes or children. The prefixes themselves
//! are kept in a hash map by (length, network), which answers exact-match queries and, on
//! removal, which shorter prefix of the node now covers a slot.

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
const SLOTS: usize = 256;

/// The keys whose walks [`Lpm::lookup_batch`] interleaves: enough independent reads to
/// keep a core's outstanding cache misses busy (10 to 16 on current x86 cores).
pub const BATCH: usize = 16;

/// The most distinct values a table holds: their index has 24 bits in a best.
pub const MAX_VALUES: usize = (1 << 24) - 1;

/// A best: the index of its prefix's value in `Lpm::values` above 8 bits, the prefix's
/// length below; [`NONE`] for no prefix.
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

/// A bitmap over a node's 256 slots.
type Bits = [u64; 4];

/// Whether slot `s` is set.
fn has(bits: &Bits, s: u8) -> bool {
    bits[usize::from(s >> 6)] >> (s & 63) & 1 == 1
}

/// The number of slots set below `s`, plus `s` itself when `inclusive`.
fn rank(bits: &Bits, s: u8, inclusive: bool) -> usize {
    let word = usize::from(s >> 6);
    let upto = (1u64 << (s & 63)) - 1;
    let mask = if inclusive { upto << 1 | 1 } else { upto };
    bits[..word]
        .iter()
        .map(|b| b.count_ones() as usize)
        .sum::<usize>()
        + (bits[word] & mask).count_ones() as usize
}

fn count(bits: &Bits) -> usize {
    bits.iter().map(|b| b.count_ones() as usize).sum()
}

/// One node: 256 logical slots, stored as runs of equal bests plus its children.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// The slots where a run of equal bests starts (slot 0 always does).
    runs: Bits,
    /// The slots with a child.
    kids: Bits,
    /// The first of the runs' bests in `Lpm::bests`, one per run in slot order.
    bests: u32,
    /// The first of the children in `Lpm::nodes`, one per slot in `kids` in slot order
    /// ([`NONE`] without children).
    children: u32,
    /// The prefixes that live in this node.
    prefixes: u32,
}

impl Node {
    /// Its prefixes and children: the node is freed when none are left.
    fn used(&self) -> usize {
        self.prefixes as usize + count(&self.kids)
    }
}

/// Blocks of `T` in one vector, each of a power-of-two length up to 256, recycled by
/// length so that the vector does not grow with churn.
#[derive(Clone, Debug)]
struct Arena<T> {
    items: Vec<T>,
    /// The free blocks' first items, by the log2 of their length.
    free: [Vec<u32>; 9],
}

impl<T: Copy> Arena<T> {
    fn new() -> Self {
        Arena {
            items: Vec::new(),
            free: Default::default(),
        }
    }

    /// The free list of blocks holding `len` (1..=256) items.
    fn class(len: usize) -> usize {
        len.next_power_of_two().trailing_zeros() as usize
    }

    /// A block for `len` items, its items unspecified (recycled) or `fill`.
    fn alloc(&mut self, len: usize, fill: T) -> u32 {
        let class = Self::class(len);
        self.free[class].pop().unwrap_or_else(|| {
            let at = self.items.len();
            self.items.resize(at + (1 << class), fill);
            u32::try_from(at).expect("an arena holds fewer than 2^32 items")
        })
    }

    /// Gives back the block at `at` that was allocated for `len` items.
    fn release(&mut self, at: u32, len: usize) {
        self.free[Self::class(len)].push(at);
    }

    /// Whether a block for `old` items also fits `new` items.
    fn same_block(old: usize, new: usize) -> bool {
        Self::class(old) == Self::class(new)
    }

    fn bytes(&self) -> usize {
        self.items.capacity() * std::mem::size_of::<T>()
            + self.free.iter().map(|f| f.capacity() * 4).sum::<usize>()
    }
}

/// The heap bytes of a hash map: its entries and one control byte each, at capacity.
fn map_bytes<A, B>(map: &FastMap<A, B>) -> usize {
    map.capacity() * (std::mem::size_of::<(A, B)>() + 1)
}

/// A longest-prefix-match table from prefixes of `K` to values `V`.
#[derive(Clone, Debug)]
pub struct Lpm<K, V> {
    /// Every node, the root at 0; a node's children are one block.
    nodes: Arena<Node>,
    /// The bests of every node's runs; a node's bests are one block.
    bests: Arena<u32>,
    /// Nodes in use, the root included.
    live_nodes: usize,
    /// Each distinct value once, with the number of prefixes holding it (0: free).
    values: Vec<(V, u32)>,
    value_index: FastMap<V, u32>,
    free_values: Vec<u32>,
    /// Every prefix, by (length, network), to its value's index.
    by_prefix: FastMap<(u8, K), u32>,
}

impl<K: LpmKey, V: Clone + Eq + std::hash::Hash> Default for Lpm<K, V> {
    fn default() -> Self {
        let mut table = Lpm {
            nodes: Arena::new(),
            bests: Arena::new(),
            live_nodes: 1,
            values: Vec::new(),
            value_index: FastMap::default(),
            free_values: Vec::new(),
            by_prefix: FastMap::default(),
        };
        let root = table.empty_node();
        let at = table.nodes.alloc(1, root);
        debug_assert_eq!(at, 0);
        table
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

    /// Trie nodes in use, the root included.
    pub fn nodes(&self) -> usize {
        self.live_nodes
    }

    /// The heap bytes the table holds: the node and best arenas and the value list
    /// exactly (at their capacity, free blocks included), the two hash maps from their
    /// capacity (entries plus a control byte each), not the heap the values themselves
    /// may own.
    pub fn bytes(&self) -> usize {
        self.nodes.bytes()
            + self.bests.bytes()
            + self.values.capacity() * std::mem::size_of::<(V, u32)>()
            + self.free_values.capacity() * 4
            + map_bytes(&self.value_index)
            + map_bytes(&self.by_prefix)
    }

    /// Every prefix (network, length) and its value, in no particular order (the order
    /// holds while the table does not change).
    pub fn entries(&self) -> impl Iterator<Item = (K, u8, &V)> + '_ {
        self.by_prefix
            .iter()
            .map(|(&(len, key), &i)| (key, len, &self.values[i as usize].0))
    }

    /// The value stored for exactly this prefix.
    pub fn get(&self, key: K, len: u8) -> Option<&V> {
        let &i = self.by_prefix.get(&(len, key.masked(len)))?;
        Some(&self.values[i as usize].0)
    }

    /// The longest prefix covering `key`: its network, length and value. The walk of
    /// [`Lpm::lookup_batch`] for one key.
    pub fn lookup(&self, key: K) -> Option<(K, u8, &V)> {
        let [best] = self.walk::<1>(&[key]);
        self.found(key, best)
    }

    /// [`Lpm::lookup`] of each of `keys`, handed to `each` with its index in `keys`, in
    /// order. The walks of up to [`BATCH`] keys go down the trie together, one level of
    /// every key before the next level of any, so the CPU has a node read of each key
    /// in flight at once: in a table larger than the caches the misses of a batch
    /// overlap instead of following one another.
    pub fn lookup_batch<'a>(
        &'a self,
        keys: &[K],
        mut each: impl FnMut(usize, Option<(K, u8, &'a V)>),
    ) {
        for (c, chunk) in keys.chunks(BATCH).enumerate() {
            let bests = self.walk::<BATCH>(chunk);
            for (i, (&key, &best)) in chunk.iter().zip(&bests).enumerate() {
                each(c * BATCH + i, self.found(key, best));
            }
        }
    }

    /// The longest prefixes covering `keys` (at most `N` of them), as bests, in order;
    /// the bests past `keys.len()` are [`NONE`]. Each key's walk reads one node per byte
    /// of the key until its node has no child at the key's byte, keeping the last best
    /// seen; the walks advance level by level, each key's read independent of the others'.
    fn walk<const N: usize>(&self, keys: &[K]) -> [u32; N] {
        debug_assert!(keys.len() <= N);
        let mut best = [NONE; N];
        // Each key's node at this level; NONE once its walk has ended.
        let mut at = [NONE; N];
        at[..keys.len()].fill(0);
        let mut walking = keys.len();
        let mut depth = 0;
        while walking > 0 && depth < K::BITS / STRIDE {
            for (i, &key) in keys.iter().enumerate() {
                if at[i] == NONE {
                    continue;
                }
                let node = &self.nodes.items[at[i] as usize];
                let s = key.byte(depth);
                let here = self.bests.items[node.bests as usize + rank(&node.runs, s, true) - 1];
                if here != NONE {
                    best[i] = here;
                }
                at[i] = if has(&node.kids, s) {
                    node.children + rank(&node.kids, s, false) as u32
                } else {
                    walking -= 1;
                    NONE
                };
            }
            depth += 1;
        }
        best
    }

    /// What a lookup of `key` that ended at `best` returns.
    fn found(&self, key: K, best: u32) -> Option<(K, u8, &V)> {
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
        let node = self.node_for(key, depth);
        if previous.is_none() {
            self.nodes.items[node as usize].prefixes += 1;
        }
        let mut bests = self.expand(node);
        for best in Self::span(&mut bests, key, depth, rel).1 {
            if *best == NONE || unpack(*best).1 <= len {
                *best = pack(index, len);
            }
        }
        self.compress(node, &bests);
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
        let mut bests = self.expand(node);
        let (first, span) = Self::span(&mut bests, key, depth, rel);
        let mut emptied = Vec::new();
        for (s, best) in (first..).zip(span) {
            // Of the prefixes of this node covering the slot, one has each length.
            if *best != NONE && unpack(*best).1 == len {
                emptied.push(s);
            }
        }
        for s in emptied {
            bests[s] = self.covering(key, depth, s as u8);
        }
        self.compress(node, &bests);
        self.release(key, &path);
        Some(value)
    }

    /// The first slot and the slots a prefix of length `rel` within the byte at `depth`
    /// covers.
    fn span(bests: &mut [u32; SLOTS], key: K, depth: u8, rel: u8) -> (usize, &mut [u32]) {
        let count = 1usize << (STRIDE - rel);
        let first = usize::from(key.byte(depth)) & !(count - 1);
        (first, &mut bests[first..first + count])
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

    /// The 256 bests of node `n`.
    fn expand(&self, n: u32) -> [u32; SLOTS] {
        let node = &self.nodes.items[n as usize];
        let runs = &self.bests.items[node.bests as usize..];
        let mut bests = [NONE; SLOTS];
        let mut run = 0;
        for (s, best) in bests.iter_mut().enumerate() {
            if s > 0 && has(&node.runs, s as u8) {
                run += 1;
            }
            *best = runs[run];
        }
        bests
    }

    /// Stores `bests` as node `n`'s runs.
    fn compress(&mut self, n: u32, bests: &[u32; SLOTS]) {
        let mut runs: Bits = [0; 4];
        let mut values = Vec::with_capacity(SLOTS);
        for (s, &best) in bests.iter().enumerate() {
            if values.last() != Some(&best) {
                runs[s >> 6] |= 1 << (s & 63);
                values.push(best);
            }
        }
        let node = &mut self.nodes.items[n as usize];
        let old = count(&node.runs);
        node.runs = runs;
        if !Arena::<u32>::same_block(old, values.len()) {
            let old_block = node.bests;
            node.bests = self.bests.alloc(values.len(), NONE);
            self.bests.release(old_block, old);
        }
        let at = self.nodes.items[n as usize].bests as usize;
        self.bests.items[at..at + values.len()].copy_from_slice(&values);
    }

    /// A node without prefixes or children, its one run stored.
    fn empty_node(&mut self) -> Node {
        let bests = self.bests.alloc(1, NONE);
        self.bests.items[bests as usize] = NONE;
        Node {
            runs: [1, 0, 0, 0],
            kids: [0; 4],
            bests,
            children: NONE,
            prefixes: 0,
        }
    }

    /// Adds an empty child to `parent` at slot `s`, returning it. The parent's other
    /// children may move (they are found through the parent only).
    fn add_child(&mut self, parent: u32, s: u8) -> u32 {
        let fresh = self.empty_node();
        let p = self.nodes.items[parent as usize];
        let had = count(&p.kids);
        let at = rank(&p.kids, s, false);
        let block = if had > 0 && Arena::<Node>::same_block(had, had + 1) {
            p.children as usize
        } else {
            let block = self.nodes.alloc(had + 1, fresh) as usize;
            if had > 0 {
                let from = p.children as usize;
                self.nodes.items.copy_within(from..from + at, block);
                self.nodes.release(p.children, had);
            }
            block
        };
        let from = p.children as usize + at;
        if had > 0 {
            self.nodes
                .items
                .copy_within(from..p.children as usize + had, block + at + 1);
        }
        self.nodes.items[block + at] = fresh;
        let p = &mut self.nodes.items[parent as usize];
        p.kids[usize::from(s >> 6)] |= 1 << (s & 63);
        p.children = block as u32;
        self.live_nodes += 1;
        (block + at) as u32
    }

    /// Frees the child of `parent` at slot `s`, which has no prefixes or children.
    fn remove_child(&mut self, parent: u32, s: u8) {
        let p = self.nodes.items[parent as usize];
        let had = count(&p.kids);
        let at = rank(&p.kids, s, false);
        let from = p.children as usize;
        let child = self.nodes.items[from + at];
        debug_assert_eq!(child.used(), 0);
        self.bests.release(child.bests, count(&child.runs));
        let block = if had == 1 {
            self.nodes.release(p.children, had);
            NONE
        } else if Arena::<Node>::same_block(had, had - 1) {
            self.nodes
                .items
                .copy_within(from + at + 1..from + had, from + at);
            p.children
        } else {
            let block = self.nodes.alloc(had - 1, child);
            let to = block as usize;
            self.nodes.items.copy_within(from..from + at, to);
            self.nodes
                .items
                .copy_within(from + at + 1..from + had, to + at);
            self.nodes.release(p.children, had);
            block
        };
        let p = &mut self.nodes.items[parent as usize];
        p.kids[usize::from(s >> 6)] &= !(1 << (s & 63));
        p.children = block;
        self.live_nodes -= 1;
    }

    /// The child of node `n` at slot `s`, if any.
    fn child(&self, n: u32, s: u8) -> Option<u32> {
        let node = &self.nodes.items[n as usize];
        has(&node.kids, s).then(|| node.children + rank(&node.kids, s, false) as u32)
    }

    /// The node at `depth` on `key`'s path, created with the nodes above it as needed.
    fn node_for(&mut self, key: K, depth: u8) -> u32 {
        let mut node = 0u32;
        for d in 0..depth {
            let s = key.byte(d);
            node = match self.child(node, s) {
                Some(child) => child,
                None => self.add_child(node, s),
            };
        }
        node
    }

    /// The nodes from the root down to depth `depth` on `key`'s path, if they exist.
    fn path(&self, key: K, depth: u8) -> Option<Vec<u32>> {
        let mut path = vec![0u32];
        for d in 0..depth {
            path.push(self.child(*path.last()?, key.byte(d))?);
        }
        Some(path)
    }

    /// Drops one prefix of the last node of `path` and frees the nodes the removal left
    /// without prefixes or children, bottom up (never the root).
    fn release(&mut self, key: K, path: &[u32]) {
        let mut depth = path.len() - 1;
        self.nodes.items[path[depth] as usize].prefixes -= 1;
        while depth > 0 && self.nodes.items[path[depth] as usize].used() == 0 {
            self.remove_child(path[depth - 1], key.byte(depth as u8 - 1));
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
            audit(&table)?;
            for &p in probes {
                let got = table.lookup(p).map(|(_, l, v)| (l, *v));
                prop_assert_eq!(got, naive(&stored, p));
            }
            // The probes thrice over: batches of several walks, a partial one last.
            let keys: Vec<K> = probes
                .iter()
                .cycle()
                .take(3 * probes.len())
                .copied()
                .collect();
            let mut batched = Vec::new();
            table.lookup_batch(&keys, |i, hit| {
                batched.push((i, hit.map(|(k, l, v)| (k, l, *v))))
            });
            let single: Vec<_> = keys
                .iter()
                .enumerate()
                .map(|(i, &k)| (i, table.lookup(k).map(|(k, l, v)| (k, l, *v))))
                .collect();
            prop_assert_eq!(batched, single);
        }
        if stored.is_empty() {
            prop_assert_eq!(table.nodes(), 1);
            prop_assert!(table.value_index.is_empty());
        }
        Ok(())
    }

    /// Checks the layout's invariants: every node but the root holds prefixes or
    /// children, a node's runs are maximal (neighbours differ), the prefixes counted in
    /// the nodes are the table's, and every arena item is in a live block or a free one.
    fn audit<K: LpmKey, V: Clone + Eq + std::hash::Hash>(
        table: &Lpm<K, V>,
    ) -> Result<(), TestCaseError> {
        let mut nodes = 0;
        let mut prefixes = 0;
        // Items held by live blocks, by arena: the root's block of one node first.
        let (mut node_items, mut best_items) = (1, 0);
        let mut stack = vec![(0u32, true)];
        while let Some((n, root)) = stack.pop() {
            let node = table.nodes.items[n as usize];
            nodes += 1;
            prefixes += node.prefixes as usize;
            prop_assert!(root || node.used() > 0, "node {} left empty", n);
            let runs = count(&node.runs);
            let bests = &table.bests.items[node.bests as usize..][..runs];
            prop_assert!(bests.windows(2).all(|w| w[0] != w[1]), "runs not maximal");
            best_items += runs.next_power_of_two();
            let kids = count(&node.kids);
            if kids > 0 {
                node_items += kids.next_power_of_two();
                stack.extend((0..kids as u32).map(|k| (node.children + k, false)));
            }
        }
        prop_assert_eq!(nodes, table.nodes());
        prop_assert_eq!(prefixes, table.len());
        let free = |free: &[Vec<u32>; 9]| -> usize {
            free.iter()
                .enumerate()
                .map(|(class, f)| f.len() << class)
                .sum()
        };
        prop_assert_eq!(
            node_items + free(&table.nodes.free),
            table.nodes.items.len()
        );
        prop_assert_eq!(
            best_items + free(&table.bests.free),
            table.bests.items.len()
        );
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

        /// Overlapping prefixes around one random IPv6 key (its own prefixes of many
        /// lengths and those of keys one bit away), inserted and then all removed in a
        /// random order: nodes deep on one path are created, shared, emptied and freed.
        #[test]
        fn v6_overlapping_prefixes_build_and_collapse(
            base in any::<u128>(),
            prefixes in proptest::collection::vec((0u8..=128, proptest::option::of(0u8..128)), 24),
            order in Just((0..24usize).collect::<Vec<_>>()).prop_shuffle(),
            flips in proptest::collection::vec(0u8..128, 1..12),
        ) {
            let key = |flip: Option<u8>| flip.map_or(base, |bit| base ^ 1u128 << bit);
            let mut ops: Vec<(u128, u8, bool)> =
                prefixes.iter().map(|&(len, flip)| (key(flip), len, true)).collect();
            ops.extend(order.iter().map(|&i| (key(prefixes[i].1), prefixes[i].0, false)));
            let mut probes: Vec<u128> = flips.into_iter().map(|bit| key(Some(bit))).collect();
            probes.push(base);
            check(&ops, &probes)?;
        }
    }
}
