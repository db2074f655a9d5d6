#!/usr/bin/env bash
# Sets up and runs every test (needs root): the crates' unit tests, then the
# five tiers of tests/ (README "Two commands"): inprocess (any user: temp
# dirs, loopback servers, property tests, the real simplestreams tools),
# host (root: private system bus, private dockerd), node (simulated nodes),
# delivery (terraform, Ignition, push over SSH) and vm (QEMU machines: real
# Ignition, kernel reboots, power cuts); then the mutation check of the node
# tier's unit tests. Every tier runs even when an earlier one failed; the
# script prints each one's time and fails at the end if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}

failed=()
times=()
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== $name"
  if ! "$@"; then
    failed+=("$name")
  fi
  times+=("$(printf '%-10s %5d s' "$name" $((SECONDS - t0)))")
}

step build cargo build --workspace --all-targets
step unit cargo test --workspace --lib --no-fail-fast
for tier in inprocess host node delivery vm; do
  step "$tier" cargo test --test "$tier" --no-fail-fast -- --include-ignored
done
# Each unit test on the simulated node must fail when the setting it checks
# is removed from units/.
step mutate ./scripts/mutate-units.sh

echo "=== times"
printf '%s\n' "${times[@]}"
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
