#!/usr/bin/env bash
# Installs cargo-deny (the supply-chain check of scripts/deny.sh) from the
# crate registry, like any tool: `cargo install --locked` of the version
# below, built once into $NB_TEST_CACHE (default
# /var/cache/node-bootstrap-tests)/cargo-deny/<version>, outside the
# checkout, so a second run costs nothing. An unoptimised build of about
# 300 crates (below); the check itself then takes seconds.
# Prints the path of the binary.
set -euo pipefail
version=0.20.2
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
dir=$cache/cargo-deny/$version
out=$dir/bin/cargo-deny
if [ ! -x "$out" ] || ! "$out" --version >/dev/null 2>&1; then
    mkdir -p "$cache/cargo-deny"
    tmp=$(mktemp -d "$cache/cargo-deny/.$version.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # Its build dir under the temp dir: nothing of it in the checkout's target/.
    # Built without optimisation (opt-level 0, no debug info, no LTO): on
    # 2 cores that is 157 CPU-seconds where the crate's own release profile
    # without its fat LTO took 386 (measured 2026-12-01, 4 and 7 minutes at
    # nice 19 beside other work), and the check it runs once per test run
    # takes 6 s instead of 4.
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false \
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_TARGET_DIR=$tmp/build nice -n 10 cargo install --locked --quiet \
        --root "$tmp/root" "cargo-deny@$version" >&2
    rm -rf "$dir"
    mv "$tmp/root" "$dir"
fi
echo "$out"
