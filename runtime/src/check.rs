//! What `polld run` checks before it opens anything, and `polld run --check`.
//!
//! [`preflight`] runs at the start of both: the capabilities set-up needs, each
//! interface polld opens exists in the namespace, an AF_XDP queue exists on its
//! interface, `[daemon] cpu` and `realtime` work (tried on a scratch thread that exits),
//! and the control socket is free. `--check` then builds the packet stage and a dataplane
//! on [`Unopened`] devices and applies the modes and `[knobs]` exactly as `run` does, so a
//! knob `run` would refuse fails here at its line, and binds the metrics address and lets
//! it go. What cannot be checked without side effects (loading and attaching XDP programs,
//! creating TAP devices, allocating rings) is listed in the report as not checked.
//! Beside a running polld (one answers on the control socket), `--check` skips what that
//! daemon holds, its control socket and a metrics address in use, and says so.
//! [`print`] writes the outcome as text or, with `--json`, as one JSON object.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use polld_core::{Device, LinkState, TxFull};

use crate::caps;
use crate::config::{self, Backend, RunConfig};
use crate::daemon::dataplane::build_dataplane;
use crate::daemon::privileges::needed_caps;
use crate::error::RunError;
use crate::sys;

/// What `--check` verified and what it could not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    pub checked: Vec<String>,
    pub not_checked: Vec<String>,
    /// What a running polld holds, so `--check` left it alone.
    pub skipped: Vec<String>,
}

/// A device `--check` does not open: it has the interface's name, receives nothing and
/// sends nowhere, so that modes and knobs can be applied to a dataplane without I/O.
pub struct Unopened(pub String);

impl Device for Unopened {
    fn name(&self) -> &str {
        &self.0
    }
    fn receive(&mut self, _budget: usize, _rx: &mut dyn FnMut(&mut [u8])) -> usize {
        0
    }
    fn rx_ready(&mut self) -> bool {
        false
    }
    fn send(&mut self, _frame: &[u8]) -> Result<(), TxFull> {
        Err(TxFull)
    }
    fn flush(&mut self) {}
    fn check_status(&mut self) -> LinkState {
        LinkState::Up
    }
    fn set_interrupt(&mut self, _armed: bool) {}
}

/// The checks `run` makes before opening anything; see the module doc.
pub fn preflight(config: &RunConfig, socket: &Path) -> Result<CheckReport, RunError> {
    let mut report = preflight_but_socket(config)?;
    polld_control::server::check_socket_path(socket)
        .map_err(|e| RunError::Setup(format!("control socket: {e}")))?;
    report
        .checked
        .push(format!("control socket {} is free", socket.display()));
    Ok(report)
}

/// Beside a running polld: the control socket it serves skipped in `report`, and who
/// serves there (`the polld serving PATH (pid N)`); else the socket checked free.
fn socket_beside(socket: &Path, report: &mut CheckReport) -> Result<Option<String>, RunError> {
    match polld_control::server::check_socket_path(socket) {
        Ok(_) => {
            report
                .checked
                .push(format!("control socket {} is free", socket.display()));
            Ok(None)
        }
        Err(polld_control::server::ControlError::InUse { pid, .. }) => {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            report.skipped.push(format!(
                "control socket {}: a polld is serving there{pid}",
                socket.display()
            ));
            Ok(Some(format!("the polld serving {}{pid}", socket.display())))
        }
        Err(e) => Err(RunError::Setup(format!("control socket: {e}"))),
    }
}

/// [`preflight`] but for the control socket.
fn preflight_but_socket(config: &RunConfig) -> Result<CheckReport, RunError> {
    let mut report = CheckReport::default();
    let needed = needed_caps(config);
    caps::require(&needed).map_err(RunError::Privileges)?;
    let mut names: Vec<&str> = needed.iter().map(|(c, _)| c.name()).collect();
    names.sort();
    names.dedup();
    report
        .checked
        .push(format!("capabilities: {}", names.join(", ")));

    let namespace = polld_dev::netns::describe_current();
    for (i, d) in config.devices.iter().enumerate() {
        if let Some(Err(e)) = d.netns.as_deref().map(polld_dev::iface::Namespace::named) {
            let field = format!("interfaces[{i}].netns");
            let message = format!("{field}: {e}");
            return Err(RunError::Config(
                config.error_at_field(&field, message).into(),
            ));
        }
        if d.backend == Backend::Tap {
            report.not_checked.push(format!(
                "interfaces[{i}] ({}): creating the TAP device",
                d.name
            ));
            continue;
        }
        let field = format!("interfaces[{i}].name");
        let exists = config::in_namespace_of(d, || polld_dev::iface::exists(&d.name))
            .unwrap_or(Ok(false))
            .map_err(|e| {
                RunError::Config(
                    config
                        .error_at_field(&field, format!("{field}: {e}"))
                        .into(),
                )
            })?;
        if !exists {
            return Err(RunError::Config(
                config
                    .error_at_field(&field, config::no_such_interface(i, d))
                    .into(),
            ));
        }
        let place = d.netns.as_ref().map_or_else(
            || namespace.clone(),
            |ns| format!("network namespace `{ns}`"),
        );
        report
            .checked
            .push(format!("interfaces[{i}]: {} exists in {place}", d.name));
        if d.backend == Backend::AfXdp {
            check_queue(config, i, &mut report)?;
            report.not_checked.push(format!(
                "interfaces[{i}] ({}): loading and attaching the XDP program, the AF_XDP socket and its rings",
                d.name
            ));
        } else {
            report.not_checked.push(format!(
                "interfaces[{i}] ({}): the AF_PACKET socket and its rings",
                d.name
            ));
        }
    }

    if let Some(cpu) = config.daemon.cpu {
        scratch_thread(|| sys::pin_to_cpu(cpu)).map_err(|e| {
            RunError::Config(
                config
                    .error_at_key("cpu", cpu_error(&format!("daemon.cpu: CPU {cpu}"), &e))
                    .into(),
            )
        })?;
        report.checked.push(format!("[daemon] cpu = {cpu}"));
    }
    for &cpu in &config.daemon.cpus {
        scratch_thread(|| sys::pin_to_cpu(cpu)).map_err(|e| {
            RunError::Config(
                config
                    .error_at_key("cpus", cpu_error(&format!("daemon.cpus: CPU {cpu}"), &e))
                    .into(),
            )
        })?;
    }
    if !config.daemon.cpus.is_empty() {
        report
            .checked
            .push(format!("[daemon] cpus = {:?}", config.daemon.cpus));
    }
    if config.daemon.realtime {
        scratch_thread(sys::make_realtime).map_err(|e| {
            RunError::Config(
                config.error_at_key(
                    "realtime",
                    format!("daemon.realtime: SCHED_FIFO is refused: {e}; run polld with CAP_SYS_NICE, or set realtime = false"),
                ).into(),
            )
        })?;
        report
            .checked
            .push("[daemon] realtime = true (SCHED_FIFO)".to_string());
    }
    Ok(report)
}

/// An AF_XDP interface's queue (or each of its `queues`) must be one of its receive
/// queues.
fn check_queue(config: &RunConfig, i: usize, report: &mut CheckReport) -> Result<(), RunError> {
    let d = &config.devices[i];
    let (field, wanted) = match d.queues.is_empty() {
        true => (format!("interfaces[{i}].queue"), vec![d.queue]),
        false => (format!("interfaces[{i}].queues"), d.queues.clone()),
    };
    let listed = wanted
        .iter()
        .map(|q| q.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let queues = polld_dev::iface::rx_queues(&d.name).map_err(|e| {
        RunError::Config(
            config
                .error_at_field(&field, format!("{field}: {e}"))
                .into(),
        )
    })?;
    match queues {
        Some(n) if wanted.iter().any(|&q| q >= n) => Err(RunError::Config(
            config
                .error_at_field(
                    &field,
                    format!(
                "{field}: {} has {n} receive queue(s), 0..{}, and queue {} is not one; pick \
                 among them, or give it more (`ethtool -l {}`, `ethtool -L {} rx N tx N`; a \
                 veth: `ip link add ... numrxqueues N numtxqueues N`)",
                d.name,
                n - 1,
                wanted.iter().find(|&&q| q >= n).unwrap_or(&0),
                d.name,
                d.name
            ),
                )
                .into(),
        )),
        Some(n) => {
            report.checked.push(format!(
                "interfaces[{i}]: queue(s) {listed} of {}'s {n} receive queue(s)",
                d.name
            ));
            Ok(())
        }
        None => {
            report.not_checked.push(format!(
                "interfaces[{i}]: whether {} has queue(s) {listed} (its driver does not report channels)",
                d.name
            ));
            Ok(())
        }
    }
}

/// `[daemon] cpu = N` (or a CPU of `cpus`) that a poll thread cannot be pinned to.
pub fn cpu_error(what: &str, e: &std::io::Error) -> String {
    let allowed = sys::allowed_cpus()
        .map(|cpus| {
            cpus.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_else(|_| "?".to_string());
    format!("{what}: {e}; polld may run on CPUs {allowed}: pick one of them")
}

/// Runs `f` on a thread that exits afterwards, so that what it changes about its
/// thread (affinity, policy) changes nothing else.
fn scratch_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("scratch thread"))
}

/// The stage, the modes and the knobs of `config` applied to dataplanes on unopened
/// devices, as `run` applies them (with several poll CPUs, each builds its own from its
/// part of the config); each writable entry's value before they were applied.
pub fn dataplanes(config: &RunConfig) -> Result<HashMap<String, String>, RunError> {
    let parts = match config.daemon.cpus.is_empty() {
        true => vec![config.clone()],
        false => config.per_cpu().into_iter().map(|(_, part)| part).collect(),
    };
    let mut defaults = HashMap::new();
    for part in &parts {
        let devices = part
            .devices
            .iter()
            .map(|d| Unopened(d.name.clone()))
            .collect();
        defaults.extend(build_dataplane(part, devices, None)?.1);
    }
    Ok(defaults)
}

/// `polld run --check`: [`preflight`], then the stage, the modes and the knobs applied
/// to a dataplane on unopened devices. A missing capability does not hide the file's
/// mistakes: the knobs are checked all the same, and every error is reported at the line
/// that asks for what failed.
pub fn check(config: &RunConfig, socket: &Path) -> Result<CheckReport, RunError> {
    let mut errors = Vec::new();
    if let Err(missing) = caps::require(&needed_caps(config)) {
        errors.extend(missing_caps_errors(config, &missing));
    }
    errors.extend(socket_directory_error(config, socket));
    let mut report = CheckReport::default();
    let mut running = None;
    if errors.is_empty() {
        match preflight_but_socket(config) {
            Ok(checked) => {
                report = checked;
                running = socket_beside(socket, &mut report)?;
            }
            Err(RunError::Config(e)) => errors.extend(e.into_vec()),
            Err(e) => return Err(e),
        }
    }
    match dataplanes(config) {
        Ok(_) => {}
        Err(RunError::Config(e)) => errors.extend(e.into_vec()),
        Err(e) => return Err(e),
    }
    if let Some(errors) = config::RunConfigErrors::new(errors) {
        return Err(RunError::Config(errors));
    }
    report.checked.push(format!(
        "the packet stage, {} interface mode(s) and {} knob(s), applied as `run` applies them",
        config.devices.len(),
        config.knobs.len()
    ));
    if let Some(addr) = config.daemon.metrics {
        // Bound and let go at once: the address is free now.
        match (std::net::TcpListener::bind(addr), running) {
            (Ok(_), _) => report
                .checked
                .push(format!("the metrics address {addr} is free")),
            (Err(e), Some(running)) if e.kind() == std::io::ErrorKind::AddrInUse => {
                report.skipped.push(format!(
                    "the metrics address {addr}: in use, as {running} holds it"
                ))
            }
            (Err(e), _) => {
                let message = format!(
                    "daemon.metrics: cannot listen on {addr}: {e}; choose another address, or \
                     stop what serves there"
                );
                return Err(RunError::Config(
                    config.error_at_field("daemon.metrics", message).into(),
                ));
            }
        }
    }
    Ok(report)
}

/// Each missing capability as an error at the key that needs it: an interface's
/// `backend` or `netns`, or `[daemon] realtime`.
fn missing_caps_errors(
    config: &RunConfig,
    missing: &caps::MissingCaps,
) -> Vec<config::RunConfigError> {
    missing
        .missing
        .iter()
        .map(|(cap, why)| {
            let device = config.devices.iter().enumerate().find(|(_, d)| {
                why.contains(&format!(" {} ", d.name)) || why.ends_with(&format!(" {}", d.name))
            });
            let field = match device {
                Some((i, d)) if d.netns.is_some() && why.contains("namespace") => {
                    format!("interfaces[{i}].netns")
                }
                Some((i, _)) => format!("interfaces[{i}].backend"),
                None => "daemon.realtime".to_string(),
            };
            let message = format!(
                "{field}: {} is missing, and it is needed {why}; run polld as root, or with \
                 {} among its capabilities (the unit's AmbientCapabilities=)",
                cap.name(),
                cap.name()
            );
            config.error_at_field(&field, message)
        })
        .collect()
}

/// A control socket in a directory that does not exist cannot be created.
fn socket_directory_error(config: &RunConfig, socket: &Path) -> Option<config::RunConfigError> {
    let dir = socket.parent().filter(|d| !d.as_os_str().is_empty())?;
    if dir.is_dir() {
        return None;
    }
    let message = format!(
        "daemon.socket: the directory {} does not exist, so the control socket {} cannot be \
         created; create it (`mkdir -p {}`; the unit's RuntimeDirectory= makes /run/polld), or \
         put the socket in a directory that exists",
        dir.display(),
        socket.display(),
        dir.display()
    );
    Some(config.error_at_field("daemon.socket", message))
}

/// What `--check` found, as text (the report; the errors are `run`'s to print) or with
/// `json` as one JSON object either way: `ok`, and `checked`, `not_checked` and
/// `skipped` (what a running polld holds), or
/// `errors`, every one of them, each with its `path`, `line`, `field`, `message` and
/// `fix`, none of them null.
pub fn print(
    path: &Path,
    result: &Result<CheckReport, RunError>,
    json: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    match (result, json) {
        (Ok(report), false) => {
            writeln!(out, "{}: configuration OK", path.display())?;
            for line in &report.checked {
                writeln!(out, "  checked: {line}")?;
            }
            for line in &report.not_checked {
                writeln!(out, "  not checked (opening it has side effects): {line}")?;
            }
            for line in &report.skipped {
                writeln!(out, "  skipped (a running polld holds it): {line}")?;
            }
            Ok(())
        }
        (Err(_), false) => Ok(()),
        (Ok(report), true) => json_line(
            out,
            serde_json::json!({
                "ok": true,
                "config": path,
                "checked": report.checked,
                "not_checked": report.not_checked,
                "skipped": report.skipped,
            }),
        ),
        (Err(e), true) => {
            let errors: Vec<serde_json::Value> = match e {
                RunError::Config(errors) => errors.iter().map(json_error).collect(),
                e => {
                    // Not about a line of the file: the file as a whole (line 0), under
                    // what failed.
                    let text = e.to_string();
                    let (field, rest) = text.split_once(": ").unwrap_or(("polld", &text));
                    let (message, fix) = rest.split_once("; ").unwrap_or((rest, ""));
                    vec![serde_json::json!({
                        "path": path, "line": 0, "field": field,
                        "message": message, "fix": fix,
                    })]
                }
            };
            json_line(
                out,
                serde_json::json!({ "ok": false, "config": path, "errors": errors }),
            )
        }
    }
}

/// One configuration error as `--check --json` gives it: every field filled, the line 0
/// when the error is about the file as a whole (it cannot be read).
fn json_error(e: &config::RunConfigError) -> serde_json::Value {
    let (field, message, fix) = e.parts();
    serde_json::json!({
        "path": e.path, "line": e.line.unwrap_or(0), "field": field.unwrap_or("file"),
        "message": message, "fix": fix.unwrap_or(""),
    })
}

fn json_line(out: &mut dyn Write, value: serde_json::Value) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, &value)?;
    writeln!(out)
}
