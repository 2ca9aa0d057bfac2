//! Preferred busy polling: how polld takes a zero-copy AF_XDP queue's receive work into
//! its own thread, and so under its own budget.
//!
//! When the socket's queue has a NAPI instance (`SO_INCOMING_NAPI_ID` non-zero, as
//! zero-copy drivers give), polld sets on the socket `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`
//! and `SO_BUSY_POLL_BUDGET` (= the poll chunk, `kern.polling.each_burst`), and on the
//! NAPI instance `defer-hard-irqs` and `gro-flush-timeout` through the netdev netlink
//! family: the device's interrupt then stays masked while polld polls, each receive call
//! runs the driver's NAPI poll for at most the budget in polld's thread, and the kernel
//! takes the queue back only if polld stops polling for the flush timeout. The NAPI's own
//! settings are restored when the socket closes ([`NapiTuning`]'s drop), which includes
//! polld stopping on SIGINT/SIGTERM.
//!
//! Where the NAPI id is 0 (veth, copy mode, drivers without NAPI ids) none of this is
//! possible: the receive work stays in the kernel's NAPI thread or softirq, and
//! [`BusyPoll::Unavailable`] says so.
//!
//! What needs hardware: the receive path under preferred busy polling (a zero-copy NIC);
//! here the options are set and read back on a veth socket, and the NAPI settings on a
//! veth whose GRO gives it NAPI instances.

use std::io;
use std::os::fd::RawFd;

use crate::napi::{self, NapiSettings};

// include/uapi/asm-generic/socket.h
const SO_BUSY_POLL: libc::c_int = 46;
const SO_INCOMING_NAPI_ID: libc::c_int = 56;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// How long a blocking call may busy poll before sleeping, µs (`SO_BUSY_POLL`).
const BUSY_POLL_USECS: u32 = 20;
/// Polls that find work before the device's interrupt is re-enabled (`defer-hard-irqs`).
const DEFER_HARD_IRQS: u32 = 2;

/// What preferred busy polling needs: the budget per receive call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPollConfig {
    /// Frames per NAPI poll run from polld's thread: the poll chunk.
    pub budget: u16,
    /// How long the kernel waits for polld before it takes the queue back, ns: a few
    /// ticks of `kern.polling.hz`.
    pub gro_flush_timeout_ns: u64,
}

impl BusyPollConfig {
    /// The settings for a chunk of `each_burst` frames at `hz` ticks a second: the queue
    /// returns to the kernel after two ticks without a poll.
    pub fn for_polling(each_burst: u32, hz: u32) -> BusyPollConfig {
        BusyPollConfig {
            budget: each_burst.clamp(1, u32::from(u16::MAX)) as u16,
            gro_flush_timeout_ns: 2_000_000_000 / u64::from(hz.max(1)),
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

/// Whether a socket's receive work runs in polld's thread.
#[derive(Debug)]
pub enum BusyPoll {
    /// Preferred busy polling is on: NAPI `napi_id` is polled from polld's thread.
    Active {
        napi_id: u32,
        budget: u16,
        /// Restores the NAPI's settings on drop.
        tuning: NapiTuning,
    },
    /// Not possible or not wanted; why, for `polld ifconfig` and the log.
    Unavailable(String),
}

impl BusyPoll {
    /// Turns preferred busy polling on for socket `fd` if its queue has a NAPI id, else
    /// says why not. Never fails the socket: without it polld still polls the rings.
    pub fn enable(fd: RawFd, config: &BusyPollConfig) -> BusyPoll {
        let napi_id = match incoming_napi_id(fd) {
            Ok(0) => {
                return BusyPoll::Unavailable(
                    "the socket has no NAPI id (SO_INCOMING_NAPI_ID 0: copy mode or a driver \
                     without NAPI ids)"
                        .to_string(),
                )
            }
            Ok(id) => id,
            Err(e) => return BusyPoll::Unavailable(format!("SO_INCOMING_NAPI_ID: {e}")),
        };
        let settings = NapiSettings {
            defer_hard_irqs: DEFER_HARD_IRQS,
            gro_flush_timeout_ns: config.gro_flush_timeout_ns,
            irq_suspend_timeout_ns: 0,
        };
        let tuning = match NapiTuning::apply(napi_id, settings) {
            Ok(tuning) => tuning,
            Err(e) => return BusyPoll::Unavailable(e.to_string()),
        };
        match set_socket_options(fd, config.budget) {
            Ok(()) => BusyPoll::Active {
                napi_id,
                budget: config.budget,
                tuning,
            },
            Err(e) => BusyPoll::Unavailable(format!("busy-polling socket options: {e}")),
        }
    }

    pub fn is_active(&self) -> bool {
        matches!(self, BusyPoll::Active { .. })
    }

    /// One line for the log and `polld ifconfig`.
    pub fn describe(&self) -> String {
        match self {
            BusyPoll::Active {
                napi_id, budget, ..
            } => format!("preferred busy polling of NAPI {napi_id}, budget {budget}"),
            BusyPoll::Unavailable(why) => format!("no preferred busy polling: {why}"),
        }
    }
}

/// A NAPI instance's settings changed by polld; the old ones come back on drop.
#[derive(Debug)]
pub struct NapiTuning {
    id: u32,
    saved: NapiSettings,
}

impl NapiTuning {
    /// Saves NAPI `id`'s settings and writes `settings` (in the calling thread's namespace).
    pub fn apply(id: u32, settings: NapiSettings) -> Result<NapiTuning, napi::NapiError> {
        let saved = napi::napi_get(id)?.settings.ok_or_else(|| {
            napi::NapiError(format!(
                "NAPI {id}: the kernel reports no per-NAPI settings (needs Linux 6.13 or later)"
            ))
        })?;
        napi::napi_set(id, &settings)?;
        Ok(NapiTuning { id, saved })
    }
}

impl Drop for NapiTuning {
    fn drop(&mut self) {
        if let Err(e) = napi::napi_set(self.id, &self.saved) {
            eprintln!(
                "polld: could not restore the settings of NAPI {}: {e}",
                self.id
            );
        }
    }
}

fn getsockopt_int(fd: RawFd, name: libc::c_int) -> io::Result<u32> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value as u32)
}

fn setsockopt_int(fd: RawFd, name: libc::c_int, value: u32) -> io::Result<()> {
    let value = value as libc::c_int;
    // SAFETY: setsockopt reads an int from `value`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The NAPI id of the queue socket `fd` receives from (0: none).
pub fn incoming_napi_id(fd: RawFd) -> io::Result<u32> {
    getsockopt_int(fd, SO_INCOMING_NAPI_ID)
}

/// Sets `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` and `SO_BUSY_POLL_BUDGET = budget` on `fd`
/// (raising the last two needs CAP_NET_ADMIN).
pub fn set_socket_options(fd: RawFd, budget: u16) -> io::Result<()> {
    setsockopt_int(fd, SO_PREFER_BUSY_POLL, 1)?;
    setsockopt_int(fd, SO_BUSY_POLL, BUSY_POLL_USECS)?;
    setsockopt_int(fd, SO_BUSY_POLL_BUDGET, u32::from(budget))
}

/// The busy-polling options of `fd`.
pub fn socket_options(fd: RawFd) -> io::Result<SocketBusyPoll> {
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
    fn the_budget_is_the_chunk_and_the_timeout_two_ticks() {
        let c = BusyPollConfig::for_polling(50, 1000);
        assert_eq!(c.budget, 50);
        assert_eq!(c.gro_flush_timeout_ns, 2_000_000);
        assert_eq!(BusyPollConfig::for_polling(100_000, 100).budget, u16::MAX);
    }
}
