//! `polld sink`: a loop of `Device::receive` that counts, sequences and times every frame.
//!
//! Every received frame is classified ([`crate::frame::parse`]): ours (counted per flow
//! by [`SeqTracker`] and timed into an HDR histogram), a generator's end-of-run record
//! (how many numbers each flow was issued, so that loss counts what never arrived), ours
//! with a broken IPv4 checksum, or foreign. So
//! `frames = ours + end_records + bad_checksum + foreign` holds for every report.
//! Latency is one-way: the generator's send time against the sink's CLOCK_MONOTONIC
//! when user space sees the frame (both run on one machine and share the clock).

use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use hdrhistogram::Histogram;
use polld_core::Device;
use serde::Serialize;

use crate::backend::{RxBackend, XdpCounter};
use crate::clock::monotonic_ns;
use crate::frame::{latency_ns, parse, parse_end_of_run, Parsed};
use crate::report::{format_pps, mbit_per_s, per_second, Reporter};
use crate::seq::{SeqCounts, SeqTracker};
use crate::{parse_duration, parse_seconds, seconds_to_ns, Error};

/// Most frames taken from the device per `receive` call.
const BUDGET: usize = 256;
/// Longest single wait for frames, so that a stop request is seen promptly.
const MAX_WAIT_NS: u64 = 100_000_000;
/// How often `xdp-count` reads its counters to check `--count`.
const COUNTER_POLL_NS: u64 = 10_000_000;
/// The pause between polls of a device without an interrupt fd.
const NO_INTERRUPT_NAP_NS: u64 = 50_000;

/// Arguments of `polld sink`.
#[derive(Args, Clone, Debug)]
#[command(about = "Receive frames and report rate, loss, reordering and one-way latency")]
pub struct SinkArgs {
    /// Interface to receive on.
    pub interface: String,

    /// Network namespace to enter before opening the interface (see `ip netns list`).
    #[arg(long)]
    pub netns: Option<String>,

    /// Device backend; `xdp-count` counts in an XDP program and drops, for the highest
    /// rates: no per-frame work in user space, so it reports frames and rate only.
    /// `af_packet` sees a frame when its block retires, up to 1 ms late at low rates (the
    /// summary says so); `af_xdp` times each frame as it arrives.
    #[arg(long, value_enum, default_value_t = RxBackend::DEFAULT)]
    pub backend: RxBackend,

    /// Stop after this many seconds (with --count: whichever comes first).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<f64>,

    /// Stop after receiving this many frames.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,

    /// Seconds between interval reports; 0 for the summary only.
    #[arg(short = 'i', long = "interval", default_value = "1", value_parser = parse_seconds)]
    pub interval: f64,

    /// Print one JSON document when the run ends, on one line: the summary, with every
    /// interval's report in `intervals`; the text lines go to stderr meanwhile.
    #[arg(long)]
    pub json: bool,

    /// Spin on the device instead of sleeping on its interrupt when no frame is waiting.
    #[arg(long)]
    pub busy_poll: bool,
}

/// One-way latency percentiles in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatencySummary {
    fn of(h: &Histogram<u64>) -> Option<LatencySummary> {
        (!h.is_empty()).then(|| LatencySummary {
            samples: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        })
    }
}

/// Frame counts by class; `frames = ours + end_records + bad_checksum + foreign`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RxCounts {
    frames: u64,
    bytes: u64,
    end_records: u64,
    bad_checksum: u64,
    foreign: u64,
}

/// What the sink learned from the frames of one interval (absent with `xdp-count`).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalAnalysis {
    /// Can be negative when frames counted lost earlier arrive late.
    pub lost: i64,
    pub reordered: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub bad_checksum: u64,
    pub latency: Option<LatencySummary>,
}

/// One interval report.
#[derive(Clone, Debug, Serialize)]
pub struct SinkInterval {
    /// Seconds since the start.
    pub start: f64,
    pub end: f64,
    /// Every frame received, ours or not.
    pub frames: u64,
    pub pps: f64,
    pub mbit_per_s: f64,
    pub analysis: Option<IntervalAnalysis>,
}

/// What the sink learned from the frames of a whole run (absent with `xdp-count`).
/// `frames = sequence.received + end_records + bad_checksum + foreign`.
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// Our frames, by sequence number, summed over flows; with the generator's end-of-run
    /// records, `lost` includes what never arrived.
    pub sequence: SeqCounts,
    /// The generator's end-of-run records received (it sends each more than once).
    pub end_records: u64,
    /// Flows the end-of-run records named; `None` without a record (loss after the
    /// last frame received, and flows never received, are then not counted).
    /// Frames with our magic whose IPv4 header checksum is wrong (a broken forwarder).
    pub bad_checksum: u64,
    /// Frames that are not ours (no magic, not IPv4/UDP or IPv6/UDP, too short).
    pub foreign: u64,
    /// lost / (lost + frames received once), in percent.
    pub loss_percent: f64,
    pub flows_issued: Option<usize>,
    /// Flows received.
    pub flows: usize,
    /// Our frames that arrived after a frame sent later than they were, from any flow or
    /// generator: how far the order of arrival is from the order of sending, as a merge of
    /// several inputs into one output shows it (send times from each frame's stamp, on the
    /// host's one monotonic clock).
    pub out_of_send_order: u64,
    pub latency: Option<LatencySummary>,
}

/// What a run received.
#[derive(Clone, Debug, Serialize)]
pub struct SinkSummary {
    pub interface: String,
    pub backend: String,
    pub seconds: f64,
    /// Every frame received, ours or not, and their bytes (without FCS).
    pub frames: u64,
    pub bytes: u64,
    pub pps: f64,
    pub mbit_per_s: f64,
    /// How late the backend may hand a frame over at low rates, so how much of each
    /// latency may be the sink's own: AF_PACKET's block retire timeout, 0 on AF_XDP.
    pub latency_floor_ns: u64,
    pub analysis: Option<Analysis>,
}

/// Everything the sink has counted so far.
struct Tally {
    /// When the sink started (CLOCK_MONOTONIC ns), against the generator's start.
    start_ns: u64,
    counts: RxCounts,
    seq: SeqTracker,
    /// The latest send time among our frames received so far (CLOCK_MONOTONIC ns).
    latest_sent_ns: u64,
    /// Our frames sent before `latest_sent_ns` when they arrived.
    out_of_send_order: u64,
    /// Latencies of the current interval, merged into `latency_total` at each report.
    latency_interval: Histogram<u64>,
    latency_total: Histogram<u64>,
}

impl Tally {
    fn new(start_ns: u64) -> Tally {
        // Latencies are known modulo 2^32 ns (see frame.rs), so that bounds the range.
        let histogram = || {
            Histogram::new_with_bounds(1, u64::from(u32::MAX), 3)
                .expect("constant histogram bounds are valid")
        };
        Tally {
            start_ns,
            counts: RxCounts::default(),
            seq: SeqTracker::new(),
            latest_sent_ns: 0,
            out_of_send_order: 0,
            latency_interval: histogram(),
            latency_total: histogram(),
        }
    }

    fn account(&mut self, frame: &[u8], now_ns: u64) {
        self.counts.frames += 1;
        self.counts.bytes += frame.len() as u64;
        match parse(frame) {
            Parsed::Ours {
                flow,
                seq,
                sent_ns_low,
            } => {
                self.seq.record(flow, seq);
                let latency = latency_ns(sent_ns_low, now_ns);
                let sent_ns = now_ns.saturating_sub(latency);
                if sent_ns < self.latest_sent_ns {
                    self.out_of_send_order += 1;
                } else {
                    self.latest_sent_ns = sent_ns;
                }
                self.latency_interval.saturating_record(latency.max(1));
            }
            Parsed::EndOfRun => {
                self.counts.end_records += 1;
                if let Some(end) = parse_end_of_run(frame) {
                    let from_zero = end.gen_start_ns >= self.start_ns;
                    for (flow, &n) in (end.first..).zip(&end.issued) {
                        self.seq.issued(flow, n, from_zero);
                    }
                }
            }
            Parsed::BadChecksum => self.counts.bad_checksum += 1,
            Parsed::Foreign => self.counts.foreign += 1,
        }
    }

    /// Ends an interval: its latency summary; the samples move into the total.
    fn close_interval(&mut self) -> Option<LatencySummary> {
        let summary = LatencySummary::of(&self.latency_interval);
        self.latency_total
            .add(&self.latency_interval)
            .expect("histograms with equal bounds add");
        self.latency_interval.reset();
        summary
    }

    fn analysis(&self) -> Analysis {
        let sequence = self.seq.total();
        let received_once = sequence.received - sequence.duplicates - sequence.stale;
        let expected = sequence.lost + received_once;
        Analysis {
            sequence,
            end_records: self.counts.end_records,
            flows_issued: (self.counts.end_records > 0).then(|| self.seq.flows_issued()),
            bad_checksum: self.counts.bad_checksum,
            foreign: self.counts.foreign,
            loss_percent: if expected > 0 {
                100.0 * sequence.lost as f64 / expected as f64
            } else {
                0.0
            },
            flows: self.seq.flows_seen(),
            out_of_send_order: self.out_of_send_order,
            latency: LatencySummary::of(&self.latency_total),
        }
    }
}

/// The state at the previous report.
#[derive(Clone, Copy)]
struct Mark {
    at_ns: u64,
    counts: RxCounts,
    seq: SeqCounts,
}

/// A validated sink configuration, ready to run on a device.
#[derive(Clone, Debug)]
pub struct Sink {
    interface: String,
    backend: RxBackend,
    duration_ns: Option<u64>,
    count: Option<u64>,
    interval_ns: Option<u64>,
    json: bool,
    busy_poll: bool,
}

impl Sink {
    pub fn new(args: &SinkArgs) -> Result<Sink, Error> {
        if args.count == Some(0) {
            return Err(Error("--count must be at least 1".into()));
        }
        Ok(Sink {
            interface: args.interface.clone(),
            backend: args.backend,
            duration_ns: args.duration.map(seconds_to_ns),
            count: args.count,
            interval_ns: Some(seconds_to_ns(args.interval)).filter(|&ns| ns > 0),
            json: args.json,
            busy_poll: args.busy_poll,
        })
    }

    /// Receives from `dev` until the duration or count is reached or `stop` is set,
    /// reporting to `out`.
    pub fn run(
        &self,
        dev: &mut dyn Device,
        stop: &AtomicBool,
        out: &mut dyn std::io::Write,
    ) -> SinkSummary {
        let mut report = self.start_report(out);
        let start = monotonic_ns();
        let mut tally = Tally::new(start);
        let deadline = self.duration_ns.map(|d| start + d);
        let mut next_report = self.interval_ns.map(|i| start + i);
        let mut mark = Mark {
            at_ns: start,
            counts: tally.counts,
            seq: tally.seq.total(),
        };
        let mut now = start;
        loop {
            let received = tally.counts.frames;
            if self.finished(stop, deadline, now, received) {
                break;
            }
            if next_report.is_some_and(|due| now >= due) {
                mark = self.report_interval(&mut report, start, mark, now, &mut tally);
                next_report = self.after(next_report, now);
            }
            let budget = self
                .count
                .map_or(BUDGET, |c| BUDGET.min((c - received) as usize));
            // The clock is read per frame: a receive call can run into frames that
            // arrived during it, and one time for the batch would predate them.
            let got = dev.receive(budget, &mut |frame| tally.account(frame, monotonic_ns()));
            now = monotonic_ns();
            if got == 0 {
                let wake = [next_report, deadline, Some(now + MAX_WAIT_NS)]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(now);
                self.wait_for_frames(dev, now, wake);
                now = monotonic_ns();
            }
        }
        if self.interval_ns.is_some() && tally.counts != mark.counts {
            self.report_interval(&mut report, start, mark, now, &mut tally);
        } else {
            tally.close_interval();
        }
        let summary = self.summary(
            (now - start) as f64 / 1e9,
            tally.counts.frames,
            tally.counts.bytes,
            Some(tally.analysis()),
        );
        report.summary(&summary, &summary_text(&summary));
        summary
    }

    /// The `xdp-count` sink: reads the counters of the XDP program `counter` (frames and
    /// bytes since it was loaded) until the duration or count is reached or `stop` is set.
    pub fn run_counter(
        &self,
        counter: &mut dyn FnMut() -> Result<(u64, u64), Error>,
        stop: &AtomicBool,
        out: &mut dyn std::io::Write,
    ) -> Result<SinkSummary, Error> {
        let mut report = self.start_report(out);
        let (frames_before, bytes_before) = counter()?;
        let start = monotonic_ns();
        let deadline = self.duration_ns.map(|d| start + d);
        let mut next_report = self.interval_ns.map(|i| start + i);
        let mut marked = (start, 0, 0);
        let mut now = start;
        let (mut frames, mut bytes) = (0, 0);
        while !self.finished(stop, deadline, now, frames) {
            if next_report.is_some_and(|due| now >= due) {
                self.emit_interval(&mut report, start, marked, (now, frames, bytes), None);
                marked = (now, frames, bytes);
                next_report = self.after(next_report, now);
            }
            let wake = [next_report, deadline, Some(now + COUNTER_POLL_NS)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(now);
            crate::clock::sleep_until(wake);
            let (f, b) = counter()?;
            // Saturating: a counter reset (the program reloaded) must not panic.
            (frames, bytes) = (
                f.saturating_sub(frames_before),
                b.saturating_sub(bytes_before),
            );
            now = monotonic_ns();
        }
        if self.interval_ns.is_some() && frames != marked.1 {
            self.emit_interval(&mut report, start, marked, (now, frames, bytes), None);
        }
        let summary = self.summary((now - start) as f64 / 1e9, frames, bytes, None);
        report.summary(&summary, &summary_text(&summary));
        Ok(summary)
    }

    fn start_report<'a>(&self, out: &'a mut dyn std::io::Write) -> Reporter<'a> {
        let mut report = Reporter::new(out, self.json);
        report.note(&format!(
            "[sink] {} ({})",
            self.interface,
            self.backend.name()
        ));
        report.note(&format!(
            "[sink] {:>13} {:>12} {:>13} {:>15} {:>8} {:>6} {:>6} {:>8} {:>9} {:>9}",
            "interval",
            "frames",
            "rate",
            "bitrate",
            "lost",
            "reord",
            "dup",
            "foreign",
            "p50 µs",
            "p99 µs"
        ));
        report
    }

    fn finished(&self, stop: &AtomicBool, deadline: Option<u64>, now: u64, frames: u64) -> bool {
        stop.load(Ordering::Relaxed)
            || deadline.is_some_and(|d| now >= d)
            || self.count.is_some_and(|c| frames >= c)
    }

    /// The report time after `due`, never in the past.
    fn after(&self, due: Option<u64>, now: u64) -> Option<u64> {
        Some((due? + self.interval_ns?).max(now + 1))
    }

    fn summary(
        &self,
        seconds: f64,
        frames: u64,
        bytes: u64,
        analysis: Option<Analysis>,
    ) -> SinkSummary {
        SinkSummary {
            interface: self.interface.clone(),
            backend: self.backend.name().into(),
            seconds,
            frames,
            bytes,
            pps: per_second(frames, seconds),
            mbit_per_s: mbit_per_s(bytes, seconds),
            latency_floor_ns: self.backend.latency_floor_ns(),
            analysis,
        }
    }

    /// Waits until frames are waiting or `until_ns`, on the device's interrupt if it has one.
    fn wait_for_frames(&self, dev: &mut dyn Device, now_ns: u64, until_ns: u64) {
        if self.busy_poll {
            std::hint::spin_loop();
            return;
        }
        let Some(fd) = dev
            .capabilities()
            .interrupt_fd
            .map(|fd| std::os::fd::AsRawFd::as_raw_fd(&fd))
        else {
            crate::clock::sleep_until(now_ns + NO_INTERRUPT_NAP_NS);
            return;
        };
        let timeout_ms = until_ns.saturating_sub(now_ns).div_ceil(1_000_000).max(1);
        dev.set_interrupt(true);
        if !dev.rx_ready() {
            // A signal (EINTR) or the timeout just ends the wait.
            polld_dev::sys::poll_readable(fd, timeout_ms as i32);
        }
        dev.set_interrupt(false);
    }

    fn report_interval(
        &self,
        report: &mut Reporter<'_>,
        start: u64,
        from: Mark,
        now: u64,
        tally: &mut Tally,
    ) -> Mark {
        let to = Mark {
            at_ns: now,
            counts: tally.counts,
            seq: tally.seq.total(),
        };
        let analysis = IntervalAnalysis {
            lost: to.seq.lost as i64 - from.seq.lost as i64,
            reordered: to.seq.reordered - from.seq.reordered,
            duplicates: to.seq.duplicates - from.seq.duplicates,
            foreign: to.counts.foreign - from.counts.foreign,
            bad_checksum: to.counts.bad_checksum - from.counts.bad_checksum,
            latency: tally.close_interval(),
        };
        self.emit_interval(
            report,
            start,
            (from.at_ns, from.counts.frames, from.counts.bytes),
            (now, to.counts.frames, to.counts.bytes),
            Some(analysis),
        );
        to
    }

    /// Reports an interval from `(time, frames, bytes)` marks, with or without analysis.
    fn emit_interval(
        &self,
        report: &mut Reporter<'_>,
        start: u64,
        (from_ns, from_frames, from_bytes): (u64, u64, u64),
        (to_ns, to_frames, to_bytes): (u64, u64, u64),
        analysis: Option<IntervalAnalysis>,
    ) {
        let seconds = (to_ns - from_ns) as f64 / 1e9;
        let frames = to_frames - from_frames;
        let interval = SinkInterval {
            start: (from_ns - start) as f64 / 1e9,
            end: (to_ns - start) as f64 / 1e9,
            frames,
            pps: per_second(frames, seconds),
            mbit_per_s: mbit_per_s(to_bytes - from_bytes, seconds),
            analysis,
        };
        let mut text = format!(
            "[sink] {:>5.2}-{:<5.2} s {:>12} {:>13} {:>10.2} Mbit/s",
            interval.start,
            interval.end,
            interval.frames,
            format_pps(interval.pps),
            interval.mbit_per_s,
        );
        if let Some(a) = &interval.analysis {
            let micros = |pick: fn(&LatencySummary) -> u64| {
                a.latency
                    .as_ref()
                    .map_or("-".into(), |l| format!("{:.1}", pick(l) as f64 / 1e3))
            };
            text += &format!(
                " {:>8} {:>6} {:>6} {:>8} {:>9} {:>9}",
                a.lost,
                a.reordered,
                a.duplicates,
                a.foreign,
                micros(|l| l.p50_ns),
                micros(|l| l.p99_ns)
            );
        }
        report.interval(&interval, &text);
    }
}

fn summary_text(s: &SinkSummary) -> String {
    let mut text = format!(
        "[sink] 0.00-{:.2} s: {} frames, {}, {:.2} Mbit/s",
        s.seconds,
        s.frames,
        format_pps(s.pps),
        s.mbit_per_s
    );
    let Some(a) = &s.analysis else {
        return text;
    };
    let q = &a.sequence;
    let flows = match a.flows_issued {
        Some(issued) => format!("{} of the generator's {issued} flow(s)", a.flows),
        None => format!("{} flow(s)", a.flows),
    };
    text += &format!(
        "\n[sink] ours {} in {flows}: lost {} ({:.3} %), reordered {}, duplicates {}, stale {}, \
         out of send order {}\n\
         [sink] not ours: foreign {}, bad IPv4 checksum {}",
        q.received,
        q.lost,
        a.loss_percent,
        q.reordered,
        q.duplicates,
        q.stale,
        a.out_of_send_order,
        a.foreign,
        a.bad_checksum
    );
    text += &match a.flows_issued {
        Some(_) => format!(
            "\n[sink] the generator's end-of-run record came ({} copies): loss counts every frame it sent",
            a.end_records
        ),
        None => "\n[sink] no end-of-run record from the generator: frames lost after the last one \
                 received, and flows never received, are not in the loss"
            .to_string(),
    };
    if let Some(l) = &a.latency {
        let us = |ns: u64| ns as f64 / 1e3;
        text += &format!(
            "\n[sink] latency µs: min {:.1} p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1} (mean {:.1}, {} samples)",
            us(l.min_ns),
            us(l.p50_ns),
            us(l.p90_ns),
            us(l.p99_ns),
            us(l.p999_ns),
            us(l.max_ns),
            l.mean_ns / 1e3,
            l.samples
        );
        if s.latency_floor_ns > 0 {
            text += &format!(
                "\n[sink] latency includes up to {:.0} µs of the sink's own: {} hands a frame over when its block \
                 retires; `--backend af_xdp` times each frame as it arrives",
                s.latency_floor_ns as f64 / 1e3,
                s.backend
            );
        }
    }
    text
}

/// `polld sink`: checks the arguments, enters `--netns`, opens the backend and receives
/// until the duration or count is reached or SIGINT/SIGTERM arrives. Reports go to `out`.
pub fn run_sink(args: &SinkArgs, out: &mut dyn std::io::Write) -> Result<SinkSummary, Error> {
    let sink = Sink::new(args)?;
    if let Some(netns) = &args.netns {
        polld_dev::netns::enter(netns)?;
    }
    match args.backend.open(&args.interface)? {
        Some(mut dev) => {
            let stop = crate::clock::stop_on_signals();
            Ok(sink.run(dev.as_mut(), stop, out))
        }
        None => {
            let counter = XdpCounter::attach(&args.interface)?;
            let stop = crate::clock::stop_on_signals();
            sink.run_counter(&mut || counter.counts(), stop, out)
        }
    }
}
