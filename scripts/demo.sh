#!/usr/bin/env bash
# The main job: a full first boot of a simulated node (a real systemd as PID 1
# in a namespace) with the real agent, printed step by step. Needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh >/dev/null
cargo build -q --workspace
exec ./target/debug/simnode-demo
