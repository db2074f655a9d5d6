#!/usr/bin/env bash
# Builds the workload image the tests' pods run, offline: Debian's
# busybox-static (/bin/busybox and links for the applets a pod uses) as a
# docker-archive tar (scripts/docker-archive.sh: `docker load`,
# `ctr images import`), tagged $NB_TEST_BUSYBOX_NAME:<busybox version>
# (default name registry.nb-test.invalid/busybox: a registry no node can
# reach, so a pod runs it only from the node's own store), entrypoint
# /bin/sh.
#
#   scripts/build-busybox-image.sh    prints the path of the tar
#
# Cached by the busybox binary (size, time, package version) and the
# scripts under $NB_TEST_CACHE/busybox-image/<key>/busybox.tar (default
# /var/cache/node-bootstrap-tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
name=${NB_TEST_BUSYBOX_NAME:-registry.nb-test.invalid/busybox}
busybox=/bin/busybox
applets="sh cat echo env hostname id ls mkdir printenv ps sleep test true wc ping wget httpd"

die() { echo "build-busybox-image: $*" >&2; exit 1; }

[ -x "$busybox" ] || die "$busybox is missing (scripts/setup.sh installs busybox-static)"
# "1:1.35.0-4+deb12u1+b1" -> "1.35.0"
version=$(dpkg-query -W -f='${Version}' busybox-static 2>/dev/null | sed -E 's/^[0-9]+://; s/-.*//')
[ -n "$version" ] || die "dpkg knows no busybox-static package"
key=$( (stat -c '%s %Y' "$busybox"; echo "$name $version $applets"
        cat "$root/scripts/build-busybox-image.sh" "$root/scripts/docker-archive.sh") |
       sha256sum | cut -c1-16)
out="$cache/busybox-image/$key"

if [ ! -s "$out/busybox.tar" ]; then
    work=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-busybox.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/rootfs/bin" "$work/rootfs/tmp" "$work/rootfs/etc"
    cp "$busybox" "$work/rootfs/bin/busybox"
    for a in $applets; do
        ln -s busybox "$work/rootfs/bin/$a"
    done
    mkdir -p "$cache/busybox-image"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    "$root/scripts/docker-archive.sh" "$work/rootfs" "$name:$version" "$tmp/busybox.tar" /bin/sh
    echo "$name:$version" > "$tmp/TAG"
    rm -rf "$out"
    mv "$tmp" "$out"
fi
echo "$out/busybox.tar"
