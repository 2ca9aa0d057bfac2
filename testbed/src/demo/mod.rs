//! `polld demo`: polld forwarding real traffic on the testbed, in interrupt mode and then
//! in polling mode, with what each costs.
//!
//! On the TAP testbed (the default, `--devices tap`) it shows the seed's promise: a flood
//! from gen, polld realtime on the fwd CPU and a CPU-bound competitor pinned there too
//! ([`crate::share`]); interrupt mode against polling at `user_frac` 50, with interrupts/s,
//! the delivered rate and each one's share of the CPU, and sentences computed from those
//! numbers; once with an IPv4 flood and once with an IPv6 one, and IPv6's delivered rate
//! over IPv4's in each mode. On veth (`--devices veth`):
//!
//! It brings the testbed up, and for each mode starts `polld run` in fwd (poll thread on
//! the fwd CPU, forwarding by fwd's kernel tables), `polld sink` in sink and `polld gen`
//! in gen (on the gen CPU) at a fixed rate; it reads polld's counters over the control
//! socket and its CPU time from `/proc`, prints one row per mode, once with IPv4 frames
//! and once with IPv6 ones, with IPv6's delivered rate over IPv4's in each mode, and
//! tears the testbed down.
//!
//! [`measure()`] runs one trial of the veth demo and of the tests and benches built on it;
//! its rows are [`DemoRow`]s.

mod measure;
mod render;
mod row;
pub(crate) mod say;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::share::{measure_share_family, ShareRow, ShareTrial};
use crate::vm::demo::VmDemoArgs;
use crate::{Accel, Devices, IpFamily, Layout, Testbed, TestbedError, UpOptions, VmOptions};

pub use measure::{kernel_rx_ns, measure, Forwarder, Load, Trial};
pub use render::write_table;
use render::{veth_findings, write_share_table};
pub use row::{DemoRow, SinkLatency, TcpResult};
use say::say;

/// `polld demo` options.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// The testbed: TAPs only polld joins (the competitor demo), veth pairs, or a qemu
    /// guest with virtio-net NICs and polld inside (the competitor demo on a driver, the
    /// guest's device work at interrupt priority, or at Linux's fair share in the one row
    /// marked "fair").
    #[arg(long, value_enum, default_value_t = Devices::Tap)]
    pub devices: Devices,
    /// `kern.polling.user_frac` of the polling run on TAP.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=99))]
    pub user_frac: u32,
    /// Backend polld uses on both fwd interfaces (veth).
    #[arg(long, default_value = "af_xdp", value_parser = ["af_xdp", "af_packet"])]
    pub backend: String,
    /// Offered load in frames per second (64-byte frames; veth: on TAP gen floods).
    #[arg(long, default_value = "200k")]
    pub rate: String,
    /// Seconds of traffic per mode.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Namespace prefix (the testbed is `{prefix}gen`, `{prefix}fwd`, `{prefix}sink`).
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Runs the demo; `polld` is the path of the polld binary to run.
pub fn run_demo(args: &DemoArgs, polld: &Path, out: &mut dyn Write) -> Result<(), TestbedError> {
    let layout = Layout::with_devices(&args.prefix, args.devices);
    let options = UpOptions::default();
    let joined = match args.devices {
        Devices::Veth => "joined by veth pairs",
        Devices::Tap => "tap0 in gen and tap1 in sink, joined only by polld",
        Devices::Vm => "a qemu guest's virtio-net NICs on tap0 in gen and tap1 in sink",
    };
    say(
        args.json,
        out,
        format_args!(
            "bringing up the testbed ({}, {}, {}: {joined})",
            layout.gen_ns, layout.fwd_ns, layout.sink_ns
        ),
    );
    // On the VM testbed the guest runs this same polld.
    let vm = VmOptions {
        polld: polld.to_path_buf(),
        accel: Accel::Auto,
    };
    let tb = Testbed::up_vm(&layout, &options, &vm)?;
    let dir = scratch_dir()?;
    let run = DemoRun {
        args,
        tb: &tb,
        options: &options,
        polld,
        dir: &dir,
    };
    let result = match args.devices {
        Devices::Veth => veth_demo(&run, out),
        Devices::Tap => tap_demo(&run, out),
        Devices::Vm => {
            let vm_args = VmDemoArgs {
                user_frac: args.user_frac,
                duration: args.duration,
                json: args.json,
            };
            crate::vm::demo::run(vm_args, &tb, polld, out)
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    drop(tb);
    say(args.json, out, format_args!("testbed removed"));
    result
}

/// What a demo's runs share.
#[derive(Clone, Copy)]
struct DemoRun<'a> {
    args: &'a DemoArgs,
    tb: &'a Testbed,
    options: &'a UpOptions,
    polld: &'a Path,
    /// Holds the trials' configs and sockets.
    dir: &'a Path,
}

/// The directory for a demo's configs and sockets.
fn scratch_dir() -> Result<PathBuf, TestbedError> {
    let dir = std::env::temp_dir().join(format!("polld-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

fn write_json(rows: &impl serde::Serialize, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(rows).unwrap_or_default()
    );
}

/// The demo on veth: `polld gen` at `args.rate` through polld in interrupt mode, then in
/// polling mode; first with IPv4 frames, then with IPv6 ones. polld forwards by fwd's
/// kernel tables, which hold both families ([`crate::polld_config`]).
fn veth_demo(run: &DemoRun, out: &mut dyn Write) -> Result<(), TestbedError> {
    let (args, options) = (run.args, run.options);
    let demo = ByFamily::run(|family, mode| {
        say(
            args.json,
            out,
            format_args!(
                "{mode} mode, {}, {} frames/s for {} s ...",
                family.name(),
                args.rate,
                args.duration
            ),
        );
        let trial = Trial {
            label: mode.to_string(),
            forwarder: Forwarder::Polld {
                backend: &args.backend,
                mode,
                // polld's defaults: what `polld run` does with no [knobs].
                knobs: &[],
            },
            load: Load::Frames {
                rate: &args.rate,
                sink: true,
                family,
            },
            duration: args.duration,
        };
        measure(run.tb, options, run.polld, run.dir, &trial)
    })?;
    if args.json {
        write_json(&demo, out);
    } else {
        for (rows, family) in [(&demo.ipv4, IpFamily::Ipv4), (&demo.ipv6, IpFamily::Ipv6)] {
            let what = format!("polld on {}", args.backend);
            write_table(rows, &what, family, options, out);
        }
        let _ = writeln!(out, "{}", veth_findings(&demo.ipv4[0], &demo.ipv4[1]));
        let _ = writeln!(out, "{}", demo.ipv6_over_ipv4.sentence());
    }
    Ok(())
}

/// The demo on TAP: interrupt mode, then polling at `args.user_frac`, each with a flood
/// from gen and a competitor on the fwd CPU; first with IPv4 frames, then with IPv6 ones.
fn tap_demo(run: &DemoRun, out: &mut dyn Write) -> Result<(), TestbedError> {
    let (args, options) = (run.args, run.options);
    let (gen_cpu, fwd_cpu) = (options.cpus.gen, options.cpus.fwd);
    let demo = ByFamily::run(|family, mode| {
        say(
            args.json,
            out,
            format_args!(
                "{mode} mode, {}; polld gen floods tap0 from CPU{gen_cpu}, a CPU-bound competitor runs on CPU{fwd_cpu} beside polld; measuring {} s ...",
                family.name(),
                args.duration
            ),
        );
        let trial = ShareTrial::flood(mode, args.user_frac, 1.0, args.duration);
        measure_share_family(
            run.tb,
            run.polld,
            run.dir,
            (gen_cpu, fwd_cpu),
            &trial,
            family,
        )
    })?;
    if args.json {
        write_json(&demo, out);
    } else {
        write_share_table(&demo.ipv4, IpFamily::Ipv4, gen_cpu, fwd_cpu, out);
        write_share_table(&demo.ipv6, IpFamily::Ipv6, gen_cpu, fwd_cpu, out);
        let _ = writeln!(out, "{}", demo.ipv6_over_ipv4.sentence());
    }
    Ok(())
}

/// A demo's rows ([`ShareRow`] on TAP, [`DemoRow`] on veth) by family, and its `--json`
/// document.
#[derive(serde::Serialize)]
struct ByFamily<Row> {
    /// The interrupt and the polling row with IPv4 frames.
    ipv4: Vec<Row>,
    /// The same with IPv6 frames.
    ipv6: Vec<Row>,
    ipv6_over_ipv4: FamilyRatios,
}

impl<Row: Delivered> ByFamily<Row> {
    /// The rows of `trial` in interrupt mode, then in polling mode, first with IPv4
    /// frames, then with IPv6 ones.
    fn run(
        mut trial: impl FnMut(IpFamily, &'static str) -> Result<Row, TestbedError>,
    ) -> Result<ByFamily<Row>, TestbedError> {
        let mut by_family = [Vec::new(), Vec::new()];
        for (family, rows) in [IpFamily::Ipv4, IpFamily::Ipv6]
            .into_iter()
            .zip(&mut by_family)
        {
            for mode in ["interrupt", "polling"] {
                rows.push(trial(family, mode)?);
            }
        }
        let [ipv4, ipv6] = by_family;
        let ipv6_over_ipv4 = FamilyRatios::of(&ipv4, &ipv6);
        Ok(ByFamily {
            ipv4,
            ipv6,
            ipv6_over_ipv4,
        })
    }
}

/// IPv6's delivered frames/s over IPv4's, each family flooding its smallest frames, by
/// mode (`None`: a mode without an IPv4 row that delivered anything).
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct FamilyRatios {
    interrupt: Option<f64>,
    polling: Option<f64>,
}

/// A demo row as [`FamilyRatios`] reads it: its mode and its delivered frames/s.
trait Delivered {
    fn mode(&self) -> &str;
    fn delivered_pps(&self) -> f64;
}

impl Delivered for ShareRow {
    fn mode(&self) -> &str {
        &self.mode
    }
    fn delivered_pps(&self) -> f64 {
        self.delivered_pps
    }
}

impl Delivered for DemoRow {
    fn mode(&self) -> &str {
        &self.mode
    }
    fn delivered_pps(&self) -> f64 {
        self.delivered_pps
    }
}

impl FamilyRatios {
    /// The ratios of the rows of the same mode in `ipv4` and `ipv6`.
    fn of<R: Delivered>(ipv4: &[R], ipv6: &[R]) -> FamilyRatios {
        let ratio = |mode: &str| {
            let rate = |rows: &[R]| {
                rows.iter()
                    .find(|r| r.mode() == mode)
                    .map(Delivered::delivered_pps)
            };
            let (v4, v6) = (rate(ipv4)?, rate(ipv6)?);
            (v4 > 0.0).then(|| v6 / v4)
        };
        FamilyRatios {
            interrupt: ratio("interrupt"),
            polling: ratio("polling"),
        }
    }

    /// What the ratios say against the promise (IPv6 at 0.95x IPv4 or more).
    fn sentence(&self) -> String {
        let say = |ratio: Option<f64>| match ratio {
            Some(r) if r >= 0.95 => format!("{r:.2}x (at least 0.95x)"),
            Some(r) => format!("{r:.2}x (below 0.95x)"),
            None => "unknown (no IPv4 frames delivered)".into(),
        };
        format!(
            "IPv6 against IPv4, delivered frames/s (smallest frames of each): interrupt mode {}, polling {}.",
            say(self.interrupt),
            say(self.polling)
        )
    }
}
