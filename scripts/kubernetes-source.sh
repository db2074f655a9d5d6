#!/usr/bin/env bash
# Fetches Debian 12's `kubernetes` source package (the .dsc and its
# tarballs, checked by apt against the hashes of its own index) once and
# keeps it, for the test setup scripts that build from it
# (scripts/build-kubernetes.sh, scripts/build-pause.sh).
#
#   scripts/kubernetes-source.sh      prints the directory holding the files
#
# Kept under $NB_TEST_CACHE/kubernetes-source/<key>/ (default
# /var/cache/node-bootstrap-tests), where <key> is made of the source
# package's file names, sizes and SHA-256 as apt lists them
# (`apt-get source --print-uris`, no network): a new Debian revision is a
# new key, the same one is never downloaded twice (about 34 MB).
# Adds a deb-src entry for bookworm main when the machine has none. Fails loudly, naming what is missing.
set -euo pipefail
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}

die() { echo "kubernetes-source: $*" >&2; exit 1; }

command -v apt-get >/dev/null || die "apt-get is missing (a Debian machine is needed)"

if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    [ "$(id -u)" = 0 ] || die "no deb-src entry in /etc/apt and not root to add one"
    cat > /etc/apt/sources.list.d/node-bootstrap-deb-src.sources <<'EOF'
# Added by node-bootstrap's scripts/kubernetes-source.sh (test setup): the
# kubernetes source package the cluster tests build kube-apiserver and kubelet from.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    apt-get update -qq || die "apt-get update failed after adding the deb-src entry"
fi

uris=$(apt-get source --print-uris -qq kubernetes 2>&1) ||
    die "apt-get source --print-uris kubernetes failed (is there a deb-src entry for bookworm main?): $uris"
files=$(awk '/^'"'"'/ {print $2}' <<<"$uris")
[ -n "$files" ] || die "apt lists no files for the kubernetes source package: $uris"
key=$(awk '/^'"'"'/ {print $2, $3, $4}' <<<"$uris" | sha256sum | cut -c1-16)
out="$cache/kubernetes-source/$key"

complete() {
    local f
    for f in $files; do
        [ -s "$out/$f" ] || return 1
    done
}

if ! complete; then
    echo "kubernetes-source: fetching $(awk '$2 ~ /\.dsc$/ {print $2}' <<<"$uris") into $out" >&2
    mkdir -p "$cache/kubernetes-source"
    tmp="$out.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    trap 'rm -rf "$tmp"' EXIT
    # apt checks every file against the hashes the key was made of.
    (cd "$tmp" && apt-get source --download-only -qq kubernetes >/dev/null 2>"$tmp/apt.log") ||
        die "apt-get source kubernetes failed: $(tail -3 "$tmp/apt.log")"
    rm -f "$tmp/apt.log"
    rm -rf "$out"
    mv "$tmp" "$out"
    trap - EXIT
    complete || die "apt-get source kubernetes left $out without all of: $files"
fi
echo "$out"
