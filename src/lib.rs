//! node-bootstrap: a bootstrap agent that takes a fresh Container Linux /
//! Flatcar node to a running kubelet.
//!
//! The binary (`src/main.rs`) only calls [`cli::main`]. Pure decisions live
//! apart from the I/O seams (systemd, update_engine, Docker, S3, HTTP,
//! filesystem), so most logic is tested without a node.

pub mod boot;
pub mod cli;
pub mod clock;
pub mod config;
pub mod docker;
pub mod error;
pub mod fsutil;
pub mod http;
pub mod journal;
pub mod logging;
pub mod openpgp;
pub mod osrelease;
pub mod retry;
pub mod runtime;

pub mod addon;
pub mod assets;
pub mod cluster;
pub mod flow;
pub mod helper;
pub mod kubeletenv;
pub mod metadata;
pub mod reboot;
pub mod status;
pub mod systemd;
pub mod updater;
pub mod upgrade;
