#!/usr/bin/env bash
# Sets up and runs every test: unit tests, integration tests against real
# servers, and end-to-end tests on simulated nodes (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
cargo build --workspace --all-targets
cargo test --workspace --no-fail-fast -- --include-ignored
# Each unit test on the simulated node must fail when the setting it checks
# is removed from units/ (about 5 minutes).
./scripts/mutate-units.sh
