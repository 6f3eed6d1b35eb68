#!/usr/bin/env bash
# Start-to-subnet-up of ibsmd vs OpenSM on ibsim (under umad2sim), same net files.
#
# Usage: bench/subnet_up.sh [SIZE...]
#   SIZE: ft2-36 (2-level, radix 36: 648 HCAs, 54 switches), k16, k24, k32 (3-level fat
#         trees: 1024/3456/8192 HCAs), or any ftN / kN.   Default: ft2-36 k16 k24.
# Env:   IBSM_SMP_WINDOW=N   ibsmd --smp-window (default 64)
#        IBSM_BENCH_IBSMD_ARGS="..."  more ibsmd options (e.g. --no-sminfo-answer-thread:
#                            the SM thread reads the port itself, as before that thread)
#        IBSM_BENCH_OPENSM=0 skip OpenSM (ratio column empty)
#        IBSM_BENCH_DIR=DIR  keep net files and logs there (default: a temp dir, removed)
#        IBSM_BENCH_SIM_RATE=N  ibsim's answer rate for the floor column, SMPs/s
#                            (default 105000: measured with 64 SMPs in flight, see
#                            /work/shared/notes/fabric-lab.md)
#
# For each size, one run each, side by side: a fresh ibsim (unconfigured fabric: no LIDs,
# ports in Init), the SM started on the first Hca, time measured from just before the
# exec to the timestamp of ibsmd's "subnet up" log line / OpenSM's "SUBNET UP" line
# (OpenSM with force_log_flush TRUE). Then the table `ibsmd s | opensm s | ratio`, with
# ibsmd's SMP total and the SMP floor (that total at ibsim's answer rate), and a second
# table of ibsmd's phases as its "subnet up" line reports them: time, SMPs sent, SMPs/s
# and the mean number of SMPs in flight (how full the window was kept).
# Release builds of ibsmd and ibsmctl (ibsmctl writes the generated net files).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for t in ibsim opensm; do
    command -v "$t" >/dev/null || { echo "subnet_up.sh: $t is not installed (apt-get install ibsim-utils opensm)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "subnet_up.sh: $UMAD2SIM missing (ibsim-utils)" >&2; exit 1; }

SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(ft2-36 k16 k24)
WINDOW=${IBSM_SMP_WINDOW:-64}
RUN_OPENSM=${IBSM_BENCH_OPENSM:-1}
SIM_RATE=${IBSM_BENCH_SIM_RATE:-105000}
TIMEOUT_S=${IBSM_BENCH_TIMEOUT_S:-300}

if [ -n "${IBSM_BENCH_DIR:-}" ]; then
    WORK=$IBSM_BENCH_DIR; mkdir -p "$WORK"
else
    WORK=$(mktemp -d /tmp/ibsm-subnet-up.XXXXXX)
fi
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    [ -n "${IBSM_BENCH_DIR:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "building release ibsmd, ibsmctl..." >&2
cargo build --release --quiet -p ibsmd-bin -p ibsmctl
IBSMD=$ROOT/target/release/ibsmd
IBSMCTL=$ROOT/target/release/ibsmctl

spec_of() {
    case "$1" in
        ft2-*) echo "gen:fat-tree2:${1#ft2-}" ;;
        ft*)   echo "gen:fat-tree2:${1#ft}" ;;
        k*)    echo "gen:fat-tree:${1#k}" ;;
        *) echo "subnet_up.sh: unknown size $1 (ft2-36, k16, k24, k32...)" >&2; return 1 ;;
    esac
}

# Seconds since the epoch of a log timestamp (ibsmd: RFC 3339 UTC; OpenSM: "Mon DD HH:MM:SS USEC").
ts_ibsmd() { date -d "$1" +%s.%N; }
ts_opensm() { # $1 = "Nov 30 11:14:15" $2 = microseconds
    printf '%s.%06d\n' "$(date -d "$1" +%s)" "$((10#$2))"
}

start_ibsim() { # netfile sock -> sets SIM_PID
    local net=$1 sock=$2 nodes switches ports
    read -r nodes switches ports < <(awk '
        /^(Switch|Hca|Ca|Router)[ \t]/ { n++; if ($1 == "Switch") s++; p += $2 + 1 }
        END { print n+0, s+0, p+0 }' "$net")
    IBSIM_SOCKNAME=$sock ibsim -n -s -N $((nodes + 64)) -S $((switches + 64)) -P $((ports + 1024)) \
        "$net" >"$WORK/$sock.ibsim.log" 2>&1 </dev/null &
    SIM_PID=$!
    PIDS+=("$SIM_PID")
    # Ready when a 0-hop SubnGet(NodeInfo) through umad2sim answers.
    local deadline=$((SECONDS + 120))
    until IBSIM_SOCKNAME=$sock SIM_HOST=$HOST LD_PRELOAD=$UMAD2SIM smpquery -D nodeinfo 0 >/dev/null 2>&1; do
        kill -0 "$SIM_PID" 2>/dev/null || { echo "ibsim died:" >&2; cat "$WORK/$sock.ibsim.log" >&2; return 1; }
        [ $SECONDS -lt $deadline ] || { echo "ibsim not ready after 120 s" >&2; return 1; }
        sleep 0.2
    done
}

# ibsmd's "subnet up in T s: discovery A s, LIDs B s, routing C s, distribution D s,
# activation E s" line with its fields smps=, discovery_smps=, ..., and the line of the
# heavy sweep it made while DISCOVERING ("heavy sweep: ... N ms, M SMPs, F in flight";
# the master configures from that discovery) -> one line:
# total disc lids routing dist act smps disc_smps dist_smps act_smps overlapped disc_if
# dist_if act_if standby_ms standby_smps standby_if
phases_of() {
    local l=$1 sb=$2
    # Each value, or "-" when the line does not carry it (an older ibsmd).
    field() { grep -o "$1=\"\?[0-9.]*" <<<"$l" | head -1 | cut -d= -f2 | tr -d '"' | grep . || echo -; }
    secs() { grep -o "$1 [0-9.]* s" <<<"$l" | head -1 | awk '{print $(NF-1)}' | grep . || echo -; }
    sbv() { grep -o "[0-9.]* $1" <<<"$sb" | head -1 | awk '{print $1}' | grep . || echo -; }
    echo "$(secs 'subnet up in') $(secs discovery) $(secs LIDs) $(secs routing)" \
        "$(secs distribution) $(secs activation) $(field smps) $(field discovery_smps)" \
        "$(field distribution_smps) $(field activation_smps) $(field activation_overlapped)" \
        "$(field discovery_in_flight) $(field distribution_in_flight) $(field activation_in_flight)" \
        "$(sbv ms) $(sbv SMPs) $(sbv 'in flight')"
}

stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

run_ibsmd() { # net -> prints seconds (and phase line to stderr)
    local net=$1 sock="ibsmbench$$-$i" log="$WORK/$name.ibsmd.log"
    : >"$log" # before the start, so the wait below never reads an older run's line
    start_ibsim "$net" "$sock"
    local t0 pid line
    t0=$(date +%s.%N)
    IBSIM_SOCKNAME=$sock SIM_HOST=$HOST LD_PRELOAD=$UMAD2SIM RUST_LOG=info NO_COLOR=1 \
        "$IBSMD" --fabric umad --priority 10 --grpc 127.0.0.1:0 --insecure-plaintext \
        --smp-window "$WINDOW" ${IBSM_BENCH_IBSMD_ARGS:-} >/dev/null 2>"$log" &
    pid=$!
    PIDS+=("$pid")
    local deadline=$((SECONDS + TIMEOUT_S))
    until line=$(grep -m1 'subnet up in ' "$log"); do
        kill -0 "$pid" 2>/dev/null || { echo "ibsmd died:" >&2; tail -20 "$log" >&2; break; }
        [ $SECONDS -lt $deadline ] || { echo "ibsmd: no subnet up after $TIMEOUT_S s" >&2; break; }
        sleep 0.05
    done
    stop_pid "$pid"; stop_pid "$SIM_PID"
    [ -n "${line:-}" ] || { echo "-"; return; }
    echo "  ibsmd: ${line#*subnet up}" | cut -c1-240 >&2
    phases_of "$line" "$(grep -m1 'node::standby: heavy sweep:' "$log" || true)" >"$WORK/$name.phases"
    local t1
    t1=$(ts_ibsmd "$(awk '{print $1}' <<<"$line")")
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}

run_opensm() { # net -> prints seconds
    local net=$1 sock="osmbench$$-$i" dir="$WORK/$name.opensm"
    mkdir -p "$dir"
    printf 'force_log_flush TRUE\nsm_priority 10\nlog_file %s/opensm.log\ndump_files_dir %s/\n' \
        "$dir" "$dir" >"$dir/opensm.conf"
    : >"$dir/opensm.log"
    start_ibsim "$net" "$sock"
    local t0 pid line
    t0=$(date +%s.%N)
    (cd "$dir" && IBSIM_SOCKNAME=$sock SIM_HOST=$HOST LD_PRELOAD=$UMAD2SIM OSM_CACHE_DIR=$dir \
        exec opensm -F "$dir/opensm.conf" -f "$dir/opensm.log" </dev/null >"$dir/opensm.out" 2>&1) &
    pid=$!
    PIDS+=("$pid")
    local deadline=$((SECONDS + TIMEOUT_S))
    until line=$(grep -m1 'SUBNET UP' "$dir/opensm.log"); do
        kill -0 "$pid" 2>/dev/null || { echo "opensm died:" >&2; tail -20 "$dir/opensm.out" >&2; break; }
        [ $SECONDS -lt $deadline ] || { echo "opensm: no SUBNET UP after $TIMEOUT_S s" >&2; break; }
        sleep 0.05
    done
    stop_pid "$pid"; stop_pid "$SIM_PID"
    [ -n "${line:-}" ] || { echo "-"; return; }
    local t1
    # "Nov 30 11:14:15 123456 [...] 0x02 -> SUBNET UP"
    t1=$(ts_opensm "$(awk '{print $1, $2, $3}' <<<"$line")" "$(awk '{print $4}' <<<"$line")")
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }'
}

ROWS=()
PHASE_ROWS=()
OVERLAP=()
i=0
for name in "${SIZES[@]}"; do
    i=$((i + 1))
    spec=$(spec_of "$name")
    net="$WORK/$name.net"
    if [ ! -s "$net" ]; then
        echo "generating $name ($spec)..." >&2
        "$IBSMCTL" discover --fabric "$spec" --write-net "$net" >/dev/null
    fi
    HOST=$(awk '/^(Hca|Ca)[ \t]/ { if (match($0, /"[^"]*"/)) { print substr($0, RSTART + 1, RLENGTH - 2); exit } }' "$net")
    nodes=$(grep -cE '^(Switch|Hca|Ca)[[:space:]]' "$net")
    echo "== $name: $nodes nodes, SM on $HOST" >&2
    a=$(run_ibsmd "$net")
    b="-"
    [ "$RUN_OPENSM" = 0 ] || b=$(run_opensm "$net")
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
    read -r -a ph <"$WORK/$name.phases" 2>/dev/null || ph=()
    # SMPs from start to subnet up: the DISCOVERING sweep's and the master's sweep's.
    smps=$(awk -v a="${ph[6]:-}" -v b="${ph[15]:-}" 'BEGIN { if (a + 0 > 0) print a + b; else print "-" }')
    floor=$(awk -v n="$smps" -v r="$SIM_RATE" 'BEGIN { if (n + 0 > 0) printf "%.2f", n / r; else print "-" }')
    xfloor=$(awk -v a="$a" -v f="$floor" 'BEGIN { if (a + 0 > 0 && f + 0 > 0) printf "%.2f", a / f; else print "-" }')
    echo "   ibsmd $a s, opensm $b s, ratio $ratio, $smps SMPs, floor $floor s" >&2
    ROWS+=("$(printf '%-8s %7s %9s %9s %7s %9s %8s %8s' "$name" "$nodes" "$a" "$b" "$ratio" "$smps" "$floor" "$xfloor")")
    if [ ${#ph[@]} -ge 17 ]; then
        row() { # phase seconds smps in_flight
            awk -v n="$name" -v p="$1" -v t="$2" -v c="$3" -v f="$4" 'BEGIN {
                rate = (t + 0 > 0 && c != "-") ? sprintf("%.0f", c / t) : "-"
                printf "%-8s %-13s %7.3f %9s %9s %9s\n", n, p, t, c, rate, f }'
        }
        sb_s=$(awk -v m="${ph[14]}" 'BEGIN { print m / 1000 }')
        PHASE_ROWS+=("$(row start+election "$(awk -v a="$a" -v t="${ph[0]}" -v s="$sb_s" 'BEGIN { print a - t - s }')" - -)")
        PHASE_ROWS+=("$(row discovering "$sb_s" "${ph[15]}" "${ph[16]}")")
        PHASE_ROWS+=("$(row discovery "${ph[1]}" "${ph[7]}" "${ph[11]}")")
        PHASE_ROWS+=("$(row lids+routing "$(awk -v a="${ph[2]}" -v b="${ph[3]}" 'BEGIN { print a + b }')" - -)")
        PHASE_ROWS+=("$(row distribution "${ph[4]}" "${ph[8]}" "${ph[12]}")")
        PHASE_ROWS+=("$(row activation "${ph[5]}" "${ph[9]}" "${ph[13]}")")
        PHASE_ROWS+=("$(row total "$a" "$smps" -)")
        OVERLAP+=("$name: ${ph[10]} port state Sets went out during distribution")
    fi
done

echo
echo "start to subnet up on ibsim (window $WINDOW; ratio = ibsmd / opensm, same run;"
echo "floor = ibsmd's SMPs at ibsim's $SIM_RATE SMPs/s; x floor = ibsmd s / floor s)"
printf '%-8s %7s %9s %9s %7s %9s %8s %8s\n' size nodes "ibsmd s" "opensm s" ratio SMPs "floor s" "x floor"
for r in "${ROWS[@]}"; do echo "$r"; done
if [ ${#PHASE_ROWS[@]} -gt 0 ]; then
    echo
    echo "ibsmd phases (SMPs sent in the phase, retries included; in flight = mean SMPs"
    echo "in flight over the phase, of a window of $WINDOW. start+election: exec, start-up"
    echo "reads, SMInfo; discovering: the heavy sweep made while DISCOVERING, whose discovery"
    echo "the master configures from (then its own discovery is 0); activation: what is left"
    echo "after the last distribution SMP is answered, the rest of it overlaps distribution)"
    printf '%-8s %-13s %7s %9s %9s %9s\n' size phase s SMPs SMPs/s "in flight"
    for r in "${PHASE_ROWS[@]}"; do echo "$r"; done
    for o in "${OVERLAP[@]}"; do echo "$o"; done
fi
