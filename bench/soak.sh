#!/usr/bin/env bash
# The soak (issue 9, part 6): on ibsim, three replicated ibsmd (`ibsmd demo --fabric
# ibsim:NET`: three `ibsmd --fabric umad` members under umad2sim, one Raft cluster, and
# the `ibsmd sminfo-poll` judge on a fourth HCA), `ibsmctl drill soak` runs N cycles
# mixing SIGKILL of the master, SIGKILL of a standby, the master's Raft traffic cut
# (members run with --fault-injection), 5 % SMP loss on a cable (ibsim `Error`), a link
# flap (ibsim `Unlink`/`Link`) and a planned handover, each block of six cycles a
# permutation drawn from a seeded RNG (the seed is printed; --seed replays a run).
# After every cycle it reads LIDs and LFTs back from the fabric (ibnetdiscover -p,
# ibroute per switch, on the judge's HCA), compares them with the cycle before and
# with the master's routing (Fabric/GetRoute), and reads the replicated state from
# every member (epoch, applied index, guid2lid, the cycle's marker partition).
# SA state (issue 11, item 7): before cycle 1 the drill's own SA client (`ibsmctl sa`
# under umad2sim on the judge's HCA, trusted, ProxyJoin for the other HCAs' ports)
# creates three multicast groups with full, non- and send-only members, registers a
# ServiceRecord with a day's lease and subscribes to trap 66; after every cycle it
# reads back the MCMemberRecords, ServiceRecords and InformInfoRecords from the master,
# `ibroute -M` on every switch and every member's ListMulticastGroups /
# ListServiceRecords / ListSubscriptions, and counts what was lost or changed.
#
# Prints one table: cycles, LID changes (0), LFT entries changed that routing did not
# ask for (0), windows with two masters seen by the sminfo poller (0), acknowledged
# writes lost (0), SA records or MFT entries lost or changed (0; with the size of the
# snapshot they are compared with), failover time min/median/max (master kill and
# handover only), and how many cycles each action ran. The per-cycle report is in the report dir
# (report.txt, report.json, timeline.svg).
#
# There is no OpenSM row: OpenSM has no replicated state (no epoch, no guid2lid or
# partition log shared by its instances, nothing to isolate), so half of what this
# soak checks has no OpenSM counterpart; its failover alone is compared in
# bench/failover_replica.sh. (Nor does OpenSM carry SA state across a failover: its
# release notes list no SM-to-SM SMDB synchronization, and a new OpenSM master drops
# the multicast memberships and asks clients to re-register.)
#
# Bounded: the drill starts no cycle after --minutes (default 20; the table then says
# it stopped early), and the whole run is killed 5 minutes after that.
#
# Usage: bench/soak.sh [--cycles N] [--short] [--seed S] [--net FILE | --k K]
#                      [--minutes M] [--debug] [--report-dir DIR]
#   --cycles N  cycles (default 100)
#   --short     6 cycles, one of each action
#   --net FILE  an ibsim net file (default: a 2-level fat tree generated with --k)
#   --k K       generate `gen:fat-tree2:K` (default 4: 6 switches, 8 HCAs)
#   --debug     debug build (default release)
# Needs ibsim-utils and infiniband-diags (the same lab as the tests).
set -euo pipefail

CYCLES=100
SEED=""
NET=""
K=4
MINUTES=20
PROFILE=release
REPORT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cycles) CYCLES="$2"; shift ;;
        --short) CYCLES=6 ;;
        --seed) SEED="$2"; shift ;;
        --net) NET="$2"; shift ;;
        --k) K="$2"; shift ;;
        --minutes) MINUTES="$2"; shift ;;
        --debug) PROFILE=debug ;;
        --report-dir) REPORT="$2"; shift ;;
        -h|--help) sed -n '2,/^[^#]/p' "$0" | grep '^#'; exit 0 ;;
        *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
for tool in ibsim ibnetdiscover ibroute; do
    command -v "$tool" >/dev/null || { echo "soak.sh: $tool is missing (apt-get install ibsim-utils infiniband-diags)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "soak.sh: $UMAD2SIM is missing (apt-get install ibsim-utils)" >&2; exit 1; }

# IBSM_BENCH_NO_BUILD=1: use the binaries already in target/ (a shared tree mid-edit).
if [ -z "${IBSM_BENCH_NO_BUILD:-}" ]; then
    if [ "$PROFILE" = release ]; then
        (cd "$ROOT" && cargo build --quiet --release -p ibsmd-bin -p ibsmctl)
    else
        (cd "$ROOT" && cargo build --quiet -p ibsmd-bin -p ibsmctl)
    fi
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE
IBSMD=$TARGET/ibsmd
IBSMCTL=$TARGET/ibsmctl

WORK=$(mktemp -d /tmp/ibsm-soak.XXXXXX)
USER_REPORT=$REPORT
DRILL_PID=""
cleanup() {
    # The drill stops its demo (SIGTERM, then SIGKILL); the demo's processes die with it.
    if [ -n "$DRILL_PID" ] && kill -0 "$DRILL_PID" 2>/dev/null; then
        kill -TERM "$DRILL_PID" 2>/dev/null || true
        sleep 2
        kill -9 "$DRILL_PID" 2>/dev/null || true
    fi
    if [ -z "${IBSM_KEEP_BENCH:-}" ] && [ -z "$USER_REPORT" ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

if [ -z "$NET" ]; then
    NET=$WORK/fat-tree2-k$K.net
    "$IBSMCTL" discover --fabric "gen:fat-tree2:$K" --write-net "$NET" >/dev/null
fi
[ -f "$NET" ] || { echo "soak.sh: net file $NET not found" >&2; exit 1; }
REPORT=${REPORT:-$WORK/report}
read -r N_SW N_CA <<<"$(awk '/^Switch/ { sw++ } /^(Hca|Ca)/ { ca++ } END { print sw + 0, ca + 0 }' "$NET")"
[ -n "$SEED" ] || SEED=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')

echo "soak: $CYCLES cycles on ibsim ($(basename "$NET"): $N_SW switches, $N_CA HCAs), seed $SEED, $PROFILE build, bounded at $MINUTES min" >&2
START=$(date +%s)
set +e
timeout $((MINUTES * 60 + 300)) "$IBSMCTL" drill soak --cycles "$CYCLES" --seed "$SEED" \
    --deadline-s $((MINUTES * 60)) --start-demo --ibsmd "$IBSMD" --fabric "ibsim:$NET" \
    --report-dir "$REPORT" >"$WORK/drill.out" 2>"$WORK/drill.err" &
DRILL_PID=$!
# Progress: one line per cycle from the drill's stderr.
tail -n +1 -f "$WORK/drill.err" --pid "$DRILL_PID" 2>/dev/null | grep --line-buffered '^cycle ' | sed -u 's/^/  /' >&2 &
TAIL_PID=$!
wait "$DRILL_PID"
RC=$?
wait "$TAIL_PID" 2>/dev/null || true
DRILL_PID=""
set -e
END=$(date +%s)
sleep 0.2
if [ ! -f "$REPORT/report.json" ]; then
    echo "soak.sh: the drill wrote no report (exit $RC); its stderr:" >&2
    tail -30 "$WORK/drill.err" >&2
    exit 1
fi

python3 - "$REPORT/report.json" "$((END - START))" "$RC" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
wall, rc = int(sys.argv[2]), int(sys.argv[3])
f = r["failover_ms"]
acts = ", ".join(f"{k} {v}" for k, v in r.get("actions", {}).items())
stopped = r.get("stopped_early") or r.get("aborted")
print()
print(f"soak on ibsim, {r['fabric']}, seed {r['seed']}, {wall} s wall" + (f" ({stopped.splitlines()[0]})" if stopped else ""))
rows = [
    ("cycles", f"{r['cycles_run']} of {r['cycles_planned']}"),
    ("LID changes", r["lid_changes"]),
    ("LFT entries changed unasked", f"{r['lft_unasked']} (changes routing asked for: {r['lft_asked']})"),
    ("two-master windows (sminfo poller)", f"{r['dual_master_windows']} ({r['dual_master_ms']} ms)"),
    ("acknowledged writes lost", r["writes_lost"]),
    ("SA state lost/changed", f"{r.get('sa_state_lost')} (snapshot: " + (
        "none" if not r.get("sa_snapshot") else
        "{groups} groups, {members} members, {services} services, {subscriptions} subscriptions, {mft_entries} MFT entries".format(**r["sa_snapshot"])) + ")"),
    ("failover ms min / median / max", f"{f['min']} / {f['median']} / {f['max']} (n={f['n']})"),
    ("replicas converged every cycle", "yes" if r["replicas_converged_every_cycle"] else "NO"),
    ("actions", acts),
    ("invariants", "ok" if r["invariants_ok"] else "BROKEN: " + "; ".join(x.splitlines()[0] for x in r["broken"] + [r.get("aborted") or ""] if x)),
]
w = max(len(k) for k, _ in rows)
print(f"| {'metric'.ljust(w)} | value")
print(f"|-{'-' * w}-|-------")
for k, v in rows:
    print(f"| {k.ljust(w)} | {v}")
print("(no OpenSM row: OpenSM has no replicated state to check; see the header)")
EOF
if [ -n "$USER_REPORT" ] || [ -n "${IBSM_KEEP_BENCH:-}" ]; then echo "report: $REPORT/report.txt" >&2; fi
exit "$RC"
