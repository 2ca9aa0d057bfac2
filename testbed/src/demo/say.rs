//! The demos' progress lines (`polld demo` on the host's testbeds and in the guest).

use std::io::Write;

/// A progress line, `polld demo: WHAT`: on `out`, before the table people read there (and
/// a results page quotes); with `json` on stderr, for then `out` carries the JSON report
/// and nothing else.
pub(crate) fn say(json: bool, out: &mut dyn Write, what: std::fmt::Arguments<'_>) {
    let line = format!("polld demo: {what}");
    let _ = if json {
        writeln!(std::io::stderr().lock(), "{line}")
    } else {
        writeln!(out, "{line}")
    };
}
