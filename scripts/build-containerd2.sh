#!/usr/bin/env bash
# Builds today's Flatcar's container runtime parts for the tests, offline,
# from the source archives the test machines carry beside the checkout
# (../shared/tools): containerd 2.1.4 (containerd, ctr,
# containerd-shim-runc-v2; the containerd Flatcar's stable channel ships)
# and cri-tools 1.32 (crictl, and critest, the CRI validation suite), both
# with their Go modules vendored. They need Go 1.23, which Debian 12 has
# only in bookworm-backports (`golang-1.23-go`, under /usr/lib/go-1.23):
# scripts/setup.sh installs it. The product never needs them: only the
# tests run containerd 2.1 against what the agent writes, and crictl as a
# 1.32 kubelet's CRI client.
#
#   scripts/build-containerd2.sh            builds what is not cached; prints the bin dir
#   scripts/build-containerd2.sh --check    only checks that the sources are there
#   scripts/build-containerd2.sh --print    prints the bin dir if everything is cached (exit 1 if not)
#
# Cached under $NB_TEST_CACHE (default /var/cache/node-bootstrap-tests) as
# containerd2/<key>/ and cri-tools/<key>/, each keyed by its source
# archive's SHA-256 and this script; $NB_TEST_CACHE/containerd2/bin links
# to every program of both. About 2 CPU-minutes for containerd and 1.5 for
# cri-tools the first time; nothing after.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=${NB_SHARED_TOOLS:-$root/../shared/tools}
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
go_root=${NB_GO123:-/usr/lib/go-1.23}
containerd_src=$tools/containerd/containerd-2.1.4-src.tar.gz
critools_src=$tools/cri-tools/cri-tools-1.32.0-src.tar.gz

die() { echo "build-containerd2: $*" >&2; exit 1; }

for f in "$containerd_src" "$critools_src"; do
    [ -f "$f" ] || die "$f is missing (the containerd 2.1.4 and cri-tools 1.32 sources; set NB_SHARED_TOOLS to the folder that has containerd/ and cri-tools/)"
done
[ "${1:-}" = --check ] && exit 0

key_of() { cat "$1" "$root/scripts/build-containerd2.sh" | sha256sum | cut -c1-16; }
ctr_out=$cache/containerd2/$(key_of "$containerd_src")
cri_out=$cache/cri-tools/$(key_of "$critools_src")
bin=$cache/containerd2/bin
programs="$ctr_out/containerd $ctr_out/ctr $ctr_out/containerd-shim-runc-v2 $cri_out/crictl $cri_out/critest"

link_all() {
    mkdir -p "$bin"
    for p in $programs; do
        ln -sfn "$p" "$bin/.$(basename "$p").tmp.$$" && mv -T "$bin/.$(basename "$p").tmp.$$" "$bin/$(basename "$p")"
    done
}

cached() { for p in $programs; do [ -x "$p" ] || return 1; done; }
if [ "${1:-}" = --print ]; then
    cached || exit 1
    link_all
    echo "$bin"
    exit 0
fi

if ! cached; then
    [ -x "$go_root/bin/go" ] || die "Go 1.23 is missing at $go_root (scripts/setup.sh installs golang-1.23-go from bookworm-backports)"
    command -v gcc >/dev/null || die "gcc is missing (containerd links with cgo)"
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-containerd2.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    export PATH=$go_root/bin:$PATH GOTOOLCHAIN=local GOFLAGS=-mod=vendor \
        GOCACHE=$work/gocache GOPATH=$work/gopath
    if [ ! -x "$ctr_out/containerd" ] || [ ! -x "$ctr_out/ctr" ] || [ ! -x "$ctr_out/containerd-shim-runc-v2" ]; then
        t0=$SECONDS
        mkdir -p "$work/containerd"
        tar -xzf "$containerd_src" -C "$work/containerd" --strip-components=1
        (cd "$work/containerd" && CGO_ENABLED=1 go build -trimpath -tags no_btrfs \
            -ldflags "-X github.com/containerd/containerd/v2/version.Version=v2.1.4" \
            -o "$work/out-containerd/" ./cmd/containerd ./cmd/ctr ./cmd/containerd-shim-runc-v2)
        mkdir -p "$(dirname "$ctr_out")"
        rm -rf "$ctr_out.tmp.$$" && mv "$work/out-containerd" "$ctr_out.tmp.$$"
        rm -rf "$ctr_out" && mv "$ctr_out.tmp.$$" "$ctr_out"
        echo "build-containerd2: containerd 2.1.4 built in $((SECONDS - t0)) s into $ctr_out" >&2
    fi
    if [ ! -x "$cri_out/crictl" ] || [ ! -x "$cri_out/critest" ]; then
        t0=$SECONDS
        mkdir -p "$work/cri-tools" "$work/out-cri"
        tar -xzf "$critools_src" -C "$work/cri-tools" --strip-components=1
        ld="-X sigs.k8s.io/cri-tools/pkg/version.Version=1.32.0"
        (cd "$work/cri-tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$work/out-cri/crictl" ./cmd/crictl &&
            CGO_ENABLED=0 go test -c -trimpath -ldflags "$ld" -o "$work/out-cri/critest" ./cmd/critest)
        mkdir -p "$(dirname "$cri_out")"
        rm -rf "$cri_out.tmp.$$" && mv "$work/out-cri" "$cri_out.tmp.$$"
        rm -rf "$cri_out" && mv "$cri_out.tmp.$$" "$cri_out"
        echo "build-containerd2: cri-tools 1.32 built in $((SECONDS - t0)) s into $cri_out" >&2
    fi
fi
link_all
echo "$bin"
