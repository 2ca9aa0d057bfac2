//! polld-middleware: devices that wrap any [`polld_core::Device`] and add one behaviour,
//! in the spirit of smoltcp's `phy::PcapWriter` and `phy::FaultInjector`.
//!
//! - [`pcap`]: [`PcapWriter`] records every frame received and every frame accepted for
//!   transmission, in the classic pcap format, to any `std::io::Write` (`polld run --pcap`).
//! - [`fault`]: [`FaultInjector`] drops, corrupts, truncates and duplicates received frames
//!   and fails transmissions at seeded per-mille rates, every effect counted under a named
//!   reason so conservation still holds (a test tool: `[interfaces.fault]` in the config).
//! - [`reopen`]: [`Reopening`] swaps in a new device, opened on the [`Reopener`]'s helper
//!   thread by a closure the caller gives, once its interface went away and came back.
//!
//! Each implements [`polld_core::Wrapper`] and overrides only what it changes; the rest,
//! the device's capabilities and loans included, is the inner device's. None reads a
//! clock or opens a file: the pcap writer is handed its clock and its writer, so it runs
//! on the simulator's virtual time as well as on a real interface, and what reopening
//! opens is up to its closure.

#![forbid(unsafe_code)]

pub mod fault;
pub mod pcap;
pub mod reopen;

pub use fault::{FaultConfig, FaultInjector, FaultStats};
pub use pcap::{PcapStats, PcapWriter};
pub use reopen::{Reopener, Reopening};
