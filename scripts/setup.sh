#!/usr/bin/env bash
# Installs what the tests and the demo use on a fresh Debian 12 machine
# (root): the Debian and PyPI packages below, and builds what they run from
# source into caches under /var/cache/node-bootstrap-tests. Idempotent.
#
#   scripts/setup.sh                   everything the test command uses
#   scripts/setup.sh --demo            only what ./scripts/demo.sh uses: its
#                                      Debian packages, torcx, Kubernetes, the
#                                      pods' images, and the demo's binaries
#   scripts/setup.sh --demo=standins   only what ./scripts/demo.sh --standins uses
#   scripts/setup.sh --apt-plan ADMINDIR
#                                      prints, without installing anything, the
#                                      apt-get install arguments the test setup
#                                      would use on a machine whose dpkg database
#                                      is ADMINDIR (ADMINDIR/status): a package
#                                      counts as present only if installed there.
#                                      The delivery tier simulates that install
#                                      against the machine image's package set.
#
# Each step says what it does; one that runs longer than a few seconds says
# how long it takes the first time, ticks on a terminal, and keeps its
# output in target/setup-logs/<step>.log. In the demo modes the demo's
# binaries build (cargo) beside the other steps. Exit codes: 2 this machine
# cannot run simulated nodes (demo modes: scripts/check-machine.sh), 3 a
# prerequisite below is missing, 4 a step failed (named, with its log),
# 64 an unknown option. Nothing is installed or built before the checks.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
    "") mode=t ;;
    --demo) mode=d ;;
    --demo=standins) mode=s ;;
    --apt-plan)
        mode=t plan_admindir=${2:?setup: --apt-plan needs the dpkg admin dir}
        [ -r "$plan_admindir/status" ] || { echo "setup: --apt-plan: no dpkg status file at $plan_admindir/status" >&2; exit 64; } ;;
    *) echo "setup: unknown option ${1} (--demo, --demo=standins, --apt-plan ADMINDIR, or none: everything the tests use)" >&2
       exit 64 ;;
esac
plan_admindir=${plan_admindir:-}
[ "$mode" = t ] || "$root/scripts/check-machine.sh" setup

# --- prereqs: what this script does not install (README, "Before you
# start"). Each one missing is named in one line, then setup stops before
# installing anything.
prereqs() {
    local missing=0 v
    say() { echo "setup: missing: $*" >&2; missing=1; }
    at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
    v=$(rustc --version 2>/dev/null | awk '{print $2}') || true
    at_least "${v:-0}" 1.95 || say "Rust 1.95 or newer (found ${v:-none}): install it with rustup (https://rustup.rs), then open a new shell"
    if [ "$mode" != s ]; then
        v=$(terraform version 2>/dev/null | sed -n '1s/^Terraform v//p') || true
        at_least "${v:-0}" 1.9 || say "terraform 1.9 or newer (found ${v:-none}): HashiCorp's release zip or apt repository (not in Debian)"
    fi
    if [ "$mode" = t ] && { ! python3 -c 'import moto.server, hcl2' 2>/dev/null || ! command -v aws >/dev/null || ! command -v sstream-query >/dev/null; }; then
        if ! python3 -m pip --version >/dev/null 2>&1; then
            say "a pip for python3 to install the PyPI tools with (Debian 12's python3 has none): a python3 of your own first on PATH (e.g. pyenv), or apt-get install python3-pip with PIP_BREAK_SYSTEM_PACKAGES=1"
        elif [ -z "${PIP_BREAK_SYSTEM_PACKAGES:-}" ] && python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
            say "a pip that may install system-wide ($(command -v python3) is EXTERNALLY-MANAGED): a python3 of your own first on PATH (e.g. pyenv), or PIP_BREAK_SYSTEM_PACKAGES=1"
        fi
    fi
    v=$("$root/scripts/build-torcx.sh" --check 2>&1) || say "the torcx sources: ${v#build-torcx: }"
    if [ "$mode" = t ]; then
        v=$("$root/scripts/build-containerd2.sh" --check 2>&1) || say "the containerd 2.1 and cri-tools sources: ${v#build-containerd2: }"
    fi
    [ "$missing" = 0 ] || exit 3
}
[ -n "$plan_admindir" ] || prereqs
# --- end of prereqs

# --- steps: `step NAME LABEL ESTIMATE CMD...` runs CMD with its output in
# $logs/NAME.log; after 3 s it says ESTIMATE (how long it takes when it
# is not cached) and where the log is, and ticks on a terminal. A failure
# names the step and its log, shows the log's last lines, and exits 4.
logs=$root/target/setup-logs
mkdir -p "$logs"
tty=
[ -t 1 ] && tty=1
trap 'kill_bg' EXIT

clock() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

failed() { # NAME LABEL LOG STATUS
    echo >&2
    echo "setup: step $1 ($2) failed (exit $4); its log: $3" >&2
    tail -n 15 "$3" | sed 's/^/    /' >&2
    exit 4
}

# Waits for PID (a step's command), saying how long it takes once it runs
# for more than 3 s.
follow() { # PID LOG ESTIMATE T0
    local pid=$1 long=
    while kill -0 "$pid" 2>/dev/null; do
        if [ -z "$long" ] && ((SECONDS - $4 >= 3)); then
            long=1
            printf '\n        %s; log: %s\n' "$3" "${2#"$root"/}"
        fi
        [ -n "$long" ] && [ -n "$tty" ] && printf '\r        %s elapsed ' "$(clock $((SECONDS - $4)))"
        sleep 0.5
    done
    if [ -n "$long" ]; then
        [ -n "$tty" ] && printf '\r'
        printf '        done in %s        \n' "$(clock $((SECONDS - $4)))"
    else
        echo " ok"
    fi
}

step() { # NAME LABEL ESTIMATE CMD...
    local name=$1 label=$2 estimate=$3 log=$logs/$1.log t0=$SECONDS pid status=0
    shift 3
    printf 'setup: %s ...' "$label"
    "$@" >"$log" 2>&1 &
    pid=$!
    follow "$pid" "$log" "$estimate" "$t0"
    wait "$pid" || status=$?
    [ "$status" = 0 ] || failed "$name" "$label" "$log" "$status"
}

# Steps in the background (cargo builds, the VM image), beside the others;
# finish_bg waits for each in the order they started.
bg_names=() bg_labels=() bg_estimates=() bg_t0s=() bg_pids=()
start_bg() { # NAME LABEL ESTIMATE CMD...
    bg_names+=("$1") bg_labels+=("$2") bg_estimates+=("$3") bg_t0s+=("$SECONDS")
    echo "setup: $2: in the background ($3); log: target/setup-logs/$1.log"
    local log=$logs/$1.log
    shift 3
    "$@" >"$log" 2>&1 &
    bg_pids+=("$!")
}
finish_bg() {
    local i status
    for i in "${!bg_pids[@]}"; do
        status=0
        printf 'setup: waiting for %s ...' "${bg_labels[$i]}"
        follow "${bg_pids[$i]}" "$logs/${bg_names[$i]}.log" "${bg_estimates[$i]}" "${bg_t0s[$i]}"
        wait "${bg_pids[$i]}" || status=$?
        bg_pids[$i]=
        [ "$status" = 0 ] || failed "${bg_names[$i]}" "${bg_labels[$i]}" "$logs/${bg_names[$i]}.log" "$status"
    done
    bg_pids=()
}
kill_bg() {
    local pid
    for pid in "${bg_pids[@]}"; do
        [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
    done
}
# --- end of steps

# `need MODES PACKAGE CHECK...`: the Debian PACKAGE is installed in MODES
# (t: the tests, d: the demo, s: the demo's stand-in walk-through) unless
# CHECK succeeds.
need_apt=()
need() {
    local modes=$1 pkg=$2
    shift 2
    [[ $modes == *"$mode"* ]] || return 0
    if [ -n "$plan_admindir" ]; then
        installed "$pkg" || need_apt+=("$pkg")
    else
        "$@" >/dev/null 2>&1 || need_apt+=("$pkg")
    fi
}
on_path() { command -v "$1"; }
installed() { dpkg-query ${plan_admindir:+--admindir="$plan_admindir"} -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'; }
# The real docker: its binaries are packed as the nodes' docker torcx image.
need td docker.io on_path dockerd
need t ignition on_path ignition-validate
need t openssh-server test -x /usr/sbin/sshd
# Push-mode tests log in to a simulated node as a Flatcar-like core user
# and move the assets into place through sudo, as on a real node.
need t sudo on_path sudo
# The pods' busybox image is Debian's busybox-static.
need td busybox-static test -x /bin/busybox
# Simulated nodes: unshare and nsenter, D-Bus inside each node.
need tds util-linux on_path unshare
need td iproute2 on_path ip
need tds dbus on_path dbus-daemon
# Docker addon: sysext test images are ext4 file systems (mkfs.ext4), the
# simplestreams tools are Python, systemd-sysext merges images. The runc
# shim of the pods (testkit/standins/nb-test-runc) is Python too.
need t e2fsprogs sh -c 'command -v mkfs.ext4 || test -x /sbin/mkfs.ext4'
need td python3 test -x /usr/bin/python3
# The real torcx is built from source (Go) for the addon tests and the
# demo's nodes; the real simplestreams client verifies signatures with
# gpg/gpgv.
need tds golang-go on_path go
need t gpgv on_path gpgv
need t gnupg on_path gpg
# The VM tier (tests/vm/main.rs): QEMU, mmdebstrap for its OS image
# (scripts/vm-image.sh), strip for the agent binary its Ignition downloads.
need t qemu-system-x86 on_path qemu-system-x86_64
need t mmdebstrap on_path mmdebstrap
need t binutils on_path strip
# The real cluster (tests of a node joining Kubernetes, the demo):
# kube-apiserver, kubelet and kubectl are built from Debian's kubernetes
# source package (scripts/build-kubernetes.sh: dpkg-source, make, rsync,
# Go), etcd is Debian's etcd-server (its own service is never started, see
# below).
need td dpkg-dev on_path dpkg-source
need td make on_path make
need td rsync on_path rsync
need td etcd-server on_path etcd
# Fleet metrics (tests of src/textfile and monitoring/): promtool (Debian
# `prometheus`) checks the agent's .prom file and the alert rules; Debian's
# node_exporter serves the file in the tests.
need t prometheus on_path promtool
need t prometheus-node-exporter on_path prometheus-node-exporter
# Pods on the tests' nodes: Debian's containerd (1.6, CRI plugin built in)
# and runc (docker's too), the CNI plugins (bridge, host-local, loopback
# under /usr/lib/cni), gcc and a static libc for the pause image
# (scripts/build-pause.sh) and for linking Rust programs (cargo). Debian 12
# has no crictl (cri-tools). The demo's worker on containerd
# (`demo.sh --containerd`) takes the loopback plugin.
need td containerd on_path containerd
need td runc sh -c 'command -v runc || test -x /usr/sbin/runc'
need td containernetworking-plugins test -x /usr/lib/cni/bridge
need tds gcc on_path gcc
need tds libc6-dev installed libc6-dev
# containerd 2.1 and cri-tools 1.32 (scripts/build-containerd2.sh) need
# Go 1.23: bookworm-backports' golang-1.23-go (the tests only).
if [ "$mode" = t ] && { [ -n "$plan_admindir" ] || [ ! -x /usr/lib/go-1.23/bin/go ]; }; then
    installed golang-1.23-go || need_apt+=(golang-1.23-go)
fi
# Kubernetes' node conformance suite (tests/conformance/,
# scripts/conformance.sh): its images served by Debian's docker-registry on
# loopback (htpasswd from apache2-utils for the private one), pushed into
# the registries' storage by skopeo (scripts/build-e2e-images.sh).
need t docker-registry on_path docker-registry
need t skopeo on_path skopeo
need t apache2-utils on_path htpasswd
# The suite's agnhost image carries Debian's curl and OpenBSD netcat, as the
# upstream image carries Alpine's (its specs dial with `curl` and `nc -u`).
need t curl on_path curl
need t netcat-openbsd test -x /bin/nc.openbsd
# The backports rule. A machine of this kind comes with some packages from
# bookworm-backports (qemu-utils 10, say). A package whose source package
# has a binary installed from backports (a version with ~bpo) is installed
# from backports too, in a second `apt-get install -t bookworm-backports`,
# so that its siblings and the versions they depend on come from there
# (qemu-system-x86 10 needs qemu-system-data 10 and seabios 1.16.3, which
# only backports has). Without the rule apt pairs Debian 12's
# qemu-system-x86 7.2 with the installed qemu-utils 10, which Breaks it,
# and the install fails; `pkg/bookworm-backports` alone is not enough
# either (its dependencies stay on Debian 12's versions). golang-1.23-go
# exists only in backports. Every package setup installs goes through the
# rule. The delivery tier simulates both installs against the machine
# image's package set (tests/delivery/apt_plan.rs).
bpo_sources=$(dpkg-query ${plan_admindir:+--admindir="$plan_admindir"} -W \
    -f='${db:Status-Abbrev} ${source:Package} ${Version}\n' |
    awk '$1 == "ii" && $3 ~ /~bpo/ { print $2 }' | sort -u) || {
    echo "setup: cannot read the dpkg database${plan_admindir:+ at $plan_admindir} (dpkg-query -W failed)" >&2
    exit 4
}
# Splits need_apt into apt_plain (Debian 12) and apt_bpo (the rule's), by
# each package's source in apt's lists (a package apt does not know keeps
# its own name as its source).
apt_plain=() apt_bpo=()
split_by_rule() {
    local sources pkg src
    sources=$(apt-cache show --no-all-versions "${need_apt[@]}" 2>/dev/null |
        awk '/^Package:/ { p = $2; s[p] = p } /^Source:/ { s[p] = $2 } END { for (p in s) print p, s[p] }') || true
    for pkg in "${need_apt[@]}"; do
        src=$(awk -v p="$pkg" '$1 == p { print $2 }' <<<"$sources")
        if [ "$pkg" = golang-1.23-go ] || { [ -n "$bpo_sources" ] && grep -qxF "${src:-$pkg}" <<<"$bpo_sources"; }; then
            apt_bpo+=("$pkg")
        else
            apt_plain+=("$pkg")
        fi
    done
}
[ ${#need_apt[@]} -eq 0 ] || split_by_rule
backports_source=/etc/apt/sources.list.d/node-bootstrap-backports.sources
has_backports() {
    grep -rqsE '^(Suites:.*bookworm-backports|deb .* bookworm-backports )' /etc/apt/sources.list /etc/apt/sources.list.d/
}
if [ -n "$plan_admindir" ]; then
    # --apt-plan: the two installs, one line each (this machine's apt
    # lists must know bookworm-backports: the delivery tier runs after
    # setup, which added it).
    echo "install: ${apt_plain[*]}"
    echo "install -t bookworm-backports: ${apt_bpo[*]}"
    exit 0
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ ${#apt_bpo[@]} -gt 0 ] && ! has_backports; then
        cat > "$backports_source" <<'SRC'
# Added by node-bootstrap's scripts/setup.sh (test setup): Go 1.23
# (golang-1.23-go), which containerd 2.1 and cri-tools 1.32 need, and the
# siblings of packages this machine has from backports (qemu-system-x86
# beside qemu-utils 10): scripts/setup.sh, "The backports rule".
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
        echo "setup: added the bookworm-backports apt source ($backports_source) for ${apt_bpo[*]}"
    fi
    # No package's service is started by its installation (etcd-server,
    # docker.io, prometheus): the tests start what they need, privately.
    own_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        own_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d; kill_bg' EXIT
    fi
    step apt-update "apt-get update" "seconds" apt-get update -qq
    if [ ${#apt_plain[@]} -gt 0 ]; then
        step apt "Debian packages: ${apt_plain[*]}" "about a minute, mostly downloading" \
            sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"' \
            apt "${apt_plain[@]}"
    fi
    if [ ${#apt_bpo[@]} -gt 0 ]; then
        step apt-backports "Debian packages from bookworm-backports: ${apt_bpo[*]}" "about a minute, mostly downloading" \
            sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -t bookworm-backports "$@"' \
            apt "${apt_bpo[@]}"
    fi
    if [ -n "$own_policy" ]; then
        rm -f /usr/sbin/policy-rc.d
        trap 'kill_bg' EXIT
    fi
fi
# docker.io, containerd, etcd-server and prometheus enable their own
# services; the tests start private ones.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now docker.service docker.socket containerd.service etcd.service \
        prometheus.service prometheus-node-exporter.service docker-registry.service >/dev/null 2>&1 || true
fi

if [ "$mode" = t ]; then
    need_pip=()
    python3 -c 'import moto.server' 2>/dev/null || need_pip+=('moto[server]>=5')
    python3 -c 'import hcl2' 2>/dev/null || need_pip+=('python-hcl2>=4')
    command -v aws >/dev/null || need_pip+=('awscli')
    # Canonical's simplestreams client (sstream-query, sstream-mirror,
    # json2streams): the real reader and writer of the metadata format.
    command -v sstream-query >/dev/null || need_pip+=('python-simplestreams')
    if [ ${#need_pip[@]} -gt 0 ]; then
        step pip "PyPI packages: ${need_pip[*]}" "about a minute" \
            python3 -m pip install -q "${need_pip[@]}"
    fi
fi

# The demo's binaries, built beside the steps below (cargo needs the
# linker the Debian packages bring).
case $mode in
    d) start_bg cargo "the demo's binaries (cargo build: node-bootstrap, cluster-demo, fake-update-engine)" \
           "about 4 minutes the first time, longer beside the Kubernetes build" \
           cargo build --manifest-path "$root/Cargo.toml" --workspace \
               --bin node-bootstrap --bin cluster-demo --bin fake-update-engine ;;
    s) start_bg cargo "the demo's binaries (cargo build: node-bootstrap, simnode-demo, fake-update-engine)" \
           "about 4 minutes the first time" \
           cargo build --manifest-path "$root/Cargo.toml" --workspace \
               --bin node-bootstrap --bin simnode-demo --bin fake-update-engine ;;
    # The tests' build (scripts/test.sh's first step, which then finds it
    # done): beside the Go builds, whose single-threaded links and the
    # crates that compile alone leave a core idle.
    t) start_bg cargo "the tests' build (cargo build --workspace --all-targets)" \
           "about 4 minutes the first time, longer beside the Go builds" \
           nice -n 5 cargo build --manifest-path "$root/Cargo.toml" --workspace --all-targets ;;
esac

# The real torcx / torcx-generator (cached; see the script).
step torcx "torcx, the real torcx-generator, from its sources (Go)" \
    "about a minute the first time, then cached" "$root/scripts/build-torcx.sh"
if [ "$mode" = t ]; then
    # The VM tier's OS image, built from Debian packages (cached by its
    # inputs; 2-4 minutes when they change, mostly mmdebstrap downloading
    # and unpacking, see the script): beside the Go and cargo builds below,
    # which keep the cores busy while it waits for the mirror. It needs
    # torcx (above).
    start_bg vm-image "the VM tier's OS image (mmdebstrap, Debian packages)" \
        "2-4 minutes when its inputs change, mostly downloading; then cached" \
        "$root/scripts/vm-image.sh"
fi
if [ "$mode" = t ]; then
    # cargo-deny, the supply-chain check of the test command (crates.io,
    # `cargo install --locked`, cached by its version; see the script).
    step cargo-deny "cargo-deny from crates.io (the crates' advisories, licenses, bans, sources)" \
        "once: an unoptimised build of about 300 crates (about 2.5 CPU-minutes), then cached" \
        "$root/scripts/build-cargo-deny.sh"
fi
if [ "$mode" != s ]; then
    # kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
    # kubectl from Debian's kubernetes source (cached by the source package;
    # 7.5 minutes on a quiet 2-core machine when it is not).
    v=$(apt-get source --print-uris -qq kubernetes 2>/dev/null |
        sed -nE "s/^'[^']*' kubernetes_([^ ]*)\.dsc .*/\1/p" | sed -E 's/.*really//; s/-[^-]*$//') || true
    # Then kube-apiserver and kubelet linked again from the same tree and Go
    # cache, stamped as the next patch and the next minor release (v1.20.3,
    # v1.21.0): the stand-ins the day-two tests (`follow`) move a cluster to.
    step kubernetes "Kubernetes ${v:+$v }from Debian 12's source (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl; the stand-ins of the next patch and minor)" \
        "building: runs once, about 8 minutes on 2 cores (more with the cargo build beside it)" \
        "$root/scripts/build-kubernetes.sh"
    # The pod sandbox image (pause, from the same source package, kept by
    # scripts/kubernetes-source.sh) and the pods' busybox image, as
    # docker-archive tars (cached; seconds).
    step pause "the pods' sandbox image (pause, from the same source)" \
        "seconds, once the source is fetched (34 MB)" "$root/scripts/build-pause.sh"
    step busybox "the pods' busybox image (Debian's busybox-static)" \
        "seconds" "$root/scripts/build-busybox-image.sh"
fi
if [ "$mode" = t ]; then
    # Today's Flatcar's containerd 2.1.4 and cri-tools 1.32 (crictl,
    # critest), from their sources with Go 1.23 (cached by each source
    # archive's hash; Debian's containerd 1.6.20 stays the other one tested).
    step containerd2 "containerd 2.1.4 and cri-tools 1.32 (crictl, critest) from their sources (Go 1.23)" \
        "building: runs once, about 4 minutes on 2 cores; then cached" \
        nice -n 10 "$root/scripts/build-containerd2.sh"
    # Kubernetes' own e2e.test, ginkgo, agnhost and nonewprivs from the same
    # source (cached by the source package; about 10 minutes niced when it
    # is not), then the suite's images as registry storage (seconds).
    step e2e "Kubernetes' e2e.test and ginkgo from the same source (the node conformance suite)" \
        "building: runs once, about 10 minutes on 2 cores" "$root/scripts/build-e2e.sh"
    step e2e-images "the node conformance suite's images (agnhost, nonewprivs, nonroot, busybox, stand-ins)" \
        "seconds" "$root/scripts/build-e2e-images.sh"
    # critest 1.32's images under its own names (busybox, nonewprivs from
    # the e2e build, web server stand-ins), loaded into the node before it
    # runs (cached; seconds).
    step critest-images "critest's images (busybox, nonewprivs, predefined group, web server stand-ins)" \
        "seconds" "$root/scripts/build-critest-images.sh"
fi
finish_bg

case $mode in
    t) tools="dockerd containerd ctr gcc ignition-validate terraform moto_server unshare nsenter sshd ssh-keygen sudo systemd-sysext go gpg gpgv sstream-query sstream-mirror json2streams qemu-system-x86_64 mmdebstrap debugfs e2fsck strip etcd dpkg-source promtool prometheus-node-exporter iptables-save docker-registry skopeo htpasswd" ;;
    d) tools="dockerd containerd gcc terraform unshare nsenter go etcd dpkg-source python3" ;;
    s) tools="unshare nsenter go gcc dbus-daemon" ;;
esac
for tool in $tools; do
    command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 4; }
done
echo "setup: ok"
