//! The dataplane: interfaces in their modes, the IP input queue, and the scheduler.
//!
//! Each interface runs in one [`Mode`], switchable at run time:
//!
//! - `interrupt`: the device's interrupt (a readiness notification) runs a handler to
//!   completion. With `net.inet.ip.fastforwarding=1` frames are processed inside the
//!   handler; with `0` they go to the bounded IP input queue
//!   (`net.inet.ip.intr_queue_maxlen`), drained at lower priority: the configuration that
//!   livelocks under a flood.
//! - `polling`: registered with the [`Poller`]; interrupts masked.
//! - `adaptive`: the em(4) 2006/2010 design: the interrupt masks the device and queues a
//!   task that handles at most `dev.<if>.rx_process_limit` frames and requeues itself while
//!   work remains; the interrupt is re-armed only once the ring is drained.
//! - `busy`: the executor spins on the device and never sleeps.
//!
//! The dataplane does no I/O and reads no clock: an executor (the virtual CPU of
//! `polld-sim`, or the real poller thread) decides *when* each piece runs and calls in with
//! the time. Each call returns the [`Work`] it did so the executor can account for it.
//!
//! Every frame is counted: for every interface, `rx = forwarded + local + consumed +
//! drops + queued` ([`IfCounters::unaccounted`] is zero), where `queued` is the frames of
//! that interface waiting in the input queue. `forwarded` counts frames the output
//! device accepted; one it drops afterwards (too long, refused by the kernel) is counted
//! on the output interface in `tx_drops`, by reason, so a forwarded frame is delivered or
//! counted there.

use std::collections::VecDeque;
use std::fmt;

use crate::device::{Device, HwStats, LinkState, TxDrop, TxDrops};
use crate::knobs::{in_range, parse_int, KnobError};
use crate::poll::{HandlerId, PollCmd, PollHandlers, Poller, RegError, SysctlEntry};
use crate::stage::{DropCounters, DropReason, Emit, PacketStage, Verdict};

/// The global polling switch: a view of the interfaces' modes, so the dataplane's.
pub const ENABLE: &str = "kern.polling.enable";

/// How an interface is serviced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Interrupt,
    Polling,
    Adaptive,
    Busy,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Interrupt, Mode::Polling, Mode::Adaptive, Mode::Busy];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Interrupt => "interrupt",
            Mode::Polling => "polling",
            Mode::Adaptive => "adaptive",
            Mode::Busy => "busy",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown mode '{s}': use interrupt, polling, adaptive or busy"))
    }
}

/// What one call did, for the executor's cost accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Frames taken from device rings.
    pub rx: u64,
    /// Frames put into the IP input queue.
    pub enqueued: u64,
}

/// Per-interface counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IfCounters {
    /// Interrupts (wakeups) taken.
    pub interrupts: u64,
    /// Poll handler calls (scheduler, idle and busy polls).
    pub polls: u64,
    /// Poll calls that found nothing.
    pub empty_polls: u64,
    /// Adaptive-mode task runs.
    pub tasks: u64,
    /// Frames received from the device.
    pub rx_packets: u64,
    /// Frames handed to this device for transmission (accepted by its `send`).
    pub tx_packets: u64,
    /// Of those, frames the device dropped afterwards, by reason.
    pub tx_drops: TxDrops,
    /// Frames received here and transmitted on another interface.
    pub forwarded: u64,
    /// Frames received here for the box itself.
    pub local: u64,
    /// Frames received here and used up by polld (ARP).
    pub consumed: u64,
    /// Frames polld generated and sent here (ARP, ICMP).
    pub generated: u64,
    /// Generated frames that found the transmit ring full.
    pub generated_dropped: u64,
    /// Frames received here now waiting in the IP input queue.
    pub queued: u64,
    /// Drops of frames received here, by reason (rx_ring_full, fault_injected: dropped by
    /// the device before it handed them up).
    pub drops: DropCounters,
}

impl IfCounters {
    /// Frames received but not in any outcome counter: zero unless a frame was lost.
    pub fn unaccounted(&self) -> i64 {
        self.rx_packets as i64
            - (self.forwarded + self.local + self.consumed + self.queued) as i64
            - self.drops.after_rx() as i64
    }
}

/// One interface: its device, mode and counters.
pub struct Interface<D> {
    pub dev: D,
    mode: Mode,
    pub counters: IfCounters,
    /// Adaptive mode: the task is queued (the interrupt is masked meanwhile).
    task_queued: bool,
    /// Interrupt mode: the handler is running (it returns once the ring is empty).
    in_handler: bool,
    /// `dev.<if>.rx_process_limit`: frames per adaptive task run, -1 = unlimited.
    rx_process_limit: i64,
    /// Device drops already folded into `counters`.
    hw_seen: HwStats,
}

impl<D: Device> Interface<D> {
    pub fn mode(&self) -> Mode {
        self.mode
    }
    pub fn task_queued(&self) -> bool {
        self.task_queued
    }
    pub fn rx_process_limit(&self) -> i64 {
        self.rx_process_limit
    }
}

/// A frame waiting in the IP input queue.
struct Queued {
    input: usize,
    frame: Vec<u8>,
}

/// Whose frame a staged frame is, which decides the counter it ends in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// Made up by the stage (ARP, ICMP): `generated` on the output.
    Generated,
    /// A frame received on `input`, forwarded or handed to the host; `more` when later
    /// staged frames belong to the same datagram (its fragments), which counts once.
    Received { input: usize, more: bool },
    /// A part of a forwarded datagram whose verdict has not been applied yet; parts the
    /// verdict did not claim (the output went down) are never sent.
    Part,
}

/// A frame staged for transmission: the output, who to charge, and where its bytes are.
struct Staged {
    out: usize,
    origin: Origin,
    start: usize,
    len: usize,
}

/// Frames to transmit after a receive batch, stored back to back in one buffer.
#[derive(Default)]
struct TxStaging {
    bytes: Vec<u8>,
    frames: Vec<Staged>,
    /// Where the parts of the datagram being forwarded start in `frames`.
    parts_from: Option<usize>,
}

impl TxStaging {
    fn push(&mut self, out: usize, origin: Origin, frame: &[u8]) {
        self.frames.push(Staged {
            out,
            origin,
            start: self.bytes.len(),
            len: frame.len(),
        });
        self.bytes.extend_from_slice(frame);
    }

    /// Gives the parts staged since the last verdict to the datagram received on `input`
    /// (`Some`), or leaves them unsent (`None`); returns how many there were.
    fn settle_parts(&mut self, input: Option<usize>) -> usize {
        let Some(from) = self.parts_from.take() else {
            return 0;
        };
        let mut parts = self.frames[from..]
            .iter_mut()
            .filter(|s| s.origin == Origin::Part)
            .peekable();
        let mut n = 0;
        while let Some(s) = parts.next() {
            n += 1;
            if let Some(input) = input {
                let more = parts.peek().is_some();
                s.origin = Origin::Received { input, more };
            }
        }
        n
    }
}

impl Emit for TxStaging {
    fn emit(&mut self, out: usize, frame: &[u8]) {
        self.push(out, Origin::Generated, frame);
    }

    fn forward_part(&mut self, out: usize, frame: &[u8]) {
        self.parts_from.get_or_insert(self.frames.len());
        self.push(out, Origin::Part, frame);
    }
}

/// Something that happened to an interface, for the executor's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The interface went down or came back up.
    Link { ifname: String, state: LinkState },
    /// The interface disappeared; its polling handler was deregistered.
    Gone { ifname: String },
}

/// Everything but the scheduler: the scheduler calls into this as its handlers.
struct Devices<D, S> {
    ifs: Vec<Interface<D>>,
    links: Vec<LinkState>,
    stage: S,
    fastforwarding: bool,
    queue: VecDeque<Queued>,
    queue_maxlen: usize,
    spare: Vec<Vec<u8>>,
    tx: TxStaging,
    /// Per interface: got frames in the current transmit batch (needs a flush).
    touched: Vec<bool>,
    /// Per interface: frames it received found their output full since the scheduler
    /// last asked (transmit backpressure).
    output_full: Vec<bool>,
    /// Where frames for the box go; `None` leaves them to the kernel.
    host: Option<usize>,
    work: Work,
    events: Vec<Event>,
    gone: Vec<usize>,
}

impl<D: Device, S: PacketStage> Devices<D, S> {
    /// Receives up to `budget` frames from interface `i`; processes them now (to
    /// completion) or queues them, per `fastforwarding`.
    fn receive(&mut self, i: usize, budget: usize) -> u64 {
        let Devices {
            ifs,
            links,
            stage,
            fastforwarding,
            queue,
            queue_maxlen,
            spare,
            tx,
            host,
            ..
        } = self;
        let Interface { dev, counters, .. } = &mut ifs[i];
        let mut process = |frame: &mut [u8]| {
            counters.rx_packets += 1;
            if *fastforwarding {
                let verdict = stage.process(i, frame, tx);
                apply(verdict, i, frame, counters, links, *host, tx);
            } else if queue.len() >= *queue_maxlen {
                counters.drops.add(DropReason::IntrQueueFull, 1);
            } else {
                let mut buf = spare.pop().unwrap_or_default();
                buf.clear();
                buf.extend_from_slice(frame);
                queue.push_back(Queued {
                    input: i,
                    frame: buf,
                });
                counters.queued += 1;
            }
        };
        let n = dev.receive(budget, &mut process) as u64;
        self.work.rx += n;
        if !self.fastforwarding {
            self.work.enqueued += n;
        }
        self.transmit();
        n
    }

    /// The least transmit room among the interfaces other than `i` whose link is up.
    fn tx_room_besides(&mut self, i: usize) -> usize {
        let mut room = usize::MAX;
        for (j, iface) in self.ifs.iter_mut().enumerate() {
            if j != i && self.links[j] == LinkState::Up {
                room = room.min(iface.dev.tx_room());
            }
        }
        room
    }

    /// Sends the staged frames and flushes every device that got some.
    fn transmit(&mut self) {
        if self.tx.frames.is_empty() {
            return;
        }
        // Whether every frame so far of the datagram being sent was taken.
        let mut datagram_sent = true;
        for s in &self.tx.frames {
            let (input, more) = match s.origin {
                Origin::Part => continue,
                Origin::Generated => (None, false),
                Origin::Received { input, more } => (Some(input), more),
            };
            let frame = &self.tx.bytes[s.start..s.start + s.len];
            let sent = self.ifs[s.out].dev.send(frame).is_ok();
            if sent {
                self.ifs[s.out].counters.tx_packets += 1;
            }
            match input {
                Some(_) if more => datagram_sent &= sent,
                Some(input) => {
                    // The datagram's last (or only) frame: it counts now, as a whole.
                    let whole = datagram_sent && sent;
                    datagram_sent = true;
                    let counters = &mut self.ifs[input].counters;
                    if !whole {
                        counters.drops.add(DropReason::TxRingFull, 1);
                        self.output_full[input] = true;
                    } else if self.host == Some(s.out) {
                        counters.local += 1;
                    } else {
                        counters.forwarded += 1;
                    }
                }
                None if sent => self.ifs[s.out].counters.generated += 1,
                None => self.ifs[s.out].counters.generated_dropped += 1,
            }
            self.touched[s.out] = true;
        }
        // Transmit drops the devices count are folded by `sync_hw_drops` (the executor's
        // status timer), not here: reading them may cost a system call per batch.
        for (iface, touched) in self.ifs.iter_mut().zip(self.touched.iter_mut()) {
            if std::mem::take(touched) {
                iface.dev.flush();
            }
        }
        self.tx.frames.clear();
        self.tx.bytes.clear();
    }

    /// Folds the drops devices counted on their own into the interface counters.
    fn fold_hw_drops(&mut self, i: usize) {
        let iface = &mut self.ifs[i];
        let now = iface.dev.hw_stats();
        let seen = &mut iface.hw_seen;
        let counters = &mut iface.counters;
        // A reopened device starts its totals again from zero.
        let new = |total: u64, seen: u64| total.saturating_sub(seen);
        counters.drops.add(
            DropReason::RxRingFull,
            new(now.rx_ring_full, seen.rx_ring_full),
        );
        counters
            .drops
            .add(DropReason::FaultInjected, new(now.rx_fault, seen.rx_fault));
        for r in TxDrop::ALL {
            counters
                .tx_drops
                .add(r, new(now.tx_drops.get(r), seen.tx_drops.get(r)));
        }
        *seen = now;
    }

    /// Processes up to `max` frames from the IP input queue (the netisr's protocol work).
    fn drain_queue(&mut self, max: usize) -> u64 {
        let mut n = 0;
        while n < max {
            let Some(mut q) = self.queue.pop_front() else {
                break;
            };
            let counters = &mut self.ifs[q.input].counters;
            counters.queued -= 1;
            let verdict = self.stage.process(q.input, &mut q.frame, &mut self.tx);
            apply(
                verdict,
                q.input,
                &q.frame,
                counters,
                &self.links,
                self.host,
                &mut self.tx,
            );
            self.spare.push(q.frame);
            n += 1;
        }
        self.transmit();
        n as u64
    }

    /// The status check: the link, and the drops the device counted itself (reading
    /// those can cost a system call, so it is done here, not per receive).
    fn check_status(&mut self, i: usize) {
        self.fold_hw_drops(i);
        let state = self.ifs[i].dev.check_status();
        if state == self.links[i] {
            return;
        }
        self.links[i] = state;
        let ifname = self.ifs[i].dev.name().to_string();
        if state == LinkState::Gone {
            self.gone.push(i);
            self.events.push(Event::Gone { ifname });
        } else {
            self.events.push(Event::Link { ifname, state });
        }
    }

    fn take_work(&mut self) -> Work {
        std::mem::take(&mut self.work)
    }
}

/// Counts a verdict; forwarded and local frames are staged for transmission and
/// counted once the output device took them.
fn apply(
    verdict: Verdict,
    input: usize,
    frame: &[u8],
    counters: &mut IfCounters,
    links: &[LinkState],
    host: Option<usize>,
    tx: &mut TxStaging,
) {
    let received = Origin::Received { input, more: false };
    let link_up = |out: usize| links.get(out) == Some(&LinkState::Up);
    let parts = match verdict {
        Verdict::ForwardEmitted { out } if link_up(out) => tx.settle_parts(Some(input)),
        _ => tx.settle_parts(None),
    };
    match verdict {
        Verdict::Forward { out } | Verdict::ForwardEmitted { out } if !link_up(out) => {
            counters.drops.add(DropReason::LinkDown, 1)
        }
        Verdict::Forward { out } => tx.push(out, received, frame),
        // Counted when the parts are sent; a datagram that became no frame at all was
        // used up by the stage.
        Verdict::ForwardEmitted { .. } if parts == 0 => counters.consumed += 1,
        Verdict::ForwardEmitted { .. } => {}
        Verdict::Local => match host {
            Some(h) => tx.push(h, received, frame),
            None => counters.local += 1,
        },
        Verdict::Consumed => counters.consumed += 1,
        Verdict::Drop(reason) => counters.drops.add(reason, 1),
    }
}

impl<D: Device, S: PacketStage> PollHandlers for Devices<D, S> {
    fn poll(&mut self, id: HandlerId, cmd: PollCmd, count: u32) -> u32 {
        if cmd == PollCmd::CheckStatus {
            self.check_status(id);
        }
        self.ifs[id].counters.polls += 1;
        if self.links[id] != LinkState::Up {
            return 0;
        }
        // Forwarding now, a poll takes no more frames than the fullest other interface can
        // send: what would not fit is better left in the input ring (where the kernel drops
        // it for free) than received and dropped at transmit. With two interfaces that is
        // exact; with more, a full output slows every input, as a shared buffer would.
        // (Only polls: an interrupt handler that left frames would be woken again at once.)
        let mut budget = count as usize;
        if self.fastforwarding {
            let room = self.tx_room_besides(id);
            if room < budget {
                // Backpressure, though nothing was dropped: the output set the limit.
                self.output_full[id] = true;
                budget = room;
            }
        }
        let n = if budget == 0 {
            0
        } else {
            self.receive(id, budget)
        };
        if n == 0 {
            self.ifs[id].counters.empty_polls += 1;
        }
        n as u32
    }

    fn take_output_full(&mut self, id: HandlerId) -> bool {
        std::mem::take(&mut self.output_full[id])
    }
}

/// A mode change or registration that could not be made; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeError {
    NoSuchInterface(String),
    Register { ifname: String, err: RegError },
}

impl fmt::Display for ModeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModeError::NoSuchInterface(name) => {
                write!(f, "no interface '{name}': list them with `polld ifconfig`")
            }
            ModeError::Register { ifname, err } => write!(f, "{ifname}: polling: {err}"),
        }
    }
}

impl std::error::Error for ModeError {}

/// Default `net.inet.ip.intr_queue_maxlen` (FreeBSD's `IFQ_MAXLEN`).
pub const INTR_QUEUE_MAXLEN: usize = 50;
/// Default `dev.<if>.rx_process_limit` (em(4)'s `hw.em.rx_process_limit`).
pub const RX_PROCESS_LIMIT: i64 = 100;
/// Frames a busy poll or an interrupt handler takes per receive call.
const BATCH: usize = 64;

/// The dataplane: interfaces, the packet stage, the input queue and the scheduler.
pub struct Dataplane<D, S> {
    poller: Poller,
    devs: Devices<D, S>,
}

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// A dataplane over `devices`, all in interrupt mode with interrupts armed.
    pub fn new(poller: Poller, devices: Vec<D>, stage: S) -> Dataplane<D, S> {
        let links = vec![LinkState::Up; devices.len()];
        let touched = vec![false; devices.len()];
        let output_full = vec![false; devices.len()];
        let ifs = devices
            .into_iter()
            .map(|mut dev| {
                dev.set_interrupt(true);
                Interface {
                    dev,
                    mode: Mode::Interrupt,
                    counters: IfCounters::default(),
                    task_queued: false,
                    in_handler: false,
                    rx_process_limit: RX_PROCESS_LIMIT,
                    hw_seen: HwStats::default(),
                }
            })
            .collect();
        Dataplane {
            poller,
            devs: Devices {
                ifs,
                links,
                stage,
                fastforwarding: true,
                queue: VecDeque::new(),
                queue_maxlen: INTR_QUEUE_MAXLEN,
                spare: Vec::new(),
                tx: TxStaging::default(),
                touched,
                output_full,
                host: None,
                work: Work::default(),
                events: Vec::new(),
                gone: Vec::new(),
            },
        }
    }

    pub fn poller(&self) -> &Poller {
        &self.poller
    }
    pub fn interfaces(&self) -> &[Interface<D>] {
        &self.devs.ifs
    }
    pub fn interface_mut(&mut self, i: usize) -> &mut Interface<D> {
        &mut self.devs.ifs[i]
    }
    pub fn stage(&self) -> &S {
        &self.devs.stage
    }
    pub fn stage_mut(&mut self) -> &mut S {
        &mut self.devs.stage
    }
    pub fn link(&self, i: usize) -> LinkState {
        self.devs.links[i]
    }
    pub fn fastforwarding(&self) -> bool {
        self.devs.fastforwarding
    }
    /// Frames waiting in the IP input queue.
    pub fn queue_len(&self) -> usize {
        self.devs.queue.len()
    }
    /// Sends frames for the box to interface `host` (a TAP) instead of leaving them to
    /// the kernel.
    pub fn set_host(&mut self, host: Option<usize>) {
        self.devs.host = host;
    }
    /// Link changes and disappearances since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.devs.events)
    }

    pub fn index_of(&self, ifname: &str) -> Option<usize> {
        self.devs.ifs.iter().position(|i| i.dev.name() == ifname)
    }

    /// Puts interface `i` in `mode`. Entering polling registers it (masking its
    /// interrupt only if registration succeeded); leaving polling deregisters it and
    /// unmasks the interrupt even if deregistration failed, as FreeBSD does. Frames the
    /// device already accepted stay in its ring and are picked up in the new mode.
    pub fn set_mode(&mut self, i: usize, mode: Mode) -> Result<(), ModeError> {
        let old = self.devs.ifs[i].mode;
        if old == mode {
            return Ok(());
        }
        if mode == Mode::Polling {
            self.poller.register(i).map_err(|err| ModeError::Register {
                ifname: self.devs.ifs[i].dev.name().to_string(),
                err,
            })?;
        } else if old == Mode::Polling {
            // "enable interrupts even in error case"
            let _ = self.poller.deregister(i);
        }
        // Drops from before polling are no news to the scheduler.
        self.devs.output_full[i] = false;
        let iface = &mut self.devs.ifs[i];
        iface.mode = mode;
        iface.task_queued = false;
        iface.in_handler = false;
        iface
            .dev
            .set_interrupt(matches!(mode, Mode::Interrupt | Mode::Adaptive));
        Ok(())
    }

    /// `kern.polling.enable`: whether every interface polls (FreeBSD 6 reads its own
    /// flag; polld reads the modes, which `polld ifconfig` may have changed since).
    pub fn polling_enabled(&self) -> bool {
        !self.devs.ifs.is_empty() && self.devs.ifs.iter().all(|i| i.mode == Mode::Polling)
    }

    /// Writes `kern.polling.enable` as FreeBSD 6's compatibility handler does: 1 puts
    /// every interface into polling, 0 takes every polling interface out (to interrupt
    /// mode); other modes stay. Values other than 0 and 1 are refused. If an interface
    /// cannot register, the interfaces already switched go back and nothing changes.
    fn set_polling_enable(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let on = in_range(name, parse_int(name, value)?, 0, 1)? == 1;
        let before: Vec<Mode> = self.devs.ifs.iter().map(|i| i.mode).collect();
        for (i, &old) in before.iter().enumerate() {
            let new = match (on, old) {
                (true, _) => Mode::Polling,
                (false, Mode::Polling) => Mode::Interrupt,
                (false, other) => other,
            };
            if let Err(e) = self.set_mode(i, new) {
                for (j, &mode) in before.iter().enumerate().take(i) {
                    let _ = self.set_mode(j, mode);
                }
                return Err(KnobError::Invalid {
                    name: name.to_string(),
                    value: value.to_string(),
                    allowed: format!("0 or 1, and {e}"),
                });
            }
        }
        Ok(())
    }

    /// Whether interface `i`'s interrupt is armed: the executor waits on it only then.
    pub fn interrupt_armed(&self, i: usize) -> bool {
        let iface = &self.devs.ifs[i];
        match iface.mode {
            Mode::Interrupt => true,
            Mode::Adaptive => !iface.task_queued,
            Mode::Polling | Mode::Busy => false,
        }
    }

    /// Whether interface `i` polls but polling is quiet (every ring was empty for
    /// `kern.polling.quiet_cycles` cycles): the executor waits on its interrupt instead of
    /// the tick, and calls [`Dataplane::quiet_wakeup`] when it fires.
    pub fn wakeup_armed(&self, i: usize) -> bool {
        self.devs.ifs[i].mode == Mode::Polling
            && self.poller.state().quiet
            && self.poller.is_registered(i)
    }

    /// Polling interface `i` has work while polling is quiet: resumes polling with a tick
    /// now. The wakeup is counted in `kern.polling.quiet_wakeups`, not as an interrupt of
    /// the interface: its mode stays polling. Returns whether a cycle was scheduled.
    pub fn quiet_wakeup(&mut self, i: usize, now: u64) -> bool {
        if !self.wakeup_armed(i) {
            return false;
        }
        self.poller.wake(now)
    }

    /// Interface `i` raised an interrupt.
    pub fn interrupt(&mut self, i: usize) -> Work {
        if !self.interrupt_armed(i) {
            // A masked device's spurious wakeup (a shared line): ignored, as FreeBSD does.
            return Work::default();
        }
        let d = &mut self.devs;
        d.ifs[i].counters.interrupts += 1;
        match d.ifs[i].mode {
            Mode::Adaptive => {
                // Mask the device and hand the work to the task.
                d.ifs[i].task_queued = true;
                d.ifs[i].dev.set_interrupt(false);
            }
            _ => {
                d.ifs[i].in_handler = true;
                return self.continue_handler(i);
            }
        }
        d.take_work()
    }

    /// The interface whose interrupt handler is still running, if any. A handler runs to
    /// completion: the executor calls [`Dataplane::continue_handler`] at interrupt
    /// priority until it returns, one batch at a time so that virtual and real time both
    /// advance (and a clock tick can still preempt it).
    pub fn handler_running(&self) -> Option<usize> {
        self.devs.ifs.iter().position(|f| f.in_handler)
    }

    /// One more batch of a running interrupt handler; it returns when the ring is empty.
    pub fn continue_handler(&mut self, i: usize) -> Work {
        let d = &mut self.devs;
        if d.ifs[i].in_handler && d.links[i] == LinkState::Up {
            d.receive(i, BATCH);
        }
        let iface = &mut d.ifs[i];
        if d.links[i] != LinkState::Up || !iface.dev.rx_ready() {
            iface.in_handler = false;
        }
        d.take_work()
    }

    /// Interfaces whose adaptive task is queued.
    pub fn tasks_queued(&self) -> impl Iterator<Item = usize> + '_ {
        self.devs
            .ifs
            .iter()
            .enumerate()
            .filter(|(_, f)| f.task_queued)
            .map(|(i, _)| i)
    }

    /// Runs interface `i`'s adaptive task once: at most `rx_process_limit` frames, in
    /// one receive call so the ring's consumer index is published once. Requeues itself
    /// while frames remain; re-arms the interrupt only when the ring is drained.
    pub fn run_task(&mut self, i: usize) -> Work {
        let d = &mut self.devs;
        if !d.ifs[i].task_queued {
            return Work::default();
        }
        d.ifs[i].counters.tasks += 1;
        let limit = d.ifs[i].rx_process_limit;
        let budget = if limit < 0 {
            usize::MAX
        } else {
            limit as usize
        };
        if d.links[i] == LinkState::Up {
            d.receive(i, budget);
        }
        let iface = &mut d.ifs[i];
        if !iface.dev.rx_ready() || d.links[i] != LinkState::Up {
            iface.task_queued = false;
            iface.dev.set_interrupt(true);
        }
        d.take_work()
    }

    /// One busy-poll pass over interface `i` (busy mode): never sleeps.
    pub fn busy_poll(&mut self, i: usize) -> Work {
        self.devs.poll(i, PollCmd::PollOnly, BATCH as u32);
        self.devs.take_work()
    }

    /// Whether the IP input queue has frames (the netisr's protocol work).
    pub fn queue_pending(&self) -> bool {
        !self.devs.queue.is_empty()
    }

    /// Drains up to `max` frames of the IP input queue.
    pub fn drain_queue(&mut self, max: usize) -> Work {
        self.devs.drain_queue(max);
        self.devs.take_work()
    }

    /// The clock tick (see [`Poller::hardclock`]).
    pub fn hardclock(&mut self, now: u64, expirations: u32) -> bool {
        self.poller.hardclock(now, expirations)
    }

    /// Whether the scheduler has a chunk or pollmore armed.
    pub fn netisr_scheduled(&self) -> bool {
        self.poller.netisr_scheduled()
    }

    /// Brings every interface's device-counted drops (rx ring full, transmit drops) into
    /// its counters; status checks fold their own interface's as they go, this catches
    /// the outputs and brings everything up to date now.
    pub fn sync_hw_drops(&mut self) {
        for i in 0..self.devs.ifs.len() {
            self.devs.fold_hw_drops(i);
        }
    }

    /// Whether a chunk of a poll cycle is armed.
    pub fn poll_armed(&self) -> bool {
        self.poller.poll_armed()
    }

    /// One chunk of a poll cycle over every registered interface.
    pub fn netisr_poll(&mut self, now: u64) -> Work {
        self.poller.netisr_poll(now, &mut self.devs);
        self.deregister_gone();
        self.devs.take_work()
    }

    /// The end of a chunk: schedules the next chunk or closes the cycle.
    pub fn netisr_pollmore(&mut self, now: u64) -> bool {
        self.poller.netisr_pollmore(now)
    }

    /// When to poll again before the next tick, once, after a cycle cut short by a full
    /// output ([`Poller::take_repoll`]).
    pub fn take_repoll(&mut self) -> Option<u64> {
        self.poller.take_repoll()
    }

    /// One idle-poll pass (unaccounted).
    pub fn idle_poll(&mut self) -> Work {
        self.poller.idle_poll(&mut self.devs);
        self.deregister_gone();
        self.devs.take_work()
    }

    /// Checks the status of interface `i` outside the poll cycle (interfaces that are
    /// not polling get their status checked by the executor every `reg_frac` ticks).
    pub fn check_status(&mut self, i: usize) {
        let was_gone = self.devs.links[i] == LinkState::Gone;
        self.devs.check_status(i);
        self.deregister_gone();
        if was_gone && self.devs.links[i] != LinkState::Gone {
            self.revive(i);
        }
    }

    /// An interface that was gone is back (the device reopened it, or the executor
    /// replaced it): a polling interface registers again, the others re-arm.
    fn revive(&mut self, i: usize) {
        let mode = self.devs.ifs[i].mode;
        if mode == Mode::Polling && self.poller.register(i).is_err() {
            // The table is full now: fall back to interrupts rather than go deaf.
            self.devs.ifs[i].mode = Mode::Interrupt;
        }
        let iface = &mut self.devs.ifs[i];
        iface.task_queued = false;
        iface.in_handler = false;
        iface
            .dev
            .set_interrupt(matches!(iface.mode, Mode::Interrupt | Mode::Adaptive));
    }

    fn deregister_gone(&mut self) {
        for i in std::mem::take(&mut self.devs.gone) {
            let _ = self.poller.deregister(i);
        }
    }

    /// Reads a sysctl: `kern.polling.*`, `net.inet.ip.*` or `dev.<if>.*`.
    pub fn sysctl_get(&self, name: &str) -> Option<String> {
        self.sysctl_entries(name)
            .into_iter()
            .find(|e| e.name == name)
            .map(|e| e.value)
    }

    /// Every entry under `prefix` (a whole name, a subtree like `kern.polling`, or `""`).
    pub fn sysctl_entries(&self, prefix: &str) -> Vec<SysctlEntry> {
        let entry = |name: &str, value: String, descr: &str, writable: bool| SysctlEntry {
            name: name.to_string(),
            value,
            descr: descr.to_string(),
            writable,
        };
        // First, where FreeBSD listed it.
        let mut all = vec![entry(
            ENABLE,
            (self.polling_enabled() as u8).to_string(),
            "Polling on every interface: 1 polls all, 0 takes all out (FreeBSD 6 compatibility; per interface: polld ifconfig IF polling)",
            true,
        )];
        all.extend(self.poller.entries());
        all.push(entry(
            "net.inet.ip.fastforwarding",
            (self.devs.fastforwarding as u8).to_string(),
            "Process frames in the receive handler instead of the input queue",
            true,
        ));
        all.push(entry(
            "net.inet.ip.intr_queue_maxlen",
            self.devs.queue_maxlen.to_string(),
            "Maximum size of the IP input queue",
            true,
        ));
        all.push(entry(
            "net.inet.ip.intr_queue_len",
            self.devs.queue.len().to_string(),
            "Frames in the IP input queue",
            false,
        ));
        for (name, value, descr) in self.devs.stage.sysctl_counters() {
            let name = format!("net.inet.ip.{name}");
            all.push(entry(&name, value.to_string(), descr, false));
        }
        for (iface, link) in self.devs.ifs.iter().zip(&self.devs.links) {
            let c = &iface.counters;
            let p = format!("dev.{}.", iface.dev.name());
            let n = |s: &str| format!("{p}{s}");
            all.push(entry(
                &n("mode"),
                iface.mode.name().into(),
                "interrupt|polling|adaptive|busy",
                true,
            ));
            all.push(entry(
                &n("rx_process_limit"),
                iface.rx_process_limit.to_string(),
                "Adaptive mode: frames per task run, -1 unlimited",
                true,
            ));
            all.push(entry(&n("link"), link.name().into(), "Link state", false));
            for (k, v, d) in [
                ("interrupts", c.interrupts, "Interrupts (wakeups) taken"),
                ("polls", c.polls, "Poll handler calls"),
                (
                    "empty_polls",
                    c.empty_polls,
                    "Poll calls that found nothing",
                ),
                ("tasks", c.tasks, "Adaptive task runs"),
                ("rx_packets", c.rx_packets, "Frames received"),
                ("tx_packets", c.tx_packets, "Frames transmitted"),
                (
                    "forwarded",
                    c.forwarded,
                    "Frames received here and forwarded",
                ),
                ("local", c.local, "Frames received here for the box"),
                ("consumed", c.consumed, "Frames used up by polld (ARP)"),
                (
                    "generated",
                    c.generated,
                    "Frames polld generated here (ARP, ICMP)",
                ),
                (
                    "generated_dropped",
                    c.generated_dropped,
                    "Generated frames dropped, tx ring full",
                ),
                (
                    "queued",
                    c.queued,
                    "Frames received here waiting in the input queue",
                ),
            ] {
                all.push(entry(&n(k), v.to_string(), d, false));
            }
            for r in DropReason::all(self.devs.stage.drop_reasons()) {
                all.push(entry(
                    &n(&format!("drops.{}", r.name())),
                    c.drops.get(r).to_string(),
                    "Frames dropped, by reason",
                    false,
                ));
            }
            for r in TxDrop::ALL {
                all.push(entry(
                    &n(&format!("tx_drops.{}", r.name())),
                    c.tx_drops.get(r).to_string(),
                    "Frames the device accepted for transmission and then dropped, by reason",
                    false,
                ));
            }
        }
        let dotted = format!("{prefix}.");
        all.retain(|e| prefix.is_empty() || e.name == prefix || e.name.starts_with(&dotted));
        all
    }

    /// Writes a sysctl with validation; a rejected write changes nothing.
    pub fn sysctl_set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        if name == ENABLE {
            return self.set_polling_enable(name, value);
        }
        if name.starts_with("kern.polling.") {
            return self.poller.set_knob(name, value);
        }
        match name {
            "net.inet.ip.fastforwarding" => {
                self.devs.fastforwarding = in_range(name, parse_int(name, value)?, 0, 1)? == 1;
                return Ok(());
            }
            "net.inet.ip.intr_queue_maxlen" => {
                self.devs.queue_maxlen =
                    in_range(name, parse_int(name, value)?, 1, 65_536)? as usize;
                return Ok(());
            }
            _ => {}
        }
        if let Some(rest) = name.strip_prefix("dev.") {
            if let Some((ifname, leaf)) = rest.rsplit_once('.') {
                if let Some(i) = self.index_of(ifname) {
                    return self.set_interface_knob(i, name, leaf, value);
                }
            }
        }
        if self.sysctl_get(name).is_some() {
            return Err(KnobError::ReadOnly {
                name: name.to_string(),
            });
        }
        Err(KnobError::Unknown {
            name: name.to_string(),
        })
    }

    fn set_interface_knob(
        &mut self,
        i: usize,
        name: &str,
        leaf: &str,
        value: &str,
    ) -> Result<(), KnobError> {
        match leaf {
            "mode" => {
                let mode: Mode = value.parse().map_err(|_| KnobError::NotANumber {
                    name: name.to_string(),
                    value: value.to_string(),
                    expected: "interrupt, polling, adaptive or busy".to_string(),
                })?;
                self.set_mode(i, mode).map_err(|e| KnobError::Invalid {
                    name: name.to_string(),
                    value: value.to_string(),
                    allowed: e.to_string(),
                })
            }
            "rx_process_limit" => {
                let v = parse_int(name, value)?;
                if v == 0 || v < -1 {
                    return Err(KnobError::Invalid {
                        name: name.to_string(),
                        value: value.to_string(),
                        allowed: "-1 (unlimited) or 1 and above".to_string(),
                    });
                }
                self.devs.ifs[i].rx_process_limit = v;
                Ok(())
            }
            _ if self.sysctl_get(name).is_some() => Err(KnobError::ReadOnly {
                name: name.to_string(),
            }),
            _ => Err(KnobError::Unknown {
                name: name.to_string(),
            }),
        }
    }
}
