//! The device backends gen and sink can use: the same ones polld forwards with.

/// Backends `polld gen` can send with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxBackend {
    /// AF_PACKET raw socket.
    #[value(name = "af_packet", alias = "af-packet")]
    AfPacket,
    /// AF_XDP socket (copy mode on veth).
    #[value(name = "af_xdp", alias = "af-xdp")]
    AfXdp,
}

impl TxBackend {
    pub const DEFAULT: TxBackend = TxBackend::AfPacket;

    pub fn name(self) -> &'static str {
        match self {
            TxBackend::AfPacket => "af_packet",
            TxBackend::AfXdp => "af_xdp",
        }
    }
}

/// Backends `polld sink` can receive with.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxBackend {
    /// AF_PACKET TPACKET_V3 ring.
    #[value(name = "af_packet", alias = "af-packet")]
    AfPacket,
    /// AF_XDP socket.
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
}
