//! Interface names, indexes and link flags, shared by the AF_PACKET and TAP devices.

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use polld_core::device::LinkState;

use crate::error::OpenError;

/// A validated interface name, ready for `ifreq`.
#[derive(Clone, Debug)]
pub(crate) struct IfName {
    text: String,
    c_name: CString,
}

impl IfName {
    pub(crate) fn new(name: &str) -> Result<IfName, OpenError> {
        let invalid = |reason| OpenError::InvalidName {
            interface: name.to_string(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if name.len() >= libc::IFNAMSIZ {
            return Err(invalid("longer than 15 bytes"));
        }
        if name
            .bytes()
            .any(|b| b == b'/' || b == 0 || b.is_ascii_whitespace())
        {
            return Err(invalid("contains '/', a NUL or whitespace"));
        }
        let c_name = CString::new(name).map_err(|_| invalid("contains a NUL"))?;
        Ok(IfName {
            text: name.to_string(),
            c_name,
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// An `ifreq` with only the name filled in.
    pub(crate) fn ifreq(&self) -> libc::ifreq {
        // SAFETY: ifreq is plain old data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(self.c_name.as_bytes()) {
            *dst = *src as libc::c_char;
        }
        req
    }
}

/// The interface's index, looked up with SIOCGIFINDEX on socket `fd`: in the socket's
/// network namespace, which may differ from the calling thread's.
pub(crate) fn index(fd: RawFd, name: &IfName) -> Option<u32> {
    let mut req = name.ifreq();
    // SAFETY: SIOCGIFINDEX reads the name from and writes the index into `req`.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFINDEX, &mut req) };
    if rc != 0 {
        return None;
    }
    // SAFETY: on success the kernel filled the ifindex member of the union.
    Some(unsafe { req.ifr_ifru.ifru_ifindex } as u32)
}

/// Reads the interface flags with SIOCGIFFLAGS on any socket `fd`: up and running is
/// [`LinkState::Up`], a missing interface [`LinkState::Gone`], anything else `Down`.
pub(crate) fn link_state(fd: RawFd, name: &IfName) -> LinkState {
    let mut req = name.ifreq();
    // SAFETY: SIOCGIFFLAGS reads the name from and writes the flags into `req`.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) };
    if rc != 0 {
        return match io::Error::last_os_error().raw_os_error() {
            Some(libc::ENODEV) | Some(libc::ENXIO) => LinkState::Gone,
            _ => LinkState::Down,
        };
    }
    // SAFETY: the kernel filled the flags member of the union.
    let flags = i32::from(unsafe { req.ifr_ifru.ifru_flags });
    let up_and_running = libc::IFF_UP | libc::IFF_RUNNING;
    if flags & up_and_running == up_and_running {
        LinkState::Up
    } else {
        LinkState::Down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_with_the_reason() {
        assert!(IfName::new("veth1").is_ok());
        for bad in ["", "a-name-far-too-long", "a/b", "a b"] {
            let err = IfName::new(bad).unwrap_err().to_string();
            assert!(err.contains("not a valid interface name"), "{bad}: {err}");
        }
    }

    #[test]
    fn loopback_is_up_and_a_missing_name_is_gone() {
        // SAFETY: plain socket creation; closed below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0);
        assert_eq!(link_state(fd, &IfName::new("lo").unwrap()), LinkState::Up);
        let missing = IfName::new("polld-nosuch0").unwrap();
        assert_eq!(link_state(fd, &missing), LinkState::Gone);
        assert_eq!(index(fd, &missing), None);
        assert_eq!(index(fd, &IfName::new("lo").unwrap()), Some(1));
        // SAFETY: fd is ours and not used after this.
        unsafe { libc::close(fd) };
    }
}
