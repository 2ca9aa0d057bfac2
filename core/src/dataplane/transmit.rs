//! Transmit staging: frames a receive batch produces are staged, sent after the batch,
//! and charged to the counter of the frame's origin once the output device took them;
//! drops the devices count on their own (hardware, kernel) are folded in here too.
//!
//! A forwarded frame is staged by copy, or, when its input lent it ([`Loan`]) and the
//! output shares the input's pool, as the loan itself: the output sends the same buffer,
//! and a loan the output refuses goes back to its lender, counted as `tx_ring_full`
//! like a refused copy. Either way every loan is settled before the batch ends.

use crate::device::{Device, HwStats, LinkState, Loan, TxDrop, TxFull};
use crate::stage::{DropReason, Emit, PacketStage, Verdict};

use super::{Dataplane, Devices, Facts, IfCounters, Interface};

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// A frame a user process sends on interface `i` (the simulator's traffic generator),
    /// counted in its `tx_packets` and `tx_bytes` when the device takes it.
    pub fn send_from_user(&mut self, i: usize, frame: &[u8]) -> Result<(), TxFull> {
        let iface = &mut self.devs.ifs[i];
        iface.dev.send(frame)?;
        iface.counters.count_tx(frame.len());
        Ok(())
    }
}

/// Whose frame a staged frame is, which decides the counter it ends in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// Made up by the stage (ARP, ICMP): `generated` on the output.
    Generated,
    /// A frame received on `input` and forwarded; `more` when later
    /// staged frames belong to the same datagram (its fragments), which counts once.
    Received { input: usize, more: bool },
    /// A part of a forwarded datagram whose verdict has not been applied yet; parts the
    /// verdict did not claim (the output went down) are never sent.
    Part,
}

/// Where a staged frame's bytes are.
#[derive(Clone, Copy, Debug)]
enum Bytes {
    /// Copied into the staging buffer, at `start`.
    Copied { start: usize, len: usize },
    /// Still in the input's receive buffer, lent for the output to send as it is.
    Lent(Loan),
}

/// A frame staged for transmission: the output, who to charge, and where its bytes are.
struct Staged {
    out: usize,
    origin: Origin,
    bytes: Bytes,
}

/// Frames to transmit after a receive batch, stored back to back in one buffer.
#[derive(Default)]
pub(super) struct TxStaging {
    bytes: Vec<u8>,
    frames: Vec<Staged>,
    /// Where the parts of the datagram being forwarded start in `frames`.
    parts_from: Option<usize>,
}

impl TxStaging {
    fn push(&mut self, out: usize, origin: Origin, frame: &[u8]) {
        self.frames.push(Staged {
            out,
            origin,
            bytes: Bytes::Copied {
                start: self.bytes.len(),
                len: frame.len(),
            },
        });
        self.bytes.extend_from_slice(frame);
    }

    fn push_loan(&mut self, out: usize, origin: Origin, loan: Loan) {
        self.frames.push(Staged {
            out,
            origin,
            bytes: Bytes::Lent(loan),
        });
    }

    /// Gives the parts staged since the last verdict to the datagram received on `input`
    /// (`Some`), or leaves them unsent (`None`); returns how many there were.
    fn settle_parts(&mut self, input: Option<usize>) -> usize {
        let Some(from) = self.parts_from.take() else {
            return 0;
        };
        let mut parts = self.frames[from..]
            .iter_mut()
            .filter(|s| s.origin == Origin::Part)
            .peekable();
        let mut n = 0;
        while let Some(s) = parts.next() {
            n += 1;
            if let Some(input) = input {
                let more = parts.peek().is_some();
                s.origin = Origin::Received { input, more };
            }
        }
        n
    }
}

impl Emit for TxStaging {
    fn emit(&mut self, out: usize, frame: &[u8]) {
        self.push(out, Origin::Generated, frame);
    }

    fn forward_part(&mut self, out: usize, frame: &[u8]) {
        self.parts_from.get_or_insert(self.frames.len());
        self.push(out, Origin::Part, frame);
    }
}

impl<D: Device, S: PacketStage> Devices<D, S> {
    /// Among the interfaces other than `i` whose link is up and whose device `counts` (by
    /// its capabilities), the one with the least transmit room, and that room.
    pub(super) fn fullest_output_besides(
        &mut self,
        i: usize,
        counts: impl Fn(&Facts) -> bool,
    ) -> Option<(usize, usize)> {
        let mut fullest: Option<(usize, usize)> = None;
        for (j, iface) in self.ifs.iter_mut().enumerate() {
            if j != i && self.links[j] == LinkState::Up && counts(&self.caps[j]) {
                let room = iface.dev.tx_room();
                if fullest.is_none_or(|(_, least)| room < least) {
                    fullest = Some((j, room));
                }
            }
        }
        fullest
    }

    /// Sends the staged frames. An output is flushed once a kick's worth of frames
    /// ([`crate::Capabilities::tx_batch`]) waits on it; the rest wait for [`Devices::flush_waiting`].
    pub(super) fn transmit(&mut self) {
        if self.tx.frames.is_empty() {
            return;
        }
        // Whether every frame so far of the datagram being sent was taken.
        let mut datagram_sent = true;
        for s in &self.tx.frames {
            let (input, more) = match s.origin {
                Origin::Part => continue,
                Origin::Generated => (None, false),
                Origin::Received { input, more } => (Some(input), more),
            };
            let (sent, len) = match s.bytes {
                Bytes::Copied { start, len } => {
                    let frame = &self.tx.bytes[start..start + len];
                    (self.ifs[s.out].dev.send(frame).is_ok(), len)
                }
                // Only a received frame is ever lent.
                Bytes::Lent(loan) => (
                    send_loan(&mut self.ifs, s.out, input.unwrap_or(s.out), loan),
                    loan.len as usize,
                ),
            };
            if sent {
                self.ifs[s.out].counters.count_tx(len);
            }
            match input {
                Some(_) if more => datagram_sent &= sent,
                Some(input) => {
                    // The datagram's last (or only) frame: it counts now, as a whole.
                    let whole = datagram_sent && sent;
                    datagram_sent = true;
                    let counters = &mut self.ifs[input].counters;
                    if !whole {
                        counters.drops.add(DropReason::TxRingFull, 1);
                        self.output_full[input] = true;
                        self.full_out = Some(s.out);
                    } else {
                        counters.forwarded += 1;
                        counters.lent += u64::from(matches!(s.bytes, Bytes::Lent(_)));
                    }
                }
                None if sent => self.ifs[s.out].counters.generated += 1,
                None => self.ifs[s.out].counters.generated_dropped += 1,
            }
            let waiting = self.unflushed[s.out].get_or_insert(0);
            *waiting += usize::from(sent);
            if *waiting >= self.caps[s.out].tx_batch {
                self.ifs[s.out].dev.flush();
                self.unflushed[s.out] = None;
            }
        }
        // Transmit drops the devices count are folded by `sync_hw_drops` (the executor's
        // status timer), not here: reading them may cost a system call per batch.
        self.tx.frames.clear();
        self.tx.bytes.clear();
    }

    /// Whether some output was given frames since its last flush.
    pub(super) fn waits_for_flush(&self) -> bool {
        self.unflushed.iter().any(Option::is_some)
    }

    /// Flushes every output given frames since its last flush (also one whose `send`
    /// refused them: a flush is what makes room).
    pub(super) fn flush_waiting(&mut self) {
        for (iface, unflushed) in self.ifs.iter_mut().zip(self.unflushed.iter_mut()) {
            if unflushed.take().is_some() {
                iface.dev.flush();
            }
        }
    }

    /// Folds the drops devices counted on their own into the interface counters.
    pub(super) fn fold_hw_drops(&mut self, i: usize) {
        let iface = &mut self.ifs[i];
        let now = iface.dev.hw_stats();
        let seen = &mut iface.hw_seen;
        let counters = &mut iface.counters;
        // A reopened device starts its totals again from zero.
        let new = |total: u64, seen: u64| total.saturating_sub(seen);
        // Named one by one, so that a new kind of device-counted drop cannot be left out.
        let HwStats {
            rx_ring_full,
            rx_no_buffer,
            rx_fault,
            tx_drops,
        } = now;
        counters
            .drops
            .add(DropReason::RxRingFull, new(rx_ring_full, seen.rx_ring_full));
        counters
            .drops
            .add(DropReason::RxNoBuffer, new(rx_no_buffer, seen.rx_no_buffer));
        counters
            .drops
            .add(DropReason::FaultInjected, new(rx_fault, seen.rx_fault));
        for r in TxDrop::ALL {
            counters
                .tx_drops
                .add(r, new(tx_drops.get(r), seen.tx_drops.get(r)));
        }
        *seen = now;
    }
}

/// Sends `loan` on interface `out`, or gives it back to its lender `input` when the output
/// refuses it; returns whether it was sent.
fn send_loan<D: Device>(ifs: &mut [Interface<D>], out: usize, input: usize, loan: Loan) -> bool {
    let sent = ifs[out]
        .dev
        .lending()
        .is_some_and(|output| output.send_loan(loan).is_ok());
    if !sent {
        if let Some(lender) = ifs[input].dev.lending() {
            lender.give_back(loan);
        }
    }
    sent
}

/// A frame the stage has processed: where it came from, its bytes, and its loan if its
/// device lent it.
pub(super) struct Received<'a> {
    pub input: usize,
    pub frame: &'a [u8],
    pub loan: Option<Loan>,
}

/// Counts a verdict; forwarded and local frames are staged for transmission and
/// counted once the output device took them. A frame forwarded to an output of its
/// loan's pool is staged as the loan; returns whether the loan was kept (else the
/// device recycles the buffer as usual).
pub(super) fn apply(
    verdict: Verdict,
    rx: Received<'_>,
    counters: &mut IfCounters,
    links: &[LinkState],
    caps: &[Facts],
    tx: &mut TxStaging,
) -> bool {
    let Received { input, frame, loan } = rx;
    let received = Origin::Received { input, more: false };
    let link_up = |out: usize| links.get(out) == Some(&LinkState::Up);
    let parts = match verdict {
        Verdict::ForwardEmitted { out } if link_up(out) => tx.settle_parts(Some(input)),
        _ => tx.settle_parts(None),
    };
    match verdict {
        Verdict::Forward { out } | Verdict::ForwardEmitted { out } if !link_up(out) => {
            counters.drops.add(DropReason::LinkDown, 1)
        }
        Verdict::Forward { out } => match loan {
            Some(loan) if caps.get(out).and_then(|c| c.pool) == Some(loan.pool) => {
                tx.push_loan(out, received, loan);
                return true;
            }
            _ => tx.push(out, received, frame),
        },
        // Counted when the parts are sent; a datagram that became no frame at all was
        // used up by the stage.
        Verdict::ForwardEmitted { .. } if parts == 0 => counters.consumed += 1,
        Verdict::ForwardEmitted { .. } => {}
        Verdict::Local => counters.local += 1,
        Verdict::Consumed => counters.consumed += 1,
        Verdict::Kernel => counters.to_kernel += 1,
        Verdict::Drop(reason) => counters.drops.add(reason, 1),
    }
    false
}
