//! `polld gen`: a paced loop of `Device::send` + `Device::flush` with counted, timed frames.
//!
//! The generator sends on the same [`Device`] backends polld forwards with. Each frame
//! belongs to one of `--flows` flows (round robin); every flow numbers its frames 0, 1,
//! 2, ... and the frame carries its send time, so `polld sink` can count loss and
//! reordering and measure one-way latency. The rate is held by [`Pacer`]; when the
//! device pushes back (its ring is full, or the kernel said ENOBUFS/EAGAIN) the frame is
//! retried, never dropped, and the push-back is counted. At the end it sends end-of-run
//! records ([`end_of_run_frames`]) with each flow's count of issued numbers, so that the
//! sink counts as lost what it never received.
//!
//! Flows differ in their UDP ports by default: on a router (the testbed) every flow then
//! takes flow 0's route and neighbour. `--vary src-ip,dst-ip` gives each flow its own
//! addresses, which must then be routable (and not the router's own).
//!
//! The frames are IPv4 unless `--ipv6` is given or an address given is IPv6; the default
//! addresses and the smallest frame ([`smallest_frame`]) follow the family.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use serde::Serialize;

use crate::backend::{TxBackend, TxDevice};
use crate::clock::{monotonic_ns, tighten_timer_slack, wait_towards};
use crate::faults::{Gap, SeqSchedule};
use crate::frame::{
    check_frame_size, end_of_run_frames, parse_frame_size, smallest_frame, FlowAddrs, FlowTemplate,
    Mac,
};
use crate::pace::{Pacer, CATCH_UP_WINDOW_NS};
use crate::rate::{bitrate_to_pps, parse_bitrate, parse_rate, Rate};
use crate::report::{format_pps, mbit_per_s, per_second, Reporter};
use crate::{parse_duration, parse_seconds, seconds_to_ns, Error};

/// Most frames handed to the device between two flushes.
const MAX_BATCH: u64 = 64;
/// Most flows: the flow id is 16 bits in the frame.
pub const MAX_FLOWS: u32 = 1 << 16;
/// Each end-of-run record is sent this many times, this far apart, so that one lost
/// copy does not hide the run's tail from the sink.
const END_COPIES: u32 = 3;
const END_COPY_GAP_NS: u64 = 1_000_000;

/// The header fields that differ between flows: flow `i` adds `i` to each chosen field.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowField {
    SrcIp,
    DstIp,
    SrcPort,
    DstPort,
}

/// Arguments of `polld gen`.
#[derive(Args, Clone, Debug)]
#[command(
    about = "Send counted, timestamped Ethernet/IPv4/UDP or IPv6/UDP frames at a precise rate"
)]
pub struct GenArgs {
    /// Interface to send on.
    pub interface: String,

    /// Network namespace to enter before opening the interface (see `ip netns list`).
    #[arg(long)]
    pub netns: Option<String>,

    /// Device backend, the same ones polld forwards with.
    #[arg(long, value_enum, default_value_t = TxBackend::DEFAULT)]
    pub backend: TxBackend,

    /// Frame rate: 100k, 1.5M, 300000, or `unlimited` (the default without --bitrate).
    #[arg(long, value_parser = parse_rate, conflicts_with = "bitrate")]
    pub rate: Option<Rate>,

    /// Bit rate of the frames (without FCS): 100M, 1.5Gbit.
    #[arg(long, value_parser = parse_bitrate)]
    pub bitrate: Option<f64>,

    /// Frame size in bytes without the FCS, 60..=1514 (60 is 64 on the wire); IPv6
    /// frames are at least 80 bytes. Default: the family's smallest frame.
    #[arg(long, value_parser = parse_frame_size)]
    pub size: Option<usize>,

    /// Number of flows; flow i adds i to every field named by --vary (by default the
    /// UDP ports, so that every flow takes flow 0's route).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=MAX_FLOWS as i64))]
    pub flows: u32,

    /// The id of the first flow (this run's flows are first..first+flows): generators
    /// that send to one sink each take their own range, so that the sink keeps their
    /// sequences apart.
    #[arg(long, default_value_t = 0)]
    pub first_flow: u16,

    /// Header fields that differ between flows.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "src-port,dst-port"
    )]
    pub vary: Vec<FlowField>,

    /// The step between flows' addresses named by --vary: flow i adds i × STEP to them
    /// (IPv4 wrapping around 2^32). A large step spreads the flows over a routing table
    /// instead of one network (65536 flows, step 24319, from 128.0.0.0: over 128/1).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub ip_step: u32,

    /// Stop after this many seconds (with --count: whichever comes first).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<f64>,

    /// Stop after sending this many frames.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Source MAC of every frame.
    #[arg(long, default_value = "02:00:00:00:01:01")]
    pub src_mac: Mac,
    /// Destination MAC of every frame: the peer's, or the next hop's when forwarding.
    #[arg(long, default_value = "02:00:00:00:01:02")]
    pub dst_mac: Mac,
    /// Send UDP over IPv6 (implied by an IPv6 --src-ip or --dst-ip).
    #[arg(long)]
    pub ipv6: bool,
    /// Source address of flow 0 [default: 10.0.1.1, with IPv6 2001:db8:1::1].
    #[arg(long)]
    pub src_ip: Option<IpAddr>,
    /// Destination address of flow 0 [default: 10.0.2.100, with IPv6 2001:db8:2::100].
    #[arg(long)]
    pub dst_ip: Option<IpAddr>,
    /// UDP source port of flow 0.
    #[arg(long, default_value_t = 9)]
    pub src_port: u16,
    /// UDP destination port of flow 0.
    #[arg(long, default_value_t = 9)]
    pub dst_port: u16,

    /// Seconds between interval reports; 0 for the summary only.
    #[arg(short = 'i', long = "interval", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,

    /// Print one JSON document when the run ends, on one line: the summary, with every
    /// interval's report in `intervals`; the text lines go to stderr meanwhile.
    #[arg(long)]
    pub json: bool,

    /// Fault injection: never send sequence numbers AT..AT+LEN, in every flow, so the
    /// sink must count LEN lost frames per flow. Repeatable.
    #[arg(long = "inject-gap", value_name = "AT:LEN")]
    pub inject_gap: Vec<Gap>,

    /// Fault injection: send sequence number AT+1 before AT, in every flow, so the sink
    /// must count one reordered frame per flow and no loss. Repeatable.
    #[arg(long = "inject-reorder", value_name = "AT")]
    pub inject_reorder: Vec<u64>,
}

/// Frames due within this time are sent with one flush: at 300 kpps about 6 frames
/// share a system call, at 10 kpps each frame still goes alone and on time.
const BATCH_WINDOW_NS: u64 = 20_000;
/// How long the end of a run waits for frames still staged in the device.
const DRAIN_NS: u64 = 200_000_000;

/// Counters over an interval or the whole run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct TxCounts {
    frames: u64,
    /// `send` refusals (ring or batch full).
    refused: u64,
    /// The device's own counters (see [`TxDevice`]), read at each report.
    device_pushbacks: u64,
    dropped: u64,
    /// The interface's `tx_dropped` since the start (see [`crate::link`]).
    link_dropped: u64,
    skipped: u64,
}

impl TxCounts {
    fn pushed_back(&self) -> u64 {
        self.refused + self.device_pushbacks
    }

    /// Reads the counters only the device and the pacer know.
    fn refresh(&mut self, dev: &mut dyn TxDevice, pacer: Option<&Pacer>, link: &LinkDrops) {
        self.device_pushbacks = dev.tx_pushbacks();
        self.dropped = dev.tx_dropped();
        self.link_dropped = link.since_start();
        self.skipped = pacer.map_or(0, Pacer::skipped);
    }
}

/// One interval report.
#[derive(Clone, Debug, Serialize)]
pub struct GenInterval {
    /// Seconds since the start.
    pub start: f64,
    pub end: f64,
    pub frames: u64,
    pub pps: f64,
    pub mbit_per_s: f64,
    /// How often the device pushed back (ring full, EAGAIN); the frames were retried.
    pub pushed_back: u64,
    /// Frames the device accepted and then dropped (ENOBUFS from a full driver queue).
    pub dropped: u64,
    /// The interface's own transmit drops (veth ring full); may include `dropped`.
    pub link_dropped: u64,
    /// Frames the schedule skipped because the generator fell too far behind.
    pub skipped: u64,
}

/// What a run did.
#[derive(Clone, Debug, Serialize)]
pub struct GenSummary {
    pub interface: String,
    pub backend: String,
    /// 4 or 6.
    pub ip_version: u8,
    pub frame_size: usize,
    pub flows: u32,
    /// The target rate; `None` when unlimited.
    pub target_pps: Option<f64>,
    pub seconds: f64,
    /// Frames the device accepted (`dropped` of them were lost after all).
    pub frames: u64,
    pub pps: f64,
    pub mbit_per_s: f64,
    pub pushed_back: u64,
    pub dropped: u64,
    /// The interface's own transmit drops during the run (veth ring full), which some
    /// backends never see; `None` if the interface has no such counter.
    pub link_dropped: Option<u64>,
    pub skipped: u64,
    /// Frames still staged in the device when the run ended (not sent).
    pub unsent: u64,
    /// End-of-run records the device accepted (each record goes out several times).
    pub end_records: u64,
}

/// A validated generator configuration, ready to run on a device.
#[derive(Clone, Debug)]
pub struct Generator {
    interface: String,
    backend: TxBackend,
    flows: Vec<FlowTemplate>,
    frame_size: usize,
    rate: Rate,
    duration_ns: Option<u64>,
    count: Option<u64>,
    interval_ns: Option<u64>,
    json: bool,
    schedule: SeqSchedule,
    /// The id of the first flow.
    first_flow: u16,
    /// Flow 0's addresses, which the end-of-run records take.
    base: FlowAddrs,
}

impl Generator {
    /// Checks the arguments and builds every flow's frame.
    pub fn new(args: &GenArgs) -> Result<Generator, Error> {
        let base = flow_addrs(args, 0)?;
        let frame_size = check_frame_size(args.size.unwrap_or(smallest_frame(base.dst_ip)))?;
        if args.flows == 0 || args.flows > MAX_FLOWS {
            return Err(Error(format!(
                "--flows {} is out of range: use 1..={MAX_FLOWS}",
                args.flows
            )));
        }
        let rate = match (args.rate, args.bitrate) {
            (Some(_), Some(_)) => {
                return Err(Error("give --rate or --bitrate, not both".into()));
            }
            (Some(rate), None) => rate,
            (None, Some(bits)) => Rate::Pps(bitrate_to_pps(bits, frame_size)),
            (None, None) => Rate::Unlimited,
        };
        if let Rate::Pps(pps) = rate {
            if !(pps > 0.0 && pps.is_finite()) {
                return Err(Error(format!("the rate must be above zero, not {pps}")));
            }
        }
        if u32::from(args.first_flow) + args.flows > MAX_FLOWS {
            return Err(Error(format!(
                "--first-flow {} with --flows {} runs past flow id {}: lower one of them",
                args.first_flow,
                args.flows,
                MAX_FLOWS - 1
            )));
        }
        let flows = (0..args.flows)
            .map(|i| {
                Ok(FlowTemplate::new(
                    &flow_addrs(args, i)?,
                    args.first_flow + i as u16,
                    frame_size,
                )?)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Generator {
            interface: args.interface.clone(),
            backend: args.backend,
            flows,
            frame_size,
            rate,
            duration_ns: args.duration.map(seconds_to_ns),
            count: args.count,
            interval_ns: Some(seconds_to_ns(args.interval)).filter(|&ns| ns > 0),
            json: args.json,
            schedule: SeqSchedule::new(&args.inject_gap, &args.inject_reorder),
            first_flow: args.first_flow,
            base,
        })
    }

    /// Sends until the duration or count is reached or `stop` is set, reporting to `out`.
    pub fn run(
        mut self,
        dev: &mut dyn TxDevice,
        stop: &AtomicBool,
        out: &mut dyn std::io::Write,
    ) -> GenSummary {
        tighten_timer_slack();
        let mut report = Reporter::new(out, self.json);
        report.note(&format!(
            "[gen] {} ({}), {}-byte IPv{} frames, {} flow(s), rate {}",
            self.interface,
            self.backend.name(),
            self.frame_size,
            if self.base.dst_ip.is_ipv6() { 6 } else { 4 },
            self.flows.len(),
            match self.rate {
                Rate::Pps(pps) => format_pps(pps),
                Rate::Unlimited => "unlimited".into(),
            }
        ));
        report.note(&format!(
            "[gen] {:>13} {:>12} {:>13} {:>15} {:>12} {:>9} {:>10} {:>9}",
            "interval",
            "frames",
            "rate",
            "bitrate",
            "pushed back",
            "dropped",
            "link drops",
            "skipped"
        ));

        let link = LinkDrops::start(&self.interface);
        let start = monotonic_ns();
        let deadline = self.duration_ns.map(|d| start + d);
        let mut pacer = match self.rate {
            Rate::Pps(pps) => {
                Some(Pacer::new(pps, start, BATCH_WINDOW_NS).until(deadline.unwrap_or(u64::MAX)))
            }
            Rate::Unlimited => None,
        };
        let mut next_report = self.interval_ns.map(|i| start + i);
        let mut total = TxCounts::default();
        let mut reported = (start, total);
        let mut flow = 0;
        let mut seq = self.schedule.next_seq();
        // Per flow, one past the highest number sent (gaps included, as the sink counts).
        let mut issued = vec![0u64; self.flows.len()];
        let mut now = start;

        loop {
            if stop.load(Ordering::Relaxed) || self.count.is_some_and(|c| total.frames >= c) {
                break;
            }
            if let (Some(due), Some(interval)) = (next_report, self.interval_ns) {
                if now >= due {
                    total.refresh(dev, pacer.as_ref(), &link);
                    self.report_interval(&mut report, start, reported, (now, total));
                    reported = (now, total);
                    next_report = Some((due + interval).max(now + 1));
                }
            }
            let mut want = pacer
                .as_mut()
                .map_or(MAX_BATCH, |p| p.due(now))
                .min(MAX_BATCH);
            if let Some(count) = self.count {
                want = want.min(count - total.frames);
            }
            // At the deadline a paced run still sends the frames that fell due before it,
            // for at most the catch-up window (the device may refuse them for good).
            if let Some(d) = deadline.filter(|&d| now >= d) {
                if want == 0 || now >= d + CATCH_UP_WINDOW_NS {
                    if let Some(p) = pacer.as_mut() {
                        p.skip_due(now);
                    }
                    break;
                }
            }
            if want == 0 {
                let next_frame = pacer.as_ref().map_or(now, Pacer::next_due_ns);
                let wake = [Some(next_frame), next_report, deadline]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(now);
                wait_towards(wake);
                now = monotonic_ns();
                continue;
            }
            let mut sent = 0;
            while sent < want {
                let frame = self.flows[flow].stamp(seq, monotonic_ns());
                if dev.send(frame).is_err() {
                    total.refused += 1;
                    break;
                }
                sent += 1;
                issued[flow] = issued[flow].max(seq + 1);
                flow += 1;
                if flow == self.flows.len() {
                    flow = 0;
                    seq = self.schedule.next_seq();
                }
            }
            dev.flush();
            total.frames += sent;
            if let Some(p) = pacer.as_mut() {
                p.sent(sent);
            }
            now = monotonic_ns();
        }

        self.drain(dev);
        let end_records = self.send_end_of_run(dev, start, &issued);
        total.refresh(dev, pacer.as_ref(), &link);
        if self.interval_ns.is_some() && now > reported.0 && total != reported.1 {
            self.report_interval(&mut report, start, reported, (now, total));
        }
        let seconds = (now - start) as f64 / 1e9;
        let summary = GenSummary {
            interface: self.interface.clone(),
            backend: self.backend.name().into(),
            ip_version: if self.base.dst_ip.is_ipv6() { 6 } else { 4 },
            frame_size: self.frame_size,
            flows: self.flows.len() as u32,
            target_pps: match self.rate {
                Rate::Pps(pps) => Some(pps),
                Rate::Unlimited => None,
            },
            seconds,
            frames: total.frames,
            pps: per_second(total.frames, seconds),
            mbit_per_s: mbit_per_s(total.frames * self.frame_size as u64, seconds),
            pushed_back: total.pushed_back(),
            dropped: total.dropped,
            link_dropped: link.base.map(|_| total.link_dropped),
            skipped: total.skipped,
            unsent: dev.tx_pending(),
            end_records,
        };
        let mut text = format!(
                "[gen] {:>5.2}-{:<5.2} s {:>12} {:>13} {:>10.2} Mbit/s {:>12} {:>9} {:>10} {:>9}  summary",
                0.0,
                seconds,
                summary.frames,
                format_pps(summary.pps),
                summary.mbit_per_s,
                summary.pushed_back,
                summary.dropped,
                summary.link_dropped.map_or("-".into(), |d| d.to_string()),
                summary.skipped
            );
        if summary.unsent > 0 {
            text += &format!(
                "\n[gen] {} frames were still queued in the device at the end",
                summary.unsent
            );
        }
        report.summary(&summary, &text);
        summary
    }

    /// Waits (a bounded time) for the frames still staged in the device.
    fn drain(&self, dev: &mut dyn TxDevice) {
        let drain_until = monotonic_ns() + DRAIN_NS;
        while dev.tx_pending() > 0 && monotonic_ns() < drain_until {
            dev.flush();
            wait_towards(monotonic_ns() + 50_000);
        }
    }

    /// Sends the end-of-run records [`END_COPIES`] times; returns how many the device
    /// accepted. A copy the device refuses is not retried: the others stand in for it.
    fn send_end_of_run(&self, dev: &mut dyn TxDevice, start: u64, issued: &[u64]) -> u64 {
        let frames = end_of_run_frames(&self.base, start, self.first_flow, issued);
        let mut accepted = 0;
        for copy in 0..END_COPIES {
            if copy > 0 {
                wait_towards(monotonic_ns() + END_COPY_GAP_NS);
            }
            for frame in &frames {
                if dev.send(frame).is_ok() {
                    accepted += 1;
                }
                dev.flush();
            }
        }
        self.drain(dev);
        accepted
    }

    fn report_interval(
        &self,
        report: &mut Reporter<'_>,
        start: u64,
        (from_ns, from): (u64, TxCounts),
        (to_ns, to): (u64, TxCounts),
    ) {
        let seconds = (to_ns - from_ns) as f64 / 1e9;
        let frames = to.frames - from.frames;
        let interval = GenInterval {
            start: (from_ns - start) as f64 / 1e9,
            end: (to_ns - start) as f64 / 1e9,
            frames,
            pps: per_second(frames, seconds),
            mbit_per_s: mbit_per_s(frames * self.frame_size as u64, seconds),
            pushed_back: to.pushed_back() - from.pushed_back(),
            dropped: to.dropped - from.dropped,
            link_dropped: to.link_dropped - from.link_dropped,
            skipped: to.skipped - from.skipped,
        };
        report.interval(
            &interval,
            &format!(
                "[gen] {:>5.2}-{:<5.2} s {:>12} {:>13} {:>10.2} Mbit/s {:>12} {:>9} {:>10} {:>9}",
                interval.start,
                interval.end,
                interval.frames,
                format_pps(interval.pps),
                interval.mbit_per_s,
                interval.pushed_back,
                interval.dropped,
                interval.link_dropped,
                interval.skipped
            ),
        );
    }
}

/// The interface's transmit-drop counter at the start of a run.
struct LinkDrops {
    interface: String,
    base: Option<u64>,
}

impl LinkDrops {
    fn start(interface: &str) -> LinkDrops {
        LinkDrops {
            interface: interface.to_string(),
            base: crate::link::tx_dropped(interface),
        }
    }

    fn since_start(&self) -> u64 {
        match (self.base, crate::link::tx_dropped(&self.interface)) {
            (Some(base), Some(now)) => now.saturating_sub(base),
            _ => 0,
        }
    }
}

/// The addresses of flow `i`: the base addresses with `i` added to each varied field.
/// The family is IPv6 with `--ipv6` or an IPv6 address given, else IPv4; an address of
/// the other family is refused.
fn flow_addrs(args: &GenArgs, i: u32) -> Result<FlowAddrs, Error> {
    let ipv6 = args.ipv6
        || [args.src_ip, args.dst_ip]
            .iter()
            .flatten()
            .any(IpAddr::is_ipv6);
    let pick = |given: Option<IpAddr>, v4: Ipv4Addr, v6: Ipv6Addr, option: &str| match given {
        Some(ip) if ip.is_ipv6() != ipv6 => Err(Error(format!(
            "{option} {ip} is not of the family the run sends ({}): give both addresses \
             of one family",
            if ipv6 { "IPv6" } else { "IPv4" }
        ))),
        Some(ip) => Ok(ip),
        None if ipv6 => Ok(IpAddr::V6(v6)),
        None => Ok(IpAddr::V4(v4)),
    };
    let src_ip = pick(
        args.src_ip,
        Ipv4Addr::new(10, 0, 1, 1),
        Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1),
        "--src-ip",
    )?;
    let dst_ip = pick(
        args.dst_ip,
        Ipv4Addr::new(10, 0, 2, 100),
        Ipv6Addr::new(0x2001, 0xdb8, 2, 0, 0, 0, 0, 0x100),
        "--dst-ip",
    )?;
    let vary = |field| args.vary.contains(&field);
    let add_ip = |ip: IpAddr, field| match ip {
        IpAddr::V4(v4) if vary(field) => IpAddr::V4(Ipv4Addr::from(
            u32::from(v4).wrapping_add(i.wrapping_mul(args.ip_step)),
        )),
        IpAddr::V6(v6) if vary(field) => IpAddr::V6(Ipv6Addr::from(
            u128::from(v6).wrapping_add(u128::from(i) * u128::from(args.ip_step)),
        )),
        ip => ip,
    };
    let add_port = |port: u16, field| {
        if vary(field) {
            port.wrapping_add(i as u16)
        } else {
            port
        }
    };
    Ok(FlowAddrs {
        src_mac: args.src_mac,
        dst_mac: args.dst_mac,
        src_ip: add_ip(src_ip, FlowField::SrcIp),
        dst_ip: add_ip(dst_ip, FlowField::DstIp),
        src_port: add_port(args.src_port, FlowField::SrcPort),
        dst_port: add_port(args.dst_port, FlowField::DstPort),
    })
}

/// `polld gen`: checks the arguments, enters `--netns`, opens the backend and sends until
/// the duration or count is reached or SIGINT/SIGTERM arrives. Reports go to `out`.
pub fn run_gen(args: &GenArgs, out: &mut dyn std::io::Write) -> Result<GenSummary, Error> {
    let generator = Generator::new(args)?;
    if let Some(netns) = &args.netns {
        polld_dev::netns::enter(netns)?;
    }
    let mut dev = args.backend.open(&args.interface)?;
    let stop = crate::clock::stop_on_signals();
    Ok(generator.run(dev.as_mut(), stop, out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gen: GenArgs,
    }

    fn args(line: &[&str]) -> GenArgs {
        Cli::try_parse_from([&["gen", "veth0"], line].concat())
            .expect("valid arguments")
            .gen
    }

    #[test]
    fn flows_step_their_varied_addresses_by_ip_step() {
        let spread = args(&["--flows", "3", "--vary", "dst-ip", "--ip-step", "24319"]);
        let dst = |a: &GenArgs, i| flow_addrs(a, i).unwrap().dst_ip;
        assert_eq!(dst(&spread, 0), IpAddr::from([10, 0, 2, 100]));
        assert_eq!(
            dst(&spread, 2),
            IpAddr::from(Ipv4Addr::from(
                u32::from(Ipv4Addr::new(10, 0, 2, 100)) + 2 * 24319
            ))
        );
        assert_eq!(
            flow_addrs(&spread, 2).unwrap().src_ip,
            IpAddr::from([10, 0, 1, 1])
        );
        let v6 = args(&["--ipv6", "--vary", "src-ip", "--ip-step", "256"]);
        assert_eq!(
            flow_addrs(&v6, 3).unwrap().src_ip,
            "2001:db8:1::301".parse::<IpAddr>().unwrap()
        );
        let adjacent = args(&["--vary", "dst-ip"]);
        assert_eq!(dst(&adjacent, 1), IpAddr::from([10, 0, 2, 101]));
    }
}
