#!/usr/bin/env bash
# Sets up and runs every test (needs root): the layering check of src/ (no
# import circle between its top modules), the crates' unit tests, then the
# tiers of tests/ (docs/testing.md, "Tests in tiers"): inprocess (any user: temp
# dirs, loopback servers, property tests, the real simplestreams tools),
# host (root: private system bus, private dockerd), node (simulated nodes),
# conformance (Kubernetes' node conformance suite on simulated nodes),
# delivery (terraform, Ignition, push over SSH) and vm (QEMU machines: real
# Ignition, kernel reboots, power cuts); then the mutation check of the node
# tier's unit tests. Every tier runs even when an earlier one failed; the
# script prints each one's time and the tests that skipped (a test whose
# root or tool is missing passes after a `SKIPPED` line that libtest keeps
# to itself; testkit::skip_because also appends it to the file named by
# NODE_BOOTSTRAP_SKIP_LOG), and fails at the end if any tier failed. Under
# CI=true a skip fails its test instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# cargo's intermediate files in a cache outside the checkout (see the script).
. scripts/cargo-cache.sh
./scripts/setup.sh
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}

# Each step's skips, one file per step.
skips=$(mktemp -d)
trap 'rm -rf "$skips"' EXIT

failed=()
times=()
# What each step costs the machine: its wall time, and the CPU time of its
# own processes (with the simulated nodes it boots, which testkit moves to
# the cgroup nb-simnode) from the cgroup v1 cpuacct hierarchy, where the
# machine has one (CI's kind does). CPU time over wall time tells a step
# that computes from one that waits (sleeps, timers, a kubelet's status
# period), which another step could use; the machine's own load does not
# change it.
acct=/sys/fs/cgroup/cpuacct
acct_ns() { cat "$1/cpuacct.usage" 2>/dev/null || echo 0; }
step() {
  local name=$1
  shift
  local t0=$SECONDS cg="" nodes0=0 cpu=""
  if [ -w "$acct/cgroup.procs" ] && mkdir -p "$acct/nb-test/$name.$$"; then
    cg=$acct/nb-test/$name.$$
    nodes0=$(acct_ns "$acct/nb-simnode")
  fi
  echo "=== $name"
  if ! (if [ -n "$cg" ]; then echo $BASHPID > "$cg/cgroup.procs"; fi
        NODE_BOOTSTRAP_SKIP_LOG="$skips/$name" "$@"); then
    failed+=("$name")
  fi
  if [ -n "$cg" ]; then
    local ns=$(( $(acct_ns "$cg") + $(acct_ns "$acct/nb-simnode") - nodes0 ))
    cpu=$(printf '  cpu %5d s (%d%% of %d cores)' $((ns / 1000000000)) \
      $((ns / 10000000 / ($(nproc) * (SECONDS - t0 > 0 ? SECONDS - t0 : 1)))) "$(nproc)")
    rmdir "$cg" 2>/dev/null || true
  fi
  local skipped=""
  if [ -s "$skips/$name" ]; then
    skipped="  ($(wc -l <"$skips/$name") test(s) SKIPPED)"
  fi
  times+=("$(printf '%-10s %5d s%s%s' "$name" $((SECONDS - t0)) "$cpu" "$skipped")")
}

step build cargo build --workspace --all-targets
# The binary nodes run, static-pie (README "Does it fit your cluster?"):
# the VM tier boots it, the static_binary tests read and run it.
step static ./scripts/build-static.sh
# The module graph of src/ stays one-way (docs/DEVELOPING.md, Layers).
step layers python3 scripts/check-layers.py
# The crates the agent is built from: RustSec advisories (a dated snapshot),
# licenses, bans, sources (deny.toml; cargo-deny built once by setup).
step deny ./scripts/deny.sh
step unit cargo test --workspace --lib --no-fail-fast
for tier in inprocess host node conformance delivery vm; do
  step "$tier" cargo test --test "$tier" --no-fail-fast -- --include-ignored
done
# Each unit test on the simulated node must fail when the setting it checks
# is removed from units/.
step mutate ./scripts/mutate-units.sh

echo "=== times"
printf '%s\n' "${times[@]}"
echo "=== skipped"
if compgen -G "$skips/*" >/dev/null; then
  for f in "$skips"/*; do
    printf '%s: %d test(s) did not run:\n' "$(basename "$f")" "$(wc -l <"$f")"
    sort "$f" | sed 's/^/  /'
  done
  echo "(a skipped test proves nothing: run as root after scripts/setup.sh, as CI does)"
else
  echo "none"
fi
if ((${#failed[@]})); then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
