//! The knob profiles: `freebsd` gives exactly `kern_poll.c`'s defaults, the default gives
//! polld's (the four it changes, and FreeBSD's for the rest), and knob writes apply over
//! either with the same validation.

use polld_core::knobs::{FREEBSD_BURST_MAX, FREEBSD_EACH_BURST, MAX_POLL_BURST_MAX};
use polld_core::{Controller, Knobs, Poller, Profile};

#[test]
fn the_freebsd_profile_is_kern_poll_c_defaults() {
    let k = Profile::FreeBsd.knobs();
    assert_eq!(k, Knobs::freebsd());
    // kern_poll.c: HZ (1000 advised), user_frac 50, poll_burst_max 150, poll_each_burst 5,
    // reg_frac 20, idle_poll 0, the +-1 burst controller; polls at the ticks only.
    assert_eq!(k.hz, 1000);
    assert_eq!(k.controller, Controller::Classic);
    assert_eq!(k.user_frac, 50);
    assert_eq!(k.burst_max, 150);
    assert_eq!(k.each_burst, 5);
    assert_eq!(k.reg_frac, 20);
    assert_eq!(k.idle_poll, 0);
    assert_eq!(k.looks, 0);
    assert_eq!((FREEBSD_BURST_MAX, FREEBSD_EACH_BURST), (150, 5));
}

#[test]
fn the_default_profile_changes_the_controller_the_bursts_and_the_looks_only() {
    let k = Profile::default().knobs();
    assert_eq!(Profile::default(), Profile::Polld);
    assert_eq!(k, Knobs::default());
    assert_eq!(k.controller, Controller::Time);
    assert_eq!(k.burst_max, MAX_POLL_BURST_MAX);
    assert_eq!(k.burst_max, 20_000);
    assert_eq!(k.each_burst, 50);
    // One look half-way between two ticks while traffic is light.
    assert_eq!(k.looks, 1);
    let same_elsewhere = Knobs {
        controller: Controller::Classic,
        burst_max: 150,
        each_burst: 5,
        looks: 0,
        ..k
    };
    assert_eq!(same_elsewhere, Knobs::freebsd());
}

#[test]
fn profiles_are_found_by_their_config_names() {
    assert_eq!(Profile::named("freebsd"), Some(Profile::FreeBsd));
    assert_eq!(Profile::named("polld"), Some(Profile::Polld));
    assert_eq!(Profile::named("FreeBSD"), None);
    assert_eq!(Profile::named(""), None);
    for p in Profile::ALL {
        assert_eq!(Profile::named(p.name()), Some(p));
    }
}

#[test]
fn knob_writes_apply_over_the_freebsd_profile_with_freebsds_validation() {
    let mut p = Poller::new(Knobs::freebsd());
    p.set_knob("kern.polling.burst_max", "1000").unwrap();
    p.set_knob("kern.polling.controller", "time").unwrap();
    assert_eq!(p.knobs().burst_max, 1000);
    assert_eq!(p.knobs().controller, Controller::Time);
    // The rest stays FreeBSD's.
    assert_eq!(p.knobs().each_burst, 5);
    assert!(p.set_knob("kern.polling.burst_max", "9").is_err());
    assert_eq!(p.knobs().burst_max, 1000);
}
