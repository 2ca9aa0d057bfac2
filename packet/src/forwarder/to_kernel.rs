//! Handing a packet to the host's kernel to forward, with the kernel's tables: a route out
//! of an interface polld does not poll, and a next hop without a neighbour entry (the
//! kernel queues the packet while it resolves it, where polld would drop it).
//!
//! The packet is handed once polld's own checks passed (headers, addresses, rules, TTL or
//! hop limit above 1), with its TTL or hop limit decremented: the hop is polld's, counted
//! once. The control plane gives the way in ([`Forwarder::set_to_kernel`], a raw IP
//! socket of the forwarding namespace in `polld run`), which the kernel routes as a
//! packet of its own, by its own tables and neighbours, without touching the TTL again.
//! The verdict is [`Verdict::Kernel`], counted `to_kernel` per input interface, and by
//! why in the stage's `to_kernel_unpolled` and `to_kernel_unresolved`.
//!
//! What the kernel does not take is polld's to answer:
//! - larger than the MTU of the kernel's route ([`Refused::TooBig`]): an IPv4 datagram
//!   with DF set, or any IPv6 packet, is dropped as `oversize` with ICMP fragmentation
//!   needed or ICMPv6 packet too big carrying that MTU, as for a polled output; an IPv4
//!   datagram without DF is fragmented by polld and its fragments handed;
//! - anything else ([`Refused::Failed`]: the socket's buffer full, no source address for
//!   the kernel's route lookup): the caller drops the packet by its own reason
//!   (`unpolled_route`, `unresolved`, `neighbour_unknown`).
//!
//! IP options that record the route or a timestamp are not filled in on a handed datagram:
//! the address it leaves by is the kernel's choice.

use std::fmt;

use super::{Forwarder, ETH, MAX_DATAGRAM};
use crate::drops::PacketDrop;
use crate::frames::IcmpHeader;
use crate::wire::icmp::{icmp_type, unreachable_code};
use crate::wire::icmpv6::icmpv6_type;
use crate::wire::ipv6::Chain;
use crate::wire::{Ipv4Packet, Ipv6Packet};
use polld_core::{Emit, Verdict};

/// The smallest MTU of an IPv4 link (RFC 791): room for the largest header and 8 bytes.
const MIN_MTU: u16 = 68;

/// The way into the kernel's forwarding, given by the control plane.
pub trait ToKernel: fmt::Debug + Send {
    /// Hands `packet`, an IPv4 or IPv6 packet from its IP header on, ready to leave (its
    /// TTL or hop limit decremented), to the kernel, which routes and sends it. Must not
    /// block.
    fn send(&mut self, packet: &[u8]) -> Result<(), Refused>;
}

/// Why the kernel did not take a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Larger than `mtu`, the MTU of the kernel's route for it.
    TooBig { mtu: u16 },
    /// Not taken for another reason (its buffer full, no route or source address).
    Failed,
}

/// Why a packet is handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Why {
    /// Its route leaves by an interface polld does not poll.
    Unpolled,
    /// Its next hop has no neighbour entry.
    Unresolved,
}

/// Hands the fragments [`Forwarder::fragment`] makes to the kernel.
struct Fragments<'a> {
    kernel: &'a mut dyn ToKernel,
    failed: bool,
}

impl Emit for Fragments<'_> {
    fn emit(&mut self, _out: usize, _frame: &[u8]) {
        unreachable!("fragmenting emits no frame of its own")
    }

    fn forward_part(&mut self, _out: usize, frame: &[u8]) {
        self.failed |= self.kernel.send(&frame[ETH..]).is_err();
    }
}

impl Forwarder {
    /// Gives the router its way to the kernel: from then on, the packets of a route out
    /// of an interface polld does not poll and those to a next hop without a neighbour
    /// entry are handed to it rather than dropped.
    pub fn set_to_kernel(&mut self, kernel: Box<dyn ToKernel>) {
        self.to_kernel = Some(kernel);
    }

    /// Hands the IPv4 datagram `frame` (checked, to be forwarded, TTL above 1) to the
    /// kernel for `why`; `None` when there is no way to the kernel or it refused (the
    /// caller drops it by its reason).
    pub(super) fn hand4(
        &mut self,
        input: usize,
        frame: &mut [u8],
        why: Why,
        emit: &mut dyn Emit,
    ) -> Option<Verdict> {
        let mut kernel = self.to_kernel.take()?;
        let ip = Ipv4Packet::new_unchecked(&frame[ETH..]);
        let (ttl, end, dont_fragment) = (
            ip.ttl(),
            ETH + usize::from(ip.total_len()),
            ip.dont_fragment(),
        );
        let too_long = ip.frag_offset() + ip.payload().len() > MAX_DATAGRAM;
        Ipv4Packet::new_unchecked(&mut frame[ETH..end]).decrement_ttl();
        let verdict = match kernel.send(&frame[ETH..end]) {
            Ok(()) => Some(Verdict::Kernel),
            Err(Refused::TooBig { mtu }) if !dont_fragment && !too_long && mtu >= MIN_MTU => {
                let mut parts = Fragments {
                    kernel: &mut *kernel,
                    failed: false,
                };
                self.fragment(0, &frame[..end], mtu, &mut parts);
                (!parts.failed).then_some(Verdict::Kernel)
            }
            Err(Refused::TooBig { mtu }) => {
                // The error quotes the datagram as it arrived.
                let mut ip = Ipv4Packet::new_unchecked(&mut frame[ETH..end]);
                ip.set_ttl(ttl);
                ip.fill_checksum();
                self.counters.cantfrag += 1;
                if !dont_fragment {
                    Some(PacketDrop::Fragment.verdict())
                } else {
                    let header = IcmpHeader {
                        msg_type: icmp_type::DEST_UNREACHABLE,
                        code: unreachable_code::FRAG_NEEDED,
                        rest: u32::from(mtu),
                    };
                    self.icmp_error(input, frame, header, emit);
                    Some(PacketDrop::Oversize.verdict())
                }
            }
            Err(Refused::Failed) => None,
        };
        self.to_kernel = Some(kernel);
        self.count_handed(verdict, why)
    }

    /// Hands the IPv6 packet `frame` (checked, its extension headers `chain`, to be
    /// forwarded, hop limit above 1) to the kernel for `why`, as [`Forwarder::hand4`].
    pub(super) fn hand6(
        &mut self,
        input: usize,
        frame: &mut [u8],
        chain: &Chain,
        why: Why,
        emit: &mut dyn Emit,
    ) -> Option<Verdict> {
        let mut kernel = self.to_kernel.take()?;
        let ip = Ipv6Packet::new_unchecked(&frame[ETH..]);
        let (hop_limit, end) = (ip.hop_limit(), ETH + ip.packet().len());
        Ipv6Packet::new_unchecked(&mut frame[ETH..end]).set_hop_limit(hop_limit - 1);
        let verdict = match kernel.send(&frame[ETH..end]) {
            Ok(()) => Some(Verdict::Kernel),
            Err(Refused::TooBig { mtu }) => {
                Ipv6Packet::new_unchecked(&mut frame[ETH..end]).set_hop_limit(hop_limit);
                self.counters.cantfrag += 1;
                let header = IcmpHeader {
                    msg_type: icmpv6_type::PACKET_TOO_BIG,
                    code: 0,
                    rest: u32::from(mtu),
                };
                self.icmpv6_error(input, frame, chain, header, emit);
                Some(PacketDrop::Oversize.verdict())
            }
            Err(Refused::Failed) => None,
        };
        self.to_kernel = Some(kernel);
        self.count_handed(verdict, why)
    }

    /// Counts a handed packet by why it was handed.
    fn count_handed(&mut self, verdict: Option<Verdict>, why: Why) -> Option<Verdict> {
        if verdict == Some(Verdict::Kernel) {
            match why {
                Why::Unpolled => self.counters.to_kernel_unpolled += 1,
                Why::Unresolved => self.counters.to_kernel_unresolved += 1,
            }
        }
        verdict
    }
}
