#!/usr/bin/env bash
# The SA under load, ibsmd against OpenSM on the same ibsim fabric (a k=K 3-level fat
# tree, default k=16: 1024 HCAs, 320 switches) and the same LIDs, in one run:
#   - PathRecord SubnAdmGet queries/s at window 1 and 16, with p50/p99 latency
#     (`ibsmctl sa bench path`, the same destination list for both: every HCA's LID);
#   - all-to-all PathRecord SubnAdmGetTable: from one source (SLID = the client's LID,
#     every destination) and from all sources (one GetTable per source,
#     `ibsmctl sa paths --all`), wall time including the client's RMPP reassembly;
#   - MCMemberRecord create-joins and leaves per second (`ibsmctl sa bench join`);
#   - SIGKILL of the master to the first PathRecord SubnAdmGet answered by the new
#     master (asked of the new master's LID every ~0.1 s by a fresh ibsmctl);
#   - the floor: what ibsim/umad2sim carries at all. A trivial responder with no SM
#     logic (crates/ibsm-transport/examples/sa_floor.rs: every SubnAdmGet(PathRecord)
#     answered with one fixed record, MCMemberRecord Set/Delete with the request's
#     record) on the killed master's HCA, once the new master
#     settled, driven by the same client and destinations at window 1 and 16 (and the
#     same join bench); the SMs'
#     rates are shown as a % of it. The new master (B, two instances left) is measured
#     in turn with it, best of three rounds each, for a like-for-like % of the floor.
# ibsmd: three replicated instances (priorities 10/8/6, defaults: 25 ms polls, 20 ms re-polls x 3);
# the query rows are measured against the settled master of that cluster.
# OpenSM: two instances (priorities 10/5) with a guid2lid of ibsmd's LIDs
# (honor_guid2lid_file TRUE), at 100 ms x 2 polling; and, without --quick, two more at
# their defaults (10 s x 4) for the failover row alone.
# The client runs on the last HCA of the net file; the SMs on the first three.
#
# Usage: bench/sa.sh [--quick] [--k K]
#   --quick: fewer queries, no OpenSM-defaults failover (about a minute at --k 4).
# Env: IBSM_BENCH_NO_BUILD=1 use the binaries already in target/release;
#      IBSM_KEEP_BENCH=1 keep the work dir (logs, net file).
# Needs ibsim-utils, opensm, infiniband-diags (ibnetdiscover, ibaddr).
set -euo pipefail

QUICK=0
K=16
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --k) K="$2"; shift ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "sa.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ "$QUICK" = 1 ]; then
    N_W1=2000 N_W16=8000 N_JOIN=1000
else
    N_W1=3000 N_W16=20000 N_JOIN=1000
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim opensm ibnetdiscover ibaddr jq; do
    command -v "$tool" >/dev/null || { echo "sa.sh: $tool is missing (apt-get install ibsim-utils opensm infiniband-diags jq)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "sa.sh: $UMAD2SIM is missing" >&2; exit 1; }

if [ -z "${IBSM_BENCH_NO_BUILD:-}" ]; then
    (cd "$ROOT" && cargo build --quiet --release -p ibsmd-bin -p ibsmctl &&
        cargo build --quiet --release -p ibsm-transport --example sa_floor)
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/release
IBSMD=$TARGET/ibsmd
IBSMCTL=$TARGET/ibsmctl
FLOOR=$TARGET/examples/sa_floor
[ -x "$FLOOR" ] || { echo "sa.sh: $FLOOR is missing (cargo build --release -p ibsm-transport --example sa_floor)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/ibsm-sa-bench.XXXXXX)
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/cluster-secret"
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
read -r HOST_A HOST_B HOST_C <<<"$(awk '/^Hca/ { match($0, /"[^"]*"/); print substr($0, RSTART + 1, RLENGTH - 2) }' "$NET" | head -3 | tr '\n' ' ')"
CLIENT=$(awk '/^Hca/ { match($0, /"[^"]*"/); h = substr($0, RSTART + 1, RLENGTH - 2) } END { print h }' "$NET")
read -r N_NODES N_SW N_PORTS N_HCA <<<"$(awk '
    /^(Switch|Hca)/ { nodes++; if ($1 == "Switch") sw++; else hca++; ports += $2 + 1 }
    END { print nodes, sw, ports, hca }' "$NET")"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

start_ibsim() { # tag
    SOCK="ibsmsa$$$1"
    mkfifo "$WORK/console.$1"
    exec 3<>"$WORK/console.$1"
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK exec ibsim -s \
        -N $((N_NODES * 5 / 4 + 16)) -S $((N_SW * 5 / 4 + 16)) -P $((N_PORTS * 5 / 4 + 16)) \
        "$NET" <"$WORK/console.$1" >"$WORK/ibsim.$1.out" 2>&1) &
    PIDS+=("$!")
    for _ in $(seq 600); do
        grep -q "@$SOCK:ctl" /proc/net/unix && return 0
        sleep 0.1
    done
    echo "sa.sh: ibsim did not come up" >&2
    exit 1
}

stop_all() {
    for p in "${PIDS[@]:-}"; do
        [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
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

wait_until() { # timeout_s, then a command that succeeds when done
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -ge "$deadline" ] && return 1
        sleep 0.05
    done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

on() { # host, command... : run under umad2sim on that HCA of the current ibsim
    # (from $WORK: umad2sim leaves a sys-PID dir in the cwd of a process that is killed)
    local host=$1
    shift
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$host LD_PRELOAD=$UMAD2SIM "$@")
}
sa() { on "$CLIENT" "$IBSMCTL" sa --sm-key 1 "$@"; }
own_lid() { on "$1" ibaddr 2>/dev/null | sed -n 's/.*LID start \(0x[0-9a-fA-F]*\).*/\1/p' | head -1; }

status_json() { "$IBSMCTL" --json --rpc-timeout-ms 2000 --endpoint "http://127.0.0.1:$1" status 2>/dev/null || true; }
settled() { # the master's port, the standbys' ports
    local m s
    m=$(status_json "$1")
    echo "$m" | grep -q '"state":"MASTER"' || return 1
    echo "$m" | grep -q '"degraded":false' || return 1
    echo "$m" | grep -q '"last_sweep":"master heavy sweep' || return 1
    shift
    for p in "$@"; do
        s=$(status_json "$p")
        echo "$s" | grep -q '"state":"STANDBY"' || return 1
    done
}

start_ibsmd() { # host, priority, node id
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$1 LD_PRELOAD=$UMAD2SIM NO_COLOR=1 \
        RUST_LOG=info,openraft=warn,ibsm_core::election=warn \
        exec "$IBSMD" --fabric umad --priority "$2" --insecure-plaintext \
        --grpc "127.0.0.1:${PORTS[$3]}" --node-id "$3" --data-dir "$WORK/data.$3" \
        --cluster-secret-file "$WORK/cluster-secret" \
        --peer "1=127.0.0.1:${PORTS[1]}" --peer "2=127.0.0.1:${PORTS[2]}" --peer "3=127.0.0.1:${PORTS[3]}" \
        2>"$WORK/ibsmd.$3.log" >/dev/null) &
    SM_PID=$!
    PIDS+=("$SM_PID")
}

start_opensm() { # host, priority, poll_ms ("" = defaults), retries, tag
    local host=$1 prio=$2 poll=$3 retries=$4 tag=$5
    local cache=$WORK/$tag.cache
    mkdir -p "$cache"
    cp "$WORK/guid2lid" "$cache/guid2lid"
    {
        echo "force_log_flush TRUE"
        echo "sm_priority $prio"
        echo "honor_guid2lid_file TRUE"
        echo "dump_files_dir $cache/"
        if [ -n "$poll" ]; then
            echo "sminfo_polling_timeout $poll"
            echo "polling_retry_number $retries"
        fi
    } >"$WORK/$tag.conf"
    (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$host LD_PRELOAD=$UMAD2SIM OSM_CACHE_DIR=$cache \
        exec opensm -F "$WORK/$tag.conf" -f "$WORK/$tag.log" >/dev/null 2>&1) &
    SM_PID=$!
    PIDS+=("$SM_PID")
}

# How many records the client's warning (in file $1) says arrived damaged (0 if none).
damaged() { sed -n 's/^ibsmctl: warning: \([0-9]*\) .*bytes missing.*/\1/p' "$1" | head -1 | grep . || echo 0; }

# JSON field of a bench line.
field() { jq -r "$1" <<<"$2"; }
fmt0() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }

# The query rows against the current master; sets Q_* (the SA is the client's MasterSMLID).
query_rows() { # who, gettable(1/0)
    local who=$1 j
    echo "  $who: PathRecord Get, window 1 ($N_W1)..." >&2
    j=$(sa bench path --count "$N_W1" --window 1 --dlids "$DLIDS" --json) || { echo "sa.sh: $who path bench failed: $j" >&2; exit 1; }
    echo "    $j" >&2
    Q_W1=$(fmt0 "$(field .ops_per_s "$j")"); Q_W1_P50=$(fmt0 "$(field .latency_us.p50 "$j")"); Q_W1_P99=$(fmt0 "$(field .latency_us.p99 "$j")")
    Q_ERR="$(field '.errors | to_entries | map("\(.key)=\(.value)") | join(",")' "$j")"
    Q_RES=$(field .resends "$j")
    echo "  $who: PathRecord Get, window 16 ($N_W16)..." >&2
    j=$(sa bench path --count "$N_W16" --window 16 --dlids "$DLIDS" --json) || { echo "sa.sh: $who path bench failed: $j" >&2; exit 1; }
    echo "    $j" >&2
    Q_W16=$(fmt0 "$(field .ops_per_s "$j")"); Q_W16_P50=$(fmt0 "$(field .latency_us.p50 "$j")"); Q_W16_P99=$(fmt0 "$(field .latency_us.p99 "$j")")
    Q_ERR="$Q_ERR $(field '.errors | to_entries | map("\(.key)=\(.value)") | join(",")' "$j")"
    Q_RES="$Q_RES+$(field .resends "$j")"
    echo "  $who: MCMemberRecord join/leave ($N_JOIN groups)..." >&2
    j=$(sa bench join --count "$N_JOIN" --window 4 --json) || { echo "sa.sh: $who join bench failed: $j" >&2; exit 1; }
    echo "    $j" >&2
    Q_JOIN=$(fmt0 "$(field .ops_per_s "$j")")
    Q_ERR="$Q_ERR $(field '.errors | to_entries | map("\(.key)=\(.value)") | join(",")' "$j")"
    Q_RES="$Q_RES+$(field .resends "$j")"
    Q_ONE=n/a Q_ALL=n/a
    if [ "$2" = 1 ]; then
        local t0 t1 n
        echo "  $who: PathRecord GetTable from LID $MY_LID..." >&2
        t0=$(now)
        n=$(sa paths --slid "$MY_LID" 2>"$WORK/one.err" | tail -1)
        t1=$(now)
        Q_ONE=$(secs "$t0" "$t1")
        echo "    $n in $Q_ONE s; $(damaged "$WORK/one.err") of them with bytes lost in umad2sim" >&2
        echo "  $who: PathRecord GetTable from every source..." >&2
        t0=$(now)
        n=$(sa paths --all 2>"$WORK/all.err" | tail -1)
        t1=$(now)
        Q_ALL=$(secs "$t0" "$t1")
        Q_ALL_DAMAGED=$(damaged "$WORK/all.err")
        echo "    $n in $Q_ALL s; $Q_ALL_DAMAGED of them with bytes lost in umad2sim" >&2
        Q_ALL_N=${n%% *}
    fi
}

# Ask the new master (LID $1) for one PathRecord until it answers; prints seconds since $2.
first_answer() { # sa_lid, t0
    local deadline=$(($(date +%s) + 240))
    until sa --sa-lid "$1" --timeout-ms 100 --retries 0 --get paths --slid "$MY_LID" --dlid "$FIRST_DLID" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$deadline" ] && { echo "-"; return; }
    done
    secs "$2" "$(now)"
}

echo "SA bench on a k=$K fat tree ($N_NODES nodes, $N_HCA HCAs); SMs on $HOST_A $HOST_B $HOST_C, client on $CLIENT" >&2

# --- ibsmd: three replicated instances.
echo "ibsmd: starting three replicated instances..." >&2
start_ibsim ibsmd
PORTS=(0 "$(free_port)" "$(free_port)" "$(free_port)")
start_ibsmd "$HOST_A" 10 1
PID_A=$SM_PID
wait_until 300 grep -sqF -- "-> MASTER (" "$WORK/ibsmd.1.log" || {
    echo "sa.sh: ibsmd A never became MASTER" >&2; tail -20 "$WORK/ibsmd.1.log" >&2; exit 1; }
start_ibsmd "$HOST_B" 8 2
start_ibsmd "$HOST_C" 6 3
wait_until 300 settled "${PORTS[1]}" "${PORTS[2]}" "${PORTS[3]}" || {
    echo "sa.sh: the ibsmd cluster did not settle" >&2; tail -20 "$WORK/ibsmd.2.log" >&2; exit 1; }

# ibsmd's LIDs: OpenSM gets them as its guid2lid; the HCAs' are the bench's destinations.
on "$CLIENT" ibnetdiscover -p >"$WORK/ports.txt" 2>/dev/null
awk '$1 == "CA" || $1 == "SW" { print $4, $2 }' "$WORK/ports.txt" | sort -u |
    awk '{ printf "%s 0x%04x 0x%04x\n\n", $1, $2, $2 }' >"$WORK/guid2lid"
DLIDS=$(awk '$1 == "CA" { print $2 }' "$WORK/ports.txt" | sort -un | paste -sd,)
FIRST_DLID=${DLIDS%%,*}
N_DLIDS=$(tr ',' '\n' <<<"$DLIDS" | wc -l)
[ "$N_DLIDS" = "$N_HCA" ] || { echo "sa.sh: ibnetdiscover saw $N_DLIDS HCA LIDs, the net has $N_HCA" >&2; exit 1; }
MY_LID=$(own_lid "$CLIENT")
LID_A=$(own_lid "$HOST_A")
LID_B=$(own_lid "$HOST_B")
[ -n "$MY_LID" ] && [ -n "$LID_A" ] && [ -n "$LID_B" ] || { echo "sa.sh: ibaddr gave no LID for $CLIENT, $HOST_A or $HOST_B" >&2; exit 1; }
sleep 2
query_rows ibsmd 1
IB_Q=("$Q_W1" "$Q_W1_P50" "$Q_W1_P99" "$Q_W16" "$Q_W16_P50" "$Q_W16_P99" "$Q_ONE" "$Q_ALL" "$Q_JOIN")
IB_ERR=$Q_ERR IB_RES=$Q_RES IB_ALL_N=${Q_ALL_N:-?} IB_ALL_DAMAGED=${Q_ALL_DAMAGED:-?}
# Does the standby answer before the kill? (It should not: only the master's SA answers.)
STANDBY_ANSWERS=no
sa --sa-lid "$LID_B" --timeout-ms 200 --retries 0 --get paths --slid "$MY_LID" --dlid "$FIRST_DLID" >/dev/null 2>&1 && STANDBY_ANSWERS=yes
echo "ibsmd: SIGKILL of the master (A); asking B (LID $LID_B)..." >&2
t0=$(now)
kill -9 "$PID_A"
wait "$PID_A" 2>/dev/null || true
reap ibsmd
IB_FAIL=$(first_answer "$LID_B" "$t0")
echo "  first PathRecord from B after $IB_FAIL s (standby answered before the kill: $STANDBY_ANSWERS)" >&2

# --- The floor: a trivial responder on A's HCA (its SM is gone), once B settled.
wait_until 300 settled "${PORTS[2]}" "${PORTS[3]}" || echo "sa.sh: B did not settle as master; the floor is measured anyway" >&2
path_rate() { # sa_lid, window, count -> ops/s
    local j
    j=$(sa --sa-lid "$1" bench path --count "$3" --window "$2" --dlids "$DLIDS" --json) || { echo "sa.sh: path bench at LID $1 failed: $j" >&2; exit 1; }
    echo "    $j" >&2
    fmt0 "$(field .ops_per_s "$j")"
}
echo "floor: trivial PathRecord responder on $HOST_A (LID $LID_A)..." >&2
(cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST_A LD_PRELOAD=$UMAD2SIM exec "$FLOOR" 2>"$WORK/floor.log") &
PIDS+=("$!")
wait_until 30 grep -sqF "answering" "$WORK/floor.log" || { echo "sa.sh: the floor responder did not start" >&2; cat "$WORK/floor.log" >&2; exit 1; }
join_rate() { # sa_lid -> ops/s
    local j
    j=$(sa --sa-lid "$1" bench join --count "$N_JOIN" --window 4 --json) || { echo "sa.sh: join bench at LID $1 failed: $j" >&2; exit 1; }
    echo "    $j" >&2
    fmt0 "$(field .ops_per_s "$j")"
}
max() { [ "${1:-0}" -ge "${2:-0}" ] && echo "${1:-0}" || echo "${2:-0}"; }
# Best of three, the floor and B alternating, so a burst of load from elsewhere on the
# host does not land on one of them only.
B_W1=0 B_W16=0 B_JOIN=0 FL_W1=0 FL_W16=0 FL_JOIN=0
for round in 1 2 3; do
    echo "  round $round: B (LID $LID_B), then the floor (LID $LID_A): Get w1, w16, join" >&2
    B_W1=$(max "$B_W1" "$(path_rate "$LID_B" 1 "$N_W1")")
    FL_W1=$(max "$FL_W1" "$(path_rate "$LID_A" 1 "$N_W1")")
    B_W16=$(max "$B_W16" "$(path_rate "$LID_B" 16 "$N_W16")")
    FL_W16=$(max "$FL_W16" "$(path_rate "$LID_A" 16 "$N_W16")")
    B_JOIN=$(max "$B_JOIN" "$(join_rate "$LID_B")")
    FL_JOIN=$(max "$FL_JOIN" "$(join_rate "$LID_A")")
done
stop_all

# --- OpenSM, 100 ms x 2, same LIDs.
opensm_pair() { # poll, retries, tag -> starts A and B, waits for STANDBY; sets OSM_A
    start_opensm "$HOST_A" 10 "$1" "$2" "$3-a"
    OSM_A=$SM_PID
    wait_until 300 grep -sqF -- "SUBNET UP" "$WORK/$3-a.log" || { echo "sa.sh: OpenSM A never reached SUBNET UP" >&2; exit 1; }
    start_opensm "$HOST_B" 5 "$1" "$2" "$3-b"
    wait_until 300 grep -sqF -- "Entering STANDBY state" "$WORK/$3-b.log" || { echo "sa.sh: OpenSM B never became STANDBY" >&2; exit 1; }
    local lid
    lid=$(own_lid "$CLIENT")
    [ "$lid" = "$MY_LID" ] || { echo "sa.sh: OpenSM gave $CLIENT LID $lid, ibsmd $MY_LID (guid2lid not honoured)" >&2; exit 1; }
    sleep 2
}
opensm_failover() { # tag -> prints seconds
    local t0
    t0=$(now)
    kill -9 "$OSM_A"
    wait "$OSM_A" 2>/dev/null || true
    reap "$1"
    first_answer "$LID_B" "$t0"
}

echo "OpenSM (100 ms x 2): starting two instances with ibsmd's LIDs..." >&2
start_ibsim osm
opensm_pair 100 2 osm
query_rows opensm 0
OS_Q=("$Q_W1" "$Q_W1_P50" "$Q_W1_P99" "$Q_W16" "$Q_W16_P50" "$Q_W16_P99" "$Q_ONE" "$Q_ALL" "$Q_JOIN")
OS_ERR=$Q_ERR OS_RES=$Q_RES
echo "OpenSM: SIGKILL of the master..." >&2
OS_FAIL=$(opensm_failover osm)
echo "  first PathRecord from B after $OS_FAIL s" >&2
stop_all

OS_FAIL_DEF=skipped
if [ "$QUICK" = 0 ]; then
    echo "OpenSM (defaults, 10 s x 4): failover..." >&2
    start_ibsim osmdef
    opensm_pair "" "" osmdef
    OS_FAIL_DEF=$(opensm_failover osmdef)
    echo "  first PathRecord from B after $OS_FAIL_DEF s" >&2
    stop_all
fi

ratio() { # a b -> a / b
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}
pct() { # a b -> a as % of b
    awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.0f%%", 100 * a / b; else print "-" }'
}
row() { printf '%-52s | %10s | %10s | %6s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"; }

echo
echo "SA on ibsim, k=$K fat tree ($N_NODES nodes, $N_HCA HCAs), release build, client on $CLIENT; ratio = ibsmd / OpenSM"
echo "goal: query rate ratio >= 2; failover ratio < 1"
printf '%-52s | %10s | %10s | %6s\n' "" ibsmd OpenSM ratio
printf '%-52s-+-%10s-+-%10s-+-%6s\n' "----------------------------------------------------" "----------" "----------" "------"
row "PathRecord Get/s, window 1 ($N_W1)" "${IB_Q[0]}" "${OS_Q[0]}"
row "  latency p50 / p99 us" "${IB_Q[1]}/${IB_Q[2]}" "${OS_Q[1]}/${OS_Q[2]}"
row "PathRecord Get/s, window 16 ($N_W16)" "${IB_Q[3]}" "${OS_Q[3]}"
row "  latency p50 / p99 us" "${IB_Q[4]}/${IB_Q[5]}" "${OS_Q[4]}/${OS_Q[5]}"
row "PathRecord GetTable, one source -> all, s" "${IB_Q[6]}" "n/a (1)"
row "PathRecord GetTable, all-to-all ($IB_ALL_N recs), s" "${IB_Q[7]}" "n/a (1)"
row "MCMemberRecord join+leave ops/s, window 4" "${IB_Q[8]}" "${OS_Q[8]}"
row "SIGKILL master -> 1st PathRecord, s (2)" "$IB_FAIL" "$OS_FAIL"
row "  ... OpenSM at its defaults (10 s x 4), s" "$IB_FAIL" "$OS_FAIL_DEF"
cell() { printf '%-52s | %10s | %10s | %6s\n' "$@"; }
cell "floor: trivial responder Get/s, window 1 (3)" "$FL_W1" "$FL_W1" "$(ratio "$FL_W1" "${OS_Q[0]}")"
cell "  ... the SM's rate as % of the floor" "$(pct "${IB_Q[0]}" "$FL_W1")" "$(pct "${OS_Q[0]}" "$FL_W1")" ""
cell "  ... ibsmd's new master B, same load as the floor" "$B_W1 $(pct "$B_W1" "$FL_W1")" "" ""
cell "floor: trivial responder Get/s, window 16 (3)" "$FL_W16" "$FL_W16" "$(ratio "$FL_W16" "${OS_Q[3]}")"
cell "  ... the SM's rate as % of the floor" "$(pct "${IB_Q[3]}" "$FL_W16")" "$(pct "${OS_Q[3]}" "$FL_W16")" ""
cell "  ... ibsmd's new master B, same load as the floor" "$B_W16 $(pct "$B_W16" "$FL_W16")" "" ""
cell "floor: trivial responder join+leave ops/s (3)" "$FL_JOIN" "$FL_JOIN" "$(ratio "$FL_JOIN" "${OS_Q[8]}")"
cell "  ... the SM's rate as % of the floor" "$(pct "${IB_Q[8]}" "$FL_JOIN")" "$(pct "${OS_Q[8]}" "$FL_JOIN")" ""
cell "  ... ibsmd's new master B, same load as the floor" "$B_JOIN $(pct "$B_JOIN" "$FL_JOIN")" "" ""
echo "errors (by kind) ibsmd: [${IB_ERR}] OpenSM: [${OS_ERR}]; client resends (w1+w16+join) ibsmd: $IB_RES, OpenSM: $OS_RES"
echo "    all-to-all: every end port (HCAs and switches) to every other; $IB_ALL_DAMAGED records arrived"
echo "    with bytes lost in umad2sim (it passes 232 of a segment's 256 bytes), counted, not re-asked."
echo "(1) OpenSM leaves RMPP to the kernel; under umad2sim only the first 256 bytes of its"
echo "    multi-MAD answers leave it, so a whole GetTable from OpenSM cannot be measured on ibsim."
echo "(2) ibsmd: three replicated instances at their defaults (25 ms polls, 20 ms re-polls x 3); OpenSM: two"
echo "    instances at 100 ms x 2. SubnAdmGet to the new master's LID, retried every 0.1 s by a"
echo "    fresh ibsmctl (resolution ~0.1 s). ibsmd's standby answered before the kill: $STANDBY_ANSWERS."
echo "(3) No SM logic: every SubnAdmGet(PathRecord) answered with one fixed record, every MCMemberRecord"
echo "    Set/Delete with its own record (examples/sa_floor.rs: no group kept, no MFT, no replication),"
echo "    on the ibsmd fabric after the failover row, same client and destinations, best of 3 rounds"
echo "    alternating with the new master B (two instances left; also best of 3): what ibsim/umad2sim"
echo "    carries; its ratio column is floor / OpenSM, the most any SM could show against OpenSM here."
