//! The socket's four rings at work: receive frames circulate fill ring → kernel → rx ring
//! → `rx` callback → fill ring; transmit frames free list → tx ring → kernel → completion
//! ring → free list (the module doc of [`super`]).

use rustix::io::Errno;
use rustix::net::SendFlags;
use xdpilone::xdp::XdpDesc;

use super::socket::socket_fd;
use super::AfXdp;

/// Descriptors one `sendto` kick sends in copy mode: the kernel's budget per call
/// (`TX_BATCH_SIZE` in `__xsk_generic_xmit`, net/xdp/xsk.c; a socket may raise it with
/// `XDP_MAX_TX_SKB_BUDGET` since Linux 6.17). The call answers EAGAIN when the budget runs
/// out with descriptors left, and stops early when the device pushes back (veth: the peer's
/// ring is full).
pub(super) const KICK_BUDGET: usize = 32;

/// Received descriptors read off the rx ring before their frames are processed, so that
/// the frames' first cache lines load together.
const PREFETCH_BATCH: usize = 32;

impl AfXdp {
    /// Masks a UMEM address down to the start of its frame.
    pub(super) fn frame_mask(&self) -> u64 {
        !(u64::from(self.config.frame_size) - 1)
    }

    /// Gives consumed receive frames back to the kernel, replacing lent ones from the
    /// shared UMEM's spare list.
    pub(super) fn refill(&mut self) {
        if self.rx_owed > 0 {
            let mut group = self.frames.group();
            let n = self.rx_owed.min(group.spare.len());
            let from = group.spare.len() - n;
            self.to_fill.extend(group.spare.drain(from..));
            self.rx_owed -= n;
        }
        // Twice at most: the first reservation may see a stale view of the kernel's
        // consumer index and grant fewer slots; the second refreshes it.
        for _ in 0..2 {
            if self.to_fill.is_empty() {
                break;
            }
            let mut writer = self.fill_completion.fill(self.to_fill.len() as u32);
            let filled = writer.insert(self.to_fill.iter().copied()) as usize;
            writer.commit();
            drop(writer);
            self.to_fill.drain(..filled);
        }
        if self.fill_completion.needs_wakeup() {
            self.stats.fill_wakeups += 1;
            self.fill_completion.wake();
        }
    }

    /// Takes transmitted frames back from the completion ring: its own to the free list,
    /// lent ones to the shared UMEM's spare list.
    pub(super) fn reclaim(&mut self) {
        let frame_mask = self.frame_mask();
        let mut reader = self.fill_completion.complete(self.config.tx_frames);
        let mut completed = 0;
        for addr in reader.by_ref() {
            let addr = addr & frame_mask;
            if self.tx_range.contains(&addr) {
                self.tx_free.push(addr);
            } else {
                self.to_spare.push(addr);
            }
            completed += 1;
        }
        reader.release();
        drop(reader);
        self.tx_outstanding -= completed;
        self.stats.tx_completed += u64::from(completed);
        if !self.to_spare.is_empty() {
            self.frames.group().spare.append(&mut self.to_spare);
        }
    }

    /// Whether the tx ring can take another descriptor (reclaiming completed ones first
    /// when it looks full).
    pub(super) fn tx_slot_free(&mut self) -> bool {
        if self.tx_outstanding == self.config.tx_frames {
            self.reclaim();
        }
        self.tx_outstanding < self.config.tx_frames
    }

    /// Queues a descriptor for `flush` to publish.
    pub(super) fn queue_tx(&mut self, addr: u64, len: usize) {
        self.tx_queued.push(XdpDesc {
            addr,
            len: len as u32,
            options: 0,
        });
        self.tx_outstanding += 1;
        self.stats.tx_frames += 1;
    }

    /// Publishes the queued descriptors to the tx ring.
    pub(super) fn publish_tx(&mut self) {
        if self.tx_queued.is_empty() {
            return;
        }
        let mut writer = self.tx.transmit(self.tx_queued.len() as u32);
        let published = writer.insert(self.tx_queued.iter().copied()) as usize;
        writer.commit();
        drop(writer);
        self.tx_queued.drain(..published);
    }

    /// Asks the kernel to transmit what the tx ring holds. In copy mode one `sendto` sends
    /// at most [`KICK_BUDGET`] frames and answers EAGAIN while more are left, and EBUSY
    /// when the device dropped the last frame it took: the device is full, and kicking on
    /// would drop one frame per call until its consumer runs, so the kicks stop there.
    pub(super) fn kick_tx(&mut self) {
        while self.tx.needs_wakeup() && self.tx.pending() > 0 {
            let before = self.tx.pending();
            self.stats.tx_kicks += 1;
            // A zero-length `sendto` with no address is the documented tx kick.
            let sent = rustix::net::send(socket_fd(&self.socket), &[], SendFlags::DONTWAIT);
            if sent == Err(Errno::BUSY) {
                self.stats.tx_dropped += 1;
                break;
            }
            let retry = matches!(sent, Ok(_) | Err(Errno::AGAIN | Errno::NOBUFS));
            // Stop when the kernel makes no progress: the next flush tries again.
            if !retry || self.tx.pending() >= before {
                break;
            }
        }
    }

    /// Hands up to `budget` received frames to `rx` with their UMEM address; a frame `rx`
    /// keeps (lent) is replaced in the fill ring from the spare list, the others go back.
    pub(super) fn receive_frames(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], u64) -> bool,
    ) -> usize {
        let budget = u32::try_from(budget).unwrap_or(u32::MAX);
        if let Some(busy) = self.busy_poll.as_mut().filter(|b| b.polls_napi()) {
            // Under preferred busy polling the device's interrupt stays masked: the
            // driver's NAPI poll runs here, for the frames this call may take that the rx
            // ring does not hold yet, and for one at least when it holds them all. For
            // the queue stays polld's only while polld busy polls it: the kernel takes it
            // back into softirq when no busy poll came for `gro_flush_timeout`, and hands
            // it back only at a busy poll. A flood keeps the ring full, so a poll that
            // skipped the call then left the queue to softirq for good: in a 6.1 guest
            // ksoftirqd ran the driver at the user's priority, filling the ring and
            // dropping the rest, beside a poll thread held to its share.
            let missing = budget.saturating_sub(self.rx.available()).max(1);
            busy.poll_napi(socket_fd(&self.socket), missing as usize);
        }
        let frame_mask = self.frame_mask();
        let mut reader = self.rx.receive(budget);
        let mut handed = 0;
        let mut batch = [XdpDesc::default(); PREFETCH_BATCH];
        loop {
            let mut n = 0;
            while n < PREFETCH_BATCH {
                let Some(desc) = reader.read() else { break };
                batch[n] = desc;
                n += 1;
            }
            if n == 0 {
                break;
            }
            // The receive thread wrote these frames while polld slept; by now they have
            // usually left the cache (and their pages the TLB). Asking for all the headers
            // at once overlaps those misses instead of paying them one frame at a time.
            for desc in &batch[..n] {
                self.frames.area.prefetch(desc.addr);
            }
            for desc in &batch[..n] {
                // SAFETY: the kernel passed this frame to us through the rx ring; no other
                // reference to it exists until it goes back to the fill ring, or, lent,
                // until the dataplane sends it or gives it back.
                let frame = unsafe { self.frames.area.frame_mut(desc.addr, desc.len as usize) };
                let kept = match frame {
                    Some(frame) => {
                        self.stats.rx_bytes += frame.len() as u64;
                        handed += 1;
                        rx(frame, desc.addr)
                    }
                    None => {
                        self.stats.rx_bad_descs += 1;
                        false
                    }
                };
                if kept {
                    self.rx_owed += 1;
                } else {
                    self.to_fill.push(desc.addr & frame_mask);
                }
            }
        }
        reader.release();
        drop(reader);
        self.stats.rx_frames += handed as u64;
        self.refill();
        handed
    }
}
