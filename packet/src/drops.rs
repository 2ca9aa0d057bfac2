//! Why the packet stages drop a frame: the IPv4 and Ethernet reasons (RFC 1812 checks,
//! routing, ARP, rules), each its own counter `dev.<if>.drops.<name>`.
//!
//! The core counts them without knowing them: [`PacketDrop::TABLE`] is what the router
//! and the bridge declare as their [`PacketStage::drop_reasons`], and a `PacketDrop`
//! becomes the core's [`DropReason::Stage`].
//!
//! [`PacketStage::drop_reasons`]: polld_core::PacketStage::drop_reasons

use polld_core::{DropReason, StageDrop, Verdict};

/// Why a stage dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PacketDrop {
    /// Shorter than the headers it claims.
    Truncated,
    /// Longer than the output MTU, and not to be fragmented (DF set).
    Oversize,
    /// An ethertype polld does not handle.
    UnknownEthertype,
    /// An 802.1Q tag on a routed interface.
    Vlan,
    /// IP version other than 4.
    BadVersion,
    /// IHL below 5 or beyond the frame.
    BadIhl,
    /// IPv4 total length inconsistent with the frame.
    BadLength,
    /// IPv4 header checksum wrong.
    BadChecksum,
    /// Invalid source or destination address (RFC 1812 §5.3.7).
    Martian,
    /// An IPv4 option list that is malformed (an ICMP parameter problem may have been
    /// sent) or asks for what polld refuses (source routing).
    IpOptions,
    /// A fragment polld does not reassemble or forward.
    Fragment,
    /// TTL reached zero (an ICMP time-exceeded may have been sent).
    TtlExceeded,
    /// No route to the destination.
    NoRoute,
    /// The next hop's link-layer address is not resolved (ARP pending or failed).
    Unresolved,
    /// A deny rule matched.
    Filtered,
}

impl PacketDrop {
    /// Every reason, in counter order.
    pub const ALL: [PacketDrop; 15] = [
        PacketDrop::Truncated,
        PacketDrop::Oversize,
        PacketDrop::UnknownEthertype,
        PacketDrop::Vlan,
        PacketDrop::BadVersion,
        PacketDrop::BadIhl,
        PacketDrop::BadLength,
        PacketDrop::BadChecksum,
        PacketDrop::Martian,
        PacketDrop::IpOptions,
        PacketDrop::Fragment,
        PacketDrop::TtlExceeded,
        PacketDrop::NoRoute,
        PacketDrop::Unresolved,
        PacketDrop::Filtered,
    ];

    /// The stages' table of reasons, for the core ([`polld_core::PacketStage::drop_reasons`]).
    pub const TABLE: [StageDrop; 15] = {
        let mut table = [StageDrop::new(0, ""); 15];
        let mut i = 0;
        while i < table.len() {
            table[i] = StageDrop::new(i as u8, PacketDrop::ALL[i].name());
            i += 1;
        }
        table
    };

    /// The counter name, as shown by `polld ctl` and `polld stat`.
    pub const fn name(self) -> &'static str {
        match self {
            PacketDrop::Truncated => "truncated",
            PacketDrop::Oversize => "oversize",
            PacketDrop::UnknownEthertype => "unknown_ethertype",
            PacketDrop::Vlan => "vlan",
            PacketDrop::BadVersion => "bad_version",
            PacketDrop::BadIhl => "bad_ihl",
            PacketDrop::BadLength => "bad_length",
            PacketDrop::BadChecksum => "bad_checksum",
            PacketDrop::Martian => "martian",
            PacketDrop::IpOptions => "ip_options",
            PacketDrop::Fragment => "fragment",
            PacketDrop::TtlExceeded => "ttl_exceeded",
            PacketDrop::NoRoute => "no_route",
            PacketDrop::Unresolved => "unresolved",
            PacketDrop::Filtered => "filtered",
        }
    }

    /// The verdict that drops a frame for this reason.
    pub fn verdict(self) -> Verdict {
        Verdict::Drop(self.into())
    }
}

impl From<PacketDrop> for DropReason {
    fn from(d: PacketDrop) -> DropReason {
        DropReason::Stage(PacketDrop::TABLE[d as usize])
    }
}

/// The stage reason a core [`DropReason`] stands for, if it is one of [`PacketDrop`].
impl TryFrom<DropReason> for PacketDrop {
    type Error = DropReason;
    fn try_from(r: DropReason) -> Result<PacketDrop, DropReason> {
        match r {
            DropReason::Stage(s) if PacketDrop::TABLE.get(s.index()) == Some(&s) => {
                Ok(PacketDrop::ALL[s.index()])
            }
            other => Err(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_the_core_by_its_name() {
        let mut names: Vec<&str> = DropReason::OWN.iter().map(|r| r.name()).collect();
        for d in PacketDrop::ALL {
            let core = DropReason::from(d);
            assert_eq!(core.name(), d.name());
            assert_eq!(PacketDrop::try_from(core), Ok(d));
            names.push(d.name());
        }
        let listed: Vec<&str> = DropReason::all(&PacketDrop::TABLE)
            .map(|r| r.name())
            .collect();
        assert_eq!(listed, names);
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), listed.len(), "every counter name is distinct");
        assert_eq!(
            PacketDrop::try_from(DropReason::LinkDown),
            Err(DropReason::LinkDown)
        );
    }
}
