#!/usr/bin/env bash
# Benchmark (part of bench/run.sh; runs alone too): `node-bootstrap assets
# pull` against the job it replaces, on the same object from the same
# loopback S3 server:
#   - the original's whole job: `aws s3 cp` (PyPI awscli, default settings)
#     of the tar.gz, `tar xzf` into a fresh dir, `sync -f` of the filesystem
#     (the fair anchor: it ends, like `assets pull`, with the tree on disk);
#   - `aws s3 cp` alone (download only, its file still unsynced in the page
#     cache when it exits).
# `assets pull` downloads, hashes (SHA-256, checked against the config),
# unpacks, syncs the filesystem and renames the tree into place.
#
# The bundle is realistic (`nb-bench make-bundle`: assets-like files that
# gzip like real ones, ~1.35x), cached in $BENCH_CACHE/bundles. Sizes are
# the tar.gz's. Every round runs each side once, in a rotating order; the
# ratios are per round, the table shows their median.
#
#   BIN=target/bench/release/node-bootstrap bench/assets.sh
#   RUNS=3 (default)  SIZES="64 1024" (MiB, default)
#   S3=garage (default; the run of record) | standin (nb-bench s3: in-memory,
#     no Garage needed; what `bench/run.sh --quick` uses)
#   BIN_B=/path/to/other/node-bootstrap  also runs that binary each round
#     (A/B of two builds: a row "ours vs B")
#   EXTRA_S3='"concurrency": 8, "part_size_mib": 8'   tuning experiments
#     (the table is made with the product's defaults)
#
# Prints `ROW\t…` lines (bench/run.sh makes the table) and details on stderr.
# Garage is installed once into $BENCH_CACHE/tools (cargo install, ~10 min).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=${BENCH_CACHE:-$ROOT/target/bench}
BIN=${BIN:-$CACHE/release/node-bootstrap}
BIN_B=${BIN_B:-}
RUNS=${RUNS:-3}
SIZES=${SIZES:-64 1024}
S3=${S3:-garage}
GARAGE=$CACHE/tools/bin/garage
H=${NB_BENCH:-${CARGO_TARGET_DIR:-$ROOT/target}/debug/nb-bench}
log() { echo "assets: $*" >&2; }

[ -x "$BIN" ] || { log "build first: $BIN is missing"; exit 1; }
[ -x "$H" ] || { log "build first: $H is missing (cargo build -p benchkit --bins)"; exit 1; }
command -v aws >/dev/null || { log "awscli missing (scripts/setup.sh installs it)"; exit 1; }
[ -x /usr/bin/time ] || { log "GNU time missing (apt-get install time)"; exit 1; }

W=$(mktemp -d /var/tmp/nb-bench-assets-XXXX)
SPID=
cleanup() {
    if [ -n "$SPID" ]; then kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT

# The bundles, made once per size (deterministic).
mkdir -p "$CACHE/bundles"
for MIB in $SIZES; do
    B=$CACHE/bundles/bundle-$MIB-v1.tar.gz
    if [ ! -s "$B" ]; then
        log "making the $MIB MiB bundle (once)"
        "$H" make-bundle --mib "$MIB" --out "$B.tmp" && mv "$B.tmp" "$B"
    fi
done

export AWS_DEFAULT_REGION=garage AWS_REGION=garage
if [ "$S3" = standin ]; then
    export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
    OBJS=()
    for MIB in $SIZES; do OBJS+=(--object "nb-bench/bundle-$MIB.tar.gz=$CACHE/bundles/bundle-$MIB-v1.tar.gz"); done
    "$H" s3 "${OBJS[@]}" > "$W/s3.out" 2> "$W/s3.log" &
    SPID=$!
    for _ in $(seq 600); do grep -q '^endpoint ' "$W/s3.out" 2>/dev/null && break; sleep 0.1; done
    EP=$(awk '/^endpoint / {print $2}' "$W/s3.out")
    [ -n "$EP" ] || { log "the S3 stand-in did not start:"; cat "$W/s3.log" >&2; exit 1; }
    log "S3 stand-in (nb-bench s3, in memory) at $EP"
else
    if [ ! -x "$GARAGE" ]; then
        log "installing garage 2.5.0 into $CACHE/tools (once; about 10 minutes)"
        cargo install --locked --quiet garage@2.5.0 --root "$CACHE/tools"
    fi
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
    SPID=$!
    for _ in $(seq 100); do g status >/dev/null 2>&1 && break; sleep 0.1; done
    NODE=$(g status 2>/dev/null | grep -Eo '^[0-9a-f]{16}' | head -1)
    [ -n "$NODE" ] || { log "garage did not start:"; cat "$W/garage.log" >&2; exit 1; }
    g layout assign -z dc1 -c 10G "$NODE" >/dev/null
    g layout apply --version 1 >/dev/null
    KEYOUT=$(g key create nb-bench)
    export AWS_ACCESS_KEY_ID=$(echo "$KEYOUT" | awk -F': *' '/Key ID/ {print $2; exit}')
    export AWS_SECRET_ACCESS_KEY=$(echo "$KEYOUT" | awk -F': *' '/Secret key/ {print $2; exit}')
    [ -n "$AWS_ACCESS_KEY_ID" ] && [ -n "$AWS_SECRET_ACCESS_KEY" ] || { log "no key from garage: $KEYOUT"; exit 1; }
    g bucket create nb-bench >/dev/null
    g bucket allow --read --write --owner nb-bench --key nb-bench >/dev/null
    EP=http://127.0.0.1:$S3_PORT
    for MIB in $SIZES; do
        aws --endpoint-url "$EP" s3 cp --only-show-errors "$CACHE/bundles/bundle-$MIB-v1.tar.gz" "s3://nb-bench/bundle-$MIB.tar.gz"
    done
    log "garage $(g --version 2>/dev/null | head -1) at $EP"
fi

# median of stdin numbers
median() { sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# One side of a round: appends "seconds peak_rss_kib" to $W/<side>.times.
aws_only() {
    /usr/bin/time -f '%e %M' -o "$W/t" aws --endpoint-url "$EP" s3 cp --only-show-errors \
        "s3://nb-bench/$KEY" "$W/aws-out"
    cat "$W/t" >> "$W/aws.times"
    rm -f "$W/aws-out"
}
anchor() {
    mkdir -p "$W/anchor"
    # One shell for the whole job, timed as one; RSS is the largest step's.
    /usr/bin/time -f '%e %M' -o "$W/t" sh -c '
        aws --endpoint-url "$1" s3 cp --only-show-errors "s3://nb-bench/$2" "$3/bundle.tar.gz" &&
        mkdir "$3/tree" && tar -xzf "$3/bundle.tar.gz" -C "$3/tree" && sync -f "$3/tree"
    ' anchor "$EP" "$KEY" "$W/anchor"
    cat "$W/t" >> "$W/anchor.times"
    rm -rf "$W/anchor"
}
ours() { # ours <side> <binary>
    local A=$W/ours-$1
    mkdir -p "$A"
    cat > "$A/config.json" <<EOF
{"paths": {"assets_dir": "$A/assets", "run_dir": "$A/run", "state_dir": "$A/state"},
 "assets": {"mode": "pull", "limits": {"max_total_mib": 4096, "max_entry_mib": 2048},
   "s3": {"bucket": "nb-bench", "key": "$KEY", "region": "garage", "endpoint": "$EP",
          "force_path_style": true, "checksum_sha256": "$SHA"${EXTRA_S3:+, $EXTRA_S3}}}}
EOF
    NODE_BOOTSTRAP_LOG_FORMAT=text /usr/bin/time -f '%e %M' -o "$W/t" \
        "$2" --config "$A/config.json" assets pull >"$A/out" 2>&1 \
        || { log "assets pull ($2) failed:"; cat "$A/out" >&2; exit 1; }
    cat "$W/t" >> "$W/$1.times"
    # Where the time went, from the agent's own log timestamps.
    python3 - "$A/out" "$1" >&2 <<'PY' || true
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
print("assets: %s: %s" % (sys.argv[2], ", ".join(out)))
PY
    [ -f "$A/assets/bootkube.sh" ] || { log "assets pull put nothing in place"; cat "$A/out" >&2; exit 1; }
    rm -rf "$A"
}

for MIB in $SIZES; do
    KEY=bundle-$MIB.tar.gz
    SHA=$(sha256sum "$CACHE/bundles/bundle-$MIB-v1.tar.gz" | cut -d' ' -f1)
    SIZE=$(stat -c %s "$CACHE/bundles/bundle-$MIB-v1.tar.gz")
    log "object $KEY: $SIZE bytes, sha256 $SHA; load: $(cut -d' ' -f1-3 /proc/loadavg)"
    SIDES=(aws anchor ours)
    [ -n "$BIN_B" ] && SIDES+=(oursb)
    for s in "${SIDES[@]}"; do : > "$W/$s.times"; done
    for r in $(seq "$RUNS"); do
        # Rotate the order each round, so no side always runs first.
        n=${#SIDES[@]}
        for i in $(seq 0 $((n - 1))); do
            side=${SIDES[$(( (i + r) % n ))]}
            sync
            case $side in
                aws) aws_only ;;
                anchor) anchor ;;
                ours) ours ours "$BIN" ;;
                oursb) ours oursb "$BIN_B" ;;
            esac
        done
    done
    for s in "${SIDES[@]}"; do log "$MIB MiB: $s $(tr '\n' ' ' < "$W/$s.times")(s, KiB)"; done
    # Per-round ratios, then their median.
    ratio() { paste -d' ' "$W/$1.times" "$W/$2.times" | awk '{printf "%.3f\n", $1 / $3}' | median; }
    secs() { cut -d' ' -f1 "$W/$1.times" | median; }
    rss() { cut -d' ' -f2 "$W/$1.times" | sort -n | tail -1; }
    R_ANCHOR=$(ratio anchor ours)
    R_AWS=$(ratio aws ours)
    TARGET=$([ "$MIB" -ge 512 ] && echo 2 || echo 2.5)
    awk -v m="$MIB" -v n="$RUNS" -v o="$(secs ours)" -v a="$(secs anchor)" -v w="$(secs aws)" \
        -v ra="$R_ANCHOR" -v rw="$R_AWS" -v t="$TARGET" -v or="$(rss ours)" -v ar="$(rss anchor)" \
        -v wr="$(rss aws)" -v s3="$S3" 'BEGIN {
        printf "ROW\tasset pull %d MiB tar.gz (%s), s (median of %d)\t%.2f\t%.2f (aws s3 cp + tar xzf + sync)\t%.2fx faster\t>= %sx faster\t%s\n", m, s3, n, o, a, ra, t, (ra >= t ? "yes" : "NO")
        printf "ROW\tasset pull %d MiB tar.gz (%s): vs download only, s\t%.2f\t%.2f (aws s3 cp alone)\t%.2fx faster\t(context)\t-\n", m, s3, o, w, rw
        printf "ROW\tasset pull %d MiB: peak RSS, MiB\t%.1f\t%.1f (aws s3 cp + tar), %.1f (aws alone)\t%.2fx\t< 32 MiB\t%s\n", m, or / 1024, ar / 1024, wr / 1024, or / ar, (or / 1024 < 32 ? "yes" : "NO")
    }'
    if [ -n "$BIN_B" ]; then
        R_B=$(ratio oursb ours)
        awk -v m="$MIB" -v o="$(secs ours)" -v b="$(secs oursb)" -v r="$R_B" -v or="$(rss ours)" -v br="$(rss oursb)" 'BEGIN {
            printf "ROW\tasset pull %d MiB: A/B, s (RSS MiB)\t%.2f (%.1f)\t%.2f (%.1f) (BIN_B)\t%.2fx faster\t(A/B)\t-\n", m, o, or / 1024, b, br / 1024, r
        }'
    fi
done
