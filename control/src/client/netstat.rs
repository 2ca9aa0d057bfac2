//! `polld netstat -rn` and `polld arp -an`: the routes and neighbours a running polld's
//! router holds now, in FreeBSD's columns.
//!
//! ```text
//! polld netstat -rn               the IPv4 and IPv6 routes: Destination, Gateway, Flags,
//!                                 Netif (a multipath route has a row per next hop, with
//!                                 its weight)
//! polld netstat -rn -f inet6      one family
//! polld arp -an                   the IPv4 and IPv6 neighbours: address, MAC, interface
//! ```
//!
//! The daemon answers in pages of at most [`MAX_TABLE_PAGE`] entries, asked for one after
//! another, so that a full table never holds its poll thread for long; the rows are
//! sorted by address here, on the client's side.

use std::io::Write;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use serde::Serialize;

use crate::client::{exchange, print_json, unexpected, CtlError, SocketArg};
use crate::proto::{Request, Response, TableName, TablePage, TableRow, MAX_TABLE_PAGE};

/// An address family, as netstat's `-f`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Inet,
    Inet6,
}

/// Show the routes a running polld's router holds, like netstat -rn.
///
/// Each route is a row of Destination, Gateway, Flags and Netif, sorted by destination;
/// a multipath route has a row per next hop, with its weight. The gateway is an address
/// (flag G), link#N for a network on interface N (counted from 1), or - for a route that
/// forwards nothing: flag B blackhole, R reject (unreachable, prohibit), K out of an
/// interface polld does not poll (the kernel's traffic). H marks a host route, S a route
/// from the file (tables = "file"). Each family's heading gives its count, where the
/// tables come from and, with the kernel's, how long ago polld applied their last
/// change (also polld.tables_routes, polld.tables_routes6 and polld.tables_time in polld
/// ctl and /metrics). With per-CPU threads, the first poll thread's tables are shown:
/// each holds the same.
///
/// The daemon answers in pages of at most 4096 routes, which its poll thread copies
/// between two pieces of work, and the pages are asked for one after another: a table of
/// a million routes is listed without holding forwarding up for more than one page at a
/// time. A listing read while the routes change may miss or repeat a route changed
/// meanwhile.
#[derive(Parser, Clone, Debug, PartialEq, Eq)]
#[command(name = "polld netstat")]
pub struct NetstatArgs {
    /// Show the routing tables (the only tables polld netstat shows).
    #[arg(short = 'r', required = true)]
    pub routes: bool,
    #[command(flatten)]
    pub list: ListArgs,
}

/// Show the neighbours a running polld's router holds, like arp -an and ndp -an.
///
/// Each neighbour with a link-layer address is a line, IPv4 and IPv6 alike: its address,
/// its MAC, the interface whose network holds it (- when none) and permanent for an
/// entry of the file's static_arp or, with tables = "kernel", one the kernel resolved
/// (polld holds those until the kernel drops them). Read in pages, as polld netstat.
#[derive(Parser, Clone, Debug, PartialEq, Eq)]
#[command(name = "polld arp")]
pub struct ArpArgs {
    /// Show every entry (the only way polld arp shows them).
    #[arg(short = 'a', required = true)]
    pub all: bool,
    #[command(flatten)]
    pub list: ListArgs,
}

/// The options `polld netstat` and `polld arp` share.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct ListArgs {
    /// Numeric addresses (polld never resolves names; accepted as the BSD tools' habit).
    #[arg(short = 'n')]
    pub numeric: bool,
    /// Only this address family.
    #[arg(short = 'f', value_enum, value_name = "FAMILY")]
    pub family: Option<Family>,
    /// Print one JSON document: where the tables come from, the time of their last
    /// update and, for each table, its count and rows.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub socket: SocketArg,
}

/// One table read whole, as `--json` prints it.
#[derive(Serialize)]
struct Listing {
    /// Where the router's tables come from: `kernel` or `file`.
    source: String,
    /// The last change of the kernel's tables polld applied, Unix seconds.
    updated_s: Option<u64>,
    /// The entries the table holds (a multipath route counts once).
    total: u64,
    rows: Vec<TableRow>,
}

/// Reads `table` whole, page by page, its rows sorted by destination.
fn read(socket: &SocketArg, table: TableName) -> Result<Listing, CtlError> {
    let mut from = 0;
    let mut rows = Vec::new();
    loop {
        let request = Request::Table {
            table,
            from,
            limit: MAX_TABLE_PAGE,
        };
        let page: TablePage = match exchange(&socket.socket, &request)? {
            Response::Table { page } => page,
            other => return Err(unexpected(&other)),
        };
        rows.extend(page.rows);
        match page.next {
            Some(next) if next > from => from = next,
            _ => {
                rows.sort_by_key(|r| sort_key(&r.destination));
                return Ok(Listing {
                    source: page.source,
                    updated_s: page.updated_s,
                    total: page.total,
                    rows,
                });
            }
        }
    }
}

/// A destination's order: by address, then prefix length.
fn sort_key(destination: &str) -> (Option<IpAddr>, u8) {
    let (addr, len) = destination.split_once('/').unwrap_or((destination, ""));
    (addr.parse().ok(), len.parse().unwrap_or(u8::MAX))
}

/// The families `family` names: both when none.
fn families(family: Option<Family>) -> Vec<Family> {
    family.map_or(vec![Family::Inet, Family::Inet6], |f| vec![f])
}

/// "last update 12 s ago", or nothing with the file's tables.
fn updated(listing: &Listing) -> String {
    let Some(at) = listing.updated_s else {
        return String::new();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(", last update {} s ago", now.saturating_sub(at))
}

/// Runs `polld netstat -rn`.
pub fn run_netstat(args: &NetstatArgs, out: &mut dyn Write) -> Result<(), CtlError> {
    let mut listings = Vec::new();
    for family in families(args.list.family) {
        let table = match family {
            Family::Inet => TableName::Inet,
            Family::Inet6 => TableName::Inet6,
        };
        listings.push((family, read(&args.list.socket, table)?));
    }
    if args.list.json {
        let document: serde_json::Map<String, serde_json::Value> = listings
            .iter()
            .map(|(family, listing)| {
                let name = match family {
                    Family::Inet => "inet",
                    Family::Inet6 => "inet6",
                };
                let value = serde_json::to_value(listing).expect("a listing serializes");
                (name.to_string(), value)
            })
            .collect();
        return print_json(&document, out);
    }
    writeln!(out, "Routing tables")?;
    for (family, listing) in &listings {
        let name = match family {
            Family::Inet => "Internet",
            Family::Inet6 => "Internet6",
        };
        writeln!(
            out,
            "\n{name}: {} routes ({} tables{})",
            listing.total,
            listing.source,
            updated(listing)
        )?;
        let width = if *family == Family::Inet { 18 } else { 30 };
        writeln!(
            out,
            "{:<width$} {:<width$} {:<6} Netif",
            "Destination", "Gateway", "Flags"
        )?;
        for row in &listing.rows {
            let destination = match row.destination.as_str() {
                "0.0.0.0/0" | "::/0" => "default",
                d => d,
            };
            let weight = row
                .weight
                .map(|w| format!(" weight {w}"))
                .unwrap_or_default();
            writeln!(
                out,
                "{destination:<width$} {:<width$} {:<6} {}{weight}",
                row.gateway, row.flags, row.netif
            )?;
        }
    }
    Ok(())
}

/// Runs `polld arp -an`.
pub fn run_arp(args: &ArpArgs, out: &mut dyn Write) -> Result<(), CtlError> {
    let mut listing = read(&args.list.socket, TableName::Neighbours)?;
    if let Some(family) = args.list.family {
        listing.rows.retain(|r| {
            let v4 = r.destination.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv4());
            v4 == (family == Family::Inet)
        });
        listing.total = listing.rows.len() as u64;
    }
    if args.list.json {
        return print_json(&listing, out);
    }
    for row in &listing.rows {
        let permanent = if row.flags.is_empty() {
            String::new()
        } else {
            format!(" {}", row.flags)
        };
        writeln!(
            out,
            "? ({}) at {} on {}{permanent} [ethernet]",
            row.destination, row.gateway, row.netif
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_sort_by_address_then_length() {
        let mut d = [
            "10.9.0.0/16",
            "10.0.2.0/24",
            "10.9.0.0/24",
            "2001:db8::/32",
            "9.0.0.0/8",
        ];
        d.sort_by_key(|d| sort_key(d));
        assert_eq!(
            d,
            [
                "9.0.0.0/8",
                "10.0.2.0/24",
                "10.9.0.0/16",
                "10.9.0.0/24",
                "2001:db8::/32"
            ]
        );
    }
}
