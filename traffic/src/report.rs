//! Interval and summary reports, as iperf-style text lines or as JSON lines.
//!
//! In JSON mode every interval is one object with `"type": "interval"` and the run
//! ends with one object with `"type": "summary"`, each on its own line, so that a script
//! can read the output line by line while the run goes on.

use std::io::Write;

use serde::Serialize;

/// Where reports go and in which format.
pub struct Reporter<'a> {
    out: &'a mut dyn Write,
    json: bool,
}

impl<'a> Reporter<'a> {
    pub fn new(out: &'a mut dyn Write, json: bool) -> Reporter<'a> {
        Reporter { out, json }
    }

    /// Writes one record: `text()` as a line, or `record` as a JSON line tagged `kind`.
    ///
    /// A failed write (a closed pipe) is ignored: the run goes on and its summary is
    /// still returned to the caller.
    pub fn emit<T: Serialize>(&mut self, kind: &str, record: &T, text: impl FnOnce() -> String) {
        let line = if self.json {
            let mut value = serde_json::to_value(record).unwrap_or_default();
            if let Some(object) = value.as_object_mut() {
                object.insert("type".into(), kind.into());
            }
            value.to_string()
        } else {
            text()
        };
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }

    /// Writes a text-only line (headers), skipped in JSON mode.
    pub fn note(&mut self, text: impl FnOnce() -> String) {
        if !self.json {
            let _ = writeln!(self.out, "{}", text());
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
    fn json_lines_are_tagged_and_text_lines_are_verbatim() {
        let mut buf = Vec::new();
        let mut r = Reporter::new(&mut buf, true);
        r.note(|| "header".into());
        r.emit("interval", &Sample { frames: 3 }, || "text".into());
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "{\"frames\":3,\"type\":\"interval\"}\n"
        );
        let mut buf = Vec::new();
        let mut r = Reporter::new(&mut buf, false);
        r.note(|| "header".into());
        r.emit("interval", &Sample { frames: 3 }, || "text".into());
        assert_eq!(String::from_utf8(buf).unwrap(), "header\ntext\n");
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
