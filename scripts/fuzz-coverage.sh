#!/bin/sh
# Coverage-guided fuzzing with libFuzzer (cargo-fuzz on the nightly toolchain): each target
# of fuzz/ runs RUNS inputs (default 10^7), starting from and adding to its corpus in
# fuzz/corpus/TARGET, which the repository keeps. A crash stops the run and leaves the input
# in fuzz/artifacts/TARGET; replay it with
#   cargo +nightly fuzz run -O TARGET fuzz/artifacts/TARGET/crash-...
#
#   scripts/fuzz-coverage.sh [RUNS [TARGET...]]     default: every target
# Needs: rustup's nightly toolchain, and cargo-fuzz (`cargo install cargo-fuzz`, done here
# if missing).
set -eu
cd "$(dirname "$0")/../fuzz"
runs=${1:-10000000}
[ $# -gt 0 ] && shift
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
targets=${*:-$(cargo +nightly fuzz list)}
for target in $targets; do
  mkdir -p "corpus/$target"
  echo "== $target: $runs inputs"
  cargo +nightly fuzz run -O "$target" "corpus/$target" -- -runs="$runs" -max_len=4096 \
    -print_final_stats=1
  cargo +nightly fuzz cmin -O "$target" "corpus/$target" >/dev/null 2>&1
done
