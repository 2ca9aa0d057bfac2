//! Where the poll thread runs and with what: pinned to its CPU, SCHED_FIFO if asked, the
//! capabilities it does not need dropped, and what the executor reports of the daemon.

use polld_middleware::Reopener;

use crate::caps;
use crate::check;
use crate::config::RunConfig;
use crate::error::RunError;
use crate::executor::DaemonInfo;
use crate::sys;

use super::dataplane::Defaults;
use super::privileges::kept_caps;

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
