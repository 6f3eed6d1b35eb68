#!/usr/bin/env bash
# Checks the layering invariants ARCHITECTURE.md states, so they cannot rot silently:
# the sans-IO crates have no async runtime, RPC, Raft or syscall crates among their
# normal dependencies, and read no clock in their library code; the production daemon
# carries no lab or demo code; no source file grows past the size bound.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
for crate in ibsm-mad ibsm-fabric ibsm-sim ibsm-core; do
    bad=$(cargo tree --locked -p "$crate" -e normal --prefix none 2>/dev/null \
        | awk '{print $1}' | grep -xE 'tokio|tonic|openraft|nix|redb|libc' | sort -u || true)
    if [ -n "$bad" ]; then
        echo "INVARIANT BROKEN: $crate depends on: $bad" >&2
        fail=1
    fi
    dir=crates/$crate/src
    clock=$(grep -rnE 'Instant::now|SystemTime::now|std::thread::sleep' "$dir" | grep -v '^\s*//' || true)
    if [ -n "$clock" ]; then
        echo "INVARIANT BROKEN: $crate reads the clock or sleeps in library code:" >&2
        echo "$clock" >&2
        fail=1
    fi
done

# The daemon that serves a real fabric carries no lab or demo code: neither ibsm-labkit
# nor the demo crate among the ibsmd library's normal dependencies (the binary, package
# ibsmd-bin, adds the demo as its dev mode). ibsm-sim stays allowed: ibsm-transport's
# SharedSim, which `ibsmd --fabric sim:NETFILE|gen:...` (the embedded fabric) runs on,
# is built on it.
lab=$(cargo tree --locked -p ibsmd -e normal --prefix none 2>/dev/null \
    | awk '{print $1}' | grep -xE 'ibsm-labkit|ibsm-demo|ibsm-testkit' | sort -u || true)
if [ -n "$lab" ]; then
    echo "INVARIANT BROKEN: ibsmd (the production daemon) depends on: $lab (ibsm-sim alone is allowed, for --fabric sim:)" >&2
    fail=1
fi
# ... and names no demo code in its sources.
demo=$(grep -rnE 'ibsm_demo|ibsm_labkit|ibsm_proto::demo' crates/ibsmd/src || true)
if [ -n "$demo" ]; then
    echo "INVARIANT BROKEN: ibsmd's library names demo or lab code:" >&2
    echo "$demo" >&2
    fail=1
fi

# The model checker's injected election bugs (ibsm-core feature `fault-injection`)
# never reach the daemon: only ibsm-testkit turns the feature on.
if cargo tree --locked -p ibsmd -e features --prefix none 2>/dev/null | grep -q 'fault-injection'; then
    echo "INVARIANT BROKEN: ibsmd builds ibsm-core with the fault-injection feature" >&2
    fail=1
fi

# No source file over MAX_LINES lines outside tests: what counts is the file up to its
# inline `#[cfg(test)]` module; tests.rs files and files under tests/ or benches/ are exempt.
MAX_LINES=800
# Files allowed over the bound: none today. A file that grows past it is split by
# responsibility, not listed here.
exceptions=(
)
is_exception() {
    local e
    for e in "${exceptions[@]}"; do [ "$e" = "$1" ] && return 0; done
    return 1
}
while IFS= read -r -d '' f; do
    # Lines before an inline `#[cfg(test)] mod NAME {` (a `mod tests;` line or a
    # test-only item elsewhere does not end the count).
    n=$(awk 'prev ~ /^#\[cfg\(test\)\]/ && /^(pub(\([a-z]+\))? )?mod [a-z_0-9]+ *\{/ { c--; exit }
             { c++; prev = $0 } END { print c + 0 }' "$f")
    if [ "$n" -gt "$MAX_LINES" ]; then
        if ! is_exception "$f"; then
            echo "INVARIANT BROKEN: $f has $n lines outside its tests (bound $MAX_LINES): split it by responsibility" >&2
            fail=1
        fi
    elif is_exception "$f"; then
        echo "note: $f is within $MAX_LINES lines now ($n): remove it from the exceptions in $0" >&2
    fi
done < <(find crates -name '*.rs' -not -path '*/tests/*' -not -path '*/benches/*' \
    -not -name tests.rs -print0)

if [ "$fail" -ne 0 ]; then exit 1; fi
echo "layering invariants hold (mad, fabric, sim, core: no tokio/tonic/openraft/nix/redb/libc, no clock reads; ibsmd without labkit/demo; no file over $MAX_LINES lines outside tests but the listed exceptions)"
