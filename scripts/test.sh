#!/usr/bin/env bash
# Sets up and runs every test (needs root): the crates' unit tests, then the
# four tiers of tests/ (README "Two commands"): inprocess (any user: temp
# dirs, loopback servers, property tests, the real simplestreams tools),
# host (root: private system bus, private dockerd), node (simulated nodes)
# and delivery (terraform, Ignition, push over SSH); then the mutation check
# of the node tier's unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
export RUST_BACKTRACE=${RUST_BACKTRACE:-0}
cargo build --workspace --all-targets
cargo test --workspace --no-fail-fast -- --include-ignored
# Each unit test on the simulated node must fail when the setting it checks
# is removed from units/ (about 5 minutes).
./scripts/mutate-units.sh
