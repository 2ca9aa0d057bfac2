//! An interface's NAPI instances and their kernel threads, from the `netdev`
//! generic-netlink family (`NETDEV_CMD_NAPI_GET`, Linux 6.9+ for the thread pid).
//!
//! Threaded NAPI runs in a kthread named `napi/veth1-<id>`; the name does not say which
//! namespace's `veth1` it serves, and every testbed has a `veth1`. Asking the kernel from
//! inside the namespace gives the exact thread, so it can be pinned and reported.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::TestbedError;

/// One NAPI instance of an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Napi {
    pub id: u32,
    /// The kthread that polls it, when NAPI is threaded.
    pub pid: Option<u32>,
}

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_PID: u16 = 4;
const NLMSG_HEADER: usize = 16;
const GENL_HEADER: usize = 4;
const ATTR_HEADER: usize = 4;

/// The NAPI instances of interface `ifname` in namespace `ns` (none when the interface
/// has no NAPI enabled, as a veth without GRO or XDP).
pub fn napi_of(ns: &str, ifname: &str) -> Result<Vec<Napi>, TestbedError> {
    let ifname_owned = ifname.to_string();
    polld_dev::netns::in_netns(ns, move || query(&ifname_owned))?
        .map_err(|e| TestbedError::Failed(format!("NAPI of {ifname} in namespace {ns}: {e}")))
}

fn query(ifname: &str) -> Result<Vec<Napi>, String> {
    let name = std::ffi::CString::new(ifname).map_err(|_| "bad interface name".to_string())?;
    // SAFETY: if_nametoindex reads a NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(format!("no interface {ifname}"));
    }
    let socket = GenlSocket::open()?;
    let family = socket.family_id("netdev")?;
    let mut napis = Vec::new();
    let request = message(
        family,
        (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
        NETDEV_CMD_NAPI_GET,
        &[(NETDEV_A_NAPI_IFINDEX, &ifindex.to_ne_bytes())],
    );
    socket.exchange(&request, |attrs| {
        let mut id = None;
        let mut pid = None;
        for (kind, value) in attrs {
            match kind {
                NETDEV_A_NAPI_ID => id = u32_of(value),
                NETDEV_A_NAPI_PID => pid = u32_of(value),
                _ => {}
            }
        }
        if let Some(id) = id {
            napis.push(Napi { id, pid });
        }
    })?;
    Ok(napis)
}

fn u32_of(value: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A generic-netlink request: netlink header, genl header (version 1), attributes.
fn message(kind: u16, flags: u16, cmd: u8, attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut payload = vec![cmd, 1, 0, 0];
    for (attr, value) in attrs {
        let len = (ATTR_HEADER + value.len()) as u16;
        payload.extend_from_slice(&len.to_ne_bytes());
        payload.extend_from_slice(&attr.to_ne_bytes());
        payload.extend_from_slice(value);
        payload.resize(align4(payload.len()), 0);
    }
    let mut msg = Vec::with_capacity(NLMSG_HEADER + payload.len());
    msg.extend_from_slice(&((NLMSG_HEADER + payload.len()) as u32).to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    msg.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
    msg.extend_from_slice(&payload);
    msg
}

/// The attributes of one message body, as (type, value) pairs.
fn attributes(mut body: &[u8]) -> Vec<(u16, &[u8])> {
    let mut attrs = Vec::new();
    while body.len() >= ATTR_HEADER {
        let len = usize::from(u16::from_ne_bytes([body[0], body[1]]));
        let kind = u16::from_ne_bytes([body[2], body[3]]) & 0x3fff; // without NLA_F_ flags
        if len < ATTR_HEADER || len > body.len() {
            break;
        }
        attrs.push((kind, &body[ATTR_HEADER..len]));
        body = &body[align4(len).min(body.len())..];
    }
    attrs
}

struct GenlSocket(OwnedFd);

impl GenlSocket {
    fn open() -> Result<GenlSocket, String> {
        // SAFETY: plain socket(2); the fd is owned right away.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(format!(
                "generic netlink socket: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(GenlSocket(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn family_id(&self, name: &str) -> Result<u16, String> {
        let mut family_name = name.as_bytes().to_vec();
        family_name.push(0);
        let request = message(
            GENL_ID_CTRL,
            libc::NLM_F_REQUEST as u16,
            CTRL_CMD_GETFAMILY,
            &[(CTRL_ATTR_FAMILY_NAME, &family_name)],
        );
        let mut id = None;
        self.exchange(&request, |attrs| {
            for (kind, value) in attrs {
                if kind == CTRL_ATTR_FAMILY_ID && value.len() >= 2 {
                    id = Some(u16::from_ne_bytes([value[0], value[1]]));
                }
            }
        })
        .map_err(|e| format!("netlink family `{name}` (needs Linux 6.9 or later): {e}"))?;
        id.ok_or_else(|| format!("the kernel did not return the id of netlink family `{name}`"))
    }

    /// Sends `request` and passes the attributes of every reply message to `each`, until
    /// the end of the dump (or the single reply of a non-dump request).
    fn exchange(
        &self,
        request: &[u8],
        mut each: impl FnMut(Vec<(u16, &[u8])>),
    ) -> Result<(), String> {
        let fd = self.0.as_raw_fd();
        // SAFETY: request is a valid buffer; an unconnected netlink socket sends to the kernel.
        let sent = unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) };
        if sent < 0 {
            return Err(format!("netlink send: {}", std::io::Error::last_os_error()));
        }
        let is_dump = u16::from_ne_bytes([request[6], request[7]]) & libc::NLM_F_DUMP as u16 != 0;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buffer is writable for its length.
            let n = unsafe { libc::recv(fd, buffer.as_mut_ptr().cast(), buffer.len(), 0) };
            if n < 0 {
                return Err(format!("netlink recv: {}", std::io::Error::last_os_error()));
            }
            let mut rest = &buffer[..n as usize];
            while rest.len() >= NLMSG_HEADER {
                let len = u32::from_ne_bytes(rest[0..4].try_into().unwrap()) as usize;
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                if len < NLMSG_HEADER || len > rest.len() {
                    return Err("truncated netlink reply".to_string());
                }
                let body = &rest[NLMSG_HEADER..len];
                match kind as i32 {
                    libc::NLMSG_DONE => return Ok(()),
                    libc::NLMSG_ERROR => {
                        let code = body
                            .get(..4)
                            .map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap()));
                        if code != 0 {
                            return Err(std::io::Error::from_raw_os_error(-code).to_string());
                        }
                        return Ok(()); // an acknowledgement
                    }
                    _ if body.len() >= GENL_HEADER => each(attributes(&body[GENL_HEADER..])),
                    _ => {}
                }
                rest = &rest[align4(len).min(rest.len())..];
            }
            if !is_dump {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_round_trip_through_a_message() {
        let msg = message(7, 1, 3, &[(1, &[1, 2, 3]), (2, &5u32.to_ne_bytes())]);
        assert_eq!(msg.len() % 4, 0);
        assert_eq!(
            u32::from_ne_bytes(msg[0..4].try_into().unwrap()) as usize,
            msg.len()
        );
        let attrs = attributes(&msg[NLMSG_HEADER + GENL_HEADER..]);
        assert_eq!(
            attrs,
            vec![(1, &[1u8, 2, 3][..]), (2, &5u32.to_ne_bytes()[..])]
        );
    }

    #[test]
    fn a_truncated_attribute_ends_the_list() {
        assert!(attributes(&[8, 0, 1, 0, 1]).is_empty());
    }
}
