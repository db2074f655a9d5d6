#!/usr/bin/env bash
# The one unpacked tree of Debian 12's `kubernetes` source package that the
# test setup's Go builds share (scripts/build-kubernetes.sh: the cluster's
# parts and the stand-ins of the next releases; scripts/build-e2e.sh: the
# conformance suite), with one Go build cache: e2e.test compiles much of
# what kubelet and kube-apiserver already compiled, and Go's cache hits
# only when the tree's path is the same (the builds pass
# -trimpath=<tree>), so the tree stays where it was unpacked.
#
#   scripts/kubernetes-tree.sh      prints the directory: src/ (the tree),
#                                   gocache/, gopath/, home/, and .lock,
#                                   which a build holds (flock) while it runs
#
# Kept under $NB_TEST_CACHE/kubernetes-tree/<key>/ (default
# /var/cache/node-bootstrap-tests), <key> being the source package's
# (scripts/kubernetes-source.sh); a new Debian revision is a new tree.
# About 1.5 GB unpacked, and the Go cache a few GB once both builds ran.
# Fails loudly, naming what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}

die() { echo "kubernetes-tree: $*" >&2; exit 1; }

command -v dpkg-source >/dev/null || die "dpkg-source is missing (scripts/setup.sh installs dpkg-dev)"
src=$("$root/scripts/kubernetes-source.sh") || die "no kubernetes source package (above)"
dsc=$(ls "$src"/*.dsc 2>/dev/null | head -1)
[ -n "$dsc" ] || die "$src holds no .dsc"
tree="$cache/kubernetes-tree/$(basename "$src")"
mkdir -p "$tree"
exec 9>"$tree/.lock"
flock 9
if [ ! -e "$tree/.unpacked" ]; then
    rm -rf "$tree/src"
    dpkg-source -x "$dsc" "$tree/src" >/dev/null 2>"$tree/dpkg-source.log" ||
        die "dpkg-source -x $(basename "$dsc") failed: $(tail -3 "$tree/dpkg-source.log")"
    mkdir -p "$tree/gocache" "$tree/gopath" "$tree/home"
    touch "$tree/.unpacked"
fi
echo "$tree"
