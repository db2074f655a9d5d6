//! The D-Bus seam to systemd and logind on the system bus.
//!
//! `manager` starts jobs, installs runtime units and asks for reboots;
//! `units` reads the state of the flow's units for `status`.

pub mod manager;
pub mod units;
