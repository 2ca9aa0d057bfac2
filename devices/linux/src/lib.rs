//! polld-dev: real devices for polld (AF_PACKET TPACKET_V3, AF_XDP, TAP) and the
//! network-namespace helpers the tests and the testbed use.

pub mod afpacket;
mod afpacket_rx;
mod afpacket_tx;
pub mod afxdp;
pub mod busy_poll;
pub mod caps;
pub mod clock;
pub mod error;
pub mod iface;
pub mod irq;
pub mod irq_defer;
pub mod kernel_rx;
pub mod kernel_tables;
pub mod napi;
pub mod net_dev;
pub mod netns;
mod prefetch;
pub mod raw_ip;
pub mod sys;
pub mod tap;
pub mod tx_wakeup;
pub mod xdp;
