//! systemd manager operations: jobs, runtime units, reboot.
