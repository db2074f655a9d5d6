#!/usr/bin/env bash
# Builds the real Kubernetes parts the cluster tests run (kube-apiserver,
# kube-controller-manager, kube-scheduler,
# kubelet, kubectl of one release) from Debian 12's own `kubernetes` source
# package (scripts/kubernetes-source.sh fetches it once, through a deb-src
# entry for bookworm main it adds if the machine has none), Go modules
# vendored in the tree,
# Debian's golang-go. The product never needs these: only the tests run a
# real control plane and a real kubelet against what the agent writes.
#
#   scripts/build-kubernetes.sh       prints the directory holding the binaries
#
# Cached by the source package (kubernetes-source.sh's key: the name, size
# and SHA-256 of its .dsc and tarballs as apt's index lists them) and this
# script, under
# $NB_TEST_CACHE/kubernetes/<key>/ (default /var/cache/node-bootstrap-tests):
# a second run costs nothing and downloads nothing. A build takes about 7.5
# minutes on a quiet 2-core machine (Go's cache is thrown away afterwards).
# Fails loudly, naming what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)

die() { echo "build-kubernetes: $*" >&2; exit 1; }

for tool in apt-get dpkg-source go make rsync; do
    command -v "$tool" >/dev/null ||
        die "$tool is missing (scripts/setup.sh installs dpkg-dev, golang-go, make, rsync)"
done

# The source package, fetched once and kept (scripts/kubernetes-source.sh:
# the deb-src entry, apt's hash checks); its directory name is its key.
src=$("$root/scripts/kubernetes-source.sh") || die "no kubernetes source package (above)"
dsc=$(ls "$src"/*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] || die "$src holds no .dsc"
dsc_name=$(basename "$dsc")
key=$( (basename "$src"; cat "$0") | sha256sum | cut -c1-16)
out="$cache/kubernetes/$key"

if [ ! -x "$out/kubelet" ]; then
    echo "build-kubernetes: building ${bins[*]} from $dsc_name into $out" >&2
    t0=$SECONDS
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-kubernetes-src.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    dpkg-source -x "$dsc" "$work/src" >/dev/null 2>"$work/dpkg-source.log" ||
        die "dpkg-source -x failed: $(tail -3 "$work/dpkg-source.log")"
    whats=$(printf 'cmd/%s ' "${bins[@]}")
    # As debian/rules builds it: static (no cgo), vendored modules.
    if ! (cd "$work/src" && env CGO_ENABLED=0 GOFLAGS=-mod=vendor HOME="$work/home" \
            GOPATH="$work/gopath" GOCACHE="$work/gocache" \
            make WHAT="$whats" >"$work/build.log" 2>&1); then
        tail -30 "$work/build.log" >&2
        die "make WHAT=\"$whats\" failed (log above)"
    fi
    mkdir -p "$cache/kubernetes"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    for b in "${bins[@]}"; do
        cp "$work/src/_output/bin/$b" "$tmp/$b"
    done
    "$tmp/kubelet" --version > "$tmp/VERSION"
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build-kubernetes: built $(cat "$out/VERSION") in $((SECONDS - t0)) s" >&2
fi
for b in "${bins[@]}"; do
    [ -x "$out/$b" ] || die "$out/$b is missing"
done
echo "$out"
