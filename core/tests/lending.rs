//! Forwarding without a copy ([`Lending`]), on virtual time: a frame lent by its input is
//! sent as the same buffer by an output of the same pool, rewritten in place; every other
//! case (another pool, an output that cannot lend, a full or down output, the input
//! queue) is the copy path, and no buffer is ever lost: after each run every buffer of the
//! pool is free again, and every frame is counted.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use polld_core::{
    Capabilities, Dataplane, Device, Due, Emit, Lending, LinkState, Loan, Mode, PacketStage,
    Poller, PoolId, TxFull, Verdict,
};

/// Buffers shared by the devices of one pool (a UMEM in miniature).
struct Pool {
    id: PoolId,
    bufs: Vec<Vec<u8>>,
    free: Vec<usize>,
}

impl Pool {
    fn new(id: u64, buffers: usize) -> Rc<RefCell<Pool>> {
        Rc::new(RefCell::new(Pool {
            id: PoolId(id),
            bufs: vec![vec![0; 64]; buffers],
            free: (0..buffers).collect(),
        }))
    }
    fn all_free(&self) -> bool {
        self.free.len() == self.bufs.len()
    }
}

/// A device receiving into buffers of its pool; `lends` false hides the capability (a
/// device wrapped by middleware).
struct PoolDevice {
    name: String,
    pool: Rc<RefCell<Pool>>,
    lends: bool,
    link: LinkState,
    /// Frames on the wire, waiting to be received.
    wire_in: VecDeque<Vec<u8>>,
    /// The transmit ring: buffers of the pool (loans or copies), at most `tx_ring`.
    tx: Vec<(usize, usize)>,
    tx_ring: usize,
    /// What left on the wire, and how many of those were loans.
    sent: Vec<Vec<u8>>,
    sent_lent: usize,
    given_back: usize,
}

impl PoolDevice {
    fn new(name: &str, pool: &Rc<RefCell<Pool>>, tx_ring: usize) -> PoolDevice {
        PoolDevice {
            name: name.to_string(),
            pool: pool.clone(),
            lends: true,
            link: LinkState::Up,
            wire_in: VecDeque::new(),
            tx: Vec::new(),
            tx_ring,
            sent: Vec::new(),
            sent_lent: 0,
            given_back: 0,
        }
    }

    /// Receives one frame into a pool buffer and hands it to `rx`; the buffer goes back to
    /// the pool unless `rx` keeps it.
    fn receive_into_pool(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        let mut n = 0;
        while n < budget {
            let Some(bytes) = self.wire_in.pop_front() else {
                break;
            };
            let mut pool = self.pool.borrow_mut();
            let buf = pool.free.pop().expect("a free buffer");
            pool.bufs[buf][..bytes.len()].copy_from_slice(&bytes);
            let loan = Loan {
                pool: pool.id,
                offset: buf as u64,
                len: bytes.len() as u32,
            };
            // The stage runs with the pool unborrowed, on its own copy of the slice.
            let mut frame = std::mem::take(&mut pool.bufs[buf]);
            drop(pool);
            let kept = rx(&mut frame[..bytes.len()], loan);
            let mut pool = self.pool.borrow_mut();
            pool.bufs[buf] = frame;
            if !kept {
                pool.free.push(buf);
            }
            n += 1;
        }
        n
    }
}

impl Device for PoolDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pool: self.lends.then(|| self.pool.borrow().id),
            ..Capabilities::default()
        }
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        self.receive_into_pool(budget, &mut |frame, _| {
            rx(frame);
            false
        })
    }
    fn rx_ready(&mut self) -> bool {
        !self.wire_in.is_empty()
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if self.tx.len() == self.tx_ring {
            return Err(TxFull);
        }
        let mut pool = self.pool.borrow_mut();
        let buf = pool.free.pop().expect("a free buffer");
        pool.bufs[buf][..frame.len()].copy_from_slice(frame);
        self.tx.push((buf, frame.len()));
        Ok(())
    }
    fn tx_room(&mut self) -> usize {
        self.tx_ring - self.tx.len()
    }
    /// Transmits the ring at once (the wire is infinitely fast here) and frees its buffers.
    fn flush(&mut self) {
        let mut pool = self.pool.borrow_mut();
        for (buf, len) in self.tx.drain(..) {
            self.sent.push(pool.bufs[buf][..len].to_vec());
            pool.free.push(buf);
        }
    }
    fn check_status(&mut self) -> LinkState {
        self.link
    }
    fn set_interrupt(&mut self, _armed: bool) {}
    fn lending(&mut self) -> Option<&mut dyn Lending> {
        if self.lends {
            Some(self)
        } else {
            None
        }
    }
}

impl Lending for PoolDevice {
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        self.receive_into_pool(budget, rx)
    }
    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull> {
        assert_eq!(loan.pool, self.pool.borrow().id, "a loan of another pool");
        if self.tx.len() == self.tx_ring {
            return Err(TxFull);
        }
        self.tx.push((loan.offset as usize, loan.len as usize));
        self.sent_lent += 1;
        Ok(())
    }
    fn give_back(&mut self, loan: Loan) {
        self.given_back += 1;
        self.pool.borrow_mut().free.push(loan.offset as usize);
    }
    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8])) {
        look(&self.pool.borrow().bufs[loan.offset as usize][..loan.len as usize]);
    }
}

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
                dp.run(due, now);
            }
        }
    } else {
        dp.interrupt_line(0, true);
        while let Some(due) = dp.next_due() {
            assert!(!matches!(due, Due::Tick(_)));
            dp.run(due, 0);
        }
    }
}

fn conserved(dp: &Dp) {
    for iface in dp.interfaces() {
        assert_eq!(
            iface.counters().unaccounted(),
            0,
            "{}: {:?}",
            iface.dev().name(),
            iface.counters()
        );
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
