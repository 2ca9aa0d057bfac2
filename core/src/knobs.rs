//! The `kern.polling.*` knobs: FreeBSD's names, defaults, ranges and validation.
//!
//! Validation happens here, at the boundary, as in the sysctl handlers of `kern_poll.c`: a
//! write FreeBSD would reject with EINVAL is rejected with a [`KnobError`] that names the
//! knob, the value and the allowed range, and changes nothing. A write goes through
//! [`crate::Poller::set_knob`], whose handler for the knob applies every consequence of
//! it ([`crate::poll::knob_write`]).
//!
//! # Defaults and profiles
//!
//! [`Knobs::default`] is what `polld run` polls with when the config sets nothing: settings
//! that keep the promise (a CPU-bound competitor on the poll CPU keeps `user_frac`) and do
//! not cap forwarding below what the poll CPU can do. Four differ from FreeBSD's, each declaration says
//! why: `controller` (`time`), `burst_max` (20000), `each_burst` (50) and `looks` (1).
//! `cargo bench -p polld --bench defaults` measures them on the TAP testbed.
//!
//! FreeBSD's own values are one line away: [`Profile::FreeBsd`], `profile = "freebsd"` in
//! the config's `[knobs]`, gives `kern_poll.c`'s defaults ([`Knobs::freebsd`]); knob writes
//! (the config's other `[knobs]` lines, `polld ctl`) apply over the profile.

pub use crate::sysctl::{in_range, parse_int, within, KnobError};
use crate::sysctl::{Value, Write};
use crate::{sysctl_oids, sysctl_struct};

/// The node the scheduler's knobs and other entries hang under.
pub const NODE: &str = "kern.polling";

/// `burst_max` bounds (FreeBSD's `MIN_POLL_BURST_MAX`, and `MAX_POLL_BURST_MAX` of the
/// later trees, which raised it from 1000 to 20000).
pub const MIN_POLL_BURST_MAX: u32 = 10;
pub const MAX_POLL_BURST_MAX: u32 = 20_000;
/// Range of `kern.polling.hz`, polld's own knob for the tick rate (FreeBSD used `HZ`).
pub const MIN_HZ: u32 = 100;
pub const MAX_HZ: u32 = 20_000;

/// Default `kern.polling.quiet_cycles`: 100 empty cycles, 100 ms at hz=1000; after that
/// an idle box takes no timer wakeups (what one costs: docs/algorithm.md §10).
pub const DEFAULT_QUIET_CYCLES: u32 = 100;
/// Upper bound of `kern.polling.quiet_cycles`.
pub const MAX_QUIET_CYCLES: u32 = 1_000_000;

/// Default `kern.polling.looks`: one look at the devices half-way between two ticks while
/// traffic is light, so a frame waits at most half a tick there (docs/algorithm.md §3).
pub const DEFAULT_LOOKS: u32 = 1;
/// Upper bound of `kern.polling.looks`.
pub const MAX_LOOKS: u32 = 9;

/// Default `kern.polling.idle_wakeups`: one interrupt wakeup of the idle poller between two
/// ticks (frames arriving mid-tick are served once, not per batch the kernel hands over).
pub const DEFAULT_IDLE_WAKEUPS: u32 = 1;
/// Upper bound of `kern.polling.idle_wakeups`.
pub const MAX_IDLE_WAKEUPS: u32 = 1_000_000;

/// Default `kern.polling.auto_empty_polls`: an `auto` interface goes back to interrupts after
/// 20 empty polls in a row (20 ms at hz=1000), well before polling would go quiet.
pub const DEFAULT_AUTO_EMPTY_POLLS: u32 = 20;

/// Default `kern.polling.auto_window_ticks`: `auto` judges overload over 4 ticks (4 ms at
/// hz=1000), so that a single late batch of frames, which can fill a window of one tick,
/// does not switch an interface to polling (docs/algorithm.md §10).
pub const DEFAULT_AUTO_WINDOW_TICKS: u32 = 4;

/// Default `kern.polling.wakeup_watchdog_ms`: a frame whose wakeup was lost waits at most
/// 100 ms, for at most 10 timer wakeups a second on a box that waits for wakeups.
pub const DEFAULT_WAKEUP_WATCHDOG_MS: u32 = 100;
/// Upper bound of `kern.polling.wakeup_watchdog_ms`: a minute.
pub const MAX_WAKEUP_WATCHDOG_MS: u32 = 60_000;

/// FreeBSD's `burst_max` default (`kern_poll.c`), sized for 100 Mbit cards: at hz 1000 it
/// caps an interface at 150 kpps.
pub const FREEBSD_BURST_MAX: u32 = 150;
/// FreeBSD's `each_burst` default (`kern_poll.c`).
pub const FREEBSD_EACH_BURST: u32 = 5;

/// Which control loop adapts the per-tick budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// FreeBSD's: `burst` ±1 per cycle against `100 - user_frac`.
    Classic,
    /// A time budget per tick with a moving average of the cost per packet.
    #[default]
    Time,
}

impl Controller {
    pub fn name(self) -> &'static str {
        match self {
            Controller::Classic => "classic",
            Controller::Time => "time",
        }
    }
}

impl From<Controller> for Value {
    fn from(c: Controller) -> Value {
        Value::from(c.name())
    }
}

sysctl_struct! {
    /// The writable `kern.polling.*` knobs of the scheduler, each declared once: its
    /// field, default, oid, description and validation (listing order: `polld ctl -a`,
    /// and the order `polld ctl --save` applies them in).
    #[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
    pub struct Knobs {
        /// `kern.polling.hz`: ticks per second. 1000, FreeBSD's advice for polling (HZ of
        /// at least 1000): a frame waits at most a tick, 1 ms.
        hz: u32 = 1000, HZ: Knob "Poll ticks per second (polld's stand-in for HZ)",
            Write::Proc {
                handler: set_hz,
                allowed: |_| format!("{MIN_HZ} to {MAX_HZ}, at least reg_frac and auto_window_ticks"),
            };
        /// `kern.polling.controller`: `classic` or `time`. Default `time` (FreeBSD:
        /// `classic`): classic moves `burst` by one packet a cycle, so with a ceiling that
        /// does not cap, a flood takes a tick per packet of burst to reach its share (20000
        /// ticks to reach burst_max), and then swings around it; the time budget sizes
        /// each chunk to the time left in the tick at the measured cost per packet, so the
        /// share is reached within a few ticks at any rate.
        controller: Controller = Controller::Time, CONTROLLER: Knob
            "Burst controller: classic (FreeBSD +-1 per tick) or time (time budget)",
            Write::Word {
                words: &["classic", "time"],
                store: |k, i| k.controller = [Controller::Classic, Controller::Time][i],
            };
        /// `kern.polling.user_frac`: percent of each tick reserved for non-polling work.
        /// FreeBSD's 50: half the CPU for the devices under a flood, half for the rest.
        /// kern_poll.c: `if (val > 99) return (EINVAL)`; negative values cannot be written
        /// to its unsigned variable either.
        user_frac: u32 = 50, USER_FRAC: Knob "Desired user fraction of cpu time",
            Write::Int { range: |_| (0, 99), store: |k, v| k.user_frac = v as u32 };
        /// `kern.polling.burst_max`: ceiling of `burst`, packets per interface a tick.
        /// Default the highest FreeBSD allows, [`MAX_POLL_BURST_MAX`] (FreeBSD's default:
        /// [`FREEBSD_BURST_MAX`]): FreeBSD's caps polling at `hz * burst_max`, 150 kpps,
        /// below what one CPU forwards on the TAP testbed, so that under a flood the cap,
        /// not `user_frac`, sets both the rate and the CPU left to other work
        /// (docs/algorithm.md §10 has the run). At 20000 (20 Mpps at hz 1000) what limits
        /// polling is `user_frac`.
        burst_max: u32 = MAX_POLL_BURST_MAX, BURST_MAX: Knob "Max Polling burst size",
            Write::Int {
                range: |_| (MIN_POLL_BURST_MAX.into(), MAX_POLL_BURST_MAX.into()),
                // Its consequences (FreeBSD's each_burst quirk, the burst clamp):
                // `Poller::set_knob`.
                store: |k, v| k.burst_max = v as u32,
            };
        /// `kern.polling.each_burst`: packets per handler call. Default 50 (FreeBSD's:
        /// [`FREEBSD_EACH_BURST`]; DragonFly's later ifpoll moved to 50 as well): the
        /// handler call and the stage's pass between chunks are paid per chunk, ten times
        /// as often with chunks of 5; the time controller sizes each chunk (at most
        /// `each_burst`) to the time left in the tick, so bigger chunks do not overrun it.
        each_burst: u32 = 50, EACH_BURST: Knob "Max size of each burst",
            Write::Int { range: |k| (1, k.burst_max.into()), store: |k, v| k.each_burst = v as u32 };
        /// `kern.polling.reg_frac`: status check every `reg_frac` cycles (FreeBSD's 20).
        reg_frac: u32 = 20, REG_FRAC: Knob "Every this many cycles check registers",
            Write::Int { range: |k| (1, k.hz.into()), store: |k, v| k.reg_frac = v as u32 };
        /// `kern.polling.looks`: at light load, polls between two ticks. After a cycle
        /// that found every ring empty before its budget ran out, while the devices moved
        /// frames within the last tick (at most `looks` cycles in a row found none since
        /// one did), and left the tick's `100 - user_frac` share room for one more like
        /// it, the poller looks again at the next of `looks` points evenly spaced between
        /// two ticks (a timer, no device interrupt). So a frame waits at most
        /// `1/((looks + 1) * hz)` while traffic is light, where it waited a tick. Under a
        /// flood the budget runs out first, and a device idle for a tick moves no frames:
        /// neither looks. 0: FreeBSD's, polls at the ticks only.
        looks: u32 = DEFAULT_LOOKS, LOOKS: Knob
            "Polls between two ticks while the rings empty before the budget, 0 none (polld)",
            Write::Int {
                range: |_| (0, MAX_LOOKS.into()),
                store: |k, v| k.looks = v as u32,
            };
        /// `kern.polling.idle_poll`: poll in the idle loop when non-zero (FreeBSD's 0: it
        /// is unaccounted, and keeps an idle CPU busy).
        idle_poll: i64 = 0, IDLE_POLL: Knob "Enable device polling in idle loop",
            Write::Int { range: |_| (i64::MIN, i64::MAX), store: |k, v| k.idle_poll = v };
        /// `kern.polling.idle_wakeups`: how many times between two ticks a device's
        /// interrupt may wake the idle poller resting on empty rings; once they are spent
        /// it rests until the next tick. 0: no limit.
        idle_wakeups: u32 = DEFAULT_IDLE_WAKEUPS, IDLE_WAKEUPS: Knob
            "Idle poller: interrupt wakeups between two ticks, 0 no limit (polld)",
            Write::Int {
                range: |_| (0, MAX_IDLE_WAKEUPS.into()),
                store: |k, v| k.idle_wakeups = v as u32,
            };
        /// `kern.polling.quiet_cycles`: after this many cycles in a row that found every
        /// ring empty, polling stops the tick and sleeps on the devices' interrupts until
        /// one has work; 0 ticks forever, as FreeBSD.
        quiet_cycles: u32 = DEFAULT_QUIET_CYCLES, QUIET_CYCLES: Knob
            "Empty cycles after which polling sleeps on the interrupts, 0 never (polld)",
            Write::Int {
                range: |_| (0, MAX_QUIET_CYCLES.into()),
                store: |k, v| k.quiet_cycles = v as u32,
            };
        /// `kern.polling.auto_empty_polls`: an interface in `auto` mode that polls goes
        /// back to interrupts after this many polls in a row found its ring empty.
        auto_empty_polls: u32 = DEFAULT_AUTO_EMPTY_POLLS, AUTO_EMPTY_POLLS: Knob
            "Auto mode: empty polls in a row after which an interface goes back to interrupts (polld)",
            Write::Int {
                range: |_| (1, MAX_QUIET_CYCLES.into()),
                store: |k, v| k.auto_empty_polls = v as u32,
            };
        /// `kern.polling.auto_window_ticks`: an interface in `auto` mode on interrupts
        /// switches to polling when its interrupt work took over `100 - user_frac` percent
        /// of a window this many ticks long.
        auto_window_ticks: u32 = DEFAULT_AUTO_WINDOW_TICKS, AUTO_WINDOW_TICKS: Knob
            "Auto mode: ticks over which interrupt work is measured against 100 - user_frac (polld)",
            Write::Int {
                range: |k| (1, k.hz.into()),
                store: |k, v| k.auto_window_ticks = v as u32,
            };
        /// `kern.polling.wakeup_watchdog_ms`: in every mode that waits for a device's
        /// wakeup (interrupt, adaptive, auto while on interrupts), the poll thread looks at
        /// those devices' rings every this many ms on a one-shot timer of its own, and
        /// serves frames it finds there as the mode serves a wakeup (counted in
        /// `dev.<if>.watchdog_frames`): a frame whose wakeup the device failed to raise
        /// waits at most this long instead of until the next wakeup. What it costs an idle
        /// box: one timer wakeup a period, [`DEFAULT_WAKEUP_WATCHDOG_MS`] ms: 10 a second,
        /// and none while every interface polls (polling looks at the rings itself, and a
        /// quiet poller keeps its near-zero idle wakeups). FreeBSD's drivers kept such a
        /// timer (em(4)'s `em_local_timer`, a watchdog once a second), so the `freebsd`
        /// profile keeps it on too. 0: off, a lost wakeup strands its frames until the
        /// device raises the next. A write re-arms it with the new period from the next
        /// decision (`core/src/dataplane/watchdog.rs`).
        wakeup_watchdog_ms: u32 = DEFAULT_WAKEUP_WATCHDOG_MS, WAKEUP_WATCHDOG_MS: Knob
            "Look at the rings of devices that wait for a wakeup every this many ms, 0 never (polld)",
            Write::Int {
                range: |_| (0, MAX_WAKEUP_WATCHDOG_MS.into()),
                store: |k, v| k.wakeup_watchdog_ms = v as u32,
            };
    }
}

/// The key of the config's `[knobs]` that names the [`Profile`] the other keys apply over.
pub const PROFILE_KEY: &str = "profile";

/// A named set of defaults for the knobs, chosen with `profile = "NAME"` in the config's
/// `[knobs]`; the other knob writes apply over it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Profile {
    /// polld's defaults, [`Knobs::default`]: they keep the promise and do not cap.
    #[default]
    Polld,
    /// FreeBSD's `kern_poll.c` defaults, [`Knobs::freebsd`]: to compare with FreeBSD, or
    /// to reproduce its figures (the 150 kpps per-interface ceiling included).
    FreeBsd,
}

impl Profile {
    /// Every profile, by its name in the config.
    pub const ALL: [Profile; 2] = [Profile::Polld, Profile::FreeBsd];

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Polld => "polld",
            Profile::FreeBsd => "freebsd",
        }
    }

    /// The profile called `name`, if there is one.
    pub fn named(name: &str) -> Option<Profile> {
        Profile::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The knobs it starts from.
    pub fn knobs(self) -> Knobs {
        match self {
            Profile::Polld => Knobs::default(),
            Profile::FreeBsd => Knobs::freebsd(),
        }
    }
}

impl Knobs {
    /// FreeBSD's defaults (`kern_poll.c`) for the knobs it has, and no `looks` (FreeBSD
    /// polls at the ticks, and in the idle loop with `idle_poll`); polld's other knobs
    /// (`idle_wakeups`, `quiet_cycles`, `auto_*`) keep polld's defaults, FreeBSD has no
    /// value for them; `wakeup_watchdog_ms` stays on, as FreeBSD's drivers kept their
    /// watchdog timers. hz, user_frac, reg_frac and idle_poll are FreeBSD's by default.
    pub fn freebsd() -> Knobs {
        Knobs {
            controller: Controller::Classic,
            burst_max: FREEBSD_BURST_MAX,
            each_burst: FREEBSD_EACH_BURST,
            looks: 0,
            ..Knobs::default()
        }
    }
}

/// `kern.polling.hz`: in range, and not below `reg_frac` or `auto_window_ticks` (which it
/// bounds), so that every knob keeps a value it would accept.
fn set_hz(k: &mut Knobs, name: &str, value: &str) -> Result<(), KnobError> {
    let v = in_range(name, parse_int(name, value)?, MIN_HZ.into(), MAX_HZ.into())?;
    let bounded = [
        ("reg_frac", k.reg_frac),
        ("auto_window_ticks", k.auto_window_ticks),
    ];
    if let Some((knob, at)) = bounded.into_iter().find(|&(_, at)| v < at) {
        return Err(KnobError::Invalid {
            name: name.to_string(),
            value: value.to_string(),
            allowed: format!(
                "{MIN_HZ}..{MAX_HZ} and at least kern.polling.{knob} ({at}); lower {knob} first"
            ),
        });
    }
    k.hz = v;
    Ok(())
}

sysctl_oids! {
    /// The knobs that are not fields.
    impl Knobs: FIXED_OIDS {
        /// `kern.polling.poll_in_trap`: accepted as 0, FreeBSD's default, so that FreeBSD
        /// settings carry over; not a field, there is nothing to store.
        POLL_IN_TRAP = "poll_in_trap": Knob "Poll on trap entry: 0 only, user space cannot hook traps",
            |_| Value::Int(0),
            write Write::Proc {
                handler: |_, name, value| {
                    if parse_int(name, value)? != 0 {
                        return Err(KnobError::Invalid {
                            name: name.to_string(),
                            value: value.to_string(),
                            allowed: POLL_IN_TRAP_REFUSAL.to_string(),
                        });
                    }
                    Ok(())
                },
                allowed: |_| "0".to_string(),
            };
    }
}

/// Why `kern.polling.poll_in_trap` takes only 0 in polld.
pub const POLL_IN_TRAP_REFUSAL: &str = "0 only: FreeBSD polled on every trap and system call \
    entry, which the kernel takes and a user-space poller cannot hook; for lower latency on \
    a partly idle CPU use kern.polling.idle_poll=1";
