#!/usr/bin/env bash
# What the test command needs beyond cargo, installed when missing: ibsim, OpenSM,
# infiniband-diags and chromium (the web console's browser test, headless) from
# Debian's packages (apt-get, as root), rustfmt and clippy, the
# nightly toolchain and cargo-fuzz for tests/fuzz-smoke.sh. Run by tests/run-all.sh
# first (and so by .ci/run), so the README's one test command works on a fresh
# machine. Fails loudly, naming the command to run, when something is missing and
# cannot be installed here (not root, no apt-get). IBSM_NO_INSTALL=1: check only.
set -euo pipefail

UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
LAB_TOOLS=(ibsim opensm ibnetdiscover sminfo smpquery ibtracert smpdump saquery ibroute chromium)
PACKAGES="ibsim-utils opensm infiniband-diags chromium"

lab_missing() {
    local t
    for t in "${LAB_TOOLS[@]}"; do
        command -v "$t" >/dev/null || return 0
    done
    [ -f "$UMAD2SIM" ] || return 0
    return 1
}

if lab_missing; then
    if [ -n "${IBSM_NO_INSTALL:-}" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "FATAL: the lab tools are missing; install them with: apt-get install -y $PACKAGES" >&2
        exit 1
    fi
    echo "setup: installing $PACKAGES" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    # shellcheck disable=SC2086 # the package list is meant to split
    apt-get install -y $PACKAGES
fi
for t in "${LAB_TOOLS[@]}"; do
    command -v "$t" >/dev/null || { echo "FATAL: $t not installed (apt-get install -y $PACKAGES)" >&2; exit 1; }
done
[ -f "$UMAD2SIM" ] || { echo "FATAL: $UMAD2SIM missing (apt-get install -y ibsim-utils)" >&2; exit 1; }

command -v rustup >/dev/null || { echo "FATAL: rustup is missing (https://rustup.rs)" >&2; exit 1; }
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
    [ -n "${IBSM_NO_INSTALL:-}" ] && { echo "FATAL: rustfmt/clippy missing (rustup component add rustfmt clippy)" >&2; exit 1; }
    rustup component add rustfmt clippy
fi
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    [ -n "${IBSM_NO_INSTALL:-}" ] && { echo "FATAL: nightly missing (rustup toolchain install nightly --profile minimal)" >&2; exit 1; }
    echo "setup: installing the nightly toolchain for cargo-fuzz" >&2
    rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    [ -n "${IBSM_NO_INSTALL:-}" ] && { echo "FATAL: cargo-fuzz missing (cargo install cargo-fuzz --locked)" >&2; exit 1; }
    echo "setup: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi
