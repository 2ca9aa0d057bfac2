//! polld-core: the device-polling scheduler and the interface modes, with no I/O.
//!
//! The scheduler ([`poll`]) is a port of FreeBSD's `sys/kern/kern_poll.c` (Luigi Rizzo,
//! 2002): at every clock tick it polls the registered devices with a bounded budget and
//! adapts that budget so that device work takes at most `100 - user_frac` percent of the
//! CPU. Everything here takes its clock and its devices as parameters, so every
//! control-loop behaviour is driven exactly on virtual time (see `polld-sim`) as well as by
//! the real poller thread.
//!
//! - [`poll`]: the tick hook, poll cycles, burst control, registration, idle polling, and
//!   one handler per knob write with all its consequences;
//! - [`ifpoll`]: DragonFly's per-CPU polling: which CPU polls which interface, `net.ifpoll.N.*`;
//! - [`knobs`]: the `kern.polling.*` knobs, each declared once;
//! - [`sysctl`]: the declaration of a sysctl entry (name, kind, default, validation) that
//!   listing, writing, the control socket's snapshot, metrics and `--save` all read, and
//!   why a write is refused ([`KnobError`]);
//! - [`device`]: the [`Device`] trait every backend implements;
//! - [`rng`]: a seeded generator for simulated arrivals and fault injection;
//! - [`stage`]: what happens to a received frame ([`PacketStage`], [`Verdict`], drop reasons).

#![forbid(unsafe_code)]

pub mod dataplane;
pub mod device;
pub mod ifpoll;
pub mod knobs;
pub mod poll;
pub mod rng;
pub mod stage;
pub mod sysctl;

pub use dataplane::{
    Clocks, Dataplane, Due, Event, Executor, Frozen, IfCounters, Interface, Mode, ModeError, Step,
    Work,
};
pub use device::{
    Capabilities, Device, HwStats, Lending, LinkState, Loan, PoolId, TxDrop, TxDrops, TxFull,
    TxReadyLine, Wrapper,
};
pub use knobs::{Controller, KnobError, Knobs, Profile};
pub use poll::{
    HandlerId, Netisr, PollCmd, PollHandlers, PollState, Poller, RegError, SysctlEntry,
};
pub use stage::{DropCounters, DropReason, Emit, PacketStage, StageDrop, Verdict};
pub use sysctl::{Kind, Reading, Value};
