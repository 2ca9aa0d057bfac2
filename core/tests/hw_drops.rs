//! Drops a device counts itself ([`HwStats`]): each folds into the interface's counter of
//! its own name, only by what it grew, and conservation leaves out those the device made
//! before handing frames up (they never reached `rx_packets`).

use polld_core::{
    Dataplane, DropReason, Emit, Frozen, HwStats, Mode, PacketStage, Poller, Verdict,
};
use polld_testsupport::TestDevice;

/// Consumes every frame.
struct Sink;

impl PacketStage for Sink {
    fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        Verdict::Consumed
    }
}

#[test]
fn each_device_drop_folds_under_its_own_reason_and_stays_out_of_rx() {
    let mut dev = TestDevice::new("ring0");
    dev.rx.extend((0..10).map(|_| vec![0u8; 60]));
    dev.hw = HwStats {
        rx_ring_full: 3,
        rx_no_buffer: 5,
        rx_fault: 2,
        ..HwStats::default()
    };
    let mut dp = Dataplane::new(Poller::default(), vec![dev], Sink);
    dp.set_mode(0, Mode::Interrupt).unwrap();
    dp.interrupt_line(0, true);
    while let Some(due) = dp.next_due() {
        dp.step(due, &mut Frozen(0));
    }
    dp.sync_hw_drops();
    // Totals that fall (a reopened device counts from zero again) add nothing; then growth.
    dp.interface_mut(0).dev_mut().hw = HwStats {
        rx_no_buffer: 1,
        ..HwStats::default()
    };
    dp.sync_hw_drops();
    dp.interface_mut(0).dev_mut().hw.rx_no_buffer = 4;
    dp.sync_hw_drops();

    let c = dp.interfaces()[0].counters();
    assert_eq!((c.rx_packets, c.consumed), (10, 10));
    let drops = |r| c.drops.get(r);
    assert_eq!(drops(DropReason::RxRingFull), 3);
    assert_eq!(drops(DropReason::RxNoBuffer), 5 + 3);
    assert_eq!(drops(DropReason::FaultInjected), 2);
    assert_eq!(c.drops.after_rx(), 0);
    assert_eq!(c.unaccounted(), 0, "{c:?}");
    let names: Vec<&str> = c.drops.nonzero(&[]).map(|(r, _)| r.name()).collect();
    assert_eq!(names, ["rx_ring_full", "rx_no_buffer", "fault_injected"]);
}
