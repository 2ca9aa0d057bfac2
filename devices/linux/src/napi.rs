//! An interface's NAPI instances through the kernel's `netdev` generic-netlink family:
//! `napi-get` gives each instance's id and, when NAPI is threaded, the pid of the kthread
//! that polls it (Linux 6.9+); `napi-set` changes its per-NAPI busy-polling settings
//! (`defer-hard-irqs`, `gro-flush-timeout`, `irq-suspend-timeout`, Linux 6.13+);
//! `queue-get` gives the NAPI id of a receive queue (Linux 6.8+).
//!
//! Threaded NAPI runs in a kthread named `napi/veth1-<id>`; the name does not say which
//! namespace's `veth1` it serves. Asked from inside the interface's namespace (the calling
//! thread's), the kernel answers for exactly that interface.
//!
//! A small hand-written client: one request, its replies, the attributes polld needs.

use std::fmt;
use std::os::fd::OwnedFd;

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// One NAPI instance of an interface, as `napi-get` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Napi {
    pub id: u32,
    pub ifindex: u32,
    /// The kthread that polls it, when NAPI is threaded.
    pub pid: Option<u32>,
    /// The busy-polling settings, when the kernel reports them (6.13+).
    pub settings: Option<NapiSettings>,
}

/// The per-NAPI settings preferred busy polling uses: how many times the device's
/// interrupt stays masked after a poll that found work, and the timers that hand the
/// NAPI back to the kernel when the application stops polling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NapiSettings {
    pub defer_hard_irqs: u32,
    pub gro_flush_timeout_ns: u64,
    pub irq_suspend_timeout_ns: u64,
}

/// Why the kernel could not be asked or refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NapiError(pub String);

impl fmt::Display for NapiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NapiError {}

type Result<T> = std::result::Result<T, NapiError>;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_QUEUE_GET: u8 = 10;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_CMD_NAPI_SET: u8 = 14;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_PID: u16 = 4;
const NETDEV_A_NAPI_DEFER_HARD_IRQS: u16 = 5;
const NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT: u16 = 6;
const NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT: u16 = 7;
const NETDEV_A_QUEUE_ID: u16 = 1;
const NETDEV_A_QUEUE_IFINDEX: u16 = 2;
const NETDEV_A_QUEUE_TYPE: u16 = 3;
const NETDEV_A_QUEUE_NAPI_ID: u16 = 4;
const NETDEV_QUEUE_TYPE_RX: u32 = 0;
const NLMSG_HEADER: usize = 16;
const GENL_HEADER: usize = 4;
const ATTR_HEADER: usize = 4;

/// The index of `ifname` in the calling thread's namespace.
pub fn ifindex(ifname: &str) -> Result<u32> {
    if ifname.contains('\0') {
        return Err(NapiError(format!("bad interface name {ifname:?}")));
    }
    crate::iface::index_here(ifname)
        .map_err(|_| NapiError(format!("no interface {ifname} in this network namespace")))
}

/// The NAPI instances of `ifname` in the calling thread's namespace (none when the
/// interface has no NAPI enabled, as a veth without GRO or XDP).
pub fn napis_of(ifname: &str) -> Result<Vec<Napi>> {
    let ifindex = ifindex(ifname)?;
    let mut napis = Vec::new();
    Netdev::open()
        .and_then(|netdev| {
            netdev.ask(
                libc::NLM_F_DUMP,
                NETDEV_CMD_NAPI_GET,
                &[(NETDEV_A_NAPI_IFINDEX, &ifindex.to_ne_bytes())],
                |attrs| napis.extend(napi_of_attributes(&attrs)),
            )
        })
        .map_err(|e| NapiError(format!("NAPI instances of {ifname}: {e}")))?;
    Ok(napis)
}

/// NAPI instance `id` of the calling thread's namespace.
pub fn napi_get(id: u32) -> Result<Napi> {
    Netdev::open()?.napi_get(id)
}

/// Writes `settings` to NAPI instance `id` of the calling thread's namespace (needs
/// CAP_NET_ADMIN and Linux 6.13+).
pub fn napi_set(id: u32, settings: &NapiSettings) -> Result<()> {
    Netdev::open()?.napi_set(id, settings)
}

/// The kernel's `netdev` family, asked through a socket of the namespace that opened it:
/// kept, it answers for that namespace from any thread.
#[derive(Debug)]
pub struct Netdev {
    socket: GenlSocket,
    family: u16,
}

impl Netdev {
    /// The family in the calling thread's namespace (Linux 6.3+; NAPI requests 6.9+).
    pub fn open() -> Result<Netdev> {
        let socket = GenlSocket::open()?;
        let family = socket.family_id("netdev")?;
        Ok(Netdev { socket, family })
    }

    /// NAPI instance `id`.
    pub fn napi_get(&self, id: u32) -> Result<Napi> {
        let mut found = None;
        self.ask(
            0,
            NETDEV_CMD_NAPI_GET,
            &[(NETDEV_A_NAPI_ID, &id.to_ne_bytes())],
            |attrs| found = found.or(napi_of_attributes(&attrs)),
        )
        .map_err(|e| NapiError(format!("NAPI {id}: {e}")))?;
        found.ok_or_else(|| NapiError(format!("NAPI {id}: the kernel returned nothing")))
    }

    /// Writes `settings` to NAPI instance `id` (needs CAP_NET_ADMIN and Linux 6.13+).
    pub fn napi_set(&self, id: u32, settings: &NapiSettings) -> Result<()> {
        self.ask(
            libc::NLM_F_ACK,
            NETDEV_CMD_NAPI_SET,
            &[
                (NETDEV_A_NAPI_ID, &id.to_ne_bytes()),
                (
                    NETDEV_A_NAPI_DEFER_HARD_IRQS,
                    &settings.defer_hard_irqs.to_ne_bytes(),
                ),
                (
                    NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT,
                    &settings.gro_flush_timeout_ns.to_ne_bytes(),
                ),
                (
                    NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT,
                    &settings.irq_suspend_timeout_ns.to_ne_bytes(),
                ),
            ],
            |_| {},
        )
        .map_err(|e| NapiError(format!("setting NAPI {id} (needs CAP_NET_ADMIN): {e}")))
    }

    /// The NAPI id serving receive queue `queue` of interface `ifindex` (`queue-get`,
    /// Linux 6.8+); `None` when the queue has none (no NAPI, or not up).
    pub fn rx_queue_napi_id(&self, ifindex: u32, queue: u32) -> Result<Option<u32>> {
        let mut napi_id = None;
        self.ask(
            0,
            NETDEV_CMD_QUEUE_GET,
            &[
                (NETDEV_A_QUEUE_ID, &queue.to_ne_bytes()),
                (NETDEV_A_QUEUE_IFINDEX, &ifindex.to_ne_bytes()),
                (NETDEV_A_QUEUE_TYPE, &NETDEV_QUEUE_TYPE_RX.to_ne_bytes()),
            ],
            |attrs| {
                for (kind, value) in attrs {
                    if kind == NETDEV_A_QUEUE_NAPI_ID {
                        napi_id = u32_of(value).filter(|&id| id != 0);
                    }
                }
            },
        )
        .map_err(|e| NapiError(format!("receive queue {queue}: {e}")))?;
        Ok(napi_id)
    }

    /// Sends one request (`flags` besides NLM_F_REQUEST) and passes each reply's
    /// attributes to `each`.
    fn ask(
        &self,
        flags: libc::c_int,
        cmd: u8,
        attrs: &[(u16, &[u8])],
        each: impl FnMut(Vec<(u16, &[u8])>),
    ) -> Result<()> {
        let request = message(
            self.family,
            (libc::NLM_F_REQUEST | flags) as u16,
            cmd,
            attrs,
        );
        self.socket.exchange(&request, each)
    }
}

/// A NAPI instance from the attributes of one `napi-get` reply.
fn napi_of_attributes(attrs: &[(u16, &[u8])]) -> Option<Napi> {
    let mut napi = Napi::default();
    let mut id = None;
    let mut settings = NapiSettings::default();
    let mut has_settings = false;
    for &(kind, value) in attrs {
        match kind {
            NETDEV_A_NAPI_ID => id = u32_of(value),
            NETDEV_A_NAPI_IFINDEX => napi.ifindex = u32_of(value).unwrap_or(0),
            NETDEV_A_NAPI_PID => napi.pid = u32_of(value),
            NETDEV_A_NAPI_DEFER_HARD_IRQS => {
                settings.defer_hard_irqs = u32_of(value).unwrap_or(0);
                has_settings = true;
            }
            NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT => {
                settings.gro_flush_timeout_ns = uint_of(value).unwrap_or(0)
            }
            NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT => {
                settings.irq_suspend_timeout_ns = uint_of(value).unwrap_or(0)
            }
            _ => {}
        }
    }
    napi.id = id?;
    napi.settings = has_settings.then_some(settings);
    Some(napi)
}

fn u32_of(value: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

/// A netlink `uint`: 4 or 8 bytes.
fn uint_of(value: &[u8]) -> Option<u64> {
    match value.len() {
        4 => u32_of(value).map(u64::from),
        8 => Some(u64::from_ne_bytes(value.try_into().ok()?)),
        _ => None,
    }
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

#[derive(Debug)]
struct GenlSocket(OwnedFd);

impl GenlSocket {
    fn open() -> Result<GenlSocket> {
        rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::RAW,
            SocketFlags::CLOEXEC,
            Some(rustix::net::netlink::GENERIC),
        )
        .map(GenlSocket)
        .map_err(|e| {
            NapiError(format!(
                "generic netlink socket: {}",
                std::io::Error::from(e)
            ))
        })
    }

    fn family_id(&self, name: &str) -> Result<u16> {
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
        .map_err(|e| {
            NapiError(format!(
                "netlink family `{name}` (needs Linux 6.9 or later): {e}"
            ))
        })?;
        id.ok_or_else(|| {
            NapiError(format!(
                "the kernel did not return the id of netlink family `{name}`"
            ))
        })
    }

    /// Sends `request` and passes the attributes of every reply message to `each`, until
    /// the end of the dump, the acknowledgement, or the single reply of a plain request.
    fn exchange(&self, request: &[u8], mut each: impl FnMut(Vec<(u16, &[u8])>)) -> Result<()> {
        // An unconnected netlink socket sends to the kernel.
        rustix::net::send(&self.0, request, SendFlags::empty())
            .map_err(|e| NapiError(format!("netlink send: {}", std::io::Error::from(e))))?;
        let flags = u16::from_ne_bytes([request[6], request[7]]);
        let waits_for_end = flags & (libc::NLM_F_DUMP | libc::NLM_F_ACK) as u16 != 0;
        let mut buffer = vec![0u8; 64 * 1024];
        loop {
            let (n, _) = rustix::net::recv(&self.0, &mut buffer[..], RecvFlags::empty())
                .map_err(|e| NapiError(format!("netlink recv: {}", std::io::Error::from(e))))?;
            let mut rest = &buffer[..n];
            while rest.len() >= NLMSG_HEADER {
                let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                if len < NLMSG_HEADER || len > rest.len() {
                    return Err(NapiError("truncated netlink reply".to_string()));
                }
                let body = &rest[NLMSG_HEADER..len];
                match kind as i32 {
                    libc::NLMSG_DONE => return Ok(()),
                    libc::NLMSG_ERROR => {
                        let code = body
                            .get(..4)
                            .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        if code != 0 {
                            return Err(NapiError(
                                std::io::Error::from_raw_os_error(-code).to_string(),
                            ));
                        }
                        return Ok(()); // an acknowledgement
                    }
                    _ if body.len() >= GENL_HEADER => each(attributes(&body[GENL_HEADER..])),
                    _ => {}
                }
                rest = &rest[align4(len).min(rest.len())..];
            }
            if !waits_for_end {
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

    #[test]
    fn a_napi_get_reply_gives_the_id_the_thread_and_the_settings() {
        let msg = message(
            7,
            0,
            NETDEV_CMD_NAPI_GET,
            &[
                (NETDEV_A_NAPI_IFINDEX, &3u32.to_ne_bytes()),
                (NETDEV_A_NAPI_ID, &8193u32.to_ne_bytes()),
                (NETDEV_A_NAPI_PID, &4242u32.to_ne_bytes()),
                (NETDEV_A_NAPI_DEFER_HARD_IRQS, &2u32.to_ne_bytes()),
                (NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT, &200_000u64.to_ne_bytes()),
                (NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT, &0u32.to_ne_bytes()),
            ],
        );
        let napi = napi_of_attributes(&attributes(&msg[NLMSG_HEADER + GENL_HEADER..])).unwrap();
        assert_eq!(
            napi,
            Napi {
                id: 8193,
                ifindex: 3,
                pid: Some(4242),
                settings: Some(NapiSettings {
                    defer_hard_irqs: 2,
                    gro_flush_timeout_ns: 200_000,
                    irq_suspend_timeout_ns: 0,
                }),
            }
        );
        // Without an id there is no instance; without the settings (before 6.13), none.
        assert_eq!(
            napi_of_attributes(&[(NETDEV_A_NAPI_PID, &1u32.to_ne_bytes()[..])]),
            None
        );
        assert_eq!(
            napi_of_attributes(&[(NETDEV_A_NAPI_ID, &1u32.to_ne_bytes()[..])])
                .unwrap()
                .settings,
            None
        );
    }
}
