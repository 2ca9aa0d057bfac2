//! A small, seeded, repeatable random generator (splitmix64), for simulated arrivals,
//! fault injection and the benches' random routing tables: the same seed gives the same
//! run.

/// IPv4 prefix lengths with weights in percent, roughly as in a full Internet table: the
/// benches' random tables draw their lengths from it ([`Rng::weighted`]).
pub const V4_TABLE_LENGTHS: [(u8, u64); 10] = [
    (8, 1),
    (12, 1),
    (16, 3),
    (18, 2),
    (19, 3),
    (20, 5),
    (21, 5),
    (22, 12),
    (23, 10),
    (24, 58),
];

/// IPv6 prefix lengths with weights in percent, mostly /48 as in a full Internet table.
pub const V6_TABLE_LENGTHS: [(u8, u64); 10] = [
    (29, 3),
    (32, 15),
    (36, 5),
    (40, 8),
    (44, 10),
    (46, 4),
    (47, 3),
    (48, 47),
    (56, 3),
    (64, 2),
];

/// splitmix64: a small, seeded, repeatable generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n` > 0); the modulo bias is below 2^-40 for any `n` polld uses.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// One of `table`'s items, each with its weight's share of the total (weights in any
    /// unit; `table` not empty, its total weight above 0).
    pub fn weighted<T: Copy>(&mut self, table: &[(T, u64)]) -> T {
        let mut roll = self.below(table.iter().map(|&(_, w)| w).sum());
        for &(item, weight) in table {
            if roll < weight {
                return item;
            }
            roll -= weight;
        }
        table[table.len() - 1].0
    }
    /// Uniform in (0, 1].
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_draws_only_weighted_items_in_their_proportions() {
        let mut rng = Rng::new(7);
        let table = [(1u8, 0), (2, 3), (3, 0), (4, 1)];
        let mut seen = [0u32; 5];
        for _ in 0..4000 {
            seen[usize::from(rng.weighted(&table))] += 1;
        }
        assert_eq!((seen[1], seen[3]), (0, 0), "{seen:?}");
        // 3000 and 1000 expected; a splitmix64 stream of 4000 is well within 10 %.
        assert!((2700..3300).contains(&seen[2]), "{seen:?}");
        assert_eq!(seen[2] + seen[4], 4000);
    }
}
