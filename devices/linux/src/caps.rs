//! The calling thread's capability sets, read and written with capget/capset (version 3,
//! 64 bits each). Capabilities are per thread: a change here touches no other thread.
//! polld's privilege checks and drop, and the tests that take one capability away, use it.

use std::io;

/// Effective, permitted and inheritable sets, one bit per capability number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadCaps {
    pub effective: u64,
    pub permitted: u64,
    pub inheritable: u64,
}

#[repr(C)]
struct Header {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Data {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

const VERSION_3: u32 = 0x2008_0522;

fn header() -> Header {
    Header {
        version: VERSION_3,
        pid: 0,
    }
}

/// The calling thread's capabilities.
pub fn get() -> io::Result<ThreadCaps> {
    let mut data = [Data::default(); 2];
    // SAFETY: a v3 header and two data structs, as capget(2) expects.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header(), data.as_mut_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let join = |f: fn(&Data) -> u32| u64::from(f(&data[0])) | u64::from(f(&data[1])) << 32;
    Ok(ThreadCaps {
        effective: join(|d| d.effective),
        permitted: join(|d| d.permitted),
        inheritable: join(|d| d.inheritable),
    })
}

/// Replaces the calling thread's capabilities (only ever lowering them without
/// CAP_SETPCAP).
pub fn set(caps: &ThreadCaps) -> io::Result<()> {
    let half = |shift: u32| Data {
        effective: (caps.effective >> shift) as u32,
        permitted: (caps.permitted >> shift) as u32,
        inheritable: (caps.inheritable >> shift) as u32,
    };
    let data = [half(0), half(32)];
    // SAFETY: a v3 header and two data structs, as capset(2) expects.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header(), data.as_ptr()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
