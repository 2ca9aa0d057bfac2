//! `tables = "kernel"`: the router forwards by the kernel's own tables. Each poll thread
//! follows the kernel's tables of its interfaces' namespace on a netlink socket of its
//! own ([`polld_dev::kernel_tables`]), so every per-CPU router gets every change without
//! the threads sharing anything: the socket is dumped into the router at start, its fd
//! is in the thread's epoll set, and each change is applied in place between two pieces
//! of work; forwarding never stops for an update. An overrun (the kernel dropped
//! notifications) empties the router's tables and fills them from a new dump.
//!
//! What is taken, and how:
//! - **routes** of the main table (`ip route`, `ip -6 route`; policy routing's other
//!   tables are not followed): a unicast route out of an interface this thread polls is
//!   a route through its gateway (or connected); out of any other interface a
//!   [`Reject::Unpolled`] route, whose packets the kernel forwards (see below);
//!   blackhole, unreachable and prohibit routes are [`Reject`] routes. Among routes of
//!   one prefix the lowest metric is used. A multipath route uses its first next hop (no
//!   spreading by flow hash);
//! - **addresses** of the polled interfaces are the router's own: frames for them go up
//!   to the kernel;
//! - **neighbours** with a link-layer address are permanent entries (ARP for IPv4, the
//!   neighbour table for IPv6) until the kernel drops them or loses their address; the
//!   kernel resolves, polld does not: a frame routed to a next hop without an entry is
//!   handed to the kernel, which queues it while it resolves, and the kernel asked to
//!   resolve that next hop (`ip neigh replace IP dev IF use`, [`KernelFollower::ask`]),
//!   whose entry then forwards the next frames.
//!
//! **Handing packets to the kernel**: each follower opens raw IP sockets in the
//! namespace ([`polld_dev::raw_ip`]) and gives them to its router at the first load
//! ([`Forwarder::set_to_kernel`]): a packet routed out of an interface polld does not
//! poll ([`Reject::Unpolled`]) or to a next hop without a neighbour entry leaves by the
//! kernel, one hop on, counted `to_kernel` on its input interface (and, per poll thread,
//! `net.inet.ip.to_kernel_unpolled` and `to_kernel_unresolved`); only what the kernel
//! refuses is dropped as `unpolled_route`, `unresolved` or `neighbour_unknown`.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};

use polld_control::daemon::TablesStatus;
use polld_dev::kernel_tables::{
    Change, KernelTables, Neighbour, Prefix, Route as KernelRoute, RouteKind, Snapshot, MAIN_TABLE,
};
use polld_dev::raw_ip::{RawIp, SendError};
use polld_packet::forwarder::{Refused, ToKernel};
use polld_packet::route::{NextHop, Reject, Route};
use polld_packet::wire::MacAddr;
use polld_packet::{Forwarder, IpNet, Ipv4Net, Ipv6Net};

/// The netlink socket's receive buffer: room for the notifications of a burst of route
/// changes between two reads (the kernel may cap it at `net.core.rmem_max`).
const RECEIVE_BUFFER: usize = 4 << 20;

/// The follower of a poll thread whose config (`config`, its part for per-CPU threads)
/// takes the kernel's tables, for its dataplane `dp`; `None` with `tables = "file"`.
pub fn follow(
    config: &crate::config::RunConfig,
    dp: &crate::executor::RealDataplane,
) -> Result<Option<KernelFollower>, crate::error::RunError> {
    if !config.packet.kernel_tables() {
        return Ok(None);
    }
    let names: Vec<&str> = dp.interfaces().iter().map(|i| i.dev().name()).collect();
    let netns = config.devices.first().and_then(|d| d.netns.as_deref());
    KernelFollower::open(netns, &names).map(Some).map_err(|e| {
        crate::error::RunError::Setup(format!(
            "tables = \"kernel\": cannot follow the kernel's tables of {}: {e}; run polld \
             with CAP_NET_ADMIN and CAP_NET_RAW in the interfaces' namespace, or set \
             tables = \"file\"",
            netns.map_or("polld's namespace".to_string(), |n| format!(
                "namespace {n:?}"
            ))
        ))
    })
}

/// One poll thread's follower of the kernel's tables.
pub struct KernelFollower {
    tables: KernelTables,
    /// Kernel interface index → this thread's device index.
    devices: HashMap<u32, usize>,
    /// The main table's routes the kernel holds, per prefix (the lowest metric is the
    /// router's).
    routes: BTreeMap<Prefix, Vec<KernelRoute>>,
    /// The neighbours with a link-layer address.
    neighbours: HashMap<IpAddr, MacAddr>,
    state: TablesStatus,
    /// The raw sockets of the namespace, until the first load gives them to the router.
    to_kernel: Option<RawIp>,
    /// The polled interfaces' names, in device-index order, and the namespace's name.
    names: Vec<String>,
    netns: Option<String>,
}

impl KernelFollower {
    /// Follows the tables of namespace `netns` (`None`: polld's own), for the devices
    /// named `devices` in device-index order.
    pub fn open(netns: Option<&str>, devices: &[&str]) -> io::Result<KernelFollower> {
        let devices_named = devices;
        let open = || -> io::Result<_> {
            let tables = KernelTables::open(RECEIVE_BUFFER)?;
            let mut indexes = HashMap::new();
            for (dev, name) in devices.iter().enumerate() {
                indexes.insert(polld_dev::iface::index_here(name)?, dev);
            }
            let raw = RawIp::open()
                .map_err(|e| io::Error::new(e.kind(), format!("opening a raw IP socket: {e}")))?;
            Ok((tables, indexes, raw))
        };
        let (tables, devices, raw) = match netns {
            Some(name) => polld_dev::iface::Namespace::named(name)
                .and_then(|ns| ns.enter_while(devices.first().copied().unwrap_or(""), open))
                .map_err(|e| io::Error::other(e.to_string()))??,
            None => open()?,
        };
        Ok(KernelFollower {
            tables,
            devices,
            routes: BTreeMap::new(),
            neighbours: HashMap::new(),
            state: TablesStatus::default(),
            to_kernel: Some(raw),
            names: devices_named.iter().map(|n| n.to_string()).collect(),
            netns: netns.map(str::to_string),
        })
    }

    /// What the router holds now.
    pub fn state(&self) -> TablesStatus {
        self.state
    }

    /// Empties the router's tables and fills them from a dump of the kernel's; the first
    /// load also gives the router its way to the kernel.
    pub fn load(&mut self, router: &mut Forwarder) -> io::Result<()> {
        if let Some(raw) = self.to_kernel.take() {
            router.set_to_kernel(Box::new(Handoff(raw)));
        }
        let Snapshot {
            routes,
            addresses,
            neighbours,
        } = self.tables.dump()?;
        router.clear_tables();
        self.routes.clear();
        self.neighbours.clear();
        for route in routes {
            self.route(router, route, true);
        }
        for address in addresses {
            self.address(router, address, true);
        }
        for neighbour in neighbours {
            self.neighbour(router, neighbour, true);
        }
        self.state.dumps += 1;
        self.count(router);
        if let Some(warning) = self.no_routes() {
            log::warn!("{warning}");
        }
        Ok(())
    }

    /// What to tell the operator when no route the router holds leads out of a polled
    /// interface (IPv6 link-local prefixes aside: polld forwards nothing to them): every
    /// frame to forward is then dropped as `no_route`, ICMP errors unsent for want of an
    /// address. `None` when one does.
    fn no_routes(&self) -> Option<String> {
        let link_local = |p: &Prefix| match p.addr {
            IpAddr::V6(a) => a.segments()[0] & 0xffc0 == 0xfe80,
            IpAddr::V4(_) => false,
        };
        let polled = self.routes.iter().any(|(prefix, held)| {
            let best = held.iter().min_by_key(|r| r.metric);
            !link_local(prefix)
                && best.is_some_and(|r| {
                    r.kind == RouteKind::Unicast
                        && r.next_hops
                            .iter()
                            .any(|h| self.devices.contains_key(&h.ifindex))
                })
        });
        if polled {
            return None;
        }
        let (place, ip) = match &self.netns {
            Some(ns) => (format!("namespace {ns:?}"), format!("ip -n {ns}")),
            None => ("polld's namespace".to_string(), "ip".to_string()),
        };
        let dev = self.names.first().map_or("IF", String::as_str);
        Some(format!(
            "kernel tables: no route of {place} leads out of {}: polld drops every frame \
             it would forward (no_route) until one does. Give an interface its address \
             (`{ip} addr add 10.0.1.1/24 dev {dev}` adds its connected route) or add a \
             route (`{ip} route add PREFIX via GATEWAY dev {dev}`, `{ip} -6 route add \
             PREFIX via GATEWAY dev {dev}`)",
            self.names.join(", ")
        ))
    }

    /// Applies the changes the kernel made since the last call; dumps again after an
    /// overrun.
    pub fn follow(&mut self, router: &mut Forwarder) -> io::Result<()> {
        let changes = self.tables.changes()?;
        if changes.is_empty() {
            return Ok(());
        }
        for change in changes {
            match change {
                Change::Route(r) => self.route(router, r, true),
                Change::RouteGone(r) => self.route(router, r, false),
                Change::Address(a) => self.address(router, a, true),
                Change::AddressGone(a) => self.address(router, a, false),
                Change::Neighbour(n) => self.neighbour(router, n, true),
                Change::NeighbourGone(n) => self.neighbour(router, n, false),
                Change::Overrun => {
                    log::warn!("kernel tables: notifications lost (ENOBUFS); reading them again");
                    return self.load(router);
                }
            }
            self.state.changes += 1;
        }
        self.count(router);
        Ok(())
    }

    /// Asks the kernel to resolve the next hops the router found no neighbour entry for
    /// since the last call ([`Forwarder::take_kernel_asks`]). A refusal is logged: the
    /// router asks again after its retry interval.
    pub fn ask(&mut self, router: &mut Forwarder) {
        for (out, ip) in router.take_kernel_asks() {
            let Some((&ifindex, _)) = self.devices.iter().find(|(_, &dev)| dev == out) else {
                continue;
            };
            match self.tables.resolve(ifindex, ip) {
                Ok(()) => self.state.resolves += 1,
                Err(e) => log::warn!("kernel tables: asking the kernel to resolve {ip}: {e}"),
            }
        }
    }

    /// What the router holds after a dump or changes, taken now.
    fn count(&mut self, router: &mut Forwarder) {
        let table = router.routes_mut();
        (self.state.routes, self.state.routes6) = (table.len() as u64, table.len6() as u64);
        self.state.neighbours = self.neighbours.len() as u64;
        self.state.time_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
    }

    /// A route of the kernel's added (or replaced) or gone: the router's route for its
    /// prefix is then the kernel's of lowest metric, if one is left. The kernel says a
    /// route gone with the next hops it lost: all of them for IPv4, only the one deleted
    /// from an IPv6 multipath route (`ip -6 route del PREFIX via B`), whose other next
    /// hops stay without a message of their own.
    fn route(&mut self, router: &mut Forwarder, route: KernelRoute, present: bool) {
        if route.table != MAIN_TABLE {
            return;
        }
        let dest = route.dest;
        let held = self.routes.entry(dest).or_default();
        let same = held.iter().position(|r| r.metric == route.metric);
        match (same, present) {
            (Some(i), true) => held[i] = route,
            (None, true) => held.push(route),
            (Some(i), false) => {
                let lost = |h: &polld_dev::kernel_tables::NextHop| {
                    route
                        .next_hops
                        .iter()
                        .any(|g| (g.gateway, g.ifindex) == (h.gateway, h.ifindex))
                };
                held[i].next_hops.retain(|h| !lost(h));
                if route.next_hops.is_empty() || held[i].next_hops.is_empty() {
                    held.remove(i);
                }
            }
            (None, false) => {}
        }
        let best = held.iter().min_by_key(|r| r.metric).cloned();
        if held.is_empty() {
            self.routes.remove(&dest);
        }
        let hops = best.map_or_else(Vec::new, |r| self.translate(&r));
        let table = router.routes_mut();
        match dest.addr {
            IpAddr::V4(addr) => {
                let Some(net) = Ipv4Net::new(addr, dest.len) else {
                    return;
                };
                let v4 = |ip| match ip {
                    IpAddr::V4(ip) => Some(ip),
                    IpAddr::V6(_) => None,
                };
                let members: Vec<_> = hops
                    .iter()
                    .map(|h| (h.hop.route(h.out, v4), h.weight))
                    .collect();
                let _replaced = match members[..] {
                    [] => table.remove(net),
                    [(route, _)] => table.insert(net, route),
                    _ => table.insert_multipath(net, &members),
                };
            }
            IpAddr::V6(addr) => {
                let Some(net) = Ipv6Net::new(addr, dest.len) else {
                    return;
                };
                let v6 = |ip| match ip {
                    IpAddr::V6(ip) => Some(ip),
                    IpAddr::V4(_) => None,
                };
                let members: Vec<_> = hops
                    .iter()
                    .map(|h| (h.hop.route(h.out, v6), h.weight))
                    .collect();
                let _replaced = match members[..] {
                    [] => table.remove6(net),
                    [(route, _)] => table.insert6(net, route),
                    _ => table.insert6_multipath(net, &members),
                };
            }
        }
    }

    /// The router's next hops for a kernel route: one for a route that forwards nothing
    /// or has one next hop, each of a multipath route's with its weight, none for a kind
    /// the router has no route for (local, multicast, throw, ...).
    fn translate(&self, route: &KernelRoute) -> Vec<Translated> {
        let reject = |r| {
            vec![Translated {
                out: 0,
                hop: Hop::Reject(r),
                weight: 1,
            }]
        };
        match route.kind {
            RouteKind::Blackhole => reject(Reject::Blackhole),
            RouteKind::Unreachable => reject(Reject::Unreachable),
            RouteKind::Prohibit => reject(Reject::Prohibit),
            RouteKind::Unicast => route
                .next_hops
                .iter()
                .map(|hop| match self.devices.get(&hop.ifindex) {
                    Some(&out) => Translated {
                        out,
                        hop: hop.gateway.map_or(Hop::Connected, Hop::Gateway),
                        weight: hop.weight.max(1),
                    },
                    None => Translated {
                        out: 0,
                        hop: Hop::Reject(Reject::Unpolled),
                        weight: hop.weight.max(1),
                    },
                })
                .collect(),
            RouteKind::Local | RouteKind::Other(_) => Vec::new(),
        }
    }

    /// An address of a polled interface added or gone.
    fn address(
        &mut self,
        router: &mut Forwarder,
        address: polld_dev::kernel_tables::Address,
        present: bool,
    ) {
        let Some(&dev) = self.devices.get(&address.ifindex) else {
            return;
        };
        let Prefix { addr, len } = address.prefix;
        let net = match addr {
            IpAddr::V4(a) => Ipv4Net::new(a, len).map(IpNet::V4),
            IpAddr::V6(a) => Ipv6Net::new(a, len).map(IpNet::V6),
        };
        match (net, present) {
            (Some(net), true) => drop(router.add_address(dev, net)),
            (Some(net), false) => router.remove_address(dev, net),
            (None, _) => {}
        }
    }

    /// A neighbour entry of a polled interface added, changed or gone.
    fn neighbour(&mut self, router: &mut Forwarder, neighbour: Neighbour, present: bool) {
        if !self.devices.contains_key(&neighbour.ifindex) {
            return;
        }
        let mac = neighbour
            .mac
            .map(MacAddr)
            .filter(|m| present && m.is_unicast());
        match mac {
            Some(mac) => self.neighbours.insert(neighbour.ip, mac),
            None => self.neighbours.remove(&neighbour.ip),
        };
        router.set_neighbour(neighbour.ip, mac);
    }
}

/// The router's way to the kernel: the namespace's raw IP sockets.
#[derive(Debug)]
struct Handoff(RawIp);

impl ToKernel for Handoff {
    fn send(&mut self, packet: &[u8]) -> Result<(), Refused> {
        match self.0.send(packet) {
            Ok(()) => Ok(()),
            Err(SendError::TooBig(mtu)) => Err(Refused::TooBig {
                mtu: u16::try_from(mtu).unwrap_or(u16::MAX),
            }),
            Err(SendError::Io(_)) => Err(Refused::Failed),
        }
    }
}

/// One next hop of a translated route: its output device, where it sends packets and
/// its share of a multipath route's flows.
struct Translated {
    out: usize,
    hop: Hop,
    weight: u16,
}

/// Where a translated route sends packets, before it is typed by family.
#[derive(Clone, Copy)]
enum Hop {
    Connected,
    Gateway(IpAddr),
    Reject(Reject),
}

impl Hop {
    /// The router's route out of device `out`, its gateway typed by `family` (a gateway
    /// of the other family, as an IPv6 route via an IPv4 gateway of RFC 5549, is left
    /// to the kernel: [`Reject::Unpolled`]).
    fn route<A>(self, out: usize, family: impl Fn(IpAddr) -> Option<A>) -> Route<A> {
        let next_hop = match self {
            Hop::Connected => NextHop::Connected,
            Hop::Gateway(gw) => {
                family(gw).map_or(NextHop::Reject(Reject::Unpolled), NextHop::Gateway)
            }
            Hop::Reject(r) => NextHop::Reject(r),
        };
        Route { out, next_hop }
    }
}

impl AsFd for KernelFollower {
    /// Readable when the kernel has changes waiting.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.tables.as_fd()
    }
}
