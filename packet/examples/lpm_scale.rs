//! How the route table's lookup rate depends on its size: lookups per second of random
//! destinations with 10 routes and with 1,000,000 random IPv4 routes (and 200,000 IPv6
//! ones) of realistic prefix lengths, with the time to load them, the trie's size and the
//! rate of in-place replacements. It prints; it asserts nothing about speed.
//!
//! `cargo run --release -p polld-packet --example lpm_scale [-- ROUTES]`

use polld_packet::route::{NextHop, Route, RouteTable};
use polld_packet::{Ipv4Net, Ipv6Net};
use polld_sim::nic::Rng;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

/// IPv4 prefix lengths with weights in percent, roughly as in a full Internet table.
const V4_LENGTHS: [(u8, u64); 10] = [
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
/// IPv6 prefix lengths with weights in percent.
const V6_LENGTHS: [(u8, u64); 5] = [(29, 5), (32, 20), (40, 10), (44, 15), (48, 50)];

fn pick_len(rng: &mut Rng, table: &[(u8, u64)]) -> u8 {
    let mut roll = rng.next_u64() % 100;
    for &(len, weight) in table {
        if roll < weight {
            return len;
        }
        roll -= weight;
    }
    table[table.len() - 1].0
}

fn route<A>(out: usize) -> Route<A> {
    Route {
        out,
        next_hop: NextHop::Connected,
    }
}

/// Lookups per second of `probes`, over `rounds` passes.
fn rate(table: &RouteTable, probes: &[Ipv4Addr], rounds: usize) -> f64 {
    let start = Instant::now();
    let mut hits = 0usize;
    for _ in 0..rounds {
        for &p in probes {
            hits += black_box(table.lookup(black_box(p))).map_or(0, |(_, r)| r.out);
        }
    }
    black_box(hits);
    (probes.len() * rounds) as f64 / start.elapsed().as_secs_f64()
}

fn rate6(table: &RouteTable, probes: &[Ipv6Addr], rounds: usize) -> f64 {
    let start = Instant::now();
    let mut hits = 0usize;
    for _ in 0..rounds {
        for &p in probes {
            hits += black_box(table.lookup6(black_box(p))).map_or(0, |(_, r)| r.out);
        }
    }
    black_box(hits);
    (probes.len() * rounds) as f64 / start.elapsed().as_secs_f64()
}

/// The trie's slots in megabytes (256 slots of 8 bytes per node).
fn megabytes(table: &RouteTable) -> usize {
    (table.trie_nodes() * 256 * 8) >> 20
}

fn main() {
    let big: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("ROUTES is a number"))
        .unwrap_or(1_000_000);
    let mut rng = Rng::new(36);
    let probes: Vec<Ipv4Addr> = (0..1 << 20)
        .map(|_| Ipv4Addr::from(rng.next_u64() as u32))
        .collect();
    let probes6: Vec<Ipv6Addr> = (0..1 << 20)
        .map(|_| {
            Ipv6Addr::from(
                (0x2000u128 << 112) | u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64()),
            )
        })
        .collect();

    let mut small = RouteTable::new();
    small.insert(Ipv4Net::ANY, route(0));
    for i in 1..10u32 {
        small.insert(
            Ipv4Net::new(Ipv4Addr::from(i << 24), 8).unwrap(),
            route(i as usize),
        );
    }
    let small_rate = rate(&small, &probes, 8);
    println!(
        "IPv4, {:>9} routes: {:>6.1} M lookups/s",
        small.len(),
        small_rate / 1e6
    );

    let mut table = RouteTable::new();
    table.insert(Ipv4Net::ANY, route(0));
    let start = Instant::now();
    while table.len() < big {
        let len = pick_len(&mut rng, &V4_LENGTHS);
        let addr = Ipv4Addr::from(rng.next_u64() as u32);
        table.insert(
            Ipv4Net::new(addr, len).unwrap().network(),
            route(table.len() % 4),
        );
    }
    let load = start.elapsed();
    let big_rate = rate(&table, &probes, 8);
    println!(
        "IPv4, {:>9} routes: {:>6.1} M lookups/s ({:.2}x the 10-route rate); loaded in {:.2} s; {} MB of trie",
        table.len(),
        big_rate / 1e6,
        big_rate / small_rate,
        load.as_secs_f64(),
        megabytes(&table)
    );
    let v4_megabytes = megabytes(&table);

    let start = Instant::now();
    let mut v6 = 0;
    while v6 < big / 5 {
        let len = pick_len(&mut rng, &V6_LENGTHS);
        let addr = Ipv6Addr::from((0x2000u128 << 112) | (u128::from(rng.next_u64()) << 64));
        if table
            .insert6(Ipv6Net::new(addr, len).unwrap().network(), route(v6 % 4))
            .is_none()
        {
            v6 += 1;
        }
    }
    let load6 = start.elapsed();
    println!(
        "IPv6, {:>9} routes: {:>6.1} M lookups/s; loaded in {:.2} s; {} MB of trie",
        table.len6(),
        rate6(&table, &probes6, 4) / 1e6,
        load6.as_secs_f64(),
        megabytes(&table) - v4_megabytes
    );

    // Replace routes in place: remove one random /24 and put it back, as a route change.
    let changes = 100_000;
    let start = Instant::now();
    for _ in 0..changes {
        let net = Ipv4Net::new(Ipv4Addr::from(rng.next_u64() as u32), 24)
            .unwrap()
            .network();
        if let Some(r) = table.remove(net) {
            table.insert(net, r);
        } else {
            table.insert(net, route(1));
            table.remove(net);
        }
    }
    println!(
        "in-place changes: {:.2} M remove+insert pairs/s",
        changes as f64 / start.elapsed().as_secs_f64() / 1e6
    );
}
