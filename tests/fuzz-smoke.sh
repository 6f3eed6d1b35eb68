#!/usr/bin/env bash
# Fuzz smoke run (part of tests/run-all.sh): builds every cargo-fuzz target in fuzz/ and
# runs each for IBSM_FUZZ_SECONDS (default 6; 10 targets, ~60 s of fuzzing) from its seed
# corpus in fuzz/corpus/<target>/. The seeds are read, never written: new inputs go to a
# temporary directory. Fails if nightly or cargo-fuzz is missing, if a target has no
# seed corpus, or if any target crashes (panic, failed invariant, sanitizer report,
# timeout or OOM); the crashing input is left in fuzz/artifacts/<target>/.
# Longer runs: fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

per="${IBSM_FUZZ_SECONDS:-6}"
[[ "$per" =~ ^[1-9][0-9]*$ ]] || { echo "FATAL: IBSM_FUZZ_SECONDS=$per is not a positive number of seconds" >&2; exit 2; }

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "FATAL: the nightly toolchain is missing (rustup toolchain install nightly --profile minimal)" >&2
    exit 1
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "FATAL: cargo-fuzz is missing (cargo install cargo-fuzz --locked)" >&2
    exit 1
fi

start=$SECONDS
# cargo fuzz has no --locked: check the committed fuzz/Cargo.lock is complete first.
cargo +nightly tree --locked -e normal --prefix none >/dev/null
# The smoke run builds unoptimized and without AddressSanitizer (coverage-guided all
# the same): a release+ASan build of the crates behind the targets (ibsmd, tonic,
# openraft, redb) takes several times longer and would dominate the test command.
# Nothing behind the targets is `unsafe`; long runs (fuzz/README.md) use the default
# release build with ASan.
FUZZ_FLAGS=(--dev --sanitizer none)
cargo +nightly fuzz build "${FUZZ_FLAGS[@]}"
echo "fuzz-smoke: built in $((SECONDS - start)) s"

mapfile -t targets < <(cargo +nightly fuzz list)
[[ ${#targets[@]} -gt 0 ]] || { echo "FATAL: cargo fuzz list found no targets" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failed=()
for t in "${targets[@]}"; do
    seeds="corpus/$t"
    if [[ -z "$(ls -A "$seeds" 2>/dev/null)" ]]; then
        echo "FAIL: fuzz target $t has no seed corpus in fuzz/$seeds" >&2
        failed+=("$t")
        continue
    fi
    mkdir -p "$work/$t"
    if cargo +nightly fuzz run "${FUZZ_FLAGS[@]}" "$t" "$work/$t" "$seeds" -- \
        -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 >"$work/$t.log" 2>&1; then
        echo "fuzz-smoke: $t ok ($(grep -Eo '#[0-9]+' "$work/$t.log" | tail -1 | tr -d '#') runs in $per s)"
    else
        echo "FAIL: fuzz target $t crashed; the end of its log:" >&2
        tail -n 40 "$work/$t.log" >&2
        failed+=("$t")
    fi
done
echo "fuzz-smoke: ${#targets[@]} targets in $((SECONDS - start)) s"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FAIL: fuzz targets that failed: ${failed[*]} (inputs in fuzz/artifacts/)" >&2
    exit 1
fi
