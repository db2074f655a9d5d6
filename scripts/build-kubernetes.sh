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
# minutes on a quiet 2-core machine. It builds in the unpacked tree and Go
# cache it shares with scripts/build-e2e.sh (scripts/kubernetes-tree.sh),
# holding the tree's lock, so the suite's build later compiles only what
# these parts did not.
#
# Then, in the same tree with the same Go build cache (so it is mostly
# linking), kube-apiserver and kubelet again, stamped as the next patch
# release (v1.20.3 for Debian's v1.20.2) and as the next minor (v1.21.0)
# (hack/lib/version.sh takes the version from the file
# KUBE_GIT_VERSION_FILE names), each into the subdirectory
# stand-in-<version>/ of the output: the stand-ins for those releases, to
# which the day-two tests (`node-bootstrap follow`) move a cluster. The
# same code as the first build; what differs is what the parts report,
# which is what the day-two path reads of a release. (The agent configures
# a 1.21 kubelet as a 1.20 one: its tables change at 1.23, 1.24 and 1.27.)
# Fails loudly, naming what is missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
# The stand-ins of the next patch and the next minor release: a control
# plane that reports it, a kubelet that reports it.
next_bins=(kube-apiserver kubelet)

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
    # The shared tree and Go cache (scripts/kubernetes-tree.sh), held for
    # the whole build; $work keeps this build's logs and version file.
    tree=$("$root/scripts/kubernetes-tree.sh") || die "no unpacked kubernetes tree (above)"
    exec 9>"$tree/.lock"
    flock 9
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-kubernetes-build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    whats=$(printf 'cmd/%s ' "${bins[@]}")
    # As debian/rules builds it: static (no cgo), vendored modules.
    if ! (cd "$tree/src" && env CGO_ENABLED=0 GOFLAGS=-mod=vendor HOME="$tree/home" \
            GOPATH="$tree/gopath" GOCACHE="$tree/gocache" \
            make WHAT="$whats" >"$work/build.log" 2>&1); then
        tail -30 "$work/build.log" >&2
        die "make WHAT=\"$whats\" failed (log above)"
    fi
    mkdir -p "$cache/kubernetes"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    for b in "${bins[@]}"; do
        cp "$tree/src/_output/bin/$b" "$tmp/$b"
    done
    "$tmp/kubelet" --version > "$tmp/VERSION"
    # The stand-ins: same tree, same Go cache, another version stamped
    # (nothing compiles again; it links).
    version=$(awk '{print $2}' "$tmp/VERSION")
    [[ $version =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] ||
        die "kubelet --version said \"$(cat "$tmp/VERSION")\", not Kubernetes vX.Y.Z"
    major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]} patch=${BASH_REMATCH[3]}
    commit=$(sed -nE "s/^ *KUBE_GIT_COMMIT='([0-9a-f]+)'.*/\1/p" "$tree/src/hack/lib/version.sh" | head -1)
    next_whats=$(printf 'cmd/%s ' "${next_bins[@]}")
    for next in "v$major.$minor.$((patch + 1))" "v$major.$((minor + 1)).0"; do
        [[ $next =~ ^v[0-9]+\.([0-9]+)\. ]]
        printf "%s\n" "KUBE_GIT_COMMIT='${commit:-0000000000000000000000000000000000000000}'" \
            "KUBE_GIT_TREE_STATE='archive'" "KUBE_GIT_VERSION='$next'" \
            "KUBE_GIT_MAJOR='$major'" "KUBE_GIT_MINOR='${BASH_REMATCH[1]}'" > "$work/next-version"
        t1=$SECONDS
        if ! (cd "$tree/src" && env CGO_ENABLED=0 GOFLAGS=-mod=vendor HOME="$tree/home" \
                GOPATH="$tree/gopath" GOCACHE="$tree/gocache" \
                KUBE_GIT_VERSION_FILE="$work/next-version" \
                make WHAT="$next_whats" >"$work/build-next.log" 2>&1); then
            tail -30 "$work/build-next.log" >&2
            die "make WHAT=\"$next_whats\" stamped $next failed (log above)"
        fi
        mkdir -p "$tmp/stand-in-$next"
        for b in "${next_bins[@]}"; do
            cp "$tree/src/_output/bin/$b" "$tmp/stand-in-$next/$b"
        done
        "$tmp/stand-in-$next/kubelet" --version > "$tmp/stand-in-$next/VERSION"
        grep -qx "Kubernetes $next" "$tmp/stand-in-$next/VERSION" ||
            die "the stand-in's kubelet says \"$(cat "$tmp/stand-in-$next/VERSION")\", not Kubernetes $next"
        echo "build-kubernetes: the stand-in of $next built (linked) in $((SECONDS - t1)) s" >&2
    done
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build-kubernetes: built $(cat "$out/VERSION") in $((SECONDS - t0)) s" >&2
fi
for b in "${bins[@]}"; do
    [ -x "$out/$b" ] || die "$out/$b is missing"
done
for b in "${next_bins[@]}"; do
    [ "$(compgen -G "$out/stand-in-v*/$b" | wc -l)" = 2 ] || die "a stand-in's $b is missing under $out"
done
echo "$out"
