#!/usr/bin/env bash
# Build the Debian package `ibsm` in one command:
#   deploy/debian/build.sh [--profile release|dev] [--output DIR] [--fast]
# Builds ibsmd and ibsmctl with that cargo profile (default release), generates the man
# pages (`ibsmd man DIR`, `ibsmctl man DIR`: clap_mangen over the clap definitions) and
# the bash/zsh/fish completions (`ibsmd|ibsmctl completions SHELL`: clap_complete) into
# target/<profile dir>/ibsm-deb/, then packs everything listed in
# crates/ibsmd-bin/Cargo.toml [package.metadata.deb] with `cargo deb --no-build`.
# Prints the path of the .deb on its last line. Needs cargo-deb
# (`cargo install cargo-deb --locked`; tests/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=release
output=target/debian
fast=()
while [ $# -gt 0 ]; do
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        --output) output="$2"; shift 2 ;;
        --fast) fast=(--fast); shift ;;
        *) echo "usage: $0 [--profile release|dev] [--output DIR] [--fast]" >&2; exit 2 ;;
    esac
done
command -v cargo-deb >/dev/null || {
    echo "FATAL: cargo-deb is missing: cargo install cargo-deb --locked" >&2
    exit 1
}
case "$profile" in
    dev) dir=debug ;;
    *) dir="$profile" ;;
esac
target_dir="${CARGO_TARGET_DIR:-target}"
cargo build --locked --profile "$profile" -p ibsmd-bin -p ibsmctl >&2
bin="$target_dir/$dir"
assets="$bin/ibsm-deb"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
"$bin/ibsmd" man "$assets/man"
"$bin/ibsmctl" man "$assets/man"
gzip -9n "$assets/man"/*.1
for tool in ibsmd ibsmctl; do
    "$bin/$tool" completions bash > "$assets/completions/$tool.bash"
    "$bin/$tool" completions zsh > "$assets/completions/_$tool"
    "$bin/$tool" completions fish > "$assets/completions/$tool.fish"
done
mkdir -p "$output"
# --fast: gzip instead of xz (the tests' debug build; cargo-deb warns that a dev profile
# is meant for testing only).
cargo deb --no-build --locked --profile "$profile" -p ibsmd-bin --output "$output" "${fast[@]}" >&2
ls -t "$output"/ibsm_*.deb | head -n 1
