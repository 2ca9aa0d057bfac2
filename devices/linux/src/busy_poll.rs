//! Preferred busy polling: how polld takes an AF_XDP queue's receive work into its own
//! thread, and so under its own budget.
//!
//! While the interface polls (polling, busy, auto while it polls), polld keeps the
//! device's interrupt masked and runs the driver's NAPI poll itself:
//! - on the socket, `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` (= the
//!   poll chunk, `kern.polling.each_burst`): each receive call runs the NAPI poll for at
//!   most the budget in polld's thread;
//! - on the device, the interrupt deferral of [`crate::irq_defer`] (`napi_defer_hard_irqs`
//!   and `gro_flush_timeout` of ten ticks), per NAPI over netlink where the kernel has
//!   it (6.13+), else per device in sysfs (6.1): the kernel takes the queue back only if
//!   polld stops polling for the flush timeout. In interrupt mode the old values are back,
//!   and the device interrupts as before.
//!
//! A socket's NAPI id (`SO_INCOMING_NAPI_ID`) is known at bind in zero-copy mode; in copy
//! mode the kernel marks it with the first frame the socket receives (`xsk_rcv`), so
//! polld looks again once frames have arrived ([`BusyPoll::refresh`], at each status
//! round). Where the kernel has netdev `queue-get` (6.8+) the queue's NAPI id is known at
//! bind, and the deferral starts then; busy polling itself needs the socket's own id.
//!
//! [`BusyPoll`] is the state, shared by the socket (which asks [`BusyPoll::polls_napi`]
//! before each receive) and the runtime (which says when the interface polls and asks
//! what to report). Where there is no NAPI id, or the deferral cannot be written, the
//! receive work stays in the kernel's softirq or NAPI thread, outside polld's budget, and
//! the status says why and what would fix it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::irq_defer::{
    self, DeferChoice, DeferPath, DeferSettings, Deferral, SysfsDevice, Writer,
};
use crate::napi::Netdev;
use crate::sys::{self, Level};

// include/uapi/asm-generic/socket.h
const SO_BUSY_POLL: libc::c_int = 46;
const SO_INCOMING_NAPI_ID: libc::c_int = 56;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// How long a blocking call may busy poll before sleeping, µs (`SO_BUSY_POLL`).
const BUSY_POLL_USECS: u32 = 20;
/// Polls that find nothing before the device's interrupt is re-enabled
/// (`napi_defer_hard_irqs`).
const DEFER_HARD_IRQS: u32 = 2;

/// Ticks without a poll before the kernel takes the queue back (`gro_flush_timeout`): a
/// late tick re-enables the device's interrupt. With two, a 6.1 guest under software
/// emulation still took 2 % of interrupt mode's interrupts at 3 kpps.
const FLUSH_TICKS: u64 = 10;

/// What preferred busy polling needs: the budget per receive call and the flush timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPollConfig {
    /// Frames per NAPI poll run from polld's thread: the poll chunk.
    pub budget: u16,
    /// How long the kernel waits for polld before it takes the queue back, ns: a few
    /// ticks of `kern.polling.hz`.
    pub gro_flush_timeout_ns: u64,
    /// How the interrupt deferral is written (`[daemon] irq_deferral`).
    pub choice: DeferChoice,
}

impl BusyPollConfig {
    /// The settings for a chunk of `each_burst` frames at `hz` ticks a second: the queue
    /// returns to the kernel after [`FLUSH_TICKS`] ticks without a poll.
    pub fn for_polling(each_burst: u32, hz: u32, choice: DeferChoice) -> BusyPollConfig {
        BusyPollConfig {
            budget: each_burst.clamp(1, u32::from(u16::MAX)) as u16,
            gro_flush_timeout_ns: FLUSH_TICKS * 1_000_000_000 / u64::from(hz.max(1)),
            choice,
        }
    }
}

/// The busy-polling options of a socket, as read back from the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketBusyPoll {
    pub prefer: bool,
    pub usecs: u32,
    /// `None`: the kernel does not answer getsockopt(SO_BUSY_POLL_BUDGET) (Linux 6.18
    /// does not), only setsockopt.
    pub budget: Option<u32>,
}

/// What `polld ifconfig` says of an interface's preferred busy polling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusyPollStatus {
    /// The way the interrupt deferral is written while it is in force.
    pub path: Option<DeferPath>,
    /// The interface polls (else busy polling is off by design).
    pub polling: bool,
    pub napi_id: Option<u32>,
    /// polld's thread runs the queue's NAPI poll: the receive work is in its budget.
    pub in_budget: bool,
    /// What is in force, or why not and what would fix it.
    pub detail: String,
}

impl BusyPollStatus {
    /// `netlink per-NAPI`, `sysfs per-device`, `off` (the interface does not poll) or
    /// `unavailable` (it polls, and the detail says why not).
    pub fn path_name(&self) -> &'static str {
        match self.path {
            Some(path) => path.name(),
            None if !self.polling => "off",
            None => "unavailable",
        }
    }
}

/// One AF_XDP socket's preferred busy polling: shared by the socket and the runtime. A
/// socket opened again (the interface came back) attaches to the same one. The sockets
/// of an interface split into queues each have their own: [`BusyPoll::queue`].
#[derive(Clone, Debug)]
pub struct BusyPoll(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The settings in force; [`BusyPoll::reconfigure`] replaces them.
    config: Mutex<BusyPollConfig>,
    /// The socket's `SO_BUSY_POLL_BUDGET` as last set.
    napi_budget: AtomicU32,
    /// Read before each receive call: whether it runs the NAPI poll.
    polls_napi: AtomicBool,
    state: Mutex<State>,
    /// The busy polling of the interface's other queues, by position after this one.
    siblings: Mutex<Vec<BusyPoll>>,
}

#[derive(Debug, Default)]
struct State {
    socket: Option<Socket>,
    /// The runtime says the interface polls.
    polling: bool,
    deferral: Option<Deferral>,
    /// Why it cannot work on this socket; stays until another socket is attached.
    refused: Option<String>,
    /// Why the deferral could not be written; tried again when polling starts again.
    defer_failed: Option<String>,
}

/// The socket busy polling serves, as it was bound.
#[derive(Debug)]
struct Socket {
    /// A duplicate of the AF_XDP socket, to read `SO_INCOMING_NAPI_ID` from.
    fd: OwnedFd,
    ifname: String,
    ifindex: u32,
    queue: u32,
    /// The NAPI id the socket reports (0 until it has received a frame in copy mode).
    socket_napi_id: u32,
    /// The queue's NAPI id from netdev `queue-get`, where the kernel has it.
    queue_napi_id: Option<u32>,
    /// The netdev family of the device's namespace, or why not.
    netdev: Result<Arc<Netdev>, String>,
    /// The device's sysfs directory, if it is this namespace's and writable, or why not.
    sysfs: Result<SysfsDevice, String>,
}

impl Socket {
    fn napi_id(&self) -> Option<u32> {
        Some(self.socket_napi_id)
            .filter(|&id| id != 0)
            .or(self.queue_napi_id)
    }

    /// Whether the NAPI instance has per-NAPI settings over netlink, or why not.
    fn netlink_offer(&self, napi_id: u32) -> Result<(), String> {
        let netdev = self.netdev.as_ref().map_err(Clone::clone)?;
        match netdev.napi_get(napi_id) {
            Ok(napi) if napi.settings.is_some() => Ok(()),
            Ok(_) => Err("the kernel has no per-NAPI settings (Linux 6.13+)".to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    fn writer(&self, path: DeferPath, napi_id: u32) -> Result<Writer, String> {
        Ok(match path {
            DeferPath::Sysfs => Writer::Sysfs(self.sysfs.clone()?),
            DeferPath::Netlink => Writer::Netlink {
                netdev: self.netdev.clone()?,
                napi_id,
            },
        })
    }
}

/// The same state (clones of one handle).
impl PartialEq for BusyPoll {
    fn eq(&self, other: &BusyPoll) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for BusyPoll {}

/// A socket's share of its [`BusyPoll`]. Detaches the socket when dropped (the socket
/// closes): the deferral's old values come back if no other socket uses them.
#[derive(Debug)]
pub struct Attached {
    busy: BusyPoll,
}

impl Attached {
    /// Whether receive calls should run the queue's NAPI poll.
    pub fn polls_napi(&self) -> bool {
        self.busy.0.polls_napi.load(Ordering::Relaxed)
    }

    /// The shared state, for the runtime.
    pub fn busy_poll(&self) -> &BusyPoll {
        &self.busy
    }

    /// Runs the queue's NAPI poll in this thread for at most `frames` frames (and at most
    /// the configured budget, the poll chunk): a zero-length non-blocking `recvfrom` on
    /// socket `fd`, with `SO_BUSY_POLL_BUDGET` set to that many first when it differs.
    ///
    /// The driver's work is what the scheduler's burst meters, as FreeBSD's poll handler
    /// is handed `count`: a chunk that takes one frame off the ring runs the driver for one
    /// frame, not for a whole chunk whose frames the full ring or the short fill ring would
    /// drop. A socket whose budget cannot be set keeps the one it has.
    pub fn poll_napi(&mut self, fd: BorrowedFd<'_>, frames: usize) {
        let want = frames.clamp(1, usize::from(self.busy.config().budget)) as u32;
        let set = &self.busy.0.napi_budget;
        if want != set.load(Ordering::Relaxed)
            && setsockopt_int(fd, SO_BUSY_POLL_BUDGET, want).is_ok()
        {
            set.store(want, Ordering::Relaxed);
        }
        let _ = rustix::net::recv(fd, &mut [0u8; 0], rustix::net::RecvFlags::DONTWAIT);
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut state = self.busy.lock();
        state.socket = None;
        state.refused = None;
        state.defer_failed = None;
        self.busy.update(&mut state);
    }
}

impl BusyPoll {
    pub fn new(config: BusyPollConfig) -> BusyPoll {
        BusyPoll(Arc::new(Shared {
            config: Mutex::new(config),
            napi_budget: AtomicU32::new(0),
            polls_napi: AtomicBool::new(false),
            state: Mutex::new(State::default()),
            siblings: Mutex::new(Vec::new()),
        }))
    }

    /// The busy polling of the `k`-th socket of an interface split into queues (0: this
    /// one), made on first use with the same settings.
    pub fn queue(&self, k: usize) -> BusyPoll {
        if k == 0 {
            return self.clone();
        }
        let mut siblings = self.0.siblings.lock().unwrap_or_else(|e| e.into_inner());
        while siblings.len() < k {
            siblings.push(BusyPoll::new(self.config()));
        }
        siblings[k - 1].clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The settings in force.
    pub fn config(&self) -> BusyPollConfig {
        *self.0.config.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts `config` in force (the knobs it follows were written): the socket's budget is
    /// set again, and a deferral in force is written again with the new flush timeout.
    /// Only this socket's: each queue of an interface follows its own poll thread's knobs.
    pub fn reconfigure(&self, config: BusyPollConfig) {
        let old = std::mem::replace(
            &mut *self.0.config.lock().unwrap_or_else(|e| e.into_inner()),
            config,
        );
        if old == config {
            return;
        }
        let mut state = self.lock();
        if let Some(socket) = &state.socket {
            let budget = u32::from(config.budget);
            if setsockopt_int(socket.fd.as_fd(), SO_BUSY_POLL_BUDGET, budget).is_ok() {
                self.0.napi_budget.store(budget, Ordering::Relaxed);
            }
        }
        if (old.gro_flush_timeout_ns, old.choice) != (config.gro_flush_timeout_ns, config.choice) {
            // The old values come back, then the new ones are written.
            state.deferral = None;
            state.defer_failed = None;
            self.update(&mut state);
        }
    }

    /// The busy-polling options of the socket it serves, as the kernel reports them;
    /// `None` without a socket.
    pub fn socket_options(&self) -> Option<io::Result<SocketBusyPoll>> {
        let state = self.lock();
        state.socket.as_ref().map(|s| socket_options(s.fd.as_fd()))
    }

    /// Serves AF_XDP socket `fd`, bound to `queue` of `ifname` (`ifindex`), from now on.
    /// Called in the device's namespace: the netdev socket and the sysfs check are of
    /// that namespace. Never fails the socket: without busy polling polld still polls the
    /// rings, and the status says why.
    pub fn attach(&self, fd: BorrowedFd<'_>, ifname: &str, ifindex: u32, queue: u32) -> Attached {
        let mut state = self.lock();
        state.refused = None;
        state.defer_failed = None;
        state.deferral = None;
        let budget = self.config().budget;
        match fd.try_clone_to_owned() {
            Ok(dup) => {
                self.0.napi_budget.store(budget.into(), Ordering::Relaxed);
                if let Err(e) = set_socket_options(fd, budget) {
                    state.refused = Some(format!(
                        "{ifname}: busy-polling socket options: {e} (SO_BUSY_POLL_BUDGET needs CAP_NET_ADMIN)"
                    ));
                }
                let netdev = Netdev::open().map(Arc::new).map_err(|e| e.to_string());
                let queue_napi_id = netdev
                    .as_ref()
                    .ok()
                    .and_then(|n| n.rx_queue_napi_id(ifindex, queue).ok().flatten());
                let sysfs = SysfsDevice::new(Path::new(irq_defer::SYSFS_NET), ifname);
                let sysfs = sysfs.check(ifindex).map(|()| sysfs);
                state.socket = Some(Socket {
                    socket_napi_id: incoming_napi_id(dup.as_fd()).unwrap_or(0),
                    fd: dup,
                    ifname: ifname.to_string(),
                    ifindex,
                    queue,
                    queue_napi_id,
                    netdev,
                    sysfs,
                });
            }
            Err(e) => state.refused = Some(format!("{ifname}: duplicating the socket: {e}")),
        }
        self.update(&mut state);
        drop(state);
        eprintln!(
            "polld: af_xdp: `{ifname}` queue {queue}: {}",
            self.status().detail
        );
        Attached { busy: self.clone() }
    }

    /// The interface polls from now on (or no longer): the deferral follows.
    pub fn set_polling(&self, polling: bool) {
        let mut state = self.lock();
        if state.polling != polling {
            state.polling = polling;
            state.defer_failed = None;
            self.update(&mut state);
        }
    }

    /// Reads the socket's NAPI id again if it had none: in copy mode the kernel marks it
    /// with the first frame received. Cheap (one getsockopt) and only until it is found.
    pub fn refresh(&self) {
        let mut state = self.lock();
        let Some(socket) = state.socket.as_mut() else {
            return;
        };
        if socket.socket_napi_id != 0 {
            return;
        }
        let found = incoming_napi_id(socket.fd.as_fd()).unwrap_or(0);
        if found == 0 {
            return;
        }
        socket.socket_napi_id = found;
        let (ifname, queue) = (socket.ifname.clone(), socket.queue);
        self.update(&mut state);
        drop(state);
        eprintln!(
            "polld: af_xdp: `{ifname}` queue {queue}: NAPI id {found} found after frames arrived; {}",
            self.status().detail
        );
    }

    /// Whether the next receive call should run the queue's NAPI poll.
    pub fn polls_napi(&self) -> bool {
        self.0.polls_napi.load(Ordering::Relaxed)
    }

    /// Brings the deferral and the busy polling in line with the state.
    fn update(&self, state: &mut State) {
        let wanted = state.polling && state.refused.is_none() && state.defer_failed.is_none();
        let napi_id = state.socket.as_ref().and_then(Socket::napi_id);
        match (wanted, &state.socket, napi_id) {
            (true, Some(socket), Some(napi_id)) if state.deferral.is_none() => {
                match self.defer(socket, napi_id) {
                    Ok(deferral) => state.deferral = Some(deferral),
                    Err(why) => {
                        eprintln!("polld: af_xdp: no preferred busy polling: {why}");
                        state.defer_failed = Some(why);
                    }
                }
            }
            (true, Some(_), _) => {}
            _ => state.deferral = None,
        }
        // Busy polling runs on the socket's own NAPI id, under the deferral.
        let polls = state.deferral.is_some()
            && state.socket.as_ref().is_some_and(|s| s.socket_napi_id != 0);
        self.0.polls_napi.store(polls, Ordering::Relaxed);
    }

    /// Writes the deferral the chosen way.
    fn defer(&self, socket: &Socket, napi_id: u32) -> Result<Deferral, String> {
        let config = self.config();
        let sysfs = socket.sysfs.as_ref().map(|_| ()).map_err(Clone::clone);
        let path = irq_defer::choose(config.choice, socket.netlink_offer(napi_id), sysfs)
            .map_err(|e| format!("{}: cannot defer its interrupts: {e}", socket.ifname))?;
        let wanted = DeferSettings {
            defer_hard_irqs: DEFER_HARD_IRQS,
            gro_flush_timeout_ns: config.gro_flush_timeout_ns,
        };
        Deferral::apply(
            socket.writer(path, napi_id)?,
            &socket.ifname,
            socket.ifindex,
            wanted,
        )
    }

    /// What is in force, for `polld ifconfig` and the log.
    pub fn status(&self) -> BusyPollStatus {
        let config = self.config();
        let state = self.lock();
        let socket = state.socket.as_ref();
        let napi_id = socket.and_then(Socket::napi_id);
        let in_budget = self.polls_napi();
        let refused = state.refused.as_ref().or(state.defer_failed.as_ref());
        let detail = match (socket, refused, &state.deferral) {
            (None, _, _) => "no socket (the interface is gone)".to_string(),
            (Some(_), Some(why), _) => why.clone(),
            (Some(s), None, Some(d)) if in_budget => format!(
                "preferred busy polling of NAPI {}, budget {}; interrupts deferred ({}: napi_defer_hard_irqs {DEFER_HARD_IRQS}, gro_flush_timeout {} ns)",
                s.socket_napi_id,
                config.budget,
                d.path().name(),
                config.gro_flush_timeout_ns
            ),
            (Some(s), None, Some(d)) => format!(
                "interrupts deferred ({}, NAPI {} from queue-get); busy polling starts once the socket has received a frame (copy mode learns its NAPI id then)",
                d.path().name(),
                s.queue_napi_id.unwrap_or(0)
            ),
            (Some(_), None, None) if !state.polling => {
                "off: the interface does not poll (its device interrupts as usual)".to_string()
            }
            (Some(s), None, None) => format!(
                "waiting for a NAPI id: `{}` queue {} has none yet (in copy mode the socket learns it from its first frame; veth, generic XDP and drivers without NAPI ids never give one)",
                s.ifname, s.queue
            ),
        };
        BusyPollStatus {
            path: state.deferral.as_ref().map(Deferral::path),
            polling: state.polling,
            napi_id,
            in_budget,
            detail,
        }
    }
}

fn getsockopt_int(fd: BorrowedFd<'_>, name: libc::c_int) -> io::Result<u32> {
    let mut value: u32 = 0;
    sys::get_option(fd, Level::Socket, name, &mut value)?;
    Ok(value)
}

fn setsockopt_int(fd: BorrowedFd<'_>, name: libc::c_int, value: u32) -> io::Result<()> {
    sys::set_option(fd, Level::Socket, name, &(value as libc::c_int))
}

/// The NAPI id of the queue socket `fd` receives from (0: none).
pub fn incoming_napi_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    getsockopt_int(fd, SO_INCOMING_NAPI_ID)
}

/// Sets `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and `SO_BUSY_POLL_BUDGET = budget` on `fd`
/// (raising the last two needs CAP_NET_ADMIN).
pub fn set_socket_options(fd: BorrowedFd<'_>, budget: u16) -> io::Result<()> {
    setsockopt_int(fd, SO_PREFER_BUSY_POLL, 1)?;
    setsockopt_int(fd, SO_BUSY_POLL, BUSY_POLL_USECS)?;
    setsockopt_int(fd, SO_BUSY_POLL_BUDGET, u32::from(budget))
}

/// The busy-polling options of `fd`.
pub fn socket_options(fd: BorrowedFd<'_>) -> io::Result<SocketBusyPoll> {
    Ok(SocketBusyPoll {
        prefer: getsockopt_int(fd, SO_PREFER_BUSY_POLL)? != 0,
        usecs: getsockopt_int(fd, SO_BUSY_POLL)?,
        budget: match getsockopt_int(fd, SO_BUSY_POLL_BUDGET) {
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => None,
            other => Some(other?),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_chunk_and_the_timeout_ten_ticks() {
        let c = BusyPollConfig::for_polling(50, 1000, DeferChoice::Auto);
        assert_eq!(c.budget, 50);
        assert_eq!(c.gro_flush_timeout_ns, 10_000_000);
        let big = BusyPollConfig::for_polling(100_000, 100, DeferChoice::Sysfs);
        assert_eq!(big.budget, u16::MAX);
    }
}
