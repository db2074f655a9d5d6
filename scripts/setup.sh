#!/usr/bin/env bash
# Installs what the tests and the demo use on a fresh Debian 12 machine
# (root): the Debian packages and PyPI tools below. Idempotent; fails loudly.
set -euo pipefail

# --- prereqs: what this script does not install (README, "Before you
# start"). Each one missing is named in one line, then setup stops before
# installing anything.
prereqs() {
    local missing=0 v
    say() { echo "setup: missing: $*" >&2; missing=1; }
    at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }
    v=$(rustc --version 2>/dev/null | awk '{print $2}') || true
    at_least "${v:-0}" 1.95 || say "Rust 1.95 or newer (found ${v:-none}): install it with rustup (https://rustup.rs), then open a new shell"
    v=$(terraform version 2>/dev/null | sed -n '1s/^Terraform v//p') || true
    at_least "${v:-0}" 1.9 || say "terraform 1.9 or newer (found ${v:-none}): HashiCorp's release zip or apt repository (not in Debian)"
    if ! python3 -c 'import moto.server, hcl2' 2>/dev/null || ! command -v aws >/dev/null || ! command -v sstream-query >/dev/null; then
        if ! python3 -m pip --version >/dev/null 2>&1; then
            say "a pip for python3 to install the PyPI tools with (Debian 12's python3 has none): a python3 of your own first on PATH (e.g. pyenv), or apt-get install python3-pip with PIP_BREAK_SYSTEM_PACKAGES=1"
        elif [ -z "${PIP_BREAK_SYSTEM_PACKAGES:-}" ] && python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
            say "a pip that may install system-wide ($(command -v python3) is EXTERNALLY-MANAGED): a python3 of your own first on PATH (e.g. pyenv), or PIP_BREAK_SYSTEM_PACKAGES=1"
        fi
    fi
    v=$("$(dirname "$0")/build-torcx.sh" --check 2>&1) || say "the torcx sources: ${v#build-torcx: }"
    [ "$missing" = 0 ] || exit 1
}
prereqs
# --- end of prereqs

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v ignition-validate >/dev/null || need_apt+=(ignition)
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
# Push-mode tests log in to a simulated node as a Flatcar-like core user
# and move the assets into place through sudo, as on a real node.
command -v sudo >/dev/null || need_apt+=(sudo)
[ -x /bin/busybox ] || need_apt+=(busybox-static)
command -v unshare >/dev/null || need_apt+=(util-linux)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v dbus-daemon >/dev/null || need_apt+=(dbus)
# Docker addon: sysext test images are ext4 file systems (mkfs.ext4), the
# simplestreams tools are Python, systemd-sysext merges images.
command -v mkfs.ext4 >/dev/null || [ -x /sbin/mkfs.ext4 ] || need_apt+=(e2fsprogs)
[ -x /usr/bin/python3 ] || need_apt+=(python3)
# The real torcx is built from source (Go) for the addon tests; the real
# simplestreams client verifies signatures with gpg/gpgv.
command -v go >/dev/null || need_apt+=(golang-go)
command -v gpgv >/dev/null || need_apt+=(gpgv)
command -v gpg >/dev/null || need_apt+=(gnupg)
# The VM tier (tests/vm/main.rs): QEMU, mmdebstrap for its OS image
# (scripts/vm-image.sh), strip for the agent binary its Ignition downloads.
command -v qemu-system-x86_64 >/dev/null || need_apt+=(qemu-system-x86)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
command -v strip >/dev/null || need_apt+=(binutils)
# The real cluster (tests of a node joining Kubernetes): kube-apiserver,
# kubelet and kubectl are built from Debian's kubernetes source package
# (scripts/build-kubernetes.sh: dpkg-source, make, rsync, Go), etcd is
# Debian's etcd-server (its own service is never started, see below).
command -v dpkg-source >/dev/null || need_apt+=(dpkg-dev)
command -v make >/dev/null || need_apt+=(make)
command -v rsync >/dev/null || need_apt+=(rsync)
command -v etcd >/dev/null || need_apt+=(etcd-server)
# Fleet metrics (tests of src/textfile and monitoring/): promtool (Debian
# `prometheus`) checks the agent's .prom file and the alert rules; Debian's
# node_exporter serves the file in the tests.
command -v promtool >/dev/null || need_apt+=(prometheus)
# Pods on the tests' nodes: Debian's containerd (1.6, CRI plugin built in)
# and runc, the CNI plugins (bridge, host-local, loopback under
# /usr/lib/cni), gcc and a static libc for the pause image
# (scripts/build-pause.sh). Debian 12 has no crictl (cri-tools).
command -v containerd >/dev/null || need_apt+=(containerd)
command -v runc >/dev/null || [ -x /usr/sbin/runc ] || need_apt+=(runc)
[ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
command -v gcc >/dev/null || need_apt+=(gcc)
dpkg-query -W -f='${Status}' libc6-dev 2>/dev/null | grep -q 'ok installed' || need_apt+=(libc6-dev)
command -v prometheus-node-exporter >/dev/null || need_apt+=(prometheus-node-exporter)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No package's service is started by its installation (etcd-server,
    # docker.io, prometheus): the tests start what they need, privately.
    own_policy=
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod 0755 /usr/sbin/policy-rc.d
        own_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
    if [ -n "$own_policy" ]; then
        rm -f /usr/sbin/policy-rc.d
        trap - EXIT
    fi
fi
# docker.io, containerd, etcd-server and prometheus enable their own
# services; the tests start private ones.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
    systemctl disable --now docker.service docker.socket containerd.service etcd.service \
        prometheus.service prometheus-node-exporter.service >/dev/null 2>&1 || true
fi

need_pip=()
python3 -c 'import moto.server' 2>/dev/null || need_pip+=('moto[server]>=5')
python3 -c 'import hcl2' 2>/dev/null || need_pip+=('python-hcl2>=4')
command -v aws >/dev/null || need_pip+=('awscli')
# Canonical's simplestreams client (sstream-query, sstream-mirror,
# json2streams): the real reader and writer of the metadata format.
command -v sstream-query >/dev/null || need_pip+=('python-simplestreams')
if [ ${#need_pip[@]} -gt 0 ]; then
    echo "setup: installing PyPI packages: ${need_pip[*]}"
    python3 -m pip install -q "${need_pip[@]}"
fi

# The real torcx / torcx-generator (cached; see the script).
"$(dirname "$0")/build-torcx.sh" >/dev/null
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl
# from Debian's kubernetes source (cached by the source package; 7.5
# minutes on a quiet 2-core machine when it is not).
"$(dirname "$0")/build-kubernetes.sh" >/dev/null
# The pod sandbox image (pause, from the same source package, kept by
# scripts/kubernetes-source.sh) and the pods' busybox image, as
# docker-archive tars (cached; seconds).
"$(dirname "$0")/build-pause.sh" >/dev/null
"$(dirname "$0")/build-busybox-image.sh" >/dev/null
# The VM tier's OS image, built from Debian packages (cached by its inputs;
# 2-4 minutes when they change, see the script).
"$(dirname "$0")/vm-image.sh" >/dev/null

for tool in dockerd containerd ctr gcc ignition-validate terraform moto_server unshare nsenter sshd ssh-keygen sudo systemd-sysext go gpg gpgv sstream-query sstream-mirror json2streams qemu-system-x86_64 mmdebstrap debugfs e2fsck strip etcd dpkg-source promtool prometheus-node-exporter iptables-save; do
    command -v "$tool" >/dev/null || { echo "setup: $tool is still missing" >&2; exit 1; }
done
echo "setup: ok"
