#!/usr/bin/env bash
# Dead-master detection on ibsim: what a standby's polling costs the master, how soon
# it notices a SIGKILLed master, and how often it declares a live master lost under
# load. The master is always an ibsmd (priority 10, `--metrics`: it counts the
# SubnGet(SMInfo) requests it receives, `ibsm_sminfo_requests_total`); the standby
# under test (priority 5) is an ibsmd or an OpenSM, so both are measured against the
# same master in the same run.
#
#   cost     - SMInfo requests the master received from its standbys per second (the
#              replicated row has two: the standby under test and the third member), over
#              10 s of an idle, settled fabric (k=--k fat tree);
#   detect   - SIGKILL of the master to the standby's log line that it gave the master
#              up (ibsmd "STANDBY -> DISCOVERING", OpenSM "Entering DISCOVERING state");
#   MASTER   - SIGKILL to the standby's "-> MASTER" / "Entering MASTER state";
#   false    - under load (k=--load-k fat tree, default 32: the master's heavy sweeps
#              back to back for --seconds, default 60, while one busy loop per core
#              keeps every core busy): how many times the standby left STANDBY while
#              the master was alive, and how many of those went on to MASTER (two
#              masters until it hands back). The bar is 0.
#   step     - the master's longest instance-thread step under load (its debug
#              "instance thread busy" lines, >= 30 ms): how long SMInfo polls waited
#              when the master answers them only in its SM thread's turn
#              (IBSM_BENCH_MASTER_ARGS=--no-sminfo-answer-thread); by default a
#              stand-in answers them meanwhile and the step only delays the SM's work.
#
# With --replicated, a row is added that runs the SMs as one replication cluster, as deployed:
# the master is Raft node 1 (it bootstraps, so it is the Raft leader), the standby under
# test node 2, and a third member (priority 1) node 3 on a third HCA; the standby then
# has the master's Raft heartbeat as a second opinion (--leader-heartbeat-grace-ms,
# default 1 s) and the "held off" column counts the miss streaks it held off.
#
# Rows: ibsmd at its defaults (25 ms polls, 20 ms re-polls, 3 misses), ibsmd at the
# old defaults (100 ms x 3, no quick re-polls), OpenSM at 100 ms x 2 and OpenSM at its
# defaults (10 s x 4; its detection and load rows are skipped with --quick). A standby
# that left STANDBY and took MASTER beside the live master hands back at once (it is
# outranked), so the count is of detections, the harm is a moment of two masters.
#
# Usage: bench/detection.sh [--quick] [--rounds N] [--k K] [--load-k K] [--seconds S]
#                           [--no-load] [--no-build] [--ibsmd-only] [--replicated]
#   --ibsmd-only: only the ibsmd default row (profiling a change); --rounds 0: no kills.
# Env: IBSM_BENCH_MASTER_ARGS="..." more options for the master (e.g.
#   --no-sminfo-answer-thread: its SM thread reads the port itself and the standby's polls
#   wait for its steps, as before the reader thread that answers them).
# Needs ibsim-utils, opensm, infiniband-diags (the same lab as the tests).
set -euo pipefail

QUICK=0
NO_LOAD=0
NO_BUILD=0
IBSMD_ONLY=0
REPLICATED=0
ROUNDS=3
K=16
LOAD_K=32
SECONDS_LOAD=60
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --rounds) ROUNDS="$2"; shift ;;
        --k) K="$2"; shift ;;
        --load-k) LOAD_K="$2"; shift ;;
        --seconds) SECONDS_LOAD="$2"; shift ;;
        --no-load) NO_LOAD=1 ;;
        --no-build) NO_BUILD=1 ;;
        --ibsmd-only) IBSMD_ONLY=1 ;;
        --replicated) REPLICATED=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "detection.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim opensm curl; do
    command -v "$tool" >/dev/null || { echo "detection.sh: $tool is missing (apt-get install ibsim-utils opensm infiniband-diags curl)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "detection.sh: $UMAD2SIM is missing" >&2; exit 1; }
[ "$NO_BUILD" = 1 ] || (cd "$ROOT" && cargo build --quiet --release -p ibsmd-bin -p ibsmctl)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
IBSMD=$TARGET/ibsmd
IBSMCTL=$TARGET/ibsmctl

WORK=$(mktemp -d /tmp/ibsm-detection.XXXXXX)
PIDS=()
LOADERS=()
cleanup() {
    for p in "${PIDS[@]:-}" "${LOADERS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    exec 3>&- 2>/dev/null || true
    if [ -z "${IBSM_KEEP_BENCH:-}" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_until() { # timeout_s, then a command that succeeds when done
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.05
    done
}

make_net() { # k -> sets NET HOST_A HOST_B N_NODES N_SW N_PORTS
    NET=$WORK/fat-tree-k$1.net
    [ -f "$NET" ] || "$IBSMCTL" discover --fabric "gen:fat-tree:$1" --write-net "$NET" >/dev/null
    read -r HOST_A HOST_B HOST_C <<<"$(awk '/^Hca/ { match($0, /"[^"]*"/); print substr($0, RSTART + 1, RLENGTH - 2) }' "$NET" | head -3 | tr '\n' ' ')"
    read -r N_NODES N_SW N_PORTS <<<"$(awk '
        /^(Switch|Hca)/ { nodes++; if ($1 == "Switch") sw++; ports += $2 + 1 }
        END { print nodes, sw, ports }' "$NET")"
}

start_ibsim() { # tag
    SOCK="ibsmdet$$$1"
    mkfifo "$WORK/console.$1"
    exec 3<>"$WORK/console.$1"
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK exec ibsim -s \
        -N $((N_NODES * 5 / 4 + 16)) -S $((N_SW * 5 / 4 + 16)) -P $((N_PORTS * 5 / 4 + 16)) \
        "$NET" <"$WORK/console.$1" >"$WORK/ibsim.$1.out" 2>&1) &
    PIDS+=("$!")
    ROUND=$1
    for _ in $(seq 600); do
        grep -q "@$SOCK:ctl" /proc/net/unix && return 0
        sleep 0.1
    done
    echo "detection.sh: ibsim did not come up" >&2
    exit 1
}

stop_all() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    { wait "${PIDS[@]:-}"; } 2>/dev/null || true
    PIDS=()
    exec 3>&-
}

# Emulate the kernel closing a dead process's files: drop its ibsim clients.
reap() {
    local before
    before=$(wc -c <"$WORK/ibsim.$ROUND.out")
    echo "Attached" >&3
    sleep 0.05
    tail -c +"$((before + 1))" "$WORK/ibsim.$ROUND.out" | tr -d '\0' |
        sed -n 's/.*Client \([0-9]*\): pid \([0-9]*\).*/\1 \2/p' |
        while read -r id pid; do
            if ! kill -0 "$pid" 2>/dev/null; then echo "X $id" >&3; fi
        done
}

# --replicated: the members' Raft flags (node $1 of 3, data under the round $2).
cluster_args() { # node round
    CLUSTER=()
    [ "$REPL_ROW" = 1 ] || return 0
    CLUSTER=(--node-id "$1" --data-dir "$WORK/data.$2.$1" --cluster-secret-file "$WORK/secret"
        --peer "1=127.0.0.1:$GRPC" --peer "2=127.0.0.1:$GRPC_B" --peer "3=127.0.0.1:$GRPC_C")
}

start_master() { # round -> MASTER_PID GRPC METRICS
    GRPC=$(free_port)
    GRPC_B=$(free_port)
    GRPC_C=$(free_port)
    METRICS=$(free_port)
    [ -f "$WORK/secret" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$WORK/secret"
    cluster_args 1 "$1"
    # The driver's debug lines are its slow steps (>= 30 ms without answering SMInfo).
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST_A LD_PRELOAD=$UMAD2SIM NO_COLOR=1 \
        RUST_LOG=info,ibsmd::instance::driver=debug \
        exec "$IBSMD" --fabric umad --priority 10 --insecure-plaintext \
        --grpc "127.0.0.1:$GRPC" --metrics "127.0.0.1:$METRICS" "${CLUSTER[@]}" \
        ${IBSM_BENCH_MASTER_ARGS:-} 2>"$WORK/master.$1.log" >/dev/null) &
    MASTER_PID=$!
    PIDS+=("$MASTER_PID")
    if [ "$REPL_ROW" = 1 ]; then
        # The third member (priority 1), at once: the master's first writes need a quorum.
        cluster_args 3 "$1"
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST_C LD_PRELOAD=$UMAD2SIM NO_COLOR=1 RUST_LOG=info \
            exec "$IBSMD" --fabric umad --priority 1 --insecure-plaintext \
            --grpc "127.0.0.1:$GRPC_C" "${CLUSTER[@]}" 2>"$WORK/third.$1.log" >/dev/null) &
        PIDS+=("$!")
    fi
    wait_until 300 grep -sqF "subnet up in" "$WORK/master.$1.log" || {
        echo "detection.sh: the ibsmd master never reported subnet up" >&2; tail -20 "$WORK/master.$1.log" >&2; exit 1; }
}

# The standby under test: kind (ibsmd|opensm), poll_ms ("" = defaults), repoll_ms, retries.
start_standby() { # round kind poll repoll retries -> STANDBY_LOG
    local round=$1 kind=$2 poll=$3 repoll=$4 retries=$5
    STANDBY_LOG=$WORK/standby.$round.log
    if [ "$kind" = ibsmd ]; then
        local extra=()
        [ -n "$poll" ] && extra=(--poll-interval-ms "$poll" --repoll-interval-ms "$repoll" --poll-retries "$retries")
        cluster_args 2 "$round"
        STANDBY_METRICS=$(free_port)
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST_B LD_PRELOAD=$UMAD2SIM NO_COLOR=1 RUST_LOG=info \
            exec "$IBSMD" --fabric umad --priority 5 --insecure-plaintext \
            --grpc "127.0.0.1:${GRPC_B:-0}" --metrics "127.0.0.1:$STANDBY_METRICS" \
            "${extra[@]}" "${CLUSTER[@]}" 2>"$STANDBY_LOG" >/dev/null) &
        STANDBY_LINE="-> STANDBY ("
        LOST_LINE="STANDBY -> DISCOVERING"
        MASTER_LINE="-> MASTER ("
    else
        local conf=$WORK/osm.$round.conf
        mkdir -p "$WORK/osm.$round.cache"
        {
            echo "force_log_flush TRUE"
            echo "sm_priority 5"
            echo "dump_files_dir $WORK/osm.$round.cache/"
            if [ -n "$poll" ]; then
                echo "sminfo_polling_timeout $poll"
                echo "polling_retry_number $retries"
            fi
        } >"$conf"
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST_B LD_PRELOAD=$UMAD2SIM \
            OSM_CACHE_DIR=$WORK/osm.$round.cache exec opensm -F "$conf" -f "$STANDBY_LOG" >/dev/null 2>&1) &
        STANDBY_LINE="Entering STANDBY state"
        LOST_LINE="Entering DISCOVERING state"
        MASTER_LINE="Entering MASTER state"
    fi
    STANDBY_PID=$!
    PIDS+=("$STANDBY_PID")
    STANDBY_KIND=$kind
    wait_until 300 grep -sqF -- "$STANDBY_LINE" "$STANDBY_LOG" || {
        echo "detection.sh: the $kind standby never became STANDBY" >&2; tail -20 "$STANDBY_LOG" >&2; exit 1; }
}

sminfo_requests() {
    curl -s "http://127.0.0.1:$METRICS/metrics" | awk '/^ibsm_sminfo_requests_total/ { print $2 }'
}

# Epoch seconds of the first line matching $3 in log $1 at or after byte $2.
log_time() {
    local log=$1 from=$2 pattern=$3 line
    line=$(tail -c +"$((from + 1))" "$log" | tr -d '\0' | grep -m1 -F -- "$pattern" || true)
    [ -n "$line" ] || return 1
    if [ "$STANDBY_KIND" = ibsmd ]; then
        date -u -d "$(echo "$line" | awk '{print $1}')" +%s.%N
    else
        local base us
        base=$(date -d "$(echo "$line" | awk '{print $1, $2, $3}')" +%s)
        us=$(echo "$line" | awk '{print $4}')
        echo "$base.$us"
    fi
}

count_lines() { # log from pattern
    tail -c +"$(($2 + 1))" "$1" | tr -d '\0' | grep -cF -- "$3" || true
}

median() { tr ' ' '\n' | { grep -v -e '^-$' -e '^$' || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# Cost and detection: ROUNDS kills on the k=K fabric. Sets R_COST R_DETECT R_MASTER.
kill_rounds() { # label kind poll repoll retries
    local label=$1 kind=$2 poll=$3 repoll=$4 retries=$5 costs="" detects="" masters="" r
    make_net "$K"
    for r in $(seq "$ROUNDS"); do
        local round="$label-$r"
        echo "  $label, round $r ..." >&2
        start_ibsim "$round"
        start_master "$round"
        start_standby "$round" "$kind" "$poll" "$repoll" "$retries"
        sleep 2
        local a b from t0 t_lost t_master
        a=$(sminfo_requests)
        sleep 10
        b=$(sminfo_requests)
        costs="$costs $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f", (b - a) / 10 }')"
        from=$(wc -c <"$STANDBY_LOG")
        t0=$(now)
        kill -9 "$MASTER_PID"
        wait "$MASTER_PID" 2>/dev/null || true
        reap
        wait_until 120 log_time "$STANDBY_LOG" "$from" "$MASTER_LINE" >/dev/null || true
        t_lost=$(log_time "$STANDBY_LOG" "$from" "$LOST_LINE" || echo "")
        t_master=$(log_time "$STANDBY_LOG" "$from" "$MASTER_LINE" || echo "")
        stop_all
        local d m
        d=$([ -n "$t_lost" ] && secs "$t0" "$t_lost" || echo "-")
        m=$([ -n "$t_master" ] && secs "$t0" "$t_master" || echo "-")
        echo "    cost ${costs##* } SMInfo/s, detect $d s, MASTER $m s" >&2
        detects="$detects $d"
        masters="$masters $m"
    done
    R_COST=$(echo "$costs" | median)
    R_DETECT=$(echo "$detects" | median)
    R_MASTER=$(echo "$masters" | median)
}

# False failovers: the master's heavy sweeps back to back on the k=LOAD_K fabric with
# every core busy. Sets R_FALSE R_SWEEPS R_STEP (the master's longest instance-thread
# step, from its "instance thread busy" lines: how long its SMInfo answers waited).
load_round() { # label kind poll repoll retries
    local label=$1 kind=$2 poll=$3 repoll=$4 retries=$5 round="$1-load"
    echo "  $label, load (k=$LOAD_K, ${SECONDS_LOAD} s) ..." >&2
    make_net "$LOAD_K"
    start_ibsim "$round"
    start_master "$round"
    start_standby "$round" "$kind" "$poll" "$repoll" "$retries"
    sleep 2
    local from mfrom end sweeps=0 c
    from=$(wc -c <"$STANDBY_LOG")
    mfrom=$(wc -c <"$WORK/master.$round.log")
    for c in $(seq "$(nproc)"); do
        (while :; do :; done) &
        LOADERS+=("$!")
    done
    end=$(($(date +%s) + SECONDS_LOAD))
    while [ "$(date +%s)" -lt "$end" ]; do
        "$IBSMCTL" --rpc-timeout-ms 120000 --endpoint "http://127.0.0.1:$GRPC" sweep --heavy >/dev/null 2>&1 || true
        sweeps=$((sweeps + 1))
    done
    for p in "${LOADERS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    { wait "${LOADERS[@]}"; } 2>/dev/null || true
    LOADERS=()
    R_FALSE=$(count_lines "$STANDBY_LOG" "$from" "$LOST_LINE")
    # Of those, how many went on to MASTER beside the live master (the harm: two
    # masters until the new one hands back); the others found it alive again.
    R_FALSE="$R_FALSE ($(count_lines "$STANDBY_LOG" "$from" "$MASTER_LINE") took MASTER)"
    if [ "$kind" = ibsmd ] && [ "$REPL_ROW" = 1 ]; then
        local held
        held=$(curl -s "http://127.0.0.1:$STANDBY_METRICS/metrics" | awk '/^ibsm_master_losses_held_off_total/ { print $2 }')
        R_FALSE="$R_FALSE, ${held:-?} held off"
    fi
    R_SWEEPS=$(count_lines "$WORK/master.$round.log" "$mfrom" "heavy sweep done in")
    R_STEP=$(tail -c +"$((mfrom + 1))" "$WORK/master.$round.log" | tr -d '\0' |
        grep -F "instance thread busy" | sed -n 's/.*took_ms=\([0-9]*\).*/\1/p' | sort -n | tail -1)
    R_STEP=${R_STEP:-"< 30"}
    [ "$R_SWEEPS" -gt 0 ] || R_SWEEPS="0 (of $sweeps asked)"
    kill -0 "$MASTER_PID" 2>/dev/null || R_FALSE="$R_FALSE (master died)"
    stop_all
    echo "    left STANDBY $R_FALSE time(s) over $R_SWEEPS heavy sweeps; longest master step $R_STEP ms" >&2
}

ROWS=()
measure() { # label kind poll repoll retries load(0|1) kill(0|1)
    local label=$1 kind=$2 poll=$3 repoll=$4 retries=$5 load=$6 kills=$7
    R_COST="skipped" R_DETECT="skipped" R_MASTER="skipped" R_FALSE="skipped" R_SWEEPS="-" R_STEP="-"
    [ "$kills" = 1 ] && [ "$ROUNDS" -gt 0 ] && kill_rounds "$label" "$kind" "$poll" "$repoll" "$retries"
    [ "$load" = 1 ] && [ "$NO_LOAD" = 0 ] && load_round "$label" "$kind" "$poll" "$repoll" "$retries"
    ROWS+=("$label|$R_COST|$R_DETECT|$R_MASTER|$R_FALSE|$R_SWEEPS|$R_STEP")
}

echo "detection: k=$K kills ($ROUNDS rounds each), k=$LOAD_K load for ${SECONDS_LOAD} s with $(nproc) busy loops" >&2
REPL_ROW=0
measure "ibsmd 25 ms, 20 ms re-polls x3 (default)" ibsmd "" "" "" 1 1
if [ "$REPLICATED" = 1 ]; then
    REPL_ROW=1
    measure "ibsmd default, replicated (2 standbys poll)" ibsmd "" "" "" 1 1
    REPL_ROW=0
fi
[ "$IBSMD_ONLY" = 0 ] && measure "ibsmd 100 ms x3 (old default)" ibsmd 100 100 3 1 1
[ "$IBSMD_ONLY" = 0 ] && measure "OpenSM 100 ms x2" opensm 100 "" 2 1 1
if [ "$IBSMD_ONLY" = 1 ]; then
    :
elif [ "$QUICK" = 0 ]; then
    measure "OpenSM defaults (10 s x4)" opensm "" "" "" 1 1
else
    measure "OpenSM defaults (10 s x4)" opensm "" "" "" 0 0
fi

echo
[ "$REPLICATED" = 1 ] && echo "replicated row: a replication cluster of three (master = Raft node 1 = leader, standby node 2, a third member); the other rows: no replication"
echo "Dead-master detection, ibsmd master; standby on a k=$K fat tree (median of $ROUNDS kills); load: k=$LOAD_K heavy sweeps back to back, every core busy, ${SECONDS_LOAD} s"
printf '%-42s | %-12s | %-10s | %-10s | %-22s | %-12s | %s\n' "standby and polling" "cost SMInfo/s" "detect s" "MASTER s" "false failovers (load)" "heavy sweeps" "master step ms"
printf '%-42s-+-%-12s-+-%-10s-+-%-10s-+-%-22s-+-%-12s-+-%s\n' "------------------------------------------" "------------" "----------" "----------" "----------------------" "------------" "--------------"
for r in "${ROWS[@]}"; do
    IFS='|' read -r a b c d e f g <<<"$r"
    printf '%-42s | %-12s | %-10s | %-10s | %-22s | %-12s | %s\n' "$a" "$b" "$c" "$d" "$e" "$f" "$g"
done
