#!/usr/bin/env bash
# Auto mode on real traffic (docs/algorithm.md §7), on a testbed of its own (veth, AF_XDP):
#   1. idle: polld's CPU time over IDLE seconds with no traffic, both interfaces in auto
#      (its threads' schedstat run time, in % of one core); polld realtime on CPU1;
#   2. latency: 10 kpps for 5 s, one-way p99 from `polld sink` on AF_XDP (no block timeout
#      in the figure), ROUNDS rounds alternating interrupt and auto on both interfaces in the
#      same polld, and the median p99 of each mode over the rounds;
# and prints every figure. Each round also shows what could explain its tail: what polld
# did in it (auto's switches and polls on veth1 and veth2, lost and stalled poll ticks:
# counter deltas over the round), how long each thread on the path waited on a run queue
# for a CPU (schedstat: gen, polld, the receive kthreads of fwd/veth1 and sink/veth3, the
# sink), and what the machine did (the share of the round in which some runnable task
# waited for a CPU, /proc/pressure/cpu, and the time the hypervisor took from the CPUs,
# /proc/stat's steal). The summary counts the rounds above 500 µs in each mode and, in
# auto, those that left interrupts: a tail in a round where auto never polled is interrupt
# mode's, and comes the same in interrupt rounds of the run. The flood case (competitor share, delivery against polling) is
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

"$POLLD" testbed up --prefix "$PREFIX" >"$WORK/testbed.out"
# The receive kthreads of the path: fwd/veth1 (gen's frames for polld), sink/veth3
# (polld's frames for the sink), as `testbed up` names them: "napi/veth1-ID (pid N)".
NAPI_PIDS=$(sed -n 's/.*napi\/veth[13]-[0-9]* (pid \([0-9]*\)).*/\1/p' "$WORK/testbed.out" | tr '\n' ' ')
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

# Time the threads of processes PIDS waited on a run queue for a CPU, µs (schedstat's
# second field; 0 for a process gone).
waited_us() {
    local pid
    for pid in "$@"; do cat /proc/"$pid"/task/*/schedstat 2>/dev/null || true; done |
        awk '{ s += $2 } END { printf "%.0f", s / 1e3 }'
}

# Prints the sink's p50, p99, max (µs) and samples, then how long the path's threads
# waited for a CPU in the round (ms): gen (read every 50 ms until it exits), polld, the
# receive kthreads, the sink (read after the last frame, before it exits).
p99_us() {
    "$POLLD" sink veth3 --netns "${PREFIX}sink" --backend af_xdp -i 0 --duration 7 --json >"$WORK/sink.json" 2>/dev/null &
    local sink=$! gen gen_wait=0 w
    # shellcheck disable=SC2086
    local polld_base napi_base
    polld_base=$(waited_us "$POLLD_PID")
    napi_base=$(waited_us $NAPI_PIDS)
    sleep 0.5
    "$POLLD" gen veth0 --netns "${PREFIX}gen" -i 0 --rate 10k --duration 5 >/dev/null 2>&1 &
    gen=$!
    # The last reads may find it exited (a zombie has no threads left): the largest counts.
    while kill -0 "$gen" 2>/dev/null; do
        w=$(waited_us "$gen")
        if [ "$w" -gt "$gen_wait" ]; then gen_wait=$w; fi
        sleep 0.05
    done
    wait "$gen" || true
    sleep 0.5
    # shellcheck disable=SC2086
    local waits="$gen_wait $(( $(waited_us "$POLLD_PID") - polld_base )) $(( $(waited_us $NAPI_PIDS) - napi_base )) $(waited_us "$sink")"
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
print("%.1f %.1f %.1f %d" % (l["p50_ns"] / 1e3, l["p99_ns"] / 1e3, l["max_ns"] / 1e3, l["samples"]), end=" ")' "$WORK/sink.json"
    echo "$waits" | awk '{ printf "%.1f %.1f %.1f %.1f\n", $1 / 1e3, $2 / 1e3, $3 / 1e3, $4 / 1e3 }'
}

# The counters a round's tail may come from, in the order `ctl` prints them.
COUNTERS="dev.veth1.auto_switches dev.veth2.auto_switches dev.veth1.polls dev.veth2.polls
kern.polling.lost_polls kern.polling.stalled"
# One line: polld's counters, then CPU pressure (µs some task waited for a CPU), then
# steal (jiffies of both CPUs) and the monotonic clock (µs).
# shellcheck disable=SC2086
snapshot() {
    echo "$(ctl $COUNTERS | awk '{ printf "%s ", $2 }')" \
        "$(awk '/^some/ { sub("total=", "", $5); print $5 }' /proc/pressure/cpu)" \
        "$(awk '/^cpu / { print $9 }' /proc/stat)" \
        "$(awk '{ printf "%.0f", $1 * 1e6 }' /proc/uptime)"
}

for round in $(seq "$ROUNDS"); do
    for mode in interrupt auto; do
        ctl "dev.veth1.mode=$mode" "dev.veth2.mode=$mode" >/dev/null
        before=$(snapshot)
        read -r p50 p99 max n w_gen w_polld w_napi w_sink < <(p99_us)
        after=$(snapshot)
        read -r sw polls lost stalled waited steal < <(awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" 'BEGIN {
            nb = split(b, x); split(a, y); for (i = 1; i <= nb; i++) d[i] = y[i] - x[i]
            printf "%d %d %d %d %.1f %.2f\n", d[1] + d[2], d[3] + d[4], d[5], d[6],
                100 * d[7] / d[9], 100 * d[8] / hz * 1e6 / d[9] }')
        log "round $round, $mode, 10 kpps: p50 $p50 µs, p99 $p99 µs, max $max µs ($n samples);" \
            "polld: auto_switches $sw, polls $polls, lost_polls $lost, stalled $stalled;" \
            "waited for a CPU: gen $w_gen ms, polld $w_polld ms, receive kthreads $w_napi ms, sink $w_sink ms;" \
            "machine: some task waited for a CPU $waited % of the round, steal $steal % of a CPU"
        echo "$mode $p99 $sw $(awk -v a="$w_napi" -v b="$w_sink" 'BEGIN { print a + b }')" >>"$WORK/p99s"
    done
done
# One round's p99 varies by tens of µs in either mode, and a disturbance of the VM can add
# hundreds to one round; the goal is judged on the median over the rounds of each mode,
# measured alternately in one run (the mean is printed too).
python3 - "$WORK/p99s" <<'PY'
import statistics, sys
TAIL_US = 500
rounds = {"interrupt": [], "auto": []}
for line in open(sys.argv[1]):
    mode, p99, switches, waited = line.split()
    rounds[mode].append((float(p99), int(switches), float(waited)))
p99 = {m: [r[0] for r in v] for m, v in rounds.items()}
med = {m: statistics.median(v) for m, v in p99.items()}
mean = {m: statistics.mean(v) for m, v in p99.items()}
d = med["auto"] - med["interrupt"]
print("[auto] p99 over %d rounds, median (mean): interrupt %.1f (%.1f) µs, auto %.1f (%.1f) µs;"
      " auto - interrupt %+.1f µs (goal <= +20: %s)"
      % (len(p99["auto"]), med["interrupt"], mean["interrupt"], med["auto"], mean["auto"], d,
         "met" if d <= 20 else "not met"))
tail = {m: [r for r in v if r[0] > TAIL_US] for m, v in rounds.items()}
polled = [r for r in tail["auto"] if r[1] > 0]
def waited(rs):
    return "%.1f ms" % statistics.mean(r[2] for r in rs) if rs else "-"
print("[auto] rounds with p99 above %d µs: interrupt %d of %d, auto %d of %d (%d of them left"
      " interrupts); the receive kthreads and the sink waited for a CPU %s a round in the"
      " rounds above it, %s in the others"
      % (TAIL_US, len(tail["interrupt"]), len(rounds["interrupt"]), len(tail["auto"]),
         len(rounds["auto"]), len(polled),
         waited([r for v in tail.values() for r in v]),
         waited([r for v in rounds.values() for r in v if r[0] <= TAIL_US])))
if tail["auto"] and not polled:
    print("[auto] auto stayed on interrupts in each of its rounds above %d µs: that tail is"
          " interrupt mode's%s" % (TAIL_US, ", as in the interrupt rounds above it" if tail["interrupt"] else ""))
PY
kill -INT "$POLLD_PID"
wait "$POLLD_PID" || { log "polld did not exit 0"; exit 1; }
POLLD_PID=
if grep -q "CONSERVATION VIOLATED" "$WORK/polld.out"; then log "frames unaccounted"; exit 1; fi
log "conservation holds"
