//! node-bootstrap: a bootstrap agent that takes a fresh Container Linux /
//! Flatcar node to a running kubelet.
//!
//! The binary (`src/main.rs`) only calls [`cli::main`]. Pure decisions live
//! apart from the I/O seams (systemd, update_engine, Docker, S3, HTTP,
//! filesystem), so most logic is tested without a node.
//!
//! No function here is over 100 lines of code (docs/DEVELOPING.md): clippy
//! says so, and CI runs clippy with `-D warnings`.

#![warn(clippy::too_many_lines)]

pub(crate) mod async_runtime;
pub(crate) mod boot;
pub mod cli;
pub(crate) mod clock;
pub mod config;
pub(crate) mod digest;
pub(crate) mod dns;
pub(crate) mod docker;
pub mod error;
pub(crate) mod fsutil;
pub(crate) mod http;
pub mod journal;
pub(crate) mod logging;
pub mod message_ids;
pub(crate) mod openpgp;
pub mod osrelease;
pub mod panic_hook;
pub(crate) mod retry;
pub mod settings;

pub mod addon;
pub(crate) mod agent_upgrade;
pub mod assets;
pub mod cluster;
pub mod container_runtime;
pub mod flow;
pub mod follow;
pub(crate) mod helper;
pub mod join;
pub mod kubelet_config;
pub mod kubelet_env;
pub mod kubelet_sysext;
pub mod metadata;
pub mod metrics;
pub mod os_update;
pub(crate) mod reboot;
pub(crate) mod status;
pub mod sysext;
pub(crate) mod systemd;
pub mod textfile;
