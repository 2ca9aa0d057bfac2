//! A test device shared by the dataplane tests on virtual time.

use std::collections::VecDeque;

use polld_core::{Device, HwStats, LinkState, TxFull};

/// A device whose ring the test fills by hand, reporting the device-counted drops the test
/// sets; it takes every frame sent.
pub struct Ring {
    name: String,
    pub rx: VecDeque<Vec<u8>>,
    pub hw: HwStats,
}

impl Ring {
    pub fn new(name: &str) -> Ring {
        Ring {
            name: name.to_string(),
            rx: VecDeque::new(),
            hw: HwStats::default(),
        }
    }
}

impl Device for Ring {
    fn name(&self) -> &str {
        &self.name
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let mut n = 0;
        while n < budget {
            let Some(mut frame) = self.rx.pop_front() else {
                break;
            };
            rx(&mut frame);
            n += 1;
        }
        n
    }
    fn rx_ready(&mut self) -> bool {
        !self.rx.is_empty()
    }
    fn send(&mut self, _frame: &[u8]) -> Result<(), TxFull> {
        Ok(())
    }
    fn flush(&mut self) {}
    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }
    fn set_interrupt(&mut self, _armed: bool) {}
    fn hw_stats(&mut self) -> HwStats {
        self.hw
    }
}
