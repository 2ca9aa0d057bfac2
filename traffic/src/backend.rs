//! The device backends gen and sink use: the same ones polld forwards with.
//!
//! `gen` needs a little more than [`Device`] offers: a backend may accept a frame and
//! drop it later (the kernel's ENOBUFS when the veth ring is full), or keep it staged
//! after the kernel pushed back (EAGAIN from a full socket send buffer). [`TxDevice`]
//! reads those counters from the backend so that the generator reports them.

use polld_core::Device;
use polld_dev::afpacket::{AfPacket, AfPacketConfig};
use polld_dev::afxdp::{AfXdp, AfXdpConfig};
use polld_dev::xdp::{CountProgram, XdpLink, XdpMode};

use crate::Error;

/// A device `gen` can send with, with the transmit counters `Device` does not carry.
pub trait TxDevice: Device {
    /// Frames `send` accepted that the device then dropped (ENOBUFS, too long, ...).
    fn tx_dropped(&mut self) -> u64;
    /// Times the kernel pushed back (EAGAIN) and frames stayed staged for the next flush.
    fn tx_pushbacks(&mut self) -> u64;
    /// Frames accepted and not yet handed to (or completed by) the kernel.
    fn tx_pending(&mut self) -> u64;
}

impl TxDevice for AfPacket {
    fn tx_dropped(&mut self) -> u64 {
        self.tx_stats().dropped()
    }

    fn tx_pushbacks(&mut self) -> u64 {
        self.tx_stats().pushbacks
    }

    fn tx_pending(&mut self) -> u64 {
        self.tx_stats().pending
    }
}

impl TxDevice for AfXdp {
    fn tx_dropped(&mut self) -> u64 {
        self.stats().map_or(0, |s| s.tx_too_long)
    }

    /// AF_XDP pushes back only by a full tx ring, which `send` reports as `TxFull`.
    fn tx_pushbacks(&mut self) -> u64 {
        0
    }

    fn tx_pending(&mut self) -> u64 {
        self.stats()
            .map_or(0, |s| s.tx_frames.saturating_sub(s.tx_completed))
    }
}

/// Backends `polld gen` can send with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxBackend {
    /// AF_PACKET raw socket, `sendmmsg` per batch, qdisc bypassed.
    #[value(name = "af_packet", alias = "af-packet")]
    AfPacket,
    /// AF_XDP socket (copy mode on veth). It attaches polld's redirect program to the
    /// interface, so frames arriving there go to this socket while it runs.
    #[value(name = "af_xdp", alias = "af-xdp")]
    AfXdp,
}

impl TxBackend {
    /// The faster sender on veth as measured by `examples/gen_vs_reference.rs`.
    pub const DEFAULT: TxBackend = TxBackend::AfXdp;

    pub fn name(self) -> &'static str {
        match self {
            TxBackend::AfPacket => "af_packet",
            TxBackend::AfXdp => "af_xdp",
        }
    }

    /// Opens `interface` in the caller's network namespace.
    pub fn open(self, interface: &str) -> Result<Box<dyn TxDevice>, Error> {
        let failed = |e: &dyn std::fmt::Display| {
            Error(format!("cannot open {} on `{interface}`: {e}", self.name()))
        };
        Ok(match self {
            // A generator wants the most frames in flight: the kernel's default buffer.
            TxBackend::AfPacket => Box::new(
                AfPacket::open(
                    interface,
                    AfPacketConfig {
                        tx_send_buffer: None,
                        ..AfPacketConfig::default()
                    },
                )
                .map_err(|e| failed(&e))?,
            ),
            TxBackend::AfXdp => Box::new(
                AfXdp::open(interface, 0, &AfXdpConfig::default()).map_err(|e| failed(&e))?,
            ),
        })
    }
}

/// Backends `polld sink` can receive with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxBackend {
    /// AF_PACKET TPACKET_V3 ring.
    #[value(name = "af_packet", alias = "af-packet")]
    AfPacket,
    /// AF_XDP socket on queue 0.
    #[value(name = "af_xdp", alias = "af-xdp")]
    AfXdp,
    /// An XDP program that counts and drops; user space only reads its counters.
    #[value(name = "xdp-count", alias = "xdp_count")]
    XdpCount,
}

impl RxBackend {
    pub const DEFAULT: RxBackend = RxBackend::AfPacket;

    pub fn name(self) -> &'static str {
        match self {
            RxBackend::AfPacket => "af_packet",
            RxBackend::AfXdp => "af_xdp",
            RxBackend::XdpCount => "xdp-count",
        }
    }

    /// How late this backend may hand a frame over at low rates: the TPACKET_V3 block
    /// retire timeout of [`sink_ring`] on AF_PACKET; AF_XDP hands each frame over as the
    /// kernel receives it.
    pub fn latency_floor_ns(self) -> u64 {
        match self {
            RxBackend::AfPacket => u64::from(sink_ring().retire_timeout_ms) * 1_000_000,
            RxBackend::AfXdp | RxBackend::XdpCount => 0,
        }
    }

    /// Opens `interface` as a [`Device`]; `None` for `xdp-count`, which is no device
    /// (see [`XdpCounter`]).
    pub fn open(self, interface: &str) -> Result<Option<Box<dyn Device>>, Error> {
        let failed = |e: &dyn std::fmt::Display| {
            Error(format!("cannot open {} on `{interface}`: {e}", self.name()))
        };
        Ok(match self {
            RxBackend::AfPacket => Some(Box::new(
                AfPacket::open(interface, sink_ring()).map_err(|e| failed(&e))?,
            )),
            RxBackend::AfXdp => Some(Box::new(
                AfXdp::open(interface, 0, &sink_umem()).map_err(|e| failed(&e))?,
            )),
            RxBackend::XdpCount => None,
        })
    }
}

/// The sink's TPACKET_V3 ring: more, smaller blocks than polld's default.
///
/// The kernel retires a block when it is full or after the 1 ms retire timeout, so at
/// low rates every block holds about 1 ms of traffic and the ring buffers
/// `block_count` ms: 64 ms with the default 64 blocks, which a sink preempted on a busy
/// machine overruns. 512 blocks of 16 KiB (the same 8 MiB as 128 default blocks) buffer
/// half a second at low rates and still take over a hundred 60-byte frames per block.
fn sink_ring() -> AfPacketConfig {
    AfPacketConfig {
        block_size: 16 * 1024,
        block_count: 512,
        ..AfPacketConfig::default()
    }
}

/// The sink's AF_XDP socket: a deep receive ring, since a preempted sink loses frames
/// once the ring is full (2048 frames last 7 ms at 300 kpps, 16384 last 55 ms), and the
/// smallest transmit pool, since the sink never sends.
fn sink_umem() -> AfXdpConfig {
    AfXdpConfig {
        rx_frames: 16384,
        tx_frames: 64,
        ..AfXdpConfig::default()
    }
}

/// The `xdp-count` sink: an XDP program on the interface counts and drops every frame.
pub struct XdpCounter {
    program: CountProgram,
    /// Keeps the program attached; detached on drop.
    _link: XdpLink,
}

impl XdpCounter {
    /// Attaches the count-and-drop program to `interface` (native XDP where possible).
    pub fn attach(interface: &str) -> Result<XdpCounter, Error> {
        let failed = |e: &dyn std::fmt::Display| {
            Error(format!("cannot count with XDP on `{interface}`: {e}"))
        };
        let program = CountProgram::load().map_err(|e| failed(&e))?;
        let link = program
            .attach(interface, XdpMode::Auto)
            .map_err(|e| failed(&e))?;
        Ok(XdpCounter {
            program,
            _link: link,
        })
    }

    /// Frames and bytes counted since the program was loaded.
    pub fn counts(&self) -> Result<(u64, u64), Error> {
        let counts = self
            .program
            .counts()
            .map_err(|e| Error(format!("cannot read the XDP counters: {e}")))?;
        Ok((counts.packets, counts.bytes))
    }
}
