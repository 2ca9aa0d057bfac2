//! The kernel tables' parser on any bytes a netlink socket could return: it never panics,
//! every prefix it reports fits its address, and every next hop's weight is the kernel's
//! (1 to 256).

#![no_main]

use libfuzzer_sys::fuzz_target;
use polld_dev::kernel_tables::{parse, Change, Prefix};

fn fits(p: &Prefix) -> bool {
    p.len <= if p.addr.is_ipv4() { 32 } else { 128 }
}

fuzz_target!(|data: &[u8]| {
    for change in parse(data).changes {
        match change {
            Change::Route(r) | Change::RouteGone(r) => {
                assert!(fits(&r.dest), "{r:?}");
                for hop in &r.next_hops {
                    assert!(hop.weight >= 1 && hop.weight <= 256);
                }
            }
            Change::Address(a) | Change::AddressGone(a) => {
                assert!(fits(&a.prefix), "{a:?}");
            }
            Change::Neighbour(_) | Change::NeighbourGone(_) | Change::Overrun => {}
        }
    }
});
