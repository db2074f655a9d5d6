#!/usr/bin/env bash
# Benchmark (not a test): `node-bootstrap status` against `systemctl status`
# of the same units, on a simulated node (real systemd as PID 1 in a
# namespace, testkit/src/simnode.rs). Prints a table of wall time (median,
# max over N runs) and peak RSS per command.
#
#   bench/status.sh              boots a node of its own (needs root), runs, stops it
#   NODE_PID=<pid> bench/status.sh   uses a running node (the host PID of its systemd)
#   N=50 bench/status.sh         runs per command (default 20)
#   BIN_B=/path/to/other/node-bootstrap bench/status.sh   also times that
#                                build's `status` (A/B of two builds)
#
# The commands take turns (one call of each per round), so host load
# moves them together.
#
# The node's units are the project's (bootkube master, agent stub for `run`,
# kubelet-wrapper stand-in), so `status` reads real unit state over D-Bus.
# Every wall time includes the same fixed part (nsenter, GNU time, sh), shown
# on its own as "fixed overhead"; bench/run.sh also gives the ratio net of it.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-20}
BIN=${BIN:-target/release/node-bootstrap}
[ -x "$BIN" ] || BIN=target/debug/node-bootstrap
[ -x "$BIN" ] || { echo "build first: cargo build" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install -y time" >&2; exit 1; }
UNITS=(k8s-node-bootstrap.service kubelet.service bootkube.path bootkube.service tectonic.path tectonic.service)

cleanup() { :; }
trap 'cleanup' EXIT
if [ -z "${NODE_PID:-}" ]; then
    [ "$(id -u)" = 0 ] || { echo "booting a node needs root (or pass NODE_PID)" >&2; exit 1; }
    D=$(mktemp -d /var/tmp/bench-status-XXXX)
    mkdir -p "$D"/{upper,work,root} "$D/upper/etc/systemd/system" "$D/upper/opt/bin" \
        "$D/upper/usr/lib/coreos" "$D/upper/etc/node-bootstrap"
    setfattr -n trusted.overlay.opaque -v y "$D/upper/etc/systemd/system" 2>/dev/null \
        || python3 -c "import os,sys; os.setxattr(sys.argv[1], 'trusted.overlay.opaque', b'y')" "$D/upper/etc/systemd/system"
    for u in console-getty.service getty@.service serial-getty@.service; do
        ln -s /dev/null "$D/upper/etc/systemd/system/$u"
    done
    for u in "${UNITS[@]}"; do cp "units/$u" "$D/upper/etc/systemd/system/"; done
    cp testkit/standins/agent-stub "$D/upper/opt/bin/node-bootstrap"
    cp "$BIN" "$D/upper/opt/bin/node-bootstrap-real"
    if [ -n "${BIN_B:-}" ]; then cp "$BIN_B" "$D/upper/opt/bin/node-bootstrap-b"; fi
    cp testkit/standins/kubelet-wrapper "$D/upper/usr/lib/coreos/kubelet-wrapper"
    echo '{"role": "bootkube-master"}' > "$D/upper/etc/node-bootstrap/config.json"
    systemctl --root="$D/upper" enable k8s-node-bootstrap.service kubelet.service bootkube.path tectonic.path >/dev/null 2>&1
    unshare --pid --fork --mount --kill-child sh -c "
        set -e
        mount --make-rprivate /
        mount -t overlay overlay -o lowerdir=/,upperdir=$D/upper,workdir=$D/work $D/root
        export container=bench-status
        exec unshare --root=$D/root /lib/systemd/systemd --system --unit=multi-user.target
    " >"$D/console.log" 2>&1 &
    UNSHARE=$!
    cleanup() {
        if [ -n "${NODE_PID:-}" ]; then kill -s SIGRTMIN+4 "$NODE_PID" 2>/dev/null || true; fi
        for _ in $(seq 100); do kill -0 "$UNSHARE" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$UNSHARE" 2>/dev/null || true
        wait "$UNSHARE" 2>/dev/null || true
        rm -rf "$D"
    }
    for _ in $(seq 300); do
        c=$(cat "/proc/$UNSHARE/task/$UNSHARE/children" 2>/dev/null | awk '{print $1}')
        if [ -n "$c" ] && readlink "/proc/$c/exe" 2>/dev/null | grep -q 'systemd$'; then
            NODE_PID=$c; break
        fi
        sleep 0.05
    done
    [ -n "${NODE_PID:-}" ] || { echo "node did not start" >&2; cat "$D/console.log" >&2; exit 1; }
    for _ in $(seq 300); do
        [ "$(nsenter -t "$NODE_PID" -p -m -r systemctl is-active kubelet.service 2>/dev/null)" = active ] && break
        sleep 0.1
    done
    STATUS=/opt/bin/node-bootstrap-real
else
    STATUS=${STATUS:-/opt/bin/node-bootstrap}
fi

inside() { nsenter -t "$NODE_PID" -p -m -r "$@"; }

# name|command (run inside the node)
CASES=(
    "node-bootstrap status|$STATUS status"
    "node-bootstrap status --json|$STATUS status --json"
    "systemctl status (same units)|systemctl status --no-pager ${UNITS[*]}"
    "systemctl show (same units)|systemctl show ${UNITS[*]}"
    "fixed overhead (sh -c true)|true"
)
if [ -n "${BIN_B:-}" ]; then
    CASES+=("node-bootstrap status (BIN_B)|/opt/bin/node-bootstrap-b status")
fi

W=$(mktemp -d)
for _ in $(seq "$N"); do
    for i in "${!CASES[@]}"; do
        cmd=${CASES[$i]#*|}
        # Wall time in ns around the whole call (nsenter included, the same
        # for every command); peak RSS of the command from GNU time.
        t0=$(date +%s%N)
        m=$(inside /usr/bin/time -f '%M' sh -c "$cmd >/dev/null 2>&1" 2>&1 | tail -1 || true)
        t1=$(date +%s%N)
        echo "$(( (t1 - t0) / 1000 )) ${m:-0}" >> "$W/$i"
    done
done

printf '%-34s %6s %12s %10s %12s\n' COMMAND RUNS "MEDIAN ms" "MAX ms" "MAX RSS KiB"
for i in "${!CASES[@]}"; do
    name=${CASES[$i]%%|*}
    sorted=$(cut -d' ' -f1 "$W/$i" | sort -n)
    median=$(echo "$sorted" | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]/1000}')
    max=$(echo "$sorted" | tail -1 | awk '{printf "%.1f", $1/1000}')
    rss=$(cut -d' ' -f2 "$W/$i" | sort -n | tail -1)
    printf '%-34s %6s %12s %10s %12s\n' "$name" "$N" "$median" "$max" "$rss"
done
rm -rf "$W"
