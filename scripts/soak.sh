#!/usr/bin/env bash
# Soak: polld forwarding at 2x overload on its own testbed for SECONDS per backend, with
# both interfaces' mode changed every 5 s (interrupt, polling, adaptive, busy, auto, in turn
# through `polld ctl` and `polld ifconfig`). Passes when, for every backend:
#   - polld forwarded something in every 5-second step;
#   - its final counters leave 0 frames unaccounted (polld prints CONSERVATION VIOLATED
#     otherwise) and it exits 0 on SIGINT;
#   - its RSS at the end is within 5 % of its RSS after the first minute (after the first
#     third of the run when SECONDS < 180);
#   - its log has no error line.
#
# Usage: scripts/soak.sh SECONDS [BACKEND...]   (root; default backends: af_xdp af_packet tap)
# POLLD=path/to/polld overrides the binary (default: target/release/polld, built if
# missing). 2x overload: the generator sends at twice polld's capacity, the most it
# forwarded in a calibration that offers 100k, 200k, 400k, 800k frames/s until it falls
# behind. A backend is a config function (backend_BACKEND_config) and a testbed kind
# (backend_BACKEND_devices: veth, or tap for the TAP testbed, where polld opens tap0 in gen
# and tap1 in sink through their `netns` keys). Each backend gets a testbed of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_BACKEND=${1:?usage: scripts/soak.sh SECONDS [BACKEND...]}
shift
BACKENDS=(af_xdp af_packet tap)
[ $# -eq 0 ] || BACKENDS=("$@")
STEP=5
MODES=(interrupt polling adaptive busy auto)
POLLD=${POLLD:-target/release/polld}
[ -x "$POLLD" ] || cargo build --release -p polld
PREFIX="sk$(( $$ % 10000 ))"
WORK=$(mktemp -d /tmp/polld-soak.XXXXXX)
FAILED=0
POLLD_PID=
GEN_PID=

log() { echo "[soak] $*"; }
fail() { echo "[soak] FAIL: $*"; FAILED=1; }

cleanup() {
    [ -n "$GEN_PID" ] && kill "$GEN_PID" 2>/dev/null || true
    [ -n "$POLLD_PID" ] && kill "$POLLD_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    "$POLLD" testbed down --prefix "$PREFIX" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/router_config.sh
source scripts/router_config.sh
veth_config() {
    router_config "$1" "$2" 'name = "veth1"' 'name = "veth2"' "02:00:00:00:02:02"
}
backend_af_xdp_config() { veth_config af_xdp "$1"; }
backend_af_xdp_devices() { echo veth; }
backend_af_packet_config() { veth_config af_packet "$1"; }
backend_af_packet_devices() { echo veth; }
backend_tap_config() {
    router_config tap "$1" "name = \"tap0\"
netns = \"${PREFIX}gen\"" "name = \"tap1\"
netns = \"${PREFIX}sink\"" "02:00:00:00:02:64"
}
backend_tap_devices() { echo tap; }

# The interfaces of the testbed kind in use: the generator's, and polld's two.
GEN_IF=veth0
IN_IF=veth1
OUT_IF=veth2

ctl() { "$POLLD" ctl --socket "$SOCKET" "$@"; }
forwarded() { ctl -n "dev.$IN_IF.forwarded"; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$POLLD_PID/status"; }

# Mode change number N: even steps through ctl, odd ones through ifconfig.
change_mode() {
    local n=$1 mode=${MODES[$(( $1 % ${#MODES[@]} ))]}
    if (( n % 2 == 0 )); then
        ctl "dev.$IN_IF.mode=$mode" "dev.$OUT_IF.mode=$mode" >/dev/null
    else
        "$POLLD" ifconfig --socket "$SOCKET" "$IN_IF" mode "$mode" >/dev/null
        "$POLLD" ifconfig --socket "$SOCKET" "$OUT_IF" mode "$mode" >/dev/null
    fi
    echo "$mode"
}

soak_backend() {
    local backend=$1 devices
    devices=$("backend_${backend}_devices")
    if [ "$devices" = tap ]; then
        GEN_IF=tap0 IN_IF=tap0 OUT_IF=tap1
    else
        GEN_IF=veth0 IN_IF=veth1 OUT_IF=veth2
    fi
    "$POLLD" testbed down --prefix "$PREFIX" >/dev/null 2>&1 || true
    "$POLLD" testbed up --prefix "$PREFIX" --devices "$devices" >/dev/null \
        || { fail "$backend: testbed up --devices $devices failed"; return; }
    SOCKET="$WORK/$backend.sock"
    local config="$WORK/$backend.toml" out="$WORK/$backend.out" err="$WORK/$backend.err"
    "backend_${backend}_config" "$SOCKET" >"$config"
    "$POLLD" run -c "$config" --netns "${PREFIX}fwd" >"$out" 2>"$err" &
    POLLD_PID=$!
    for _ in $(seq 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
    [ -S "$SOCKET" ] || { fail "$backend: polld did not start: $(cat "$err")"; return; }

    # Calibration: polld's capacity C, polling, is the most it forwards while offered
    # 100k, 200k, ... frames/s (until it falls behind); the soak offers 2C.
    local offer before after got capacity=0 rate
    for offer in 100000 200000 400000 800000; do
        "$POLLD" gen "$GEN_IF" --netns "${PREFIX}gen" -i 0 --rate "$offer" --duration 3 >/dev/null 2>&1 &
        GEN_PID=$!
        sleep 1
        before=$(forwarded)
        sleep 1.5
        after=$(forwarded)
        wait "$GEN_PID" || true
        GEN_PID=
        got=$(( (after - before) * 2 / 3 ))
        log "$backend: offered $offer/s, polld forwarded $got/s"
        (( got > capacity )) && capacity=$got
        (( got * 10 >= offer * 9 )) || break
    done
    rate=$(( capacity * 2 ))
    log "$backend: capacity $capacity frames/s; offering $rate/s (2x)"
    [ "$rate" -gt 0 ] || { fail "$backend: nothing forwarded in calibration"; rate=100000; }

    "$POLLD" gen "$GEN_IF" --netns "${PREFIX}gen" -i 0 --rate "$rate" \
        --duration $(( SECONDS_PER_BACKEND + 10 )) >"$WORK/$backend.gen" 2>&1 &
    GEN_PID=$!
    local start=$SECONDS step=0 baseline= baseline_at rss mode last now
    baseline_at=$(( SECONDS_PER_BACKEND < 180 ? SECONDS_PER_BACKEND / 3 : 60 ))
    last=$(forwarded)
    while (( SECONDS - start < SECONDS_PER_BACKEND )); do
        mode=$(change_mode "$step")
        sleep "$STEP"
        now=$(forwarded)
        rss=$(rss_kib)
        log "$backend t=$(( SECONDS - start ))s mode $mode: forwarded +$(( now - last )), RSS ${rss} KiB"
        (( now > last )) || fail "$backend: nothing forwarded in mode $mode"
        last=$now
        if [ -z "$baseline" ] && (( SECONDS - start >= baseline_at )); then
            baseline=$rss
            log "$backend: RSS baseline ${baseline} KiB"
        fi
        step=$(( step + 1 ))
    done
    rss=$(rss_kib)
    kill "$GEN_PID" 2>/dev/null || true
    wait "$GEN_PID" 2>/dev/null || true
    GEN_PID=
    sleep 0.5
    kill -INT "$POLLD_PID"
    if ! wait "$POLLD_PID"; then fail "$backend: polld did not exit 0 on SIGINT"; fi
    POLLD_PID=

    cat "$out"
    grep -q "stopped by SIGINT" "$out" || fail "$backend: no final counters"
    if grep -q "CONSERVATION VIOLATED" "$out"; then fail "$backend: frames unaccounted"; fi
    baseline=${baseline:-$rss}
    local drift=$(( (rss - baseline) * 1000 / baseline ))
    log "$backend: RSS ${baseline} -> ${rss} KiB (${drift}/1000)"
    (( drift <= 50 && drift >= -50 )) || fail "$backend: RSS moved more than 5 %"
    if grep -Ei "error|cannot|fail|panick|violat" "$err"; then fail "$backend: errors in the log"; fi
}

for backend in "${BACKENDS[@]}"; do
    declare -F "backend_${backend}_config" >/dev/null || { fail "unknown backend $backend"; continue; }
    log "== $backend: ${SECONDS_PER_BACKEND} s at 2x overload, mode change every ${STEP} s"
    soak_backend "$backend"
done
if (( FAILED )); then
    log "FAILED"
    exit 1
fi
log "passed: ${BACKENDS[*]}"
