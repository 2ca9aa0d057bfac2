//! The per-interface modes and their state machine: entering and leaving polling
//! (registration with the [`Poller`]), interrupt masking, the interrupt handler that runs to
//! completion, the adaptive task, busy polling, and an interface coming back. `auto` is an
//! interface that is in interrupt mode or polls, as [`super::auto`] decides.

use std::fmt;

use crate::device::{Device, LinkState};
use crate::knobs::{in_range, parse_int, KnobError};
use crate::poll::RegError;
use crate::stage::PacketStage;

use super::{Dataplane, Interface, BATCH};

/// How an interface is serviced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Interrupt,
    Polling,
    Adaptive,
    Busy,
    /// Interrupts under light load, polling under overload ([`super::auto`]).
    Auto,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Interrupt,
        Mode::Polling,
        Mode::Adaptive,
        Mode::Busy,
        Mode::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Interrupt => "interrupt",
            Mode::Polling => "polling",
            Mode::Adaptive => "adaptive",
            Mode::Busy => "busy",
            Mode::Auto => "auto",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!("unknown mode '{s}': use interrupt, polling, adaptive, busy or auto")
            })
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

/// Default `dev.<if>.rx_process_limit` (em(4)'s `hw.em.rx_process_limit`).
pub const RX_PROCESS_LIMIT: i64 = 100;

/// The most frames an adaptive task takes in one receive call. A larger run (up to an
/// unlimited one, `rx_process_limit` -1) goes on in slices, the task queued between them:
/// under a flood that outruns the CPU, one receive call would otherwise never return, and
/// neither send what it received nor let a tick or a control request in.
pub const TASK_SLICE: usize = 4096;

impl<D: Device, S: PacketStage> Dataplane<D, S> {
    /// Puts interface `i` in `mode`. Entering polling registers it (masking its
    /// interrupt only if registration succeeded); leaving polling deregisters it and
    /// unmasks the interrupt even if deregistration failed, as FreeBSD does. Frames the
    /// device already accepted stay in its ring and are picked up in the new mode.
    pub fn set_mode(&mut self, i: usize, mode: Mode) -> Result<(), ModeError> {
        let old = self.devs.ifs[i].mode;
        if old == mode {
            return Ok(());
        }
        // `auto` starts on interrupts; an `auto` interface may be polling already.
        let was_polling = self.devs.ifs[i].polls();
        let will_poll = mode == Mode::Polling;
        if will_poll && !was_polling {
            self.poller.register(i).map_err(|err| ModeError::Register {
                ifname: self.devs.ifs[i].dev.name().to_string(),
                err,
            })?;
        } else if was_polling && !will_poll {
            // "enable interrupts even in error case"
            let _ = self.poller.deregister(i);
        }
        // Drops from before polling are no news to the scheduler, nor is an interrupt
        // raised for the old mode.
        self.devs.output_full[i] = false;
        self.pending.lower(i);
        let iface = &mut self.devs.ifs[i];
        iface.mode = mode;
        iface.auto_polling = false;
        iface.task_queued = false;
        iface.in_handler = false;
        iface.tx_wait = None;
        iface.watchdog_run = false;
        let armed = self.interrupt_armed(i);
        self.devs.ifs[i].dev.set_interrupt(armed);
        Ok(())
    }

    /// `kern.polling.enable`: whether every interface polls (FreeBSD 6 reads its own
    /// flag; polld reads the modes, which `polld ifconfig` may have changed since).
    pub(super) fn polling_enabled(&self) -> bool {
        !self.devs.ifs.is_empty() && self.devs.ifs.iter().all(|i| i.mode == Mode::Polling)
    }

    /// Writes `kern.polling.enable` as FreeBSD 6's compatibility handler does: 1 puts
    /// every interface into polling, 0 takes every polling interface out (to interrupt
    /// mode); other modes stay. Values other than 0 and 1 are refused. If an interface
    /// cannot register, the interfaces already switched go back and nothing changes.
    pub(super) fn set_polling_enable(&mut self, name: &str, value: &str) -> Result<(), KnobError> {
        let on = in_range(name, parse_int(name, value)?, 0, 1)? == 1;
        let before: Vec<Mode> = self.devs.ifs.iter().map(|i| i.mode).collect();
        let auto_polled: Vec<bool> = self.devs.ifs.iter().map(|i| i.auto_polling).collect();
        for (i, &old) in before.iter().enumerate() {
            let new = match (on, old) {
                (true, _) => Mode::Polling,
                (false, Mode::Polling) => Mode::Interrupt,
                (false, other) => other,
            };
            if let Err(e) = self.set_mode(i, new) {
                for (j, &mode) in before.iter().enumerate().take(i) {
                    self.restore_mode(j, mode, auto_polled[j]);
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

    /// Puts interface `i` back in `mode` after a refused `kern.polling.enable` write. An
    /// `auto` interface that polled (`auto_polled`) and was put in polling is still
    /// registered, in its place in the table: it goes back to `auto` polling as it was,
    /// not to interrupts.
    fn restore_mode(&mut self, i: usize, mode: Mode, auto_polled: bool) {
        let iface = &mut self.devs.ifs[i];
        if mode == Mode::Auto && auto_polled && iface.mode == Mode::Polling {
            iface.mode = Mode::Auto;
            iface.auto_polling = true;
            return;
        }
        let _ = self.set_mode(i, mode);
    }

    /// Whether interface `i`'s interrupt is armed: the executor waits on it only then.
    pub fn interrupt_armed(&self, i: usize) -> bool {
        self.devs.ifs[i].interrupt_armed()
    }

    /// Whether interface `i` polls but polling is quiet (every ring was empty for
    /// `kern.polling.quiet_cycles` cycles) or the idle poller sleeps on empty rings: the
    /// executor waits on its interrupt, and reports it with [`Dataplane::interrupt_line`]
    /// when it fires ([`super::Due::QuietWakeup`]: a quiet wakeup is counted in
    /// `kern.polling.quiet_wakeups`, an idle poller's in `kern.polling.idlepoll_wakeups`;
    /// neither as an interrupt of the interface, whose mode stays polling).
    pub fn wakeup_armed(&self, i: usize) -> bool {
        let poller = &self.poller;
        self.devs.ifs[i].polls()
            && (poller.state().quiet || poller.idle_poll_resting())
            && poller.is_registered(i)
    }

    /// Interface `i` raised an interrupt: in interrupt mode the handler starts (it runs to
    /// completion, [`super::Due::Handler`]); in adaptive mode the device is masked and its
    /// task queued. An interrupt with no received frame (a transmit completion, a masked
    /// device's spurious wakeup on a shared line) runs no receive handler and is not
    /// counted, as FreeBSD ignores it.
    pub(super) fn interrupt(&mut self, i: usize) {
        if !self.interrupt_armed(i) || !self.devs.ifs[i].dev.rx_ready() {
            return;
        }
        let iface = &mut self.devs.ifs[i];
        iface.counters.interrupts += 1;
        match iface.mode {
            Mode::Adaptive => {
                // Mask the device and hand the work to the task: a new run.
                iface.task_queued = true;
                iface.task_left = None;
                iface.dev.set_interrupt(false);
            }
            _ => {
                iface.in_handler = true;
                self.continue_handler(i);
            }
        }
    }

    /// One more batch of a running interrupt handler; it returns when the ring is empty,
    /// or stops when an output is full ([`super::tx_ready`]).
    pub(super) fn continue_handler(&mut self, i: usize) {
        let d = &mut self.devs;
        if d.ifs[i].in_handler && d.links[i] == LinkState::Up {
            if let Some(budget) = d.interrupt_budget(i, BATCH) {
                d.receive(i, budget);
            }
        }
        let iface = &mut d.ifs[i];
        if d.links[i] != LinkState::Up || !iface.dev.rx_ready() {
            iface.in_handler = false;
            iface.watchdog_run = false;
        }
    }

    /// Runs interface `i`'s adaptive task once: at most `rx_process_limit` frames, in
    /// one receive call so the ring's consumer index is published once (a run above
    /// [`TASK_SLICE`] frames goes on in slices, each a call of its own). Requeues itself
    /// while frames remain; re-arms the interrupt only when the ring is drained. A full
    /// output stops it until that output's transmit-ready line ([`super::tx_ready`]).
    pub(super) fn run_task(&mut self, i: usize) {
        let d = &mut self.devs;
        if !d.ifs[i].task_queued {
            return;
        }
        let budget = match d.ifs[i].task_left.take() {
            Some(left) => left,
            None => {
                d.ifs[i].counters.tasks += 1;
                let limit = d.ifs[i].rx_process_limit;
                if limit < 0 {
                    usize::MAX
                } else {
                    limit as usize
                }
            }
        };
        let slice = budget.min(TASK_SLICE);
        let mut received = 0;
        if d.links[i] == LinkState::Up {
            if let Some(allowed) = d.interrupt_budget(i, slice) {
                received = d.receive(i, allowed) as usize;
            }
        }
        let iface = &mut d.ifs[i];
        if received == TASK_SLICE && budget > TASK_SLICE {
            iface.task_left = Some(budget - TASK_SLICE);
        }
        let waits = iface.tx_wait.is_some();
        if !waits && (!iface.dev.rx_ready() || d.links[i] != LinkState::Up) {
            iface.task_queued = false;
            iface.watchdog_run = false;
            iface.dev.set_interrupt(true);
        }
    }

    /// An interface that was gone is back (the device reopened it, or the executor
    /// replaced it): a polling interface registers again, the others re-arm.
    pub(super) fn revive(&mut self, i: usize) {
        if self.devs.ifs[i].polls() && self.poller.register(i).is_err() {
            // The table is full now: fall back to interrupts rather than go deaf.
            self.devs.ifs[i].mode = Mode::Interrupt;
            self.devs.ifs[i].auto_polling = false;
        }
        let iface = &mut self.devs.ifs[i];
        iface.task_queued = false;
        iface.in_handler = false;
        iface.tx_wait = None;
        iface.watchdog_run = false;
        let armed = self.interrupt_armed(i);
        self.devs.ifs[i].dev.set_interrupt(armed);
    }
}

impl<D> Interface<D> {
    /// Whether the interrupt is armed: by mode, and never while the interrupt work waits
    /// for an output's transmit-ready line.
    pub(super) fn interrupt_armed(&self) -> bool {
        if self.tx_wait.is_some() {
            return false;
        }
        match self.mode {
            Mode::Interrupt => true,
            Mode::Adaptive => !self.task_queued,
            Mode::Auto => !self.auto_polling,
            Mode::Polling | Mode::Busy => false,
        }
    }
}
