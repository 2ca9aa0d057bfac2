//! The transmit batch of the AF_PACKET device: `send` copies frames into fixed slots,
//! `flush` hands them all to the kernel with `sendmmsg` (one system call per batch).
//!
//! Nothing is lost silently. When the socket send buffer is full the kernel answers
//! EAGAIN: the unsent frames stay staged for the next flush (a *pushback*), the batch
//! counts as refused until a flush empties it, and once it is full `send` reports
//! [`TxFull`] so the caller counts its own drop. A frame too
//! long for a slot or the MTU (EMSGSIZE), or one the kernel refuses outright (ENOBUFS from
//! a full driver queue, ENETDOWN), is counted in `drops` by reason and skipped. A refusal in the middle of a batch is not reported
//! by `sendmmsg` (it returns the frames sent before it): that is taken as a pushback, and
//! the next flush retries the frame as the head of its call, which reports the reason.
//! Asking again at once would cost a system call that, with the send buffer full, only
//! answers EAGAIN (about 2,000 a second in polling at half load on the testbed).

use std::io::IoSlice;
use std::os::fd::BorrowedFd;

use polld_core::device::{TxDrop, TxFull};
use rustix::io::Errno;
use rustix::net::{MMsgHdr, SendAncillaryBuffer, SendFlags};

use crate::afpacket::TxStats;

pub(crate) struct TxBatch {
    /// `capacity` slots of `slot_size` bytes; staged frame `i` is in slot `i`.
    slots: Vec<u8>,
    slot_size: usize,
    /// Lengths of the staged frames, oldest first.
    staged: Vec<usize>,
    stats: TxStats,
    /// The last flush was pushed back (EAGAIN, or a call the kernel stopped inside the
    /// batch) and left frames staged: they wait for send buffer space, and the next flush
    /// learns any other refusal.
    refused: bool,
}

impl TxBatch {
    pub(crate) fn new(capacity: usize, slot_size: usize) -> TxBatch {
        TxBatch {
            slots: vec![0; capacity * slot_size],
            slot_size,
            staged: Vec::with_capacity(capacity),
            stats: TxStats::default(),
            refused: false,
        }
    }

    /// Whether staged frames wait because the kernel pushed them back.
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }

    /// Whether `stage` would refuse the next frame.
    pub(crate) fn is_full(&self) -> bool {
        self.staged.len() == self.capacity()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() / self.slot_size
    }

    pub(crate) fn stats(&self) -> TxStats {
        TxStats {
            pending: self.staged.len() as u64,
            ..self.stats
        }
    }

    pub(crate) fn stage(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        if frame.len() > self.slot_size {
            // The kernel would refuse it too (EMSGSIZE); counted, not reported as full.
            self.stats.drops.add(TxDrop::TooLong, 1);
            return Ok(());
        }
        if self.is_full() {
            return Err(TxFull);
        }
        let slot = self.staged.len();
        let start = slot * self.slot_size;
        self.slots[start..start + frame.len()].copy_from_slice(frame);
        self.staged.push(frame.len());
        Ok(())
    }

    /// Sends every staged frame the kernel takes now; keeps the rest staged.
    pub(crate) fn push(&mut self, fd: BorrowedFd<'_>) {
        let mut done = 0;
        while done < self.staged.len() {
            match self.send_from(fd, done) {
                Ok(sent) => {
                    done += sent;
                    self.stats.sent += sent as u64;
                    if done < self.staged.len() {
                        // The kernel stopped inside the batch, almost always at a full
                        // send buffer (it would answer EAGAIN at once): a pushback. The
                        // next flush retries the frame and learns any other refusal then.
                        self.stats.pushbacks += 1;
                        break;
                    }
                }
                Err(e) => match e {
                    Errno::INTR => {}
                    Errno::AGAIN => {
                        self.stats.pushbacks += 1;
                        break;
                    }
                    errno => {
                        let reason = match errno {
                            Errno::NOBUFS => TxDrop::NoBufs,
                            Errno::MSGSIZE => TxDrop::TooLong,
                            _ => TxDrop::Refused,
                        };
                        self.stats.drops.add(reason, 1);
                        done += 1;
                    }
                },
            }
        }
        self.remove_front(done);
        self.refused = !self.staged.is_empty();
    }

    /// One `sendmmsg` of the staged frames from index `first` on.
    fn send_from(&self, fd: BorrowedFd<'_>, first: usize) -> rustix::io::Result<usize> {
        let frames: Vec<IoSlice<'_>> = (self.staged.iter().enumerate().skip(first))
            .map(|(slot, &len)| IoSlice::new(&self.slots[slot * self.slot_size..][..len]))
            .collect();
        let mut no_control: Vec<SendAncillaryBuffer<'_, '_, '_>> = frames
            .iter()
            .map(|_| SendAncillaryBuffer::default())
            .collect();
        let mut messages: Vec<MMsgHdr<'_>> = (frames.iter().zip(&mut no_control))
            .map(|(frame, control)| MMsgHdr::new(std::slice::from_ref(frame), control))
            .collect();
        // Never block the poller; never raise SIGPIPE.
        rustix::net::sendmmsg(fd, &mut messages, SendFlags::DONTWAIT | SendFlags::NOSIGNAL)
    }

    /// Drops the first `count` staged frames, moving the rest to the front slots.
    fn remove_front(&mut self, count: usize) {
        if count == 0 {
            return;
        }
        let kept = self.staged.len() - count;
        if kept > 0 {
            let end = self.staged.len() * self.slot_size;
            self.slots.copy_within(count * self.slot_size..end, 0);
        }
        self.staged.drain(..count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixDatagram;

    fn read_all(socket: &UnixDatagram) -> Vec<Vec<u8>> {
        socket.set_nonblocking(true).unwrap();
        let mut frames = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buf) {
            frames.push(buf[..n].to_vec());
        }
        frames
    }

    #[test]
    fn staged_frames_are_sent_in_order_by_one_flush() {
        let (ours, peer) = UnixDatagram::pair().unwrap();
        let mut batch = TxBatch::new(4, 64);
        for frame in [&b"one"[..], b"two", b"three"] {
            batch.stage(frame).unwrap();
        }
        batch.push(ours.as_fd());
        assert_eq!(read_all(&peer), [&b"one"[..], b"two", b"three"]);
        assert_eq!(
            batch.stats(),
            TxStats {
                sent: 3,
                ..TxStats::default()
            }
        );
    }

    #[test]
    fn a_full_batch_is_reported_and_oversize_frames_are_counted() {
        let mut batch = TxBatch::new(2, 8);
        assert_eq!(batch.stage(&[0; 9]), Ok(()));
        assert_eq!(batch.stage(&[1; 8]), Ok(()));
        assert_eq!(batch.stage(&[2; 8]), Ok(()));
        assert_eq!(batch.stage(&[3; 8]), Err(TxFull));
        let stats = batch.stats();
        assert_eq!(
            (
                stats.drops.get(TxDrop::TooLong),
                stats.dropped(),
                stats.pending
            ),
            (1, 1, 2)
        );
    }

    #[test]
    fn frames_the_kernel_pushes_back_stay_staged_for_the_next_flush() {
        let (ours, peer) = UnixDatagram::pair().unwrap();
        // Fill the peer's queue so that the next send gets EAGAIN.
        ours.set_nonblocking(true).unwrap();
        let mut filler = 0u64;
        while ours.send(b"filler").is_ok() {
            filler += 1;
        }
        let mut batch = TxBatch::new(4, 64);
        batch.stage(b"kept-1").unwrap();
        batch.stage(b"kept-2").unwrap();
        batch.push(ours.as_fd());
        assert_eq!(
            batch.stats(),
            TxStats {
                pending: 2,
                pushbacks: 1,
                ..TxStats::default()
            }
        );
        assert!(batch.refused());
        assert_eq!(read_all(&peer).len() as u64, filler);
        batch.push(ours.as_fd());
        assert!(!batch.refused());
        assert_eq!(read_all(&peer), [&b"kept-1"[..], b"kept-2"]);
        assert_eq!(batch.stats().sent, 2);
        assert_eq!(batch.stats().pending, 0);
    }

    #[test]
    fn a_batch_the_kernel_stops_inside_waits_for_the_next_flush_which_learns_why() {
        let (ours, peer) = UnixDatagram::pair().unwrap();
        // A datagram larger than the send buffer is refused with EMSGSIZE, so `sendmmsg`
        // takes the first frame and stops at the second.
        rustix::net::sockopt::set_socket_send_buffer_size(&ours, 4096).unwrap();
        let mut batch = TxBatch::new(4, 64 * 1024);
        batch.stage(b"fits").unwrap();
        batch.stage(&[0u8; 32 * 1024]).unwrap();
        batch.push(ours.as_fd());
        // One call: the stop is taken as a pushback, not asked about again at once.
        assert_eq!(read_all(&peer), [&b"fits"[..]]);
        let stats = batch.stats();
        assert_eq!((stats.sent, stats.pushbacks, stats.pending), (1, 1, 1));
        assert!(batch.refused());
        batch.push(ours.as_fd());
        let stats = batch.stats();
        assert_eq!(
            (stats.sent, stats.drops.get(TxDrop::TooLong), stats.pending),
            (1, 1, 0)
        );
        assert!(!batch.refused());
    }

    #[test]
    fn a_refused_frame_is_counted_and_skipped() {
        let (ours, peer) = UnixDatagram::pair().unwrap();
        drop(peer);
        let mut batch = TxBatch::new(4, 64);
        batch.stage(b"a").unwrap();
        batch.stage(b"b").unwrap();
        batch.push(ours.as_fd());
        let stats = batch.stats();
        assert_eq!(
            (stats.sent, stats.drops.get(TxDrop::Refused), stats.pending),
            (0, 2, 0)
        );
    }
}
