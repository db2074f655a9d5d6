#!/usr/bin/env bash
# The soak (not part of the test command: about 30 s per point): power cuts
# at many points spread over a full first boot on a simulated node running
# the real agent (asset pull from S3, cluster version, OS update, docker
# addon download, reboot, kubelet.env), run by the harness `nb-bench soak`
# (crate benchkit/) on testkit's power-loss rig (testkit/src/powerloss.rs).
# After each cut the node boots again and must converge: kubelet running,
# kubelet.env complete and valid, OS update and docker 17.03 in effect,
# store and assets identical to what was published, no corrupt file under a
# final name, no `.done` marker for unfinished work. Prints one line per
# point and a summary; exits non-zero if any point failed.
#
#   sudo bench/soak.sh              SOAK_POINTS=40 (at least 30 for the record)
#   BIN=target/bench/release/node-bootstrap bench/soak.sh   the agent to test
set -euo pipefail
cd "$(dirname "$0")/.."
POINTS=${SOAK_POINTS:-40}
[ "$(id -u)" = 0 ] || { echo "soak: needs root (simulated nodes)" >&2; exit 1; }
# The agent (debug unless BIN says otherwise), the harness and the fake
# update_engine it runs beside itself.
cargo build --quiet -p node-bootstrap -p benchkit -p testkit --bins
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
BIN=${BIN:-$TARGET/debug/node-bootstrap}
echo "soak: agent $BIN, $POINTS points, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores"
exec "$TARGET/debug/nb-bench" soak --agent "$BIN" --points "$POINTS"
