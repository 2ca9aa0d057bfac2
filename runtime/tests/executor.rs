//! The real executor under a flood that outruns it: interrupt work never finds its ring
//! empty, and the poll thread must still answer `polld ctl` and stop on a signal.

use std::sync::mpsc;
use std::time::Duration;

use polld_control::proto::{Request, Response};
use polld_control::server;
use polld_core::{Dataplane, Device, Mode, Poller};
use polld_packet::config::PacketConfig;
use polld_packet::Stage;
use polld_runtime::executor::{DaemonInfo, Executor, IfInfo};
use polld_runtime::sys::Signals;
use polld_testsupport::eventually;

mod common;
use common::Burst;

/// Runs an executor on one flooded interface in `mode` on a thread of its own; returns
/// what asks it, what stops it, and what it returns when stopped (the signal and the
/// interface's received frames).
fn flooded(
    mode: Mode,
) -> (
    server::Requester,
    polld_runtime::sys::SignalRelay,
    mpsc::Receiver<(i32, u64)>,
) {
    let (requester, inbox) = server::channel().unwrap();
    let (signals, relay) = Signals::relay().unwrap();
    let (stopped_tx, stopped) = mpsc::channel();
    std::thread::spawn(move || {
        let config: PacketConfig =
            toml::from_str("[[interfaces]]\nname = \"flood0\"\nmac = \"02:00:00:00:00:01\"")
                .unwrap();
        let stage = Stage::new(&config, &["flood0"]).unwrap();
        let device: Box<dyn Device> = Box::new(Burst::new("flood0", usize::MAX));
        let mut dp = Dataplane::new(Poller::default(), vec![device], stage);
        dp.set_mode(0, mode).unwrap();
        let info = vec![IfInfo {
            name: "flood0".into(),
            ..IfInfo::default()
        }];
        let mut exec =
            Executor::new(dp, info, DaemonInfo::default(), signals, Some(inbox), None).unwrap();
        let signal = exec.run().unwrap();
        let rx = exec.dataplane_mut().interfaces()[0].counters().rx_packets;
        let _ = stopped_tx.send((signal, rx));
    });
    (requester, relay, stopped)
}

fn received(requester: &server::Requester) -> u64 {
    let answer = requester.ask(Request::List {
        prefix: "dev.flood0.rx_packets".into(),
    });
    let Some(Response::Entries { entries }) = answer else {
        panic!("the poll thread did not answer in time under the flood: {answer:?}");
    };
    entries
        .iter()
        .find(|e| e.name == "dev.flood0.rx_packets")
        .and_then(|e| e.value.parse().ok())
        .expect("dev.flood0.rx_packets is listed")
}

#[test]
fn a_flooded_handler_or_task_still_answers_control_and_stops_on_a_signal() {
    for mode in [Mode::Interrupt, Mode::Adaptive] {
        let (requester, relay, stopped) = flooded(mode);
        let first = received(&requester);
        let second = eventually(
            &format!("{mode:?}: the handler runs between answers"),
            Duration::from_secs(10),
            || Some(received(&requester)).filter(|&n| n > first),
        );
        relay.send(libc::SIGTERM);
        let (signal, rx) = stopped
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_else(|_| panic!("{mode:?}: the poll thread did not stop on SIGTERM"));
        assert_eq!(signal, libc::SIGTERM);
        assert!(rx >= second, "{mode:?}");
    }
}
