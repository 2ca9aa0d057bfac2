//! The router's tables as `polld netstat -rn` and `polld arp -an` show them: one page of
//! the IPv4 routes, the IPv6 routes or the neighbours, in netstat's columns, built on the
//! poll thread between two pieces of work.
//!
//! A page is bounded: at most [`MAX_TABLE_PAGE`] entries, found by walking the table's
//! own order up to the page (no sort, no copy of the whole table), so a million routes
//! are read in pages that each hold the poll thread for a walk of the prefix map, never
//! for the whole listing; the client asks for the pages one after another.

use std::net::IpAddr;

use polld_control::proto::{TableName, TablePage, TableRow, MAX_TABLE_PAGE};
use polld_packet::route::{Group, Member, NextHop, Reject, Route};
use polld_packet::Forwarder;

/// Page `from`.. (at most `limit` entries) of `table` of `router`, whose devices are named
/// `names` in device-index order; `updated_s` is when the kernel's tables last changed
/// it (`None` with `tables = "file"`).
pub fn page(
    router: &Forwarder,
    names: &[&str],
    table: TableName,
    from: u64,
    limit: u64,
    updated_s: Option<u64>,
) -> TablePage {
    let routes = router.routes();
    let netif = |out: usize| names.get(out).map_or("-", |n| *n).to_string();
    let file = !router.kernel_tables();
    let take = limit.clamp(1, MAX_TABLE_PAGE) as usize;
    let skip = usize::try_from(from).unwrap_or(usize::MAX);
    let (total, taken): (usize, Vec<Vec<TableRow>>) = match table {
        TableName::Inet => (
            routes.len(),
            routes
                .entries()
                .skip(skip)
                .take(take)
                .map(|(net, route)| {
                    let members = group(route, |g| routes.members(g));
                    route_rows(&net.to_string(), net.prefix_len() == 32, &members, file, &netif)
                })
                .collect(),
        ),
        TableName::Inet6 => (
            routes.len6(),
            routes
                .entries6()
                .skip(skip)
                .take(take)
                .map(|(net, route)| {
                    let members = group(route, |g| routes.members6(g));
                    route_rows(&net.to_string(), net.prefix_len() == 128, &members, file, &netif)
                })
                .collect(),
        ),
        TableName::Neighbours => (
            router.neighbour_entries().count(),
            router
                .neighbour_entries()
                .skip(skip)
                .take(take)
                .map(|(ip, mac, permanent, on)| {
                    vec![TableRow {
                        destination: ip.to_string(),
                        gateway: mac.to_string(),
                        flags: if permanent { "permanent" } else { "" }.to_string(),
                        netif: on.map_or_else(|| "-".to_string(), &netif),
                        weight: None,
                    }]
                })
                .collect(),
        ),
    };
    let end = skip.saturating_add(taken.len());
    TablePage {
        source: if file { "file" } else { "kernel" }.to_string(),
        total: total as u64,
        next: (end < total).then_some(end as u64),
        updated_s,
        rows: taken.into_iter().flatten().collect(),
    }
}

/// A route's next hops: its group's members with their weights, or itself alone.
fn group<'a, A: Copy + 'a>(
    route: &Route<A>,
    members: impl FnOnce(Group) -> &'a [Member<A>],
) -> Vec<(Route<A>, Option<u16>)> {
    match route.next_hop {
        NextHop::Multipath(g) => members(g).iter().map(|&(r, w)| (r, Some(w))).collect(),
        _ => vec![(*route, None)],
    }
}

/// The rows of the route for `destination` (`host`: a /32 or /128), one per next hop.
fn route_rows<A: Copy + Into<IpAddr>>(
    destination: &str,
    host: bool,
    members: &[(Route<A>, Option<u16>)],
    file: bool,
    netif: &dyn Fn(usize) -> String,
) -> Vec<TableRow> {
    members
        .iter()
        .map(|&(route, weight)| {
            let (gateway, kind, netif) = match route.next_hop {
                NextHop::Connected => (format!("link#{}", route.out + 1), "", netif(route.out)),
                NextHop::Gateway(gw) => (gw.into().to_string(), "G", netif(route.out)),
                NextHop::Reject(Reject::Blackhole) => ("-".into(), "B", "-".into()),
                NextHop::Reject(Reject::Unreachable | Reject::Prohibit) => {
                    ("-".into(), "R", "-".into())
                }
                NextHop::Reject(Reject::Unpolled) => ("-".into(), "K", "-".into()),
                NextHop::Multipath(_) => unreachable!("a group's members are single paths"),
            };
            let flags = format!(
                "U{kind}{}{}",
                if host { "H" } else { "" },
                if file { "S" } else { "" }
            );
            TableRow {
                destination: destination.to_string(),
                gateway,
                flags,
                netif,
                weight,
            }
        })
        .collect()
}
