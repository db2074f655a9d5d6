//! The systemd and logind D-Bus seam: unit state, runtime units, reboot.
