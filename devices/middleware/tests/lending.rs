//! Loans through the middleware: devices whose buffers live in one pool still forward
//! without a copy under the pcap writer, which records each lent frame as received and
//! each loan as sent; under the fault injector they forward by copy.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Write};
use std::rc::Rc;

use polld_core::{
    Capabilities, Dataplane, Device, Emit, IfCounters, Lending, LinkState, Loan, PacketStage,
    Poller, PoolId, TxFull, Verdict,
};
use polld_middleware::{FaultConfig, FaultInjector, PcapWriter};

/// Buffers shared by the devices of one pool (a UMEM in miniature).
struct Pool {
    bufs: Vec<Vec<u8>>,
    free: Vec<usize>,
}

const POOL: PoolId = PoolId(7);

/// A device receiving into, and sending from, buffers of the pool.
struct PoolDevice {
    pool: Rc<RefCell<Pool>>,
    /// Frames on the wire, waiting to be received.
    wire_in: VecDeque<Vec<u8>>,
    /// The transmit ring: (buffer, length).
    tx: Vec<(usize, usize)>,
    /// What left on the wire, and how many of those were loans.
    sent: Vec<Vec<u8>>,
    sent_lent: usize,
}

impl PoolDevice {
    fn new(pool: &Rc<RefCell<Pool>>) -> PoolDevice {
        PoolDevice {
            pool: pool.clone(),
            wire_in: VecDeque::new(),
            tx: Vec::new(),
            sent: Vec::new(),
            sent_lent: 0,
        }
    }
}

impl Device for PoolDevice {
    fn name(&self) -> &str {
        "pool0"
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            pool: Some(POOL),
            ..Capabilities::default()
        }
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        self.receive_lending(budget, &mut |frame, _| {
            rx(frame);
            false
        })
    }
    fn rx_ready(&mut self) -> bool {
        !self.wire_in.is_empty()
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        let mut pool = self.pool.borrow_mut();
        let buf = pool.free.pop().ok_or(TxFull)?;
        pool.bufs[buf][..frame.len()].copy_from_slice(frame);
        self.tx.push((buf, frame.len()));
        Ok(())
    }
    fn flush(&mut self) {
        let mut pool = self.pool.borrow_mut();
        for (buf, len) in self.tx.drain(..) {
            self.sent.push(pool.bufs[buf][..len].to_vec());
            pool.free.push(buf);
        }
    }
    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }
    fn set_interrupt(&mut self, _armed: bool) {}
    fn lending(&mut self) -> Option<&mut dyn Lending> {
        Some(self)
    }
}

impl Lending for PoolDevice {
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        let mut n = 0;
        while n < budget {
            let Some(bytes) = self.wire_in.pop_front() else {
                break;
            };
            let buf = self.pool.borrow_mut().free.pop().expect("a free buffer");
            let mut frame = std::mem::take(&mut self.pool.borrow_mut().bufs[buf]);
            frame[..bytes.len()].copy_from_slice(&bytes);
            let loan = Loan {
                pool: POOL,
                offset: buf as u64,
                len: bytes.len() as u32,
            };
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
    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull> {
        self.tx.push((loan.offset as usize, loan.len as usize));
        self.sent_lent += 1;
        Ok(())
    }
    fn give_back(&mut self, loan: Loan) {
        self.pool.borrow_mut().free.push(loan.offset as usize);
    }
    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8])) {
        look(&self.pool.borrow().bufs[loan.offset as usize][..loan.len as usize]);
    }
}

/// Forwards interface 0's frames to interface 1, decrementing byte 0 in place as a router
/// decrements the TTL.
struct Router;

impl PacketStage for Router {
    fn process(&mut self, _input: usize, frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        frame[0] -= 1;
        Verdict::Forward { out: 1 }
    }
}

/// A writer the test can read while a device owns it.
#[derive(Clone, Default)]
struct File(Rc<RefCell<Vec<u8>>>);

impl Write for File {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The frames recorded in a classic pcap file (after its 24-byte global header).
fn recorded(file: &File) -> Vec<Vec<u8>> {
    let file = file.0.borrow();
    let word = |at: usize| u32::from_ne_bytes(file[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 24;
    let mut frames = Vec::new();
    while at < file.len() {
        let caught = word(at + 8);
        frames.push(file[at + 16..at + 16 + caught].to_vec());
        at += 16 + caught;
    }
    frames
}

fn pool() -> Rc<RefCell<Pool>> {
    Rc::new(RefCell::new(Pool {
        bufs: vec![vec![0; 64]; 64],
        free: (0..64).collect(),
    }))
}

/// Puts 10 frames on interface 0's wire (frame k carries k in byte 1), runs its interrupt
/// handler until its ring is empty, and returns both interfaces' counters.
fn forward<D: Device>(
    mut dp: Dataplane<D, Router>,
    wire_in: impl Fn(&mut D) -> &mut VecDeque<Vec<u8>>,
) -> (Dataplane<D, Router>, [IfCounters; 2]) {
    wire_in(dp.interface_mut(0).dev_mut()).extend((0..10).map(|k| vec![64, k as u8, 0, 0]));
    dp.interrupt_line(0, true);
    dp.run_accounted(0);
    let counters = [0, 1].map(|i| dp.interfaces()[i].counters());
    (dp, counters)
}

#[test]
fn a_lending_device_under_the_pcap_writer_still_lends_and_every_frame_is_recorded() {
    let pool = pool();
    let files = [File::default(), File::default()];
    let devices = files
        .iter()
        .map(|file| PcapWriter::new(PoolDevice::new(&pool), file.clone(), Box::new(|| 0)))
        .collect::<io::Result<Vec<_>>>()
        .unwrap();
    assert_eq!(devices[0].capabilities().pool, Some(POOL));
    let dp = Dataplane::new(Poller::default(), devices, Router);
    let (dp, [input, _]) = forward(dp, |dev| &mut dev.inner_mut().wire_in);

    assert_eq!(
        (input.rx_packets, input.forwarded, input.lent),
        (10, 10, 10)
    );
    let output = dp.interfaces()[1].dev();
    assert_eq!(output.inner().sent_lent, 10);
    let received: Vec<Vec<u8>> = (0..10).map(|k| vec![64, k as u8, 0, 0]).collect();
    let sent: Vec<Vec<u8>> = (0..10).map(|k| vec![63, k as u8, 0, 0]).collect();
    assert_eq!(output.inner().sent, sent);
    // Received as handed up, sent as rewritten in place.
    assert_eq!(recorded(&files[0]), received);
    assert_eq!(recorded(&files[1]), sent);
    let stats = [0, 1].map(|i| dp.interfaces()[i].dev().stats());
    assert_eq!((stats[0].rx_records, stats[1].tx_records), (10, 10));
    assert_eq!(pool.borrow().free.len(), 64, "a buffer was lost");
}

#[test]
fn a_lending_device_under_the_fault_injector_forwards_by_copy() {
    let pool = pool();
    let devices = [(), ()]
        .map(|()| FaultInjector::new(PoolDevice::new(&pool), FaultConfig::default()).unwrap());
    assert_eq!(devices[0].capabilities().pool, None);
    let dp = Dataplane::new(Poller::default(), devices.into(), Router);
    let (dp, [input, _]) = forward(dp, |dev| &mut dev.inner_mut().wire_in);

    assert_eq!((input.rx_packets, input.forwarded, input.lent), (10, 10, 0));
    let output = dp.interfaces()[1].dev().inner();
    assert_eq!(output.sent_lent, 0);
    let sent: Vec<Vec<u8>> = (0..10).map(|k| vec![63, k as u8, 0, 0]).collect();
    assert_eq!(output.sent, sent);
    assert_eq!(pool.borrow().free.len(), 64, "a buffer was lost");
}
