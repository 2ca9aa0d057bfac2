//! A short run of the control-protocol fuzzer (`examples/fuzz_control`;
//! `scripts/fuzz.sh` runs the long one), with a fixed seed so a failure replays, and one
//! with a fresh seed.

mod common;
#[path = "../examples/fuzz_control/harness.rs"]
mod harness;

#[test]
fn forty_thousand_request_lines_keep_every_invariant() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    for seed in [1, seed] {
        let summary = harness::run(seed, 20_000, &mut |_| {}).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(summary.inputs, 20_000);
        assert!(
            summary.answered > 2_000,
            "requests get through: {summary:?}"
        );
        assert!(
            summary.refused > 100,
            "and bad values are refused: {summary:?}"
        );
    }
}
