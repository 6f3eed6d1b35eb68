#!/usr/bin/env bash
# Discovery benchmark in the embedded simulator (release build).
# Usage: bench/discover.sh [K...]   (default: 16 34 58, i.e. ~1.3k, ~11k, ~53k-node 3-level fat trees)
# IBSM_BENCH_WINDOW=N changes the number of SMPs in flight (default 16).
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench -p ibsm-transport --bench discover -- "$@"
