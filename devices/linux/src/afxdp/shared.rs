//! A UMEM shared by the AF_XDP sockets of several interfaces, so that a frame received on
//! one leaves on another without a copy in user space (the module doc of [`super`]).

use std::io;
use std::sync::Arc;

use polld_core::PoolId;

use super::umem::UmemFrames;
use super::{AfXdp, AfXdpConfig};
use crate::xdp::{self, XdpError};

/// A UMEM the AF_XDP sockets of several interfaces share, so that a frame received on one
/// leaves on another without a copy in user space (see the module doc). Open its members
/// with [`AfXdp::open_shared`]; they must be polled by one thread (one dataplane).
#[derive(Clone)]
pub struct SharedUmem(Arc<UmemFrames>);

impl SharedUmem {
    /// Memory for `members` sockets of `config`'s frame and ring sizes; the kernel
    /// registers it when the first member binds.
    pub fn new(members: u32, config: &AfXdpConfig) -> xdp::Result<SharedUmem> {
        UmemFrames::new(members.max(1), true, config).map(SharedUmem)
    }

    /// The pool its members lend from.
    pub fn pool(&self) -> PoolId {
        self.0.pool
    }
}

impl AfXdp {
    /// Like [`open`](Self::open), with the socket bound to `umem`, which it shares with
    /// the other members: frames received on any of them can be sent on this one without
    /// a copy ([`Lending`]). `config`'s frame and ring sizes must be `umem`'s.
    pub fn open_shared(
        ifname: &str,
        queue: u32,
        config: &AfXdpConfig,
        umem: &SharedUmem,
    ) -> xdp::Result<AfXdp> {
        let sizes = &umem.0.sizes;
        if (config.frame_size, config.rx_frames, config.tx_frames)
            != (sizes.frame_size, sizes.rx_frames, sizes.tx_frames)
        {
            return Err(XdpError::Os {
                action: format!("opening `{ifname}` on a shared AF_XDP UMEM"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the sockets of a shared UMEM need the same frame size and ring sizes",
                ),
            });
        }
        let mut sockets = AfXdp::open_with(ifname, &[queue], config, || Ok(umem.0.clone()))?;
        Ok(sockets.remove(0))
    }
}
