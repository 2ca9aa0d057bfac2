//! polld-testbed: the `gen`, `fwd` and `sink` network namespaces every polld demo and
//! benchmark runs on, as a library ([`Testbed`], [`down()`], [`status()`]) and as
//! `polld testbed up|down|status` ([`TestbedArgs`], [`run`]).
//!
//! ```text
//!   gen                       fwd                         sink
//!   veth0 10.0.1.1/24  <->  veth1 10.0.1.2/24
//!   02:00:00:00:01:01       02:00:00:00:01:02
//!                           veth2 10.0.2.1/24  <->  veth3 10.0.2.2/24
//!                           02:00:00:00:02:01       02:00:00:00:02:02
//! ```
//!
//! - Every veth end also holds its IPv6 address (`2001:db8:1::1/64` … `2001:db8:2::2/64`,
//!   [`Layout`]). gen routes 10.0.2.0/24 via 10.0.1.2 and 2001:db8:2::/64 via
//!   2001:db8:1::2; sink routes 10.0.1.0/24 via 10.0.2.1 and 2001:db8:1::/64 via
//!   2001:db8:2::1.
//! - Every veth end holds a permanent neighbour entry (IPv4 and IPv6) for its peer, and
//!   fwd one for 10.0.2.100 and 2001:db8:2::100 (addresses sink does not own, so sink
//!   drops frames to them silently): a generator can send to a fixed MAC without ARP.
//! - polld forwards in fwd by fwd's kernel tables (`tables = "kernel"`, see
//!   [`polld_config`]): fwd's addresses, connected routes and neighbours are plain `ip`
//!   commands, which `polld testbed up` prints so that a user can set them by hand.
//! - fwd's `ip_forward` and IPv6 `forwarding` are 0 unless `--kernel-forwarding`: polld
//!   forwards in fwd, the kernel there does not. rp_filter is off in all three
//!   namespaces, and loopback is up in each. IPv6 is on but quiet (no link-local
//!   address, so no router solicitation; no duplicate address detection; MLD reports
//!   only when an address is added): no stray frame enters the packet counts once `up` is
//!   done.
//! - On the TAP testbed IPv6 is off in the namespaces: polld holds the IPv4 and IPv6
//!   addresses it plays (`10.0.1.2/24`, `2001:db8:1::2/64`, ...) with permanent
//!   neighbours in its config, and `polld gen --ipv6` and `polld sink` read and write the
//!   TAPs below the namespaces' IP stacks.
//! - Transmit offloads are off on every veth (`ethtool -K vethN tx off`: checksums, and
//!   with them TSO and UDP segmentation), so every frame carries its own checksums and is
//!   wire-sized (at most 1514 bytes) as from a real NIC: a user-space forwarder never
//!   receives a 64 KB TCP super-frame or a checksum left for the hardware.
//! - Each veth's receive work is placed on the receiving namespace's CPU (generator CPU0,
//!   forwarder and sink CPU1 by default), see [`placement`] for the modes and why
//!   `napi-threaded` is the default.
//!
//! [`Layout::new`] is the single source of truth for names, MACs and addresses.
//!
//! # Usage
//!
//! ```text
//! sudo polld testbed up                        # namespaces gen, fwd, sink; napi-threaded placement
//! sudo polld testbed up --kernel-forwarding    # the kernel in fwd forwards (baseline)
//! sudo polld testbed up --placement rps --force
//! sudo polld testbed status                    # interfaces, counters, placement, ip_forward
//! sudo polld testbed status --json
//! sudo ip netns exec gen ping 10.0.2.2         # works once something forwards in fwd
//! sudo ip netns exec gen ping -6 2001:db8:2::2
//! sudo polld testbed down                      # also cleans up after a crashed run
//! ```
//!
//! `--prefix P` names the namespaces `Pgen`, `Pfwd`, `Psink`, so tests can run side by
//! side. `up` refuses to touch existing namespaces unless `--force`.
//!
//! From Rust (tests, demos, benchmarks), the testbed goes away when dropped:
//!
//! ```no_run
//! use polld_testbed::{Layout, Role, Testbed, UpOptions};
//!
//! let testbed = Testbed::up(&Layout::new("demo"), &UpOptions::default())?;
//! let mut server = testbed.spawn_in(Role::Sink, Some(1), "iperf3", &["-s", "-1"])?;
//! let before = testbed.counters("veth3")?;
//! # let _ = (before, server.kill());
//! # Ok::<(), polld_testbed::TestbedError>(())
//! ```

#![forbid(unsafe_code)]

mod bench;
mod cli;
pub mod demo;
pub mod design;
pub mod entries;
mod error;
pub mod idle;
pub mod layout;
pub mod ledger;
mod links;
pub mod napi;
pub mod placement;
pub mod plateau;
pub mod plot;
pub mod polld;
mod process;
pub mod ramp;
pub mod results;
pub mod seeds;
pub mod share;
pub mod sleep;
pub mod status;
pub mod streams;
pub mod sweep;
mod sys;
pub mod tables;
mod testbed;
pub mod testpmd;
pub mod vm;

pub use cli::{run, CommonArgs, TestbedArgs, TestbedCommand, UpArgs};
pub use error::TestbedError;
pub use layout::{Devices, Iface, IpFamily, Layout, Role};
pub use placement::{CpuPlan, IfacePlacement, Placement, PlacementReport};
pub use polld::{polld_config, polld_config_per_cpu, PolldSetup};
pub use process::{current_polld, load_average};
pub use status::{status, Status};
pub use testbed::{
    command_in, counters, down, DownReport, IfCounters, NetDev, Testbed, UpOptions, UpReport,
};
pub use vm::{Accel, GuestState, VmOptions};
