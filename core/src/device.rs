//! The device interface: what the scheduler and the interface modes need from a NIC.
//!
//! Every backend implements [`Device`]: the simulated NIC on virtual time, AF_PACKET
//! (TPACKET_V3), AF_XDP and TAP. The trait mirrors what a FreeBSD driver offers
//! `kern_poll`: receive at most `count` frames (`*_poll`), a status check
//! (`POLL_AND_CHECK_STATUS`), transmit, and an interrupt that can be masked.
//!
//! On Linux user space an *interrupt* is a readiness notification (epoll on the ring's fd,
//! the AF_XDP need_wakeup protocol, an eventfd); *masking* it means not waiting on it.
//!
//! # Lending: forwarding without a copy
//!
//! By default a forwarded frame is copied out of the input's receive buffer when the
//! stage has processed it, and copied again into the output's transmit buffer by
//! [`Device::send`]. Devices whose buffers live in one pool shared with other devices (AF_XDP
//! sockets bound to one UMEM) offer the optional [`Lending`] capability instead: the input
//! *lends* the received buffer (a [`Loan`]: the pool, an offset and a length, opaque to the
//! core), the output puts that same buffer on its transmit ring, and the pool gives it back
//! to a receive ring once transmitted. The stage still rewrites the frame in place (TTL,
//! checksum, MACs), so it is rewritten in the shared buffer.
//!
//! Why an optional capability behind one accessor ([`Device::lending`]) rather than more
//! methods on [`Device`] or buffers owned by the core: the trait stays what every backend can
//! do (smoltcp's `Device` makes the same choice: tokens over the driver's own buffers),
//! the core never touches memory it does not own, and every case the capability does not
//! cover (another pool, a wrapper that alters what it receives, a frame the stage re-emits,
//! the input queue) is
//! the copy path unchanged. A loan lives only inside one receive batch: it is sent or given
//! back before the batch returns, so no buffer outlives the call that lent it.
//!
//! # Capabilities and wrappers
//!
//! What a device offers beyond its methods (its interrupt fd, its transmit-ready line, its
//! kick size, its pool) is one value, [`Capabilities`], which the dataplane reads when the
//! interface is registered rather than asking the device method by method. Its fds are
//! borrowed from the device, so no executor can wait on one the device has closed; how a
//! transmit-ready line rises ([`TxReadyLine`]) is the device's to say, and an executor
//! follows it without knowing the backend. [`Device`]'s documentation shows a minimal
//! device. A device that
//! wraps another (the middleware: pcap, faults, reopening; and `Box`) implements
//! [`Wrapper`]: everything passes through to the inner device but what it overrides.

use std::os::fd::BorrowedFd;

use crate::stage::{Counts, Reason};

/// Link state reported by a status check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize)]
pub enum LinkState {
    #[default]
    Up,
    /// Administratively or physically down: the handler skips work (FreeBSD's !RUNNING).
    Down,
    /// The interface no longer exists; the dataplane deregisters it.
    Gone,
}

impl LinkState {
    pub const ALL: [LinkState; 3] = [LinkState::Up, LinkState::Down, LinkState::Gone];

    /// The name `dev.<if>.link` shows: `up`, `down` or `gone`.
    pub fn name(self) -> &'static str {
        match self {
            LinkState::Up => "up",
            LinkState::Down => "down",
            LinkState::Gone => "gone",
        }
    }
}

/// The transmit ring had no free slot for a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFull;

/// Why a device dropped a frame that [`Device::send`] had accepted. A transmit drop the
/// device discovers later (at [`Device::flush`], or in the kernel) cannot be charged to
/// the frame's input interface, so it is counted on the output interface by this reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum TxDrop {
    /// Longer than the device's transmit frame (AF_PACKET slot, AF_XDP UMEM frame, MTU).
    TooLong,
    /// The kernel had no buffer for it (ENOBUFS: a full driver queue).
    NoBufs,
    /// The kernel refused it for another reason (ENETDOWN, EMSGSIZE, EIO, ...).
    Refused,
    /// A fault injector failed it on purpose (a test tool).
    Fault,
}

impl TxDrop {
    /// Every reason, in counter order.
    pub const ALL: [TxDrop; 4] = [
        TxDrop::TooLong,
        TxDrop::NoBufs,
        TxDrop::Refused,
        TxDrop::Fault,
    ];

    /// The counter name: `dev.<if>.tx_drops.<name>`.
    pub fn name(self) -> &'static str {
        match self {
            TxDrop::TooLong => "too_long",
            TxDrop::NoBufs => "nobufs",
            TxDrop::Refused => "refused",
            TxDrop::Fault => "fault",
        }
    }
}

impl Reason for TxDrop {
    const ALL: &'static [TxDrop] = &TxDrop::ALL;
    fn name(self) -> &'static str {
        TxDrop::name(self)
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Transmit drops, one counter per [`TxDrop`].
pub type TxDrops = Counts<TxDrop, { TxDrop::ALL.len() }>;

/// Counters the device itself keeps, outside polld's view (kernel or hardware drops).
/// Every field is a running total since the device was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HwStats {
    /// Frames the device dropped because its receive ring was full.
    pub rx_ring_full: u64,
    /// Frames the device dropped for want of a receive buffer (AF_XDP: the kernel's
    /// `rx_dropped`, see [`crate::DropReason::RxNoBuffer`]).
    pub rx_no_buffer: u64,
    /// Received frames a fault injector dropped before handing them up (a test tool).
    pub rx_fault: u64,
    /// Frames `send` accepted and the device then dropped, by reason.
    pub tx_drops: TxDrops,
}

/// What a device offers beyond its methods: the lines an executor waits on, what one kick
/// sends, the pool it lends from. Facts, not state: a device never changes them, so the
/// dataplane reads them once, when the interface is registered, and again after each
/// status check, the only time a wrapper swaps in a new device (a reopened interface,
/// whose fds are new and which may no longer share a pool). The fds are borrowed from the
/// device: an executor reads them from the device whenever it arms a wait, and never
/// keeps one past the device.
///
/// Built from [`Capabilities::new`] (nothing: a device that forwards by copy and is served
/// by status checks and polls) with one `with_*` call per thing the device offers; new
/// fields come with a default, so a device that does not know them still builds.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Capabilities<'fd> {
    /// The file descriptor whose readiness is the device's interrupt, if it has one.
    pub interrupt_fd: Option<BorrowedFd<'fd>>,
    /// The device's transmit-ready line, FreeBSD's transmit-complete interrupt, if it
    /// raises one. Only then does interrupt work stop on this output when it is full, and
    /// wait for the line, instead of receiving frames the output would refuse.
    pub tx_ready: Option<TxReadyLine<'fd>>,
    /// The most frames one [`Device::flush`] pushes out at once: what one kick sends (an
    /// AF_XDP `sendto` in copy mode sends at most the socket's TX budget, an AF_PACKET
    /// `sendmmsg` its batch). The dataplane flushes an output as soon as this many frames
    /// wait on it, so each kick goes out full instead of one per receive chunk;
    /// `usize::MAX`, no limit, flushes only when the work is done.
    pub tx_batch: usize,
    /// The pool the device receives into and transmits from, if it shares it with other
    /// devices: then, and only then, [`Device::lending`] offers [`Lending`].
    pub pool: Option<PoolId>,
}

impl Default for Capabilities<'_> {
    fn default() -> Self {
        Capabilities::new()
    }
}

impl<'fd> Capabilities<'fd> {
    /// No fd, no transmit-ready line, no batch limit, no pool.
    pub const fn new() -> Self {
        Capabilities {
            interrupt_fd: None,
            tx_ready: None,
            tx_batch: usize::MAX,
            pool: None,
        }
    }

    /// The device's interrupt is the readiness (POLLIN) of `fd`.
    pub fn with_interrupt_fd(self, fd: BorrowedFd<'fd>) -> Self {
        Capabilities {
            interrupt_fd: Some(fd),
            ..self
        }
    }

    /// The device raises a transmit-ready line, as `line` says.
    pub fn with_tx_ready(self, line: TxReadyLine<'fd>) -> Self {
        Capabilities {
            tx_ready: Some(line),
            ..self
        }
    }

    /// One kick sends at most `frames` frames ([`Capabilities::tx_batch`]).
    pub fn with_tx_batch(self, frames: usize) -> Self {
        Capabilities {
            tx_batch: frames,
            ..self
        }
    }

    /// The device lends from and sends loans of `pool` ([`Capabilities::pool`]).
    pub fn with_pool(self, pool: PoolId) -> Self {
        Capabilities {
            pool: Some(pool),
            ..self
        }
    }

    /// Whether the device raises a transmit-ready line.
    pub fn signals_tx_ready(&self) -> bool {
        self.tx_ready.is_some()
    }

    /// The fd whose writability is the transmit-ready line, if the line is an fd's.
    pub fn tx_ready_fd(&self) -> Option<BorrowedFd<'fd>> {
        match self.tx_ready? {
            TxReadyLine::Writable(fd) | TxReadyLine::WakeupOnly(fd) => Some(fd),
            TxReadyLine::Modelled => None,
        }
    }
}

/// How a device raises its transmit-ready line: the kernel raises it when frames the
/// device sent have left and it can take more.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum TxReadyLine<'fd> {
    /// The writability (POLLOUT) of the fd: each wakeup that finds it writable is a rise.
    /// Never the [`Capabilities::interrupt_fd`] itself (a duplicate of it where one socket
    /// does both): the executor waits for it edge-triggered, and only while interrupt work
    /// waits for this output.
    Writable(BorrowedFd<'fd>),
    /// The writability of the fd, of which only a *wakeup* while the executor sleeps (or
    /// while other work is due) is a rise: not its writability when the executor starts
    /// waiting on it with nothing else due, nor a wakeup the executor's own sends caused.
    /// For a fd that polls writable while the device behind it is still full, and that
    /// each kick wakes. How an executor tells those wakeups apart belongs to the device
    /// layer (`polld_dev::tx_wakeup`).
    WakeupOnly(BorrowedFd<'fd>),
    /// Raised by the executor from the device's model, with no fd: the simulated NIC, whose
    /// line the virtual CPU reports.
    Modelled,
}

/// A network device as the polling scheduler sees it.
///
/// The contract follows FreeBSD's em/fxp poll handlers: `receive` processes at most
/// `budget` frames and its cost should be about linear in the number it returns;
/// the ring's consumer index is published once per call, not per frame.
///
/// A device that wraps another (middleware) implements [`Wrapper`] instead, and gets this
/// trait from it.
///
/// # A minimal device
///
/// Frames to receive in a queue, sent frames kept, a transmit ring of four slots, and an
/// interrupt: the readiness of a socket, whose fd [`Capabilities`] lends the executor.
/// Everything else (transmit room, hardware drops, lending) keeps its default.
///
/// ```
/// use std::collections::VecDeque;
/// use std::os::fd::{AsFd, OwnedFd};
/// use std::os::unix::net::UnixDatagram;
///
/// use polld_core::{
///     Capabilities, Dataplane, Device, Emit, Frozen, Knobs, LinkState, PacketStage, Poller,
///     TxFull, Verdict,
/// };
///
/// struct Queue {
///     name: String,
///     rx: VecDeque<Vec<u8>>,
///     tx: Vec<Vec<u8>>,
///     interrupt: OwnedFd,
/// }
///
/// impl Device for Queue {
///     fn name(&self) -> &str {
///         &self.name
///     }
///     fn capabilities(&self) -> Capabilities<'_> {
///         Capabilities::new().with_interrupt_fd(self.interrupt.as_fd())
///     }
///     fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
///         let n = budget.min(self.rx.len());
///         for mut frame in self.rx.drain(..n) {
///             rx(&mut frame);
///         }
///         n
///     }
///     fn rx_ready(&mut self) -> bool {
///         !self.rx.is_empty()
///     }
///     fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
///         if self.tx.len() == 4 {
///             return Err(TxFull);
///         }
///         self.tx.push(frame.to_vec());
///         Ok(())
///     }
///     fn flush(&mut self) {}
///     fn check_status(&mut self) -> LinkState {
///         LinkState::Up
///     }
///     fn set_interrupt(&mut self, _armed: bool) {}
/// }
///
/// /// Forwards what device 0 receives to device 1.
/// struct ToOne;
///
/// impl PacketStage for ToOne {
///     fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
///         Verdict::Forward { out: 1 }
///     }
/// }
///
/// let queue = |name: &str, frames: usize| Queue {
///     name: name.to_string(),
///     rx: vec![vec![0u8; 60]; frames].into(),
///     tx: Vec::new(),
///     interrupt: UnixDatagram::pair().unwrap().0.into(),
/// };
/// let devices = vec![queue("in0", 6), queue("out1", 0)];
/// let mut dp = Dataplane::new(Poller::new(Knobs::default()), devices, ToOne);
/// assert!(dp.capabilities(0).interrupt_fd.is_some());
/// // The executor found device 0's fd readable: its handler runs to completion.
/// dp.interrupt_line(0, true);
/// dp.step_accounted(&mut Frozen(0));
/// assert_eq!(dp.interfaces()[1].dev().tx.len(), 4, "the output's ring took four");
/// assert_eq!(dp.interfaces()[0].counters().forwarded, 4);
/// ```
pub trait Device {
    /// The interface name (`veth1`, `sim0`).
    fn name(&self) -> &str;

    /// What the device offers beyond its methods ([`Capabilities`]); by default nothing.
    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities::new()
    }

    /// Hands up to `budget` received frames to `rx`, in arrival order, and returns how
    /// many it handed. `rx` may rewrite a frame in place (TTL, checksum, MACs).
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize;

    /// Whether received frames are waiting. Cheap: no system call where the ring
    /// is shared memory.
    fn rx_ready(&mut self) -> bool;

    /// Copies `frame` into the transmit ring, or reports that the ring is full. A frame
    /// accepted here and dropped later (too long, refused by the kernel) is counted in
    /// [`HwStats::tx_drops`], never lost silently.
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull>;

    /// Frames the device can usefully take now, as far as it knows (reclaiming completed
    /// ones first): what `send` would accept, or 0 while frames it already holds wait on
    /// the kernel (an AF_XDP ring the kernel refused), so the scheduler stops the input
    /// instead of queueing more behind them; `usize::MAX` if it cannot tell.
    fn tx_room(&mut self) -> usize {
        usize::MAX
    }

    /// Pushes queued transmit frames out (a kick) and reclaims completed ones. The
    /// dataplane calls it once [`Capabilities::tx_batch`] frames wait, and when its work
    /// is done (the poll cycle closed, the handler returned) for what is left.
    fn flush(&mut self);

    /// The periodic status check (`POLL_AND_CHECK_STATUS` every `reg_frac` cycles).
    fn check_status(&mut self) -> LinkState;

    /// Arms (`true`) or masks (`false`) the device's interrupt.
    fn set_interrupt(&mut self, armed: bool);

    /// Drops the device counted itself.
    fn hw_stats(&mut self) -> HwStats {
        HwStats::default()
    }

    /// The device's [`Lending`] capability, if its buffers live in a pool it shares with
    /// other devices ([`Capabilities::pool`]); `None` (the default) forwards by copy.
    fn lending(&mut self) -> Option<&mut dyn Lending> {
        None
    }
}

/// Names one pool of frame buffers (one AF_XDP UMEM): devices with the same id can send
/// each other's received buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolId(pub u64);

/// A received frame lent to the dataplane instead of being recycled at once: where it lies
/// in its pool. Opaque to the core; only devices of that pool read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loan {
    pub pool: PoolId,
    pub offset: u64,
    pub len: u32,
}

/// What a device whose buffers live in a shared pool offers beyond [`Device`]: receiving
/// with loans, and transmitting a loan without copying it. Every loan the dataplane keeps
/// goes back through [`Lending::send_loan`] (on a device of the same pool) or
/// [`Lending::give_back`] (on the lender) before the receive batch ends.
pub trait Lending {
    /// Like [`Device::receive`], with each frame's [`Loan`]: `rx` returns `true` when it
    /// keeps the loan (the device must not recycle that buffer), `false` when the frame
    /// is done with once `rx` returns (recycled as [`Device::receive`] recycles it).
    fn receive_lending(
        &mut self,
        budget: usize,
        rx: &mut dyn FnMut(&mut [u8], Loan) -> bool,
    ) -> usize;

    /// Queues the lent buffer on the transmit ring as it is (published by
    /// [`Device::flush`]); on [`TxFull`] the loan is still the caller's to give back.
    /// `loan.pool` is this device's pool.
    fn send_loan(&mut self, loan: Loan) -> Result<(), TxFull>;

    /// Takes back a buffer this device lent and that was not sent (the output was full).
    fn give_back(&mut self, loan: Loan);

    /// Shows `look` the bytes of `loan`, a buffer of this device's pool that the caller
    /// holds (lent to it, or queued by [`Lending::send_loan`] and not yet flushed): for a
    /// middleware that records what it sends (the pcap writer).
    fn inspect_loan(&mut self, loan: Loan, look: &mut dyn FnMut(&[u8]));
}

/// A device that wraps another and changes part of what it does (smoltcp's middleware: a
/// pcap writer, a fault injector, a device reopened when its interface returns). Each
/// method has the [`Device`] method's name and contract and, by default, passes the call
/// to [`Wrapper::inner_mut`]: a wrapper overrides only what it changes, and every
/// wrapper is a [`Device`] (the impl below), so a method added to [`Device`] is passed
/// through here, once, for all of them.
///
/// The capabilities and [`Lending`] pass through too: a wrapper that changes what it
/// receives or sends must say what becomes of them (lend through itself, as the pcap
/// writer does, or forward by copy).
///
/// The methods take `this`, not `self` (as `Arc::get_mut` does), so that method calls on a
/// wrapper (`Box<dyn Device>` is one) always mean the [`Device`] ones, wherever this trait
/// is in scope.
pub trait Wrapper {
    /// The wrapped device.
    type Inner: Device + ?Sized;

    fn inner(&self) -> &Self::Inner;
    fn inner_mut(&mut self) -> &mut Self::Inner;

    fn name(this: &Self) -> &str {
        this.inner().name()
    }
    fn capabilities(this: &Self) -> Capabilities<'_> {
        this.inner().capabilities()
    }
    fn receive(this: &mut Self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        this.inner_mut().receive(budget, rx)
    }
    fn rx_ready(this: &mut Self) -> bool {
        this.inner_mut().rx_ready()
    }
    fn send(this: &mut Self, frame: &[u8]) -> Result<(), TxFull> {
        this.inner_mut().send(frame)
    }
    fn tx_room(this: &mut Self) -> usize {
        this.inner_mut().tx_room()
    }
    fn flush(this: &mut Self) {
        this.inner_mut().flush()
    }
    fn check_status(this: &mut Self) -> LinkState {
        this.inner_mut().check_status()
    }
    fn set_interrupt(this: &mut Self, armed: bool) {
        this.inner_mut().set_interrupt(armed)
    }
    fn hw_stats(this: &mut Self) -> HwStats {
        this.inner_mut().hw_stats()
    }
    fn lending(this: &mut Self) -> Option<&mut dyn Lending> {
        this.inner_mut().lending()
    }
}

impl<W: Wrapper> Device for W {
    fn name(&self) -> &str {
        Wrapper::name(self)
    }
    fn capabilities(&self) -> Capabilities<'_> {
        Wrapper::capabilities(self)
    }
    fn receive(&mut self, budget: usize, rx: &mut dyn FnMut(&mut [u8])) -> usize {
        Wrapper::receive(self, budget, rx)
    }
    fn rx_ready(&mut self) -> bool {
        Wrapper::rx_ready(self)
    }
    fn send(&mut self, frame: &[u8]) -> Result<(), TxFull> {
        Wrapper::send(self, frame)
    }
    fn tx_room(&mut self) -> usize {
        Wrapper::tx_room(self)
    }
    fn flush(&mut self) {
        Wrapper::flush(self)
    }
    fn check_status(&mut self) -> LinkState {
        Wrapper::check_status(self)
    }
    fn set_interrupt(&mut self, armed: bool) {
        Wrapper::set_interrupt(self, armed)
    }
    fn hw_stats(&mut self) -> HwStats {
        Wrapper::hw_stats(self)
    }
    fn lending(&mut self) -> Option<&mut dyn Lending> {
        Wrapper::lending(self)
    }
}

/// A boxed device is a device, so one dataplane can mix backends (`Box<dyn Device>`): the
/// simplest wrapper, which changes nothing.
impl<T: Device + ?Sized> Wrapper for Box<T> {
    type Inner = T;
    fn inner(&self) -> &T {
        self
    }
    fn inner_mut(&mut self) -> &mut T {
        self
    }
}
