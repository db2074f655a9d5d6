#!/usr/bin/env bash
# Runs Kubernetes' own node conformance suite ([NodeConformance] of the
# cluster's release, 1.20.2) against a cluster the agent bootstraps on
# simulated nodes: a bootkube master and one worker of each kind the agent
# makes (docker through the addon and torcx, the OS's containerd, the
# kubelet as a sysext). The whole suite runs pinned to each worker in
# turn (the others tainted; --non-blocking-taints), then the script
# prints a table per worker: specs, ran, passed, skipped by
# tests/conformance/skip-list.txt, failed. The run of record is in
# docs/conformance.md. Needs root and what scripts/setup.sh installs and
# builds (the suite itself: scripts/build-e2e.sh, about 10 minutes once).
#
#   scripts/conformance.sh [--partition] [--parallel N] [--out DIR] [--workers docker,containerd,sysext]
#                          [--focus TEXT]...
#
# --partition splits the specs over the workers (a third each: what CI's
# `conformance` tier runs). The whole suite on three workers takes about
# 30 minutes on a quiet 2-core machine. Reports, ginkgo logs and JUnit
# files go to --out (default target/conformance). --focus TEXT keeps only
# the specs whose names contain TEXT (to look at a few again). The VM
# worker's run: `NB_VM_CONFORMANCE=all cargo test --test vm
# worker_joins_a_control_plane -- --nocapture` (without the variable, CI's
# sample of it; tests/vm/conformance_vm.rs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ "$(id -u)" = 0 ] || { echo "conformance: needs root (simulated nodes)" >&2; exit 2; }
"$root/scripts/build-e2e.sh" >/dev/null
"$root/scripts/build-e2e-images.sh" >/dev/null
cargo build -q --workspace --bin node-conformance --bin node-bootstrap --bin fake-update-engine
exec "$root/target/debug/node-conformance" "$@"
