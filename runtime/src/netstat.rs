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
                    route_rows(
                        &net.to_string(),
                        net.prefix_len() == 32,
                        &members,
                        file,
                        &netif,
                    )
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
                    route_rows(
                        &net.to_string(),
                        net.prefix_len() == 128,
                        &members,
                        file,
                        &netif,
                    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use polld_packet::{Ipv4Net, PacketConfig};

    fn router() -> Forwarder {
        let config: PacketConfig = toml::from_str(
            r#"
            tables = "kernel"
            [[interfaces]]
            name = "veth1"
            mac = "02:00:00:00:01:01"
            [[interfaces]]
            name = "veth2"
            mac = "02:00:00:00:02:01"
            "#,
        )
        .unwrap();
        Forwarder::new(&config, &["veth1", "veth2"]).unwrap()
    }

    /// Every page of `table`, asked for as the client does.
    fn pages(router: &Forwarder, table: TableName) -> Vec<TablePage> {
        let mut pages = vec![page(
            router,
            &["veth1", "veth2"],
            table,
            0,
            u64::MAX,
            Some(7),
        )];
        while let Some(next) = pages.last().unwrap().next {
            pages.push(page(
                router,
                &["veth1", "veth2"],
                table,
                next,
                u64::MAX,
                Some(7),
            ));
        }
        pages
    }

    #[test]
    fn a_table_is_read_in_bounded_pages_with_a_row_per_next_hop() {
        let mut router = router();
        let via = |out, gw: [u8; 4]| Route {
            out,
            next_hop: NextHop::Gateway(gw.into()),
        };
        let routes = router.routes_mut();
        let count = 5000u32;
        for i in 0..count {
            let net = Ipv4Net::new((0x0a00_0000 | i << 8).into(), 24).unwrap();
            routes.insert(net, via(1, [10, 0, 2, 2]));
        }
        routes.insert_multipath(
            "10.200.0.0/16".parse().unwrap(),
            &[(via(0, [10, 0, 1, 2]), 1), (via(1, [10, 0, 2, 2]), 3)],
        );
        let blackhole = Route {
            out: 0,
            next_hop: NextHop::Reject(Reject::Blackhole),
        };
        routes.insert("192.0.2.1/32".parse().unwrap(), blackhole);
        let pages = pages(&router, TableName::Inet);
        assert_eq!(pages.len(), 2, "4096 entries a page at most");
        let rows: Vec<&TableRow> = pages.iter().flat_map(|p| &p.rows).collect();
        assert!(pages.iter().all(|p| p.total == u64::from(count) + 2));
        assert_eq!(
            rows.len() as u32,
            count + 3,
            "the multipath route has two rows"
        );
        let distinct: std::collections::HashSet<&str> =
            rows.iter().map(|r| r.destination.as_str()).collect();
        assert_eq!(
            distinct.len() as u32,
            count + 2,
            "no route twice, none missed"
        );
        let of = |d: &str| {
            rows.iter()
                .filter(|r| r.destination == d)
                .collect::<Vec<_>>()
        };
        let shown = |r: &TableRow| {
            (
                r.gateway.clone(),
                r.flags.clone(),
                r.netif.clone(),
                r.weight,
            )
        };
        let spread: Vec<_> = of("10.200.0.0/16").into_iter().map(|r| shown(r)).collect();
        assert_eq!(
            spread,
            [
                ("10.0.1.2".into(), "UG".into(), "veth1".into(), Some(1)),
                ("10.0.2.2".into(), "UG".into(), "veth2".into(), Some(3)),
            ]
        );
        assert_eq!(
            shown(of("192.0.2.1/32")[0]),
            ("-".into(), "UBH".into(), "-".into(), None)
        );
        assert_eq!(
            (pages[0].source.as_str(), pages[0].updated_s),
            ("kernel", Some(7))
        );
    }

    #[test]
    fn neighbours_are_listed_with_their_interface() {
        let mut router = router();
        assert!(router.add_address(1, "10.0.2.1/24".parse().unwrap()));
        let mac = polld_packet::wire::MacAddr([2, 0, 0, 0, 0x99, 0x99]);
        router.set_neighbour("10.0.2.99".parse().unwrap(), Some(mac));
        router.set_neighbour("2001:db8::99".parse().unwrap(), Some(mac));
        let mut rows = pages(&router, TableName::Neighbours).remove(0).rows;
        rows.sort_by(|a, b| a.destination.cmp(&b.destination));
        let shown: Vec<_> = rows
            .iter()
            .map(|r| (r.destination.as_str(), r.gateway.as_str(), r.netif.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("10.0.2.99", "02:00:00:00:99:99", "veth2"),
                ("2001:db8::99", "02:00:00:00:99:99", "-"),
            ]
        );
        assert!(rows.iter().all(|r| r.flags == "permanent"));
    }
}
