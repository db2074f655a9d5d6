#!/usr/bin/env bash
# Checks, in a second and before anything is installed or built, that this
# machine can run simulated nodes (a real systemd as PID 1 in namespaces of
# its own, on an overlay of the host's root: testkit/src/simnode.rs):
# root, systemd installed, and the namespaces and overlay mount a node
# boots in. On the first thing missing it prints one line naming it and
# exits 2.
#
#   scripts/check-machine.sh [NAME]   NAME starts the line (default: check-machine)
set -euo pipefail
me=${1:-check-machine}

missing() { echo "$me: $*" >&2; exit 2; }

[ "$(id -u)" = 0 ] ||
    missing "needs root: simulated nodes are namespaces with overlay mounts (run it with sudo)"
[ -x /lib/systemd/systemd ] ||
    missing "systemd is not installed (/lib/systemd/systemd): each simulated node runs it as PID 1"
command -v unshare >/dev/null ||
    missing "unshare is missing (Debian's util-linux)"
# A node's namespaces (as SimNode::boot makes them) and its root: an overlay
# whose lower dir is the host's /, mounted in the new mount namespace only.
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/nb-check-machine.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir "$dir/upper" "$dir/work" "$dir/root"
err=$(unshare --cgroup --uts --pid --fork --mount sh -c '
    mount --make-rprivate / &&
    mount -t overlay overlay -o "lowerdir=/,upperdir=$1/upper,workdir=$1/work" "$1/root" &&
    test -x "$1/root/lib/systemd/systemd"' sh "$dir" 2>&1) ||
    missing "this machine cannot give a simulated node its namespaces and root" \
        "(unshare --cgroup --uts --pid --fork --mount, then an overlay of /: $(head -n1 <<<"${err:-failed}"));" \
        "run it as root on a VM or a privileged container"
