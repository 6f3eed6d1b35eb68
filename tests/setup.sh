#!/usr/bin/env bash
# What the test command needs beyond cargo, installed when missing: ibsim, OpenSM,
# infiniband-diags and chromium (the web console's browser test, headless; certutil,
# pk12util and openssl give it a client certificate for the HTTPS case) from
# Debian's packages (apt-get, as root), rustfmt and clippy, the nightly toolchain and
# cargo-fuzz for tests/fuzz-smoke.sh; for the deploy tests systemd-analyze (Debian's
# systemd) and dpkg-deb, cargo-deb (the package test) and kubectl (renders deploy/k8s:
# apt-get where a Kubernetes apt repository is configured, else the official binary
# from dl.k8s.io, checksum verified). Run by tests/run-all.sh
# first (and so by .ci/run), so the README's one test command works on a fresh
# machine. Fails loudly, naming the command to run, when something is missing and
# cannot be installed here (not root, no apt-get). IBSM_NO_INSTALL=1: check only.
set -euo pipefail

UMAD2SIM=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
LAB_TOOLS=(ibsim opensm ibnetdiscover sminfo smpquery ibtracert smpdump saquery ibroute chromium certutil pk12util openssl)
PACKAGES="ibsim-utils opensm infiniband-diags chromium libnss3-tools openssl"

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

# Deploy tests (crates/ibsmd-bin/tests/deploy.rs, tests/tests/deb_package_ibsim.rs,
# tests/tests/k8s_statefulset_ibsim.rs): they fail, never skip, without these.
apt_install() {
    if [ -n "${IBSM_NO_INSTALL:-}" ] || [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "$@" || { apt-get update && apt-get install -y "$@"; }
}
if ! command -v systemd-analyze >/dev/null; then
    echo "setup: installing systemd (systemd-analyze)" >&2
    apt_install systemd || { echo "FATAL: systemd-analyze missing (apt-get install -y systemd)" >&2; exit 1; }
fi
command -v dpkg-deb >/dev/null || { echo "FATAL: dpkg-deb missing (a Debian system has it: apt-get install -y dpkg)" >&2; exit 1; }
# cargo-deb pinned: deploy/debian/build.sh --profile dev (the tests) relies on 3.x
# accepting a dev profile, with a warning.
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
    [ -n "${IBSM_NO_INSTALL:-}" ] && { echo "FATAL: cargo-deb $CARGO_DEB_VERSION missing (cargo install cargo-deb --locked --version $CARGO_DEB_VERSION)" >&2; exit 1; }
    echo "setup: installing cargo-deb $CARGO_DEB_VERSION" >&2
    cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
if ! command -v kubectl >/dev/null; then
    echo "setup: installing kubectl (renders deploy/k8s for its test)" >&2
    if ! apt_install kubectl 2>/dev/null; then
        if [ -n "${IBSM_NO_INSTALL:-}" ] || [ "$(id -u)" != 0 ] || ! command -v curl >/dev/null; then
            echo "FATAL: kubectl missing: https://kubernetes.io/docs/tasks/tools/install-kubectl-linux/" >&2
            exit 1
        fi
        v="$(curl -fsSL https://dl.k8s.io/release/stable.txt)"
        tmp="$(mktemp -d)"
        curl -fsSL -o "$tmp/kubectl" "https://dl.k8s.io/release/$v/bin/linux/amd64/kubectl"
        curl -fsSL -o "$tmp/kubectl.sha256" "https://dl.k8s.io/release/$v/bin/linux/amd64/kubectl.sha256"
        echo "$(cat "$tmp/kubectl.sha256")  $tmp/kubectl" | sha256sum --check --quiet
        install -m 0755 "$tmp/kubectl" /usr/local/bin/kubectl
        rm -rf "$tmp"
    fi
fi
kubectl kustomize --help >/dev/null 2>&1 || { echo "FATAL: kubectl has no kustomize (kubectl >= 1.14 needed)" >&2; exit 1; }
