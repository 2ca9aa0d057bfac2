//! Per-stage counters and the conservation check.
//!
//! Every frame handed to a stage gets exactly one verdict, IPv4 and IPv6 alike, so
//! `received = forwarded + local + consumed + to_kernel + drops`. Frames the stage makes up itself
//! (ARP requests and replies, ICMP and ICMPv6 messages, the extra copies of a flooded frame) are
//! counted apart under `generated`: they were never received, so they are outside the
//! equation. A forwarded datagram counts once in `forwarded` however many fragments it
//! left as; the fragments are counted apart (`ofragments`).
//!
//! What the stage counts beyond the verdicts is declared here once as `net.inet.ip.*`
//! entries ([`StageCounters::OIDS`]), which `polld ctl`, `/metrics` and docs/knobs.md
//! read.

use crate::drops::PacketDrop;
use crate::options::OptionCounters;
use crate::rules::RuleHits;
use crate::table::TableStats;
use polld_core::sysctl::Value;
use polld_core::{sysctl_oids, DropCounters, DropReason, Verdict};
use serde::Serialize;
use std::fmt;

/// Frames a stage emitted on its own, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct GeneratedCounters {
    pub arp_requests: u64,
    pub arp_replies: u64,
    pub icmp_echo_replies: u64,
    pub icmp_errors: u64,
    /// Neighbour advertisements for polld's IPv6 addresses.
    pub nd_adverts: u64,
    /// Copies of flooded frames beyond the one returned as the verdict (bridge).
    pub flood_copies: u64,
}

impl GeneratedCounters {
    pub fn total(&self) -> u64 {
        self.arp_requests
            + self.arp_replies
            + self.icmp_echo_replies
            + self.icmp_errors
            + self.nd_adverts
            + self.flood_copies
    }
}

/// What a stage did with the frames it received.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StageCounters {
    pub received: u64,
    pub forwarded: u64,
    pub local: u64,
    pub consumed: u64,
    /// Handed to the kernel, which forwards them ([`crate::forwarder`]'s `ToKernel`);
    /// `to_kernel_unpolled` and `to_kernel_unresolved` say why.
    pub to_kernel: u64,
    #[serde(serialize_with = "named_drops")]
    pub drops: DropCounters,
    pub generated: GeneratedCounters,
    /// ICMP errors that were due but suppressed by the rate limit.
    pub icmp_rate_limited: u64,
    /// Datagrams forwarded as fragments (each is one `forwarded`), and the fragments
    /// they became (FreeBSD's `ips_fragmented`, `ips_ofragments`).
    pub fragmented: u64,
    pub ofragments: u64,
    /// Datagrams larger than the output MTU that could not be fragmented: IPv4 with DF
    /// set and every IPv6 packet (`oversize`), or fragments that would end past the
    /// largest datagram (`fragment`). FreeBSD's `ips_cantfrag`.
    pub cantfrag: u64,
    /// Forwarded frames that arrived with link-layer padding or a trailer after the IP
    /// total length, and left without it.
    pub padding_trimmed: u64,
    /// The IP options of datagrams to be forwarded.
    pub options: OptionCounters,
    /// Of `to_kernel`, the packets whose route leaves by an interface polld does not
    /// poll, and those to a next hop without a neighbour entry (the kernel queues them
    /// while it resolves it).
    pub to_kernel_unpolled: u64,
    pub to_kernel_unresolved: u64,
}

impl StageCounters {
    /// Counts one received frame and its verdict.
    pub fn record(&mut self, verdict: Verdict) {
        self.received += 1;
        match verdict {
            Verdict::Forward { .. } | Verdict::ForwardEmitted { .. } => self.forwarded += 1,
            Verdict::Local => self.local += 1,
            Verdict::Consumed => self.consumed += 1,
            Verdict::Kernel => self.to_kernel += 1,
            Verdict::Drop(reason) => self.drops.add(reason, 1),
        }
    }

    pub fn dropped(&self, reason: impl Into<DropReason>) -> u64 {
        self.drops.get(reason.into())
    }

    /// Checks `received = forwarded + local + consumed + to_kernel + drops`.
    pub fn check_conservation(&self) -> Result<(), ConservationError> {
        let accounted =
            self.forwarded + self.local + self.consumed + self.to_kernel + self.drops.total();
        if accounted == self.received {
            Ok(())
        } else {
            Err(ConservationError {
                received: self.received,
                forwarded: self.forwarded,
                local: self.local,
                consumed: self.consumed,
                to_kernel: self.to_kernel,
                dropped: self.drops.total(),
            })
        }
    }
}

sysctl_oids! {
    /// What the stage counts beyond the verdicts, as `net.inet.ip.*` entries (FreeBSD's
    /// `ipstat` names where it has them), each declared once.
    impl StageCounters: OIDS {
        FRAGMENTED = "fragmented": Counter "Datagrams forwarded as fragments",
            |c| Value::from(c.fragmented);
        OFRAGMENTS = "ofragments": Counter "Fragments created",
            |c| Value::from(c.ofragments);
        CANTFRAG = "cantfrag": Counter "Datagrams too big that could not be fragmented",
            |c| Value::from(c.cantfrag);
        PADDING_TRIMMED = "padding_trimmed": Counter "Frames forwarded without their link padding",
            |c| Value::from(c.padding_trimmed);
        OPTIONS_DATAGRAMS = "options_datagrams": Counter "Datagrams to forward with IP options",
            |c| Value::from(c.options.datagrams);
        OPTIONS_RECORD_ROUTE = "options_record_route": Counter "Record route options",
            |c| Value::from(c.options.record_route);
        OPTIONS_RECORD_ROUTE_FULL = "options_record_route_full": Counter "Record route options without room",
            |c| Value::from(c.options.record_route_full);
        OPTIONS_TIMESTAMP = "options_timestamp": Counter "Timestamp options",
            |c| Value::from(c.options.timestamp);
        OPTIONS_TIMESTAMP_OVERFLOW = "options_timestamp_overflow": Counter "Timestamp options without room",
            |c| Value::from(c.options.timestamp_overflow);
        OPTIONS_ROUTER_ALERT = "options_router_alert": Counter "Router alert options",
            |c| Value::from(c.options.router_alert);
        OPTIONS_SOURCE_ROUTE = "options_source_route": Counter "Source route options (refused)",
            |c| Value::from(c.options.source_route);
        OPTIONS_OTHER = "options_other": Counter "Other options, passed through",
            |c| Value::from(c.options.other);
        OPTIONS_MALFORMED = "options_malformed": Counter "Malformed option lists (dropped)",
            |c| Value::from(c.options.malformed);
        TO_KERNEL_UNPOLLED = "to_kernel_unpolled": Counter "Packets handed to the kernel: routed out of an interface polld does not poll",
            |c| Value::from(c.to_kernel_unpolled);
        TO_KERNEL_UNRESOLVED = "to_kernel_unresolved": Counter "Packets handed to the kernel: next hop without a neighbour entry",
            |c| Value::from(c.to_kernel_unresolved);
    }
}

/// The drops by name, the stages' reasons included.
fn named_drops<S: serde::Serializer>(drops: &DropCounters, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(DropReason::all(&PacketDrop::TABLE).map(|r| (r.name(), drops.get(r))))
}

/// The counters did not add up: a frame was lost or counted twice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConservationError {
    pub received: u64,
    pub forwarded: u64,
    pub local: u64,
    pub consumed: u64,
    pub to_kernel: u64,
    pub dropped: u64,
}

impl fmt::Display for ConservationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let accounted = self.forwarded + self.local + self.consumed + self.to_kernel + self.dropped;
        write!(
            f,
            "packet stage counters do not add up: received {} but forwarded {} + local {} + consumed {} + to_kernel {} + dropped {} = {accounted}",
            self.received, self.forwarded, self.local, self.consumed, self.to_kernel, self.dropped
        )
    }
}

impl std::error::Error for ConservationError {}

/// A snapshot of everything a stage counts, for `polld ctl` / `polld stat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StageStats {
    pub counters: StageCounters,
    /// Hits per rule, in rule order, and of the default action.
    pub rules: RuleHits,
    /// The ARP cache and the IPv6 neighbour table (router), or the MAC table (bridge).
    pub table: TableStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_and_conserve() {
        let mut c = StageCounters::default();
        c.record(Verdict::Forward { out: 1 });
        c.record(Verdict::Local);
        c.record(Verdict::Consumed);
        c.record(Verdict::Kernel);
        c.record(PacketDrop::NoRoute.verdict());
        assert_eq!(c.received, 5);
        assert_eq!(c.dropped(PacketDrop::NoRoute), 1);
        assert!(c.check_conservation().is_ok());
        c.forwarded += 1;
        let err = c.check_conservation().unwrap_err();
        assert!(err.to_string().contains("received 5"), "{err}");
    }
}
