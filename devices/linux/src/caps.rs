//! The calling thread's capability sets, read and written with capget/capset (version 3,
//! 64 bits each). Capabilities are per thread: a change here touches no other thread.
//! polld's privilege checks and drop, and the tests that take one capability away, use it.

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets};

/// Effective, permitted and inheritable sets, one bit per capability number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCaps {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
}

/// The calling thread's capabilities.
pub fn get() -> io::Result<ThreadCaps> {
    let sets = rustix::thread::capabilities(None)?;
    Ok(ThreadCaps {
        effective: sets.effective.bits(),
        permitted: sets.permitted.bits(),
        inheritable: sets.inheritable.bits(),
    })
}

/// Replaces the calling thread's capabilities (only ever lowering them without
/// CAP_SETPCAP).
pub fn set(caps: &ThreadCaps) -> io::Result<()> {
    let set = CapabilitySet::from_bits_retain;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: set(caps.effective),
            permitted: set(caps.permitted),
            inheritable: set(caps.inheritable),
        },
    )?;
    Ok(())
}
