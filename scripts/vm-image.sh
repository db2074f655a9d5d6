#!/usr/bin/env bash
# Builds the VM tier's OS image (tests/vm/main.rs, testkit/src/vm) from
# Debian packages and prints the directory that holds it:
#
#   disk.raw      the root file system (ext4, label "root", the whole disk),
#                 with /boot/ignition.firstboot set: its first boot runs Ignition
#   vmlinuz       Debian 12's kernel (booted with qemu -kernel)
#   initrd.img    a dracut initramfs with the real Ignition (Debian's
#                 `ignition` package's dracut module)
#   ssh_host_ed25519_key.pub   the image's SSH host key (terraform pins it)
#   packages.txt  what went in (dpkg -l)
#
# The root is an mmdebstrap'd Debian 12 (linux-image-amd64, systemd, dbus,
# dracut, ignition, openssh-server, sudo, ca-certificates, qemu-guest-agent,
# the libraries the real docker of the cluster tests links: libdevmapper,
# libseccomp; containerd with runc and the CNI plugins, as Flatcar ships
# containerd for pods through CRI, its service off until the agent starts it),
# the files in
# testkit/vm/rootfs, and the real torcx (scripts/build-torcx.sh) as the
# boot-time torcx-generator, as Flatcar ships it. See
# testkit/vm/image-hooks.sh for everything done to it.
#
# Cached under $NB_TEST_CACHE/vm/<hash of the inputs> (default
# /var/cache/node-bootstrap-tests): this script, testkit/vm/ and the torcx
# binary. A second run with the same inputs prints the directory at once;
# images no run asked for in a week are removed by the next build. Needs
# root, mmdebstrap and the Debian mirror (NB_VM_MIRROR,
# NB_VM_SECURITY_MIRROR); 40 s to 3 minutes on 2 cores, mostly mmdebstrap
# downloading packages (185 s on 2026-11-26 with a cargo build beside it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
files=$root/testkit/vm
cache=${NB_TEST_CACHE:-/var/cache/node-bootstrap-tests}/vm
mirror=${NB_VM_MIRROR:-http://deb.debian.org/debian}
security=${NB_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
suite=bookworm
size=3G
packages=linux-image-amd64,systemd,systemd-sysv,udev,dbus,kmod,dracut,dracut-network,curl,ignition,qemu-guest-agent,openssh-server,sudo,ca-certificates,e2fsprogs,procps,iproute2,libdevmapper1.02.1,libseccomp2,containerd,containernetworking-plugins

die() { echo "vm-image: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap --mode=root, mkfs)"
for tool in mmdebstrap mkfs.ext4 sha256sum flock; do
    command -v "$tool" >/dev/null || die "$tool is missing (scripts/setup.sh installs it)"
done
torcx=$("$root/scripts/build-torcx.sh")

key=$(
    {
        echo "$suite $size $packages $mirror $security"
        # Contents only: the same inputs reached by another path (setup's
        # relative one, the tests' absolute one) are the same image.
        sha256sum <"$0"
        sha256sum <"$torcx"
        (cd "$files" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    } | sha256sum | cut -c1-16
)
out=$cache/$key
if [ -f "$out/complete" ]; then
    touch "$out/last-used"
    echo "$out"
    exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ -f "$out/complete" ]; then # built while we waited
    touch "$out/last-used"
    echo "$out"
    exit 0
fi

t0=$(date +%s)
work=$cache/.build-$key
rm -rf "$work" "$out"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
log=$cache/build-$key.log
echo "vm-image: building $out (mmdebstrap $suite; log: $log)" >&2
export NB_VM_FILES=$files NB_VM_TORCX=$torcx
if ! mmdebstrap --variant=minbase --mode=root --verbose \
    --aptopt='Apt::Install-Recommends "false"' \
    --include="$packages" \
    --essential-hook="\"$files/image-hooks.sh\" essential \"\$1\"" \
    --customize-hook="\"$files/image-hooks.sh\" customize \"\$1\"" \
    "$suite" "$work/root" \
    "deb $mirror $suite main" \
    "deb $mirror $suite-updates main" \
    "deb $security $suite-security main" >"$log" 2>&1; then
    tail -40 "$log" >&2
    die "mmdebstrap failed (above: the end of its log)"
fi
t1=$(date +%s)
# The first boot must be a first boot for systemd (see image-hooks.sh).
[ ! -e "$work/root/etc/machine-id" ] || die "the image has an /etc/machine-id: its first boot would not apply Ignition's presets"

kver=$(basename "$(ls -d "$work"/root/lib/modules/* | sort -V | tail -1)")
cp "$work/root/boot/vmlinuz-$kver" "$work/vmlinuz"
cp "$work/root/boot/initrd.img-$kver" "$work/initrd.img"
cp "$work/root/etc/ssh/ssh_host_ed25519_key.pub" "$work/ssh_host_ed25519_key.pub"
chroot "$work/root" dpkg -l >"$work/packages.txt"
truncate -s "$size" "$work/disk.raw"
mkfs.ext4 -q -L root -E root_owner=0:0 -d "$work/root" "$work/disk.raw"
rm -rf "$work/root"
t2=$(date +%s)
printf 'mmdebstrap %ss, mkfs %ss, total %ss; kernel %s\n' \
    $((t1 - t0)) $((t2 - t1)) $((t2 - t0)) "$kver" >"$work/build-time.txt"
mv "$log" "$work/build.log"
touch "$work/complete" "$work/last-used"
mv -T "$work" "$out"
trap - EXIT
# Images no checkout asked for in a week go (another checkout on this
# machine may be using an older one right now).
for dir in "$cache"/*/; do
    dir=${dir%/}
    [ "$dir" != "$out" ] && [ -f "$dir/last-used" ] || continue
    if [ -n "$(find "$dir/last-used" -mtime +7)" ]; then
        rm -rf "$dir"
    fi
done
echo "vm-image: built in $((t2 - t0))s ($(cat "$out/build-time.txt"))" >&2
echo "$out"
