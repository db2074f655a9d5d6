//! The container runtime of the demo's worker, and what a pod needs of it
//! on a simulated node: the one place to change when the worker's runtime
//! changes.
//!
//! Kubernetes removed dockershim in 1.24: a cluster of 1.24 or newer runs
//! its pods on containerd (through CRI), an older one on docker, as the
//! agent's `runtime.name = "auto"` chooses. The cluster here is Kubernetes
//! 1.20 (Debian 12's source package). Today's Flatcar flow tells the
//! agents `runtime.name = "containerd"` (the OS's containerd, configured
//! and started by the agent, reached through CRI), as a cluster of 1.24 or
//! newer gets by default. The Tectonic flow's worker runs docker, installed
//! by the agent's docker addon as the runtime mappings say (the real torcx
//! applies it); `cluster-demo --tectonic --containerd` tells it containerd
//! instead. What the pods need here
//! beyond the product: the rig's test parts of each runtime
//! ([`crate::cluster`], [`crate::pods`]: the runc shim, a TEST PART this
//! machine kind needs, as no CAP_SYS_RESOURCE lets the real runc give a pod
//! sandbox the oom_score_adj the kubelet asks for; VMs run the real runc;
//! the pods' network, [`crate::podnet`], the network add-on's part),
//! and the pause image (the sandbox) and the busybox image (the workload),
//! loaded offline into the worker's runtime once it answers (no registry is
//! reachable here).

use crate::cluster::{Auth, NodeSpec};
use crate::pods;
use crate::simnode::SimNode;
use anyhow::{Result, bail};
use std::time::Duration;

/// The docker CLI the addon's torcx image links on the node.
const TORCX_DOCKER: &str = "/run/torcx/bin/docker";

/// The worker's runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRuntime {
    /// docker through the kubelet's dockershim (Kubernetes before 1.24).
    Docker,
    /// containerd through CRI (Kubernetes 1.24 and newer).
    Containerd,
}

impl WorkerRuntime {
    /// The runtime a worker of Kubernetes `version` (`v1.20.2`) runs:
    /// docker before 1.24, containerd from 1.24 (dockershim's removal).
    pub fn for_cluster(version: &str) -> Result<WorkerRuntime> {
        let v = version.trim_start_matches('v');
        let mut parts = v.split(['.', '+', '-']);
        let (Some(Ok(major)), Some(Ok(minor))) = (
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<u32>),
        ) else {
            bail!("the cluster's version {version:?} is not vMAJOR.MINOR[.PATCH]");
        };
        Ok(if (major, minor) >= (1, 24) {
            WorkerRuntime::Containerd
        } else {
            WorkerRuntime::Docker
        })
    }

    /// The scheme of the Node's `containerRuntimeVersion` and of its pods'
    /// container IDs (`docker://…`).
    pub fn scheme(self) -> &'static str {
        match self {
            WorkerRuntime::Docker => "docker",
            WorkerRuntime::Containerd => "containerd",
        }
    }

    /// What the screen says of the runtime's test parts.
    pub fn test_parts(self) -> &'static str {
        match self {
            WorkerRuntime::Docker => {
                "the runc shim as docker's default runtime: this machine kind lacks \
                 CAP_SYS_RESOURCE, so the shim clamps a pod's oomScoreAdj to 0 (VMs run the \
                 real runc); docker on vfs (a node's root is an overlay); the pods' network \
                 added by the rig as a cluster's network add-on would (a bridge per node)"
            }
            WorkerRuntime::Containerd => {
                "the runc shim first on containerd's PATH: this machine kind lacks \
                 CAP_SYS_RESOURCE, so the shim clamps a pod's oomScoreAdj to 0 (VMs run the \
                 real runc); /var/lib/containerd on a tmpfs (a node's root is an overlay); \
                 the pods' network added by the rig as a cluster's network add-on would (a \
                 bridge per node)"
            }
        }
    }

    /// The worker `name` of the rig, on this runtime: the agent's
    /// `runtime.name` `auto` for docker (the runtime mappings' docker, put
    /// in place by the addon), `containerd` for the OS's containerd.
    pub fn worker(self, name: &str) -> NodeSpec {
        match self {
            WorkerRuntime::Docker => NodeSpec::worker(name, Auth::Cert),
            WorkerRuntime::Containerd => NodeSpec::containerd_worker(name),
        }
    }

    /// Once the worker runs its runtime: waits until it answers, loads the
    /// pause and busybox images into it; returns the runtime's version.
    pub fn load_images(self, n: &SimNode, timeout: Duration) -> Result<String> {
        let version = match self {
            WorkerRuntime::Docker => pods::wait_docker(n, TORCX_DOCKER, timeout)?,
            WorkerRuntime::Containerd => {
                pods::wait_containerd(n, pods::CONTAINERD_SOCKET, timeout)?
            }
        };
        for image in [pods::pause_image()?, pods::busybox_image()?] {
            match self {
                WorkerRuntime::Docker => pods::docker_load(n, TORCX_DOCKER, &image)?,
                WorkerRuntime::Containerd => pods::ctr_import(n, &image, None)?,
            }
        }
        Ok(version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockershim_clusters_run_docker_and_newer_ones_containerd() {
        let r = |v| WorkerRuntime::for_cluster(v).unwrap();
        assert_eq!(r("v1.20.2"), WorkerRuntime::Docker);
        assert_eq!(r("v1.23.17"), WorkerRuntime::Docker);
        assert_eq!(r("v1.9.6+coreos.0"), WorkerRuntime::Docker);
        assert_eq!(r("v1.24.0"), WorkerRuntime::Containerd);
        assert_eq!(r("1.30"), WorkerRuntime::Containerd);
        assert_eq!(r("v2.0.0"), WorkerRuntime::Containerd);
        assert!(WorkerRuntime::for_cluster("latest").is_err());
    }
}
