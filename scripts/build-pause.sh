#!/usr/bin/env bash
# Builds the pod sandbox ("pause") image the tests load into the docker and
# containerd of their nodes, offline: `pause` compiled from Debian 12's
# kubernetes source package (build/pause/linux/pause.c, with the flags of
# build/pause/Makefile, static) and packed as a docker-archive tar
# (scripts/docker-archive.sh: `docker load`, `ctr images import`) whose one
# layer holds /pause, entrypoint /pause, as the upstream image is built
# (build/pause/Dockerfile, FROM scratch).
#
# It is tagged as the default sandbox image of that release's kubelet
# (cmd/kubelet/app/options/container_runtime.go: k8s.gcr.io/pause:3.2 for
# 1.20), read from the same source, so a node whose runtime looks for the
# kubelet's default finds it.
#
#   scripts/build-pause.sh            prints the path of the tar
#
# Cached by the source package (scripts/kubernetes-source.sh, which keeps
# the source it fetched) and this script under
# $NB_TEST_CACHE/pause/<key>/pause.tar (default
# /var/cache/node-bootstrap-tests). A build takes a few seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}

die() { echo "build-pause: $*" >&2; exit 1; }

for tool in gcc tar python3 sha256sum; do
    command -v "$tool" >/dev/null ||
        die "$tool is missing (scripts/setup.sh installs gcc, libc6-dev, python3)"
done

src=$("$root/scripts/kubernetes-source.sh") || die "no kubernetes source package (above)"
key=$( (cd "$src" && sha256sum -- *; cat "$root/scripts/build-pause.sh" "$root/scripts/docker-archive.sh") | sha256sum | cut -c1-16)
out="$cache/pause/$key"

if [ ! -s "$out/pause.tar" ]; then
    t0=$SECONDS
    orig=$(ls "$src"/*.orig.tar.* 2>/dev/null | head -1)
    [ -n "$orig" ] || die "no .orig tarball in $src"
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-pause.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    pause_c=build/pause/linux/pause.c
    runtime_go=cmd/kubelet/app/options/container_runtime.go
    makefile=build/pause/Makefile
    tar -xf "$orig" -C "$work" --strip-components=1 --wildcards \
        "*/$pause_c" "*/$runtime_go" "*/$makefile" ||
        die "$orig holds no $pause_c, $runtime_go or $makefile"
    # Debian's patches are applied by dpkg-source; none may touch these
    # files, or this build (which takes them from the upstream tarball)
    # would not be of the package's source.
    debian=$(ls "$src"/*.debian.tar.* 2>/dev/null | head -1)
    [ -n "$debian" ] || die "no .debian tarball in $src"
    mkdir "$work/debian"
    tar -xf "$debian" -C "$work/debian"
    if grep -rlsE "^\+\+\+ .*($pause_c|$runtime_go)" "$work/debian" >/dev/null; then
        die "a Debian patch changes $pause_c or $runtime_go; build from the patched tree instead"
    fi
    # The kubelet's default sandbox image: "k8s.gcr.io/pause" and "3.2".
    name=$(sed -nE 's/^\s*defaultPodSandboxImageName\s*=\s*"([^"]+)".*/\1/p' "$work/$runtime_go")
    version=$(sed -nE 's/^\s*defaultPodSandboxImageVersion\s*=\s*"([^"]+)".*/\1/p' "$work/$runtime_go")
    [ -n "$name" ] && [ -n "$version" ] ||
        die "no defaultPodSandboxImageName/Version in $runtime_go"
    # The Makefile's flags (CFLAGS = -Os -Wall -Werror -static -DVERSION=v$(TAG)-$(REV)).
    tag=$(sed -nE 's/^TAG\s*=\s*(\S+).*/\1/p' "$work/$makefile")
    [ -n "$tag" ] || die "no TAG in $makefile"
    mkdir -p "$work/rootfs"
    gcc -Os -Wall -Werror -static "-DVERSION=v$tag-debian" \
        -o "$work/rootfs/pause" "$work/$pause_c" 2>"$work/gcc.log" ||
        die "gcc -static $pause_c failed (is libc6-dev installed?): $(cat "$work/gcc.log")"
    "$work/rootfs/pause" -v | grep -q "^pause.c v$tag-debian" ||
        die "the built pause does not say its version: $("$work/rootfs/pause" -v 2>&1)"
    mkdir -p "$cache/pause"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    "$root/scripts/docker-archive.sh" "$work/rootfs" "$name:$version" "$tmp/pause.tar" /pause
    echo "$name:$version" > "$tmp/TAG"
    rm -rf "$out"
    mv "$tmp" "$out"
    echo "build-pause: built $name:$version (pause.c v$tag) in $((SECONDS - t0)) s" >&2
fi
echo "$out/pause.tar"
