//! One handler per knob write, as each `SYSCTL_PROC` handler of `kern_poll.c`: a write of
//! `kern.polling.<name>` is validated and stored by the knob's declaration
//! ([`crate::knobs`]: its range, and the bounds other knobs put on it), and every
//! consequence it has is here, in the knob's handler: the clamps on other knobs and on the
//! scheduler's state, the derived values, and the runtime's hook
//! ([`Poller::on_knob_write`]), through which the devices' settings that follow the knobs
//! (AF_XDP's busy-poll budget and flush timeout) are put in force again.
//!
//! The same path serves every write: the config file's `[knobs]` at start, `polld ctl`,
//! and SIGHUP's reload. A refused write changes nothing and calls no hook.

use std::fmt;
use std::sync::Arc;

use crate::knobs::{Knobs, MIN_POLL_BURST_MAX, NODE};
use crate::sysctl::{write, KnobError};

use super::Poller;

/// What the runtime is told after a knob write that changed the knobs, with the knobs as
/// they now stand (every consequence of the write applied).
#[derive(Clone)]
pub struct KnobHook(Arc<dyn Fn(&Knobs) + Send + Sync>);

impl fmt::Debug for KnobHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KnobHook")
    }
}

impl KnobHook {
    pub fn new(hook: impl Fn(&Knobs) + Send + Sync + 'static) -> KnobHook {
        KnobHook(Arc::new(hook))
    }
}

/// A knob's handler: the consequences of its write, given the knobs before it.
type Handler = fn(&mut Poller, &Knobs);

/// The knobs whose write has consequences beyond their own value, each with its handler.
const HANDLERS: [(&str, Handler); 4] = [
    (Knobs::BURST_MAX.name, Poller::burst_max_written),
    (Knobs::REG_FRAC.name, Poller::reg_frac_written),
    (Knobs::HZ.name, Poller::clock_written),
    (Knobs::CONTROLLER.name, Poller::clock_written),
];

impl Poller {
    /// Writes `kern.polling.<name>` (the short or the full name) with FreeBSD's validation
    /// and every consequence of the write; a refused write changes nothing.
    pub fn set_knob(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let short = name
            .strip_prefix(NODE)
            .and_then(|rest| rest.strip_prefix('.'))
            .unwrap_or(name);
        let full = format!("{NODE}.{short}");
        let before = self.knobs.clone();
        let written = write(NODE, &mut self.knobs, Knobs::OIDS, &full, value)
            .or_else(|| write(NODE, &mut self.knobs, &Knobs::FIXED_OIDS, &full, value));
        match written {
            Some(result) => result?,
            None if Poller::is_declared(&full) => return Err(KnobError::ReadOnly { name: full }),
            None => {
                return Err(KnobError::Unknown {
                    name: name.to_string(),
                })
            }
        }
        if let Some((_, handler)) = HANDLERS.iter().find(|(knob, _)| *knob == short) {
            handler(self, &before);
        }
        // Any write: the idle poller follows `idle_poll` (and wakes to try the new
        // settings), and a quiet spell ends, so the new settings get a tick to act.
        self.update_idle_sleep();
        self.leave_quiet();
        if self.knobs != before {
            if let Some(hook) = &self.knob_hook {
                (hook.0)(&self.knobs);
            }
        }
        Ok(())
    }

    /// Registers what to tell after each knob write that changed the knobs (the runtime
    /// puts the devices' settings derived from them in force again); replaces the last.
    pub fn on_knob_write(&mut self, hook: KnobHook) {
        self.knob_hook = Some(hook);
    }

    /// `burst_max`: FreeBSD's quirk, `each_burst` above the new ceiling falls back to
    /// `MIN_POLL_BURST_MAX`, not to `burst_max`; the current `burst` is clamped to it.
    fn burst_max_written(&mut self, _before: &Knobs) {
        if self.knobs.each_burst > self.knobs.burst_max {
            self.knobs.each_burst = MIN_POLL_BURST_MAX;
        }
        self.state.burst = self.state.burst.min(self.knobs.burst_max);
    }

    /// `reg_frac`: a count of cycles already past the new period starts again, so the next
    /// status check comes within it.
    fn reg_frac_written(&mut self, before: &Knobs) {
        if self.knobs.reg_frac != before.reg_frac && self.reg_frac_count >= self.knobs.reg_frac {
            self.reg_frac_count = 0;
        }
    }

    /// `hz`, `controller`: a new clock or controller starts at the knob's own period; the
    /// time controller slows it again if its ticks still cost more than the share.
    fn clock_written(&mut self, before: &Knobs) {
        if self.knobs.hz != before.hz || self.knobs.controller != before.controller {
            self.state.stride = 1;
        }
    }
}
