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
