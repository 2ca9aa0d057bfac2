//! Loans through the middleware: devices whose buffers live in one pool still forward
//! without a copy under the pcap writer, which records each lent frame as received and
//! each loan as sent; under the fault injector they forward by copy.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use polld_core::{
    Dataplane, Device, Emit, Frozen, IfCounters, PacketStage, Poller, PoolId, Verdict,
};
use polld_middleware::{FaultConfig, FaultInjector, PcapWriter};

mod common;
#[path = "../../../core/tests/pool_device/mod.rs"]
mod pool_device;

use common::Shared;
use pool_device::{Pool, PoolDevice};

const POOL: PoolId = PoolId(7);

/// Forwards interface 0's frames to interface 1, decrementing byte 0 in place as a router
/// decrements the TTL.
struct Router;

impl PacketStage for Router {
    fn process(&mut self, _input: usize, frame: &mut [u8], _emit: &mut dyn Emit) -> Verdict {
        frame[0] -= 1;
        Verdict::Forward { out: 1 }
    }
}

/// The frames recorded in a classic pcap file (after its 24-byte global header).
fn recorded(file: &Shared) -> Vec<Vec<u8>> {
    let file = file.0.borrow();
    let word = |at: usize| u32::from_ne_bytes(file[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 24;
    let mut frames = Vec::new();
    while at < file.len() {
        let caught = word(at + 8);
        frames.push(file[at + 16..at + 16 + caught].to_vec());
        at += 16 + caught;
    }
    frames
}

fn pool() -> Rc<RefCell<Pool>> {
    Pool::new(POOL.0, 64)
}

/// Puts 10 frames on interface 0's wire (frame k carries k in byte 1), runs its interrupt
/// handler until its ring is empty, and returns both interfaces' counters.
fn forward<D: Device>(
    mut dp: Dataplane<D, Router>,
    wire_in: impl Fn(&mut D) -> &mut VecDeque<Vec<u8>>,
) -> (Dataplane<D, Router>, [IfCounters; 2]) {
    wire_in(dp.interface_mut(0).dev_mut()).extend((0..10).map(|k| vec![64, k as u8, 0, 0]));
    dp.interrupt_line(0, true);
    dp.step_accounted(&mut Frozen(0));
    let counters = [0, 1].map(|i| dp.interfaces()[i].counters());
    (dp, counters)
}

#[test]
fn a_lending_device_under_the_pcap_writer_still_lends_and_every_frame_is_recorded() {
    let pool = pool();
    let files = [Shared::default(), Shared::default()];
    let devices = files
        .iter()
        .map(|file| {
            PcapWriter::new(
                PoolDevice::new("pool0", &pool, 64),
                file.clone(),
                Box::new(|| 0),
            )
        })
        .collect::<io::Result<Vec<_>>>()
        .unwrap();
    assert_eq!(devices[0].capabilities().pool, Some(POOL));
    let dp = Dataplane::new(Poller::default(), devices, Router);
    let (dp, [input, _]) = forward(dp, |dev| &mut dev.inner_mut().wire_in);

    assert_eq!(
        (input.rx_packets, input.forwarded, input.lent),
        (10, 10, 10)
    );
    let output = dp.interfaces()[1].dev();
    assert_eq!(output.inner().sent_lent, 10);
    let received: Vec<Vec<u8>> = (0..10).map(|k| vec![64, k as u8, 0, 0]).collect();
    let sent: Vec<Vec<u8>> = (0..10).map(|k| vec![63, k as u8, 0, 0]).collect();
    assert_eq!(output.inner().sent, sent);
    // Received as handed up, sent as rewritten in place.
    assert_eq!(recorded(&files[0]), received);
    assert_eq!(recorded(&files[1]), sent);
    let stats = [0, 1].map(|i| dp.interfaces()[i].dev().stats());
    assert_eq!((stats[0].rx_records, stats[1].tx_records), (10, 10));
    assert!(pool.borrow().all_free(), "a buffer was lost");
}

#[test]
fn a_lending_device_under_the_fault_injector_forwards_by_copy() {
    let pool = pool();
    let devices = [(), ()].map(|()| {
        FaultInjector::new(PoolDevice::new("pool0", &pool, 64), FaultConfig::default()).unwrap()
    });
    assert_eq!(devices[0].capabilities().pool, None);
    let dp = Dataplane::new(Poller::default(), devices.into(), Router);
    let (dp, [input, _]) = forward(dp, |dev| &mut dev.inner_mut().wire_in);

    assert_eq!((input.rx_packets, input.forwarded, input.lent), (10, 10, 0));
    let output = dp.interfaces()[1].dev().inner();
    assert_eq!(output.sent_lent, 0);
    let sent: Vec<Vec<u8>> = (0..10).map(|k| vec![63, k as u8, 0, 0]).collect();
    assert_eq!(output.sent, sent);
    assert!(pool.borrow().all_free(), "a buffer was lost");
}
