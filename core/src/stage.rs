//! The packet stage: what happens to a frame once a device handed it up.
//!
//! In FreeBSD this is `ether_input` → `ip_input` → `ip_forward`, run either inside the
//! driver's handler (`net.inet.ip.fastforwarding=1`) or later from the IP input queue
//! (the netisr). The dataplane calls a [`PacketStage`] for every frame and counts the
//! [`Verdict`] so that, at every layer, received = forwarded + local + consumed + drops.

/// Why a frame was dropped. Each reason is its own counter, named by [`DropReason::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum DropReason {
    /// The device's receive ring was full when the frame arrived.
    RxRingFull,
    /// A fault injector dropped the frame before the device handed it up (a test tool).
    FaultInjected,
    /// The IP input queue (`net.inet.ip.intr_queue_maxlen`) was full.
    IntrQueueFull,
    /// The output device's transmit ring was full.
    TxRingFull,
    /// The output interface is down or gone.
    LinkDown,
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
    /// Addressed to this box but there is no host path for it.
    NotDelivered,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 21] = [
        DropReason::RxRingFull,
        DropReason::FaultInjected,
        DropReason::IntrQueueFull,
        DropReason::TxRingFull,
        DropReason::LinkDown,
        DropReason::Truncated,
        DropReason::Oversize,
        DropReason::UnknownEthertype,
        DropReason::Vlan,
        DropReason::BadVersion,
        DropReason::BadIhl,
        DropReason::BadLength,
        DropReason::BadChecksum,
        DropReason::Martian,
        DropReason::IpOptions,
        DropReason::Fragment,
        DropReason::TtlExceeded,
        DropReason::NoRoute,
        DropReason::Unresolved,
        DropReason::Filtered,
        DropReason::NotDelivered,
    ];

    /// The counter name, as shown by `polld ctl` and `polld stat`.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::RxRingFull => "rx_ring_full",
            DropReason::FaultInjected => "fault_injected",
            DropReason::IntrQueueFull => "intr_queue_full",
            DropReason::TxRingFull => "tx_ring_full",
            DropReason::LinkDown => "link_down",
            DropReason::Truncated => "truncated",
            DropReason::Oversize => "oversize",
            DropReason::UnknownEthertype => "unknown_ethertype",
            DropReason::Vlan => "vlan",
            DropReason::BadVersion => "bad_version",
            DropReason::BadIhl => "bad_ihl",
            DropReason::BadLength => "bad_length",
            DropReason::BadChecksum => "bad_checksum",
            DropReason::Martian => "martian",
            DropReason::IpOptions => "ip_options",
            DropReason::Fragment => "fragment",
            DropReason::TtlExceeded => "ttl_exceeded",
            DropReason::NoRoute => "no_route",
            DropReason::Unresolved => "unresolved",
            DropReason::Filtered => "filtered",
            DropReason::NotDelivered => "not_delivered",
        }
    }

    /// Whether the device dropped the frame before handing it up: such a frame is not in
    /// `rx_packets` (arrived = rx_packets + these drops).
    pub fn before_rx(self) -> bool {
        matches!(self, DropReason::RxRingFull | DropReason::FaultInjected)
    }

    /// Index into a `[u64; DropReason::ALL.len()]` counter array.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A set of named reasons, each with its own counter ([`DropReason`], [`TxDrop`]).
///
/// [`TxDrop`]: crate::device::TxDrop
pub trait Reason: Copy + 'static {
    /// Every reason, in counter order.
    const ALL: &'static [Self];
    /// The counter name.
    fn name(self) -> &'static str;
    /// The position in [`Reason::ALL`].
    fn index(self) -> usize;
}

impl Reason for DropReason {
    const ALL: &'static [DropReason] = &DropReason::ALL;
    fn name(self) -> &'static str {
        DropReason::name(self)
    }
    fn index(self) -> usize {
        DropReason::index(self)
    }
}

/// One counter per reason `R` (`N` is `R::ALL.len()`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts<R, const N: usize>([u64; N], std::marker::PhantomData<R>);

impl<R, const N: usize> Default for Counts<R, N> {
    fn default() -> Self {
        Counts([0; N], std::marker::PhantomData)
    }
}

impl<R: Reason, const N: usize> Counts<R, N> {
    pub fn add(&mut self, reason: R, n: u64) {
        self.0[reason.index()] += n;
    }
    pub fn get(&self, reason: R) -> u64 {
        self.0[reason.index()]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// The non-zero counters, by reason.
    pub fn nonzero(&self) -> impl Iterator<Item = (R, u64)> + '_ {
        R::ALL
            .iter()
            .map(|&r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

impl<R: Reason, const N: usize> serde::Serialize for Counts<R, N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(N))?;
        for &r in R::ALL {
            m.serialize_entry(r.name(), &self.get(r))?;
        }
        m.end()
    }
}

/// Drop counters, one per [`DropReason`].
pub type DropCounters = Counts<DropReason, { DropReason::ALL.len() }>;

/// What the stage decided for one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Rewritten in place; transmit it on device `out` (an index into the dataplane's devices).
    Forward { out: usize },
    /// Forwarded on device `out`, not as the input buffer but as the frames the stage
    /// handed to [`Emit::forward_part`]: its fragments, or the datagram trimmed of
    /// link-layer padding. One forwarded frame in the counters, however many frames it
    /// became; lost as a whole if the device refuses any of them.
    ForwardEmitted { out: usize },
    /// Addressed to this box: hand it to the host's stack.
    Local,
    /// Used up by polld itself (an ARP reply it learned from, an ARP request it answered).
    Consumed,
    /// Dropped, for this reason.
    Drop(DropReason),
}

/// Where the stage puts frames other than the rewritten input buffer.
pub trait Emit {
    /// Queues a frame the stage generates on its own (ARP requests and replies, ICMP
    /// messages) for transmission on device `out`.
    fn emit(&mut self, out: usize, frame: &[u8]);

    /// Queues one frame of the datagram being forwarded on device `out`, when it does
    /// not leave as the input buffer (a fragment, or the datagram without its link-layer
    /// padding); the stage then returns [`Verdict::ForwardEmitted`].
    fn forward_part(&mut self, out: usize, frame: &[u8]);
}

/// The processing a received frame goes through.
pub trait PacketStage {
    /// Decides the fate of `frame`, received on device `input`; may rewrite it in place
    /// and may emit frames of its own.
    fn process(&mut self, input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict;

    /// The executor's clock, in ns, before each piece of work (ARP timers, ICMP rate
    /// limits); a stage that keeps no time ignores it.
    fn set_now(&mut self, _now_ns: u64) {}

    /// The stage's own counters beyond the verdicts (fragments made, IP options seen),
    /// as (name under `net.inet.ip.`, value, description), for `polld ctl`.
    fn sysctl_counters(&self) -> Vec<(&'static str, u64, &'static str)> {
        Vec::new()
    }
}
