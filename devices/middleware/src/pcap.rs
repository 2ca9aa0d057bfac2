//! A device that records its traffic in the classic pcap format (the libpcap 2.4 file
//! tcpdump and Wireshark read): one global header, then one record per frame, both
//! directions in one file, in the order the device saw them.
//!
//! A received frame is recorded as the device handed it up, before the packet stage
//! rewrites it; a transmitted frame is recorded once the inner device's `send` accepted
//! it (a frame refused with [`TxFull`] never left). A write error stops the recording and
//! is kept for [`PcapWriter::error`]; the device itself keeps running.

use std::io::{self, Write};

use polld_core::device::{Device, Lending, Loan, TxFull, Wrapper};

/// The classic pcap magic, microsecond timestamps, written in native byte order (readers
/// detect the order from the magic).
const MAGIC: u32 = 0xa1b2_c3d4;
/// Longest frame recorded whole; longer ones are cut here (`orig_len` keeps the length).
pub const SNAPLEN: u32 = 65_535;
/// LINKTYPE_ETHERNET.
const LINKTYPE_ETHERNET: u32 = 1;

/// What a [`PcapWriter`] recorded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapStats {
    /// Received frames recorded.
    pub rx_records: u64,
    /// Transmitted frames recorded.
    pub tx_records: u64,
}

/// Wraps a device and records its frames to `out`; `clock` gives the time in nanoseconds
/// since the Unix epoch (or any epoch the reader should see: virtual time in the simulator).
///
/// A device that lends ([`Lending`]) still lends through the writer: a lent frame is
/// recorded as it is received, and a loan as the inner device accepts it.
pub struct PcapWriter<D, W> {
    inner: D,
    recorder: Recorder<W>,
}

/// The writer's side of a [`PcapWriter`], apart from the device so that the two can be
/// borrowed together.
struct Recorder<W> {
    out: W,
    clock: Box<dyn FnMut() -> u64>,
    stats: PcapStats,
    error: Option<io::Error>,
}

impl<D: Device, W: Write> PcapWriter<D, W> {
    /// Writes the pcap global header now; fails only if that write fails.
    pub fn new(
        inner: D,
        mut out: W,
        clock: Box<dyn FnMut() -> u64>,
    ) -> io::Result<PcapWriter<D, W>> {
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&MAGIC.to_ne_bytes());
        header.extend_from_slice(&2u16.to_ne_bytes());
        header.extend_from_slice(&4u16.to_ne_bytes());
        header.extend_from_slice(&0i32.to_ne_bytes()); // thiszone: UTC
        header.extend_from_slice(&0u32.to_ne_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_ne_bytes());
        header.extend_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter {
            inner,
            recorder: Recorder {
                out,
                clock,
                stats: PcapStats::default(),
                error: None,
            },
        })
    }

    pub fn stats(&self) -> PcapStats {
        self.recorder.stats
    }

    /// The write error that stopped the recording, if one did.
    pub fn error(&self) -> Option<&io::Error> {
        self.recorder.error.as_ref()
    }

    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, for what the [`Device`] trait does not reach.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// Flushes the writer and gives back the device and the writer.
    pub fn into_parts(mut self) -> (D, W) {
        let _ = self.recorder.out.flush();
        (self.inner, self.recorder.out)
    }
}

impl<W: Write> Recorder<W> {
    /// Records a received frame.
    fn rx(&mut self, frame: &[u8]) {
        if self.record(frame) {
            self.stats.rx_records += 1;
        }
    }

    /// Records a frame the device accepted for transmission.
    fn tx(&mut self, frame: &[u8]) {
        if self.record(frame) {
            self.stats.tx_records += 1;
        }
    }

    /// Appends one record unless an earlier write failed; returns whether it did.
    fn record(&mut self, frame: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        let now_ns = (self.clock)();
        let caught = frame.len().min(SNAPLEN as usize);
        let mut header = [0u8; 16];
        header[0..4].copy_from_slice(&((now_ns / 1_000_000_000) as u32).to_ne_bytes());
        header[4..8].copy_from_slice(&((now_ns % 1_000_000_000 / 1_000) as u32).to_ne_bytes());
        header[8..12].copy_from_slice(&(caught as u32).to_ne_bytes());
        header[12..16].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        let out = &mut self.out;
        match out
            .write_all(&header)
            .and_then(|()| out.write_all(&frame[..caught]))
        {
            Ok(()) => true,
            Err(e) => {
                self.error = Some(e);
                false
            }
        }
    }

    /// Flushes the writer, so that a reader sees whole batches.
    fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }
}

impl<D: Device, W: Write> Wrapper for PcapWriter<D, W> {
    type Inner = D;

    fn inner(&self) -> &D {
        &self.inner
    }
    fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    fn receive(this: &mut Self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let PcapWriter { inner, recorder } = this;
        inner.receive(budget, &mut |frame: &mut [u8]| {
            recorder.rx(frame);
            rx(frame)
        })
    }

    fn send(this: &mut Self, frame: &[u8]) -> Result<(), TxFull> {
        this.inner.send(frame)?;
        this.recorder.tx(frame);
        Ok(())
    }

    /// Flushes the device, and the writer so that a reader sees whole batches.
    fn flush(this: &mut Self) {
        this.inner.flush();
        this.recorder.flush();
    }

    /// The writer itself, if the inner device lends: loans are recorded too.
    fn lending(this: &mut Self) -> Option<&mut dyn Lending> {
        this.inner.lending()?;
        Some(this)
    }
}

/// The inner device's [`Lending`], recorded. Reached only while the inner device lends
/// ([`Wrapper::lending`] above); should it stop (a wrapper under this one swapped its
/// device), a receive hands nothing and a loan is refused, as by a full ring.
impl<D: Device, W: Write> Lending for PcapWriter<D, W> {
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize {
        let PcapWriter { inner, recorder } = self;
        let Some(lender) = inner.lending() else {
            return 0;
        };
        lender.receive_lending(budget, &mut |frame, loan| {
            recorder.rx(frame);
            rx(frame, loan)
        })
    }

    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull> {
        let PcapWriter { inner, recorder } = self;
        let lender = inner.lending().ok_or(TxFull)?;
        lender.send_loan(loan)?;
        lender.inspect_loan(loan, &mut |frame| recorder.tx(frame));
        Ok(())
    }

    fn give_back(&mut self, loan: Loan) {
        if let Some(lender) = self.inner.lending() {
            lender.give_back(loan);
        }
    }

    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8])) {
        if let Some(lender) = self.inner.lending() {
            lender.inspect_loan(loan, look);
        }
    }
}
