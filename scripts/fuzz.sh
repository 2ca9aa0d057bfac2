#!/bin/sh
# Fuzzes the forwarder's frame path (IPv4 and IPv6 frames) and the control protocol on
# stable Rust: each fuzzer mutates a seed corpus with a seeded generator, checks its
# invariants after every input, prints its count, time and seed, and exits non-zero on
# a finding (with the input). Replay a finding with the seed it printed.
#
#   scripts/fuzz.sh [ITERATIONS [SEED]]     default: 10^7 inputs each, a fresh seed
set -eu
cd "$(dirname "$0")/.."
iterations=${1:-10000000}
seed=${2:-$(date +%s%N)}
cargo build --release --locked -p polld-packet -p polld-control --example fuzz_frames --example fuzz_control
target/release/examples/fuzz_frames --iterations "$iterations" --seed "$seed"
target/release/examples/fuzz_control --iterations "$iterations" --seed "$seed"
