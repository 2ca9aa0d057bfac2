//! What the runtime's executor tests share: a device with a ring of frames whose interrupt
//! is an eventfd, readable while frames wait.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use polld_control::server::EventFd;
use polld_core::device::TxFull;
use polld_core::{Capabilities, Device, LinkState};

/// `frames` frames waiting in a ring (`usize::MAX`: a flood no poll thread empties), its
/// interrupt an eventfd readable while they wait; it sends everything.
pub struct Burst {
    name: &'static str,
    /// Frames still in the ring, for the test to watch.
    pub left: Arc<AtomicUsize>,
    line: EventFd,
}

impl Burst {
    pub fn new(name: &'static str, frames: usize) -> Burst {
        let line = EventFd::new().unwrap();
        if frames > 0 {
            line.signal();
        }
        let left = Arc::new(AtomicUsize::new(frames));
        Burst { name, left, line }
    }
}

impl Device for Burst {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::new().with_interrupt_fd(self.line.fd())
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let n = budget.min(self.left.load(Ordering::SeqCst));
        let mut frame = [0u8; 60];
        for _ in 0..n {
            rx(&mut frame);
        }
        if self.left.fetch_sub(n, Ordering::SeqCst) == n {
            self.line.take();
        }
        n
    }
    fn rx_ready(&mut self) -> bool {
        self.left.load(Ordering::SeqCst) > 0
    }
    fn send(&mut self, _frame: &[u8]) -> Result<(), TxFull> {
        Ok(())
    }
    fn flush(&mut self) {}
    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }
    fn set_interrupt(&mut self, _armed: bool) {}
}
