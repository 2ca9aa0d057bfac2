//! polld-packet: what happens to a frame once a device handed it up, with no I/O.
//!
//! - [`wire`]: zero-copy typed views (Ethernet, ARP, IPv4, IPv6 and its extension
//!   headers, UDP, ICMP, ICMPv6) and the Internet checksum with its incremental update.
//! - [`Forwarder`]: the IPv4 and IPv6 router (RFC 1812 and RFC 8200/4291 checks, ARP, ICMP
//!   and ICMPv6 errors, fragmentation of IPv4); [`options`]: the IP options it processes.
//! - [`route`]: the IPv4 and IPv6 routing tables, [`lpm`]: the multibit trie behind them,
//!   updated in place; [`arp_cache`] and [`neighbours`]: the IPv4 and IPv6 next hops.
//! - [`net`]: IPv4 and IPv6 prefixes and address classes.
//! - [`Bridge`]: an L2 learning bridge.
//! - [`rules`]: ipfw-style 5-tuple allow/deny rules, used by both.
//! - [`config`]: the serde configuration embedded in `polld run`'s TOML, and validation.
//! - [`counters`]: what each stage counts, and the conservation check; [`drops`]: why a
//!   stage drops a frame.
//!
//! [`Stage`] picks the router or the bridge from the config; all of them implement
//! [`polld_core::PacketStage`], take time through `set_now` and never read a clock.

#![forbid(unsafe_code)]

pub mod arp_cache;
pub mod bridge;
pub mod config;
pub mod counters;
pub mod drops;
mod fasthash;
pub mod forwarder;
mod frames;
pub mod lpm;
pub mod neighbours;
pub mod net;
pub mod options;
pub mod ratelimit;
pub mod route;
pub mod rules;
pub mod stage;
mod table;
mod text;
pub mod wire;

pub use bridge::Bridge;
pub use config::{ConfigError, Mode, PacketConfig, Tables};
pub use counters::{ConservationError, GeneratedCounters, StageCounters, StageStats};
pub use drops::PacketDrop;
pub use forwarder::Forwarder;
pub use net::{IpNet, Ipv4Net, Ipv6Net};
pub use rules::{Action, FiveTuple, Rule, RuleSet};
pub use stage::Stage;
pub use table::TableStats;
