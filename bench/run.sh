#!/usr/bin/env bash
# THE benchmark command: measures the whole product side by side with what
# it replaces or competes with, and prints one table (name, ours,
# theirs/floor, ratio, target, met?). Not a test: nothing here fails the
# build; a missed target says NO in the table and docs/benchmarks.md says why.
#
#   sudo bench/run.sh                 everything (needs root: simulated nodes, dockerd)
#   sudo bench/run.sh --quick         day-to-day: under 5 minutes once built, no
#                                     Garage (assets from nb-bench's in-memory S3
#                                     stand-in), fewer runs, no fleet
#   ONLY="footprint critical" bench/run.sh   some sections only
#   RUNS=9 FLEET=300 bench/run.sh     repetitions, fleet size
#   AGENT=target/debug/node-bootstrap bench/run.sh   measure that build of the
#                                     agent instead of building release (the
#                                     header names it)
#   AGENT_B=/path/to/other/node-bootstrap ONLY=ready bench/run.sh   A/B: the
#                                     ready section boots workers of both
#                                     agents, taking turns, and puts B's
#                                     step table beside A's
#   BASE=main ONLY=ready bench/run.sh   the same A/B against the release agent
#                                     built from git revision BASE (once, kept
#                                     in $BENCH_CACHE/base-<commit>): the
#                                     previous main, its kubelet configuration
#                                     included
#   NB_TORCX_SRC=/path/to/torcx ONLY=ready bench/run.sh   the docker workers'
#                                     real torcx from sources elsewhere than
#                                     ../shared/tools/torcx (scripts/build-torcx.sh)
#   KINDS=sysext WRITE_WINDOW=0 ONLY=ready bench/run.sh   some worker kinds
#                                     (docker, containerd, sysext), no
#                                     steady-state window (default 600 s)
#
# Sections: footprint (binary size, dynamic deps, peak RSS of a full run),
# critical (critical path to kubelet on a simulated node vs the no-op floor;
# whole run vs `docker run --rm`), status (bench/status.sh), assets
# (bench/assets.sh: assets pull vs the original's whole job, aws s3 cp +
# tar xzf + sync, and vs aws s3 cp alone, on Garage), fleet (hundreds of
# agents retrying a failing API server: request-rate histogram), ready (a
# worker's first boot to the Ready condition, and to Ready without the
# not-ready taint, in a real cluster: docker, containerd and sysext workers
# on simulated nodes against the same workers with nothing to bootstrap,
# with the step-by-step table of where the time goes; then one worker of
# each kind (and agent) kept Ready for WRITE_WINDOW seconds, its Node
# status and lease writes per minute from the API server's audit log; and,
# unless --quick or VM=0, one worker VM through the VM tier's join test,
# about 12 minutes under emulation), follow (day
# two: a cluster of a master and three workers at v1.20.2, the control
# plane moved to the stand-in of v1.20.3; the time to the last worker
# following, and each worker's Not-Ready window; about 6 minutes),
# follow-fleet (not in the default set: ONLY=follow-fleet; FOLLOW_NODES
# simulated nodes, default 1000, following against the real kube-apiserver
# with maxChanging 10, 1, and a failing node, checked from its audit log;
# the maxChanging 1 round alone is a change time per node;
# FOLLOW_TIMER_MS, FOLLOW_CHANGE_MS: the nodes' timer, default 5000, and
# their kubelet's restart, default 1000).
#
# Builds what it needs: the harness `nb-bench` (crate benchkit/) and
# testkit's `fake-update-engine` (debug), and a release build of
# node-bootstrap into $BENCH_CACHE (default target/bench), plus Garage there
# on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export BENCH_CACHE=${BENCH_CACHE:-$ROOT/target/bench}
QUICK=
if [ "${1:-}" = --quick ]; then
    QUICK=1
    RUNS=${RUNS:-3}
    STATUS_RUNS=${STATUS_RUNS:-10}
    ASSET_RUNS=${ASSET_RUNS:-2}
    export S3=${S3:-standin}
    ONLY=${ONLY:-footprint critical status assets ready}
    VM=${VM:-0}
    WRITE_WINDOW=${WRITE_WINDOW:-0}
fi
RUNS=${RUNS:-7}
FLEET=${FLEET:-300}
VM=${VM:-1}
ONLY=${ONLY:-footprint critical status assets fleet ready follow}
want() { [[ " $ONLY " == *" $1 "* ]]; }
log() { echo "bench: $*" >&2; }

[ "$(id -u)" = 0 ] || { log "needs root (simulated nodes, a private dockerd)"; exit 1; }
for t in /usr/bin/time ldd column; do
    command -v "$t" >/dev/null || { log "$t is missing (apt-get install time bsdextrautils)"; exit 1; }
done

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
if want ready && [ -n "${BASE:-}" ] && [ -z "${AGENT_B:-}" ]; then
    SHA=$(git rev-parse --verify "$BASE^{commit}")
    AGENT_B=$BENCH_CACHE/base-$SHA/node-bootstrap
    if [ ! -x "$AGENT_B" ]; then
        log "building the release agent of $BASE ($SHA) for the A/B"
        SRC=$(mktemp -d)
        git archive "$SHA" | tar -x -C "$SRC"
        # A target dir of its own (in ours, cargo would take the other
        # source's build as fresh: its fingerprints name ours' files),
        # started from ours' dependencies, without the workspace's crates.
        BT=$BENCH_CACHE/base-target
        if [ ! -d "$BT/release" ] && [ -d "$BENCH_CACHE/release" ]; then
            mkdir -p "$BT" && cp -a "$BENCH_CACHE/release" "$BT/"
        fi
        rm -rf "$BT"/release/.fingerprint/node-bootstrap-*
        (cd "$SRC" && cargo build --quiet --release --bin node-bootstrap --target-dir "$BT")
        mkdir -p "$(dirname "$AGENT_B")"
        cp "$BT/release/node-bootstrap" "$AGENT_B"
        rm -rf "$SRC"
    fi
fi
log "building (nb-bench and fake-update-engine; release node-bootstrap into $BENCH_CACHE)"
cargo build --quiet -p benchkit -p testkit --bins
if [ -n "${AGENT:-}" ]; then
    BIN=$(realpath "$AGENT")
else
    cargo build --quiet --release --bin node-bootstrap --target-dir "$BENCH_CACHE"
    BIN=$BENCH_CACHE/release/node-bootstrap
fi
H=${CARGO_TARGET_DIR:-$ROOT/target}/debug/nb-bench

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
ROWS=$OUT/rows
: > "$ROWS"
row() { printf 'ROW\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$ROWS"; }
collect() { tee -a "$OUT/raw" | grep '^ROW' >> "$ROWS" || true; }
STEPS=$OUT/steps
: > "$STEPS"

if want footprint; then
    log "footprint"
    SIZE=$(stat -c %s "$BIN")
    MIB=$(awk -v s="$SIZE" 'BEGIN {printf "%.1f", s / 1048576}')
    STRIPPED=$(file -b "$BIN" | grep -q 'not stripped' && echo "not stripped" || echo "stripped")
    row "release binary size ($STRIPPED), MiB" "$MIB" "15 (limit)" \
        "$(awk -v s="$SIZE" 'BEGIN {printf "%.2fx", s / 1048576 / 15}')" "< 15 MiB" \
        "$(awk -v s="$SIZE" 'BEGIN {print (s < 15 * 1048576) ? "yes" : "NO"}')"
    LIBS=$(ldd "$BIN" | awk '{print $1}' | sed 's#.*/##' | sort | tr '\n' ' ')
    # glibc's own libraries, the kernel's vDSO, and GCC's unwinder (part of
    # every glibc system's base; Rust's std links it for stack unwinding).
    OTHER=$(for l in $LIBS; do
        case "$l" in
            linux-vdso.so.*|ld-linux-*.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libgcc_s.so.*) ;;
            *) echo "$l" ;;
        esac
    done | tr '\n' ' ')
    SSL=$(echo "$LIBS" | grep -Eo 'lib(ssl|crypto)[^ ]*' || true)
    row "dynamic dependencies" "${LIBS% }" "glibc (+libgcc_s)" "-" "glibc only, no OpenSSL" \
        "$([ -z "$OTHER" ] && [ -z "$SSL" ] && echo yes || echo "NO: ${OTHER}${SSL}")"
    "$H" run-rss --agent "$BIN" 2>>"$OUT/log" | collect
fi

CP_MS=
if want critical; then
    log "critical path on simulated nodes ($RUNS runs each, after a warm-up)"
    "$H" critical-path --agent "$BIN" --runs "$RUNS" 2> >(tee -a "$OUT/log" | grep -E 'medians' >&2) | collect
    CP_MS=$(awk -F'\t' '$1 == "DATA" && $2 == "critical_path_ms" {print $3}' "$OUT/raw" | tail -1)
    log "docker run --rm against a private dockerd"
    "$H" docker-run --agent "$BIN" --runs "$RUNS" ${CP_MS:+--ours-ms "$CP_MS"} 2>>"$OUT/log" | collect
fi

if want status; then
    log "status vs systemctl status (bench/status.sh)"
    BIN="$BIN" N=${STATUS_RUNS:-20} bench/status.sh > "$OUT/status" 2>>"$OUT/log"
    cat "$OUT/status" >&2
    # COMMAND RUNS MEDIAN MAX RSS, name up to 34 columns.
    st() { grep "^$1 " "$OUT/status" | head -1 | awk '{print $(NF-2), $NF}'; }
    read -r OM OR <<<"$(st 'node-bootstrap status   ')"
    read -r SM SR <<<"$(st 'systemctl status')"
    read -r FM _ <<<"$(st 'fixed overhead')"
    if [ -n "${OM:-}" ] && [ -n "${SM:-}" ]; then
        row "status: wall time, ms (median of ${STATUS_RUNS:-20})" "$OM" "$SM (systemctl status)" \
            "$(awk -v o="$OM" -v s="$SM" 'BEGIN {printf "%.2fx", o / s}')" "<= 0.6x" \
            "$(awk -v o="$OM" -v s="$SM" 'BEGIN {print (o <= 0.6 * s) ? "yes" : "NO"}')"
        row "status: net of the fixed overhead (nsenter, time, sh: ${FM:-?} ms), ms" \
            "$(awk -v o="$OM" -v f="${FM:-0}" 'BEGIN {printf "%.1f", o - f}')" \
            "$(awk -v s="$SM" -v f="${FM:-0}" 'BEGIN {printf "%.1f", s - f}') (systemctl status)" \
            "$(awk -v o="$OM" -v s="$SM" -v f="${FM:-0}" 'BEGIN {printf "%.2fx", (o - f) / (s - f)}')" "(context)" "-"
        row "status: peak RSS, MiB" "$(awk -v k="$OR" 'BEGIN {printf "%.1f", k / 1024}')" \
            "$(awk -v k="$SR" 'BEGIN {printf "%.1f", k / 1024}') (systemctl status)" \
            "$(awk -v o="$OR" -v s="$SR" 'BEGIN {printf "%.2fx", o / s}')" "(context)" "-"
    else
        row "status vs systemctl status" "?" "?" "-" "<= 0.6x" "NO: bench/status.sh gave no numbers"
    fi
fi

if want assets; then
    log "asset pull vs the original's job and aws s3 cp, on ${S3:-garage} (bench/assets.sh)"
    BIN="$BIN" NB_BENCH="$H" RUNS=${ASSET_RUNS:-3} bench/assets.sh 2> >(tee -a "$OUT/log" >&2) | collect
fi

if want ready; then
    log "first boot to Node Ready in a real cluster ($RUNS workers of each kind ${KINDS:-docker,containerd,sysext} and their floors, simulated nodes; then ${WRITE_WINDOW:-600} s of steady-state writes)"
    "$H" node-ready --agent "$BIN" ${AGENT_B:+--agent-b "$(realpath "$AGENT_B")"} --runs "$RUNS" \
        --kinds "${KINDS:-docker,containerd,sysext}" --write-window-secs "${WRITE_WINDOW:-600}" \
        2> >(tee -a "$OUT/log" | grep -E '^node-ready' >&2) | tee >(grep '^STEPS' | cut -f2- >> "$STEPS") | collect ||
        { sleep 1; log "node-ready failed:"; sed -n '/^Error/,/^Stack backtrace/p' "$OUT/log" | tail -n 30 >&2; exit 1; }
    if [ "$VM" = 1 ]; then
        log "first boot to Node Ready of a worker VM (the VM tier's join test)"
        # The VM boots the static build (tests/vm/rig.rs).
        ./scripts/build-static.sh >>"$OUT/log" 2>&1 || log "the static build failed (its output: in the raw log)"
        NB_BENCH_REPORT=$OUT/vm-rows cargo test --quiet --test vm \
            worker_joins_a_control_plane:: \
            >>"$OUT/log" 2>&1 || log "the VM join test failed (its output: in the raw log)"
        [ -f "$OUT/vm-rows" ] && collect < "$OUT/vm-rows"
    fi
fi

if want follow; then
    log "day two: 3 workers follow the control plane to the stand-in of v1.20.3, one at a time (a real cluster, simulated nodes)"
    echo "follow: each worker of the rollout (seconds since the control plane's change)" >> "$STEPS"
    "$H" follow --agent "$BIN" 2> >(tee -a "$OUT/log" | grep -E '^follow' >&2) | tee >(grep '^STEPS' | cut -f2- >> "$STEPS") | collect
fi

if want follow-fleet; then
    log "follow-fleet: ${FOLLOW_NODES:-1000} simulated nodes follow the API server's release (maxChanging 10, 1, a failing node)"
    echo "follow-fleet: where each round ended" >> "$STEPS"
    "$H" follow-fleet --nodes "${FOLLOW_NODES:-1000}" ${FOLLOW_TIMER_MS:+--timer-ms "$FOLLOW_TIMER_MS"} ${FOLLOW_CHANGE_MS:+--change-ms "$FOLLOW_CHANGE_MS"} 2> >(tee -a "$OUT/log" | grep -E '^follow-fleet' >&2) | tee >(grep '^STEPS' | cut -f2- >> "$STEPS") | collect
fi

if want fleet; then
    log "fleet: $FLEET agents retrying a failing API server"
    "$H" fleet --agent "$BIN" --nodes "$FLEET" 2>>"$OUT/log" | collect
fi

echo
echo "node-bootstrap benchmarks${QUICK:+ (--quick)}, $(date -u +%Y-%m-%d), agent $BIN${AGENT_B:+ (B: $AGENT_B)}, load at start $LOAD_START (at end $(cut -d' ' -f1-3 /proc/loadavg)), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"), $(uname -r)"
echo
{
    printf 'MEASUREMENT\tOURS\tTHEIRS / FLOOR\tRATIO\tTARGET\tMET\n'
    cut -f2- "$ROWS"
} | column -t -s $'\t'
if [ -s "$STEPS" ]; then
    # One table per runtime: a title line, then tab-separated rows.
    awk -F'\t' 'NF == 1 {print ""; print; next} {print}' "$STEPS" | \
        awk 'NF == 0 || $0 !~ /\t/ {if (block != "") {print block | "column -t -s \"\t\""; close("column -t -s \"\t\""); block = ""} print; next} {block = block $0 "\n"} END {if (block != "") print block | "column -t -s \"\t\""}'
fi
if grep -q '^HIST' "$OUT/raw" 2>/dev/null; then
    echo
    grep '^HIST' "$OUT/raw" | cut -f2- | sed '/^$/d'
fi
