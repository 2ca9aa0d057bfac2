//! The IP input queue (FreeBSD's `ipintrq`, drained by the netisr): with
//! `net.inet.ip.fastforwarding=0` received frames wait here, bounded by
//! `net.inet.ip.intr_queue_maxlen`, and are processed at lower priority.

use std::collections::VecDeque;

use crate::device::Device;
use crate::stage::PacketStage;

use super::transmit::{apply, Received};
use super::Devices;

/// Default `net.inet.ip.intr_queue_maxlen` (FreeBSD's `IFQ_MAXLEN`).
pub const INTR_QUEUE_MAXLEN: usize = 50;

/// A frame waiting in the IP input queue.
struct Queued {
    input: usize,
    frame: Vec<u8>,
}

/// The bounded queue, with the buffers of frames already processed kept for reuse.
pub(super) struct InputQueue {
    frames: VecDeque<Queued>,
    maxlen: usize,
    spare: Vec<Vec<u8>>,
}

impl InputQueue {
    pub(super) fn new() -> InputQueue {
        InputQueue {
            frames: VecDeque::new(),
            maxlen: INTR_QUEUE_MAXLEN,
            spare: Vec::new(),
        }
    }

    /// Copies `frame`, received on `input`, to the tail; false if the queue is full.
    pub(super) fn enqueue(&mut self, input: usize, frame: &[u8]) -> bool {
        if self.frames.len() >= self.maxlen {
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(frame);
        self.frames.push_back(Queued { input, frame: buf });
        true
    }

    pub(super) fn len(&self) -> usize {
        self.frames.len()
    }

    pub(super) fn maxlen(&self) -> usize {
        self.maxlen
    }

    pub(super) fn set_maxlen(&mut self, maxlen: usize) {
        self.maxlen = maxlen;
    }
}

impl<D: Device, S: PacketStage> Devices<D, S> {
    /// Processes up to `max` frames from the IP input queue (the netisr's protocol work).
    pub(super) fn drain_queue(&mut self, max: usize) -> u64 {
        let mut n = 0;
        while n < max {
            let Some(mut q) = self.queue.frames.pop_front() else {
                break;
            };
            let counters = &mut self.ifs[q.input].counters;
            counters.queued -= 1;
            let verdict = self.stage.process(q.input, &mut q.frame, &mut self.tx);
            // A queued frame is a copy: nothing is lent.
            let rx = Received {
                input: q.input,
                frame: &q.frame,
                loan: None,
            };
            apply(verdict, rx, counters, &self.links, &self.caps, &mut self.tx);
            self.queue.spare.push(q.frame);
            n += 1;
        }
        self.transmit();
        n as u64
    }
}
