//! What the two binaries of this package share. `polld` is the daemon and its operator
//! tools (run, ctl, ifconfig, stat, man, completions): the binary a unit starts with
//! capabilities. `polld-lab` is the lab (simulator, traffic generator and sink, testbed,
//! demos, benches, the guest agent); the daemon contains none of its code and knows only
//! the names of its commands, to run it for them ([`lab`]).

#![forbid(unsafe_code)]

pub mod lab;
pub mod logging;
pub mod man;
