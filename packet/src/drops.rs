//! Why the packet stages drop a frame: the Ethernet, IPv4 and IPv6 reasons (RFC 1812 and
//! RFC 8200 / RFC 4291 checks, routing, neighbours, rules), each its own counter
//! `dev.<if>.drops.<name>`. A reason both families share (a bad length, no route, a
//! filter, an exhausted TTL or hop limit) is one counter.
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
    /// Longer than the output MTU, and not to be fragmented (IPv4 with DF set, or IPv6,
    /// which routers never fragment).
    Oversize,
    /// An ethertype polld does not handle.
    UnknownEthertype,
    /// An 802.1Q tag on a routed interface.
    Vlan,
    /// IP version other than the ethertype's (4 or 6).
    BadVersion,
    /// IHL below 5 or beyond the frame.
    BadIhl,
    /// IPv4 total length or IPv6 payload length inconsistent with the frame.
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
    /// TTL or hop limit reached zero (an ICMP or ICMPv6 time exceeded may have been
    /// sent).
    TtlExceeded,
    /// No route to the destination.
    NoRoute,
    /// The next hop's link-layer address is not resolved (ARP pending or failed; with the
    /// kernel's tables, the kernel did not take the packet to resolve it itself).
    Unresolved,
    /// A deny rule matched.
    Filtered,
    /// An IPv6 packet with a multicast source (RFC 4291 §2.7).
    MulticastSource,
    /// An IPv6 packet to a unicast destination with the unspecified source `::`
    /// (RFC 4291 §2.5.2).
    UnspecifiedSource,
    /// An IPv6 packet from or to the loopback address `::1` (RFC 4291 §2.5.3).
    Loopback,
    /// An IPv6 packet to forward from a link-local source, or to a link-local
    /// destination not polld's (RFC 4291 §2.5.6): it may not leave its link.
    LinkLocal,
    /// An IPv6 packet to forward with a hop-by-hop options header, which polld does
    /// not process.
    HopByHop,
    /// An IPv6 extension-header chain that runs past the payload, is too long, or is out
    /// of order.
    ExtHeaders,
    /// An IPv6 next hop without a neighbour entry (polld does not run neighbour
    /// discovery itself; an ICMPv6 address unreachable may have been sent; with the
    /// kernel's tables, the kernel did not take the packet to resolve it itself).
    NeighbourUnknown,
    /// A blackhole route matched (`ip route add blackhole`): dropped silently.
    Blackhole,
    /// An unreachable route matched (`ip route add unreachable`): ICMP host unreachable
    /// or ICMPv6 no route to destination may have been sent.
    Unreachable,
    /// A prohibit route matched (`ip route add prohibit`): ICMP or ICMPv6
    /// administratively prohibited may have been sent.
    Prohibited,
    /// The kernel's route leaves by an interface this poll thread does not poll, and the
    /// kernel did not take the packet when polld handed it over (its socket full).
    UnpolledRoute,
}

impl PacketDrop {
    /// Every reason, in counter order.
    pub const ALL: [PacketDrop; 26] = [
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
        PacketDrop::MulticastSource,
        PacketDrop::UnspecifiedSource,
        PacketDrop::Loopback,
        PacketDrop::LinkLocal,
        PacketDrop::HopByHop,
        PacketDrop::ExtHeaders,
        PacketDrop::NeighbourUnknown,
        PacketDrop::Blackhole,
        PacketDrop::Unreachable,
        PacketDrop::Prohibited,
        PacketDrop::UnpolledRoute,
    ];

    /// The stages' table of reasons, for the core ([`polld_core::PacketStage::drop_reasons`]).
    pub const TABLE: [StageDrop; 26] = {
        let mut table = [StageDrop::new(0, ""); 26];
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
            PacketDrop::MulticastSource => "multicast_source",
            PacketDrop::UnspecifiedSource => "unspecified_source",
            PacketDrop::Loopback => "loopback",
            PacketDrop::LinkLocal => "link_local",
            PacketDrop::HopByHop => "hop_by_hop",
            PacketDrop::ExtHeaders => "ext_headers",
            PacketDrop::NeighbourUnknown => "neighbour_unknown",
            PacketDrop::Blackhole => "blackhole",
            PacketDrop::Unreachable => "unreachable",
            PacketDrop::Prohibited => "prohibited",
            PacketDrop::UnpolledRoute => "unpolled_route",
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
