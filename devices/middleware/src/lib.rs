//! polld-middleware: devices that wrap any [`polld_core::Device`] and add one behaviour,
//! in the spirit of smoltcp's `phy::PcapWriter` and `phy::FaultInjector`.
//!
//! - [`pcap`]: [`PcapWriter`] records every frame received and every frame accepted for
//!   transmission, in the classic pcap format, to any `std::io::Write` (`polld run --pcap`).
//! - [`fault`]: [`FaultInjector`] drops, corrupts, truncates and duplicates received frames
//!   and fails transmissions at seeded per-mille rates, every effect counted under a named
//!   reason so conservation still holds (a test tool: `[interfaces.fault]` in the config).
//!
//! Neither reads a clock nor opens a file: the pcap writer is handed its clock and its
//! writer, so both run on the simulator's virtual time as well as on a real interface.

/// The [`polld_core::Device`] methods a middleware device passes to its `inner` device
/// unchanged, inside its `impl Device`.
macro_rules! pass_through_to_inner {
    () => {
        fn name(&self) -> &str {
            self.inner.name()
        }
        fn rx_ready(&mut self) -> bool {
            self.inner.rx_ready()
        }
        fn check_status(&mut self) -> polld_core::LinkState {
            self.inner.check_status()
        }
        fn set_interrupt(&mut self, armed: bool) {
            self.inner.set_interrupt(armed)
        }
        fn interrupt_fd(&self) -> Option<std::os::fd::RawFd> {
            self.inner.interrupt_fd()
        }
        fn tx_ready_fd(&self) -> Option<std::os::fd::RawFd> {
            self.inner.tx_ready_fd()
        }
        fn tx_ready_on_wakeup_only(&self) -> bool {
            self.inner.tx_ready_on_wakeup_only()
        }
        fn signals_tx_ready(&self) -> bool {
            self.inner.signals_tx_ready()
        }
        fn tx_room(&mut self) -> usize {
            self.inner.tx_room()
        }
        fn tx_batch(&self) -> usize {
            self.inner.tx_batch()
        }
    };
}

pub mod fault;
pub mod pcap;

pub use fault::{FaultConfig, FaultInjector, FaultStats};
pub use pcap::{PcapStats, PcapWriter};
