#!/usr/bin/env bash
# Auto mode on real traffic (docs/algorithm.md §7), on a testbed of its own (veth, AF_XDP):
#   1. idle: polld's CPU time over IDLE seconds with no traffic, both interfaces in auto
#      (its threads' schedstat run time, in % of one core); polld realtime on CPU1;
#   2. latency: 10 kpps for 5 s, one-way p99 from `polld sink` on AF_XDP (no block timeout
#      in the figure), ROUNDS rounds alternating interrupt and auto on both interfaces in the
#      same polld, and the median p99 of each mode over the rounds;
# and prints every figure. The flood case (competitor share, delivery against polling) is
# cli/tests/promise.rs.
#
# Usage: scripts/auto.sh [IDLE] [ROUNDS]   (root; defaults 10 and 3)
# POLLD=path/to/polld overrides the binary (default: target/release/polld).
set -euo pipefail
cd "$(dirname "$0")/.."

IDLE=${1:-10}
ROUNDS=${2:-3}
POLLD=${POLLD:-target/release/polld}
[ -x "$POLLD" ] || cargo build --release -p polld
PREFIX="au$(( $$ % 10000 ))"
WORK=$(mktemp -d /tmp/polld-auto.XXXXXX)
POLLD_PID=

cleanup() {
    [ -n "$POLLD_PID" ] && kill "$POLLD_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    "$POLLD" testbed down --prefix "$PREFIX" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

log() { echo "[auto] $*"; }

"$POLLD" testbed up --prefix "$PREFIX" >/dev/null
SOCKET="$WORK/polld.sock"
# shellcheck source=scripts/router_config.sh
source scripts/router_config.sh
# Sink's own MAC for the generator's destination: the sink measures what arrives.
router_config af_xdp "$SOCKET" 'name = "veth1"' 'name = "veth2"' "02:00:00:00:02:02" auto >"$WORK/fwd.toml"
# SCHED_FIFO, as recommended: the poll thread's clock then times its own work, not a
# preemption by the generator or the sink.
sed -i 's/^cpu = 1$/cpu = 1\nrealtime = true/' "$WORK/fwd.toml"
"$POLLD" run -c "$WORK/fwd.toml" --netns "${PREFIX}fwd" >"$WORK/polld.out" 2>"$WORK/polld.err" &
POLLD_PID=$!
for _ in $(seq 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
[ -S "$SOCKET" ] || { cat "$WORK/polld.err"; exit 1; }
ctl() { "$POLLD" ctl --socket "$SOCKET" "$@"; }

# Run time of every polld thread, ns.
run_ns() { cat /proc/"$POLLD_PID"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }

sleep 1
before=$(run_ns)
sleep "$IDLE"
after=$(run_ns)
log "idle, auto: polld used $(awk -v d=$(( after - before )) -v s="$IDLE" 'BEGIN { printf "%.3f", d / (s * 1e7) }') % of a core over ${IDLE} s"

p99_us() {
    "$POLLD" sink veth3 --netns "${PREFIX}sink" --backend af_xdp -i 0 --duration 7 --json >"$WORK/sink.json" 2>/dev/null &
    local sink=$!
    sleep 0.5
    "$POLLD" gen veth0 --netns "${PREFIX}gen" -i 0 --rate 10k --duration 5 >/dev/null 2>&1
    wait "$sink" || true
    python3 -c '
import json, sys
last = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][-1]
def find(o):
    if isinstance(o, dict):
        if "p99_ns" in o: return o
        for v in o.values():
            r = find(v)
            if r: return r
    return None
l = find(last)
print("%.1f %.1f %d" % (l["p50_ns"] / 1e3, l["p99_ns"] / 1e3, l["samples"]))' "$WORK/sink.json"
}

for round in $(seq "$ROUNDS"); do
    for mode in interrupt auto; do
        ctl "dev.veth1.mode=$mode" "dev.veth2.mode=$mode" >/dev/null
        read -r p50 p99 n < <(p99_us)
        log "round $round, $mode, 10 kpps: p50 $p50 µs, p99 $p99 µs ($n samples), auto_switches $(ctl -n dev.veth1.auto_switches)"
        echo "$mode $p99" >>"$WORK/p99s"
    done
done
# One round's p99 varies by tens of µs in either mode, and a disturbance of the VM can add
# hundreds to one round; the goal is judged on the median over the rounds of each mode,
# measured alternately in one run (the mean is printed too).
python3 - "$WORK/p99s" <<'PY'
import statistics, sys
p99 = {"interrupt": [], "auto": []}
for line in open(sys.argv[1]):
    mode, value = line.split()
    p99[mode].append(float(value))
med = {m: statistics.median(v) for m, v in p99.items()}
mean = {m: statistics.mean(v) for m, v in p99.items()}
d = med["auto"] - med["interrupt"]
print("[auto] p99 over %d rounds, median (mean): interrupt %.1f (%.1f) µs, auto %.1f (%.1f) µs;"
      " auto - interrupt %+.1f µs (goal <= +20: %s)"
      % (len(p99["auto"]), med["interrupt"], mean["interrupt"], med["auto"], mean["auto"], d,
         "met" if d <= 20 else "not met"))
PY
kill -INT "$POLLD_PID"
wait "$POLLD_PID" || { log "polld did not exit 0"; exit 1; }
POLLD_PID=
if grep -q "CONSERVATION VIOLATED" "$WORK/polld.out"; then log "frames unaccounted"; exit 1; fi
log "conservation holds"
