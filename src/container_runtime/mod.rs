//! The container runtime a node's kubelet talks to: which one the cluster
//! version calls for (docker through dockershim up to Kubernetes 1.23,
//! containerd through CRI from 1.24), which containerd fits a cluster
//! (`version`) and where it comes from (the OS's, or a package:
//! `package`), containerd's configuration as the agent writes it, and what
//! a CRI runtime says of itself over its socket.

pub mod choice;
pub mod config;
pub mod containerd;
pub mod cri;
pub mod ensure;
pub mod package;
pub mod version;

use crate::settings::Paths;
use config::RuntimeSettings;
use std::path::Path;

/// The flow step that puts containerd in place (`ensure`).
pub const STEP: &str = "containerd";

/// What the containerd step reads of the agent's config.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a Paths,
    pub runtime: &'a RuntimeSettings,
    /// Where unit drop-ins go (`addon.systemd_config_dir`).
    pub systemd_config_dir: &'a Path,
    /// Where merged extensions show their release files
    /// (`addon.sysext_release_dir`).
    pub sysext_release_dir: &'a Path,
    /// The artifact search path containerd packages come from.
    pub metadata: crate::metadata::Inputs<'a>,
}
