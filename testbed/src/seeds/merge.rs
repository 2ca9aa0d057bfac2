//! Seed 003's second claim on packets: merging two inputs in time order needs a reader
//! that polls actively.
//!
//! Two `polld gen` on gen's CPU send [`RATE`] frames/s each, one into tap0 and one into
//! tap2 (the first extra stream's input, [`ExtraStream`]), both to the testbed's unowned
//! address behind tap1, so that polld merges two inputs into one output. The second
//! generator numbers its flow from 1 (`--first-flow`), and `polld sink` on tap1 counts
//! the frames that arrived after a frame sent later (`out_of_send_order`, from the send
//! stamps, taken on the host's one monotonic clock): how far the order polld released the
//! frames in is from the order they were sent in. A reader that empties each input's queue
//! once per period releases a period's frames of one input before the other's, so the
//! longer it sleeps between reads, the more frames leave out of order; the seed's PF_RING
//! application had to poll actively to merge two adapters by timestamp.
//!
//! The readers are those of the packet table ([`super::passive::readers`]), on the inputs'
//! default queues (the merge is about order, not the loss of a small queue). Each trial's
//! frames are booked end to end in one ledger ([`Ledger::of_merge`]).

use std::time::{Duration, Instant};

use serde_json::Value;

use super::passive::{reader_knobs, readers, Reader};
use super::report::MergeRow;
use super::steps::Bench;
use crate::entries;
use crate::ledger::{Ledger, PathCounters, PathReader, Sent, StreamPath};
use crate::polld::start_polld;
use crate::process::{last_json, Process};
use crate::share::tap0_target;
use crate::streams::ExtraStream;
use crate::{polld_config, IpFamily, PolldSetup, Role, TestbedError};

fn failed(what: String) -> TestbedError {
    TestbedError::Failed(what)
}

/// `polld gen --rate` of each of the two inputs: together the packet table's load.
const RATE: &str = "25k";

impl Bench<'_> {
    /// Seed 003's time merge, one row per reader; `passive_hz` is the passive reader's
    /// tick rate.
    pub(super) fn merge(&mut self, passive_hz: u32) -> Result<Vec<MergeRow>, TestbedError> {
        let stream = ExtraStream::for_total(2)[0];
        let layout = self.tb.layout();
        // The table's streams step may have made it already; the TAPs go with the testbed.
        if polld_dev::netns::ip(&["-n", &layout.gen_ns, "link", "show", &stream.input()]).is_err() {
            stream.create(self.tb)?;
        }
        let mut rows = Vec::new();
        for reader in readers(passive_hz) {
            self.say(&format!(
                "seed 003: time merge, {}, polld gen --rate {RATE} into tap0 and into {} ...",
                reader.label,
                stream.input()
            ));
            let row = self.merge_trial(&reader, stream)?;
            self.say(&format!(
                "seed 003: time merge, {}: {} of {} frames out of send order",
                row.reader, row.out_of_send_order, row.received
            ));
            rows.push(row);
        }
        Ok(rows)
    }

    fn merge_trial(
        &mut self,
        reader: &Reader,
        stream: ExtraStream,
    ) -> Result<MergeRow, TestbedError> {
        let (tb, dir) = (self.tb, self.dir);
        let layout = tb.layout();
        let cpus = self.sink_beside_gen();
        let polld = self.polld.to_string_lossy().to_string();
        let socket = dir.join("polld.sock");
        let _ = std::fs::remove_file(&socket);
        let owned = reader_knobs(reader.hz);
        let knobs: Vec<(&str, &str)> = owned
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut config = polld_config(
            layout,
            &PolldSetup {
                backend: "tap",
                mode: reader.mode,
                socket: &socket,
                cpu: Some(cpus.fwd),
                realtime: true,
                knobs: &knobs,
            },
        );
        config.push_str(&stream.config(layout, reader.mode));
        let mut daemon = start_polld(tb, &polld, dir, &config, &socket)?;
        let output = layout.veth3.name.clone();
        let paths = [
            StreamPath::tap(layout.veth0.name.clone(), output.clone()),
            StreamPath::tap(stream.input(), output.clone()),
        ];
        let counters = PathReader::open(layout)?;
        let mut streams: Vec<(StreamPath, PathCounters)> = Vec::new();
        for path in paths {
            let start = counters.read(&path)?;
            streams.push((path, start));
        }
        let window = self.timing.window.max(1.0);
        let mut sink = Process::spawn(
            tb.command_in(Role::Sink, Some(cpus.sink), &polld)?
                .args(["sink", &output, "--backend", "af_xdp", "--json", "-i", "0"])
                .args(["--duration", &(window + 5.0).to_string()]),
            "polld sink",
        )?;
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let cpu_before = polld_dev::kernel_rx::process_cpu_ns(daemon.pid()).unwrap_or(0);
        let mut second = stream.gen_args_to(layout.unowned_dst);
        second.extend(["--first-flow".to_string(), "1".to_string()]);
        let mut gens = Vec::new();
        for target in [tap0_target(layout, IpFamily::Ipv4), second] {
            gens.push(Process::spawn(
                tb.command_in(Role::Gen, Some(cpus.gen), &polld)?
                    .arg("gen")
                    .args(&target)
                    .args(["--json", "-i", "0", "--rate", RATE, "--duration"])
                    .arg(window.to_string()),
                "polld gen",
            )?);
        }
        let mut sent = Vec::new();
        for gen in &mut gens {
            let out = gen.wait()?;
            let summary = last_json(&out)
                .ok_or_else(|| failed(format!("polld gen printed no summary: {out}")))?;
            sent.push(Sent::of(&summary));
        }
        let cpu_ns = polld_dev::kernel_rx::process_cpu_ns(daemon.pid())
            .unwrap_or(0)
            .saturating_sub(cpu_before);
        let wall = started.elapsed().as_secs_f64();
        let total: u64 = sent.iter().map(|s| s.frames).sum();
        counters.drain(&streams, total)?;
        let report = daemon.finish()?;
        let interfaces: Value = serde_json::from_str(&report)
            .map_err(|e| failed(format!("polld run --json printed {report:?}: {e}")))?;
        let out = sink.finish()?;
        let summary = last_json(&out)
            .ok_or_else(|| failed(format!("polld sink printed no summary: {out}")))?;
        let mut grew = Vec::new();
        for (path, start) in &streams {
            grew.push(counters.read(path)?.since(start));
        }
        let merged: Vec<(&StreamPath, Sent, &PathCounters)> = streams
            .iter()
            .zip(&sent)
            .zip(&grew)
            .map(|(((path, _), sent), grew)| (path, *sent, grew))
            .collect();
        let ledger = Ledger::of_merge(&merged, &interfaces)?;
        self.book(
            &format!("seed 003 time merge {}", reader.label),
            entries::conserved(&interfaces) && ledger.balanced(),
        );
        let analysis = &summary["analysis"];
        let received = analysis["sequence"]["received"].as_u64().unwrap_or(0);
        let out_of_send_order = analysis["out_of_send_order"].as_u64().ok_or_else(|| {
            failed(format!(
                "polld sink's summary has no out_of_send_order: {out}"
            ))
        })?;
        let p99_us = analysis["latency"]["p99_ns"]
            .as_f64()
            .ok_or_else(|| failed(format!("polld sink timed no frame ({})", reader.label)))?
            / 1e3;
        Ok(MergeRow {
            reader: reader.label.clone(),
            mode: reader.mode.into(),
            hz: reader.hz,
            sent: ledger.sent,
            received,
            out_of_send_order,
            out_of_order_percent: out_of_send_order as f64 / received.max(1) as f64 * 100.0,
            p99_us,
            polld_cpu_percent: cpu_ns as f64 / 1e9 / wall * 100.0,
        })
    }
}

/// Seed 003's time-merge table.
pub(super) fn render(rows: &[MergeRow]) -> String {
    let mut text = format!(
        "{:<62} {:>8} {:>9} {:>13} {:>7} {:>9} {:>10}\n",
        "reader", "sent", "received", "out of order", "share", "p99", "polld CPU"
    );
    for r in rows {
        text.push_str(&format!(
            "{:<62} {:>8} {:>9} {:>13} {:>6.2}% {:>6.0} us {:>9.1}%\n",
            r.reader,
            r.sent,
            r.received,
            r.out_of_send_order,
            r.out_of_order_percent,
            r.p99_us,
            r.polld_cpu_percent
        ));
    }
    text.push_str(&format!(
        "  two polld gen --rate {RATE}, into tap0 and tap2 (default queues), both to one address behind tap1; out of order: frames polld sink received after a frame sent later (send stamps, one clock), share: of those received\n"
    ));
    text
}

/// Seed 003's verdict on the time merge: the passive reader against active polling, by
/// the share of frames each released out of send order.
pub(super) fn finding(rows: &[MergeRow]) -> Option<String> {
    let busy = rows.iter().find(|r| r.mode == "busy")?;
    let passive = rows.iter().find(|r| r.reader.starts_with("passive"))?;
    Some(format!(
        "Seed 003, time merge of two inputs: the passive reader released {:.2} % of the frames out of send order, active polling {:.2} %: {}.",
        passive.out_of_order_percent,
        busy.out_of_order_percent,
        if passive.out_of_order_percent > busy.out_of_order_percent {
            "merging in time order needs active polling, as the seed says"
        } else {
            "NOT reproduced (the passive reader kept the order as well)"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(reader: &str, mode: &str, out_of_order_percent: f64) -> MergeRow {
        MergeRow {
            reader: reader.into(),
            mode: mode.into(),
            hz: None,
            sent: 50_000,
            received: 50_000,
            out_of_send_order: (out_of_order_percent * 500.0) as u64,
            out_of_order_percent,
            p99_us: 100.0,
            polld_cpu_percent: 50.0,
        }
    }

    #[test]
    fn the_merge_is_judged_by_the_share_out_of_send_order() {
        let busy = row("busy: active polling", "busy", 0.5);
        let line = finding(&[busy.clone(), row("passive: x", "polling", 12.0)]).unwrap();
        assert!(
            line.contains("12.00 %") && line.contains("0.50 %"),
            "{line}"
        );
        assert!(
            line.ends_with("needs active polling, as the seed says."),
            "{line}"
        );
        let line = finding(&[busy.clone(), row("passive: x", "polling", 0.5)]).unwrap();
        assert!(line.contains("NOT reproduced"), "{line}");
        assert!(finding(&[busy]).is_none());
        let table = render(&[row("passive: x", "polling", 12.0)]);
        assert!(table.contains("6000"), "{table}");
    }
}
