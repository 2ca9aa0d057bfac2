//! The byte counters: `rx_bytes` adds up each frame as long as its device handed it up,
//! `tx_bytes` each frame as long as it was handed to a device that took it, on every path
//! a frame takes out (forwarded as it came, forwarded as parts, generated, sent by a user
//! process, through the input queue or not); a send the device refuses adds nothing, and
//! conservation, which counts frames, holds whatever the bytes.

use polld_core::{Dataplane, Emit, Frozen, Mode, PacketStage, Poller, Verdict};
use polld_testsupport::TestDevice;

/// What interface 0's frames become, by their first byte: `F` forwarded to interface 1,
/// `P` forwarded to it as two parts (a 30-byte head and the rest), `G` answered on
/// interface 0 with a 42-byte frame of polld's own, anything else local.
struct ByFirstByte;

impl PacketStage for ByFirstByte {
    fn process(&mut self, _input: usize, frame: &mut [u8], emit: &mut dyn Emit) -> Verdict {
        match frame[0] {
            b'F' => Verdict::Forward { out: 1 },
            b'P' => {
                let (head, rest) = frame.split_at(30);
                emit.forward_part(1, head);
                emit.forward_part(1, rest);
                Verdict::ForwardEmitted { out: 1 }
            }
            b'G' => {
                emit.emit(0, &[b'g'; 42]);
                Verdict::Consumed
            }
            _ => Verdict::Local,
        }
    }
}

/// Frames of many lengths (60 to 1514 bytes), each kind several times.
fn frames() -> Vec<Vec<u8>> {
    (0..40)
        .map(|k| {
            let kind = [b'F', b'P', b'G', b'L'][k % 4];
            let mut frame = vec![0u8; 60 + k * 37];
            frame[0] = kind;
            frame
        })
        .collect()
}

fn bytes_of<'a>(frames: impl IntoIterator<Item = &'a Vec<u8>>) -> u64 {
    frames.into_iter().map(|f| f.len() as u64).sum()
}

#[test]
fn bytes_are_the_lengths_of_the_frames_the_devices_handed_up_and_took() {
    for fastforwarding in ["1", "0"] {
        let mut input = TestDevice::new("in0");
        input.rx.extend(frames());
        let mut output = TestDevice::new("out0");
        // The output's ring is full at its second send: that frame is not transmitted.
        output.refuse = vec![2];
        let mut dp = Dataplane::new(Poller::default(), vec![input, output], ByFirstByte);
        dp.sysctl_set("net.inet.ip.fastforwarding", fastforwarding)
            .unwrap();
        dp.set_mode(0, Mode::Interrupt).unwrap();
        dp.interrupt_line(0, true);
        while let Some(due) = dp.next_due() {
            dp.step(due, &mut Frozen(0));
        }
        dp.send_from_user(1, &[b'u'; 100]).unwrap();

        let (c_in, c_out) = (dp.interfaces()[0].counters(), dp.interfaces()[1].counters());
        let case = format!("fastforwarding={fastforwarding}");
        assert_eq!(c_in.rx_packets, 40, "{case}");
        assert_eq!(c_in.rx_bytes, bytes_of(&frames()), "{case}");
        assert_eq!((c_out.rx_packets, c_out.rx_bytes), (0, 0), "{case}");
        for (c, iface) in [(c_in, &dp.interfaces()[0]), (c_out, &dp.interfaces()[1])] {
            let sent = &iface.dev().sent;
            assert!(!sent.is_empty(), "{case}");
            assert_eq!(c.tx_packets, sent.len() as u64, "{case}");
            assert_eq!(c.tx_bytes, bytes_of(sent), "{case}: {c:?}");
            assert_eq!(c.unaccounted(), 0, "{case}: {c:?}");
        }
        // The refused send was sent again by nobody: one frame (or part) fewer than asked.
        let out = dp.interfaces()[1].dev();
        assert_eq!(out.sends, out.sent.len() as u64 + 1, "{case}");
    }
}
