//! Opening an AF_XDP socket: the redirect program attached to the interface, the socket
//! created and bound to its UMEM (its own, or a shared one) on one queue, its rings mapped.

use std::ffi::CString;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use rustix::net::xdp::XdpOptionsFlags;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig, User};

use super::local::Follower;
use super::umem::{Group, Registration, UmemFrames};
use super::{errno, AfXdp, AfXdpConfig, AfXdpStats, Attachment, BindMode};
use crate::busy_poll::BusyPoll;
use crate::iface::{self, IfName};
use crate::xdp::{self, RedirectProgram, XdpError};

impl AfXdp {
    /// Opens an AF_XDP socket on `queue` of `ifname` and attaches polld's redirect program
    /// to the interface (detached again when the socket is dropped).
    pub fn open(ifname: &str, queue: u32, config: &AfXdpConfig) -> xdp::Result<AfXdp> {
        let mut sockets = AfXdp::open_queues(ifname, &[queue], config)?;
        Ok(sockets.remove(0))
    }

    /// Opens one socket per queue in `queues`, sharing one redirect program on `ifname`;
    /// the program stays attached until the last of them is dropped.
    pub fn open_queues(
        ifname: &str,
        queues: &[u32],
        config: &AfXdpConfig,
    ) -> xdp::Result<Vec<AfXdp>> {
        AfXdp::open_with(ifname, queues, config, || UmemFrames::new(1, false, config))
    }

    /// Opens one socket per queue, each bound to the UMEM `umem` returns.
    pub(super) fn open_with(
        ifname: &str,
        queues: &[u32],
        config: &AfXdpConfig,
        umem: impl Fn() -> xdp::Result<Arc<UmemFrames>>,
    ) -> xdp::Result<Vec<AfXdp>> {
        config.validate()?;
        let name = IfName::new(ifname).map_err(XdpError::Open)?;
        let ifindex = xdp::ifindex(ifname)?;
        let map_size = queues.iter().max().map_or(1, |&q| q + 1);
        let (program, local) = if config.pass_local {
            let program = RedirectProgram::load_passing_local(map_size)?;
            let maps = program
                .local_addresses()
                .expect("the program that passes local traffic has its maps")
                .try_clone()?;
            // Filled before the program is attached: the host never goes deaf.
            let follower = Follower::start(maps, ifname, ifindex)?;
            (program, Some(follower))
        } else {
            (RedirectProgram::load(map_size)?, None)
        };
        let link = program.attach(ifname, config.xdp_mode)?;
        let attachment = Arc::new(Attachment {
            _local: local,
            program,
            link,
        });
        queues
            .iter()
            .enumerate()
            .map(|(k, &queue)| {
                let busy_poll = config.busy_poll.as_ref().map(|b| b.queue(k));
                let socket = AfXdp::bind(
                    name.clone(),
                    ifindex,
                    queue,
                    config,
                    busy_poll,
                    attachment.clone(),
                    umem()?,
                )?;
                attachment
                    .program
                    .insert_socket(queue, socket.socket_fd())?;
                Ok(socket)
            })
            .collect()
    }

    fn bind(
        name: IfName,
        ifindex: u32,
        queue: u32,
        config: &AfXdpConfig,
        busy_poll: Option<BusyPoll>,
        attachment: Arc<Attachment>,
        frames: Arc<UmemFrames>,
    ) -> xdp::Result<AfXdp> {
        let ifname = name.as_str();
        let on_queue = |what: &str| format!("{what} for `{ifname}` queue {queue}");
        let mut group = frames.group();
        if group.joined == frames.members {
            return Err(XdpError::Os {
                action: on_queue("joining a shared AF_XDP UMEM"),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("the UMEM has room for {} sockets", frames.members),
                ),
            });
        }
        let first = group.registration.is_none();
        if first {
            let umem_config = UmemConfig {
                fill_size: frames.sizes.rx_frames,
                complete_size: frames.sizes.tx_frames,
                frame_size: frames.sizes.frame_size,
                headroom: 0,
                flags: 0,
            };
            // SAFETY: the area is page aligned (mmap) and outlives every ring: each member
            // holds the `UmemFrames` that owns it, and drops its rings first (field order).
            let umem =
                unsafe { Umem::new(umem_config, frames.area.as_slice_ptr()) }.map_err(|e| {
                    XdpError::os(on_queue("creating the AF_XDP socket and UMEM"), errno(e))
                })?;
            group.registration = Some(Registration(umem));
        }
        let result = AfXdp::bind_member(&name, ifindex, queue, config, &group, first);
        let (rx, tx, fill_completion, socket) = match result {
            Ok(rings) => rings,
            Err(e) => {
                // A first member that failed leaves no half-configured UMEM socket behind.
                if first {
                    group.registration = None;
                }
                return Err(e);
            }
        };
        let (to_fill, tx_range, spare) = frames.region(group.joined);
        group.joined += 1;
        let size = u64::from(frames.sizes.frame_size);
        group.spare.extend(spare.step_by(size as usize));
        drop(group);
        let tx_free: Vec<u64> = tx_range.clone().step_by(size as usize).collect();
        let sock_fd = socket_fd(&socket);

        let zero_copy = rustix::net::sockopt::xdp_options(sock_fd)
            .map(|options| options.contains(XdpOptionsFlags::XDP_OPTIONS_ZEROCOPY))
            .map_err(|e| XdpError::os(on_queue("reading the AF_XDP socket options"), e.into()))?;
        eprintln!(
            "polld: af_xdp: `{ifname}` queue {queue} bound in {} mode{}",
            if zero_copy { "zero-copy" } else { "copy" },
            if frames.shared {
                " on a shared UMEM"
            } else {
                ""
            }
        );
        let ioctl_socket = iface::ioctl_socket()
            .map_err(|e| XdpError::os(on_queue("opening a socket for interface ioctls"), e))?;
        let tx_ready_fd = sock_fd.try_clone_to_owned().map_err(|e| {
            XdpError::os(
                on_queue("duplicating the AF_XDP socket for its transmit-ready line"),
                e,
            )
        })?;

        let busy_poll = busy_poll.map(|b| b.attach(sock_fd, ifname, ifindex, queue));
        // Only a link of one queue counts this socket's drops alone.
        let single_queue = iface::rx_queues(ifname).ok().flatten() == Some(1);
        let link_drops = single_queue
            .then(|| iface::LinkCounters::open(ifindex).ok())
            .flatten()
            .and_then(|mut counters| counters.tx_dropped().ok().map(|at| (counters, at)));
        let mut device = AfXdp {
            name,
            ifindex,
            link_drops,
            queue,
            zero_copy,
            config: config.clone(),
            rx,
            tx,
            fill_completion,
            socket,
            to_fill,
            tx_free,
            tx_range,
            tx_outstanding: 0,
            rx_owed: 0,
            to_spare: Vec::new(),
            tx_queued: Vec::with_capacity(config.tx_frames as usize),
            interrupt_armed: false,
            stats: AfXdpStats::default(),
            max_frame: 0,
            ioctl_socket,
            tx_ready_fd,
            busy_poll,
            attachment,
            frames,
        };
        device.read_mtu();
        device.refill();
        Ok(device)
    }

    /// Creates, sizes, maps and binds one socket on the UMEM `group` holds: the UMEM's own
    /// socket for its `first` member, a new one bound with `XDP_SHARED_UMEM` after it.
    fn bind_member(
        name: &IfName,
        ifindex: u32,
        queue: u32,
        config: &AfXdpConfig,
        group: &Group,
        first: bool,
    ) -> xdp::Result<(RingRx, RingTx, DeviceQueue, User)> {
        let ifname = name.as_str();
        let on_queue = |what: &str| format!("{what} for `{ifname}` queue {queue}");
        let umem = &group
            .registration
            .as_ref()
            .expect("the first member registers the UMEM")
            .0;
        let mut info = IfInfo::invalid();
        let c_name =
            CString::new(ifname).map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.from_name(&c_name)
            .map_err(|_| XdpError::NoSuchInterface(ifname.to_string()))?;
        info.set_queue(queue);
        let sock = if first {
            Socket::with_shared(&info, umem)
        } else {
            Socket::new(&info)
        }
        .map_err(|e| XdpError::os(on_queue("preparing the AF_XDP socket"), errno(e)))?;
        debug_assert_eq!(ifindex, info.ifindex());
        let fill_completion = umem.fq_cq(&sock).map_err(|e| {
            XdpError::os(on_queue("mapping the fill and completion rings"), errno(e))
        })?;

        // `xsk_bind` refuses flags on an XDP_SHARED_UMEM bind: a later member inherits
        // the first one's copy or zero-copy mode and its need_wakeup.
        let bind_flags = match config.bind_mode {
            _ if !first => 0,
            BindMode::Auto => SocketConfig::XDP_BIND_NEED_WAKEUP,
            BindMode::ZeroCopy => {
                SocketConfig::XDP_BIND_NEED_WAKEUP | SocketConfig::XDP_BIND_ZEROCOPY
            }
            BindMode::Copy => SocketConfig::XDP_BIND_NEED_WAKEUP | SocketConfig::XDP_BIND_COPY,
        };
        let socket = umem
            .rx_tx(
                &sock,
                &SocketConfig {
                    rx_size: NonZeroU32::new(config.rx_frames),
                    tx_size: NonZeroU32::new(config.tx_frames),
                    bind_flags,
                },
            )
            .map_err(|e| XdpError::os(on_queue("sizing the rx and tx rings"), errno(e)))?;
        let rx = socket
            .map_rx()
            .map_err(|e| XdpError::os(on_queue("mapping the rx ring"), errno(e)))?;
        let tx = socket
            .map_tx()
            .map_err(|e| XdpError::os(on_queue("mapping the tx ring"), errno(e)))?;

        bind_retrying_busy(umem, &socket).map_err(|source| match source.raw_os_error() {
            Some(libc::EOPNOTSUPP) if config.bind_mode == BindMode::ZeroCopy => {
                XdpError::ZeroCopyUnsupported {
                    ifname: ifname.to_string(),
                    queue,
                }
            }
            Some(libc::EINVAL) => XdpError::Os {
                action: on_queue("binding the AF_XDP socket"),
                source: io::Error::new(
                    source.kind(),
                    format!(
                        "{source} (does the interface have this queue? see `ethtool -l {ifname}`)"
                    ),
                ),
            },
            Some(libc::EBUSY) => XdpError::Os {
                action: on_queue("binding the AF_XDP socket"),
                source: io::Error::new(
                    source.kind(),
                    format!("{source} (another AF_XDP socket already owns this queue)"),
                ),
            },
            _ => XdpError::os(on_queue("binding the AF_XDP socket"), source),
        })?;
        Ok((rx, tx, fill_completion, socket))
    }

    pub(super) fn socket_fd(&self) -> BorrowedFd<'_> {
        socket_fd(&self.socket)
    }
}

/// The descriptor of an XDP socket, borrowed for as long as the socket is (xdpilone hands
/// out only its number).
pub(super) fn socket_fd(socket: &User) -> BorrowedFd<'_> {
    // SAFETY: `socket` owns the descriptor and closes it only when dropped, which the
    // borrow outlasts.
    unsafe { BorrowedFd::borrow_raw(socket.as_raw_fd()) }
}

/// Binds the socket, waiting out EBUSY for a while: the kernel releases a closed socket's
/// claim on its queue from a workqueue, so reopening a queue right after closing it can
/// find the queue still taken.
fn bind_retrying_busy(umem: &Umem, socket: &User) -> io::Result<()> {
    const ATTEMPTS: u32 = 100;
    for _ in 1..ATTEMPTS {
        match umem.bind(socket).map_err(errno) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            result => return result,
        }
    }
    umem.bind(socket).map_err(errno)
}
