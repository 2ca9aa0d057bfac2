//! The forwarder's frame path (IPv4 and IPv6: parse, forward, fragment, ICMP and ICMPv6
//! generation) under coverage guidance, with the invariants of the seeded fuzzer
//! (packet/examples/fuzz_frames/harness.rs): nothing panics, every frame emitted parses
//! and verifies, a forwarded packet leaves within its MTU and changed only where a router
//! may change it, and the counters account for every frame.
//!
//! The forwarder lives from input to input, as the daemon's does, so that its state
//! (learned neighbours, the ICMP rate limit, fragment identifiers) is fuzzed too: a
//! finding that does not replay alone replays with the corpus run before it. An input is
//! one frame. Its first byte says how to feed it: bits 0-1 the input port when bit 2 is set
//! (port 3 is none of the forwarder's), else port 0; bits 3-6 how long after the
//! previous frame it arrives (0 to 120 µs); bit 7 makes the checksum guarding
//! the first checks verify, as the seeded mutator does half the time. The rest is the
//! frame.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;

#[path = "../../packet/tests/common/mod.rs"]
#[allow(dead_code)]
mod common;
#[path = "../../packet/examples/fuzz_frames/harness.rs"]
#[allow(dead_code)]
mod harness;

thread_local! {
    static CHECKER: RefCell<harness::Checker> = RefCell::new(harness::Checker::default());
}

fuzz_target!(|data: &[u8]| {
    let Some((&how, frame)) = data.split_first() else {
        return;
    };
    let input = if how & 4 != 0 {
        usize::from(how & 3)
    } else {
        0
    };
    let mut frame = frame.to_vec();
    if how & 0x80 != 0 {
        harness::fix_checksums(&mut frame);
    }
    let elapsed = 1_000 * u64::from(how & 0x78);
    CHECKER.with_borrow_mut(|checker| {
        if let Err(problem) = checker.check(input, &frame, elapsed) {
            panic!("{problem}");
        }
    });
});
