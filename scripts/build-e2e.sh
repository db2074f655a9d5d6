#!/usr/bin/env bash
# Builds Kubernetes' own end-to-end test binary and what runs it, from the
# same Debian 12 `kubernetes` source package as the cluster's parts
# (scripts/kubernetes-source.sh; the full upstream tree with its vendored
# modules): `e2e.test` (the suite, whose [NodeConformance] specs
# scripts/conformance.sh runs), `ginkgo` (its runner, vendored), and the
# programs of the suite's test images: `agnhost` (test/images/agnhost) and
# `nonewprivs` (test/images/nonewprivs). Test setup only: the product never
# needs them.
#
#   scripts/build-e2e.sh       prints the directory holding the binaries
#
# Built as scripts/build-kubernetes.sh builds (make WHAT=..., static,
# vendored modules, Debian's Go; `go test -c ./test/e2e` does not work
# with Go 1.19: "updates to go.mod needed"), in the same unpacked tree with
# the same Go cache (scripts/kubernetes-tree.sh), so what the cluster's
# parts compiled is not compiled again: 8-10 minutes on 2 cores alone,
# niced, less after build-kubernetes.sh. Cached by the source package's key and this script under
# $NB_TEST_CACHE/e2e/<key>/ (default /var/cache/node-bootstrap-tests).
# Fails loudly, naming what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
whats=(test/e2e/e2e.test vendor/github.com/onsi/ginkgo/ginkgo test/images/agnhost test/images/nonewprivs)
bins=(e2e.test ginkgo agnhost nonewprivs)

die() { echo "build-e2e: $*" >&2; exit 1; }

for tool in apt-get dpkg-source go make rsync; do
    command -v "$tool" >/dev/null ||
        die "$tool is missing (scripts/setup.sh installs dpkg-dev, golang-go, make, rsync)"
done

src=$("$root/scripts/kubernetes-source.sh") || die "no kubernetes source package (above)"
dsc=$(ls "$src"/*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] || die "$src holds no .dsc"
key=$( (basename "$src"; cat "$0") | sha256sum | cut -c1-16)
out="$cache/e2e/$key"

if [ ! -x "$out/e2e.test" ]; then
    echo "build-e2e: building ${bins[*]} from $(basename "$dsc") into $out" >&2
    t0=$SECONDS
    tree=$("$root/scripts/kubernetes-tree.sh") || die "no unpacked kubernetes tree (above)"
    exec 9>"$tree/.lock"
    flock 9
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-e2e-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    if ! (cd "$tree/src" && nice -n 10 env CGO_ENABLED=0 GOFLAGS=-mod=vendor HOME="$tree/home" \
            GOPATH="$tree/gopath" GOCACHE="$tree/gocache" \
            make WHAT="${whats[*]}" >"$work/build.log" 2>&1); then
        tail -30 "$work/build.log" >&2
        die "make WHAT=\"${whats[*]}\" failed (log above)"
    fi
    mkdir -p "$cache/e2e"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    for b in "${bins[@]}"; do
        cp "$tree/src/_output/bin/$b" "$tmp/$b"
    done
    "$tmp/e2e.test" --version > "$tmp/VERSION" 2>&1 || true
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build-e2e: built in $((SECONDS - t0)) s" >&2
fi
for b in "${bins[@]}"; do
    [ -x "$out/$b" ] || die "$out/$b is missing"
done
echo "$out"
