#!/usr/bin/env bash
# Builds the real torcx (and torcx-generator, the same binary) for the tests,
# from the source archive the test machines carry in ../shared/tools/torcx
# (github.com/flatcar/torcx with its vendored dependencies; built offline
# with Debian's golang-go). The product never needs it: only the tests run
# the real torcx against what the agent writes.
#
#   scripts/build-torcx.sh            prints the path of the binary
#   scripts/build-torcx.sh --check    only checks that the sources are there
#
# Cached by the archive's hash under $NB_TEST_CACHE (default
# /var/cache/node-bootstrap-tests), so a second run costs nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src_dir=${NB_TORCX_SRC:-$root/../shared/tools/torcx}
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}
if [ ! -f "$src_dir/flatcar-torcx-src.tar.gz" ] || [ ! -x "$src_dir/build.sh" ]; then
    echo "build-torcx: flatcar-torcx-src.tar.gz and build.sh are not in $src_dir" \
         "(set NB_TORCX_SRC to where they are); the real-torcx tests cannot run without them" >&2
    exit 1
fi
[ "${1:-}" = --check ] && exit 0
key=$(cat "$src_dir/flatcar-torcx-src.tar.gz" "$src_dir/build.sh" | sha256sum | cut -c1-16)
out="$cache/torcx/$key/torcx"
if [ ! -x "$out" ]; then
    mkdir -p "$(dirname "$out")"
    "$src_dir/build.sh" "$out.tmp.$$" >&2
    mv "$out.tmp.$$" "$out"
fi
mkdir -p "$cache/bin"
if [ "$(readlink "$cache/bin/torcx" 2>/dev/null)" != "$out" ]; then
    ln -sfn "$out" "$cache/bin/torcx.tmp.$$" && mv -T "$cache/bin/torcx.tmp.$$" "$cache/bin/torcx"
fi
echo "$cache/bin/torcx"
