//! Opening one interface (or every queue of one) on its backend, in its namespace: AF_XDP
//! with preferred busy polling, AF_PACKET, TAP (created or attached to); and which
//! `/proc/interrupts` vectors are its receive interrupts.

use std::fmt;

use polld_dev::afpacket::{AfPacket, AfPacketConfig};
use polld_dev::afxdp::{AfXdp, AfXdpConfig, SharedUmem};
use polld_dev::busy_poll::BusyPoll;
use polld_dev::error::OpenError;
use polld_dev::iface::Namespace;
use polld_dev::irq::DeviceIrqs;
use polld_dev::tap::Tap;
use polld_middleware::reopen::Opened;

use crate::config::{Backend, DeviceConfig};
use crate::rx_work::RxOwner;

/// Whether a device is opened at start, or again after its interface went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opening {
    Start,
    /// Off the poll thread ([`polld_middleware::reopen`]): a TAP is attached to, never created.
    Again,
}

/// The namespace interface `d` lives in: its `netns`, else the calling thread's.
pub(crate) fn namespace_of(d: &DeviceConfig) -> Result<Namespace, OpenError> {
    match &d.netns {
        Some(name) => Namespace::named(name),
        None => Namespace::of_this_thread(&d.name),
    }
}

/// Opens interface `d` in `netns`, and says who will do its receive work. AF_XDP asks
/// for preferred busy polling (`busy`), and binds to `umem` when given. For a TAP, says
/// in the log whether it was created or attached to.
pub(crate) fn open_device(
    d: &DeviceConfig,
    netns: Namespace,
    busy: &BusyPoll,
    opening: Opening,
    umem: Option<&SharedUmem>,
) -> Result<(Opened, RxOwner), String> {
    let text = |e: &dyn fmt::Display| e.to_string();
    let entered = |e: OpenError| e.to_string();
    Ok(match d.backend {
        Backend::AfPacket => (
            Box::new(
                netns
                    .enter_while(&d.name, || {
                        AfPacket::open(&d.name, AfPacketConfig::default())
                    })
                    .map_err(entered)?
                    .map_err(|e| text(&e))?,
            ),
            afpacket_rx_owner(),
        ),
        Backend::AfXdp => {
            let config = afxdp_config(d, busy);
            let dev = netns
                .enter_while(&d.name, || match umem {
                    Some(umem) => AfXdp::open_shared(&d.name, d.queue, &config, umem),
                    None => AfXdp::open(&d.name, d.queue, &config),
                })
                .map_err(entered)?
                .map_err(|e| text(&e))?;
            (Box::new(dev), RxOwner::BusyPoll(busy.clone()))
        }
        Backend::Tap if opening == Opening::Again => (
            Box::new(Tap::attach_in(netns, &d.name).map_err(entered)?),
            RxOwner::Polld("polld's read() of the TAP".to_string()),
        ),
        Backend::Tap => {
            let tap = Tap::open_in(netns, &d.name).map_err(entered)?;
            let place = d
                .netns
                .as_ref()
                .map(|ns| format!(" in network namespace {ns:?}"))
                .unwrap_or_default();
            if tap.created() {
                log::info!(
                    "{}: no such interface{place}: created the TAP (it goes away when polld exits; `ip tuntap add` makes a persistent one)",
                    d.name
                );
            } else {
                log::info!("{}: attached to the existing TAP{place}", d.name);
            }
            (
                Box::new(tap),
                RxOwner::Polld("polld's read() of the TAP".to_string()),
            )
        }
    })
}

/// AF_XDP asks for preferred busy polling, and passes the host's frames to the kernel
/// where `d` says `pass_local`.
pub(crate) fn afxdp_config(d: &DeviceConfig, busy: &BusyPoll) -> AfXdpConfig {
    AfXdpConfig {
        busy_poll: Some(busy.clone()),
        pass_local: d.pass_local == Some(true),
        ..AfXdpConfig::default()
    }
}

pub(crate) fn afpacket_rx_owner() -> RxOwner {
    RxOwner::Kernel(
        "AF_PACKET: the kernel copies each frame into the ring before polld polls it".to_string(),
    )
}

/// Opens every queue of interface `d` (`queues` or `fanout`) in `netns`, in the order of
/// `d.queues`: AF_XDP sockets sharing one redirect program (the `k`-th with busy polling
/// `busy.queue(k)`), or AF_PACKET sockets in one new PACKET_FANOUT group.
pub(crate) fn open_queues(
    d: &DeviceConfig,
    netns: Namespace,
    busy: &BusyPoll,
) -> Result<Vec<(Opened, RxOwner)>, String> {
    let entered = |e: OpenError| e.to_string();
    Ok(match d.backend {
        Backend::AfPacket => netns
            .enter_while(&d.name, || {
                AfPacket::open_fanout(&d.name, d.queues.len(), AfPacketConfig::default())
            })
            .map_err(entered)?
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|dev| (Box::new(dev) as Opened, afpacket_rx_owner()))
            .collect(),
        Backend::AfXdp => netns
            .enter_while(&d.name, || {
                AfXdp::open_queues(&d.name, &d.queues, &afxdp_config(d, busy))
            })
            .map_err(entered)?
            .map_err(|e| e.to_string())?
            .into_iter()
            .enumerate()
            .map(|(k, dev)| {
                let owner = RxOwner::BusyPoll(busy.queue(k));
                (Box::new(dev) as Opened, owner)
            })
            .collect(),
        Backend::Tap => return Err("a TAP has one queue here".to_string()),
    })
}

/// Which of `/proc/interrupts`' vectors are interface `d`'s receive interrupts: its
/// AF_XDP queue's, every queue's for AF_PACKET; none for a TAP.
pub(crate) fn device_irqs(d: &DeviceConfig, netns: &Namespace) -> Option<DeviceIrqs> {
    let queue = match d.backend {
        Backend::Tap => return None,
        Backend::AfPacket => None,
        Backend::AfXdp => Some(match d.this_queue {
            Some(k) => *d.queues.get(k)?,
            None => d.queue,
        }),
    };
    netns
        .enter_while(&d.name, || DeviceIrqs::find(&d.name, queue))
        .ok()
        .flatten()
}
