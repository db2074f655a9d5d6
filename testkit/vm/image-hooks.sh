#!/usr/bin/env bash
# mmdebstrap hooks of scripts/vm-image.sh (the VM tier's OS image). They run
# on the host, with the image's root directory as $2:
#
#   image-hooks.sh essential ROOT   after the Essential packages, before the rest
#   image-hooks.sh customize ROOT   after every package (/proc, /sys, /dev mounted)
#
# Environment: NB_VM_FILES (testkit/vm), NB_VM_TORCX (the real torcx binary).
set -euo pipefail
stage=$1 root=$2
files=${NB_VM_FILES:?}
in_root() { chroot "$root" "$@"; }

case "$stage" in
essential)
    # The dracut config first, so nothing below builds Debian's default
    # (all drivers) initramfs; and no initramfs at package install at all:
    # the customize stage builds the one initramfs once every package
    # (ignition among them) is in place. dracut's kernel hook (also what
    # its dpkg trigger calls) is diverted to a no-op until then.
    install -D -m 0644 "$files/rootfs/etc/dracut.conf.d/10-nb-vm.conf" \
        "$root/etc/dracut.conf.d/10-nb-vm.conf"
    in_root dpkg-divert --quiet --local --rename \
        --divert /etc/kernel/postinst.d/dracut.nb-vm-disabled --add /etc/kernel/postinst.d/dracut
    mkdir -p "$root/etc/kernel/postinst.d"
    printf '#!/bin/sh\n# vm-image: the initramfs is built once, by the customize hook\nexit 0\n' \
        >"$root/etc/kernel/postinst.d/dracut"
    chmod 0755 "$root/etc/kernel/postinst.d/dracut"
    ;;

customize)
    # The image's own files (testkit/vm/rootfs), verbatim.
    cp -a --no-preserve=ownership "$files/rootfs/." "$root/"
    chmod 0440 "$root/etc/sudoers.d/core"

    # No /etc/machine-id, as Flatcar and Fedora CoreOS images ship: on the
    # first boot systemd finds none, so it is a first boot (machine-id(5)),
    # and PID 1 then runs `preset-all`, which is what enables the units
    # Ignition listed in /etc/systemd/system-preset/20-ignition.preset.
    # (mmdebstrap would otherwise leave an empty machine-id, which systemd
    # 252 treats as "not a first boot": the presets are never applied and
    # every unit Ignition enabled stays disabled. vm-image.sh checks.)
    rm -f "$root/etc/machine-id" "$root/var/lib/dbus/machine-id"
    # The flag Flatcar's / Fedora CoreOS's boot loader reads: Ignition runs
    # while /boot/ignition.firstboot exists.
    mkdir -p "$root/boot"
    : >"$root/boot/ignition.firstboot"
    mkdir -p "$root/var/log/journal"
    printf 'LANG=C.UTF-8\n' >"$root/etc/locale.conf"
    ln -sfn /usr/share/zoneinfo/Etc/UTC "$root/etc/localtime"

    # containerd as Flatcar ships it: the OS's binaries and unit, no
    # /etc/containerd/config.toml (Debian's package installs one; on Flatcar
    # the file under /etc is the administrator's, or the agent's).
    rm -f "$root/etc/containerd/config.toml"

    # Flatcar's core user (Ignition only adds its SSH keys).
    in_root useradd --create-home --shell /bin/bash --user-group core
    in_root passwd --quiet --lock root >/dev/null

    # torcx as Flatcar ships it: one binary, the generator a link to it.
    install -D -m 0755 "${NB_VM_TORCX:?}" "$root/usr/bin/torcx"
    mkdir -p "$root/usr/lib/systemd/system-generators"
    ln -sfn ../../../bin/torcx "$root/usr/lib/systemd/system-generators/torcx-generator"
    mkdir -p "$root/usr/lib/systemd/system/basic.target.wants"
    ln -sfn ../torcx.target "$root/usr/lib/systemd/system/basic.target.wants/torcx.target"

    # Units: networkd brings up the NIC (and network-online.target); the
    # first-boot flag is cleared after Ignition. Nothing else starts that
    # a node does not need (each costs seconds under emulation).
    in_root systemctl enable --quiet systemd-networkd.service ignition-firstboot-complete.service
    # Presets (testkit/vm/rootfs/usr/lib/systemd/system-preset) keep the
    # first boot's preset-all from enabling more; what must never run is
    # masked (not what a preset enables: preset-all would fail on it).
    in_root systemctl disable --quiet getty@tty1.service
    in_root systemctl mask --quiet \
        systemd-firstboot.service apt-daily.timer apt-daily-upgrade.timer \
        e2scrub_all.timer e2scrub_reap.service fstrim.timer dpkg-db-backup.timer \
        serial-getty@ttyS0.service console-getty.service

    # Kernel modules a virtio VM does not need: most of the image's size,
    # and under emulation every module udev loads (kvm, watchdogs, crypto
    # drivers for the emulated CPU's features...) costs boot time.
    kver=$(basename "$(ls -d "$root"/lib/modules/* | sort -V | tail -1)")
    moddir=$root/lib/modules/$kver/kernel
    rm -rf "$moddir/sound" "$moddir/drivers/gpu" "$moddir/drivers/media" \
        "$moddir/drivers/net/wireless" "$moddir/drivers/net/ethernet" \
        "$moddir/drivers/infiniband" "$moddir/drivers/staging" \
        "$moddir/drivers/bluetooth" "$moddir/net/bluetooth" "$moddir/net/wireless" \
        "$moddir/net/mac80211" "$moddir/drivers/isdn" "$moddir/drivers/scsi" \
        "$moddir/drivers/usb" "$moddir/drivers/hid" "$moddir/drivers/input" \
        "$moddir/drivers/iio" "$moddir/drivers/md" "$moddir/drivers/hwmon" \
        "$moddir/fs/btrfs" "$moddir/fs/xfs" "$moddir/fs/ocfs2" "$moddir/fs/nfs" \
        "$moddir/fs/gfs2" "$moddir/fs/ceph" "$moddir/fs/smb" \
        "$moddir/drivers/ata" "$moddir/drivers/watchdog" "$moddir/drivers/cpufreq" \
        "$moddir/drivers/edac" "$moddir/drivers/i2c" "$moddir/drivers/char/tpm" \
        "$moddir/drivers/platform" "$moddir/drivers/thermal" \
        "$moddir/arch/x86/kvm" "$moddir/arch/x86/crypto"
    in_root depmod "$kver"

    # dracut's kernel hook back in place, then the one initramfs, with
    # Ignition in it (checked).
    rm -f "$root/etc/kernel/postinst.d/dracut"
    in_root dpkg-divert --quiet --local --rename --remove /etc/kernel/postinst.d/dracut
    in_root dracut --quiet --force --kver "$kver" "/boot/initrd.img-$kver"
    in_root lsinitrd "/boot/initrd.img-$kver" >"$root/boot/initrd.contents"
    for f in usr/bin/ignition usr/sbin/setfiles usr/lib/systemd/system/ignition-files.service \
        usr/lib/systemd/systemd-networkd; do
        grep -q " $f\$" "$root/boot/initrd.contents" ||
            { echo "vm-image: $f is missing from the initramfs" >&2; exit 1; }
    done

    # Smaller image: no package caches, docs or man pages.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
        "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/info
    ;;

*)
    echo "image-hooks.sh: unknown stage $stage" >&2
    exit 2
    ;;
esac
