#!/usr/bin/env bash
# Builds the real Kubernetes parts the cluster tests run (kube-apiserver,
# kube-controller-manager, kube-scheduler,
# kubelet, kubectl of one release) from Debian 12's own `kubernetes` source
# package: `apt-get source kubernetes` through a deb-src entry for bookworm
# main (added here if the machine has none), Go modules vendored in the tree,
# Debian's golang-go. The product never needs these: only the tests run a
# real control plane and a real kubelet against what the agent writes.
#
#   scripts/build-kubernetes.sh       prints the directory holding the binaries
#
# Cached by the source package (the name, size and SHA-256 of its .dsc and
# tarballs, as apt's own index lists them: `apt-get source --print-uris`,
# which needs no network) and this script, under
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

# A deb-src entry for Debian's main archive, so that `apt-get source` works.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ "$(id -u)" = 0 ] || die "no deb-src entry in /etc/apt and not root to add one"
    cat > /etc/apt/sources.list.d/node-bootstrap-deb-src.sources <<'EOF'
# Added by node-bootstrap's scripts/build-kubernetes.sh (test setup): the
# kubernetes source package the cluster tests build kube-apiserver and kubelet from.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -qq || die "apt-get update failed after adding the deb-src entry"
fi

# What apt would fetch, with its hashes: the cache key.
uris=$(apt-get source --print-uris -qq kubernetes 2>&1) ||
    die "apt-get source --print-uris kubernetes failed (is there a deb-src entry for bookworm main?): $uris"
dsc_name=$(awk '$2 ~ /\.dsc$/ {print $2; exit}' <<<"$uris")
[ -n "$dsc_name" ] || die "apt lists no .dsc for the kubernetes source package: $uris"
key=$( (awk '/^'"'"'/ {print $2, $3, $4}' <<<"$uris"; cat "$0") | sha256sum | cut -c1-16)
out="$cache/kubernetes/$key"

if [ ! -x "$out/kubelet" ]; then
    echo "build-kubernetes: building ${bins[*]} from $dsc_name into $out" >&2
    t0=$SECONDS
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-kubernetes-src.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    # apt checks every file against the hashes the key was made of.
    (cd "$work" && apt-get source --download-only -qq kubernetes >/dev/null 2>"$work/apt.log") ||
        die "apt-get source kubernetes failed: $(tail -3 "$work/apt.log")"
    dsc="$work/$dsc_name"
    [ -f "$dsc" ] || die "apt-get source kubernetes fetched no $dsc_name"
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
