//! The packet stage: what happens to a frame once a device handed it up.
//!
//! In FreeBSD this is `ether_input` → `ip_input` → `ip_forward`, run either inside the
//! driver's handler (`net.inet.ip.fastforwarding=1`) or later from the IP input queue
//! (the netisr). The dataplane calls a [`PacketStage`] for every frame and counts the
//! [`Verdict`] so that, at every layer, received = forwarded + local + consumed +
//! to_kernel + drops.

/// Why a frame was dropped: one of the dataplane's own reasons (the device, the input
/// queue, the output), or a reason the packet stage declares. The core counts a stage's
/// reasons without knowing them: the stage names them ([`PacketStage::drop_reasons`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The device's receive ring was full when the frame arrived: the simulated NIC's
    /// ring, AF_PACKET's ring or socket buffer (`tp_drops`), the TAP's queue, AF_XDP's rx
    /// ring (the kernel's `rx_ring_full`).
    RxRingFull,
    /// The device had no receive buffer to put the frame in, with room left in its ring
    /// (AF_XDP: see `polld_dev::afxdp`'s `AfXdpStats::hw_stats`). Backends without a
    /// separate buffer pool never count it.
    RxNoBuffer,
    /// A fault injector dropped the frame before the device handed it up (a test tool).
    FaultInjected,
    /// The IP input queue (`net.inet.ip.intr_queue_maxlen`) was full.
    IntrQueueFull,
    /// The output device's transmit ring was full.
    TxRingFull,
    /// The output interface is down or gone.
    LinkDown,
    /// A reason of the packet stage (a martian address, TTL exceeded, no route, ...).
    Stage(StageDrop),
}

/// A drop reason a packet stage declares: its position in the stage's table
/// ([`PacketStage::drop_reasons`]) and its counter name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageDrop {
    index: u8,
    name: &'static str,
}

impl StageDrop {
    /// Reason `index` of a stage's table, counted as `drops.<name>`; `index` must be
    /// below [`STAGE_DROPS_MAX`].
    pub const fn new(index: u8, name: &'static str) -> StageDrop {
        assert!(
            (index as usize) < STAGE_DROPS_MAX,
            "too many stage drop reasons"
        );
        StageDrop { index, name }
    }

    pub fn name(self) -> &'static str {
        self.name
    }

    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// How many drop reasons a packet stage may declare.
pub const STAGE_DROPS_MAX: usize = 32;

impl DropReason {
    /// The dataplane's own reasons, in counter order (a stage's follow them).
    pub const OWN: [DropReason; 6] = [
        DropReason::RxRingFull,
        DropReason::RxNoBuffer,
        DropReason::FaultInjected,
        DropReason::IntrQueueFull,
        DropReason::TxRingFull,
        DropReason::LinkDown,
    ];

    /// Every reason in counter order: the dataplane's own, then the stage's `stage`.
    pub fn all(stage: &'static [StageDrop]) -> impl Iterator<Item = DropReason> {
        DropReason::OWN
            .into_iter()
            .chain(stage.iter().map(|&s| DropReason::Stage(s)))
    }

    /// The counter name, as shown by `polld ctl` and `polld stat`.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::RxRingFull => "rx_ring_full",
            DropReason::RxNoBuffer => "rx_no_buffer",
            DropReason::FaultInjected => "fault_injected",
            DropReason::IntrQueueFull => "intr_queue_full",
            DropReason::TxRingFull => "tx_ring_full",
            DropReason::LinkDown => "link_down",
            DropReason::Stage(s) => s.name,
        }
    }

    /// Whether the device dropped the frame before handing it up: such a frame is not in
    /// `rx_packets` (arrived = rx_packets + these drops).
    pub fn before_rx(self) -> bool {
        matches!(
            self,
            DropReason::RxRingFull | DropReason::RxNoBuffer | DropReason::FaultInjected
        )
    }

    /// The reasons of frames the device dropped before handing them up
    /// ([`DropReason::before_rx`]): conservation leaves them out of `rx_packets`.
    pub fn before_rx_reasons() -> impl Iterator<Item = DropReason> {
        DropReason::OWN.into_iter().filter(|r| r.before_rx())
    }

    /// Whether `counter`, a name as `polld ctl` and `run --json` give it, is the drop
    /// count of frames that were in `rx_packets` (`drops.<reason>`, the reason not
    /// [`DropReason::before_rx`]): what conservation adds to forwarded, local, consumed
    /// and queued.
    pub fn is_drop_after_rx(counter: &str) -> bool {
        counter
            .strip_prefix("drops.")
            .is_some_and(|reason| !DropReason::before_rx_reasons().any(|r| r.name() == reason))
    }

    /// Index into [`DropCounters`].
    fn index(self) -> usize {
        match self {
            DropReason::RxRingFull => 0,
            DropReason::RxNoBuffer => 1,
            DropReason::FaultInjected => 2,
            DropReason::IntrQueueFull => 3,
            DropReason::TxRingFull => 4,
            DropReason::LinkDown => 5,
            DropReason::Stage(s) => DropReason::OWN.len() + s.index(),
        }
    }
}

/// A closed set of named reasons, each with its own counter ([`TxDrop`]).
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
    /// Adds every counter of `other`.
    pub fn add_all(&mut self, other: &Self) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a += b);
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

/// Drop counters, one per [`DropReason`]: the dataplane's own and up to
/// [`STAGE_DROPS_MAX`] of the stage's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropCounters([u64; DropReason::OWN.len() + STAGE_DROPS_MAX]);

impl Default for DropCounters {
    fn default() -> Self {
        DropCounters([0; DropReason::OWN.len() + STAGE_DROPS_MAX])
    }
}

impl DropCounters {
    pub fn add(&mut self, reason: DropReason, n: u64) {
        self.0[reason.index()] += n;
    }
    /// Adds every counter of `other`.
    pub fn add_all(&mut self, other: &Self) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a += b);
    }
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    /// Drops of frames the device had handed up (not [`DropReason::before_rx`]).
    pub fn after_rx(&self) -> u64 {
        self.total()
            - DropReason::before_rx_reasons()
                .map(|r| self.get(r))
                .sum::<u64>()
    }
    /// The non-zero counters, by reason; a stage's reasons are named by its table
    /// `stage` ([`PacketStage::drop_reasons`]).
    pub fn nonzero(
        &self,
        stage: &'static [StageDrop],
    ) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::all(stage)
            .map(|r| (r, self.get(r)))
            .filter(|&(_, n)| n > 0)
    }
}

/// The dataplane's own reasons by name, then the stage's counters by index under `stage`
/// (up to the last non-zero one): the names of a stage's reasons are the stage's.
impl serde::Serialize for DropCounters {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let own = DropReason::OWN.len();
        let stage = &self.0[own..];
        let used = stage
            .iter()
            .rposition(|&n| n > 0)
            .map_or(0, |last| last + 1);
        let mut m = s.serialize_map(Some(own + 1))?;
        for r in DropReason::OWN {
            m.serialize_entry(r.name(), &self.get(r))?;
        }
        m.serialize_entry("stage", &stage[..used])?;
        m.end()
    }
}

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
    /// Addressed to this box: counted `local`; polld does not pass it on (the host's
    /// stack gets its own copy from the kernel: AF_PACKET, the XDP program passing local).
    Local,
    /// Used up by polld itself (an ARP reply it learned from, an ARP request it answered).
    Consumed,
    /// Handed to the host's kernel, which forwards it (a route out of an interface polld
    /// does not poll, a next hop the kernel is still resolving): counted `to_kernel`.
    Kernel,
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

    /// The reasons this stage drops frames for ([`DropReason::Stage`]), in counter order.
    fn drop_reasons(&self) -> &'static [StageDrop] {
        &[]
    }

    /// The executor's clock, in ns, before each piece of work (ARP timers, ICMP rate
    /// limits); a stage that keeps no time ignores it.
    fn set_now(&mut self, _now_ns: u64) {}

    /// The stage's own entries beyond the verdicts (fragments made, IP options seen),
    /// read from their declarations ([`crate::sysctl`]) under `node` (`net.inet.ip`).
    fn readings(&self, _node: &str) -> Vec<crate::sysctl::Reading> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::DropReason;

    #[test]
    fn only_drops_of_frames_already_in_rx_count_against_it() {
        assert!(DropReason::is_drop_after_rx("drops.tx_ring_full"));
        assert!(DropReason::is_drop_after_rx("drops.no_route"));
        for before in ["rx_ring_full", "rx_no_buffer", "fault_injected"] {
            assert!(!DropReason::is_drop_after_rx(&format!("drops.{before}")));
        }
        assert!(!DropReason::is_drop_after_rx("tx_drops.nobufs"));
        assert!(!DropReason::is_drop_after_rx("forwarded"));
    }
}
