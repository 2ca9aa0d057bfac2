//! How the route table's cost depends on its size: with one route (a default) and with
//! 1,000,000 random IPv4 routes and 200,000 IPv6 ones of realistic prefix lengths, the
//! lookups per second and, for IPv4, the frames per second the forwarder handles, each as
//! a ratio to the one-route rate of the same run; the time to load the routes; the memory
//! they take against 512 MB; and the rate of in-place replacements. It prints; it asserts
//! nothing about speed.
//!
//! Both tables sit in a [`Forwarder`] of `testdata/router.toml` (its own three routes
//! beside them), every route via its gateway with a static ARP entry, so a frame is
//! routed, rewritten and handed to an output that discards it. The destinations are
//! spread over the table: each is an address inside one of the loaded prefixes, every
//! prefix in turn, with random host bits (random addresses would mostly miss the long
//! prefixes and test the few short ones). The one-route and the full tables are measured
//! on the same destinations, the best of three passes each. The small tables hold a default
//! route beside the file's own.
//!
//! The batched rows look the same destinations up in bursts of [`BURST`], as a poll's
//! handful of frames ([`polld_packet::route::RouteTable::lookup_batch`]: the walks of a
//! batch interleaved, their cache misses overlapping), as a ratio to the one-route rate
//! of single lookups; single and batched lookups of a table are measured alternately,
//! and a line gives the full tables' batched rate over their single one.
//!
//! Two rows give the floor the hardware sets: dependent random reads over 32 KB (the
//! small table, in the L1 cache) and over as many bytes as the full table holds. A lookup
//! in a table larger than the caches costs at least one such miss, whatever its layout.
//!
//! Memory is given twice: the exact heap bytes of the full table's arenas and maps
//! ([`polld_packet::route::RouteTable::bytes`]), and the growth of the process's resident set while the routes
//! were loaded (`VmRSS` of `/proc/self/status`, which also counts the allocator's slack).
//!
//! `cargo run --release -p polld-packet --example lpm_scale [-- IPV4_ROUTES]`
//! (IPv6 routes: a fifth of them).

use polld_core::rng::{Rng, V4_TABLE_LENGTHS, V6_TABLE_LENGTHS};
use polld_core::PacketStage;
use polld_packet::route::{NextHop, Route, RouteTable};
use polld_packet::{Forwarder, Ipv4Net, Ipv6Net, PacketConfig};
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

#[path = "../benches/support/forwarding.rs"]
mod forwarding;
use forwarding::{udp_frame, Discard};

const CONFIG: &str = include_str!("../testdata/router.toml");
/// The gateway of `testdata/router.toml`'s second port, with its static ARP entry.
const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Destinations per burst in the batched rows: a poll's `each_burst`-sized handful, in
/// batches of [`polld_packet::lpm::BATCH`].
const BURST: usize = 32;

/// The memory budget the figures are held against.
const BUDGET_MB: f64 = 512.0;

/// The next random IPv4 prefix.
fn prefix4(rng: &mut Rng) -> Ipv4Net {
    let len = rng.weighted(&V4_TABLE_LENGTHS);
    Ipv4Net::new(Ipv4Addr::from(rng.next_u64() as u32), len)
        .unwrap()
        .network()
}

/// The next random IPv6 prefix, in 2000::/3 as global unicast.
fn prefix6(rng: &mut Rng) -> Ipv6Net {
    let len = rng.weighted(&V6_TABLE_LENGTHS);
    let high = rng.next_u64() >> 3 | 1 << 61;
    Ipv6Net::new(Ipv6Addr::from(u128::from(high) << 64), len)
        .unwrap()
        .network()
}

fn route4() -> Route {
    Route {
        out: 1,
        next_hop: NextHop::Gateway(GATEWAY),
    }
}

fn route6() -> Route<Ipv6Addr> {
    Route {
        out: 1,
        next_hop: NextHop::Connected,
    }
}

/// Operations per second of `op` over `items`, one pass.
fn rate<A: Copy>(items: &[A], mut op: impl FnMut(A) -> usize) -> f64 {
    let start = Instant::now();
    let mut sum = 0usize;
    for &a in items {
        sum += black_box(op(black_box(a)));
    }
    black_box(sum);
    items.len() as f64 / start.elapsed().as_secs_f64()
}

/// The best of three alternate passes of `a` and of `b` (each returning its rate), so
/// that a machine busy with other work shifts both alike.
fn best_of_three(mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) -> (f64, f64) {
    (0..3).fold((0.0f64, 0.0f64), |(x, y), _| (x.max(a()), y.max(b())))
}

/// The rates of `op` on the one-route and on the full forwarder ([`best_of_three`]).
fn compare<A: Copy>(
    items: &[A],
    one: &mut Forwarder,
    full: &mut Forwarder,
    op: impl Fn(&mut Forwarder, A) -> usize,
) -> (f64, f64) {
    best_of_three(
        || rate(items, |a| op(one, a)),
        || rate(items, |a| op(full, a)),
    )
}

/// Lookups per second of `dsts` in `table`, one by one and in bursts of [`BURST`]
/// ([`RouteTable::lookup_batch`]), by [`best_of_three`].
fn single_and_batched<A: Copy>(
    dsts: &[A],
    table: &RouteTable,
    single: impl Fn(&RouteTable, A) -> usize,
    batched: impl Fn(&RouteTable, &[A]) -> usize,
) -> (f64, f64) {
    let bursts: Vec<&[A]> = dsts.chunks(BURST).collect();
    best_of_three(
        || rate(dsts, |a| single(table, a)),
        || rate(&bursts, |burst| batched(table, burst)) * BURST as f64,
    )
}

/// Random reads per second over `bytes` of memory, each read's address depending on the
/// one before (as a trie's reads do): what one cache miss per lookup allows.
fn scattered_reads(bytes: usize) -> f64 {
    let words: Vec<u32> = (0..(bytes / 4) as u32).collect();
    let mut rng = Rng::new(38);
    let steps: Vec<usize> = (0..1 << 20).map(|_| rng.next_u64() as usize).collect();
    let mut at = 0usize;
    rate(&steps, |step| {
        at = words[(step ^ at) % words.len()] as usize;
        at
    })
}

/// Routes and rewrites a frame to `dst`: 1 when it is forwarded.
fn forward(fwd: &mut Forwarder, dst: Ipv4Addr) -> usize {
    let mut frame = udp_frame(dst);
    usize::from(matches!(
        fwd.process(0, &mut frame, &mut Discard),
        polld_core::Verdict::Forward { .. }
    ))
}

/// The process's resident set in bytes.
fn resident() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .expect("VmRSS in /proc/self/status");
    kb << 10
}

fn mb(bytes: usize) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn main() {
    let big: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("IPV4_ROUTES is a number"))
        .unwrap_or(1_000_000);
    let config: PacketConfig = toml::from_str(CONFIG).expect("testdata/router.toml");
    let forwarder = || Forwarder::new(&config, &["veth1", "veth2"]).expect("testdata/router.toml");
    let default4 = Ipv4Net::ANY;
    let default6: Ipv6Net = "::/0".parse().unwrap();
    let mut one = forwarder();
    one.routes_mut().insert(default4, route4());
    one.routes_mut().insert6(default6, route6());

    let seed = Rng::new(36);
    let before = resident();
    let mut full = forwarder();
    let table = full.routes_mut();
    table.insert(default4, route4());
    table.insert6(default6, route6());
    let preset = table.len();
    let mut rng = seed.clone();
    let mut drawn4 = 0;
    let start = Instant::now();
    while table.len() < preset + big {
        table.insert(prefix4(&mut rng), route4());
        drawn4 += 1;
    }
    let load4 = start.elapsed().as_secs_f64();
    let rng6 = rng.clone();
    let mut drawn6 = 0;
    let start = Instant::now();
    while table.len6() < 1 + big / 5 {
        table.insert6(prefix6(&mut rng), route6());
        drawn6 += 1;
    }
    let load6 = start.elapsed().as_secs_f64();
    let grown = resident().saturating_sub(before);
    let (routes4, routes6, bytes) = (table.len(), table.len6(), table.bytes());

    // Destinations inside the loaded prefixes, replayed from the same generator.
    let mut host = Rng::new(37);
    let mut replay = seed.clone();
    let probes: Vec<Ipv4Addr> = (0..drawn4.min(1 << 20))
        .map(|_| {
            let net = prefix4(&mut replay);
            let bits = !0u32
                .checked_shl(u32::from(32 - net.prefix_len()))
                .unwrap_or(0);
            Ipv4Addr::from(u32::from(net.addr()) | host.next_u64() as u32 & bits)
        })
        .collect();
    let probes6: Vec<Ipv6Addr> = (0..1 << 20)
        .map(|i| {
            if i % drawn6 == 0 {
                replay = rng6.clone();
            }
            let net = prefix6(&mut replay);
            let bits = !0u128
                .checked_shl(u32::from(128 - net.prefix_len()))
                .unwrap_or(0);
            let random = u128::from(host.next_u64()) << 64 | u128::from(host.next_u64());
            Ipv6Addr::from(u128::from(net.addr()) | random & bits)
        })
        .collect();

    let single4 = |t: &RouteTable, a| t.lookup(a).map_or(0, |(_, r)| r.out);
    let batched4 = |t: &RouteTable, burst: &[Ipv4Addr]| {
        let mut outs = 0;
        t.lookup_batch(burst, |_, hit| outs += hit.map_or(0, |(_, r)| r.out));
        outs
    };
    let single6 = |t: &RouteTable, a| t.lookup6(a).map_or(0, |(_, r)| r.out);
    let batched6 = |t: &RouteTable, burst: &[Ipv6Addr]| {
        let mut outs = 0;
        t.lookup_batch6(burst, |_, hit| outs += hit.map_or(0, |(_, r)| r.out));
        outs
    };
    let (one4, oneb4) = single_and_batched(&probes, one.routes_mut(), single4, batched4);
    let (full4, fullb4) = single_and_batched(&probes, full.routes_mut(), single4, batched4);
    let (one6, oneb6) = single_and_batched(&probes6, one.routes_mut(), single6, batched6);
    let (full6, fullb6) = single_and_batched(&probes6, full.routes_mut(), single6, batched6);
    let (onef, fullf) = compare(&probes, &mut one, &mut full, forward);
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9}",
        "", "routes", "M/s", "x small", "load s"
    );
    let row = |what: &str, routes: Option<usize>, rate: f64, one: f64, load: Option<f64>| {
        println!(
            "{what:<22} {:>9} {:>9.2} {:>9.2} {:>9}",
            routes.map_or("-".into(), |r| r.to_string()),
            rate / 1e6,
            rate / one,
            load.map_or("-".into(), |s| format!("{s:.2}"))
        )
    };
    let (small4, small6) = (one.routes_mut().len(), one.routes_mut().len6());
    row("IPv4 lookups", Some(small4), one4, one4, None);
    row("IPv4 lookups", Some(routes4), full4, one4, Some(load4));
    row("IPv6 lookups", Some(small6), one6, one6, None);
    row("IPv6 lookups", Some(routes6), full6, one6, Some(load6));
    row("IPv4 lookups, batched", Some(small4), oneb4, one4, None);
    row("IPv4 lookups, batched", Some(routes4), fullb4, one4, None);
    row("IPv6 lookups, batched", Some(small6), oneb6, one6, None);
    row("IPv6 lookups, batched", Some(routes6), fullb6, one6, None);
    row("IPv4 frames forwarded", Some(small4), onef, onef, None);
    row("IPv4 frames forwarded", Some(routes4), fullf, onef, None);
    let (cached, spread) = (scattered_reads(32 << 10), scattered_reads(bytes));
    println!(
        "batched over single lookups, full tables (passes alternating): IPv4 {:.2}x, IPv6 {:.2}x",
        fullb4 / full4,
        fullb6 / full6
    );
    row("reads in 32 KB", None, cached, cached, None);
    row("reads in table's size", None, spread, cached, None);
    println!(
        "memory of both tables: {:.1} MB of arenas and maps, {:.1} MB of resident set growth \
         ({:.2}x of {BUDGET_MB} MB)",
        mb(bytes),
        mb(grown),
        mb(grown) / BUDGET_MB
    );

    // Replace routes in place: remove one random /24 and put it back, as a route change.
    let table = full.routes_mut();
    let changes = 100_000;
    let start = Instant::now();
    for _ in 0..changes {
        let net = Ipv4Net::new(Ipv4Addr::from(rng.next_u64() as u32), 24)
            .unwrap()
            .network();
        if let Some(r) = table.remove(net) {
            table.insert(net, r);
        } else {
            table.insert(net, route4());
            table.remove(net);
        }
    }
    println!(
        "in-place changes: {:.2} M remove+insert pairs/s",
        changes as f64 / start.elapsed().as_secs_f64() / 1e6
    );
}
