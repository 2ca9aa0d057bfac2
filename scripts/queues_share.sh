#!/usr/bin/env bash
# Two poll CPUs, each polling one queue of both interfaces, under a flood on both queues,
# with a CPU-bound competitor on each CPU: each CPU's split, measured.
#
# A veth testbed of its own (placement none: veth does a frame's receive work on the CPU
# that sent it), every veth end with two queues (`ethtool -L ... rx 2 tx 2`); polld in fwd
# with `[daemon] cpus = [0, 1]`, realtime, both interfaces polling with BACKEND's split
# (af_xdp: `queues = 2`; af_packet: `fanout = 2`) and `kern.polling.user_frac` USER_FRAC.
# `polld gen --backend af_packet --rate unlimited --flows 8` floods veth0 from CPU0 and from
# CPU1 (an AF_PACKET sender with qdisc bypass transmits on the queue of its CPU, so CPU k's
# generator fills veth1's queue k), and a shell loop spins on each CPU. After a 1 s warm-up
# it measures SECONDS: per CPU, polld's poll thread (its CPU time, `polld.percpu.N.*`), the
# competitor and the generator (their /proc/PID/schedstat), the CPU's softirq time
# (/proc/stat), and what that CPU's queue of veth1 received, forwarded and lost to a full
# ring (`drops.rx_ring_full`). Then it stops
# polld and says whether conservation held on every queue and interface.
#
# Usage: scripts/queues_share.sh [BACKEND] [USER_FRAC] [SECONDS]   (root; 2 CPUs;
# defaults af_xdp 50 5). Run it under `flock -x /tmp/polld-machine.lock` on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."

BACKEND=${1:-af_xdp}
USER_FRAC=${2:-50}
WINDOW=${3:-5}
case $BACKEND in
    af_xdp) SPLIT="queues = 2" ;;
    af_packet) SPLIT="fanout = 2" ;;
    *) echo "BACKEND is af_xdp or af_packet, not $BACKEND" >&2; exit 2 ;;
esac
POLLD=${POLLD:-target/release/polld}
[ -x "$POLLD" ] || cargo build --release -p polld
PREFIX="qs$(( $$ % 10000 ))"
WORK=$(mktemp -d /tmp/polld-queues.XXXXXX)
SOCKET=$WORK/polld.sock
PIDS=()
POLLD_PID=

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    [ -n "$POLLD_PID" ] && kill "$POLLD_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    "$POLLD" testbed down --prefix "$PREFIX" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$POLLD" testbed up --prefix "$PREFIX" --placement none >/dev/null
for end in gen:veth0 fwd:veth1 fwd:veth2 sink:veth3; do
    ip netns exec "$PREFIX${end%%:*}" ethtool -L "${end#*:}" rx 2 tx 2
done

# shellcheck source=scripts/router_config.sh
source scripts/router_config.sh
router_config "$BACKEND" "$SOCKET" "name = \"veth1\"
$SPLIT" "name = \"veth2\"
$SPLIT" "02:00:00:00:02:64" \
    | sed "s/^cpu = 1$/cpus = [0, 1]\nrealtime = true/" \
    | sed "s/^\[knobs\]$/[knobs]\n\"kern.polling.user_frac\" = $USER_FRAC/" >"$WORK/fwd.toml"
"$POLLD" run -c "$WORK/fwd.toml" --netns "${PREFIX}fwd" >"$WORK/report" 2>"$WORK/log" &
POLLD_PID=$!
for _ in $(seq 100); do [ -S "$SOCKET" ] && break; sleep 0.1; done
[ -S "$SOCKET" ] || { cat "$WORK/log"; exit 1; }
ctl() { POLLD_SOCKET=$SOCKET "$POLLD" ctl -n "$@"; }

for cpu in 0 1; do
    ip netns exec "${PREFIX}gen" taskset -c "$cpu" "$POLLD" gen veth0 --backend af_packet \
        --rate unlimited --flows 8 --duration $(( WINDOW + 3 )) -i 0 >/dev/null 2>&1 &
    PIDS+=($!)
done
for cpu in 0 1; do
    taskset -c "$cpu" bash -c 'while :; do :; done' &
    PIDS+=($!)
done
sleep 1

run_ns() { awk '{print $1}' "/proc/$1/schedstat"; }
softirq_ticks() { awk -v c="cpu$1" '$1 == c {print $8}' /proc/stat; }
# The generators run as `ip netns exec` children: their schedstat is the exec'd process's.
sample() {
    local cpu=$1
    echo "$(ctl "polld.percpu.$cpu.thread_cpu_ns") $(run_ns "${PIDS[$((cpu + 2))]}") \
$(run_ns "${PIDS[$cpu]}") $(softirq_ticks "$cpu") $(ctl "dev.veth1.queue$cpu.rx_packets") \
$(ctl "dev.veth1.queue$cpu.forwarded") $(ctl "dev.veth1.queue$cpu.drops.rx_ring_full") $(date +%s%N)"
}
before=("$(sample 0)" "$(sample 1)")
sleep "$WINDOW"
after=("$(sample 0)" "$(sample 1)")

hz=$(getconf CLK_TCK)
echo "$BACKEND, $SPLIT on veth1 and veth2, [daemon] cpus = [0, 1], realtime, user_frac $USER_FRAC; a flood and a competitor on each CPU; ${WINDOW} s"
printf '%-5s %10s %11s %10s %9s %13s %13s %13s\n' cpu polld competitor gen softirq "rx/s" "forwarded/s" "ring drops/s"
for cpu in 0 1; do
    read -r p0 c0 g0 s0 r0 f0 d0 t0 <<<"${before[$cpu]}"
    read -r p1 c1 g1 s1 r1 f1 d1 t1 <<<"${after[$cpu]}"
    awk -v cpu="$cpu" -v dt=$(( t1 - t0 )) -v p=$(( p1 - p0 )) -v c=$(( c1 - c0 )) \
        -v g=$(( g1 - g0 )) -v s=$(( s1 - s0 )) -v hz="$hz" -v r=$(( r1 - r0 )) -v f=$(( f1 - f0 )) -v d=$(( d1 - d0 )) \
        'BEGIN { printf "CPU%-2d %9.1f%% %10.1f%% %9.1f%% %8.1f%% %13.0f %13.0f %13.0f\n", cpu,
            100 * p / dt, 100 * c / dt, 100 * g / dt, 100 * s / hz / (dt / 1e9),
            r / (dt / 1e9), f / (dt / 1e9), d / (dt / 1e9) }'
done
for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
PIDS=()
kill -INT "$POLLD_PID"
wait "$POLLD_PID" || { cat "$WORK/log"; exit 1; }
POLLD_PID=
if grep -q "CONSERVATION VIOLATED" "$WORK/report"; then
    cat "$WORK/report"
    echo "conservation: VIOLATED"
    exit 1
fi
echo "conservation held on every queue and interface ($(grep -c '^veth' "$WORK/report") rows)"
