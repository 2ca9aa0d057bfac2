//! An `auto` interface that goes back to interrupts while its output holds frames the
//! kernel pushed back, on virtual time. The output is the AF_PACKET device's transmit in
//! miniature: `send` stages frames in a batch, `flush` hands the kernel what it takes and
//! keeps the rest staged, and only another flush (or `tx_room`, which retries one) sends
//! them. Polling retried them at every tick; back on interrupts, with no frame arriving to
//! start a handler, nothing did: frames counted as forwarded stayed staged until polld
//! stopped (the forward bench's `af_packet auto (flood)` row, UNACCOUNTED 19 to 24).

use std::collections::VecDeque;

use polld_core::{
    Capabilities, Dataplane, Device, Emit, Frozen, LinkState, Mode, PacketStage, Poller, TxFull,
    TxReadyLine, Verdict,
};

/// Forwards every frame from interface 0 to 1.
struct Forward;

impl PacketStage for Forward {
    fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        Verdict::Forward { out: 1 }
    }
}

/// A device with a receive queue and a staged transmit batch the kernel may push back.
struct Batched {
    name: &'static str,
    wire_in: VecDeque<Vec<u8>>,
    staged: Vec<Vec<u8>>,
    /// Frames the kernel takes at the next flushes; the rest it pushes back.
    kernel_room: usize,
    refused: bool,
    sent: usize,
}

const BATCH: usize = 8;

impl Batched {
    fn new(name: &'static str) -> Batched {
        Batched {
            name,
            wire_in: VecDeque::new(),
            staged: Vec::new(),
            kernel_room: usize::MAX,
            refused: false,
            sent: 0,
        }
    }
}

impl Device for Batched {
    fn name(&self) -> &str {
        self.name
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::new()
            .with_tx_ready(TxReadyLine::Modelled)
            .with_tx_batch(BATCH)
    }

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let n = budget.min(self.wire_in.len());
        for mut frame in self.wire_in.drain(..n) {
            rx(&mut frame);
        }
        n
    }

    fn rx_ready(&mut self) -> bool {
        !self.wire_in.is_empty()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if self.staged.len() == BATCH {
            return Err(TxFull);
        }
        self.staged.push(frame.to_vec());
        Ok(())
    }

    /// As the AF_PACKET device: 0 while the kernel pushes the staged frames back (retried
    /// once here), else a whole batch.
    fn tx_room(&mut self) -> usize {
        if self.refused {
            self.flush();
        }
        if self.refused {
            0
        } else {
            BATCH
        }
    }

    fn flush(&mut self) {
        let n = self.staged.len().min(self.kernel_room);
        self.staged.drain(..n);
        self.kernel_room -= n;
        self.sent += n;
        self.refused = !self.staged.is_empty();
    }

    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }

    fn set_interrupt(&mut self, _armed: bool) {}
}

const TICK: u64 = 1_000_000;

/// Runs everything due at `now`, after raising output 1's transmit-ready line if some
/// work waits for it (the line of an output that can take frames again).
fn run_due(dp: &mut Dataplane<Batched, Forward>, now: u64) {
    if dp.tx_ready_armed(1) {
        dp.tx_ready_line(1, true);
    }
    while let Some(due) = dp.next_due() {
        dp.step(due, &mut Frozen(now));
    }
}

#[test]
fn back_on_interrupts_an_auto_interface_leaves_no_frame_held_in_its_output() {
    let mut dp = Dataplane::new(
        Poller::default(),
        vec![Batched::new("in0"), Batched::new("out0")],
        Forward,
    );
    dp.set_mode(0, Mode::Auto).unwrap();
    // A window of interrupt work that took all of the CPU: in0 goes to polling.
    let window = 100 * TICK;
    dp.ran(polld_core::Due::Handler(0), window);
    dp.close_auto_window(window, window);
    assert!(dp.interfaces()[0].polls(), "in0 did not switch to polling");

    // The last frames of a flood: polled and forwarded, and the kernel takes none of them.
    dp.interface_mut(0)
        .dev_mut()
        .wire_in
        .extend((0..5).map(|k| vec![k; 60]));
    dp.interface_mut(1).dev_mut().kernel_room = 0;
    let mut now = window;
    while dp.interfaces()[0].polls() {
        now += TICK;
        dp.raise_ticks(1);
        run_due(&mut dp, now);
        assert!(
            now < window + 1000 * TICK,
            "in0 never went back to interrupts"
        );
    }
    let forwarded = dp.interfaces()[0].counters().forwarded;
    assert_eq!(forwarded, 5);
    assert_eq!(dp.interfaces()[1].dev().staged.len(), 5);

    // The kernel takes frames again; no frame arrives. What was forwarded goes out.
    dp.interface_mut(1).dev_mut().kernel_room = usize::MAX;
    for _ in 0..10 {
        now += TICK;
        dp.raise_ticks(1);
        run_due(&mut dp, now);
    }
    dp.finish(now);
    let out = dp.interfaces()[1].dev();
    assert_eq!(
        (out.sent, out.staged.len()),
        (5, 0),
        "frames forwarded by in0 still held in out0"
    );
}
