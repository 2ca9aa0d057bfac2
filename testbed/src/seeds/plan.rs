//! What the bench's trials run: how long, at which loads and how many rounds (by
//! `--quick` and the testbed), at which `user_frac` and with which knobs.

use polld_core::knobs::PROFILE_KEY;

use crate::entries::FASTFORWARDING;

/// How long each trial runs, by `--quick`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    pub(super) warm_up: f64,
    pub(super) window: f64,
    /// `polld gen --rate` of the curve's steps, the last one the flood.
    pub(super) rates: &'static [&'static str],
    /// Trials per step of the curve, each round through every step in turn; a point is
    /// the round with the median delivered rate.
    pub(super) rounds: usize,
    /// Rounds of polling's trials at the loads above its peak and its best
    /// ([`crate::plateau`]): what the verdict on its plateau is taken from.
    pub(super) plateau_rounds: usize,
    /// iperf3's seconds.
    pub(super) tcp_secs: u32,
    /// Seed 004's floods per configuration, each round through the four in turn.
    pub(super) adaptive_rounds: usize,
}

pub(super) const FULL: Timing = Timing {
    warm_up: 0.5,
    window: 1.5,
    // Dense around the configurations' knees (docs/measuring.md §tb-knees), one flood
    // step per doubling above them: a generator that cannot reach a rate only repeats the
    // flood.
    rates: &[
        "100k",
        "150k",
        "200k",
        "250k",
        "350k",
        "500k",
        "1M",
        "2M",
        "unlimited",
    ],
    rounds: 3,
    // Enough that the means put a flat plateau at 95 % or more of its best in nearly
    // every run on a shared machine (docs/measuring.md §tb-plateau).
    plateau_rounds: 25,
    tcp_secs: 3,
    adaptive_rounds: 3,
};

pub(super) const QUICK: Timing = Timing {
    warm_up: 0.3,
    window: 0.7,
    // 50k and 100k: below every configuration's knee, where interrupts without
    // fastforwarding have their best; a best taken past the knee would make the flood's
    // share of it mean nothing (docs/measuring.md §tb-knees).
    rates: &["50k", "100k", "200k", "unlimited"],
    rounds: 1,
    plateau_rounds: 2,
    tcp_secs: 1,
    adaptive_rounds: 1,
};

/// In a guest under software emulation, which forwards a small fraction of what the host
/// does: steps up to its knees (docs/measuring.md §tb-vm, docs/results/seeds-vm.md), a
/// longer window for the guest's slower clock of events, and a second of warm-up (a polld
/// that polls gets more to take its queue from the kernel: the VM demo's `TAKEOVER_S`).
pub(super) const FULL_VM: Timing = Timing {
    warm_up: 1.0,
    window: 3.0,
    rates: &["1k", "2k", "4k", "6k", "10k", "unlimited"],
    rounds: 3,
    plateau_rounds: 10,
    tcp_secs: 3,
    adaptive_rounds: 3,
};

pub(super) const QUICK_VM: Timing = Timing {
    window: 2.0,
    rates: &["1k", "4k", "unlimited"],
    rounds: 1,
    plateau_rounds: 2,
    ..FULL_VM
};

/// The curve's and the table's polling trials: a router box (seed 000: "low values ...
/// useful e.g. in a router box") with no user work to leave room for.
pub(super) const CURVE_USER_FRAC: u32 = 10;
/// The `screens`, `tcp` and `share`-derived Rx CPU rows: FreeBSD's default.
pub(super) const DEFAULT_USER_FRAC: u32 = 50;

/// Knobs a trial sets after its own.
pub(super) type Knobs = &'static [(&'static str, &'static str)];

pub(super) const NO_FASTFORWARDING: [(&str, &str); 1] = [(FASTFORWARDING, "0")];

/// FreeBSD's knob defaults (`profile = "freebsd"`), where the seed ran them and the
/// rate stays below their ceiling (hz x burst_max, 150 kpps): the how-to's screens. The
/// floods (curve, table, share) run polld's defaults: FreeBSD's would cap polling there.
pub(super) const FREEBSD: [(&str, &str); 1] = [(PROFILE_KEY, "freebsd")];
