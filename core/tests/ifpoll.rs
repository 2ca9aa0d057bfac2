//! docs/algorithm.md §9 behaviour 15, DragonFly per-CPU timing: with pollhz P, tx_frac T and status_frac S, RX
//! cycles run P times a second per CPU, TX every T-th tick, status only on CPU 0 every S-th
//! tick; kern_load uses P, not HZ; a busy interface serializer skips that interface for
//! one chunk, not for the whole cycle. On virtual time, exactly.

use polld_core::ifpoll::{Busy, IfPoll, IfPollHandlers, IfPollRegError, IDLE_TIMER_HZ};
use polld_core::{HandlerId, KnobError, RegError};

const SEC: u64 = 1_000_000_000;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Rx(HandlerId, u32),
    Tx(HandlerId),
    Status(HandlerId),
}

/// Handlers that cost `rx_ns` per received frame, record each call, and report a busy
/// serializer for the (kind, interface) pairs in `busy` (each is used up by one refusal).
#[derive(Default)]
struct Recorder {
    now: u64,
    rx_ns: u64,
    calls: Vec<Call>,
    busy: Vec<(Kind, HandlerId)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Rx,
    Tx,
    Status,
}

impl Recorder {
    fn take_busy(&mut self, kind: Kind, id: HandlerId) -> bool {
        match self.busy.iter().position(|&b| b == (kind, id)) {
            Some(i) => {
                self.busy.remove(i);
                true
            }
            None => false,
        }
    }
}

impl IfPollHandlers for Recorder {
    fn rx(&mut self, id: HandlerId, count: u32) -> Result<u32, Busy> {
        if self.take_busy(Kind::Rx, id) {
            return Err(Busy);
        }
        self.calls.push(Call::Rx(id, count));
        self.now += count as u64 * self.rx_ns;
        Ok(count)
    }
    fn tx(&mut self, id: HandlerId) -> Result<u32, Busy> {
        if self.take_busy(Kind::Tx, id) {
            return Err(Busy);
        }
        self.calls.push(Call::Tx(id));
        Ok(0)
    }
    fn status(&mut self, id: HandlerId) -> Result<(), Busy> {
        if self.take_busy(Kind::Status, id) {
            return Err(Busy);
        }
        self.calls.push(Call::Status(id));
        Ok(())
    }
}

/// Drives every CPU's timer at its own `pollhz` for `duration` of virtual time; after each
/// tick the CPU runs its armed work to completion (a CPU with cheap handlers).
fn run(ifp: &mut IfPoll, h: &mut [Recorder], duration: u64) {
    let mut next: Vec<u64> = vec![0; ifp.cpus()];
    let mut ticks: Vec<u64> = vec![0; ifp.cpus()];
    loop {
        let (cpu, &at) = next.iter().enumerate().min_by_key(|(_, &t)| t).unwrap();
        if at >= duration {
            return;
        }
        let hz = ifp.timer_hz(cpu) as u64;
        let r = &mut h[cpu];
        r.now = r.now.max(at);
        ifp.tick(cpu, r.now, 1);
        while ifp.run(cpu, r.now, r) {}
        ticks[cpu] += 1;
        next[cpu] = ticks[cpu] * SEC / hz;
    }
}

fn set(ifp: &mut IfPoll, name: &str, v: &str) {
    ifp.set(name, v).unwrap();
}

#[test]
fn rx_cycles_follow_pollhz_per_cpu_tx_every_tx_frac_and_status_on_cpu0_only() {
    let mut ifp = IfPoll::new(2).unwrap();
    set(&mut ifp, "net.ifpoll.0.pollhz", "2000");
    set(&mut ifp, "net.ifpoll.1.pollhz", "3000");
    set(&mut ifp, "net.ifpoll.0.tx_frac", "2");
    set(&mut ifp, "net.ifpoll.1.tx_frac", "3");
    set(&mut ifp, "net.ifpoll.0.status_frac", "20");
    ifp.register(0, 0).unwrap();
    ifp.register(1, 1).unwrap();
    let mut h: Vec<Recorder> = (0..2).map(|_| Recorder::default()).collect();
    run(&mut ifp, &mut h, SEC);

    assert_eq!(ifp.counters(0).ticks, 2000);
    assert_eq!(ifp.counters(1).ticks, 3000);
    assert_eq!(
        ifp.rx(0).state().cycles,
        2000,
        "RX cycles = pollhz on CPU 0"
    );
    assert_eq!(
        ifp.rx(1).state().cycles,
        3000,
        "RX cycles = pollhz on CPU 1"
    );
    let count = |r: &Recorder, f: &dyn Fn(&Call) -> bool| r.calls.iter().filter(|c| f(c)).count();
    assert_eq!(
        count(&h[0], &|c| *c == Call::Tx(0)),
        1000,
        "TX every 2nd tick"
    );
    assert_eq!(
        count(&h[1], &|c| *c == Call::Tx(1)),
        1000,
        "TX every 3rd tick"
    );
    // Status runs on CPU 0 for both interfaces, never on CPU 1.
    assert_eq!(count(&h[0], &|c| *c == Call::Status(0)), 100);
    assert_eq!(count(&h[0], &|c| *c == Call::Status(1)), 100);
    assert_eq!(count(&h[1], &|c| matches!(c, Call::Status(_))), 0);
    assert_eq!(ifp.counters(1).status_rounds, 0);
    // RX of an interface runs only on its own CPU.
    assert!(h[0].calls.iter().all(|c| !matches!(c, Call::Rx(1, _))));
    assert!(h[1].calls.iter().all(|c| !matches!(c, Call::Rx(0, _))));
}

#[test]
fn a_cpu_without_handlers_lets_its_timer_fall_to_one_hz() {
    let mut ifp = IfPoll::new(2).unwrap();
    ifp.register(7, 1).unwrap();
    assert_eq!(ifp.timer_hz(1), ifp.rx(1).knobs().hz);
    // CPU 0 still runs for the status handler of interface 7.
    assert_eq!(ifp.timer_hz(0), ifp.rx(0).knobs().hz);
    ifp.deregister(7).unwrap();
    assert_eq!(ifp.timer_hz(0), IDLE_TIMER_HZ);
    assert_eq!(ifp.timer_hz(1), IDLE_TIMER_HZ);
    // The default timers of the CPUs are offset so that they do not align.
    assert_ne!(ifp.rx(0).knobs().hz, ifp.rx(1).knobs().hz);
}

#[test]
fn kern_load_is_measured_against_pollhz_not_hz() {
    let mut ifp = IfPoll::new(1).unwrap();
    set(&mut ifp, "net.ifpoll.0.pollhz", "4000");
    set(&mut ifp, "net.ifpoll.0.rx.each_burst", "10");
    ifp.register(0, 0).unwrap();
    // burst starts at 5: one chunk of 5 frames at 20 us each = 100 us = 40 % of a 250 us
    // tick at pollhz 4000 (it would be 10 % of a 1 ms HZ tick).
    let mut h = Recorder {
        rx_ns: 20_000,
        ..Recorder::default()
    };
    ifp.tick(0, 0, 1);
    while ifp.run(0, h.now, &mut h) {}
    assert_eq!(h.calls, vec![Call::Tx(0), Call::Rx(0, 5)]);
    assert_eq!(ifp.rx(0).state().kern_load, 40);
    let kern_frac = ifp
        .entries()
        .into_iter()
        .find(|e| e.name == "net.ifpoll.0.rx.kern_frac")
        .unwrap();
    assert_eq!(kern_frac.value, "40");
}

#[test]
fn a_busy_serializer_skips_the_interface_for_one_chunk_not_the_cycle() {
    let mut ifp = IfPoll::new(1).unwrap();
    set(&mut ifp, "net.ifpoll.0.rx.each_burst", "2");
    ifp.register(0, 0).unwrap();
    ifp.register(1, 0).unwrap();
    let mut h = Recorder::default();
    // Grow burst to 6 over earlier cycles (one step per cycle, cheap handlers).
    let mut now = 0;
    while ifp.rx(0).state().burst < 6 {
        ifp.tick(0, now, 1);
        while ifp.run(0, now, &mut h) {}
        now += SEC / ifp.rx(0).knobs().hz as u64;
    }
    h.calls.clear();
    // Interface 1's serializer is held during the first chunk of the next cycle.
    h.busy = vec![(Kind::Rx, 1)];
    ifp.tick(0, now, 1);
    while ifp.run(0, now, &mut h) {}
    let rx: Vec<&Call> = h
        .calls
        .iter()
        .filter(|c| matches!(c, Call::Rx(..)))
        .collect();
    assert_eq!(
        rx,
        vec![
            &Call::Rx(0, 2),
            // chunk 1: interface 1 skipped
            &Call::Rx(0, 2),
            &Call::Rx(1, 2),
            &Call::Rx(0, 2),
            &Call::Rx(1, 2),
        ]
    );
    assert_eq!(ifp.counters(0).rx_busy, 1);
    // A busy TX serializer skips that one TX call only.
    h.calls.clear();
    h.busy = vec![(Kind::Tx, 0)];
    ifp.tick(0, now + 1_000_000, 1);
    assert!(
        ifp.run(0, now + 1_000_000, &mut h),
        "the TX round runs first"
    );
    assert_eq!(h.calls, vec![Call::Tx(1)]);
    assert_eq!(ifp.counters(0).tx_busy, 1);
}

#[test]
fn writes_are_clamped_like_dragonfly_and_unknown_names_refused() {
    let mut ifp = IfPoll::new(2).unwrap();
    set(&mut ifp, "net.ifpoll.0.pollhz", "99999");
    assert_eq!(ifp.rx(0).knobs().hz, 30_000);
    set(&mut ifp, "net.ifpoll.1.rx.burst_max", "3");
    assert_eq!(ifp.rx(1).knobs().burst_max, 10);
    assert_eq!(
        ifp.rx(1).knobs().each_burst,
        10,
        "each_burst clipped to burst_max"
    );
    set(&mut ifp, "net.ifpoll.1.rx.each_burst", "0");
    assert_eq!(ifp.rx(1).knobs().each_burst, 1);
    assert!(matches!(
        ifp.set("net.ifpoll.1.status_frac", "5"),
        Err(KnobError::Unknown { .. })
    ));
    assert!(matches!(
        ifp.set("net.ifpoll.2.pollhz", "5"),
        Err(KnobError::Unknown { .. })
    ));
    assert!(matches!(
        ifp.set("net.ifpoll.0.rx.burst", "5"),
        Err(KnobError::ReadOnly { .. })
    ));
    assert!(matches!(
        ifp.set("net.ifpoll.0.rx.user_frac", "100"),
        Err(KnobError::Invalid { .. })
    ));
    assert!(matches!(
        ifp.set("net.ifpoll.0.tx_frac", "often"),
        Err(KnobError::NotANumber { .. })
    ));
    assert_eq!(
        ifp.register(3, 2),
        Err(IfPollRegError::NoSuchCpu { cpu: 2, cpus: 2 })
    );
    ifp.register(3, 0).unwrap();
    assert_eq!(
        ifp.register(3, 1),
        Err(IfPollRegError::Table(RegError::Eexist))
    );
    assert!(IfPoll::new(0).is_err() && IfPoll::new(33).is_err());
}
