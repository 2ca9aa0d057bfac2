//! `polld bench tables`: polld forwarding by a full Internet-sized table of the kernel's.
//!
//! On a veth testbed of its own, fwd's kernel gets a default route to sink and polld
//! (`tables = "kernel"`, polling mode on both interfaces, the kernel's forwarding off)
//! forwards a flood from gen by it: the one-route rate. Then fwd's kernel gets
//! `--routes` random IPv4 prefixes and a fifth as many IPv6 ones of realistic lengths
//! (`ip -batch`, all through sink), and a second polld starts on them; the bench times
//! it from its start until its `polld.tables_routes` and `polld.tables_routes6` hold the
//! kernel's count, reads its resident set (`VmHWM`, the peak, and `VmRSS`), and floods it
//! as before: the full-table rate. Both floods are 65536 flows spread over 128.0.0.0/1
//! (`polld gen --vary dst-ip --ip-step`), so in the full table each frame's lookup walks
//! the trie to the random prefix covering its destination, or the default route.
//!
//! The report gives the three promises as ratios of this run's own figures: the time to
//! take the table in against 30 s, the peak resident set against 512 MB, and the
//! full-table rate against 0.8 of the one-route rate; and whether every frame of each
//! polld run is accounted for (the bench fails when one is not, never on a figure). `--quick` (10,000 routes, one-second floods) shows the
//! structure; its ratios are not the promises' figures.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use polld_control::daemon::daemon_entry;
use polld_core::rng::{Rng, V4_TABLE_LENGTHS, V6_TABLE_LENGTHS};
use serde::Serialize;
use serde_json::Value;

use crate::bench::{on_own_testbed, print_report, write_conservation};
use crate::entries;
use crate::process::{last_json, load_average, Process};
use crate::{sys, Devices, Role, Testbed, TestbedError, VmOptions};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// Arguments of `polld bench tables`.
#[derive(Args, Clone, Debug)]
pub struct TablesArgs {
    /// IPv4 routes put in fwd's kernel table; IPv6 routes: a fifth as many.
    #[arg(long, default_value_t = 1_000_000)]
    pub routes: usize,
    /// Seconds of each flood.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// 10,000 IPv4 routes and one-second floods: the bench's structure, quickly.
    #[arg(long)]
    pub quick: bool,
    /// polld's backend on both interfaces: `af_xdp` or `af_packet`.
    #[arg(long, default_value = "af_xdp")]
    pub backend: String,
    /// Namespace prefix of the bench's own testbed (`{prefix}gen`, ...).
    #[arg(long, default_value = "btbl", value_parser = crate::layout::parse_prefix)]
    pub prefix: String,
    /// Print the report as one JSON document (progress lines still go to stderr).
    #[arg(long)]
    pub json: bool,
}

/// `--quick`'s IPv4 routes.
pub const QUICK_ROUTES: usize = 10_000;
/// The promises: the table taken in within this many seconds of polld's start,
pub const TAKE_IN_S: f64 = 30.0;
/// its peak resident set under this many MB,
pub const RESIDENT_MB: f64 = 512.0;
/// and the full-table rate at least this share of the one-route rate.
pub const RATE_SHARE: f64 = 0.8;

/// The flood's flows, their first destination and the step between them: 65536 flows
/// over 128.0.0.0 .. 222.255.x.x, clear of the testbed's networks and of loopback.
const FLOWS: u32 = 1 << 16;
const FIRST_DST: Ipv4Addr = Ipv4Addr::new(128, 0, 0, 0);
const DST_STEP: u32 = 24_319;

/// One flood through one polld.
#[derive(Clone, Debug, Serialize)]
pub struct Flood {
    /// IPv4 and IPv6 routes polld held (`polld.tables_routes`, `_routes6`).
    pub polld_routes: u64,
    pub polld_routes6: u64,
    /// Frames per second gen sent.
    pub offered_pps: f64,
    /// Frames per second sink's interface received (polld's forwarded frames).
    pub forwarded_pps: f64,
    /// polld's resident set after the flood and its peak (`VmRSS`, `VmHWM`), MB.
    pub rss_mb: f64,
    pub peak_rss_mb: f64,
    /// Every frame of this polld run is in an outcome counter or a drop by reason.
    pub conserved: bool,
}

/// One promise: a figure of the run against its bound.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub value: f64,
    pub bound: f64,
    /// The figure over its bound: at most 1 for an upper bound to hold, at least 1 for a
    /// lower bound.
    pub ratio: f64,
    pub holds: bool,
}

/// What `polld bench tables` measured.
#[derive(Clone, Debug, Serialize)]
pub struct TablesReport {
    pub backend: String,
    /// Routes added to fwd's kernel table by `ip -batch`.
    pub routes: usize,
    pub routes6: usize,
    /// Seconds `ip -batch` took to add them.
    pub kernel_load_s: f64,
    /// Seconds from polld's start until it held them all.
    pub take_in_s: f64,
    pub one_route: Flood,
    pub full_table: Flood,
    pub checks: Vec<Check>,
    /// Every frame of both polld runs accounted for.
    pub conserved: bool,
    /// The machine's 1-minute load average at the bench's start and end, and its CPUs:
    /// figures taken while other work ran are not the promises' figures.
    pub load_average: (f64, f64),
    pub cpus: usize,
}

impl TablesReport {
    /// The bench's verdict: it fails when a frame of either polld run is unaccounted
    /// for, never on a figure (the checks say how the figures compare).
    pub fn verdict(&self) -> Result<(), TestbedError> {
        if self.conserved {
            return Ok(());
        }
        Err(failed(
            "polld bench tables: a frame of a polld run is in no outcome or drop counter:              see the runs' conserved fields"
                .to_string(),
        ))
    }
}

/// Runs the bench on a veth testbed of its own and prints its report to `out`.
pub fn run_tables(
    args: &TablesArgs,
    polld: &Path,
    out: &mut dyn Write,
    progress: &mut dyn Write,
) -> Result<TablesReport, TestbedError> {
    let (routes, seconds) = if args.quick {
        (QUICK_ROUTES, 1.0)
    } else {
        (args.routes, args.seconds)
    };
    if routes == 0 || !seconds.is_finite() || seconds <= 0.0 {
        return Err(failed(format!(
            "polld bench tables: --routes {routes} and --seconds {seconds}: give a positive \
             number of routes and of seconds"
        )));
    }
    let polld = polld.to_string_lossy().to_string();
    let load_at_start = load_average();
    let report = on_own_testbed(
        "tables",
        &args.prefix,
        Devices::Veth,
        &VmOptions::default(),
        progress,
        |tb, dir, (gen_cpu, fwd_cpu), progress| {
            let bed = Bed {
                tb,
                polld: &polld,
                dir,
                backend: &args.backend,
                cpus: (gen_cpu, fwd_cpu),
                seconds,
            };
            bed.prepare_fwd()?;
            let _ = writeln!(
                progress,
                "polld bench tables: one route, flood of {seconds} s"
            );
            let (one_route, _) = bed.polld_run(None)?;
            let routes6 = routes / 5;
            let batch = dir.join("routes.batch");
            std::fs::write(&batch, bed.batch(routes, routes6))
                .map_err(|e| failed(format!("writing {}: {e}", batch.display())))?;
            let _ = writeln!(
                progress,
                "polld bench tables: adding {routes} IPv4 and {routes6} IPv6 routes with ip -batch"
            );
            let start = Instant::now();
            sys::ip_in(&tb.layout().fwd_ns, &["-batch", &batch.to_string_lossy()])?;
            let kernel_load_s = start.elapsed().as_secs_f64();
            let want = (
                one_route.polld_routes + routes as u64,
                one_route.polld_routes6 + routes6 as u64,
            );
            let _ = writeln!(
                progress,
                "polld bench tables: full table, flood of {seconds} s"
            );
            let (full_table, take_in_s) = bed.polld_run(Some(want))?;
            let take_in_s = take_in_s.expect("a full-table run waits for its routes");
            Ok(TablesReport {
                backend: args.backend.clone(),
                routes,
                routes6,
                kernel_load_s,
                take_in_s,
                checks: checks(take_in_s, &one_route, &full_table),
                conserved: one_route.conserved && full_table.conserved,
                one_route,
                full_table,
                load_average: (load_at_start, load_average()),
                cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            })
        },
    )?;
    print_report(&report, args.json, out, write_text);
    Ok(report)
}

/// The promises as ratios of the run's figures.
fn checks(take_in_s: f64, one: &Flood, full: &Flood) -> Vec<Check> {
    let upper = |name, value: f64, bound| Check {
        name,
        value,
        bound,
        ratio: value / bound,
        holds: value <= bound,
    };
    let share = full.forwarded_pps / one.forwarded_pps.max(1.0);
    vec![
        upper("take_in_s", take_in_s, TAKE_IN_S),
        upper("peak_rss_mb", full.peak_rss_mb, RESIDENT_MB),
        Check {
            name: "rate_share",
            value: share,
            bound: RATE_SHARE,
            ratio: share / RATE_SHARE,
            holds: share >= RATE_SHARE,
        },
    ]
}

/// The testbed and what every polld run of the bench shares.
struct Bed<'a> {
    tb: &'a Testbed,
    polld: &'a str,
    dir: &'a Path,
    backend: &'a str,
    /// gen's and fwd's CPUs.
    cpus: (usize, usize),
    seconds: f64,
}

impl Bed<'_> {
    /// fwd's kernel as a router's: IPv6 on its sink side (an address and sink's as a
    /// permanent neighbour, for the IPv6 routes' gateway) and the default route to sink.
    fn prepare_fwd(&self) -> Result<(), TestbedError> {
        let layout = self.tb.layout();
        let (ns, out, sink) = (&layout.fwd_ns, &layout.veth2, &layout.veth3);
        let ipv6 = format!("net.ipv6.conf.{}.disable_ipv6=0", out.name);
        sys::exec_in(ns, "sysctl", &["-qw", &ipv6])?;
        sys::ip_in(
            ns,
            &[
                "-6",
                "addr",
                "replace",
                &out.cidr6(),
                "dev",
                &out.name,
                "nodad",
            ],
        )?;
        let gw6 = sink.addr6.to_string();
        let neigh = ["-6", "neigh", "replace", &gw6, "lladdr", &sink.mac];
        sys::ip_in(
            ns,
            &[&neigh[..], &["dev", &out.name, "nud", "permanent"]].concat(),
        )?;
        let gw = sink.addr.to_string();
        sys::ip_in(
            ns,
            &["route", "replace", "default", "via", &gw, "dev", &out.name],
        )
        .map(drop)
    }

    /// The `ip -batch` text adding `routes` distinct random IPv4 prefixes and `routes6`
    /// IPv6 ones (in 2000::/3) via sink. No IPv4 prefix is in 0/8, 10/8 (the testbed's),
    /// 127/8 or above 224/4.
    fn batch(&self, routes: usize, routes6: usize) -> String {
        let layout = self.tb.layout();
        let (dev, gw, gw6) = (&layout.veth2.name, layout.veth3.addr, layout.veth3.addr6);
        let mut rng = Rng::new(36);
        let mut text = String::with_capacity((routes + routes6) * 48);
        let mut seen = HashSet::with_capacity(routes);
        while seen.len() < routes {
            let len = rng.weighted(&V4_TABLE_LENGTHS);
            let net = rng.next_u64() as u32 & (!0u32 << (32 - len));
            let first = net >> 24;
            if matches!(first, 0 | 10 | 127) || first >= 224 || !seen.insert((net, len)) {
                continue;
            }
            let _ = writeln!(
                text,
                "route add {}/{len} via {gw} dev {dev}",
                Ipv4Addr::from(net)
            );
        }
        let mut seen6 = HashSet::with_capacity(routes6);
        while seen6.len() < routes6 {
            let len = rng.weighted(&V6_TABLE_LENGTHS);
            let high = rng.next_u64() >> 3 | 1 << 61;
            let net = u128::from(high) << 64 & (!0u128 << (128 - len));
            if !seen6.insert((net, len)) {
                continue;
            }
            let _ = writeln!(
                text,
                "route add {}/{len} via {gw6} dev {dev}",
                Ipv6Addr::from(net)
            );
        }
        text
    }

    /// Starts polld on the kernel's tables of fwd, waits until it holds `want` (IPv4 and
    /// IPv6 routes; with `None` until it holds a route), floods it for the bench's
    /// seconds and stops it. Returns the flood and, with `want`, the seconds from polld's
    /// start until it held them.
    fn polld_run(&self, want: Option<(u64, u64)>) -> Result<(Flood, Option<f64>), TestbedError> {
        let layout = self.tb.layout();
        let socket = self.dir.join("polld.sock");
        let _ = std::fs::remove_file(&socket);
        let config = self.dir.join("polld.toml");
        std::fs::write(&config, self.config(&socket))
            .map_err(|e| failed(format!("writing {}: {e}", config.display())))?;
        let start = Instant::now();
        let mut daemon = Process::spawn(
            self.tb
                .command_in(Role::Fwd, None, self.polld)?
                .args(["run", "--json", "-c"])
                .arg(&config),
            "polld run",
        )?;
        let held = wait_for_routes(&socket, &mut daemon, want.unwrap_or((1, 0)))?;
        let take_in_s = want.map(|_| start.elapsed().as_secs_f64());
        let before = self.tb.counters(&layout.veth3.name)?.rx_packets;
        let at = Instant::now();
        let gen = self.gen()?;
        let wall = at.elapsed().as_secs_f64();
        let forwarded = self.tb.counters(&layout.veth3.name)?.rx_packets - before;
        let (rss_mb, peak_rss_mb) = resident_mb(daemon.pid());
        let report = daemon.finish()?;
        let interfaces: Value = serde_json::from_str(&report)
            .map_err(|e| failed(format!("polld run --json printed {report:?}: {e}")))?;
        let flood = Flood {
            polld_routes: held.0,
            polld_routes6: held.1,
            offered_pps: gen["pps"].as_f64().unwrap_or(0.0),
            forwarded_pps: forwarded as f64 / wall,
            rss_mb,
            peak_rss_mb,
            conserved: entries::conserved(&interfaces),
        };
        Ok((flood, take_in_s))
    }

    /// polld's config: the kernel's tables, both fwd interfaces polling on fwd's CPU.
    fn config(&self, socket: &Path) -> String {
        let layout = self.tb.layout();
        let mut c = format!(
            "# polld bench tables\ntables = \"kernel\"\n\n[daemon]\nsocket = {:?}\ncpu = {}\n\
             realtime = true\n",
            socket.display().to_string(),
            self.cpus.1
        );
        for iface in [&layout.veth1, &layout.veth2] {
            let _ = write!(
                c,
                "\n[[interfaces]]\nname = {:?}\nbackend = {:?}\nmode = \"polling\"\n",
                iface.name, self.backend
            );
        }
        c
    }

    /// The flood: `polld gen` from gen at full speed for the bench's seconds, its flows
    /// spread over 128.0.0.0/1; returns its summary.
    fn gen(&self) -> Result<Value, TestbedError> {
        let layout = self.tb.layout();
        let output = self
            .tb
            .command_in(Role::Gen, Some(self.cpus.0), self.polld)?
            .args([
                "gen",
                &layout.veth0.name,
                "--json",
                "-i",
                "0",
                "--rate",
                "unlimited",
            ])
            .args(["--duration", &self.seconds.to_string()])
            .args([
                "--dst-mac",
                &layout.veth1.mac,
                "--src-mac",
                &layout.veth0.mac,
            ])
            .args(["--src-ip", &layout.veth0.addr.to_string()])
            .args(["--dst-ip", &FIRST_DST.to_string(), "--vary", "dst-ip"])
            .args([
                "--flows",
                &FLOWS.to_string(),
                "--ip-step",
                &DST_STEP.to_string(),
            ])
            .output()
            .map_err(|e| failed(format!("polld gen: {e}")))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        last_json(&stdout)
            .filter(|v| v["error"].is_null())
            .ok_or_else(|| {
                failed(format!(
                    "polld gen failed: {stdout} {}",
                    String::from_utf8_lossy(&output.stderr)
                ))
            })
    }
}

/// How long polld may take to hold the routes before the bench gives up: well beyond
/// [`TAKE_IN_S`], so that a slow take-in is measured, not cut off.
const GIVE_UP: Duration = Duration::from_secs(300);

/// Waits until polld's control socket answers with at least `want` IPv4 and IPv6 routes
/// held; returns what it holds then.
fn wait_for_routes(
    socket: &Path,
    daemon: &mut Process,
    want: (u64, u64),
) -> Result<(u64, u64), TestbedError> {
    let deadline = Instant::now() + GIVE_UP;
    let mut held = (0, 0);
    loop {
        if let Ok(values) = entries::polld_values(socket, daemon_entry::NODE) {
            held = (
                entries::value_of(&values, daemon_entry::TABLES_ROUTES),
                entries::value_of(&values, daemon_entry::TABLES_ROUTES6),
            );
            if held.0 >= want.0 && held.1 >= want.1 {
                return Ok(held);
            }
        }
        if Instant::now() > deadline || daemon.exited().is_some() {
            let why = daemon
                .finish()
                .err()
                .map_or_else(|| "still running".to_string(), |e| e.to_string());
            return Err(failed(format!(
                "polld run held {} IPv4 and {} IPv6 routes of the kernel's {} and {} after \
                 {} s ({why}): see its log above",
                held.0,
                held.1,
                want.0,
                want.1,
                GIVE_UP.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Process `pid`'s resident set now and its peak (`VmRSS`, `VmHWM`), MB.
fn resident_mb(pid: u32) -> (f64, f64) {
    let mb = |field| crate::process::status_kib(pid, field) as f64 / 1024.0;
    (mb("VmRSS:"), mb("VmHWM:"))
}

fn write_text(r: &TablesReport, out: &mut dyn Write) {
    let _ = writeln!(
        out,
        "polld bench tables ({}): {} IPv4 and {} IPv6 routes in fwd's kernel (ip -batch: {:.1} s)",
        r.backend, r.routes, r.routes6, r.kernel_load_s
    );
    let _ = writeln!(
        out,
        "{:<12} {:>10} {:>10} {:>12} {:>12} {:>9} {:>9}",
        "table", "routes", "routes6", "offered pps", "fwd pps", "RSS MB", "peak MB"
    );
    for (name, f) in [("one route", &r.one_route), ("full", &r.full_table)] {
        let _ = writeln!(
            out,
            "{name:<12} {:>10} {:>10} {:>12.0} {:>12.0} {:>9.1} {:>9.1}",
            f.polld_routes,
            f.polld_routes6,
            f.offered_pps,
            f.forwarded_pps,
            f.rss_mb,
            f.peak_rss_mb
        );
    }
    for c in &r.checks {
        let _ = writeln!(
            out,
            "{:<12} {:>10.2} against {:>7.2}: {:.2}x of the bound, {}",
            c.name,
            c.value,
            c.bound,
            c.ratio,
            if c.holds { "holds" } else { "FAILS" }
        );
    }
    write_conservation(r.conserved, out);
    let (start, end) = r.load_average;
    let _ = writeln!(
        out,
        "load average {start:.2} at the start, {end:.2} at the end, on {} CPUs{}",
        r.cpus,
        if start.max(end) > 1.0 {
            ": a loaded machine, the figures are not the promises'"
        } else {
            ""
        }
    );
}
