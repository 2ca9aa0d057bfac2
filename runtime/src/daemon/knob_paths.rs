//! A knob written at start (the config file), by `polld ctl` (a Set request, answered as
//! a poll thread answers it) and by SIGHUP (the reload's assignments, answered the same
//! way) has the same consequences: one test per setting derived from a knob, and the
//! busy-poll settings of an AF_XDP socket on a veth read back after hz and each_burst
//! change at run time.

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::Path;

use polld_control::answer;
use polld_control::proto::Response;
use polld_core::{Dataplane, Knobs};
use polld_dev::busy_poll::{BusyPoll, BusyPollConfig};
use polld_dev::irq_defer::DeferChoice;
use polld_dev::netns::{veth_pair, Netns, VethEnd};
use polld_packet::Stage;
use polld_testsupport::{require_root, TestDevice};

use crate::check;
use crate::config::RunConfig;
use crate::queues::QueueGroups;
use crate::reload;

use super::busy_poll::{busy_poll_of, knob_hook};
use super::dataplane::{build_dataplane, open_dataplane};

/// A config of one interface with `knobs` in its `[knobs]`.
fn config(knobs: &str) -> RunConfig {
    let text = format!(
        "[knobs]\n{knobs}\n[[interfaces]]\nname = \"veth1\"\nbackend = \"af_xdp\"\n\
         mac = \"02:00:00:00:01:01\"\naddresses = [\"10.0.1.1/24\"]\n"
    );
    RunConfig::parse(Path::new("polld.toml"), &text).unwrap()
}

/// A poll thread's dataplane on a test device, and the busy polling its knob hook keeps.
struct Thread {
    dp: Dataplane<TestDevice, Stage>,
    busy: BusyPoll,
}

/// Started on `config`: its knobs written once, at start.
fn start_on(config: &RunConfig) -> Thread {
    let busy = busy_poll_of(config);
    let hook = knob_hook(vec![busy.clone()], config.daemon.irq_deferral);
    let devices = vec![TestDevice::new("veth1")];
    let (dp, _) = build_dataplane(config, devices, Some(hook)).unwrap();
    Thread { dp, busy }
}

/// Answers `assignments` as a poll thread answers a Set request; every one must be taken.
fn set(dp: &mut Dataplane<TestDevice, Stage>, assignments: &[(String, String)]) {
    let Response::Set { results } = answer::set(dp, assignments) else {
        panic!("not a Set answer");
    };
    for r in results {
        assert_eq!(r.error, None, "{}", r.name);
    }
}

/// Started without `knobs`, then each written by `polld ctl`.
fn by_ctl(knobs: &str) -> Thread {
    let mut t = start_on(&config(""));
    let assignments: Vec<(String, String)> = config(knobs)
        .knobs
        .iter()
        .map(|k| (k.name.clone(), k.value.clone()))
        .collect();
    set(&mut t.dp, &assignments);
    t
}

/// Started on a file with `before` in its `[knobs]`, then SIGHUP with `after` there.
fn by_sighup(before: &str, after: &str) -> Thread {
    let (current, new) = (config(before), config(after));
    let mut t = start_on(&current);
    let defaults: HashMap<String, String> = check::dataplanes(&new).unwrap();
    set(&mut t.dp, &reload::assignments(&current, &new, &defaults));
    t
}

/// What `derived` reads after `knobs` are written at start, by `polld ctl` and by SIGHUP:
/// the same three times.
fn three_ways<T: PartialEq + Debug>(knobs: &str, derived: impl Fn(&Thread) -> T) -> T {
    let at_start = derived(&start_on(&config(knobs)));
    assert_eq!(derived(&by_ctl(knobs)), at_start, "polld ctl {knobs}");
    assert_eq!(derived(&by_sighup("", knobs)), at_start, "SIGHUP {knobs}");
    at_start
}

fn knobs(t: &Thread) -> Knobs {
    t.dp.poller().knobs().clone()
}

#[test]
fn the_busy_poll_budget_follows_each_burst() {
    let budget = three_ways("\"kern.polling.each_burst\" = 20", |t| {
        t.busy.config().budget
    });
    assert_eq!(budget, 20);
}

#[test]
fn the_flush_timeout_follows_hz() {
    let timeout = three_ways("\"kern.polling.hz\" = 500", |t| {
        t.busy.config().gro_flush_timeout_ns
    });
    assert_eq!(timeout, 20_000_000, "ten ticks of 2 ms");
}

#[test]
fn a_lower_burst_max_lowers_each_burst_and_the_busy_poll_budget() {
    let derived = three_ways("\"kern.polling.burst_max\" = 40", |t| {
        (
            knobs(t).each_burst,
            t.busy.config().budget,
            t.dp.poller().state().burst,
        )
    });
    assert_eq!(derived, (10, 10, 5));
}

#[test]
fn knobs_without_consequences_beyond_themselves_are_the_same_three_ways() {
    let k = three_ways(
        "\"kern.polling.reg_frac\" = 5\n\"kern.polling.user_frac\" = 30\n\"kern.polling.controller\" = \"classic\"",
        knobs,
    );
    assert_eq!(
        (k.reg_frac, k.user_frac, k.controller),
        (5, 30, polld_core::Controller::Classic)
    );
}

#[test]
fn a_knob_taken_out_of_the_file_comes_back_to_its_default_with_its_busy_poll_settings() {
    let t = by_sighup(
        "\"kern.polling.each_burst\" = 20\n\"kern.polling.hz\" = 500",
        "",
    );
    assert_eq!(knobs(&t), Knobs::default());
    let defaults = BusyPollConfig::for_polling(50, 1000, DeferChoice::Auto);
    assert_eq!(t.busy.config(), defaults);
}

/// The busy-poll settings `busy` holds, and the socket's options as the kernel reports
/// them agree with `each_burst` at `hz` (a kernel that does not answer
/// `SO_BUSY_POLL_BUDGET` reports none).
fn assert_in_force(busy: &BusyPoll, each_burst: u32, hz: u32) {
    let wanted = BusyPollConfig::for_polling(each_burst, hz, DeferChoice::Auto);
    assert_eq!(busy.config(), wanted);
    let options = busy.socket_options().expect("a socket").unwrap();
    assert!(options.prefer, "{options:?}");
    assert!(
        options.budget.is_none_or(|b| b == each_burst),
        "{options:?}, wanted {each_burst}"
    );
}

#[test]
fn hz_and_each_burst_written_at_run_time_reach_an_af_xdp_socket() {
    require_root!("opens AF_XDP on a veth in a namespace of its own");
    let (a, b) = (
        Netns::create("knob-a").unwrap(),
        Netns::create("knob-b").unwrap(),
    );
    let end = |ns, name, mac| VethEnd {
        ns,
        name,
        mac,
        addr: None,
    };
    veth_pair(
        end(&a, "kva", "02:00:00:00:0a:01"),
        end(&b, "kvb", "02:00:00:00:0b:01"),
    )
    .unwrap();
    let file = |knobs: &str| {
        let text = format!(
            "[knobs]\n{knobs}\n[[interfaces]]\nname = \"kva\"\nbackend = \"af_xdp\"\n\
             netns = \"{}\"\nmac = \"02:00:00:00:0a:01\"\naddresses = [\"10.0.1.1/24\"]\n",
            a.name()
        );
        RunConfig::parse(Path::new("polld.toml"), &text).unwrap()
    };
    // At start, from the file.
    let current = file("\"kern.polling.each_burst\" = 20");
    let (mut dp, _, info, _reopener) =
        open_dataplane(&current, None, &QueueGroups::default()).unwrap();
    let busy = info[0]
        .rx_owner
        .busy_poll()
        .expect("AF_XDP busy polls")
        .clone();
    assert_in_force(&busy, 20, 1000);
    // polld ctl.
    let write = |name: &str, value: &str| (name.to_string(), value.to_string());
    let Response::Set { results } = answer::set(
        &mut dp,
        &[
            write("kern.polling.hz", "500"),
            write("kern.polling.each_burst", "30"),
        ],
    ) else {
        panic!("not a Set answer");
    };
    assert!(results.iter().all(|r| r.error.is_none()), "{results:?}");
    assert_in_force(&busy, 30, 500);
    // SIGHUP with a new file.
    let new = file("\"kern.polling.hz\" = 250\n\"kern.polling.each_burst\" = 40");
    let defaults = check::dataplanes(&new).unwrap();
    let Response::Set { results } =
        answer::set(&mut dp, &reload::assignments(&current, &new, &defaults))
    else {
        panic!("not a Set answer");
    };
    assert!(results.iter().all(|r| r.error.is_none()), "{results:?}");
    assert_in_force(&busy, 40, 250);
}
