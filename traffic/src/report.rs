//! Interval and summary reports, as iperf-style text lines or as one JSON document.
//!
//! As text, the header, every interval and the summary are lines on the output as the run
//! goes on. With JSON the output is one JSON document on one line, written when the run
//! ends: the summary's object, with every interval's object in `intervals`, in order; the
//! text lines go to standard error meanwhile, as progress.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

/// Where reports go and in which format.
pub struct Reporter<'a> {
    out: &'a mut dyn Write,
    /// With JSON, the interval records so far; `None` for text.
    intervals: Option<Vec<Value>>,
}

impl<'a> Reporter<'a> {
    pub fn new(out: &'a mut dyn Write, json: bool) -> Reporter<'a> {
        Reporter {
            out,
            intervals: json.then(Vec::new),
        }
    }

    /// A header line.
    pub fn note(&mut self, text: &str) {
        self.line(text);
    }

    /// One interval: `text` as a line; with JSON `record` is also kept for the summary.
    pub fn interval<T: Serialize>(&mut self, record: &T, text: &str) {
        if let Some(intervals) = &mut self.intervals {
            intervals.push(serde_json::to_value(record).unwrap_or_default());
        }
        self.line(text);
    }

    /// The end of the run: `text` as a line, or with JSON the document, `record` with the
    /// intervals.
    ///
    /// A failed write (a closed pipe) is ignored: the run's summary is still returned to
    /// the caller.
    pub fn summary<T: Serialize>(self, record: &T, text: &str) {
        let Some(intervals) = self.intervals else {
            let _ = writeln!(self.out, "{text}");
            let _ = self.out.flush();
            return;
        };
        let mut document = serde_json::to_value(record).unwrap_or_default();
        if let Some(object) = document.as_object_mut() {
            object.insert("intervals".into(), Value::Array(intervals));
        }
        let _ = writeln!(self.out, "{document}");
        let _ = self.out.flush();
    }

    /// A text line: on the output, or with JSON on standard error. A failed write is
    /// ignored, as in [`Reporter::summary`].
    fn line(&mut self, text: &str) {
        if self.intervals.is_some() {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        } else {
            let _ = writeln!(self.out, "{text}");
            let _ = self.out.flush();
        }
    }
}

/// Formats frames per second with a k/M prefix: `99.99 kpps`.
pub fn format_pps(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.3} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.2} kpps", pps / 1e3)
    } else {
        format!("{pps:.1} pps")
    }
}

/// Per-second rates of a count over an interval.
pub fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Megabits per second of `bytes` over `seconds`.
pub fn mbit_per_s(bytes: u64, seconds: f64) -> f64 {
    per_second(bytes, seconds) * 8.0 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample {
        frames: u64,
    }

    #[test]
    fn json_is_one_document_at_the_end_and_text_is_every_line() {
        let mut buf = Vec::new();
        let mut r = Reporter::new(&mut buf, true);
        r.note("header");
        r.interval(&Sample { frames: 3 }, "text");
        r.interval(&Sample { frames: 4 }, "text");
        r.summary(&Sample { frames: 7 }, "summary");
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\"frames\":7,\"intervals\":[{\"frames\":3},{\"frames\":4}]}\n"
        );
        let mut buf = Vec::new();
        let mut r = Reporter::new(&mut buf, false);
        r.note("header");
        r.interval(&Sample { frames: 3 }, "text");
        r.summary(&Sample { frames: 3 }, "summary");
        assert_eq!(String::from_utf8(buf).unwrap(), "header\ntext\nsummary\n");
    }

    #[test]
    fn rates_are_scaled_for_reading() {
        assert_eq!(format_pps(999.0), "999.0 pps");
        assert_eq!(format_pps(100_000.0), "100.00 kpps");
        assert_eq!(format_pps(1_234_567.0), "1.235 Mpps");
        assert_eq!(mbit_per_s(1_250_000, 1.0), 10.0);
        assert_eq!(per_second(5, 0.0), 0.0);
    }
}
