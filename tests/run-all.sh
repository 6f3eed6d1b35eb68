#!/usr/bin/env bash
# The whole test suite: formatting, lints, a fuzz smoke run, unit, property and integration tests.
# tests/setup.sh first installs what is missing (ibsim, OpenSM and infiniband-diags from
# Debian's packages as root, rustfmt/clippy, nightly and cargo-fuzz), or fails naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
./tests/setup.sh
export IBSM_REQUIRE_LAB=1   # integration tests fail, never skip, when a lab tool is missing
cargo fmt --all -- --check
./tests/check-invariants.sh
cargo clippy --workspace --all-targets --locked -- -D warnings
./tests/fuzz-smoke.sh      # every cargo-fuzz target, built and run ~6 s each (fuzz/README.md)
cargo test --workspace --locked --no-fail-fast
