//! A device whose buffers live in a pool it shares with other devices (a UMEM in
//! miniature), lending them ([`Lending`]): shared by the lending tests of the core and of
//! the middleware (which includes this file by its path).

// Each test file that includes it uses a part of it.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use polld_core::{Capabilities, Device, Lending, LinkState, Loan, PoolId, TxFull};

/// Buffers shared by the devices of one pool (a UMEM in miniature).
pub struct Pool {
    pub id: PoolId,
    pub bufs: Vec<Vec<u8>>,
    pub free: Vec<usize>,
}

impl Pool {
    pub fn new(id: u64, buffers: usize) -> Rc<RefCell<Pool>> {
        Rc::new(RefCell::new(Pool {
            id: PoolId(id),
            bufs: vec![vec![0; 64]; buffers],
            free: (0..buffers).collect(),
        }))
    }
    pub fn all_free(&self) -> bool {
        self.free.len() == self.bufs.len()
    }
}

/// A device receiving into buffers of its pool; `lends` false hides the capability (a
/// device wrapped by middleware).
pub struct PoolDevice {
    pub name: String,
    pub pool: Rc<RefCell<Pool>>,
    pub lends: bool,
    pub link: LinkState,
    /// Frames on the wire, waiting to be received.
    pub wire_in: VecDeque<Vec<u8>>,
    /// The transmit ring: buffers of the pool (loans or copies), at most `tx_ring`.
    pub tx: Vec<(usize, usize)>,
    pub tx_ring: usize,
    /// What left on the wire, and how many of those were loans.
    pub sent: Vec<Vec<u8>>,
    pub sent_lent: usize,
    pub given_back: usize,
}

impl PoolDevice {
    pub fn new(name: &str, pool: &Rc<RefCell<Pool>>, tx_ring: usize) -> PoolDevice {
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
    fn capabilities(&self) -> Capabilities<'_> {
        let caps = Capabilities::new();
        match self.lends {
            true => caps.with_pool(self.pool.borrow().id),
            false => caps,
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
