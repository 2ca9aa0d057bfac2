//! Where the daemon's interfaces' receive work runs, and what it costs outside polld.
//!
//! The work a frame costs before polld sees it is polld's own, inside its budget, only
//! where polld's thread does it: TAP (the `read()` is the receive) and AF_XDP under
//! preferred busy polling. Elsewhere (AF_PACKET, AF_XDP on veth or in copy mode) it runs
//! in the kernel's threaded-NAPI kthreads or in softirq. [`RxOwner`] records which, at
//! open; [`kernel_rx_status`] finds those kthreads again at each answer (an interface
//! can be deleted and re-added) and reads their CPU time, which `polld stat`, `/metrics`
//! and `polld ifconfig` show beside polld's own.

use polld_control::daemon::KernelRxStatus;
use polld_control::proto::{BusyPollLine, RxWork};
use polld_dev::busy_poll::BusyPoll;
use polld_dev::kernel_rx::{self, RxCpuTime};

/// Who does an interface's receive work: decided when it was opened, or, for AF_XDP,
/// by its preferred busy polling as it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RxOwner {
    /// polld's thread, inside its budget: how.
    Polld(String),
    /// The kernel, outside polld's budget: why polld cannot take it in.
    Kernel(String),
    /// polld's thread while preferred busy polling is on, else the kernel.
    BusyPoll(BusyPoll),
}

impl RxOwner {
    /// Whether the receive work is in polld's budget now.
    pub fn in_budget(&self) -> bool {
        match self {
            RxOwner::Polld(_) => true,
            RxOwner::Kernel(_) => false,
            RxOwner::BusyPoll(busy) => busy.polls_napi(),
        }
    }

    /// The interface's preferred busy polling, where it has one.
    pub fn busy_poll(&self) -> Option<&BusyPoll> {
        match self {
            RxOwner::BusyPoll(busy) => Some(busy),
            _ => None,
        }
    }
}

impl Default for RxOwner {
    fn default() -> Self {
        RxOwner::Kernel("unknown backend".to_string())
    }
}

/// The kernel receive threads of the interfaces polld does not own the receive work of,
/// and their CPU time now; `cpu` is the poll thread's CPU when it is pinned.
pub fn kernel_rx_status<'a>(
    interfaces: impl Iterator<Item = (&'a str, &'a RxOwner)>,
    cpu: Option<usize>,
) -> KernelRxStatus {
    let works: Vec<kernel_rx::RxWork> = interfaces
        .filter(|(_, owner)| !owner.in_budget())
        .map(|(name, _)| kernel_rx::RxWork::find(name))
        .collect();
    let time = RxCpuTime::read(&works, cpu);
    let threads: Vec<String> = works
        .iter()
        .flat_map(|w| w.threads.iter().map(|t| t.to_string()))
        .collect();
    let found_by = if works.is_empty() {
        "none"
    } else if works
        .iter()
        .all(|w| w.found_by == kernel_rx::FoundBy::Netlink)
    {
        kernel_rx::FoundBy::Netlink.name()
    } else {
        kernel_rx::FoundBy::ThreadName.name()
    };
    KernelRxStatus {
        ns: time.total_ns,
        on_cpu_ns: time.on_cpu_ns,
        threads: threads.join(", "),
        elsewhere: time.elsewhere.join(", "),
        found_by: found_by.to_string(),
    }
}

/// Interface `name`'s receive work for `polld ifconfig`.
pub fn rx_work(name: &str, owner: &RxOwner) -> RxWork {
    let in_kernel = |why: &str| RxWork {
        in_budget: false,
        runs_in: kernel_rx::RxWork::find(name).describe(),
        why_not: Some(why.to_string()),
    };
    match owner {
        RxOwner::Polld(how) => RxWork {
            in_budget: true,
            runs_in: how.clone(),
            why_not: None,
        },
        RxOwner::Kernel(why) => in_kernel(why),
        RxOwner::BusyPoll(busy) => {
            let status = busy.status();
            if status.in_budget {
                RxWork {
                    in_budget: true,
                    runs_in: status.detail,
                    why_not: None,
                }
            } else {
                in_kernel(&format!("no preferred busy polling: {}", status.detail))
            }
        }
    }
}

/// What `polld ifconfig` says of an interface's preferred busy polling.
pub fn busy_poll_line(owner: &RxOwner) -> Option<BusyPollLine> {
    let status = owner.busy_poll()?.status();
    Some(BusyPollLine {
        path: status.path_name().to_string(),
        napi_id: status.napi_id,
        detail: status.detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_receive_work_is_in_budget_and_says_how() {
        let work = rx_work("tap0", &RxOwner::Polld("polld's read() of the TAP".into()));
        assert!(work.in_budget);
        assert_eq!(work.runs_in, "polld's read() of the TAP");
        assert_eq!(work.why_not, None);
    }

    #[test]
    fn only_interfaces_the_kernel_serves_are_looked_for() {
        let owner = RxOwner::Polld("busy polling".into());
        let status = kernel_rx_status([("nosuch0", &owner)].into_iter(), Some(1));
        assert_eq!(
            status,
            KernelRxStatus {
                found_by: "none".into(),
                ..KernelRxStatus::default()
            }
        );
    }
}
