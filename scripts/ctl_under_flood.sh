#!/usr/bin/env bash
# Control under a flood that outruns polld: interrupt mode on the TAP testbed, polld gen
# at RATE frames/s into tap0, and a busy loop on polld's CPU so that the interrupt handler
# never finds its ring empty. Times five `polld ctl` reads, a mode change to polling, and
# the exit after SIGINT. Exits 1 if a request was refused or polld did not stop within 5 s.
#
# Usage: scripts/ctl_under_flood.sh [RATE]   (root; default RATE 1300000)
# POLLD=path/to/polld overrides the binary (default: target/release/polld, built if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${1:-1300000}
POLLD=${POLLD:-target/release/polld}
[ -x "$POLLD" ] || cargo build --release -p polld
PREFIX="cf$(( $$ % 10000 ))"
WORK=$(mktemp -d /tmp/polld-ctlflood.XXXXXX)
SOCKET="$WORK/polld.sock"
POLLD_PID= GEN_PID= HOG_PID=
FAILED=0

cleanup() {
    for pid in $HOG_PID $GEN_PID $POLLD_PID; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    "$POLLD" testbed down --prefix "$PREFIX" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# Seconds since $1 (a `date +%s%N` reading), to the millisecond.
since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }

# shellcheck source=scripts/router_config.sh
source scripts/router_config.sh
"$POLLD" testbed up --prefix "$PREFIX" --devices tap >/dev/null
router_config tap "$SOCKET" "name = \"tap0\"
netns = \"${PREFIX}gen\"" "name = \"tap1\"
netns = \"${PREFIX}sink\"" "02:00:00:00:02:64" interrupt >"$WORK/polld.toml"
"$POLLD" run -c "$WORK/polld.toml" --netns "${PREFIX}fwd" >"$WORK/out" 2>"$WORK/err" &
POLLD_PID=$!
for _ in $(seq 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
[ -S "$SOCKET" ] || { echo "polld did not start: $(cat "$WORK/err")"; exit 1; }
cpu=$(awk -F'= *' '/^cpu/ { print $2; exit }' "$WORK/polld.toml")
[ -n "$cpu" ] || { echo "no cpu = line in the router config: cannot place the busy loop"; exit 1; }
taskset -c "$cpu" sh -c 'while :; do :; done' &
HOG_PID=$!
"$POLLD" gen tap0 --netns "${PREFIX}gen" -i 0 --rate "$RATE" --duration 30 >/dev/null 2>&1 &
GEN_PID=$!
sleep 1

ask() {
    local start answer
    start=$(date +%s%N)
    if answer=$("$POLLD" ctl --socket "$SOCKET" "$@" 2>&1); then
        echo "polld ctl $*: $(since "$start") s: $(echo "$answer" | tail -1)"
    else
        echo "polld ctl $*: REFUSED after $(since "$start") s: $answer"
        FAILED=1
    fi
}
for _ in 1 2 3 4 5; do
    ask -n dev.tap0.forwarded
    sleep 0.5
done
ask dev.tap0.mode=polling dev.tap1.mode=polling
ask dev.tap0.mode=interrupt dev.tap1.mode=interrupt
sleep 1
kill -INT "$POLLD_PID"
start=$(date +%s%N)
for _ in $(seq 50); do kill -0 "$POLLD_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$POLLD_PID" 2>/dev/null; then
    echo "polld still running 5 s after SIGINT"
    FAILED=1
else
    wait "$POLLD_PID" || { echo "polld exited non-zero after SIGINT"; FAILED=1; }
    echo "polld exited $(since "$start") s after SIGINT"
fi
POLLD_PID=
cat "$WORK/out"
exit "$FAILED"
