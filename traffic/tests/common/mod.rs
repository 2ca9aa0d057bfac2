//! What the traffic tests share.

use clap::Parser;
use polld_traffic::sink::Analysis;
use polld_traffic::{GenArgs, SinkArgs, SinkSummary};

/// `polld gen`'s arguments as a command line parses them.
#[derive(Parser)]
pub struct GenCli {
    #[command(flatten)]
    pub args: GenArgs,
}

/// `polld sink`'s arguments as a command line parses them.
#[derive(Parser)]
pub struct SinkCli {
    #[command(flatten)]
    pub args: SinkArgs,
}

/// The sink's analysis, after checking that every frame is ours, foreign or bad.
pub fn conserved(s: &SinkSummary) -> &Analysis {
    let a = s.analysis.as_ref().expect("a device sink analyses frames");
    assert_eq!(
        s.frames,
        a.sequence.received + a.end_records + a.foreign + a.bad_checksum,
        "every frame is ours, foreign or bad: {s:?}"
    );
    a
}
