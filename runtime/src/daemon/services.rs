//! What serves the running daemon beside the poll threads: the control socket, the
//! metrics server, the SIGHUP reload thread, the readiness message to systemd and its
//! watchdog ([`crate::notify`]).

use std::path::Path;

use polld_control::metrics::MetricsServer;
use polld_control::server::{ControlServer, Inbox};

use crate::config::RunConfig;
use crate::error::RunError;
use crate::notify::{self, Watchdog};
use crate::reload::Reloader;
use crate::sys;

/// What serves the running daemon beside the control socket: the metrics server if
/// `[daemon] metrics` asks for one, the SIGHUP reload thread, and the watchdog thread if
/// the service manager asks for one. Dropping it stops them.
pub(crate) struct Services {
    metrics: Option<MetricsServer>,
    _reload: Reloader,
    _watchdog: Option<Watchdog>,
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
    let watchdog = Watchdog::start()
        .map_err(|e| RunError::Setup(format!("starting the watchdog thread: {e}")))?;
    // The devices are open and the socket answers: tell systemd (Type=notify).
    notify::ready();
    Ok((
        server,
        inbox,
        Services {
            metrics,
            _reload: reload,
            _watchdog: watchdog,
        },
    ))
}

/// The end of the start-up line: where /metrics is served, if it is.
pub(crate) fn metrics_line(services: &Services) -> String {
    services
        .metrics
        .as_ref()
        .map(|m| format!("; metrics on http://{}/metrics", m.addr()))
        .unwrap_or_default()
}
