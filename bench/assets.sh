#!/usr/bin/env bash
# Benchmark (part of bench/run.sh; runs alone too): `node-bootstrap assets
# pull` against `aws s3 cp` (PyPI awscli, default settings) of the same
# object from the same loopback S3 server, Garage (moto and s3s-fs re-read
# the whole object for every ranged GET, so against them a benchmark only
# measures them). Objects of 64 MiB and
# 1 GiB; wall time (throughput) and peak RSS of each tool, median of RUNS.
#
# `assets pull` does more than download: it hashes the bundle (SHA-256,
# checked against the config), unpacks it (a plain tar holding one file of
# the object's size) and renames the tree into place; all of that is in
# its time. `aws s3 cp` only downloads.
#
#   BIN=target/bench/release/node-bootstrap bench/assets.sh
#   RUNS=3 (default)  SIZES="64 1024" (MiB, default)
#   EXTRA_S3='"concurrency": 8, "part_size_mib": 8'   tuning experiments
#   (the table is made with the product's defaults)
#
# Prints `ROW\t…` lines (bench/run.sh makes the table) and details on stderr.
# Garage is installed once into $BENCH_CACHE/tools (cargo install, ~10 min).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${BENCH_CACHE:-$ROOT/target/bench}
BIN=${BIN:-$CACHE/release/node-bootstrap}
RUNS=${RUNS:-3}
SIZES=${SIZES:-64 1024}
GARAGE=$CACHE/tools/bin/garage
log() { echo "assets: $*" >&2; }

[ -x "$BIN" ] || { log "build first: $BIN is missing"; exit 1; }
command -v aws >/dev/null || { log "awscli missing (scripts/setup.sh installs it)"; exit 1; }
[ -x /usr/bin/time ] || { log "GNU time missing (apt-get install time)"; exit 1; }
if [ ! -x "$GARAGE" ]; then
    log "installing garage 2.5.0 into $CACHE/tools (once; about 10 minutes)"
    cargo install --locked --quiet garage@2.5.0 --root "$CACHE/tools"
fi

W=$(mktemp -d /var/tmp/nb-bench-assets-XXXX)
GPID=
cleanup() {
    if [ -n "$GPID" ]; then kill "$GPID" 2>/dev/null || true; wait "$GPID" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
S3_PORT=$(free_port)
RPC_PORT=$(free_port)
mkdir -p "$W/meta" "$W/data"
cat > "$W/garage.toml" <<EOF
metadata_dir = "$W/meta"
data_dir = "$W/data"
db_engine = "sqlite"
replication_factor = 1
rpc_bind_addr = "127.0.0.1:$RPC_PORT"
rpc_public_addr = "127.0.0.1:$RPC_PORT"
rpc_secret = "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:$S3_PORT"
root_domain = ".s3.garage.localhost"
EOF
g() { "$GARAGE" -c "$W/garage.toml" "$@"; }
"$GARAGE" -c "$W/garage.toml" server >"$W/garage.log" 2>&1 &
GPID=$!
for _ in $(seq 100); do g status >/dev/null 2>&1 && break; sleep 0.1; done
NODE=$(g status 2>/dev/null | grep -Eo '^[0-9a-f]{16}' | head -1)
[ -n "$NODE" ] || { log "garage did not start:"; cat "$W/garage.log" >&2; exit 1; }
g layout assign -z dc1 -c 10G "$NODE" >/dev/null
g layout apply --version 1 >/dev/null
KEYOUT=$(g key create nb-bench)
export AWS_ACCESS_KEY_ID=$(echo "$KEYOUT" | awk -F': *' '/Key ID/ {print $2; exit}')
export AWS_SECRET_ACCESS_KEY=$(echo "$KEYOUT" | awk -F': *' '/Secret key/ {print $2; exit}')
export AWS_DEFAULT_REGION=garage AWS_REGION=garage
[ -n "$AWS_ACCESS_KEY_ID" ] && [ -n "$AWS_SECRET_ACCESS_KEY" ] || { log "no key from garage: $KEYOUT"; exit 1; }
g bucket create nb-bench >/dev/null
g bucket allow --read --write --owner nb-bench --key nb-bench >/dev/null
EP=http://127.0.0.1:$S3_PORT
log "garage $(g --version 2>/dev/null | head -1) at $EP"

# median of stdin numbers
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

for MIB in $SIZES; do
    # A plain tar of one random file: the object is MIB MiB (+ tar headers).
    mkdir -p "$W/src"
    head -c $((MIB * 1024 * 1024 - 2048)) /dev/urandom > "$W/src/payload.bin"
    tar -C "$W/src" -b 1 -cf "$W/bundle-$MIB.tar" payload.bin
    rm -f "$W/src/payload.bin"
    SHA=$(sha256sum "$W/bundle-$MIB.tar" | cut -d' ' -f1)
    SIZE=$(stat -c %s "$W/bundle-$MIB.tar")
    aws --endpoint-url "$EP" s3 cp --only-show-errors "$W/bundle-$MIB.tar" "s3://nb-bench/bundle-$MIB.tar"
    rm -f "$W/bundle-$MIB.tar"
    log "object bundle-$MIB.tar: $SIZE bytes, sha256 $SHA"

    : > "$W/aws.times"; : > "$W/ours.times"
    for r in $(seq "$RUNS"); do
        /usr/bin/time -f '%e %M' -o "$W/t" aws --endpoint-url "$EP" s3 cp --only-show-errors \
            "s3://nb-bench/bundle-$MIB.tar" "$W/aws-out"
        cat "$W/t" >> "$W/aws.times"
        rm -f "$W/aws-out"
        sync

        A=$W/ours-$r
        mkdir -p "$A"
        cat > "$A/config.json" <<EOF
{"paths": {"assets_dir": "$A/assets", "run_dir": "$A/run", "state_dir": "$A/state"},
 "assets": {"mode": "pull", "limits": {"max_total_mib": 2048, "max_entry_mib": 2048},
   "s3": {"bucket": "nb-bench", "key": "bundle-$MIB.tar", "region": "garage", "endpoint": "$EP",
          "force_path_style": true, "checksum_sha256": "$SHA"${EXTRA_S3:+, $EXTRA_S3}}}}
EOF
        NODE_BOOTSTRAP_LOG_FORMAT=text /usr/bin/time -f '%e %M' -o "$W/t" \
            "$BIN" --config "$A/config.json" assets pull >"$A/out" 2>&1 \
            || { log "assets pull failed:"; cat "$A/out" >&2; exit 1; }
        cat "$W/t" >> "$W/ours.times"
        # Where the time went, from the agent's own log timestamps.
        python3 - "$A/out" >&2 <<'PY' || true
import re, sys, datetime
marks = {"pulling the asset bundle": "start", "asset bundle fetched": "downloaded",
         "asset bundle unpacked and verified": "unpacked+hashed", "assets in place": "synced+renamed"}
t0 = None
out = []
for line in open(sys.argv[1], errors="replace"):
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    m = re.match(r"(\S+Z)\s", line)
    if not m:
        continue
    for k, v in marks.items():
        if k in line:
            t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
            t0 = t0 or t
            out.append("%s at %.2fs" % (v, (t - t0).total_seconds()))
print("assets: assets pull: " + ", ".join(out))
PY
        [ -f "$A/assets/payload.bin" ] || { log "assets pull put nothing in place"; cat "$A/out" >&2; exit 1; }
        rm -rf "$A"
        sync
    done
    AWS_S=$(cut -d' ' -f1 "$W/aws.times" | median)
    OURS_S=$(cut -d' ' -f1 "$W/ours.times" | median)
    AWS_RSS=$(cut -d' ' -f2 "$W/aws.times" | sort -n | tail -1)
    OURS_RSS=$(cut -d' ' -f2 "$W/ours.times" | sort -n | tail -1)
    log "$MIB MiB: aws s3 cp $(tr '\n' ' ' < "$W/aws.times")| assets pull $(tr '\n' ' ' < "$W/ours.times")(s, KiB)"
    awk -v m="$MIB" -v a="$AWS_S" -v o="$OURS_S" -v ar="$AWS_RSS" -v or="$OURS_RSS" -v n="$RUNS" 'BEGIN {
        ot = m / o; at = m / a; r = ot / at
        printf "ROW\tasset pull %d MiB: throughput, MiB/s (median of %d)\t%.0f (%.2f s)\t%.0f (%.2f s) (aws s3 cp)\t%.2fx\t>= 2x\t%s\n", m, n, ot, o, at, a, r, (r >= 2 ? "yes" : "NO")
        orm = or / 1024; arm = ar / 1024
        printf "ROW\tasset pull %d MiB: peak RSS, MiB\t%.1f\t%.1f (aws s3 cp)\t%.2fx\t< 64 MiB\t%s\n", m, orm, arm, orm / arm, (orm < 64 ? "yes" : "NO")
    }'
done
