//! Fleet metrics, recorded: what a process counts while it runs (the
//! command and when it started, retries and bytes by remote service
//! ([`Remote`]), reboots asked, kubelet.env written: [`record`]) and the
//! `metrics` config section ([`config`]). Cheap and I/O-free, so every
//! subsystem may record (retries in [`crate::retry::retry`], bytes where
//! downloads read their bodies); the flow records through its `Progress`
//! seam. Publishing it, with the state journal, as node_exporter's textfile
//! is [`crate::textfile`]'s, above the subsystems.

pub mod config;
pub mod record;

pub use record::{Command, Remote};
