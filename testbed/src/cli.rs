//! `polld testbed up|down|status|exec`: arguments and output.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde::Serialize;

use crate::layout::{check_prefix, Devices, Layout, Role};
use crate::placement::{CpuPlan, Placement};
use crate::status::status;
use crate::testbed::{down, DownReport, Testbed, UpOptions, UpReport};
use crate::vm::{self, Accel, VmOptions};
use crate::TestbedError;

/// Create, remove or inspect the gen/fwd/sink network namespaces.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub command: TestbedCommand,
}

#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum TestbedCommand {
    /// Create the namespaces gen, fwd and sink, their veths, addresses, routes, static
    /// neighbours and CPU placement.
    Up(UpArgs),
    /// Delete the namespaces (and so their veths); fine if some are already gone.
    Down(CommonArgs),
    /// Show each namespace: interfaces, MACs, addresses, counters, placement, ip_forward
    /// (and the guest of `--devices vm`).
    Status(CommonArgs),
    /// Run a command in the guest of `up --devices vm`; prints its output and exits
    /// with its status.
    Exec(ExecArgs),
    /// The guest's agent (run by the guest's init, not by hand).
    #[command(hide = true)]
    GuestAgent,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ExecArgs {
    /// The testbed's prefix, as given to `up`.
    #[arg(long, default_value = "", value_parser = parse_prefix)]
    pub prefix: String,
    /// Kill the command after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Give the command this file as its standard input (`-`: this one's).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct CommonArgs {
    /// Prefix of the namespace names: `--prefix t1` gives t1gen, t1fwd, t1sink.
    #[arg(long, default_value = "", value_parser = parse_prefix)]
    pub prefix: String,
    /// Print JSON (for scripts) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct UpArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// What joins the namespaces: veth pairs through fwd, a persistent TAP in gen
    /// (tap0) and one in sink (tap1) that only polld (in fwd) joins, or a qemu guest
    /// whose virtio-net NICs sit on those TAPs, with polld in the guest.
    #[arg(long, value_enum, default_value_t = Devices::Veth)]
    pub devices: Devices,
    /// With `--devices vm`: the polld binary to put in the guest (default:
    /// `POLLD_VM_POLLD`, else this polld).
    #[arg(long)]
    pub polld: Option<PathBuf>,
    /// With `--devices vm`: KVM, software emulation (TCG), or KVM if it works here.
    #[arg(long, value_enum, default_value_t = Accel::Auto)]
    pub accel: Accel,
    /// Let the kernel in fwd forward (ip_forward=1), for the kernel baseline. Without it
    /// fwd's kernel does not forward, and polld must.
    #[arg(long)]
    pub kernel_forwarding: bool,
    /// Where each veth's receive work runs.
    #[arg(long, value_enum, default_value_t = Placement::default())]
    pub placement: Placement,
    /// The generator's CPU (gen/veth0 receive work goes there).
    #[arg(long, default_value_t = CpuPlan::default().gen)]
    pub gen_cpu: usize,
    /// The forwarder's CPU (fwd/veth1 and fwd/veth2 receive work goes there).
    #[arg(long, default_value_t = CpuPlan::default().fwd)]
    pub fwd_cpu: usize,
    /// The sink's CPU (sink/veth3 receive work goes there).
    #[arg(long, default_value_t = CpuPlan::default().sink)]
    pub sink_cpu: usize,
    /// Delete namespaces of the same names first instead of failing.
    #[arg(long)]
    pub force: bool,
    /// Run the sink's receive thread (veth3's NAPI kthread) SCHED_FIFO above polld's poll
    /// thread, so what the forwarder sends leaves at once, as a NIC transmits without the
    /// forwarder's CPU (napi-threaded placement only; the forward bench uses it)
    #[arg(long)]
    pub sink_rx_realtime: bool,
    /// With `--devices tap`: this many TAP pairs, one per poll CPU of `[daemon] cpus`
    /// (tap2 in gen and tap3 in sink on 10.0.3.0/24 and 10.0.4.0/24, and so on).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub tap_pairs: u8,
}

fn parse_prefix(prefix: &str) -> Result<String, String> {
    check_prefix(prefix).map(|()| prefix.to_string())
}

/// Runs a `polld testbed` subcommand, writing its report to `out`; returns the exit
/// status (the command's, for `exec`).
pub fn run(args: &TestbedArgs, out: &mut dyn Write) -> Result<i32, TestbedError> {
    let written = match &args.command {
        TestbedCommand::Up(up) => {
            let layout = Layout::with_devices(&up.common.prefix, up.devices);
            let options = UpOptions {
                kernel_forwarding: up.kernel_forwarding,
                placement: up.placement,
                cpus: CpuPlan {
                    gen: up.gen_cpu,
                    fwd: up.fwd_cpu,
                    sink: up.sink_cpu,
                },
                force: up.force,
                sink_rx_realtime: up.sink_rx_realtime,
            };
            if up.tap_pairs > 1 && up.devices != Devices::Tap {
                return Err(TestbedError::Failed(
                    "--tap-pairs needs --devices tap".to_string(),
                ));
            }
            let defaults = VmOptions::default();
            let vm = VmOptions {
                polld: up.polld.clone().unwrap_or(defaults.polld),
                accel: up.accel,
            };
            let mut testbed = Testbed::up_vm(&layout, &options, &vm)?;
            for pair in 1..up.tap_pairs {
                testbed.add_tap_pair(pair)?;
            }
            let report = testbed.keep();
            if up.common.json {
                write_json(out, &report)
            } else {
                write_up(out, &report)
            }
        }
        TestbedCommand::Down(common) => {
            let report = down(&Layout::new(&common.prefix))?;
            if common.json {
                write_json(out, &report)
            } else {
                write_down(out, &report)
            }
        }
        TestbedCommand::Status(common) => {
            let status = status(&Layout::found(&common.prefix));
            if common.json {
                write_json(out, &status)
            } else {
                status.write_text(out)
            }
        }
        TestbedCommand::Exec(exec) => return run_exec(exec, out),
        TestbedCommand::GuestAgent => return vm::agent::serve().map(|()| 0),
    };
    written
        .map(|()| 0)
        .map_err(|e| TestbedError::Failed(format!("cannot write the report: {e}")))
}

/// `polld testbed exec`: the command's stdout to `out`, its stderr to ours.
fn run_exec(exec: &ExecArgs, out: &mut dyn Write) -> Result<i32, TestbedError> {
    let mut stdin = Vec::new();
    match exec.input.as_deref() {
        None => {}
        Some(path) if path.as_os_str() == "-" => {
            std::io::stdin()
                .read_to_end(&mut stdin)
                .map_err(|e| TestbedError::Failed(format!("reading standard input: {e}")))?;
        }
        Some(path) => {
            stdin = std::fs::read(path).map_err(|e| {
                TestbedError::Failed(format!("cannot read --input {}: {e}", path.display()))
            })?;
        }
    }
    let response = vm::exec(
        &exec.prefix,
        &exec.command,
        &String::from_utf8_lossy(&stdin),
        Duration::from_secs(exec.timeout),
    )?;
    let _ = out.write_all(response.stdout.as_bytes());
    let _ = out.flush();
    eprint!("{}", response.stderr);
    if let Some(error) = &response.error {
        eprintln!("polld testbed exec: {error}");
    }
    if response.timed_out {
        eprintln!(
            "polld testbed exec: `{}` was killed after {} s (--timeout)",
            exec.command.join(" "),
            exec.timeout
        );
    }
    Ok(response.exit_code())
}

fn write_json(out: &mut dyn Write, value: &impl Serialize) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

fn write_up(out: &mut dyn Write, report: &UpReport) -> std::io::Result<()> {
    let layout = &report.layout;
    for ns in &report.replaced {
        writeln!(out, "removed existing namespace {ns} (--force)")?;
    }
    let namespaces: Vec<&str> = layout
        .host_roles()
        .into_iter()
        .map(|r| layout.ns(r))
        .collect();
    writeln!(out, "namespaces {} are up", namespaces.join(", "))?;
    if let Some(guest) = &report.guest {
        writeln!(
            out,
            "guest {} is up: qemu pid {}, {} ({}), booted in {:.1} s; kernel {}, initramfs {} ({}); console {}",
            vm::guest_name(&layout.prefix),
            guest.pid,
            guest.accel,
            guest.accel_reason,
            guest.boot_ms as f64 / 1000.0,
            guest.kernel,
            guest.initramfs.display(),
            if guest.initramfs_built { "built now" } else { "cached" },
            guest.console_log.display()
        )?;
    }
    for iface in layout.ifaces() {
        let player = match layout.devices {
            Devices::Tap if iface.role == Role::Fwd => "  (played by polld on the TAP's fd)",
            Devices::Vm if iface.role == Role::Fwd => "  (in the guest, behind the TAP)",
            _ => "",
        };
        let ipv6 = match layout.devices {
            Devices::Veth => format!(" {}", iface.cidr6()),
            Devices::Tap | Devices::Vm => String::new(),
        };
        writeln!(
            out,
            "  {}/{}  {}  {}{ipv6}{player}",
            iface.ns,
            iface.name,
            iface.mac,
            iface.cidr()
        )?;
    }
    writeln!(
        out,
        "  {} reaches {} via {}; {} reaches {} via {}",
        layout.gen_ns,
        layout.veth3.network(),
        layout.veth0.gateway.map_or("?".into(), |g| g.to_string()),
        layout.sink_ns,
        layout.veth0.network(),
        layout.veth3.gateway.map_or("?".into(), |g| g.to_string()),
    )?;
    if layout.devices == Devices::Veth {
        writeln!(
            out,
            "  {} reaches {} via {}; {} reaches {} via {}",
            layout.gen_ns,
            layout.veth3.network6(),
            layout.veth1.addr6,
            layout.sink_ns,
            layout.veth0.network6(),
            layout.veth2.addr6,
        )?;
    }
    for pair in &report.tap_pairs {
        let (gen, sink) = (&pair.veth0, &pair.veth3);
        writeln!(
            out,
            "  another TAP pair: {}/{} {} {} and {}/{} {} {}; polld plays {} and {}",
            gen.ns,
            gen.name,
            gen.mac,
            gen.cidr(),
            sink.ns,
            sink.name,
            sink.mac,
            sink.cidr(),
            pair.veth1.cidr(),
            pair.veth2.cidr()
        )?;
    }
    writeln!(
        out,
        "  ip_forward in {}: {}",
        match layout.devices {
            Devices::Vm => "the guest",
            Devices::Veth | Devices::Tap => &layout.fwd_ns,
        },
        match (report.kernel_forwarding, layout.devices) {
            (true, _) => "1 (the kernel forwards)",
            (false, Devices::Vm) =>
                "0 (run polld in the guest: `polld testbed exec -- polld run ...`)",
            (false, _) => "0 (run a forwarder in fwd)",
        }
    )?;
    if !report.fwd_setup.is_empty() {
        writeln!(
            out,
            "  {}'s tables, which polld forwards by (tables = \"kernel\"), were set up with:",
            layout.fwd_ns
        )?;
        for line in &report.fwd_setup {
            writeln!(out, "    {line}")?;
        }
    }
    let placement = &report.placement;
    writeln!(out, "placement {} requested:", placement.requested.name())?;
    for iface in &placement.interfaces {
        writeln!(
            out,
            "  {}/{}: {} ({})",
            iface.ns,
            iface.iface,
            iface.applied.name(),
            iface.detail
        )?;
    }
    for warning in placement.warnings.iter().chain(&report.warnings) {
        writeln!(out, "warning: {warning}")?;
    }
    Ok(())
}

fn write_down(out: &mut dyn Write, report: &DownReport) -> std::io::Result<()> {
    if let Some(pid) = report.stopped_guest {
        writeln!(out, "stopped the guest (qemu pid {pid})")?;
    }
    if report.removed.is_empty() {
        writeln!(
            out,
            "nothing to remove: {} do not exist",
            report.absent.join(", ")
        )?;
        return Ok(());
    }
    writeln!(out, "removed {}", report.removed.join(", "))?;
    if !report.absent.is_empty() {
        writeln!(out, "already gone: {}", report.absent.join(", "))?;
    }
    for (ns, pids) in &report.still_used_by {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        writeln!(
            out,
            "warning: processes {} still run in {ns}: its veths remain until they exit",
            pids.join(" ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }

    #[derive(Subcommand)]
    enum Top {
        Testbed(TestbedArgs),
    }

    fn parse(args: &[&str]) -> Result<TestbedArgs, clap::Error> {
        let full = ["polld", "testbed"].iter().chain(args).copied();
        Cli::try_parse_from(full).map(|cli| match cli.command {
            Top::Testbed(args) => args,
        })
    }

    #[test]
    fn up_defaults_to_napi_threaded_without_kernel_forwarding() {
        let TestbedCommand::Up(up) = parse(&["up"]).unwrap().command else {
            panic!("not up");
        };
        assert_eq!(up.placement, Placement::NapiThreaded);
        assert!(!up.kernel_forwarding && !up.force && !up.common.json);
        assert_eq!(up.common.prefix, "");
        assert_eq!((up.gen_cpu, up.fwd_cpu, up.sink_cpu), (0, 1, 1));
    }

    #[test]
    fn every_option_parses() {
        let TestbedCommand::Up(up) = parse(&[
            "up",
            "--prefix",
            "t1",
            "--kernel-forwarding",
            "--placement",
            "rps",
            "--fwd-cpu",
            "0",
            "--force",
            "--json",
        ])
        .unwrap()
        .command
        else {
            panic!("not up");
        };
        assert_eq!(up.placement, Placement::Rps);
        assert!(up.kernel_forwarding && up.force && up.common.json);
        assert_eq!(up.fwd_cpu, 0);
        assert!(matches!(
            parse(&["status", "--json"]).unwrap().command,
            TestbedCommand::Status(CommonArgs { json: true, .. })
        ));
        assert!(matches!(
            parse(&["down", "--prefix", "x"]).unwrap().command,
            TestbedCommand::Down(CommonArgs { ref prefix, .. }) if prefix == "x"
        ));
    }

    #[test]
    fn a_bad_prefix_or_placement_is_refused_by_the_parser() {
        let err = parse(&["up", "--prefix", "a/b"]).unwrap_err().to_string();
        assert!(err.contains("use only letters"), "{err}");
        assert!(parse(&["up", "--placement", "fast"]).is_err());
    }
}
