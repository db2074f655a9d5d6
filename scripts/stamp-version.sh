#!/usr/bin/env bash
# Publishes a built node-bootstrap binary under another version: rewrites
# the version stamp it reports (`node-bootstrap version`) without
# rebuilding, as a release pipeline does (src/agent_upgrade/identity.rs).
#
#   scripts/stamp-version.sh IN OUT VERSION
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 IN OUT VERSION" >&2; exit 2; }
python3 - "$@" <<'PY'
import sys
src, dst, version = sys.argv[1:]
marker = b"NODE_BOOTSTRAP_VERSION_STAMP="
length = 96
data = bytearray(open(src, "rb").read())
at = data.find(marker)
if at < 0 or data.find(marker, at + 1) >= 0:
    sys.exit(f"{src}: expected exactly one version stamp")
v = version.encode()
if len(marker) + len(v) >= length:
    sys.exit(f"version {version!r} is too long for the stamp")
data[at:at + length] = (marker + v).ljust(length, b"\0")
open(dst, "wb").write(data)
PY
chmod 0755 "$2"
