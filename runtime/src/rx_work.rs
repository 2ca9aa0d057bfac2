//! Where the daemon's interfaces' receive work runs, and what it costs outside polld.
//!
//! The work a frame costs before polld sees it is polld's own, inside its budget, only
//! where polld's thread does it: TAP (the `read()` is the receive) and AF_XDP under
//! preferred busy polling. Elsewhere (AF_PACKET, AF_XDP on veth or in copy mode) it runs
//! in the kernel's threaded-NAPI kthreads or in softirq. [`RxOwner`] records which, at
//! open; [`kernel_rx_status`] finds those kthreads again at each answer (an interface
//! can be deleted and re-added) and reads their CPU time, which `polld stat`, `/metrics`
//! and `polld ifconfig` show beside polld's own.

use polld_control::answer::KernelRxStatus;
use polld_control::proto::RxWork;
use polld_dev::kernel_rx::{self, RxCpuTime};

/// Who does an interface's receive work, as decided when it was opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RxOwner {
    /// polld's thread, inside its budget: how.
    Polld(String),
    /// The kernel, outside polld's budget: why polld cannot take it in.
    Kernel(String),
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
        .filter(|(_, owner)| matches!(owner, RxOwner::Kernel(_)))
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
    match owner {
        RxOwner::Polld(how) => RxWork {
            in_budget: true,
            runs_in: how.clone(),
            why_not: None,
        },
        RxOwner::Kernel(why) => RxWork {
            in_budget: false,
            runs_in: kernel_rx::RxWork::find(name).describe(),
            why_not: Some(why.clone()),
        },
    }
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
