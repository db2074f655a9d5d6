#!/usr/bin/env bash
# The main job, shown step by step (needs root):
#
#   ./scripts/demo.sh              a real Kubernetes cluster on simulated nodes
#                                  (a real systemd as PID 1 in namespaces) of
#                                  today's Flatcar: a bootkube master brings up
#                                  the control plane, a worker updates its OS,
#                                  configures containerd, merges the kubelet
#                                  sysext from a signed mirror and joins; a
#                                  pod runs on it (testkit/src/demo, binary
#                                  cluster-demo)
#   ./scripts/demo.sh --tectonic   the seed's Tectonic flow instead: Container
#                                  Linux nodes, docker through torcx,
#                                  kubelet-wrapper
#   ./scripts/demo.sh --standins   the single-node walk-through against
#                                  stand-ins for the API server, update_engine
#                                  and the package mirror, in about 10 s
#                                  (binary simnode-demo)
#
# First `scripts/setup.sh --demo` installs and builds only what the demo
# uses (saying what and how long), then the demo runs. Exit codes: 2 this
# machine cannot run simulated nodes (not root, no namespaces), 3 a
# prerequisite is missing, 4 a setup step failed (named, with its log),
# 1 the demo failed (the step named), 64 an unknown option.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "") setup=--demo bin=cluster-demo args=() ;;
    --tectonic) setup=--demo bin=cluster-demo args=(--tectonic) ;;
    --standins) setup=--demo=standins bin=simnode-demo args=() ;;
    *) echo "demo: unknown option ${1} (none: today's Flatcar; --tectonic: the seed's Tectonic flow; --standins: the stand-in walk-through)" >&2
       exit 64 ;;
esac
./scripts/check-machine.sh demo
./scripts/setup.sh "$setup"
echo
exec "./target/debug/$bin" "${args[@]}"
