//! The transmit a poll cycle causes is part of the cycle the controller meters: the
//! `Pollmore` that closes a cycle kicks the outputs first and closes on the clock after
//! the kick (on AF_XDP in copy mode the kick is the driver's whole transmit).

use std::cell::Cell;
use std::rc::Rc;

use polld_core::{Clocks, Dataplane, Emit, Knobs, Mode, PacketStage, Poller, Verdict, Wrapper};
use polld_testsupport::TestDevice;

/// What one kick of the output costs on the test's clock, ns: 60 % of a 1 ms tick.
const KICK_NS: u64 = 600_000;

/// Forwards every frame from device 0 to device 1.
struct Across;

impl PacketStage for Across {
    fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        Verdict::Forward { out: 1 }
    }
}

/// A test device whose flush takes [`KICK_NS`] of the shared clock.
struct Kicked {
    ring: TestDevice,
    clock: Rc<Cell<u64>>,
}

impl Wrapper for Kicked {
    type Inner = TestDevice;
    fn inner(&self) -> &TestDevice {
        &self.ring
    }
    fn inner_mut(&mut self) -> &mut TestDevice {
        &mut self.ring
    }
    fn flush(this: &mut Self) {
        this.clock.set(this.clock.get() + KICK_NS);
    }
}

/// The executor's clock: the shared cell the kicks advance.
struct TestClock(Rc<Cell<u64>>);

impl Clocks for TestClock {
    fn now(&mut self) -> u64 {
        self.0.get()
    }
    fn cpu_ns(&mut self) -> u64 {
        self.0.get()
    }
}

#[test]
fn the_kick_after_a_cycle_counts_in_the_cycles_load() {
    let clock = Rc::new(Cell::new(0));
    let dev = |name: &str| Kicked {
        ring: TestDevice::new(name),
        clock: clock.clone(),
    };
    let mut poller = Poller::new(Knobs::default());
    poller.set_knob("kern.polling.hz", "1000").unwrap();
    poller.set_knob("kern.polling.user_frac", "50").unwrap();
    let mut dp = Dataplane::new(poller, vec![dev("in"), dev("out")], Across);
    dp.set_mode(0, Mode::Polling).unwrap();
    dp.set_mode(1, Mode::Polling).unwrap();
    dp.interface_mut(0)
        .dev_mut()
        .ring
        .rx
        .extend((0..10).map(|_| vec![0u8; 60]));
    dp.raise_ticks(1);
    let mut clocks = TestClock(clock.clone());
    while let Some(due) = dp.next_due() {
        dp.step(due, &mut clocks);
    }
    assert_eq!(dp.interfaces()[0].counters().forwarded, 10);
    assert_eq!(clock.get(), KICK_NS, "one kick, after the cycle");
    // The cycle took no time but its kick: 60 % of the tick, over the 50 % share.
    assert_eq!(dp.poller().state().kern_load, 60);
}
