//! polld-dev: real devices for polld (AF_PACKET TPACKET_V3, AF_XDP, TAP) and the
//! network-namespace helpers the tests and the testbed use.

pub mod afxdp;
pub mod netns;
pub mod xdp;
