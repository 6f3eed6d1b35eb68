#!/usr/bin/env bash
# Checks the layering invariants ARCHITECTURE.md states, so they cannot rot silently:
# the sans-IO crates have no async runtime, RPC, Raft or syscall crates among their
# normal dependencies, and read no clock in their library code.
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
if [ "$fail" -ne 0 ]; then exit 1; fi
echo "layering invariants hold (mad, fabric, sim, core: no tokio/tonic/openraft/nix/redb/libc, no clock reads)"
