#!/bin/bash
# dracut module nb-vm (the VM tier's image, scripts/vm-image.sh).
#
# Debian's Ignition 2.14 is built with SELinux relabeling on: its files
# stage runs `setfiles` and fails ("exec: setfiles: executable file not
# found") without one. The image has no SELinux (/etc/selinux/config says
# disabled), so the initramfs gets a setfiles that does nothing.
check() { return 255; }
depends() { return 0; }
install() {
    inst_simple "$moddir/setfiles" /usr/sbin/setfiles
    chmod 755 "$initdir/usr/sbin/setfiles"
}
