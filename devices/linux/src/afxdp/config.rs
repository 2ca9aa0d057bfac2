//! What an AF_XDP socket is opened with: its frame and ring sizes, where the redirect
//! program runs, copy or zero-copy, and preferred busy polling.

use std::io;

use crate::busy_poll::BusyPoll;
use crate::xdp::{self, XdpError, XdpMode};

/// Whether the socket shares frames with the driver (zero-copy) or the kernel copies them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BindMode {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail with [`XdpError::ZeroCopyUnsupported`].
    ZeroCopy,
    /// Copy mode even where zero-copy would work.
    Copy,
}

/// Sizes and modes of an AF_XDP socket.
#[derive(Clone, Debug)]
pub struct AfXdpConfig {
    /// Bytes per UMEM frame: 2048 or 4096. In copy mode the kernel reserves the first 256
    /// bytes of a receive frame as XDP headroom, so 2048 carries frames up to 1792 bytes.
    pub frame_size: u32,
    /// Receive frames; also the size of the fill and rx rings. A power of two.
    pub rx_frames: u32,
    /// Transmit frames; also the size of the tx and completion rings. A power of two.
    pub tx_frames: u32,
    /// Where the redirect program runs.
    pub xdp_mode: XdpMode,
    pub bind_mode: BindMode,
    /// What polld never forwards goes to the kernel instead of the socket, so the host
    /// stays reachable on the interface and keeps its neighbours: IPv4, IPv6 and ARP for
    /// the host's own addresses (followed as they change), multicast, ICMPv6 neighbour
    /// discovery and every ethertype but IPv4, IPv6 and ARP. The other frames, the ones
    /// polld forwards, go to the socket, and the kernel never sees them.
    pub pass_local: bool,
    /// Preferred busy polling where the socket's queue has a NAPI id (see
    /// [`crate::busy_poll`]), the socket of the `k`-th queue opened attached to
    /// [`BusyPoll::queue`]`(k)`; `None` leaves the receive work where the kernel puts it.
    pub busy_poll: Option<BusyPoll>,
}

impl Default for AfXdpConfig {
    fn default() -> Self {
        AfXdpConfig {
            frame_size: 2048,
            rx_frames: 2048,
            tx_frames: 2048,
            xdp_mode: XdpMode::Auto,
            bind_mode: BindMode::Auto,
            pass_local: false,
            busy_poll: None,
        }
    }
}

impl AfXdpConfig {
    pub(super) fn validate(&self) -> xdp::Result<()> {
        let bad = |what: String| {
            Err(XdpError::Os {
                action: "checking the AF_XDP configuration".into(),
                source: io::Error::new(io::ErrorKind::InvalidInput, what),
            })
        };
        if !matches!(self.frame_size, 2048 | 4096) {
            return bad(format!(
                "frame size {} must be 2048 or 4096 bytes",
                self.frame_size
            ));
        }
        for (name, frames) in [("rx", self.rx_frames), ("tx", self.tx_frames)] {
            if !frames.is_power_of_two() || !(64..=1 << 16).contains(&frames) {
                return bad(format!(
                    "{name} frame count {frames} must be a power of two from 64 to 65536"
                ));
            }
        }
        Ok(())
    }
}
