//! `polld sink`: a loop of `Device::receive` that counts, sequences and times every frame.
//!
//! Every received frame is classified ([`crate::frame::parse`]): ours (counted per flow
//! by [`SeqTracker`] and timed into an HDR histogram), ours with a broken IPv4 checksum,
//! or foreign. So `frames = ours + bad_checksum + foreign` holds for every report.
//! Latency is one-way: the generator's send time against the sink's CLOCK_MONOTONIC,
//! read once per `receive` call (both run on one machine and share the clock).

use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use hdrhistogram::Histogram;
use polld_core::Device;
use serde::Serialize;

use crate::backend::RxBackend;
use crate::clock::monotonic_ns;
use crate::frame::{latency_ns, parse, Parsed};
use crate::report::{format_pps, mbit_per_s, per_second, Reporter};
use crate::seq::{SeqCounts, SeqTracker};
use crate::{parse_duration, parse_seconds, seconds_to_ns, Error};

/// Most frames taken from the device per `receive` call.
const BUDGET: usize = 256;
/// Longest single wait for frames, so that a stop request is seen promptly.
const MAX_WAIT_NS: u64 = 100_000_000;

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

    /// Print JSON lines (one per interval, then the summary) instead of text.
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

/// Frame counts by class; `frames = sequence.received + bad_checksum + foreign`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RxCounts {
    /// Every frame received.
    pub frames: u64,
    /// Bytes of every frame received (without FCS).
    pub bytes: u64,
    /// Frames with our magic whose IPv4 header checksum is wrong.
    pub bad_checksum: u64,
    /// Frames that are not ours (no magic, not IPv4/UDP, too short).
    pub foreign: u64,
}

/// One interval report. Loss can be negative when frames counted lost earlier arrive late.
#[derive(Clone, Debug, Serialize)]
pub struct SinkInterval {
    pub start: f64,
    pub end: f64,
    pub frames: u64,
    pub pps: f64,
    pub mbit_per_s: f64,
    pub lost: i64,
    pub reordered: u64,
    pub duplicates: u64,
    pub foreign: u64,
    pub bad_checksum: u64,
    pub latency: Option<LatencySummary>,
}

/// What a run received.
#[derive(Clone, Debug, Serialize)]
pub struct SinkSummary {
    pub interface: String,
    pub backend: String,
    pub seconds: f64,
    #[serde(flatten)]
    pub counts: RxCounts,
    pub pps: f64,
    pub mbit_per_s: f64,
    /// Our frames, by sequence number, summed over flows.
    pub sequence: SeqCounts,
    /// lost / (lost + frames received once), in percent.
    pub loss_percent: f64,
    pub flows: usize,
    pub latency: Option<LatencySummary>,
}

/// Everything the sink has counted so far.
struct Tally {
    counts: RxCounts,
    seq: SeqTracker,
    /// Latencies of the current interval, merged into `latency_total` at each report.
    latency_interval: Histogram<u64>,
    latency_total: Histogram<u64>,
}

impl Tally {
    fn new() -> Tally {
        // Latencies are known modulo 2^32 ns (see frame.rs), so that bounds the range.
        let histogram = || {
            Histogram::new_with_bounds(1, u64::from(u32::MAX), 3)
                .expect("constant histogram bounds are valid")
        };
        Tally {
            counts: RxCounts::default(),
            seq: SeqTracker::new(),
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
                self.latency_interval
                    .saturating_record(latency_ns(sent_ns_low, now_ns).max(1));
            }
            Parsed::BadChecksum => self.counts.bad_checksum += 1,
            Parsed::Foreign => self.counts.foreign += 1,
        }
    }

    /// Ends an interval: its latency summary, and the totals now.
    fn close_interval(&mut self) -> Option<LatencySummary> {
        let summary = LatencySummary::of(&self.latency_interval);
        self.latency_total
            .add(&self.latency_interval)
            .expect("histograms with equal bounds add");
        self.latency_interval.reset();
        summary
    }
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

    /// Receives until the duration or count is reached or `stop` is set, reporting to `out`.
    pub fn run(
        &self,
        dev: &mut dyn Device,
        stop: &AtomicBool,
        out: &mut dyn std::io::Write,
    ) -> SinkSummary {
        let mut report = Reporter::new(out, self.json);
        report.note(|| format!("[sink] {} ({})", self.interface, self.backend.name()));
        report.note(|| {
            format!(
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
            )
        });
        let mut tally = Tally::new();
        let start = monotonic_ns();
        let deadline = self.duration_ns.map(|d| start + d);
        let mut next_report = self.interval_ns.map(|i| start + i);
        let mut reported = (start, tally.counts, tally.seq.total());
        let mut now = start;
        loop {
            let received = tally.counts.frames;
            if stop.load(Ordering::Relaxed)
                || deadline.is_some_and(|d| now >= d)
                || self.count.is_some_and(|c| received >= c)
            {
                break;
            }
            if let (Some(due), Some(interval)) = (next_report, self.interval_ns) {
                if now >= due {
                    reported = self.report_interval(&mut report, start, reported, now, &mut tally);
                    next_report = Some((due + interval).max(now + 1));
                }
            }
            let budget = self
                .count
                .map_or(BUDGET, |c| BUDGET.min((c - received) as usize));
            let batch_time = monotonic_ns();
            let got = dev.receive(budget, &mut |frame| tally.account(frame, batch_time));
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
        if self.interval_ns.is_some() && tally.counts != reported.1 {
            self.report_interval(&mut report, start, reported, now, &mut tally);
        } else {
            tally.close_interval();
        }

        let seconds = (now - start) as f64 / 1e9;
        let sequence = tally.seq.total();
        let received_once = sequence.received - sequence.duplicates - sequence.stale;
        let summary = SinkSummary {
            interface: self.interface.clone(),
            backend: self.backend.name().into(),
            seconds,
            counts: tally.counts,
            pps: per_second(tally.counts.frames, seconds),
            mbit_per_s: mbit_per_s(tally.counts.bytes, seconds),
            sequence,
            loss_percent: if sequence.lost + received_once > 0 {
                100.0 * sequence.lost as f64 / (sequence.lost + received_once) as f64
            } else {
                0.0
            },
            flows: tally.seq.flows_seen(),
            latency: LatencySummary::of(&tally.latency_total),
        };
        report.emit("summary", &summary, || summary_text(&summary));
        summary
    }

    /// Waits until frames are waiting or `until_ns`, on the device's interrupt if it has one.
    fn wait_for_frames(&self, dev: &mut dyn Device, now_ns: u64, until_ns: u64) {
        if self.busy_poll {
            std::hint::spin_loop();
            return;
        }
        let Some(fd) = dev.interrupt_fd() else {
            crate::clock::sleep_until(now_ns + 50_000);
            return;
        };
        let timeout_ms = until_ns.saturating_sub(now_ns).div_ceil(1_000_000).max(1);
        dev.set_interrupt(true);
        if !dev.rx_ready() {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a signal (EINTR) or timeout just ends the wait.
            unsafe { libc::poll(&mut pfd, 1, timeout_ms as libc::c_int) };
        }
        dev.set_interrupt(false);
    }

    fn report_interval(
        &self,
        report: &mut Reporter<'_>,
        start: u64,
        (from_ns, from, from_seq): (u64, RxCounts, SeqCounts),
        now: u64,
        tally: &mut Tally,
    ) -> (u64, RxCounts, SeqCounts) {
        let seconds = (now - from_ns) as f64 / 1e9;
        let counts = tally.counts;
        let seq = tally.seq.total();
        let frames = counts.frames - from.frames;
        let interval = SinkInterval {
            start: (from_ns - start) as f64 / 1e9,
            end: (now - start) as f64 / 1e9,
            frames,
            pps: per_second(frames, seconds),
            mbit_per_s: mbit_per_s(counts.bytes - from.bytes, seconds),
            lost: seq.lost as i64 - from_seq.lost as i64,
            reordered: seq.reordered - from_seq.reordered,
            duplicates: seq.duplicates - from_seq.duplicates,
            foreign: counts.foreign - from.foreign,
            bad_checksum: counts.bad_checksum - from.bad_checksum,
            latency: tally.close_interval(),
        };
        let micros = |pick: fn(&LatencySummary) -> u64| {
            interval
                .latency
                .as_ref()
                .map_or("-".into(), |l| format!("{:.1}", pick(l) as f64 / 1e3))
        };
        report.emit("interval", &interval, || {
            format!(
                "[sink] {:>5.2}-{:<5.2} s {:>12} {:>13} {:>10.2} Mbit/s {:>8} {:>6} {:>6} {:>8} {:>9} {:>9}",
                interval.start,
                interval.end,
                interval.frames,
                format_pps(interval.pps),
                interval.mbit_per_s,
                interval.lost,
                interval.reordered,
                interval.duplicates,
                interval.foreign,
                micros(|l| l.p50_ns),
                micros(|l| l.p99_ns)
            )
        });
        (now, counts, seq)
    }
}

fn summary_text(s: &SinkSummary) -> String {
    let q = &s.sequence;
    let mut text = format!(
        "[sink] 0.00-{:.2} s: {} frames, {}, {:.2} Mbit/s\n\
         [sink] ours {} in {} flow(s): lost {} ({:.3} %), reordered {}, duplicates {}, stale {}\n\
         [sink] not counted as ours: foreign {}, bad IPv4 checksum {}",
        s.seconds,
        s.counts.frames,
        format_pps(s.pps),
        s.mbit_per_s,
        q.received,
        s.flows,
        q.lost,
        s.loss_percent,
        q.reordered,
        q.duplicates,
        q.stale,
        s.counts.foreign,
        s.counts.bad_checksum
    );
    if let Some(l) = &s.latency {
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
    }
    text
}
