//! Forwarding without a copy ([`polld_core::Lending`]), on virtual time: a frame lent by its input is
//! sent as the same buffer by an output of the same pool, rewritten in place; every other
//! case (another pool, an output that cannot lend, a full or down output, the input
//! queue) is the copy path, and no buffer is ever lost: after each run every buffer of the
//! pool is free again, and every frame is counted.

use polld_core::{
    Dataplane, Device, Due, Emit, Frozen, LinkState, Mode, PacketStage, Poller, Verdict,
};

mod pool_device;

use pool_device::{Pool, PoolDevice};

/// Forwards every frame from interface 0 to 1 (and back), decrementing byte 0 in place
/// as a router decrements the TTL.
struct Router;

impl PacketStage for Router {
    fn process(&mut self, input: usize, frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        frame[0] -= 1;
        Verdict::Forward { out: 1 - input }
    }
}

type Dp = Dataplane<PoolDevice, Router>;

fn dataplane(input: PoolDevice, output: PoolDevice, mode: Mode) -> Dp {
    let mut dp = Dataplane::new(Poller::default(), vec![input, output], Router);
    dp.set_mode(0, mode).unwrap();
    dp
}

/// Puts `n` frames on interface 0's wire, frame k carrying k in byte 1.
fn inject(dp: &mut Dp, n: usize) {
    let wire = &mut dp.interface_mut(0).dev_mut().wire_in;
    wire.extend((0..n).map(|k| vec![64, k as u8, 0, 0]));
}

/// Receives what interface 0 holds: one interrupt, or ticks in polling mode.
fn run(dp: &mut Dp) {
    if dp.interfaces()[0].mode() == Mode::Polling {
        for tick in 1..=20 {
            dp.raise_ticks(1);
            let now = tick * 1_000_000;
            while let Some(due) = dp.next_due() {
                dp.step(due, &mut Frozen(now));
            }
        }
    } else {
        dp.interrupt_line(0, true);
        while let Some(due) = dp.next_due() {
            assert!(!matches!(due, Due::Tick(_)));
            dp.step(due, &mut Frozen(0));
        }
    }
}

/// Every frame is counted, and every byte that left: a loan's as a copy's.
fn conserved(dp: &Dp) {
    for iface in dp.interfaces() {
        let c = iface.counters();
        assert_eq!(c.unaccounted(), 0, "{}: {c:?}", iface.dev().name());
        let sent: usize = iface.dev().sent.iter().map(Vec::len).sum();
        assert_eq!(c.tx_bytes, sent as u64, "{}: {c:?}", iface.dev().name());
    }
}

#[test]
fn a_frame_lent_to_an_output_of_its_pool_is_sent_as_the_same_buffer_rewritten() {
    for mode in [Mode::Interrupt, Mode::Polling] {
        let pool = Pool::new(1, 256);
        let mut dp = dataplane(
            PoolDevice::new("a", &pool, 64),
            PoolDevice::new("b", &pool, 64),
            mode,
        );
        inject(&mut dp, 40);
        run(&mut dp);
        let c = dp.interfaces()[0].counters();
        assert_eq!(
            (c.rx_packets, c.forwarded, c.lent),
            (40, 40, 40),
            "{mode:?}"
        );
        let out = dp.interfaces()[1].dev();
        assert_eq!(out.sent_lent, 40);
        // In order, each rewritten in place (byte 0: 64 → 63).
        let expected: Vec<Vec<u8>> = (0..40).map(|k| vec![63, k as u8, 0, 0]).collect();
        assert_eq!(out.sent, expected);
        assert!(pool.borrow().all_free(), "{mode:?}: a buffer was lost");
        conserved(&dp);
    }
}

#[test]
fn a_loan_the_full_output_refuses_goes_back_to_its_lender_and_is_counted() {
    // Interrupt mode receives a whole batch before sending: the 4-slot ring takes 4.
    let pool = Pool::new(1, 256);
    let mut dp = dataplane(
        PoolDevice::new("a", &pool, 64),
        PoolDevice::new("b", &pool, 4),
        Mode::Interrupt,
    );
    inject(&mut dp, 10);
    run(&mut dp);
    let c = dp.interfaces()[0].counters();
    assert_eq!((c.rx_packets, c.forwarded, c.lent), (10, 4, 4));
    assert_eq!(c.drops.get(polld_core::DropReason::TxRingFull), 6);
    assert_eq!(dp.interfaces()[0].dev().given_back, 6);
    assert_eq!(dp.interfaces()[1].dev().sent.len(), 4);
    assert!(pool.borrow().all_free(), "a refused loan was lost");
    conserved(&dp);
}

#[test]
fn a_frame_for_a_down_output_is_not_lent_and_its_buffer_recycled() {
    let pool = Pool::new(1, 256);
    let mut output = PoolDevice::new("b", &pool, 64);
    output.link = LinkState::Down;
    let mut dp = dataplane(PoolDevice::new("a", &pool, 64), output, Mode::Interrupt);
    dp.check_status(1);
    inject(&mut dp, 5);
    run(&mut dp);
    let c = dp.interfaces()[0].counters();
    assert_eq!(c.drops.get(polld_core::DropReason::LinkDown), 5);
    assert_eq!((c.forwarded, c.lent), (0, 0));
    assert_eq!(dp.interfaces()[0].dev().given_back, 0);
    assert!(pool.borrow().all_free());
    conserved(&dp);
}

#[test]
fn another_pool_or_an_output_that_cannot_lend_gets_a_copy() {
    let own = Pool::new(1, 256);
    let other = Pool::new(2, 256);
    let mut hidden = PoolDevice::new("b", &own, 64);
    hidden.lends = false;
    for (output, pools) in [
        (PoolDevice::new("b", &other, 64), vec![&own, &other]),
        (hidden, vec![&own]),
    ] {
        let mut dp = dataplane(PoolDevice::new("a", &own, 64), output, Mode::Interrupt);
        inject(&mut dp, 8);
        run(&mut dp);
        let c = dp.interfaces()[0].counters();
        assert_eq!((c.forwarded, c.lent), (8, 0));
        let out = dp.interfaces()[1].dev();
        assert_eq!((out.sent.len(), out.sent_lent), (8, 0));
        assert_eq!(
            out.sent[7],
            vec![63, 7, 0, 0],
            "the copy carries the rewrite"
        );
        assert!(pools.iter().all(|p| p.borrow().all_free()));
        conserved(&dp);
    }
}

#[test]
fn frames_through_the_input_queue_are_copies() {
    let pool = Pool::new(1, 256);
    let mut dp = dataplane(
        PoolDevice::new("a", &pool, 64),
        PoolDevice::new("b", &pool, 64),
        Mode::Interrupt,
    );
    dp.sysctl_set("net.inet.ip.fastforwarding", "0").unwrap();
    inject(&mut dp, 6);
    run(&mut dp);
    let c = dp.interfaces()[0].counters();
    assert_eq!((c.forwarded, c.lent), (6, 0));
    assert_eq!(dp.interfaces()[1].dev().sent.len(), 6);
    assert!(pool.borrow().all_free());
    conserved(&dp);
}
