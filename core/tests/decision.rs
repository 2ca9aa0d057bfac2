//! The scheduling decision (`polld_core::dataplane::decision`), driven on virtual time
//! through every work kind: what is due when several things are, and in which order.

use polld_core::dataplane::TASK_SLICE;
use polld_core::{Dataplane, Device, Due, Emit, Frozen, Mode, PacketStage, Poller, Verdict};
use polld_testsupport::TestDevice;

const MS: u64 = 1_000_000;

/// Every frame is for the box; the stage records the clock it was given.
#[derive(Default)]
struct ForTheBox {
    now: u64,
}

impl PacketStage for ForTheBox {
    fn process(&mut self, _input: usize, _frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        Verdict::Local
    }
    fn set_now(&mut self, now_ns: u64) {
        self.now = now_ns;
    }
}

/// Interfaces 0..n in the given modes, with the given knobs, and no wakeup watchdog
/// (whose place in the order has a test of its own).
fn dataplane(modes: &[Mode], knobs: &[(&str, &str)]) -> Dataplane<TestDevice, ForTheBox> {
    let devices = (0..modes.len())
        .map(|i| TestDevice::new(&format!("if{i}")))
        .collect();
    let mut dp = Dataplane::new(Poller::default(), devices, ForTheBox::default());
    let no_watchdog = ("kern.polling.wakeup_watchdog_ms", "0");
    for (k, v) in std::iter::once(&no_watchdog).chain(knobs) {
        dp.sysctl_set(k, v).unwrap();
    }
    for (i, &mode) in modes.iter().enumerate() {
        dp.set_mode(i, mode).unwrap();
    }
    dp
}

fn inject(dp: &mut Dataplane<TestDevice, ForTheBox>, i: usize, frames: usize) {
    let ring = &mut dp.interface_mut(i).dev_mut().rx;
    ring.extend((0..frames).map(|_| vec![0u8; 60]));
}

/// Runs what is due at `now` until nothing is or spinning work comes up; returns the kinds
/// run, each run of the same kind once.
fn run_due(dp: &mut Dataplane<TestDevice, ForTheBox>, now: u64) -> Vec<Due> {
    let mut seen: Vec<Due> = Vec::new();
    while let Some(due) = dp.next_due() {
        if due.spins() {
            seen.push(due);
            break;
        }
        dp.step(due, &mut Frozen(now));
        assert_eq!(dp.stage().now, now, "{due:?} set the stage's clock");
        if seen.last() != Some(&due) {
            seen.push(due);
        }
    }
    seen
}

/// Ticks every millisecond until polling goes quiet (`quiet_cycles` 2); returns the time.
fn tick_until_quiet(dp: &mut Dataplane<TestDevice, ForTheBox>) -> u64 {
    let mut now = 0;
    while !dp.poller().state().quiet {
        now += MS;
        dp.raise_ticks(1);
        run_due(dp, now);
        assert!(now < 100 * MS, "two empty cycles make polling quiet");
    }
    now
}

fn conserved(dp: &Dataplane<TestDevice, ForTheBox>) {
    for iface in dp.interfaces() {
        assert_eq!(iface.counters().unaccounted(), 0, "{}", iface.dev().name());
    }
}

#[test]
fn every_kind_of_accounted_work_runs_in_the_documented_order() {
    // Input queue on (fastforwarding=0) so the netisr has protocol work too.
    let mut dp = dataplane(
        &[Mode::Interrupt, Mode::Adaptive, Mode::Polling],
        &[
            ("net.inet.ip.fastforwarding", "0"),
            ("net.inet.ip.intr_queue_maxlen", "1000"),
        ],
    );
    dp.sysctl_set("dev.if1.rx_process_limit", "10").unwrap();
    inject(&mut dp, 0, 100); // two handler batches of 64
    inject(&mut dp, 1, 15); // two task runs of 10
    inject(&mut dp, 2, 3);
    assert_eq!(dp.next_due(), None, "nothing raised, nothing due");
    // Everything at once: a tick, both interrupt lines (the higher line raised first).
    dp.interrupt_line(1, true);
    dp.interrupt_line(0, true);
    dp.raise_ticks(1);
    let order = run_due(&mut dp, 5 * MS);
    assert_eq!(
        order,
        [
            Due::Tick(1),
            Due::Interrupt(0),
            Due::Handler(0),
            Due::Interrupt(1),
            Due::Task(1),
            Due::PollChunk,
            Due::InputQueue,
            Due::Pollmore,
        ]
    );
    assert_eq!(dp.next_due(), None);
    let c: Vec<_> = dp.interfaces().iter().map(|i| i.counters()).collect();
    assert_eq!((c[0].interrupts, c[0].local), (1, 100));
    assert_eq!((c[1].interrupts, c[1].tasks, c[1].local), (1, 2, 15));
    assert_eq!(c[2].local, 3);
    conserved(&dp);
}

#[test]
fn a_tick_preempts_a_running_handler_and_the_queue_yields_to_interrupts() {
    let mut dp = dataplane(
        &[Mode::Interrupt, Mode::Interrupt],
        &[
            ("net.inet.ip.fastforwarding", "0"),
            ("net.inet.ip.intr_queue_maxlen", "1000"),
        ],
    );
    inject(&mut dp, 1, 200);
    dp.interrupt_line(1, true);
    assert_eq!(dp.next_due(), Some(Due::Interrupt(1)));
    dp.step(Due::Interrupt(1), &mut Frozen(0));
    // The handler is mid-ring: a tick outranks it (with nothing registered it is cheap).
    dp.raise_ticks(2);
    assert_eq!(dp.next_due(), Some(Due::Tick(2)));
    dp.step(Due::Tick(2), &mut Frozen(0));
    assert_eq!(dp.next_due(), Some(Due::Handler(1)));
    while dp.next_due() == Some(Due::Handler(1)) {
        dp.step(Due::Handler(1), &mut Frozen(0));
    }
    // The queue drains one frame at a time, so a new interrupt gets in between.
    assert_eq!(dp.next_due(), Some(Due::InputQueue));
    dp.step(Due::InputQueue, &mut Frozen(0));
    assert_eq!(dp.queue_len(), 199);
    inject(&mut dp, 0, 1);
    dp.interrupt_line(0, true);
    assert_eq!(dp.next_due(), Some(Due::Interrupt(0)));
    dp.step_accounted(&mut Frozen(0));
    assert_eq!(dp.queue_len(), 0);
    conserved(&dp);
}

#[test]
fn finishing_ends_running_handlers_and_tasks_and_drains_the_queue() {
    let mut dp = dataplane(
        &[Mode::Interrupt, Mode::Adaptive, Mode::Polling],
        &[
            ("net.inet.ip.fastforwarding", "0"),
            ("net.inet.ip.intr_queue_maxlen", "1000"),
        ],
    );
    dp.sysctl_set("dev.if1.rx_process_limit", "10").unwrap();
    inject(&mut dp, 0, 200);
    inject(&mut dp, 1, 50);
    inject(&mut dp, 2, 5);
    dp.interrupt_line(0, true);
    dp.interrupt_line(1, true);
    dp.step(Due::Interrupt(0), &mut Frozen(0));
    dp.step(Due::Interrupt(1), &mut Frozen(0));
    dp.step(Due::Task(1), &mut Frozen(0));
    dp.raise_ticks(3);
    dp.interrupt_line(0, true);
    // Mid-flood: the handler and the task would run on while their rings hold frames.
    assert_eq!(dp.next_due(), Some(Due::Tick(3)));
    assert_eq!(dp.queue_len(), 64 + 10);
    dp.finish(MS);
    assert_eq!(dp.next_due(), None, "nothing left to run");
    assert_eq!(dp.queue_len(), 0, "what was received is processed");
    let c: Vec<_> = dp.interfaces().iter().map(|i| i.counters()).collect();
    assert_eq!((c[0].local, c[1].local, c[2].local), (64, 10, 0));
    // What the rings still hold was never received: it is the devices', not lost.
    assert_eq!(dp.interface_mut(0).dev_mut().rx.len(), 136);
    assert_eq!(dp.interface_mut(1).dev_mut().rx.len(), 40);
    conserved(&dp);
}

#[test]
fn an_unlimited_task_run_goes_on_in_slices_that_a_tick_can_come_between() {
    let mut dp = dataplane(&[Mode::Adaptive], &[]);
    dp.sysctl_set("dev.if0.rx_process_limit", "-1").unwrap();
    inject(&mut dp, 0, 2 * TASK_SLICE + 100);
    dp.interrupt_line(0, true);
    dp.step(Due::Interrupt(0), &mut Frozen(0));
    dp.step(Due::Task(0), &mut Frozen(0));
    assert_eq!(dp.interfaces()[0].counters().local, TASK_SLICE as u64);
    // Between slices the run stays queued, below a tick.
    dp.raise_ticks(1);
    assert_eq!(dp.next_due(), Some(Due::Tick(1)));
    assert_eq!(run_due(&mut dp, 0), [Due::Tick(1), Due::Task(0)]);
    let c = dp.interfaces()[0].counters();
    assert_eq!(c.local, 2 * TASK_SLICE as u64 + 100);
    assert_eq!((c.tasks, c.interrupts), (1, 1), "one run, in three slices");
    assert!(dp.interrupt_armed(0), "re-armed once drained");
    conserved(&dp);
}

#[test]
fn a_masked_line_is_ignored_and_an_interrupt_without_frames_is_not_counted() {
    let mut dp = dataplane(&[Mode::Interrupt, Mode::Polling], &[]);
    // Polling masks interface 1: its raised line is nobody's work (polling is not quiet).
    dp.interrupt_line(1, true);
    assert_eq!(dp.next_due(), None);
    // A transmit completion raises the line with an empty ring: no handler, not counted.
    dp.interrupt_line(0, true);
    assert_eq!(dp.next_due(), Some(Due::Interrupt(0)));
    dp.step(Due::Interrupt(0), &mut Frozen(0));
    assert_eq!(dp.next_due(), None);
    assert_eq!(dp.interfaces()[0].counters().interrupts, 0);
}

#[test]
fn busy_polling_round_robins_after_accounted_work_and_idle_polling_waits_for_an_idle_cpu() {
    let mut dp = dataplane(&[Mode::Busy, Mode::Interrupt, Mode::Busy], &[]);
    inject(&mut dp, 1, 1);
    dp.interrupt_line(1, true);
    dp.raise_idle();
    assert_eq!(run_due(&mut dp, 0), [Due::Interrupt(1), Due::Busy(0)]);
    let mut turns = Vec::new();
    for _ in 0..4 {
        let due = dp.next_due().unwrap();
        dp.step(due, &mut Frozen(0));
        turns.push(due);
    }
    assert_eq!(
        turns,
        [Due::Busy(0), Due::Busy(2), Due::Busy(0), Due::Busy(2)]
    );
    assert!(
        dp.next_due().is_some_and(Due::spins),
        "nothing but busy polling is due"
    );

    // Idle polling: only once the CPU was reported idle, and once per report.
    let mut dp = dataplane(&[Mode::Polling], &[("kern.polling.idle_poll", "1")]);
    assert_eq!(dp.next_due(), None);
    dp.raise_idle();
    assert_eq!(dp.next_due(), Some(Due::IdlePoll));
    inject(&mut dp, 0, 4);
    assert_eq!(dp.step(Due::IdlePoll, &mut Frozen(0)).work.rx, 4);
    assert_eq!(dp.next_due(), None);
    conserved(&dp);
}

#[test]
fn a_quiet_poller_wakes_on_its_interrupt_line() {
    let mut dp = dataplane(
        &[Mode::Polling, Mode::Interrupt],
        &[("kern.polling.quiet_cycles", "2")],
    );
    let now = tick_until_quiet(&mut dp);
    assert!(dp.wakeup_armed(0));
    inject(&mut dp, 0, 1);
    inject(&mut dp, 1, 1);
    dp.interrupt_line(1, true);
    dp.interrupt_line(0, true);
    // The wakeup outranks the other interface's interrupt; it is not an interrupt of if0.
    assert_eq!(
        run_due(&mut dp, now),
        [
            Due::QuietWakeup(0),
            Due::Interrupt(1),
            Due::PollChunk,
            Due::Pollmore
        ]
    );
    assert_eq!(dp.poller().state().quiet_wakeups, 1);
    assert_eq!(dp.interfaces()[0].counters().interrupts, 0);
    assert_eq!(dp.interfaces()[0].counters().local, 1);
    conserved(&dp);
}

/// With idle polling on, a quiet spell's first interrupt resumes polling; it is not also
/// one of the idle poller's wakeups (those are bounded per tick by `idle_wakeups`).
#[test]
fn a_quiet_wakeup_is_not_also_counted_as_an_idle_poller_wakeup() {
    let mut dp = dataplane(
        &[Mode::Polling],
        &[
            ("kern.polling.quiet_cycles", "2"),
            ("kern.polling.idle_poll", "1"),
        ],
    );
    let now = tick_until_quiet(&mut dp);
    assert!(dp.poller().state().idlepoll_sleeping);
    inject(&mut dp, 0, 1);
    dp.interrupt_line(0, true);
    assert_eq!(run_due(&mut dp, now)[0], Due::QuietWakeup(0));
    let state = *dp.poller().state();
    assert_eq!(state.quiet_wakeups, 1);
    assert_eq!(state.idlepoll_wakeups, 0, "{state:?}");
    conserved(&dp);
}

/// Runs what is due at time 0, telling the dataplane each piece took `ns`.
fn run_timed(dp: &mut Dataplane<TestDevice, ForTheBox>, ns: impl Fn(Due) -> u64) {
    while let Some(due) = dp.next_due().filter(|d| !d.spins()) {
        dp.step(due, &mut Frozen(0));
        dp.ran(due, ns(due));
    }
}

#[test]
fn auto_judges_the_threads_cpu_less_what_was_not_its_interrupt_work() {
    // hz 1000, user_frac 50, auto_window_ticks 4: interrupt work over 2 ms of a 4-ms window
    // switches; the thread used 2.8 ms of it, the auto interface's handlers timed 10 us a
    // batch, those of if1 (interrupt mode, when it has frames) `other_ns` a batch.
    let window = 4 * MS;
    let cpu = 2_800_000;
    let after_a_window = |outside: u64, other_ns: u64| {
        let mut dp = dataplane(&[Mode::Auto, Mode::Interrupt], &[]);
        let on_if1 = |due: Due| matches!(due, Due::Interrupt(1) | Due::Handler(1));
        inject(&mut dp, 0, 10);
        dp.interrupt_line(0, true);
        if other_ns > 0 {
            inject(&mut dp, 1, 10);
            dp.interrupt_line(1, true);
        }
        run_timed(&mut dp, |due| if on_if1(due) { other_ns } else { 10_000 });
        dp.ran_outside(outside);
        assert!(!dp.auto_window_due(window - 1) && dp.auto_window_due(window));
        dp.close_auto_window(window, cpu);
        conserved(&dp);
        dp.interfaces()[0].polls()
    };
    // The wakeups around the handlers count: 2.8 ms of the thread's CPU, 10 us timed.
    assert!(
        after_a_window(0, 0),
        "the auto interface took the interrupts"
    );
    // Control requests and status checks (2.4 ms of it) do not.
    assert!(!after_a_window(2_400_000, 0));
    // Nor does another mode's interrupt work (1 ms a batch of if1's) make the auto
    // interface, which took interrupts too, poll.
    assert!(!after_a_window(0, 1_000_000));
}

#[test]
fn a_refused_polling_enable_leaves_an_auto_interface_polling() {
    // if0 in auto, if1..=127 polling, if128 on interrupts: kern.polling.enable=1 must
    // register if128, which the full table (128) refuses, and every interface goes back.
    let mut modes = vec![Mode::Auto];
    modes.extend(std::iter::repeat_n(Mode::Polling, 127));
    modes.push(Mode::Interrupt);
    let mut dp = dataplane(&modes, &[]);
    // if0's interrupt work overloads a window: it polls.
    inject(&mut dp, 0, 10);
    dp.interrupt_line(0, true);
    while let Some(due) = dp
        .next_due()
        .filter(|d| matches!(d, Due::Interrupt(0) | Due::Handler(0)))
    {
        dp.step(due, &mut Frozen(0));
        dp.ran(due, 0);
    }
    dp.close_auto_window(4 * MS, 4 * MS);
    assert!(dp.interfaces()[0].polls());
    let table: Vec<usize> = dp.poller().table().to_vec();
    assert_eq!(table.len(), 128);

    assert!(dp.sysctl_set("kern.polling.enable", "1").is_err());
    let if0 = &dp.interfaces()[0];
    assert_eq!(if0.mode(), Mode::Auto);
    assert!(if0.polls(), "auto's polling state survives the rollback");
    assert!(!dp.interrupt_armed(0));
    assert_eq!(dp.poller().table(), &table[..], "the table as it was");
    assert_eq!(if0.counters().auto_switches, 1);
    assert_eq!(dp.interfaces()[128].mode(), Mode::Interrupt);
}

#[test]
fn one_window_overestimated_does_not_keep_a_light_load_polled() {
    // hz 1000, user_frac 50, windows of 4 ms: a 2-ms limit. 10 frames a millisecond (10
    // kpps) whose interrupts cost the thread 200 us a window (5 %), then one window whose
    // CPU clock ran 3 ms (75 %) for the same frames: CPU the kernel charged to the thread
    // that was not its interrupt work (a NAPI poll's rest, an interrupt's softirq). It
    // switches to polling; the frames the next window polls, at the cost per frame of the
    // windows that carried them, fit under half the limit: back on interrupts. (At the
    // overestimated window's own cost, 75 us a frame, they never would, and at 10 frames a
    // tick no run of 20 empty polls ever comes: polled for as long as the load lasts.)
    let mut dp = dataplane(&[Mode::Auto], &[]);
    let (mut now, mut cpu) = (0, 0);
    let mut window = |dp: &mut Dataplane<TestDevice, ForTheBox>, cpu_used: u64| {
        for _ in 0..4 {
            now += MS;
            inject(dp, 0, 10);
            if dp.interfaces()[0].polls() {
                dp.raise_ticks(1);
            } else {
                dp.interrupt_line(0, true);
            }
            // The pieces take no time and run just before the tick, so that the window
            // closes here, with the CPU this test says it used.
            dp.step_accounted(&mut Frozen(now - 1));
        }
        cpu += cpu_used;
        assert!(dp.auto_window_due(now));
        dp.close_auto_window(now, cpu);
        dp.interfaces()[0].polls()
    };
    for _ in 0..3 {
        assert!(!window(&mut dp, 200_000), "5 % stays on interrupts");
    }
    assert!(window(&mut dp, 3_000_000), "75 % switches to polling");
    assert!(
        !window(&mut dp, 100_000),
        "the next window's 40 frames polled fit on interrupts"
    );
    for _ in 0..5 {
        assert!(!window(&mut dp, 200_000), "and stay there");
    }
    assert_eq!(dp.interfaces()[0].counters().auto_switches, 2);
    // If the 40 frames now really cost 75 % on interrupts, the last window that carried
    // them sends them back once, and no more: polled from their second overload on.
    assert!(window(&mut dp, 3_000_000), "up");
    assert!(!window(&mut dp, 100_000), "back once");
    assert!(window(&mut dp, 3_000_000), "up again");
    for _ in 0..5 {
        assert!(window(&mut dp, 100_000), "and polled from then on");
    }
    assert_eq!(dp.interfaces()[0].counters().auto_switches, 5);
    conserved(&dp);
}

/// A clock that a piece advances by `per_piece` ns when it runs.
struct Stepping {
    now: u64,
    per_piece: u64,
}

impl polld_core::Clocks for Stepping {
    fn now(&mut self) -> u64 {
        self.now
    }
    fn cpu_ns(&mut self) -> u64 {
        self.now
    }
    fn wake(&mut self, _due: Due, start: u64) -> u64 {
        self.now = start + self.per_piece;
        start
    }
}

// The thread's CPU at a tick read, less the time its interrupt-mode pieces took, is what
// the time controller learns as the ticks' cost: an interface on interrupts (auto's spells
// among them) costs with the time between ticks, and counted there it took the polling
// cycles' budget down to its floor (an auto interface under a flood then switched about
// 160 times a second).
#[test]
fn interrupt_work_is_not_counted_as_what_a_tick_costs() {
    let mut dp = dataplane(&[Mode::Interrupt, Mode::Polling], &[]);
    inject(&mut dp, 0, 100);
    dp.interrupt_line(0, true);
    let mut clock = Stepping {
        now: 0,
        per_piece: 200_000,
    };
    let mut pieces = 0;
    while let Some(due @ (Due::Interrupt(0) | Due::Handler(0))) = dp.next_due() {
        dp.step(due, &mut clock);
        pieces += 1;
    }
    assert!(pieces >= 2, "a raised line and its handler's batches ran");
    // 0.1 ms of the thread's CPU beyond the handler's pieces: the average takes an eighth.
    dp.note_tick_cpu(clock.now + 100_000, 1);
    assert_eq!(dp.poller().state().tick_overhead_ns, 100_000 / 8);
    // The next read starts from nothing.
    dp.note_tick_cpu(800_000, 1);
    assert_eq!(
        dp.poller().state().tick_overhead_ns,
        (100_000 / 8 * 7 + 800_000) / 8
    );
}

#[test]
fn the_wakeup_watchdog_is_armed_while_an_interface_waits_for_a_wakeup_and_looks_at_its_rings() {
    let mut dp = dataplane(&[Mode::Interrupt, Mode::Polling], &[]);
    assert_eq!(dp.next_due(), None, "off: nothing to arm");
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "50")
        .unwrap();
    // Below the clock's interrupt and a look, which run first.
    dp.raise_ticks(1);
    dp.raise_look();
    assert_eq!(dp.next_due(), Some(Due::Tick(1)));
    dp.step(Due::Tick(1), &mut Frozen(MS));
    assert_eq!(dp.next_due(), Some(Due::Look));
    dp.step(Due::Look, &mut Frozen(MS));
    assert_eq!(dp.next_due(), Some(Due::Watchdog));
    let armed = dp.step(Due::Watchdog, &mut Frozen(MS));
    assert_eq!(
        armed.look,
        Some(51 * MS),
        "a period from now, on the one-shot timer"
    );
    assert_eq!(run_due(&mut dp, MS), vec![Due::PollChunk, Due::Pollmore]);
    assert_eq!(dp.next_due(), None, "armed once");
    // Frames whose wakeup never came (no line raised): the timer's look finds them.
    inject(&mut dp, 0, 3);
    dp.raise_look();
    let looked = dp.step(Due::Look, &mut Frozen(51 * MS));
    assert_eq!(looked.look, Some(101 * MS), "armed again");
    assert_eq!(run_due(&mut dp, 51 * MS), vec![Due::Handler(0)]);
    let c = dp.interfaces()[0].counters();
    assert_eq!((c.local, c.watchdog_frames, c.interrupts), (3, 3, 0));
    // A new period arms it again; 0 and an interface that polls want none.
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "20")
        .unwrap();
    assert_eq!(
        dp.step(Due::Watchdog, &mut Frozen(60 * MS)).look,
        Some(80 * MS)
    );
    dp.set_mode(0, Mode::Polling).unwrap();
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "30")
        .unwrap();
    assert_ne!(dp.next_due(), Some(Due::Watchdog));
    conserved(&dp);
}

/// A watchdog armed before the knob went to 0 looks at nothing when its timer fires, and
/// a period written after that arms it again.
#[test]
fn the_wakeup_watchdog_turned_off_while_armed_looks_no_more_and_turned_on_looks_again() {
    let mut dp = dataplane(&[Mode::Interrupt], &[]);
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "100")
        .unwrap();
    assert_eq!(dp.step(Due::Watchdog, &mut Frozen(MS)).look, Some(101 * MS));
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "0")
        .unwrap();
    // Frames whose wakeup never came, and the timer armed before the write fires.
    inject(&mut dp, 0, 3);
    dp.raise_look();
    assert_eq!(dp.step(Due::Look, &mut Frozen(101 * MS)).look, None);
    assert_eq!(run_due(&mut dp, 101 * MS), vec![], "off: no look");
    assert_eq!(dp.interfaces()[0].counters().rx_packets, 0);
    dp.sysctl_set("kern.polling.wakeup_watchdog_ms", "100")
        .unwrap();
    assert_eq!(dp.next_due(), Some(Due::Watchdog));
    assert_eq!(
        dp.step(Due::Watchdog, &mut Frozen(200 * MS)).look,
        Some(300 * MS)
    );
    dp.raise_look();
    dp.step(Due::Look, &mut Frozen(300 * MS));
    assert_eq!(run_due(&mut dp, 300 * MS), vec![Due::Handler(0)]);
    assert_eq!(dp.interfaces()[0].counters().watchdog_frames, 3);
    conserved(&dp);
}
