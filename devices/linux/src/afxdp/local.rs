//! The host's own addresses, kept in the redirect program's maps as the kernel changes
//! them (`ip addr add`, `ip addr del`, an address that DHCP or SLAAC brings), so that
//! [`AfXdpConfig::pass_local`](super::AfXdpConfig::pass_local) keeps passing the
//! host's traffic to the kernel without a restart.
//!
//! [`Follower::start`] reads the addresses of the calling thread's network namespace
//! over rtnetlink ([`KernelTables`]) and fills the maps before it returns; a thread then
//! applies each address notification, and dumps the addresses again when the kernel
//! lost notifications. Which destinations are the host's is [`destinations`]: every
//! IPv4 address of the namespace with its directed broadcast and the limited
//! broadcast (Linux takes any of its addresses on any interface), every IPv6 address
//! but the link-local ones of other interfaces (a link-local address is the
//! interface's own).

use std::collections::BTreeSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::net::UnixStream;
use std::thread::JoinHandle;

use rustix::event::{poll, PollFd, PollFlags};

use crate::kernel_tables::{Address, Change, KernelTables};
use crate::xdp::{self, LocalAddresses, XdpError};

/// Notifications of a burst of address changes the socket holds before they are read.
const RECEIVE_BUFFER: usize = 1 << 20;

/// The destinations whose frames are the host's, given the addresses of its namespace
/// and the index of the interface the program is attached to.
pub(super) fn destinations(addresses: &[Address], ifindex: u32) -> BTreeSet<IpAddr> {
    let mut out = BTreeSet::from([IpAddr::V4(Ipv4Addr::BROADCAST)]);
    for a in addresses {
        match a.prefix.addr {
            IpAddr::V4(v4) => {
                out.insert(IpAddr::V4(v4));
                // /31 and /32 have no broadcast address (RFC 3021).
                if a.prefix.len <= 30 {
                    let host_bits = u32::MAX >> a.prefix.len;
                    out.insert(IpAddr::V4(Ipv4Addr::from(u32::from(v4) | host_bits)));
                }
            }
            IpAddr::V6(v6) => {
                let link_local = v6.segments()[0] & 0xffc0 == 0xfe80;
                if !link_local || a.ifindex == ifindex {
                    out.insert(IpAddr::V6(v6));
                }
            }
        }
    }
    out
}

/// The maps of one redirect program, kept equal to [`destinations`] of the addresses
/// the kernel reported.
struct Holder {
    maps: LocalAddresses,
    ifindex: u32,
    addresses: Vec<Address>,
    installed: BTreeSet<IpAddr>,
}

impl Holder {
    /// Makes the maps hold [`destinations`] of `self.addresses`: what left is removed,
    /// what came is added.
    fn sync(&mut self) -> xdp::Result<()> {
        let wanted = destinations(&self.addresses, self.ifindex);
        for gone in self.installed.difference(&wanted) {
            self.maps.remove(*gone)?;
        }
        for &new in wanted.difference(&self.installed) {
            self.maps.insert(new)?;
        }
        self.installed = wanted;
        Ok(())
    }

    /// Takes the address changes among `changes`; `false` when notifications were lost.
    fn apply(&mut self, changes: Vec<Change>) -> bool {
        for change in changes {
            match change {
                Change::Address(a) if !self.addresses.contains(&a) => self.addresses.push(a),
                Change::AddressGone(a) => self.addresses.retain(|held| *held != a),
                Change::Overrun => return false,
                _ => {}
            }
        }
        true
    }
}

/// The thread that follows the addresses; stopped and joined when dropped.
#[derive(Debug)]
pub(super) struct Follower {
    /// Closing it wakes the thread, which then returns.
    stop: Option<UnixStream>,
    thread: Option<JoinHandle<()>>,
}

impl Follower {
    /// Fills `maps` with the host's addresses as they are now, in the calling thread's
    /// network namespace, then follows their changes on a thread named after `ifname`.
    pub(super) fn start(maps: LocalAddresses, ifname: &str, ifindex: u32) -> xdp::Result<Follower> {
        let fail = |what: &str| {
            let what = format!("{what} (for the addresses `{ifname}` passes to the kernel)");
            move |e: io::Error| XdpError::os(what, e)
        };
        let tables =
            KernelTables::open(RECEIVE_BUFFER).map_err(fail("opening an rtnetlink socket"))?;
        let addresses = tables
            .dump()
            .map_err(fail("reading the host's addresses"))?
            .addresses;
        let mut holder = Holder {
            maps,
            ifindex,
            addresses,
            installed: BTreeSet::new(),
        };
        holder.sync()?;
        let (stop, woken) = UnixStream::pair().map_err(fail("creating the stop socket"))?;
        // A thread starts in its creator's network namespace: a dump after an overrun
        // reads the same namespace as this one.
        let name = format!("polld-local-{ifname}");
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || follow(holder, tables, woken))
            .map_err(fail("starting the thread"))?;
        Ok(Follower {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Applies address notifications until `woken` hangs up; an error is said once and
/// ends the following (the maps keep what they hold).
fn follow(mut holder: Holder, mut tables: KernelTables, woken: UnixStream) {
    let result = (|| -> Result<(), String> {
        loop {
            let mut fds = [
                PollFd::new(&tables, PollFlags::IN),
                PollFd::new(&woken, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(format!("waiting for address changes: {e}")),
                Ok(_) => {}
            }
            if !fds[1].revents().is_empty() {
                return Ok(());
            }
            let changes = tables
                .changes()
                .map_err(|e| format!("reading address changes: {e}"))?;
            if !holder.apply(changes) {
                holder.addresses = tables
                    .dump()
                    .map_err(|e| format!("reading the addresses again: {e}"))?
                    .addresses;
            }
            holder.sync().map_err(|e| e.to_string())?;
        }
    })();
    if let Err(e) = result {
        eprintln!(
            "polld: af_xdp: no longer following the host's addresses ({e}); frames for an \
             address added from now on go to polld, not the kernel"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_tables::Prefix;

    fn address(ifindex: u32, text: &str) -> Address {
        let (addr, len) = text.split_once('/').unwrap();
        Address {
            ifindex,
            prefix: Prefix {
                addr: addr.parse().unwrap(),
                len: len.parse().unwrap(),
            },
        }
    }

    fn ips(list: &[&str]) -> BTreeSet<IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn the_hosts_destinations_are_its_addresses_broadcasts_and_own_link_locals() {
        let addresses = [
            address(2, "10.0.1.1/24"),
            address(3, "10.0.2.1/31"),
            address(1, "127.0.0.1/8"),
            address(2, "2001:db8::1/64"),
            address(3, "2001:db8:2::1/64"),
            address(2, "fe80::1/64"),
            address(3, "fe80::2/64"),
        ];
        assert_eq!(
            destinations(&addresses, 2),
            ips(&[
                "255.255.255.255",
                "10.0.1.1",
                "10.0.1.255",
                "10.0.2.1",
                "127.0.0.1",
                "127.255.255.255",
                "2001:db8::1",
                "2001:db8:2::1",
                "fe80::1",
            ])
        );
    }
}
