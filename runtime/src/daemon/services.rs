//! What serves the running daemon beside the poll threads: the control socket, the
//! metrics server, the SIGHUP reload thread, and the readiness message to systemd
//! (sd_notify).

use std::path::Path;

use polld_control::metrics::MetricsServer;
use polld_control::server::{ControlServer, Inbox};

use crate::config::RunConfig;
use crate::error::RunError;
use crate::reload::Reloader;
use crate::sys;

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
pub(crate) fn notify_ready() -> std::io::Result<()> {
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
