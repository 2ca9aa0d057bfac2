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

use std::io::Write;
use std::path::PathBuf;

use polld_dev::irq_defer;

use crate::check;
use crate::config::{check_shared_umem, RunConfig};
use crate::executor::Executor;
use crate::queues::QueueGroups;
use crate::reload;
use crate::sys;

pub(crate) mod busy_poll;
pub(crate) mod dataplane;
pub(crate) mod middleware;
pub(crate) mod open;
pub(crate) mod placement;
pub(crate) mod privileges;
pub(crate) mod report;
pub(crate) mod services;
pub(crate) mod umem;

#[cfg(test)]
mod knob_paths;

pub use crate::error::RunError;

use dataplane::open_dataplane;
use placement::{daemon_info, place_poll_thread};
use report::{final_counters, report};
use services::{metrics_line, start_control};

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
        return crate::percpu::run(
            &config,
            args.pcap.as_deref(),
            args.json,
            &socket,
            signals,
            out,
        );
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
    let tables = crate::tables::follow(&config, &dp)?;
    let mut exec = Executor::new(dp, info.clone(), daemon, signals, Some(inbox), tables)
        .map_err(RunError::Io)?;
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
