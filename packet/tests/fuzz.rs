//! A short run of the frame-path fuzzer (`examples/fuzz_frames`; `scripts/fuzz.sh` runs
//! the long one), with a fixed seed so a failure replays, and one with a fresh seed.

mod common;
#[path = "../examples/fuzz_frames/harness.rs"]
mod harness;

#[test]
fn two_hundred_thousand_mutated_frames_keep_every_invariant() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for seed in [1, seed] {
        let summary = harness::run(seed, 100_000, &mut |_| {}).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(summary.inputs, 100_000);
        assert!(
            summary.forwarded > 1_000,
            "the corpus reaches forwarding: {summary:?}"
        );
        assert!(summary.fragments > 100, "and fragmentation: {summary:?}");
        assert!(
            summary.forwarded6 > 1_000,
            "and IPv6 forwarding: {summary:?}"
        );
    }
}
