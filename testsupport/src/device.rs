//! [`TestDevice`]: a device the test configures and then reads back: the frames it
//! queues to be received, what was sent, the link state, the hardware drop counters, the
//! capabilities, and the sends to refuse as a full ring would.

use std::collections::VecDeque;

use polld_core::{Capabilities, Device, HwStats, LinkState, TxFull};

/// A device in memory: it receives the frames queued in `rx`, in order, and keeps each
/// frame it takes for transmission in `sent`.
#[derive(Debug)]
pub struct TestDevice {
    name: String,
    /// Frames waiting to be received, in order.
    pub rx: VecDeque<Vec<u8>>,
    /// Frames taken for transmission, in order.
    pub sent: Vec<Vec<u8>>,
    /// The sends to refuse with [`TxFull`], by number counted from 1 (refused ones count).
    pub refuse: Vec<u64>,
    /// Sends asked for so far.
    pub sends: u64,
    /// What each status check reports.
    pub link: LinkState,
    /// What the hardware counters report (device-counted drops).
    pub hw: HwStats,
    /// What the device states it can do, read when it is registered.
    pub capabilities: Capabilities<'static>,
}

impl TestDevice {
    /// A device `name` that is up, has nothing to receive and takes every frame sent.
    pub fn new(name: &str) -> TestDevice {
        TestDevice {
            name: name.to_string(),
            rx: VecDeque::new(),
            sent: Vec::new(),
            refuse: Vec::new(),
            sends: 0,
            link: LinkState::Up,
            hw: HwStats::default(),
            capabilities: Capabilities::default(),
        }
    }
}

impl Device for TestDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let n = budget.min(self.rx.len());
        for mut frame in self.rx.drain(..n) {
            rx(&mut frame);
        }
        n
    }

    fn rx_ready(&mut self) -> bool {
        !self.rx.is_empty()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        self.sends += 1;
        if self.refuse.contains(&self.sends) {
            return Err(TxFull);
        }
        self.sent.push(frame.to_vec());
        Ok(())
    }

    fn flush(&mut self) {}

    fn check_status(&mut self) -> LinkState {
        self.link
    }

    fn set_interrupt(&mut self, _armed: bool) {}

    fn hw_stats(&mut self) -> HwStats {
        self.hw
    }

    fn capabilities(&self) -> Capabilities<'_> {
        self.capabilities
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_receives_what_was_queued_within_the_budget_and_refuses_the_sends_asked() {
        let mut dev = TestDevice::new("test0");
        dev.rx.extend([vec![1], vec![2], vec![3]]);
        dev.refuse = vec![2];
        let mut got = Vec::new();
        assert_eq!(dev.receive(2, &mut |f| got.push(f.to_vec())), 2);
        assert_eq!(got, [vec![1], vec![2]]);
        assert!(dev.rx_ready());
        assert_eq!(dev.send(&[7]), Ok(()));
        assert_eq!(dev.send(&[8]), Err(TxFull));
        assert_eq!(dev.send(&[9]), Ok(()));
        assert_eq!(dev.sent, [vec![7], vec![9]]);
        dev.link = LinkState::Down;
        assert_eq!(dev.check_status(), LinkState::Down);
    }
}
