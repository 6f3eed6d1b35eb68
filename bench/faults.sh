#!/usr/bin/env bash
# Reaction to a pulled and a restored cable, ibsmd vs OpenSM on ibsim (under umad2sim),
# same net files, one run.
#
# Usage: bench/faults.sh [SIZE...]      SIZE: k16, k24 (3-level fat trees), any kN. Default: k16 k24.
# Env:   IBSM_FAULTS_FULL_READ=SIZES  sizes whose LFTs are read whole before and after each
#                                     event to count the blocks that changed (default: k16;
#                                     "all" for every size; a k=24 read takes minutes here)
#        IBSM_BENCH_OPENSM=0          skip OpenSM (ratio column empty)
#        IBSM_BENCH_DIR=DIR           keep net files and logs there (default: a temp dir, removed)
#
# For each size and SM: a fresh ibsim with its console on a FIFO, the SM on the first Hca,
# subnet up, then quiet for a few seconds. The cable is edge-P-1's first uplink to agg-P-0
# (P = the last pod; the SM sits in pod 0). A reader on the second Hca reads the two
# switches at the cable's ends by directed route over paths that avoid it.
#
# The judge is the fabric: the time runs from just before the console command is written.
# * `Unlink` -> "repaired": the first poll in which neither end switch's LFT (ibroute -n,
#   every block, read back through umad) forwards any LID into the pulled cable. Every
#   route that crossed the cable crosses one of those two switches, so this is the moment
#   no route of the fabric leads into the dead cable any more.
# * `ReLink` -> "active+routed": the first poll in which the edge port reads PortState
#   Active and both end switches forward LIDs into the cable again.
# A poll round reads both switches (and the port) one after the other, so the times are
# upper bounds with the round's length as resolution ("poll s" column, median round).
# Beside the judge, the SM's own log time of the end of the work the event started
# ("log s", its first such line after the event: ibsmd's "heavy sweep done", OpenSM's
# "minhop tables configured on all switches"), the LFT
# blocks ibsmd wrote (its log, `lft_blocks=`, summed over the sweeps the event caused),
# and for the sizes in IBSM_FAULTS_FULL_READ the LFT blocks that differ fabric-wide
# between whole reads (ibroute of every switch) before and after each event, for both
# SMs ("changed"), and whether the restore put back the tables read before the pull.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for t in ibsim opensm ibroute smpquery ibswitches; do
    command -v "$t" >/dev/null || { echo "faults.sh: $t is not installed (apt-get install ibsim-utils opensm infiniband-diags)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "faults.sh: $UMAD2SIM missing (ibsim-utils)" >&2; exit 1; }

SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(k16 k24)
FULL_READ=${IBSM_FAULTS_FULL_READ:-k16}
RUN_OPENSM=${IBSM_BENCH_OPENSM:-1}
TIMEOUT_S=${IBSM_BENCH_TIMEOUT_S:-300}
EVENT_TIMEOUT_S=60
QUIET_S=3

if [ -n "${IBSM_BENCH_DIR:-}" ]; then
    WORK=$IBSM_BENCH_DIR; mkdir -p "$WORK"
else
    WORK=$(mktemp -d /tmp/ibsm-faults.XXXXXX)
fi
PIDS=()
stop_pid() { # SIGTERM, then SIGKILL (OpenSM can hang once its ibsim is gone)
    kill "$1" 2>/dev/null || return 0
    for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$1" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    [ -n "${IBSM_BENCH_DIR:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "building release ibsmd, ibsmctl..." >&2
cargo build --release --quiet -p ibsmd-bin -p ibsmctl
IBSMD=$ROOT/target/release/ibsmd
IBSMCTL=$ROOT/target/release/ibsmctl

now() { date +%s.%N; }
sub() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "-"; else printf "%.2f\n", a - b }'; }
ts_ibsmd() { date -d "$1" +%s.%N; }
ts_opensm() { printf '%s.%06d\n' "$(date -d "$1" +%s)" "$((10#$2))"; }

# Run a diag on the reader Hca.
# Every umad2sim client runs in WORK: it leaves a sys-PID directory in its cwd.
diag() { (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$READER LD_PRELOAD=$UMAD2SIM "$@"); }

start_ibsim() { # netfile -> SIM_PID, CONSOLE (a FIFO kept open by a holder process)
    local net=$1 nodes switches ports
    read -r nodes switches ports < <(awk '
        /^(Switch|Hca|Ca|Router)[ \t]/ { n++; if ($1 == "Switch") s++; p += $2 + 1 }
        END { print n+0, s+0, p+0 }' "$net")
    CONSOLE=$WORK/$SOCK.console
    rm -f "$CONSOLE"; mkfifo "$CONSOLE"
    sleep 1000000 >"$CONSOLE" &
    PIDS+=("$!")
    IBSIM_SOCKNAME=$SOCK ibsim -s -N $((nodes + 64)) -S $((switches + 64)) -P $((ports + 1024)) \
        "$net" <"$CONSOLE" >"$WORK/$SOCK.ibsim.log" 2>&1 &
    SIM_PID=$!
    PIDS+=("$SIM_PID")
    local deadline=$((SECONDS + 120))
    until diag smpquery -D nodeinfo 0 >/dev/null 2>&1; do
        kill -0 "$SIM_PID" 2>/dev/null || { echo "ibsim died:" >&2; cat "$WORK/$SOCK.ibsim.log" >&2; return 1; }
        [ $SECONDS -lt $deadline ] || { echo "ibsim not ready after 120 s" >&2; return 1; }
        sleep 0.2
    done
}

console() { printf '%s\n' "$1" >"$CONSOLE"; }

# Count of LFT entries of the switch at DR path $1 that leave through port $2. LID 0 is
# no destination: ibroute lists it on a switch ibsmd programmed, with the LFT stamp
# ibsmd keeps there (an even number, subnet/lft_stamp.rs) in the port column; skipped.
via_port() { diag ibroute -n -D "$1" 2>/dev/null | awk -v p="$(printf '%03d' "$2")" '$1 ~ /^0x/ && $1 != "0x0000" && $2 == p { n++ } END { print n+0 }'; }
port_state() { diag smpquery -D portinfo "$1" "$2" 2>/dev/null | awk -F. '/^LinkState/ { print $NF }'; }

# Every switch's LFT (ibroute -n by LID) into directory $1, one file per switch LID
# (LID 0, ibsmd's LFT stamp, left out as in via_port: the routes are compared).
full_read() {
    local dir=$1 lid
    mkdir -p "$dir"
    for lid in $SWITCH_LIDS; do
        diag ibroute -n "$lid" 2>/dev/null | awk '$1 ~ /^0x/ && $1 != "0x0000" { print $1, $2 }' >"$dir/$lid"
    done
}
# LFT blocks (64 LIDs) that differ between two full reads.
blocks_diff() {
    local a=$1 b=$2 lid
    for lid in $SWITCH_LIDS; do
        awk -v lid="$lid" 'FNR == NR { x[$1] = $2; next } { y[$1] = $2 }
            function hex(s,  i, n, c) { n = 0; s = tolower(substr(s, 3))
                for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)) - 1; n = n * 16 + c }
                return n }
            END { for (k in x) if (x[k] != y[k]) d[int(hex(k) / 64)] = 1
                  for (k in y) if (x[k] != y[k]) d[int(hex(k) / 64)] = 1
                  n = 0; for (k in d) n++; print n }' "$a/$lid" "$b/$lid"
    done | awk '{ s += $1 } END { print s + 0 }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f\n", v[int((NR + 1) / 2)]; else print "-" }'; }

# Poll until "$@" (a shell function) succeeds; sets T_DONE and POLL (median round, s).
poll_until() {
    local deadline=$((SECONDS + EVENT_TIMEOUT_S)) a b rounds=()
    T_DONE=""
    while [ $SECONDS -lt $deadline ]; do
        a=$(now)
        if "$@"; then T_DONE=$(now); rounds+=("$(sub "$T_DONE" "$a")"); break; fi
        b=$(now); rounds+=("$(sub "$b" "$a")")
    done
    POLL=$(printf '%s\n' "${rounds[@]}" | median)
}

repaired() { [ "$(via_port "$EDGE_PATH" "$EDGE_PORT")" = 0 ] && [ "$(via_port "$AGG_PATH" "$AGG_PORT")" = 0 ]; }
restored() {
    [ "$(port_state "$EDGE_PATH" "$EDGE_PORT")" = Active ] &&
        [ "$(via_port "$EDGE_PATH" "$EDGE_PORT")" != 0 ] &&
        [ "$(via_port "$AGG_PATH" "$AGG_PORT")" != 0 ]
}

# The SM's first "work done" log time after $1 (epoch s: the sweep the event started;
# a trap from the cable's other end may start one more, held down, that writes nothing),
# and (ibsmd) the LFT blocks written by every sweep after $1.
sm_log_after() {
    local t0=$1 line t last="" blocks=0 n
    if [ "$SM" = ibsmd ]; then
        while IFS= read -r line; do
            t=$(ts_ibsmd "${line%% *}")
            if awk -v a="$t" -v b="$t0" 'BEGIN { exit !(a > b) }'; then
                [ -n "$last" ] || last=$t
                n=$(sed -n 's/.*lft_blocks=\([0-9]*\).*/\1/p' <<<"$line")
                blocks=$((blocks + ${n:-0}))
            fi
        done < <(grep 'heavy sweep done' "$SM_LOG" || true)
    else
        while IFS= read -r line; do
            t=$(ts_opensm "$(awk '{print $1, $2, $3}' <<<"$line")" "$(awk '{print $4}' <<<"$line")")
            if [ -z "$last" ] && awk -v a="$t" -v b="$t0" 'BEGIN { exit !(a > b) }'; then last=$t; fi
        done < <(grep 'tables configured on all switches' "$SM_LOG" || true)
        blocks="-"
    fi
    LOG_T=$last
    LOG_BLOCKS=$blocks
}

# Wait until the SM's log has not grown for QUIET_S seconds.
quiet() {
    local size prev="" deadline=$((SECONDS + 60))
    while [ $SECONDS -lt $deadline ]; do
        size=$(stat -c %s "$SM_LOG")
        [ "$size" = "$prev" ] && return 0
        prev=$size
        sleep "$QUIET_S"
    done
}

start_sm() { # -> SM_PID, SM_LOG; waits for subnet up
    local deadline=$((SECONDS + TIMEOUT_S)) dir
    if [ "$SM" = ibsmd ]; then
        SM_LOG=$WORK/$SOCK.ibsmd.log
        : >"$SM_LOG"
        (cd "$WORK" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST LD_PRELOAD=$UMAD2SIM RUST_LOG=info NO_COLOR=1 \
            exec "$IBSMD" --fabric umad --priority 10 --grpc 127.0.0.1:0 --insecure-plaintext \
            >/dev/null 2>"$SM_LOG") &
        SM_PID=$!
        PIDS+=("$SM_PID")
        until grep -q 'subnet up' "$SM_LOG"; do
            kill -0 "$SM_PID" 2>/dev/null || { echo "ibsmd died:" >&2; tail -20 "$SM_LOG" >&2; return 1; }
            [ $SECONDS -lt $deadline ] || { echo "ibsmd: no subnet up" >&2; return 1; }
            sleep 0.1
        done
    else
        dir=$WORK/$SOCK.opensm
        mkdir -p "$dir"
        SM_LOG=$dir/opensm.log
        printf 'force_log_flush TRUE\nsm_priority 10\nlog_file %s\ndump_files_dir %s/\n' \
            "$SM_LOG" "$dir" >"$dir/opensm.conf"
        : >"$SM_LOG"
        (cd "$dir" && IBSIM_SOCKNAME=$SOCK SIM_HOST=$HOST LD_PRELOAD=$UMAD2SIM OSM_CACHE_DIR=$dir \
            exec opensm -F "$dir/opensm.conf" -f "$SM_LOG" </dev/null >"$dir/opensm.out" 2>&1) &
        SM_PID=$!
        PIDS+=("$SM_PID")
        until grep -q 'SUBNET UP' "$SM_LOG"; do
            kill -0 "$SM_PID" 2>/dev/null || { echo "opensm died:" >&2; tail -20 "$dir/opensm.out" >&2; return 1; }
            [ $SECONDS -lt $deadline ] || { echo "opensm: no SUBNET UP" >&2; return 1; }
            sleep 0.1
        done
    fi
}

name_of() { # ibsim node name of the switch described $1 in the net file
    awk -v d="\"$1\"" '$1 == "Switch" && index($0, "# " d) { print $3; exit }' "$NET" | tr -d '"'
}

run_one() { # SM=ibsmd|opensm; prints one result line
    SOCK="ibsmfaults$$-$SM-$name"
    start_ibsim "$NET"
    start_sm
    quiet
    local full=0 t0 rep_t rep_poll rep_log rep_blocks up_t up_poll up_log up_blocks
    local ch_down="-" ch_up="-" back="-"
    case " $FULL_READ " in *" $name "* | *" all "*) full=1 ;; esac
    if [ $full = 1 ]; then
        SWITCH_LIDS=$(diag ibswitches 2>/dev/null | sed -n 's/.* lid \([0-9]*\) .*/\1/p')
        echo "  $SM: reading every LFT ($(wc -w <<<"$SWITCH_LIDS") switches)..." >&2
        full_read "$WORK/$SOCK.before"
    fi
    # Pull.
    t0=$(now)
    console "Unlink \"$EDGE_NAME\"[$EDGE_PORT]"
    poll_until repaired
    rep_t=$(sub "$T_DONE" "$t0"); rep_poll=$POLL
    quiet
    sm_log_after "$t0"; rep_log=$(sub "$LOG_T" "$t0"); rep_blocks=$LOG_BLOCKS
    if [ $full = 1 ]; then
        full_read "$WORK/$SOCK.down"
        ch_down=$(blocks_diff "$WORK/$SOCK.before" "$WORK/$SOCK.down")
    fi
    # Restore.
    t0=$(now)
    console "ReLink \"$EDGE_NAME\"[$EDGE_PORT]"
    poll_until restored
    up_t=$(sub "$T_DONE" "$t0"); up_poll=$POLL
    quiet
    sm_log_after "$t0"; up_log=$(sub "$LOG_T" "$t0"); up_blocks=$LOG_BLOCKS
    if [ $full = 1 ]; then
        full_read "$WORK/$SOCK.up"
        ch_up=$(blocks_diff "$WORK/$SOCK.down" "$WORK/$SOCK.up")
        if [ "$(blocks_diff "$WORK/$SOCK.before" "$WORK/$SOCK.up")" = 0 ]; then back=yes; else back=no; fi
    fi
    stop_pid "$SM_PID"; stop_pid "$SIM_PID"
    echo "  $SM: pull->repaired ${rep_t}s (log ${rep_log}s, written $rep_blocks, changed $ch_down); restore->active+routed ${up_t}s (log ${up_log}s, written $up_blocks, changed $ch_up, tables back: $back)" >&2
    RESULT="$rep_t $rep_poll $rep_log $rep_blocks $ch_down $up_t $up_poll $up_log $up_blocks $ch_up $back"
}

ROWS=()
for name in "${SIZES[@]}"; do
    case "$name" in
        k*) k=${name#k} ;;
        *) echo "faults.sh: unknown size $name (k16, k24...)" >&2; exit 2 ;;
    esac
    h=$((k / 2)); P=$((k - 1))
    NET=$WORK/$name.net
    if [ ! -s "$NET" ]; then
        echo "generating $name..." >&2
        "$IBSMCTL" discover --fabric "gen:fat-tree:$k" --write-net "$NET" >/dev/null
    fi
    HOST=$(awk '/^(Hca|Ca)[ \t]/ { if (match($0, /"[^"]*"/)) { print substr($0, RSTART + 1, RLENGTH - 2); exit } }' "$NET")
    READER=$(awk '/^(Hca|Ca)[ \t]/ { if (match($0, /"[^"]*"/) && ++n == 2) { print substr($0, RSTART + 1, RLENGTH - 2); exit } }' "$NET")
    # edge-P-1 port h+1 <-> agg-P-0 port 2. From the reader (hca-1, on edge-0-0):
    # edge-0-0 -(h+2)-> agg-0-1 -(h+1)-> core-h -(P+1)-> agg-P-1 -(2)-> edge-P-1, and
    # edge-0-0 -(h+1)-> agg-0-0 -(h+1)-> core-0 -(P+1)-> agg-P-0: neither crosses the cable.
    EDGE_NAME=$(name_of "edge-$P-1"); EDGE_PORT=$((h + 1))
    AGG_PORT=2
    EDGE_PATH="0,1,$((h + 2)),$((h + 1)),$((P + 1)),2"
    AGG_PATH="0,1,$((h + 1)),$((h + 1)),$((P + 1))"
    nodes=$(grep -cE '^(Switch|Hca|Ca)[[:space:]]' "$NET")
    echo "== $name: $nodes nodes, SM on $HOST, cable edge-$P-1[$EDGE_PORT] - agg-$P-0[$AGG_PORT]" >&2
    SM=ibsmd; run_one; a=($RESULT)
    b=(- - - - - - - - - - -)
    if [ "$RUN_OPENSM" != 0 ]; then SM=opensm; run_one; b=($RESULT); fi
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
    ROWS+=("$(printf '%-5s %-7s %6s %6s %6s %11s %11s %7s %11s %7s' "$name" pull "${a[0]}" "${b[0]}" "$(ratio "${a[0]}" "${b[0]}")" "${a[1]}/${b[1]}" "${a[2]}/${b[2]}" "${a[3]}" "${a[4]}/${b[4]}" -)")
    ROWS+=("$(printf '%-5s %-7s %6s %6s %6s %11s %11s %7s %11s %7s' "$name" restore "${a[5]}" "${b[5]}" "$(ratio "${a[5]}" "${b[5]}")" "${a[6]}/${b[6]}" "${a[7]}/${b[7]}" "${a[8]}" "${a[9]}/${b[9]}" "${a[10]}/${b[10]}")")
done

echo
echo "cable pulled (Unlink) -> no LFT forwards into it (read back from both end switches);"
echo "cable restored (ReLink) -> port Active and both end switches forward into it again."
echo "s = seconds from the console command (upper bounds; poll = median judge round, s);"
echo "log = the SM's own first end-of-work log line after the event; written = LFT blocks ibsmd wrote (its log);"
echo "changed = LFT blocks that differ fabric-wide between whole reads, before/after the event;"
echo "back = restored tables equal those before the pull. i/o = ibsmd/opensm; ratio = ibsmd / opensm."
printf '%-5s %-7s %6s %6s %6s %11s %11s %7s %11s %7s\n' size event ibsmd opensm ratio "poll i/o" "log i/o" written "changed i/o" "back i/o"
for r in "${ROWS[@]}"; do echo "$r"; done
