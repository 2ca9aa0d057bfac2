//! One scenario through both executors: the real-time poll thread on a device whose
//! interrupt is an eventfd, and the simulator's virtual CPU on a simulated NIC. Both run
//! the dataplane's one loop (`Dataplane::drive`), so what the loop decides comes out the
//! same on both: the frames received and accounted, the interrupts and tasks a burst
//! takes in each mode, the polling, and the one look between two ticks that a poll cycle
//! at light traffic asks for (which only an executor that arms the look's timer and
//! reports it gets).

use std::sync::atomic::Ordering;
use std::time::Duration;

use polld_core::{Dataplane, Device, IfCounters, Mode, Poller};
use polld_packet::config::PacketConfig;
use polld_packet::Stage;
use polld_runtime::executor::{DaemonInfo, Executor, IfInfo};
use polld_runtime::sys::Signals;
use polld_sim::{Arrivals, CpuCosts, NicConfig, Sim, UserTask};
use polld_testsupport::eventually;

mod common;
use common::Burst;

/// Frames in the burst on interface 0: fewer than a simulated NIC's ring holds.
const BURST: usize = 200;
/// A slow tick, so that a look half-way through it comes long after the cycle, however
/// loaded the machine.
const KNOBS: [(&str, &str); 2] = [("kern.polling.hz", "100"), ("kern.polling.looks", "1")];

/// What the loop decided, as both executors must report it.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    mode: Mode,
    rx: u64,
    unaccounted: i64,
    interrupts: u64,
    tasks: u64,
    polled: bool,
    look_cycles: u64,
}

impl Outcome {
    fn of<D: Device, S: polld_core::PacketStage>(dp: &Dataplane<D, S>) -> Outcome {
        let c: IfCounters = dp.interfaces()[0].counters();
        Outcome {
            mode: dp.interfaces()[0].mode(),
            rx: c.rx_packets,
            unaccounted: c.unaccounted(),
            interrupts: c.interrupts,
            tasks: c.tasks,
            polled: c.polls > 0,
            look_cycles: dp.poller().state().look_cycles,
        }
    }
}

/// The burst through the real-time executor, in `mode`, until the frames are in and
/// three ticks passed.
fn real_time(mode: Mode) -> Outcome {
    let (signals, relay) = Signals::relay().unwrap();
    let input = Burst::new("in0", BURST);
    let left = input.left.clone();
    let thread = std::thread::spawn(move || {
        let config: PacketConfig = toml::from_str(
            "[[interfaces]]\nname = \"in0\"\nmac = \"02:00:00:00:00:01\"\n\
             [[interfaces]]\nname = \"out0\"\nmac = \"02:00:00:00:00:02\"",
        )
        .unwrap();
        let stage = Stage::new(&config, &["in0", "out0"]).unwrap();
        let devices: Vec<Box<dyn Device>> = vec![Box::new(input), Box::new(Burst::new("out0", 0))];
        let mut dp = Dataplane::new(Poller::default(), devices, stage);
        for (knob, value) in KNOBS {
            dp.sysctl_set(knob, value).unwrap();
        }
        dp.set_mode(0, mode).unwrap();
        let info = ["in0", "out0"].map(|name| IfInfo {
            name: name.into(),
            ..IfInfo::default()
        });
        let mut exec = Executor::new(
            dp,
            info.to_vec(),
            DaemonInfo::default(),
            signals,
            None,
            None,
        )
        .unwrap();
        exec.run().unwrap();
        Outcome::of(exec.dataplane_mut())
    });
    eventually(
        &format!("{mode:?}: the burst is received"),
        Duration::from_secs(10),
        || left.load(Ordering::SeqCst) == 0,
    );
    std::thread::sleep(Duration::from_millis(30));
    relay.send(libc::SIGTERM);
    thread.join().unwrap()
}

/// The burst on the virtual CPU, in `mode`, for 100 ms of virtual time.
fn simulated(mode: Mode) -> Outcome {
    let mut input = NicConfig::new("in0", Arrivals::None);
    input.mode = mode;
    let output = NicConfig::new("out0", Arrivals::None);
    let mut sim = Sim::new(
        Poller::default(),
        vec![input, output],
        vec![None, None],
        CpuCosts::default(),
        UserTask::None,
        1,
    );
    let dp = sim.dataplane_mut();
    for (knob, value) in KNOBS {
        dp.sysctl_set(knob, value).unwrap();
    }
    dp.set_mode(0, mode).unwrap();
    dp.interface_mut(0).dev_mut().inject(BURST);
    sim.run_until(100_000_000);
    Outcome::of(sim.dataplane())
}

#[test]
fn a_burst_comes_out_the_same_on_the_real_time_executor_and_the_virtual_cpu() {
    for mode in [Mode::Interrupt, Mode::Adaptive, Mode::Polling] {
        let sim = simulated(mode);
        let real = real_time(mode);
        assert_eq!(real, sim, "{mode:?}");
        assert_eq!(sim.rx, BURST as u64, "{mode:?}");
        assert_eq!(sim.unaccounted, 0, "{mode:?}");
    }
    // What each mode decides, so that the agreement is not on nothing.
    let [interrupt, adaptive, polling] =
        [Mode::Interrupt, Mode::Adaptive, Mode::Polling].map(simulated);
    assert_eq!((interrupt.interrupts, interrupt.tasks), (1, 0));
    assert_eq!((adaptive.interrupts, adaptive.tasks), (1, 2));
    assert!(polling.polled && polling.interrupts == 0);
    assert_eq!(
        polling.look_cycles, 1,
        "one look after the cycle that emptied the ring"
    );
}
