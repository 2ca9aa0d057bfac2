//! The `kern.polling.*` knobs: FreeBSD's names, defaults, ranges and validation.
//!
//! Validation happens here, at the boundary, as in the sysctl handlers of `kern_poll.c`: a
//! write FreeBSD would reject with EINVAL is rejected with a [`KnobError`] that names the
//! knob, the value and the allowed range, and changes nothing.

use std::fmt;

/// `burst_max` bounds (FreeBSD's `MIN_POLL_BURST_MAX`, and `MAX_POLL_BURST_MAX` of the
/// later trees, which raised it from 1000 to 20000).
pub const MIN_POLL_BURST_MAX: u32 = 10;
pub const MAX_POLL_BURST_MAX: u32 = 20_000;
/// Range of `kern.polling.hz`, polld's own knob for the tick rate (FreeBSD used `HZ`).
pub const MIN_HZ: u32 = 100;
pub const MAX_HZ: u32 = 20_000;

/// Default `kern.polling.quiet_cycles`: 100 empty cycles, 100 ms at hz=1000. On the
/// development VM a bare 1000 Hz timer wakeup alone costs 2.3 % of a core.
pub const DEFAULT_QUIET_CYCLES: u32 = 100;
/// Upper bound of `kern.polling.quiet_cycles`.
pub const MAX_QUIET_CYCLES: u32 = 1_000_000;

/// Default `kern.polling.auto_empty_polls`: an `auto` interface goes back to interrupts after
/// 20 empty polls in a row (20 ms at hz=1000), well before polling would go quiet.
pub const DEFAULT_AUTO_EMPTY_POLLS: u32 = 20;

/// Which control loop adapts the per-tick budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Controller {
    /// FreeBSD's: `burst` ±1 per cycle against `100 - user_frac`.
    #[default]
    Classic,
    /// A time budget per tick with a moving average of the cost per packet.
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

/// The writable knobs of the scheduler.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Knobs {
    /// `kern.polling.hz`: ticks per second.
    pub hz: u32,
    /// `kern.polling.user_frac`: percent of each tick reserved for non-polling work.
    pub user_frac: u32,
    /// `kern.polling.burst_max`: ceiling of `burst`.
    pub burst_max: u32,
    /// `kern.polling.each_burst`: packets per handler call.
    pub each_burst: u32,
    /// `kern.polling.reg_frac`: status check every `reg_frac` cycles.
    pub reg_frac: u32,
    /// `kern.polling.idle_poll`: poll in the idle loop when non-zero.
    pub idle_poll: i64,
    /// `kern.polling.controller`: `classic` or `time`.
    pub controller: Controller,
    /// `kern.polling.quiet_cycles`: after this many cycles in a row that found every ring
    /// empty, polling stops the tick and sleeps on the devices' interrupts until one has
    /// work; 0 ticks forever, as FreeBSD.
    pub quiet_cycles: u32,
    /// `kern.polling.auto_empty_polls`: an interface in `auto` mode that polls goes back to
    /// interrupts after this many polls in a row found its ring empty.
    pub auto_empty_polls: u32,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            hz: 1000,
            user_frac: 50,
            burst_max: 150,
            each_burst: 5,
            reg_frac: 20,
            idle_poll: 0,
            controller: Controller::Classic,
            quiet_cycles: DEFAULT_QUIET_CYCLES,
            auto_empty_polls: DEFAULT_AUTO_EMPTY_POLLS,
        }
    }
}

/// Name, description and writability of every `kern.polling.*` entry, in listing order.
pub const KERN_POLLING: &[(&str, &str, bool)] = &[
    (
        "hz",
        "Poll ticks per second (polld's stand-in for HZ)",
        true,
    ),
    (
        "controller",
        "Burst controller: classic (FreeBSD +-1 per tick) or time (time budget)",
        true,
    ),
    ("user_frac", "Desired user fraction of cpu time", true),
    ("burst", "Current polling burst size", false),
    ("burst_max", "Max Polling burst size", true),
    ("each_burst", "Max size of each burst", true),
    ("reg_frac", "Every this many cycles check registers", true),
    ("idle_poll", "Enable device polling in idle loop", true),
    (
        "quiet_cycles",
        "Empty cycles after which polling sleeps on the interrupts, 0 never (polld)",
        true,
    ),
    (
        "auto_empty_polls",
        "Auto mode: empty polls in a row after which an interface goes back to interrupts (polld)",
        true,
    ),
    (
        "poll_in_trap",
        "Poll on trap entry: 0 only, user space cannot hook traps",
        true,
    ),
    ("handlers", "Number of registered poll handlers", false),
    (
        "residual_burst",
        "Residual burst in the current cycle",
        false,
    ),
    ("pending_polls", "Ticks owed to the poller", false),
    (
        "lost_polls",
        "How many times we would have lost a poll tick",
        false,
    ),
    (
        "short_ticks",
        "Hardclock ticks shorter than they should be",
        false,
    ),
    ("phase", "Polling phase", false),
    ("suspect", "suspect event", false),
    ("stalled", "potential stalls", false),
    ("idlepoll_sleeping", "idlepoll thread is sleeping", false),
    ("cycles", "Completed poll cycles (polld)", false),
    (
        "kern_load",
        "Device share of the last cycle, percent of a tick (polld)",
        false,
    ),
    (
        "ns_per_packet",
        "Time controller: average cost of one packet in ns (polld)",
        false,
    ),
    (
        "quiet",
        "Polling sleeps on the devices' interrupts: every ring was empty (polld)",
        false,
    ),
    (
        "quiet_wakeups",
        "Times a device's interrupt ended a quiet spell (polld)",
        false,
    ),
    (
        "repolls",
        "Cycles cut short by a full output that polled again before the tick (polld)",
        false,
    ),
];

/// Why a knob write was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KnobError {
    /// No such knob.
    Unknown { name: String },
    /// The knob can be read but not written.
    ReadOnly { name: String },
    /// Not a number (or not one of the allowed words).
    NotANumber {
        name: String,
        value: String,
        expected: String,
    },
    /// Out of range.
    Invalid {
        name: String,
        value: String,
        allowed: String,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::Unknown { name } => write!(
                f,
                "unknown oid '{name}': list the knobs with `polld ctl -a`"
            ),
            KnobError::ReadOnly { name } => {
                write!(f, "oid '{name}' is read only; nothing changed")
            }
            KnobError::NotANumber {
                name,
                value,
                expected,
            } => write!(
                f,
                "{name}: invalid value '{value}', expected {expected}; nothing changed"
            ),
            KnobError::Invalid {
                name,
                value,
                allowed,
            } => write!(
                f,
                "{name}: {value} is out of range (allowed {allowed}); nothing changed"
            ),
        }
    }
}

impl std::error::Error for KnobError {}

/// Why `kern.polling.poll_in_trap` takes only 0 in polld.
pub const POLL_IN_TRAP_REFUSAL: &str = "0 only: FreeBSD polled on every trap and system call \
    entry, which the kernel takes and a user-space poller cannot hook; for lower latency on \
    a partly idle CPU use kern.polling.idle_poll=1";

/// Parses an integer knob value, naming the knob on failure.
pub fn parse_int(name: &str, value: &str) -> Result<i64, KnobError> {
    value
        .trim()
        .parse::<i64>()
        .map_err(|_| KnobError::NotANumber {
            name: name.to_string(),
            value: value.to_string(),
            expected: "an integer".to_string(),
        })
}

/// Checks `lo..=hi`, returning the value as u32 or an error naming the range.
pub fn in_range(name: &str, v: i64, lo: i64, hi: i64) -> Result<u32, KnobError> {
    if v < lo || v > hi {
        return Err(KnobError::Invalid {
            name: name.to_string(),
            value: v.to_string(),
            allowed: format!("{lo}..{hi}"),
        });
    }
    Ok(v as u32)
}

impl Knobs {
    /// Writes `kern.polling.<name>` (the short or the full name) with FreeBSD's
    /// validation. Cross-knob side effects on the knobs themselves (the burst_max /
    /// each_burst quirk) happen here; effects on scheduler state in [`crate::Poller`].
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let short = name.strip_prefix("kern.polling.").unwrap_or(name);
        let full = format!("kern.polling.{short}");
        match short {
            "hz" => {
                let v = in_range(
                    &full,
                    parse_int(&full, value)?,
                    MIN_HZ as i64,
                    MAX_HZ as i64,
                )?;
                if v < self.reg_frac {
                    return Err(KnobError::Invalid {
                        name: full,
                        value: value.to_string(),
                        allowed: format!(
                            "{MIN_HZ}..{MAX_HZ} and at least kern.polling.reg_frac ({}); lower reg_frac first",
                            self.reg_frac
                        ),
                    });
                }
                self.hz = v;
            }
            "controller" => {
                self.controller = match value.trim() {
                    "classic" => Controller::Classic,
                    "time" => Controller::Time,
                    _ => {
                        return Err(KnobError::NotANumber {
                            name: full,
                            value: value.to_string(),
                            expected: "`classic` or `time`".to_string(),
                        })
                    }
                }
            }
            // kern_poll.c: `if (val > 99) return (EINVAL)`; negative values cannot be
            // written to its unsigned variable either.
            "user_frac" => self.user_frac = in_range(&full, parse_int(&full, value)?, 0, 99)?,
            "burst_max" => {
                let v = parse_int(&full, value)?;
                self.burst_max = in_range(
                    &full,
                    v,
                    MIN_POLL_BURST_MAX as i64,
                    MAX_POLL_BURST_MAX as i64,
                )?;
                // The quirk: each_burst falls back to MIN_POLL_BURST_MAX, not burst_max.
                if self.each_burst > self.burst_max {
                    self.each_burst = MIN_POLL_BURST_MAX;
                }
            }
            "each_burst" => {
                self.each_burst =
                    in_range(&full, parse_int(&full, value)?, 1, self.burst_max as i64)?
            }
            "reg_frac" => {
                self.reg_frac = in_range(&full, parse_int(&full, value)?, 1, self.hz as i64)?
            }
            "idle_poll" => self.idle_poll = parse_int(&full, value)?,
            "quiet_cycles" => {
                self.quiet_cycles =
                    in_range(&full, parse_int(&full, value)?, 0, MAX_QUIET_CYCLES as i64)?
            }
            "auto_empty_polls" => {
                self.auto_empty_polls =
                    in_range(&full, parse_int(&full, value)?, 1, MAX_QUIET_CYCLES as i64)?
            }
            // Accepted as 0, FreeBSD's default, so that FreeBSD settings carry over.
            "poll_in_trap" => {
                if parse_int(&full, value)? != 0 {
                    return Err(KnobError::Invalid {
                        name: full,
                        value: value.to_string(),
                        allowed: POLL_IN_TRAP_REFUSAL.to_string(),
                    });
                }
            }
            _ if KERN_POLLING.iter().any(|(n, _, _)| *n == short) => {
                return Err(KnobError::ReadOnly { name: full })
            }
            _ => {
                return Err(KnobError::Unknown {
                    name: name.to_string(),
                })
            }
        }
        Ok(())
    }
}
