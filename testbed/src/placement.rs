//! Where each veth's receive work runs (docs/linux-mapping.md, "Where veth does its work").
//!
//! By default veth delivers into the backlog of the *sending* CPU, so the forwarder's
//! receive work (fwd/veth1) would run on the generator's CPU and share it with the
//! generator, capping the rate at what one CPU does for both (docs/measuring.md
//! §tb-placement). Placement moves each veth's receive work to the CPU of the namespace that
//! receives: veth0 to gen's CPU, veth1 and veth2 to fwd's, veth3 to sink's.
//!
//! - [`Placement::NapiThreaded`] (the default): the receive work runs in a NAPI kthread
//!   pinned to the receiver's CPU. It moves the work for AF_PACKET receivers *and* for
//!   XDP/AF_XDP ones (XDP runs inside NAPI, before RPS could act). Steps per receiving
//!   veth: `ethtool -K <rx> gro on` (veth only has NAPI with GRO or XDP; TSO is already
//!   off on every veth, which veth's NAPI path also needs, baseline fact 2),
//!   `gro_max_size 0` (no GRO merging: frames stay wire-sized, so a user-space forwarder
//!   never receives a 64 KB TCP super-frame), `threaded = 1` (baseline fact 3), then the
//!   kthread is pinned.
//! - [`Placement::Rps`]: `rps_cpus` of each veth names the receiver's CPU. Moves the
//!   backlog work (kernel forwarding, AF_PACKET) but not XDP: an XDP program runs in
//!   veth's NAPI poll, which RPS does not move (it runs on the sending CPU, fact 3).
//! - [`Placement::None`]: the kernel default, everything on the sending CPU.
//!
//! What could not be applied is reported, never skipped silently: napi-threaded falls
//! back to RPS on an interface where a step fails, and with fewer than two CPUs nothing
//! is moved (there is nowhere to move it).
//!
//! *The output's receiver first* (`UpOptions::sink_rx_realtime`, napi-threaded only): the
//! sink's NAPI kthread (sink/veth3, on the forwarder's CPU) runs `SCHED_FIFO` one step
//! above polld's realtime poll thread. A NIC transmits what a forwarder queues without the
//! forwarder's CPU; on veth the "wire" is the peer's NAPI thread, and at `SCHED_OTHER` it
//! runs only when the realtime forwarder sleeps, so the output's 256-slot ring fills
//! within one poll cycle and the forwarder must sleep on a timer until it drains. With it
//! the frames leave as they are sent. Its work is bounded by what fwd sends, so it cannot
//! starve the CPU the way a realtime *input* thread under a flood would (receive livelock).
//!
//! *A realtime path for a latency measurement* ([`RealtimeRx`], for as long as it lives):
//! the kthreads of fwd and sink run `SCHED_FIFO` below polld's poll thread, whose tick must
//! still preempt the receive work as a clock interrupt does. At `SCHED_OTHER` a woken
//! receive thread waits for whatever ordinary task holds its CPU (docs/measuring.md
//! §tb-placement); at a latency measurement's rate the realtime input thread has little to
//! do, so it starves nothing.

use serde::Serialize;

use crate::layout::{Devices, Iface, Layout, Role};
use crate::napi::napi_of;
use crate::sys::{self, allowed_cpus, check_cpu, cpu_list, cpu_mask};
use crate::TestbedError;

/// How receive work is placed on CPUs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Threaded NAPI, kthread pinned to the receiver's CPU (AF_PACKET and AF_XDP).
    #[default]
    NapiThreaded,
    /// RPS to the receiver's CPU (kernel forwarding and AF_PACKET; not XDP).
    Rps,
    /// Kernel default: receive work runs on the sending CPU.
    None,
}

impl Placement {
    pub fn name(self) -> &'static str {
        match self {
            Placement::NapiThreaded => "napi-threaded",
            Placement::Rps => "rps",
            Placement::None => "none",
        }
    }
}

/// Which CPU each namespace's work belongs on. The default follows the baseline: the
/// generator on CPU0, the forwarder and the sink on CPU1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CpuPlan {
    pub gen: usize,
    pub fwd: usize,
    pub sink: usize,
}

impl Default for CpuPlan {
    fn default() -> CpuPlan {
        CpuPlan {
            gen: 0,
            fwd: 1,
            sink: 1,
        }
    }
}

impl CpuPlan {
    pub fn cpu(&self, role: Role) -> usize {
        match role {
            Role::Gen => self.gen,
            Role::Fwd => self.fwd,
            Role::Sink => self.sink,
        }
    }

    /// Fails naming the option when a CPU is not one this process may use.
    pub fn check(&self) -> Result<(), TestbedError> {
        for role in Role::ALL {
            check_cpu(self.cpu(role), &format!("--{}-cpu", role.base_name()))?;
        }
        Ok(())
    }
}

/// What was applied on one receiving veth.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IfacePlacement {
    pub ns: String,
    pub iface: String,
    /// The CPU its receive work was moved to; `None` when it was not moved.
    pub cpu: Option<usize>,
    pub applied: Placement,
    /// What was done, or why the requested placement could not be.
    pub detail: String,
}

/// What `up` applied, per interface, and every warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlacementReport {
    pub requested: Placement,
    pub cpus: CpuPlan,
    pub interfaces: Vec<IfacePlacement>,
    /// Everything that differs from the request, in words.
    pub warnings: Vec<String>,
}

/// The sink's NAPI kthread's `SCHED_FIFO` priority with `sink_rx_realtime`: one above
/// polld's realtime poll thread (50, polld-runtime's `make_realtime`).
pub const SINK_RX_PRIORITY: i32 = 51;

/// The placement `up` will apply, decided before anything is created.
#[derive(Clone, Debug)]
pub(crate) struct Decision {
    requested: Placement,
    effective: Placement,
    cpus: CpuPlan,
    /// The sink's NAPI kthread runs `SCHED_FIFO` [`SINK_RX_PRIORITY`].
    sink_rx_realtime: bool,
    warnings: Vec<String>,
}

/// Decides what can be applied: with fewer than two CPUs nothing can move (a warning
/// says so); otherwise the CPU plan must name CPUs this process may use.
pub(crate) fn decide(
    requested: Placement,
    cpus: CpuPlan,
    sink_rx_realtime: bool,
) -> Result<Decision, TestbedError> {
    let allowed = allowed_cpus();
    let mut decision = Decision {
        requested,
        effective: requested,
        cpus,
        sink_rx_realtime,
        warnings: Vec::new(),
    };
    if requested != Placement::None && allowed.len() < 2 {
        decision.warnings.push(format!(
            "only one CPU ({}) is available: receive work cannot move to another CPU, \
             placement none is in force",
            cpu_list(&allowed)
        ));
        decision.effective = Placement::None;
    }
    if decision.effective != Placement::None {
        cpus.check()?;
    }
    Ok(decision)
}

/// Applies a decision to every veth of `layout` (already up); what fails is reported.
pub(crate) fn apply(layout: &Layout, decision: Decision) -> PlacementReport {
    let Decision {
        requested,
        effective,
        cpus,
        sink_rx_realtime,
        warnings,
    } = decision;
    let mut report = PlacementReport {
        requested,
        cpus,
        interfaces: Vec::new(),
        warnings,
    };
    for iface in layout.kernel_ifaces() {
        let cpu = cpus.cpu(iface.role);
        let placed = match effective {
            // Nothing to move: a TAP's receive work is its reader's read() and writer's
            // write() (polld's, or qemu's for a guest's NIC), on their own CPUs.
            _ if layout.devices != Devices::Veth => unplaced(
                iface,
                "TAP: receive work runs in the reader's read() and the writer's write()"
                    .to_string(),
            ),
            Placement::None => IfacePlacement {
                ns: iface.ns.clone(),
                iface: iface.name.clone(),
                cpu: None,
                applied: Placement::None,
                detail: "receive work runs on the sending CPU (veth backlog)".to_string(),
            },
            Placement::Rps => place_rps(iface, cpu).unwrap_or_else(|e| {
                report
                    .warnings
                    .push(format!("{}/{}: RPS not applied: {e}", iface.ns, iface.name));
                unplaced(iface, format!("RPS failed: {e}"))
            }),
            Placement::NapiThreaded => {
                let realtime = sink_rx_realtime && iface.role == Role::Sink;
                match place_napi_threaded(iface, cpu, realtime) {
                    Ok(placed) => placed,
                    Err(napi_error) => {
                        let fallback = place_rps(iface, cpu);
                        let (placed, outcome) = match fallback {
                        Ok(mut placed) => {
                            placed.detail =
                                format!("napi-threaded failed ({napi_error}); {}", placed.detail);
                            (placed, "RPS applied instead".to_string())
                        }
                        Err(rps_error) => (
                            unplaced(
                                iface,
                                format!("napi-threaded failed ({napi_error}); RPS failed ({rps_error})"),
                            ),
                            format!("RPS failed too ({rps_error}): not moved"),
                        ),
                    };
                        report.warnings.push(format!(
                            "{}/{}: napi-threaded not applied: {napi_error}; {outcome}",
                            iface.ns, iface.name
                        ));
                        placed
                    }
                }
            }
        };
        report.interfaces.push(placed);
    }
    let sink_placed = report
        .interfaces
        .iter()
        .any(|i| i.applied == Placement::NapiThreaded && i.ns == layout.sink_ns);
    if sink_rx_realtime && (layout.devices != Devices::Veth || !sink_placed) {
        report.warnings.push(
            "sink rx realtime not applied: it needs the napi-threaded placement on veth"
                .to_string(),
        );
    }
    report
}

fn unplaced(iface: &Iface, detail: String) -> IfacePlacement {
    IfacePlacement {
        ns: iface.ns.clone(),
        iface: iface.name.clone(),
        cpu: None,
        applied: Placement::None,
        detail,
    }
}

pub(crate) fn rps_cpus_path(iface: &str) -> String {
    format!("/sys/class/net/{iface}/queues/rx-0/rps_cpus")
}

pub(crate) fn threaded_path(iface: &str) -> String {
    format!("/sys/class/net/{iface}/threaded")
}

/// Sets the RPS mask of the veth's receive queue (a veth created by `ip link add` has one).
fn place_rps(iface: &Iface, cpu: usize) -> Result<IfacePlacement, TestbedError> {
    let mask = cpu_mask(cpu);
    sys::write_file_in(&iface.ns, &rps_cpus_path(&iface.name), &mask)?;
    Ok(IfacePlacement {
        ns: iface.ns.clone(),
        iface: iface.name.clone(),
        cpu: Some(cpu),
        applied: Placement::Rps,
        detail: format!("rps_cpus = {mask}"),
    })
}

/// Threaded NAPI on `iface`, its kthreads pinned to `cpu`, and `SCHED_FIFO`
/// [`SINK_RX_PRIORITY`] when `realtime`.
fn place_napi_threaded(
    iface: &Iface,
    cpu: usize,
    realtime: bool,
) -> Result<IfacePlacement, TestbedError> {
    sys::exec_in(&iface.ns, "ethtool", &["-K", &iface.name, "gro", "on"])?;
    sys::ip_in(
        &iface.ns,
        &["link", "set", &iface.name, "gro_max_size", "0"],
    )?;
    sys::write_file_in(&iface.ns, &threaded_path(&iface.name), "1")?;
    let napis = napi_of(&iface.ns, &iface.name)?;
    let mut threads = Vec::new();
    for napi in &napis {
        let pid = napi.pid.ok_or_else(|| {
            TestbedError::Failed(format!(
                "NAPI {} has no kthread although threaded is 1",
                napi.id
            ))
        })?;
        sys::pin(pid as libc::pid_t, cpu).map_err(|e| {
            TestbedError::Failed(format!("cannot pin NAPI kthread {pid} to CPU {cpu}: {e}"))
        })?;
        let mut thread = format!("napi/{}-{} (pid {pid})", iface.name, napi.id);
        if realtime {
            sys::make_fifo(pid as libc::pid_t, SINK_RX_PRIORITY).map_err(|e| {
                TestbedError::Failed(format!(
                    "cannot make NAPI kthread {pid} SCHED_FIFO {SINK_RX_PRIORITY}: {e}"
                ))
            })?;
            thread.push_str(&format!(" SCHED_FIFO {SINK_RX_PRIORITY}"));
        }
        threads.push(thread);
    }
    if threads.is_empty() {
        return Err(TestbedError::Failed(
            "no NAPI instance after enabling GRO".to_string(),
        ));
    }
    Ok(IfacePlacement {
        ns: iface.ns.clone(),
        iface: iface.name.clone(),
        cpu: Some(cpu),
        applied: Placement::NapiThreaded,
        detail: format!("{} pinned to CPU {cpu}", threads.join(", ")),
    })
}

/// The `SCHED_FIFO` priority [`RealtimeRx`] gives the receive kthreads: below polld's poll
/// thread (50, polld-runtime's `make_realtime`).
pub const RX_FIFO_PRIORITY: i32 = 40;

/// Runs the receive kthreads (threaded NAPI) of some namespaces' interfaces at
/// `SCHED_FIFO` [`RX_FIFO_PRIORITY`] until dropped, then as they ran before.
#[derive(Debug)]
pub struct RealtimeRx {
    /// Each raised kthread and its policy and priority before.
    raised: Vec<(libc::pid_t, (libc::c_int, i32))>,
}

impl RealtimeRx {
    /// Raises the NAPI kthreads of every interface in the namespaces of `roles`; fails,
    /// naming the interface, when one has none (placement other than napi-threaded).
    pub fn raise(layout: &Layout, roles: &[Role]) -> Result<RealtimeRx, TestbedError> {
        let mut rx = RealtimeRx { raised: Vec::new() };
        for iface in layout.kernel_ifaces() {
            if !roles.contains(&iface.role) {
                continue;
            }
            let napis = napi_of(&iface.ns, &iface.name)?;
            let pids: Vec<_> = napis.iter().filter_map(|n| n.pid).collect();
            if pids.is_empty() {
                return Err(TestbedError::Failed(format!(
                    "{}/{} has no NAPI kthread to run at SCHED_FIFO: bring the testbed up with \
                     placement napi-threaded",
                    iface.ns, iface.name
                )));
            }
            for pid in pids {
                let pid = pid as libc::pid_t;
                let failed = |e: std::io::Error| {
                    TestbedError::Failed(format!(
                        "cannot make the NAPI kthread {pid} of {}/{} SCHED_FIFO {RX_FIFO_PRIORITY}: {e}",
                        iface.ns, iface.name
                    ))
                };
                let before = sys::scheduler_of(pid).map_err(failed)?;
                sys::make_fifo(pid, RX_FIFO_PRIORITY).map_err(failed)?;
                rx.raised.push((pid, before));
            }
        }
        Ok(rx)
    }
}

impl Drop for RealtimeRx {
    fn drop(&mut self) {
        for &(pid, before) in &self.raised {
            // A kthread gone with its interface needs nothing back.
            if let Err(e) = sys::set_scheduler(pid, before) {
                if e.raw_os_error() != Some(libc::ESRCH) {
                    log::warn!("cannot give NAPI kthread {pid} its scheduling policy back: {e}");
                }
            }
        }
    }
}
