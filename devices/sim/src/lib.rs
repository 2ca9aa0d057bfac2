//! polld-sim: a simulated NIC and a virtual CPU, so that every behaviour of the scheduler
//! and the interface modes can be tested exactly and repeatably on virtual time.
//!
//! - [`nic`]: the simulated NIC (rx ring, arrivals, line-rate tx, driver costs);
//! - [`cpu`]: the virtual CPU that runs ticks, interrupts, tasks, the netisr, busy polling,
//!   a user task and the idle poller by priority, attributing every nanosecond;
//! - [`scenario`]: scenarios from flags or a TOML file, and their report;
//! - [`smp`]: several virtual CPUs, one poller each (DragonFly's ifpoll), and the scaling
//!   table with its cost model;
//! - [`rizzo`]: Rizzo 2002's table (docs/sources.md) (Interrupt against Polling) reproduced on virtual time.

#![forbid(unsafe_code)]

pub mod cpu;
pub mod nic;
pub mod rizzo;
pub mod scenario;
pub mod smp;

pub use cpu::{CpuCosts, CpuSplit, Sim, UserTask};
pub use nic::{Arrivals, DriverCosts, NicConfig, NicStats, SimNic};
pub use scenario::{Report, Scenario};
