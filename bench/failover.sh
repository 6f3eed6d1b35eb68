#!/usr/bin/env bash
# Failover time on ibsim: two SMs (priority 10 and 5) on a k=16 3-level fat tree
# (1344 nodes), SIGKILL the master once the standby has settled, and time until the
# survivor is MASTER. Two clocks:
#   log     - the survivor's own log line (ibsmd: "sm state: DISCOVERING -> MASTER",
#             OpenSM: "Entering MASTER state"), from its timestamp;
#   sminfo  - `sminfo -D` from a third node (same edge switch) polled every ~20 ms
#             until the survivor answers state 3 (SMINFO_MASTER).
# Both are measured from the instant of the kill; ibsim's registration of the dead
# client is dropped at once (a kernel closes a dead process's umad/issm files).
#
# Pairs: ibsmd at its defaults, OpenSM at its defaults (10 s x 4 retries, ~60 s;
# skipped with --quick), OpenSM at 100 ms x 2 and ibsmd at 100 ms x 2.
#
# --masterless instead: the masterless window when the SM next in line polls slowly.
# OpenSM A (priority 15) master, OpenSM B (14) standby, both at OpenSM's defaults;
# SIGKILL A. Alone, B notices after 4 polls of 10 s. With an ibsmd (priority 10, its
# defaults, --masterless-takeover-ms 1000) on a fourth HCA, ibsmd takes MASTER after
# the bound and hands the subnet to B (HANDOVER) once it answers. Times from the logs:
# first master after the kill (the masterless window) and B master.
#
# Usage: bench/failover.sh [--quick] [--masterless] [--rounds N] [--k K] [--debug] [--no-build]
#   --rounds N  repeat each pair N times and report the median (default 1)
#   --k K       fat-tree radix (default 16)
#   --debug     use the debug build instead of release
#   --no-build  use the ibsmd/ibsmctl already in target/ (e.g. while the tree does not build)
# Needs ibsim-utils, opensm, infiniband-diags (the same lab as the tests).
set -euo pipefail

QUICK=0
MASTERLESS=0
NO_BUILD=0
FAILED_ROUNDS=0
ROUNDS=1
K=16
PROFILE=release
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --masterless) MASTERLESS=1 ;;
        --rounds) ROUNDS="$2"; shift ;;
        --k) K="$2"; shift ;;
        --debug) PROFILE=debug ;;
        --no-build) NO_BUILD=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "failover.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim opensm sminfo; do
    command -v "$tool" >/dev/null || { echo "failover.sh: $tool is missing (apt-get install ibsim-utils opensm infiniband-diags)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "failover.sh: $UMAD2SIM is missing" >&2; exit 1; }

if [ "$NO_BUILD" = 1 ]; then
    : # use the binaries already in target/
elif [ "$PROFILE" = release ]; then
    (cd "$ROOT" && cargo build --quiet --release -p ibsmd-bin -p ibsmctl)
else
    (cd "$ROOT" && cargo build --quiet -p ibsmd-bin -p ibsmctl)
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE
IBSMD=$TARGET/ibsmd
IBSMCTL=$TARGET/ibsmctl

WORK=$(mktemp -d /tmp/ibsm-failover.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    exec 3>&- 2>/dev/null || true
    if [ -z "${IBSM_KEEP_BENCH:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

NET=$WORK/fat-tree-k$K.net
"$IBSMCTL" discover --fabric "gen:fat-tree:$K" --write-net "$NET" >/dev/null

# The first three HCAs of the file and the edge-switch port each hangs off; they must
# share one switch so the judge reaches both SMs by a two-hop directed route.
read -r HOST_A HOST_B HOST_J SW_A SW_B SW_J PORT_A PORT_B <<<"$(awk '
    /^Hca/ { match($0, /"[^"]*"/); name = substr($0, RSTART + 1, RLENGTH - 2); inhca = 1; next }
    inhca && /^\[1\]/ {
        match($0, /"[^"]*"\[[0-9]+\]/); s = substr($0, RSTART, RLENGTH)
        split(s, a, /"/); sw = a[2]; p = a[3]; gsub(/[\[\]]/, "", p)
        n++; h[n] = name; w[n] = sw; pt[n] = p; inhca = 0
        if (n == 3) { print h[1], h[2], h[3], w[1], w[2], w[3], pt[1], pt[2]; exit }
    }' "$NET")"
if [ "$SW_A" != "$SW_J" ] || [ "$SW_B" != "$SW_J" ]; then
    echo "failover.sh: the first three HCAs are not on one switch ($SW_A $SW_B $SW_J)" >&2
    exit 1
fi
DR_A="0,1,$PORT_A"
# A fourth HCA (anywhere) for the ibsmd of --masterless.
HOST_C=$(awk '/^Hca/ { match($0, /"[^"]*"/); n++; if (n == 4) { print substr($0, RSTART + 1, RLENGTH - 2); exit } }' "$NET")
DR_B="0,1,$PORT_B"
read -r N_NODES N_SW N_PORTS <<<"$(awk '
    /^(Switch|Hca)/ { nodes++; if ($1 == "Switch") sw++; ports += $2 + 1 }
    END { print nodes, sw, ports }' "$NET")"

now() { date +%s.%N; }
# Seconds between two epoch timestamps, 3 decimals.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

start_ibsim() {
    SOCK="ibsmfo$$r$1"
    mkfifo "$WORK/console.$1"
    # Hold the FIFO open read-write on fd 3: ibsim never sees EOF on its console.
    exec 3<>"$WORK/console.$1"
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK exec ibsim -s \
        -N $((N_NODES * 5 / 4 + 16)) -S $((N_SW * 5 / 4 + 16)) -P $((N_PORTS * 5 / 4 + 16)) \
        "$NET" <"$WORK/console.$1" >"$WORK/ibsim.$1.out" 2>&1) &
    IBSIM_PID=$!
    PIDS+=("$IBSIM_PID")
    for _ in $(seq 600); do
        grep -q "@$SOCK:ctl" /proc/net/unix && return 0
        sleep 0.1
    done
    echo "failover.sh: ibsim did not come up" >&2
    tail "$WORK/ibsim.$1.out" >&2
    exit 1
}

stop_ibsim() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    { wait; } 2>/dev/null || true
    PIDS=()
    exec 3>&-
}

# Emulate the kernel closing a dead process's files: drop its ibsim clients.
reap() {
    local before
    before=$(wc -c <"$WORK/ibsim.$1.out")
    echo "Attached" >&3
    sleep 0.05
    tail -c +"$((before + 1))" "$WORK/ibsim.$1.out" | tr -d '\0' |
        sed -n 's/.*Client \([0-9]*\): pid \([0-9]*\).*/\1 \2/p' |
        while read -r id pid; do
            if ! kill -0 "$pid" 2>/dev/null; then echo "X $id" >&3; fi
        done
}

on_host() { # host, then the command
    local host=$1
    shift
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$host LD_PRELOAD=$UMAD2SIM exec "$@")
}

sminfo_state() { # DR path -> "state priority" or nothing
    local out rc=0
    out=$(on_host "$HOST_J" timeout 3 sminfo -D "$1" 2>/dev/null) || rc=$?
    # A killed sminfo keeps its ibsim client slot (10 in all): free it.
    [ "$rc" = 124 ] && reap "$ROUND"
    echo "$out" | sed -n 's/.*priority \([0-9]*\) state \([0-9]*\).*/\2 \1/p'
}

wait_until() { # timeout_s, then a command that succeeds when done
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.02
    done
}

judge_is() { # DR, state
    [ "$(sminfo_state "$1" | cut -d' ' -f1)" = "$2" ]
}

start_sm() { # kind (ibsmd|opensm), host, priority, poll_ms ("" = defaults), retries, round, tag, ibsmd args...
    local kind=$1 host=$2 prio=$3 poll=$4 retries=$5 round=$6 tag=$7
    shift 7
    local log=$WORK/$tag.$round.log
    if [ "$kind" = ibsmd ]; then
        local extra=("$@")
        [ -n "$poll" ] && extra+=(--poll-interval-ms "$poll" --repoll-interval-ms "$poll" --poll-retries "$retries")
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$host LD_PRELOAD=$UMAD2SIM NO_COLOR=1 RUST_LOG=info \
            exec "$IBSMD" --fabric umad --priority "$prio" --grpc 127.0.0.1:0 --insecure-plaintext \
            "${extra[@]}" 2>"$log" >/dev/null) &
    else
        local conf=$WORK/$tag.$round.conf
        mkdir -p "$WORK/$tag.$round.cache"
        {
            echo "force_log_flush TRUE"
            echo "sm_priority $prio"
            echo "dump_files_dir $WORK/$tag.$round.cache/"
            if [ -n "$poll" ]; then
                echo "sminfo_polling_timeout $poll"
                echo "polling_retry_number $retries"
            fi
        } >"$conf"
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$host LD_PRELOAD=$UMAD2SIM \
            OSM_CACHE_DIR=$WORK/$tag.$round.cache exec opensm -F "$conf" -f "$log" >/dev/null 2>&1) &
    fi
    SM_PID=$!
    PIDS+=("$SM_PID")
}

# Epoch seconds of the first line matching $2 in log $1 at or after byte $3.
log_time() {
    local kind=$1 log=$2 from=$3 pattern=$4 line
    line=$(tail -c +"$((from + 1))" "$log" | grep -m1 -F -- "$pattern" || true)
    [ -n "$line" ] || return 1
    if [ "$kind" = ibsmd ]; then
        date -u -d "$(echo "$line" | awk '{print $1}')" +%s.%N
    else
        # "Nov 30 10:49:23 345324 [..] 0x80 -> Entering MASTER state" (local time, us)
        local base us
        base=$(date -d "$(echo "$line" | awk '{print $1, $2, $3}')" +%s)
        us=$(echo "$line" | awk '{print $4}')
        echo "$base.$us"
    fi
}

# One trial; sets T_LOG and T_JUDGE (seconds, "-" when not seen).
trial() { # kind, poll_ms, retries, round
    local kind=$1 poll=$2 retries=$3 round=$4
    ROUND=$round
    start_ibsim "$round"
    local tag_a="$kind-a" tag_b="$kind-b" pid_a
    local master_line standby_line
    if [ "$kind" = ibsmd ]; then
        master_line="-> MASTER ("
        standby_line="-> STANDBY ("
    else
        master_line="Entering MASTER state"
        standby_line="Entering STANDBY state"
    fi
    start_sm "$kind" "$HOST_A" 10 "$poll" "$retries" "$round" "$tag_a"
    pid_a=$SM_PID
    # Let A take the subnet before B arrives (B must come up as a standby).
    wait_until 240 grep -sqF -- "$master_line" "$WORK/$tag_a.$round.log" || {
        echo "failover.sh: $kind A never became MASTER" >&2; tail -20 "$WORK/$tag_a.$round.log" >&2; exit 1; }
    start_sm "$kind" "$HOST_B" 5 "$poll" "$retries" "$round" "$tag_b"
    wait_until 240 grep -sqF -- "$standby_line" "$WORK/$tag_b.$round.log" || {
        echo "failover.sh: $kind B never became STANDBY" >&2; tail -20 "$WORK/$tag_b.$round.log" >&2; exit 1; }
    wait_until 60 judge_is "$DR_A" 3 || { echo "failover.sh: judge never saw A MASTER" >&2; exit 1; }
    wait_until 60 judge_is "$DR_B" 2 || { echo "failover.sh: judge never saw B STANDBY" >&2; exit 1; }
    # Settle: a few polling rounds with the standby watching the master.
    sleep 3
    local from t0 t_log t_judge
    from=$(wc -c <"$WORK/$tag_b.$round.log")
    t0=$(now)
    kill -9 "$pid_a"
    wait "$pid_a" 2>/dev/null || true
    reap "$round"
    if wait_until 240 judge_is "$DR_B" 3; then
        t_judge=$(now)
    else
        # Counted as a failed round (reported), not the end of the benchmark.
        echo "failover.sh: $kind: the judge never saw B MASTER within 240 s; B's log:" >&2
        grep -E ' 0x80 -> |sm state:' "$WORK/$tag_b.$round.log" | tail -10 >&2
        t_judge=""
        FAILED_ROUNDS=$((FAILED_ROUNDS + 1))
    fi
    wait_until 30 log_time "$kind" "$WORK/$tag_b.$round.log" "$from" "$master_line" >/dev/null || true
    t_log=$(log_time "$kind" "$WORK/$tag_b.$round.log" "$from" "$master_line" || echo "")
    stop_ibsim
    if [ -n "$t_judge" ]; then T_JUDGE=$(secs "$t0" "$t_judge"); else T_JUDGE="-"; fi
    if [ -n "$t_log" ]; then T_LOG=$(secs "$t0" "$t_log"); else T_LOG="-"; fi
}

median() { tr ' ' '\n' | grep -v -e '^-$' -e '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# One --masterless trial (OpenSM 15 master, OpenSM 14 standby, both at defaults,
# optionally an ibsmd 10); sets T_FIRST (kill -> first master) and T_B (kill -> B master).
masterless_trial() { # with_ibsmd (0|1), round
    local with=$1 round=$2 pid_a from_b from_c=0 t0 t_b t_c=""
    ROUND=$round
    start_ibsim "$round"
    start_sm opensm "$HOST_A" 15 "" "" "$round" osm-a
    pid_a=$SM_PID
    wait_until 240 grep -sqF -- "Entering MASTER state" "$WORK/osm-a.$round.log" || {
        echo "failover.sh: OpenSM A never became MASTER" >&2; exit 1; }
    start_sm opensm "$HOST_B" 14 "" "" "$round" osm-b
    wait_until 240 grep -sqF -- "Entering STANDBY state" "$WORK/osm-b.$round.log" || {
        echo "failover.sh: OpenSM B never became STANDBY" >&2; exit 1; }
    if [ "$with" = 1 ]; then
        start_sm ibsmd "$HOST_C" 10 "" "" "$round" ibsmd-c --masterless-takeover-ms 1000
        wait_until 240 grep -sqF -- "-> STANDBY (" "$WORK/ibsmd-c.$round.log" || {
            echo "failover.sh: ibsmd never became STANDBY" >&2; tail -20 "$WORK/ibsmd-c.$round.log" >&2; exit 1; }
        from_c=$(wc -c <"$WORK/ibsmd-c.$round.log")
    fi
    wait_until 60 judge_is "$DR_B" 2 || { echo "failover.sh: judge never saw B STANDBY" >&2; exit 1; }
    sleep 3
    from_b=$(wc -c <"$WORK/osm-b.$round.log")
    t0=$(now)
    kill -9 "$pid_a"
    wait "$pid_a" 2>/dev/null || true
    reap "$round"
    wait_until 240 judge_is "$DR_B" 3 || { echo "failover.sh: the judge never saw B MASTER" >&2; FAILED_ROUNDS=$((FAILED_ROUNDS + 1)); }
    wait_until 30 log_time opensm "$WORK/osm-b.$round.log" "$from_b" "Entering MASTER state" >/dev/null || true
    t_b=$(log_time opensm "$WORK/osm-b.$round.log" "$from_b" "Entering MASTER state" || echo "")
    [ "$with" = 1 ] && t_c=$(log_time ibsmd "$WORK/ibsmd-c.$round.log" "$from_c" "-> MASTER (" || echo "")
    stop_ibsim
    if [ -n "$t_b" ]; then T_B=$(secs "$t0" "$t_b"); else T_B="-"; fi
    if [ -n "$t_c" ]; then T_FIRST=$(secs "$t0" "$t_c"); else T_FIRST=$T_B; fi
}

if [ "$MASTERLESS" = 1 ]; then
    echo "masterless window on a k=$K fat tree ($N_NODES nodes), $ROUNDS round(s) each, $PROFILE build" >&2
    firsts0="" bs0="" firsts1="" bs1=""
    for r in $(seq "$ROUNDS"); do
        echo "  OpenSM 15 + OpenSM 14, round $r ..." >&2
        masterless_trial 0 "ml0-$r"
        echo "    first master $T_FIRST s, B master $T_B s" >&2
        firsts0="$firsts0 $T_FIRST" bs0="$bs0 $T_B"
        echo "  OpenSM 15 + OpenSM 14 + ibsmd 10, round $r ..." >&2
        masterless_trial 1 "ml1-$r"
        echo "    first master $T_FIRST s, B master $T_B s" >&2
        firsts1="$firsts1 $T_FIRST" bs1="$bs1 $T_B"
    done
    M0=$(echo "$firsts0" | median) B0=$(echo "$bs0" | median)
    M1=$(echo "$firsts1" | median) B1=$(echo "$bs1" | median)
    echo
    echo "SIGKILL of an OpenSM master (15), OpenSM standby (14) at its defaults (10 s x 4), k=$K ($N_NODES nodes), seconds (median of $ROUNDS)"
    printf '%-34s | %-24s | %-18s\n' "SMs" "masterless (first master)" "OpenSM 14 master"
    printf '%-34s-+-%-24s-+-%-18s\n' "----------------------------------" "------------------------" "------------------"
    printf '%-34s | %-24s | %-18s\n' "OpenSM 15 + OpenSM 14" "$M0" "$B0"
    printf '%-34s | %-24s | %-18s\n' "the same + ibsmd 10 (1 s bound)" "$M1" "$B1"
    echo "masterless window, OpenSM alone / with ibsmd: $(awk -v a="$M1" -v b="$M0" 'BEGIN { if (a + 0 > 0 && b ~ /^[0-9.]+$/) printf "%.0fx", b / a; else print "-" }')"
    [ "$FAILED_ROUNDS" = 0 ] || echo "($FAILED_ROUNDS round(s) never saw B master within 240 s)"
    exit 0
fi


run_pair() { # label, kind, poll_ms, retries -> sets R_LOG R_JUDGE
    local label=$1 kind=$2 poll=$3 retries=$4 logs="" judges="" r
    for r in $(seq "$ROUNDS"); do
        echo "  $label, round $r ..." >&2
        trial "$kind" "$poll" "$retries" "$label-$r"
        echo "    log $T_LOG s, sminfo $T_JUDGE s" >&2
        logs="$logs $T_LOG"
        judges="$judges $T_JUDGE"
    done
    R_LOG=$(echo "$logs" | median)
    R_JUDGE=$(echo "$judges" | median)
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a !~ /^[0-9.]+$/ || b !~ /^[0-9.]+$/ || a + 0 == 0) print "-"; else printf "%.1fx", b / a }'; }

echo "failover on a k=$K fat tree ($N_NODES nodes), $ROUNDS round(s) each, $PROFILE build" >&2
run_pair ibsmd-default ibsmd "" ""
IB_DEF_LOG=$R_LOG IB_DEF_JUDGE=$R_JUDGE
if [ "$QUICK" = 0 ]; then
    run_pair opensm-default opensm "" ""
    OS_DEF_LOG=$R_LOG OS_DEF_JUDGE=$R_JUDGE
else
    OS_DEF_LOG="skipped" OS_DEF_JUDGE="skipped"
fi
run_pair opensm-100x2 opensm 100 2
OS_EQ_LOG=$R_LOG OS_EQ_JUDGE=$R_JUDGE
run_pair ibsmd-100x2 ibsmd 100 2
IB_EQ_LOG=$R_LOG IB_EQ_JUDGE=$R_JUDGE

echo
echo "SIGKILL of the master -> standby is MASTER, k=$K fat tree ($N_NODES nodes), seconds (median of $ROUNDS)"
printf '%-40s | %-21s | %-21s | %-13s\n' "setting" "ibsmd  log / sminfo" "OpenSM log / sminfo" "OpenSM/ibsmd"
printf '%-40s-+-%-21s-+-%-21s-+-%-13s\n' "----------------------------------------" "---------------------" "---------------------" "-------------"
printf '%-40s | %8s / %-10s | %8s / %-10s | %s / %s\n' "defaults (ibsmd 25+20ms x3, OSM 10s x4)" \
    "$IB_DEF_LOG" "$IB_DEF_JUDGE" "$OS_DEF_LOG" "$OS_DEF_JUDGE" "$(ratio "$IB_DEF_LOG" "$OS_DEF_LOG")" "$(ratio "$IB_DEF_JUDGE" "$OS_DEF_JUDGE")"
printf '%-40s | %8s / %-10s | %8s / %-10s | %s / %s\n' "equal: 100 ms x 2 retries" \
    "$IB_EQ_LOG" "$IB_EQ_JUDGE" "$OS_EQ_LOG" "$OS_EQ_JUDGE" "$(ratio "$IB_EQ_LOG" "$OS_EQ_LOG")" "$(ratio "$IB_EQ_JUDGE" "$OS_EQ_JUDGE")"
[ "$FAILED_ROUNDS" = 0 ] || echo "($FAILED_ROUNDS round(s) failed to fail over within 240 s and are left out of the medians)"
