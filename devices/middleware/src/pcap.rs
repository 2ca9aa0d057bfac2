//! A device that records its traffic in the classic pcap format (the libpcap 2.4 file
//! tcpdump and Wireshark read): one global header, then one record per frame, both
//! directions in one file, in the order the device saw them.
//!
//! A received frame is recorded as the device handed it up, before the packet stage
//! rewrites it; a transmitted frame is recorded once the inner device's `send` accepted
//! it (a frame refused with [`TxFull`] never left). A write error stops the recording and
//! is kept for [`PcapWriter::error`]; the device itself keeps running.

use std::io::{self, Write};

use polld_core::device::{Device, HwStats, TxFull};

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
pub struct PcapWriter<D, W> {
    inner: D,
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
            out,
            clock,
            stats: PcapStats::default(),
            error: None,
        })
    }

    pub fn stats(&self) -> PcapStats {
        self.stats
    }

    /// The write error that stopped the recording, if one did.
    pub fn error(&self) -> Option<&io::Error> {
        self.error.as_ref()
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
        let _ = self.out.flush();
        (self.inner, self.out)
    }
}

/// Appends one record to `out` unless an earlier write failed; returns whether it did.
fn record(out: &mut dyn Write, error: &mut Option<io::Error>, now_ns: u64, frame: &[u8]) -> bool {
    if error.is_some() {
        return false;
    }
    let caught = frame.len().min(SNAPLEN as usize);
    let mut header = [0u8; 16];
    header[0..4].copy_from_slice(&((now_ns / 1_000_000_000) as u32).to_ne_bytes());
    header[4..8].copy_from_slice(&((now_ns % 1_000_000_000 / 1_000) as u32).to_ne_bytes());
    header[8..12].copy_from_slice(&(caught as u32).to_ne_bytes());
    header[12..16].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
    match out
        .write_all(&header)
        .and_then(|()| out.write_all(&frame[..caught]))
    {
        Ok(()) => true,
        Err(e) => {
            *error = Some(e);
            false
        }
    }
}

impl<D: Device, W: Write> Device for PcapWriter<D, W> {
    pass_through_to_inner!();

    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        let PcapWriter {
            inner,
            out,
            clock,
            stats,
            error,
        } = self;
        inner.receive(budget, &mut |frame: &mut [u8]| {
            if record(out, error, clock(), frame) {
                stats.rx_records += 1;
            }
            rx(frame)
        })
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        self.inner.send(frame)?;
        let now = (self.clock)();
        if record(&mut self.out, &mut self.error, now, frame) {
            self.stats.tx_records += 1;
        }
        Ok(())
    }

    /// Flushes the device, and the writer so that a reader sees whole batches.
    fn flush(&mut self) {
        self.inner.flush();
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }

    fn hw_stats(&mut self) -> HwStats {
        self.inner.hw_stats()
    }
}
