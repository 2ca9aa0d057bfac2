//! `polld run -c FILE`: set-up in the order privileges demand, then the executor.
//!
//! 1. enter the network namespace; read and validate the config (errors at file:line);
//! 2. [`crate::check::preflight`]: capabilities, interfaces, queues, CPU, realtime, the
//!    control socket (`--check` adds the stage, modes and knobs on unopened devices, and
//!    stops there); block SIGINT/SIGTERM;
//! 3. open the devices, build the packet stage and the dataplane, set modes and knobs;
//! 4. pin and raise the poll thread, drop every capability not needed to reopen an
//!    interface, start the reopen thread ([`polld_middleware::reopen`]) and the control socket;
//! 5. run until SIGINT/SIGTERM (SIGHUP applies the file's modes and knobs anew,
//!    [`crate::reload`]); drain, print the counters, exit 0.

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use polld_control::metrics::MetricsServer;
use polld_control::proto::IfStatus;
use polld_control::server::{ControlServer, Inbox};
use polld_core::{Dataplane, Device, IfCounters, Knobs, Poller};
use polld_dev::afpacket::{AfPacket, AfPacketConfig};
use polld_dev::afxdp::{AfXdp, AfXdpConfig, SharedUmem};
use polld_dev::busy_poll::{BusyPoll, BusyPollConfig};
use polld_dev::error::OpenError;
use polld_dev::iface::Namespace;
use polld_dev::irq::DeviceIrqs;
use polld_dev::irq_defer;
use polld_dev::tap::Tap;
use polld_middleware::reopen::{Opened, Opener};
use polld_middleware::{FaultInjector, PcapWriter, Reopener};
use polld_packet::{PacketDrop, Stage};

use crate::caps::{self, Cap, CapSet};
use crate::check;
use crate::config::{check_shared_umem, Backend, DeviceConfig, RunConfig, RunConfigErrors};
use crate::executor::{self, DaemonInfo, Executor, IfInfo, RealDataplane};
use crate::queues::QueueGroups;
use crate::reload::{self, Reloader};
use crate::rx_work::RxOwner;
use crate::sys;

/// `polld run` options.
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// The configuration file (TOML): interfaces, backends, modes, addresses, routes, knobs.
    #[arg(short = 'c', long = "config")]
    pub config: PathBuf,
    /// Run inside this network namespace (as `ip netns exec NAME polld run ...`).
    #[arg(long)]
    pub netns: Option<String>,
    /// The control socket (overrides `[daemon] socket`).
    #[arg(long, env = "POLLD_SOCKET")]
    pub socket: Option<PathBuf>,
    /// Check the configuration and exit.
    #[arg(long)]
    pub check: bool,
    /// Print the final counters as JSON; with --check, the check's result (ok, what was
    /// checked, or the errors with their file, line, field, message and fix).
    #[arg(long)]
    pub json: bool,
    /// Record every interface's frames, received and sent, to PREFIX.IFNAME.pcap (classic
    /// pcap, readable by tcpdump -r); a write error stops that recording and is printed.
    #[arg(long, value_name = "PREFIX")]
    pub pcap: Option<String>,
    /// Overrides `[daemon] af_xdp_shared_umem`: whether the AF_XDP interfaces of a poll
    /// thread share one UMEM, so forwarded frames leave without a user-space copy.
    #[arg(long, value_name = "BOOL", env = "POLLD_AF_XDP_SHARED_UMEM")]
    pub af_xdp_shared_umem: Option<bool>,
}

/// Why `polld run` could not start or stopped with an error.
#[derive(Debug)]
pub enum RunError {
    /// Every mistake found in the configuration file, each at its line.
    Config(RunConfigErrors),
    Privileges(caps::MissingCaps),
    /// Anything else during set-up, with what was being done.
    Setup(String),
    Io(std::io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "{e}"),
            RunError::Privileges(e) => write!(f, "{e}"),
            RunError::Setup(s) => f.write_str(s),
            RunError::Io(e) => write!(f, "poll loop: {e}"),
        }
    }
}

impl std::error::Error for RunError {}

/// The capabilities set-up needs, with why.
pub(crate) fn needed_caps(config: &RunConfig) -> Vec<(Cap, String)> {
    let mut needed = Vec::new();
    for d in &config.devices {
        let why = |what: &str| format!("to {what} {} ({})", d.name, d.backend.name());
        match d.backend {
            Backend::AfPacket => needed.push((Cap::NetRaw, why("open"))),
            Backend::AfXdp => {
                needed.push((Cap::NetRaw, why("open an XDP socket on")));
                needed.push((Cap::Bpf, why("load the XDP redirect program for")));
                needed.push((Cap::NetAdmin, why("attach the XDP program to")));
            }
            Backend::Tap => needed.push((Cap::NetAdmin, why("create or attach"))),
        }
        if let Some(ns) = &d.netns {
            needed.push((
                Cap::SysAdmin,
                format!("to enter network namespace {ns:?} for {}", d.name),
            ));
        }
    }
    if config.daemon.realtime {
        needed.push((
            Cap::SysNice,
            "for `realtime = true` (SCHED_FIFO); or set it to false".to_string(),
        ));
    }
    needed
}

/// What must stay after set-up: reopening interfaces that disappear and return.
pub(crate) fn kept_caps(config: &RunConfig) -> CapSet {
    let mut keep = Vec::new();
    for d in &config.devices {
        match d.backend {
            Backend::AfPacket => keep.push(Cap::NetRaw),
            Backend::AfXdp => keep.extend([Cap::NetRaw, Cap::Bpf, Cap::NetAdmin]),
            Backend::Tap => keep.push(Cap::NetAdmin),
        }
        // Reopening an interface of another namespace enters that namespace again.
        if d.netns.is_some() {
            keep.push(Cap::SysAdmin);
        }
        // Reopening an AF_XDP interface split into queues registers a UMEM per queue at
        // once: without CAP_IPC_LOCK they count against RLIMIT_MEMLOCK (8 MiB here, one
        // UMEM) and the second fails with ENOBUFS. Kept if polld has it.
        let has_ipc_lock = || caps::effective().is_ok_and(|c| c.contains(Cap::IpcLock));
        if d.backend == Backend::AfXdp && !d.queues.is_empty() && has_ipc_lock() {
            keep.push(Cap::IpcLock);
        }
    }
    // Busy mode spins at SCHED_OTHER and the poll thread returns to SCHED_FIFO after
    // (see the executor's module doc).
    if config.daemon.realtime {
        keep.push(Cap::SysNice);
    }
    CapSet::of(&keep)
}

/// Whether a device is opened at start, or again after its interface went away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opening {
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

/// What opens interface `d` again once it went away, on the reopen thread; a queue of an
/// interface with several reopens through their group.
fn opener(d: &DeviceConfig, busy: &BusyPoll, groups: &QueueGroups) -> Opener {
    if let Some((group, k)) = groups.of(d) {
        return Box::new(move || group.take(k).map(|(dev, _)| dev));
    }
    let (d, busy) = (d.clone(), busy.clone());
    Box::new(move || {
        let netns = namespace_of(&d).map_err(|e| e.to_string())?;
        // The other members of a shared UMEM may still hold frames lent to the socket
        // this one replaces, so it gets a UMEM of its own.
        open_device(&d, netns, &busy, Opening::Again, None).map(|(dev, _)| dev)
    })
}

/// The preferred busy polling of an AF_XDP interface's sockets: polld's chunk as the
/// budget, the deferral written as `[daemon] irq_deferral` says. Kept across reopens.
pub(crate) fn busy_poll_of(config: &RunConfig, knobs: &Knobs) -> BusyPoll {
    BusyPoll::new(BusyPollConfig::for_polling(
        knobs.each_burst,
        knobs.hz,
        config.daemon.irq_deferral,
    ))
}

/// Opens interface `d` in `netns`, and says who will do its receive work. AF_XDP asks
/// for preferred busy polling (`busy`), and binds to `umem` when given. For a TAP, says
/// in the log whether it was created or attached to.
fn open_device(
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
            let config = afxdp_config(busy);
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

/// AF_XDP asks for preferred busy polling.
fn afxdp_config(busy: &BusyPoll) -> AfXdpConfig {
    AfXdpConfig {
        busy_poll: Some(busy.clone()),
        ..AfXdpConfig::default()
    }
}

fn afpacket_rx_owner() -> RxOwner {
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
                AfXdp::open_queues(&d.name, &d.queues, &afxdp_config(busy))
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

/// Wraps an opened device in the middleware asked for: the fault injector of
/// `[interfaces.fault]`, then the pcap writer of `--pcap` (outermost, so the file holds
/// the frames the dataplane saw and counted).
fn wrap_device(
    mut dev: Box<dyn Device>,
    d: &DeviceConfig,
    pcap: Option<&str>,
) -> Result<Box<dyn Device>, String> {
    if let Some(fault) = d.fault {
        dev = Box::new(FaultInjector::new(dev, fault).map_err(|e| format!("{}: {e}", d.name))?);
    }
    if let Some(prefix) = pcap {
        let path = PathBuf::from(format!("{prefix}.{}.pcap", d.name));
        let file = std::fs::File::create(&path).map_err(|e| {
            format!(
                "--pcap: cannot create {}: {e}; give a PREFIX in a writable directory",
                path.display()
            )
        })?;
        let out = PcapFile {
            path: path.clone(),
            file: std::io::BufWriter::new(file),
        };
        let wall_clock = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |t| t.as_nanos() as u64)
        };
        let writer = PcapWriter::new(dev, out, Box::new(wall_clock))
            .map_err(|e| format!("--pcap: cannot write {}: {e}", path.display()))?;
        dev = Box::new(writer);
    }
    Ok(dev)
}

/// A `--pcap` file: says on stderr when a write fails (the recording stops there, the
/// forwarding goes on).
struct PcapFile {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl PcapFile {
    fn report<T>(&self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result {
            log::error!(
                "--pcap {}: {e}; the recording of this interface stops here",
                self.path.display()
            );
        }
        result
    }
}

impl Write for PcapFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.file.write(buf);
        self.report(result)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.file.flush();
        self.report(result)
    }
}

/// The `kern.polling.*` knobs the config file sets, on top of its profile's: what the
/// devices are opened with. A refused or foreign entry is skipped here: the dataplane
/// applies the whole `[knobs]` table afterwards and reports it with its line.
pub(crate) fn configured_knobs(config: &RunConfig) -> Knobs {
    let mut knobs = config.profile.knobs();
    for k in &config.knobs {
        if Poller::is_declared(&k.name) {
            let _ = knobs.set(&k.name, &k.value);
        }
    }
    knobs
}

/// Runs `polld run`; returns once stopped by a signal.
pub fn run(args: &RunArgs, out: &mut dyn Write) -> Result<(), RunError> {
    // First, so that the config's default MACs are the namespace's interfaces'.
    if let Some(ns) = &args.netns {
        polld_dev::netns::enter(ns).map_err(|e| {
            RunError::Setup(format!(
                "cannot enter network namespace {ns:?}: {e}; list them with `ip netns list`"
            ))
        })?;
    }
    if args.check {
        let result = load(args).and_then(|(config, socket)| check::check(&config, &socket));
        check::print(&args.config, &result, args.json, out).map_err(RunError::Io)?;
        return result.map(drop);
    }
    let (config, socket) = load(args)?;
    check::preflight(&config, &socket)?;
    // Before any device is opened: what a polld killed by SIGKILL left changed.
    for line in irq_defer::restore_leftovers() {
        eprintln!("polld: {line}");
    }
    // Before any thread exists, so every thread inherits the mask.
    reload::block_hangup().map_err(RunError::Io)?;
    let signals = sys::Signals::block_stop_signals().map_err(RunError::Io)?;

    if !config.daemon.cpus.is_empty() {
        return crate::percpu::run(&config, args, &socket, signals, out);
    }
    let (dp, defaults, info, mut reopener) =
        open_dataplane(&config, args.pcap.as_deref(), &QueueGroups::default())?;

    let policy = place_poll_thread(&config, config.daemon.cpu, &mut reopener)?;
    let (server, inbox, metrics) = start_control(&config, &socket)?;
    log::info!(
        "running {} interface(s) from {}; poll thread {policy}{}; control socket {}{}",
        config.devices.len(),
        config.path.display(),
        config
            .daemon
            .cpu
            .map(|c| format!(" on CPU {c}"))
            .unwrap_or_default(),
        socket.display(),
        metrics_line(&metrics),
    );
    let daemon = daemon_info(&config, config.daemon.cpu, defaults);
    let mut exec =
        Executor::new(dp, info.clone(), daemon, signals, Some(inbox)).map_err(RunError::Io)?;
    let signal = exec.run().map_err(RunError::Io)?;
    drop(metrics);
    drop(server);
    report(
        &final_counters(exec.dataplane_mut(), &info),
        signal,
        args.json,
        out,
    )
    .map_err(RunError::Io)
}

/// The config file with the command line's overrides, and the control socket's path.
pub(crate) fn load(args: &RunArgs) -> Result<(RunConfig, PathBuf), RunError> {
    let mut config = RunConfig::load(&args.config).map_err(RunError::Config)?;
    if let Some(shared) = args.af_xdp_shared_umem {
        config.daemon.af_xdp_shared_umem = Some(shared);
        check_shared_umem(&config.daemon, &config.devices)
            .map_err(|e| RunError::Setup(format!("--af-xdp-shared-umem: {e}")))?;
    }
    let socket = args
        .socket
        .clone()
        .or(config.daemon.socket.clone())
        .unwrap_or_else(|| PathBuf::from(polld_control::client::DEFAULT_SOCKET));
    Ok((config, socket))
}

/// Pins the calling poll thread to `cpu`, makes it SCHED_FIFO if `realtime`, drops every
/// capability not needed to reopen an interface, and starts `reopener`'s thread with
/// what is left; returns the poll thread's policy's name.
pub(crate) fn place_poll_thread(
    config: &RunConfig,
    cpu: Option<usize>,
    reopener: &mut Reopener,
) -> Result<&'static str, RunError> {
    if let Some(cpu) = cpu {
        sys::pin_to_cpu(cpu).map_err(|e| {
            let what = if config.daemon.cpus.is_empty() {
                format!("[daemon] cpu = {cpu}")
            } else {
                format!("[daemon] cpus: CPU {cpu}")
            };
            RunError::Setup(check::cpu_error(&what, &e))
        })?;
    }
    let policy = if config.daemon.realtime {
        sys::make_realtime()
            .map_err(|e| RunError::Setup(format!("[daemon] realtime = true: {e}")))?;
        "SCHED_FIFO"
    } else {
        "SCHED_OTHER"
    };
    caps::drop_all_but(kept_caps(config))
        .map_err(|e| RunError::Setup(format!("dropping capabilities: {e}")))?;
    reopener
        .start()
        .map_err(|e| RunError::Setup(format!("starting the reopen thread: {e}")))?;
    Ok(policy)
}

/// What serves the running daemon beside the control socket: the metrics server if
/// `[daemon] metrics` asks for one, and the SIGHUP reload thread. Dropping it stops them.
pub(crate) struct Services {
    metrics: Option<MetricsServer>,
    _reload: Reloader,
}

/// The control socket and the [`Services`].
pub(crate) fn start_control(
    config: &RunConfig,
    socket: &Path,
) -> Result<(ControlServer, Inbox, Services), RunError> {
    let (server, inbox) = ControlServer::start(socket)
        .map_err(|e| RunError::Setup(format!("control socket: {e}")))?;
    if let Some(thread) = server.thread().filter(|_| config.daemon.realtime) {
        sys::make_control_realtime(thread)
            .map_err(|e| RunError::Setup(format!("[daemon] realtime = true: {e}")))?;
    }
    let metrics = match config.daemon.metrics {
        Some(addr) => Some(
            MetricsServer::start(addr, server.requester())
                .map_err(|e| RunError::Setup(format!("{}: {e}", config.path.display())))?,
        ),
        None => None,
    };
    let reload = Reloader::start(config, socket)
        .map_err(|e| RunError::Setup(format!("starting the SIGHUP reload thread: {e}")))?;
    // The devices are open and the socket answers: tell systemd (Type=notify).
    if let Err(e) = notify_ready() {
        log::warn!("NOTIFY_SOCKET: cannot send READY=1: {e}");
    }
    Ok((
        server,
        inbox,
        Services {
            metrics,
            _reload: reload,
        },
    ))
}

/// Sends READY=1 to the service manager's `$NOTIFY_SOCKET` (sd_notify(3)), a path or
/// an abstract name (`@name`); nothing when the variable is unset.
fn notify_ready() -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(());
    };
    let addr = match target.to_str().and_then(|t| t.strip_prefix('@')) {
        Some(name) => SocketAddr::from_abstract_name(name)?,
        None => SocketAddr::from_pathname(&target)?,
    };
    let message = format!("READY=1\nMAINPID={}\n", std::process::id());
    UnixDatagram::unbound()?.send_to_addr(message.as_bytes(), &addr)?;
    Ok(())
}

/// The end of the start-up line: where /metrics is served, if it is.
pub(crate) fn metrics_line(services: &Services) -> String {
    services
        .metrics
        .as_ref()
        .map(|m| format!("; metrics on http://{}/metrics", m.addr()))
        .unwrap_or_default()
}

/// What the executor reports about the daemon: the config (absolute, so that `polld ctl
/// --save` finds it from any directory), the pinned CPU, the defaults.
pub(crate) fn daemon_info(
    config: &RunConfig,
    pinned_cpu: Option<usize>,
    defaults: Defaults,
) -> DaemonInfo {
    DaemonInfo {
        config: std::fs::canonicalize(&config.path).unwrap_or_else(|_| config.path.clone()),
        pinned_cpu,
        realtime: config.daemon.realtime,
        defaults,
    }
}

/// Opens `config`'s interfaces and builds the dataplane on them; also the writable values
/// before the config was applied, what `polld ifconfig` shows of each interface, and the
/// reopener of the interfaces, to start once capabilities are dropped
/// ([`place_poll_thread`]). A queue of an interface with several comes from `groups`.
pub(crate) fn open_dataplane(
    config: &RunConfig,
    pcap: Option<&str>,
    groups: &QueueGroups,
) -> Result<(RealDataplane, Defaults, Vec<IfInfo>, Reopener), RunError> {
    let mut devices: Vec<Box<dyn Device>> = Vec::new();
    let mut rx_owners = Vec::new();
    let mut irqs = Vec::new();
    let knobs = configured_knobs(config);
    let reopener = Reopener::new();
    let (umem, umem_names) = shared_umem(config, pcap)?;
    for d in &config.devices {
        let i = d.entry;
        let fail = |key: &str, e: String| {
            RunError::Config(
                config
                    .error_at_field(
                        &format!("interfaces[{i}].{key}"),
                        format!("interfaces[{i}] ({}, {}): {e}", d.name, d.backend.name()),
                    )
                    .into(),
            )
        };
        // Only the interfaces the UMEM was sized for bind to it; the rest copy into their own.
        let member = umem.as_ref().filter(|_| umem_names.contains(&d.name));
        let netns = namespace_of(d).map_err(|e| fail("netns", e.to_string()))?;
        irqs.push(device_irqs(d, &netns));
        let busy = busy_poll_of(config, &knobs);
        let (dev, rx_owner) = match groups.of(d) {
            Some((group, k)) => group.take(k).map_err(|e| fail("name", e))?,
            None => {
                open_device(d, netns, &busy, Opening::Start, member).map_err(|e| fail("name", e))?
            }
        };
        let dev = Box::new(reopener.wrap(dev, opener(d, &busy, groups)));
        let dev = wrap_device(dev, d, pcap).map_err(RunError::Setup)?;
        devices.push(dev);
        rx_owners.push(rx_owner);
    }
    let (dp, defaults) = build_dataplane(config, devices)?;
    let info: Vec<IfInfo> = config
        .devices
        .iter()
        .zip(&config.packet.interfaces)
        .zip(rx_owners.into_iter().zip(irqs))
        .map(|((d, ifc), (rx_owner, irqs))| IfInfo {
            name: d.name.clone(),
            backend: d.backend.name().to_string(),
            rx_owner,
            irqs,
            umem: umem_line(d, &umem_names),
            mac: ifc.mac.map(|m| m.to_string()),
            addresses: ifc.addresses.iter().map(|a| a.to_string()).collect(),
        })
        .collect();
    Ok((dp, defaults, info, reopener))
}

/// Which of `/proc/interrupts`' vectors are interface `d`'s receive interrupts: its
/// AF_XDP queue's, every queue's for AF_PACKET; none for a TAP.
fn device_irqs(d: &DeviceConfig, netns: &Namespace) -> Option<DeviceIrqs> {
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

/// The UMEM this poll thread's AF_XDP interfaces share, when `[daemon]
/// af_xdp_shared_umem` is on and two or more of them would lend frames to each other,
/// with their names. None is allocated for fewer: its memory is populated at once.
fn shared_umem(
    config: &RunConfig,
    pcap: Option<&str>,
) -> Result<(Option<SharedUmem>, Vec<String>), RunError> {
    let af_xdp = |d: &&DeviceConfig| d.backend == Backend::AfXdp;
    let names: Vec<String> = config
        .devices
        .iter()
        .filter(af_xdp)
        // An interface split into queues opens its sockets together, each on its own UMEM;
        // a device wrapped by a middleware device (`--pcap`, faults) does not lend.
        .filter(|d| d.queues.is_empty() && d.fault.is_none() && pcap.is_none())
        .map(|d| d.name.clone())
        .collect();
    if !config.daemon.shared_umem() || names.len() < 2 {
        let candidates = config.devices.iter().filter(af_xdp).count();
        if config.daemon.af_xdp_shared_umem == Some(true) && candidates >= 2 {
            log::warn!(
                "af_xdp_shared_umem: {} of the {candidates} AF_XDP interfaces can lend \
                 frames (one split into queues, wrapped by --pcap or injecting faults copies \
                 them) and sharing needs two: each gets a UMEM of its own",
                names.len()
            );
        }
        return Ok((None, Vec::new()));
    }
    let umem = SharedUmem::new(names.len() as u32, &AfXdpConfig::default()).map_err(|e| {
        RunError::Setup(format!(
            "[daemon] af_xdp_shared_umem: {e}; or set af_xdp_shared_umem = false"
        ))
    })?;
    Ok((Some(umem), names))
}

/// What `polld ifconfig` says of interface `d`'s UMEM: shared with which interfaces, or
/// its own (AF_XDP only).
fn umem_line(d: &DeviceConfig, shared_by: &[String]) -> Option<String> {
    if d.backend != Backend::AfXdp {
        return None;
    }
    let others: Vec<&str> = shared_by
        .iter()
        .map(String::as_str)
        .filter(|n| *n != d.name)
        .collect();
    Some(if shared_by.contains(&d.name) {
        format!("shared with {}", others.join(", "))
    } else {
        "own".to_string()
    })
}

/// Each interface as `polld ifconfig` shows it, with its counters: what the final report
/// prints.
pub(crate) type FinalCounters = Vec<(IfStatus, IfCounters)>;

pub(crate) fn final_counters(dp: &mut RealDataplane, info: &[IfInfo]) -> FinalCounters {
    executor::interfaces(dp, info, None)
        .into_iter()
        .zip(dp.interfaces().iter().map(|i| i.counters()))
        .collect()
}

/// Each writable entry and its value before the config was applied.
pub(crate) type Defaults = Vec<(String, String)>;

/// The packet stage and the dataplane on `devices`, with the config's modes and knobs
/// applied in order; also the writable values before they were applied (the defaults).
pub(crate) fn build_dataplane<D: Device>(
    config: &RunConfig,
    devices: Vec<D>,
) -> Result<(Dataplane<D, Stage>, Defaults), RunError> {
    let names: Vec<&str> = config.devices.iter().map(|d| d.name.as_str()).collect();
    let mut stage = Stage::new(&config.packet, &names)
        .map_err(|e| RunError::Setup(format!("{}: {e}", config.path.display())))?;
    // IP timestamp options want milliseconds since midnight UT; the stage's clock is
    // the monotonic one.
    if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        let wall_ns = since_epoch.as_nanos() as u64;
        stage.set_utc_offset(wall_ns.wrapping_sub(polld_dev::clock::monotonic_ns()));
    }
    let mut dp = Dataplane::new(Poller::new(config.profile.knobs()), devices, stage);
    let defaults = polld_control::answer::writable_values(&dp);
    for (i, d) in config.devices.iter().enumerate() {
        dp.set_mode(i, d.mode)
            .map_err(|e| RunError::Setup(format!("{}: {}: {e}", config.path.display(), d.name)))?;
    }
    let writable: Vec<&str> = defaults.iter().map(|(name, _)| name.as_str()).collect();
    let refused: Vec<_> = config
        .knobs
        .iter()
        .filter_map(|knob| {
            let e = dp.sysctl_set(&knob.name, &knob.value).err()?;
            Some(config.knob_error(knob, &e, &writable))
        })
        .collect();
    if let Some(errors) = RunConfigErrors::new(refused) {
        return Err(RunError::Config(errors));
    }
    Ok((dp, defaults))
}

/// The final counters, and the conservation check per interface.
pub(crate) fn report(
    rows: &[(IfStatus, IfCounters)],
    signal: i32,
    json: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if json {
        let interfaces: Vec<&IfStatus> = rows.iter().map(|(s, _)| s).collect();
        serde_json::to_writer_pretty(&mut *out, &interfaces)?;
        return writeln!(out);
    }
    let name = if signal == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    writeln!(out, "polld: stopped by {name}; queues drained")?;
    for (status, c) in rows {
        writeln!(
            out,
            "{}: mode {} link {}  rx {}  forwarded {}  local {}  consumed {}  tx {}  interrupts {}  polls {}",
            status.name, status.mode, status.link, c.rx_packets, c.forwarded, c.local, c.consumed,
            c.tx_packets, c.interrupts, c.polls
        )?;
        // The stage is the packet crate's (router or bridge): its reasons are PacketDrop.
        for (reason, n) in c.drops.nonzero(&PacketDrop::TABLE) {
            writeln!(out, "    dropped {n} {}", reason.name())?;
        }
        for (reason, n) in c.tx_drops.nonzero() {
            writeln!(out, "    dropped on transmit {n} {}", reason.name())?;
        }
        let unaccounted = c.unaccounted();
        if unaccounted != 0 {
            writeln!(
                out,
                "    CONSERVATION VIOLATED: {unaccounted} frames unaccounted"
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three AF_XDP interfaces on one poll thread, the first with `fault`.
    fn three_af_xdp(fault: &str) -> RunConfig {
        let entry = |name: &str, n: u8, extra: &str| {
            format!(
                "[[interfaces]]\nname = \"{name}\"\nbackend = \"af_xdp\"\n\
                 mac = \"02:00:00:00:0{n}:01\"\naddresses = [\"10.0.{n}.1/24\"]\n{extra}\n"
            )
        };
        let text = [
            "[daemon]\naf_xdp_shared_umem = true\n".to_string(),
            entry("veth1", 1, fault),
            entry("veth2", 2, ""),
            entry("veth3", 3, ""),
        ]
        .concat();
        RunConfig::parse(Path::new("fwd.toml"), &text).unwrap()
    }

    /// The knobs a config with `knobs` in its `[knobs]` opens the devices with.
    fn knobs_of(knobs: &str) -> Knobs {
        let text = format!(
            "[knobs]\n{knobs}\n[[interfaces]]\nname = \"veth1\"\nmac = \"02:00:00:00:01:01\"\n\
             addresses = [\"10.0.1.1/24\"]\n"
        );
        configured_knobs(&RunConfig::parse(Path::new("fwd.toml"), &text).unwrap())
    }

    #[test]
    fn the_configs_knobs_apply_over_its_profile() {
        assert_eq!(knobs_of(""), Knobs::default());
        assert_eq!(knobs_of("profile = \"polld\""), Knobs::default());
        assert_eq!(knobs_of("profile = \"freebsd\""), Knobs::freebsd());
        // Wherever the profile's line is, the knobs apply over it.
        let k = knobs_of("\"kern.polling.burst_max\" = 1000\nprofile = \"freebsd\"");
        assert_eq!(
            k,
            Knobs {
                burst_max: 1000,
                ..Knobs::freebsd()
            }
        );
    }

    /// The UMEM's members, or `None` when none was allocated.
    fn members(config: &RunConfig, pcap: Option<&str>) -> Option<Vec<String>> {
        let (umem, names) = shared_umem(config, pcap).unwrap();
        umem.map(|_| names)
    }

    #[test]
    fn a_shared_umem_is_allocated_only_for_two_or_more_interfaces_that_lend() {
        let plain = three_af_xdp("");
        assert_eq!(
            members(&plain, None),
            Some(vec!["veth1".into(), "veth2".into(), "veth3".into()])
        );
        // A fault injector wraps veth1, which then copies: the other two still share.
        let one_faulty = three_af_xdp("[interfaces.fault]\nseed = 1\n");
        let sharers = members(&one_faulty, None).unwrap();
        assert_eq!(sharers, vec!["veth2".to_string(), "veth3".to_string()]);
        assert_eq!(umem_line(&one_faulty.devices[0], &sharers).unwrap(), "own");
        assert_eq!(
            umem_line(&one_faulty.devices[1], &sharers).unwrap(),
            "shared with veth3"
        );
        // --pcap wraps every interface: nothing lends, and no UMEM is shared.
        assert_eq!(members(&plain, Some("/tmp/cap")), None);
        // veth3 alone could lend: a UMEM needs two.
        let mut two_faulty = one_faulty.clone();
        two_faulty.devices[1].fault = two_faulty.devices[0].fault;
        assert_eq!(members(&two_faulty, None), None);
    }
}
