//! The scheduler's two departures from kern_poll, exactly: a handler whose output filled
//! is skipped for the rest of the cycle and the burst does not grow after such a cycle;
//! a chunk that leaves every ring empty ends the cycle. The pollers start from FreeBSD's
//! defaults (the `freebsd` profile: the classic controller, chunks of 5).

use polld_core::{HandlerId, Knobs, PollCmd, PollHandlers, Poller};

/// Handlers with `backlog[id]` frames waiting; `full_after[id]` frames fill its output.
struct Rings {
    backlog: Vec<u32>,
    full_after: Vec<Option<u32>>,
    sent: Vec<u32>,
    calls: Vec<(HandlerId, u32)>,
}

impl Rings {
    fn new(backlog: Vec<u32>, full_after: Vec<Option<u32>>) -> Rings {
        let n = backlog.len();
        Rings {
            backlog,
            full_after,
            sent: vec![0; n],
            calls: Vec::new(),
        }
    }
}

impl PollHandlers for Rings {
    fn poll(&mut self, id: HandlerId, _cmd: PollCmd, count: u32) -> u32 {
        self.calls.push((id, count));
        let n = count.min(self.backlog[id]);
        self.backlog[id] -= n;
        self.sent[id] += n;
        n
    }

    fn take_output_full(&mut self, id: HandlerId) -> bool {
        self.full_after[id].is_some_and(|cap| self.sent[id] > cap)
    }
}

fn poller(knobs: &[(&str, &str)], handlers: usize) -> Poller {
    let mut p = Poller::new(Knobs::freebsd());
    for (k, v) in knobs {
        p.set_knob(k, v).unwrap();
    }
    for id in 0..handlers {
        p.register(id).unwrap();
    }
    p
}

/// Runs one whole cycle at time 0, closing it at 10 us (well within any share).
fn one_cycle(p: &mut Poller, h: &mut Rings) {
    p.hardclock(0, 1);
    while p.netisr_poll(0, h) {
        p.netisr_pollmore(10_000);
    }
}

#[test]
fn a_full_output_skips_its_handler_for_the_rest_of_the_cycle_and_holds_the_burst() {
    for controller in ["classic", "time"] {
        let mut p = poller(
            &[
                ("kern.polling.burst_max", "100"),
                ("kern.polling.each_burst", "10"),
                ("kern.polling.controller", controller),
            ],
            2,
        );
        // Run the classic burst up to 100 on endless backlogs with room to send.
        let mut h = Rings::new(vec![u32::MAX; 2], vec![None, None]);
        for _ in 0..100 {
            one_cycle(&mut p, &mut h);
        }
        let burst = p.state().burst;
        assert_eq!(burst, 100, "{controller}");
        // Handler 0's output takes 25 frames: its third chunk finds it full.
        let mut h = Rings::new(vec![u32::MAX; 2], vec![Some(25), None]);
        one_cycle(&mut p, &mut h);
        let polls_of = |id| h.calls.iter().filter(|c| c.0 == id).count();
        assert_eq!(polls_of(0), 3, "{controller}: skipped after the full chunk");
        assert_eq!(polls_of(1), 10, "{controller}: the other keeps its share");
        assert!(p.state().burst <= burst, "{controller}: no growth");
    }
}

#[test]
fn a_classic_burst_does_not_grow_on_cycles_whose_output_filled() {
    let mut p = poller(&[("kern.polling.each_burst", "10")], 1);
    let mut h = Rings::new(vec![u32::MAX], vec![Some(0)]);
    for _ in 0..50 {
        h.sent[0] = 0;
        one_cycle(&mut p, &mut h);
    }
    assert_eq!(p.state().burst, 5, "stays at its start value");
    assert_eq!(p.state().cycles, 50);
}

#[test]
fn empty_rings_end_the_cycle_after_one_chunk_with_or_without_idle_polling() {
    let knobs = [
        ("kern.polling.burst_max", "1000"),
        ("kern.polling.each_burst", "50"),
    ];
    let mut p = poller(&knobs, 2);
    let mut h = Rings::new(vec![0, 0], vec![None, None]);
    for _ in 0..1000 {
        one_cycle(&mut p, &mut h);
    }
    assert_eq!(p.state().burst, 1000, "the burst still grows, as FreeBSD's");
    assert_eq!(p.state().chunks, 1000, "one chunk a cycle");
    assert_eq!(h.calls.len(), 2000, "one poll per handler a tick");
    // A ring that fills a chunk keeps the cycle going until it runs dry.
    let mut h = Rings::new(vec![120, 0], vec![None, None]);
    one_cycle(&mut p, &mut h);
    assert_eq!(h.calls.len(), 6, "50, 50, 20: three chunks of two polls");
    // Idle polling serves later arrivals (and sleeps on empty rings): the cycle still ends
    // at the first chunk that leaves the rings empty, not after the whole budget.
    p.set_knob("kern.polling.idle_poll", "1").unwrap();
    let mut h = Rings::new(vec![0, 0], vec![None, None]);
    one_cycle(&mut p, &mut h);
    assert_eq!(h.calls.len(), 2);
}
