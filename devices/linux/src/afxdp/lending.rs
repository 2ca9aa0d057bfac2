//! Forwarding without a copy between the sockets of a shared UMEM ([`Lending`]): a received
//! frame lent as its UMEM address, a loan put on another member's tx ring as it is.

use polld_core::{Lending, Loan, TxFull};

use super::AfXdp;

impl Lending for AfXdp {
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        let pool = self.frames.pool;
        self.receive_frames(budget, &mut |frame, offset| {
            let len = frame.len() as u32;
            rx(frame, Loan { pool, offset, len })
        })
    }

    /// The descriptor goes on this socket's tx ring as it is: the frame already lies in
    /// the shared UMEM. One too long for this interface is accepted and dropped (counted
    /// as `send` counts it), its frame returned to the spare list.
    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull> {
        debug_assert_eq!(loan.pool, self.frames.pool);
        if loan.len as usize > self.max_frame {
            self.stats.tx_too_long += 1;
            let frame = self.frame_mask() & loan.offset;
            self.frames.group().spare.push(frame);
            return Ok(());
        }
        if !self.tx_slot_free() {
            self.stats.tx_full += 1;
            return Err(TxFull);
        }
        self.queue_tx(loan.offset, loan.len as usize);
        self.stats.tx_lent += 1;
        Ok(())
    }

    fn give_back(&mut self, loan: Loan) {
        let frame = self.frame_mask() & loan.offset;
        if self.rx_owed > 0 {
            // The fill ring is still owed a frame for the loan: this one pays it.
            self.to_fill.push(frame);
            self.rx_owed -= 1;
        } else {
            // A spare already took the loan's place in the fill ring at the end of the
            // receive batch: the frame is a spare now.
            self.frames.group().spare.push(frame);
        }
    }

    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8])) {
        // SAFETY: the caller holds the loan: until it sends or gives it back (or the tx
        // ring it was queued on is flushed), no other reference covers the frame, and the
        // kernel only reads it.
        if let Some(frame) = unsafe { self.frames.area.frame_mut(loan.offset, loan.len as usize) } {
            look(frame);
        }
    }
}
