//! AF_XDP's preferred busy polling follows the knobs: its budget is the poll chunk
//! (`kern.polling.each_burst`) and its flush timeout a few ticks of `kern.polling.hz`. The
//! devices are opened with the settings of the config's profile, before any knob is
//! written; the hook this file makes, registered on the dataplane's poller, puts the
//! settings in force again after every knob write that changed them, whether the write
//! comes from the config file at start, from `polld ctl` or from SIGHUP's reload.

use polld_core::poll::KnobHook;
use polld_core::Knobs;
use polld_dev::busy_poll::{BusyPoll, BusyPollConfig};
use polld_dev::irq_defer::DeferChoice;

use crate::config::RunConfig;

/// The busy-poll settings for `knobs`, the deferral written as `choice` says.
pub(crate) fn settings(knobs: &Knobs, choice: DeferChoice) -> BusyPollConfig {
    BusyPollConfig::for_polling(knobs.each_burst, knobs.hz, choice)
}

/// The preferred busy polling an AF_XDP interface's sockets are opened with: the
/// settings of the config's profile (the knobs the poller starts from), the deferral
/// written as `[daemon] irq_deferral` says. Kept across reopens.
pub(crate) fn busy_poll_of(config: &RunConfig) -> BusyPoll {
    BusyPoll::new(settings(
        &config.profile.knobs(),
        config.daemon.irq_deferral,
    ))
}

/// The hook that puts the settings of `knobs` in force on `busy` (a poll thread's AF_XDP
/// sockets) after each knob write.
pub(crate) fn knob_hook(busy: Vec<BusyPoll>, choice: DeferChoice) -> KnobHook {
    KnobHook::new(move |knobs: &Knobs| {
        for b in &busy {
            b.reconfigure(settings(knobs, choice));
        }
    })
}
