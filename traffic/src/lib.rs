//! polld-traffic: `polld gen` and `polld sink`.
//!
//! The generator ([`gen`]) sends Ethernet/IPv4/UDP or IPv6/UDP frames ([`frame`]) at a
//! precise rate ([`pace`]) through a [`polld_core::Device`], the same backends polld forwards with;
//! every frame carries its flow, a per-flow sequence number and its send time. The sink
//! ([`sink`]) receives through a `Device`, counts loss, reordering and duplicates per
//! flow ([`seq`]) and one-way latency percentiles. Both print iperf-style interval
//! reports and a summary, or one JSON document at the end ([`report`]). [`backend`]
//! opens the devices (AF_PACKET, AF_XDP, or an XDP counter for the sink); [`faults`]
//! injects gaps and reordering for testing sinks. Usage: `polld gen --help`, `polld sink --help` and
//! docs/guide.md, "Traffic".

#![forbid(unsafe_code)]

pub mod backend;
pub mod clock;
pub mod faults;
pub mod frame;
pub mod gen;
pub mod link;
pub mod pace;
pub mod rate;
pub mod report;
pub mod seq;
pub mod sink;

use std::fmt;

pub use gen::{run_gen, GenArgs, GenSummary, Generator};
pub use sink::{run_sink, Sink, SinkArgs, SinkSummary};

/// A refused argument or a failed setup step, with a message that names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<String> for Error {
    fn from(message: String) -> Error {
        Error(message)
    }
}

impl From<polld_dev::netns::NetnsError> for Error {
    fn from(e: polld_dev::netns::NetnsError) -> Error {
        Error(e.0)
    }
}

/// Parses a non-negative number of seconds (`5`, `0.5`).
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if (0.0..=1e9).contains(&s) => Ok(s),
        _ => Err(format!(
            "`{text}` is not a number of seconds (expected e.g. 5 or 0.5, at least 0)"
        )),
    }
}

/// Parses a run duration: a positive number of seconds.
pub fn parse_duration(text: &str) -> Result<f64, String> {
    match parse_seconds(text)? {
        s if s > 0.0 => Ok(s),
        _ => Err(format!("duration `{text}` must be above 0 seconds")),
    }
}

fn seconds_to_ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}
