//! Answering the control socket on the poll thread: `polld ctl`'s lists, writes and
//! snapshots, `polld ifconfig`'s interfaces and the pages of `polld netstat -rn`, against the dataplane and the daemon's
//! own `polld.*` entries.

use polld_control::answer as control;
use polld_control::daemon::DaemonStatus;
use polld_control::proto::{IfStatus, Request, Response};

use super::{IfInfo, PollThread, RealDataplane};
use crate::rx_work;
use crate::sys::now_ns;

impl PollThread {
    pub(super) fn answer_control(&mut self, dp: &mut RealDataplane) {
        let Some(inbox) = self.inbox.take() else {
            return;
        };
        let status = self.daemon_status(dp);
        inbox.answer_pending(&mut |req| answer(dp, &self.info, &status, req));
        self.inbox = Some(inbox);
    }

    /// The `polld.*` entries as of now.
    fn daemon_status(&self, dp: &RealDataplane) -> DaemonStatus {
        let interfaces = self.info.iter().map(|i| (i.name.as_str(), &i.rx_owner));
        DaemonStatus {
            config: self.daemon.config.clone(),
            pid: std::process::id(),
            cpu: self
                .daemon
                .pinned_cpu
                .or_else(|| Some(rustix::thread::sched_getcpu())),
            cpu_pinned: self.daemon.pinned_cpu.is_some(),
            clock_ns: now_ns(),
            work_ns: self.accounts.work_ns,
            busy_poll_ns: self.accounts.busy_poll_ns,
            idle_poll_ns: self.accounts.idle_poll_ns,
            thread_cpu_ns: polld_dev::clock::thread_cpu_ns(),
            tick_lateness: self.lateness.summary(),
            kernel_rx: rx_work::kernel_rx_status(interfaces, self.daemon.pinned_cpu),
            defaults: self.daemon.defaults.clone(),
            device_interrupts: (0..self.info.len())
                .filter_map(|i| {
                    let counted = self.device_irqs.get(i)?.clone();
                    Some((dp.interfaces()[i].dev().name().to_string(), counted))
                })
                .collect(),
            reload: crate::reload::status(),
            tables: self.tables.as_ref().map(|t| t.state()).unwrap_or_default(),
        }
    }
}

/// Answers one control request against the dataplane.
fn answer(
    dp: &mut RealDataplane,
    info: &[IfInfo],
    status: &DaemonStatus,
    req: Request,
) -> Response {
    match req {
        Request::List { prefix } => control::list(dp, Some(status), &prefix),
        Request::Set { assignments } => control::set(dp, &assignments),
        Request::Snapshot => control::snapshot(dp, Some(status)),
        Request::Interfaces => Response::Interfaces {
            interfaces: interfaces(dp, info, Some(status)),
        },
        Request::Table { table, from, limit } => {
            let names: Vec<String> = dp
                .interfaces()
                .iter()
                .map(|i| i.dev().name().to_string())
                .collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            match dp.stage() {
                polld_packet::Stage::Router(router) => {
                    let updated = router.kernel_tables().then_some(status.tables.time_s);
                    let page = crate::netstat::page(router, &names, table, from, limit, updated);
                    Response::Table { page }
                }
                _ => Response::Error {
                    message: "polld runs as a bridge (mode = \"bridge\"): it holds no routes \
                              and no neighbours"
                        .to_string(),
                },
            }
        }
    }
}

/// What `polld ifconfig` says of interface `i`'s UMEM now: the shared UMEM it was opened
/// with is gone once the interface was reopened (it gets its own).
fn umem_now(dp: &RealDataplane, i: usize, opened_with: String) -> String {
    let lends = dp.capabilities(i).pool.is_some();
    if lends || opened_with == "own" {
        opened_with
    } else {
        "own".to_string()
    }
}

/// Every interface as `polld ifconfig` shows it; its device's interrupts from `daemon`.
pub fn interfaces(
    dp: &mut RealDataplane,
    info: &[IfInfo],
    daemon: Option<&DaemonStatus>,
) -> Vec<IfStatus> {
    (0..dp.interfaces().len())
        .map(|i| {
            let info = info.get(i).cloned().unwrap_or_default();
            let mut status =
                control::interface_status(dp, i, &info.backend, info.mac, info.addresses);
            status.rx_work = Some(rx_work::rx_work(&status.name, &info.rx_owner));
            status.busy_poll = rx_work::busy_poll_line(&info.rx_owner);
            status.device_interrupts = daemon.and_then(|d| {
                let (_, irqs) = d
                    .device_interrupts
                    .iter()
                    .find(|(n, _)| *n == status.name)?;
                Some(irqs.clone())
            });
            status.umem = info.umem.map(|umem| umem_now(dp, i, umem));
            if let polld_packet::Stage::Router(router) = dp.stage() {
                let kernel = router.kernel_tables();
                status.tables = Some(if kernel { "kernel" } else { "file" }.to_string());
                let now = router.addresses().swap_remove(i);
                status.addresses = now.iter().map(|a| a.to_string()).collect();
            }
            status
        })
        .collect()
}
