//! What the traffic tests share.

use polld_traffic::sink::Analysis;
use polld_traffic::SinkSummary;

/// The sink's analysis, after checking that every frame is ours, foreign or bad.
pub fn conserved(s: &SinkSummary) -> &Analysis {
    let a = s.analysis.as_ref().expect("a device sink analyses frames");
    assert_eq!(
        s.frames,
        a.sequence.received + a.foreign + a.bad_checksum,
        "every frame is ours, foreign or bad: {s:?}"
    );
    a
}
