//! The container runtime of the demo's worker, and what a pod needs of it
//! on a simulated node: the one place to change when the worker's runtime
//! changes.
//!
//! Kubernetes removed dockershim in 1.24: a cluster of 1.24 or newer runs
//! its pods on containerd (through CRI), an older one on docker. The
//! cluster here is Kubernetes 1.20 (Debian 12's source package), so the
//! worker runs docker, installed by the agent's docker addon as the runtime
//! mappings say (the real torcx applies it). What a docker worker's pods
//! need here (testkit::pods):
//! - the runc shim as docker's default runtime, a TEST PART this machine
//!   kind needs (no CAP_SYS_RESOURCE: the real runc cannot give a pod
//!   sandbox the oom_score_adj the kubelet asks for; VMs run the real runc);
//! - the pause image (the sandbox) and the busybox image (the workload),
//!   loaded offline into the node's docker once it answers (no registry is
//!   reachable here).

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
                 real runc); docker on vfs (a node's root is an overlay)"
            }
            WorkerRuntime::Containerd => "the runc shim first on containerd's PATH",
        }
    }

    /// The worker `name` of the rig, on this runtime (before
    /// [`NodeSpec::with_os_update`] and the rest).
    pub fn worker(self, name: &str) -> Result<NodeSpec> {
        match self {
            WorkerRuntime::Docker => Ok(NodeSpec::worker(name, Auth::Cert)),
            WorkerRuntime::Containerd => bail!(containerd_not_yet()),
        }
    }

    /// Before the worker's first boot: the test parts its runtime needs
    /// to start pods here.
    pub fn prepare(self, n: &SimNode) -> Result<()> {
        match self {
            WorkerRuntime::Docker => {
                pods::install_runc_shim(n)?;
                // After the rig's 20-test-node: the same options, and the shim.
                n.drop_in(
                    "docker.service",
                    "30-demo-pods",
                    &format!(
                        "# TEST PART (simulated node): runc behind the shim that clamps\n\
                         # process.oomScoreAdj to 0 (no CAP_SYS_RESOURCE here; VMs run the real runc).\n\
                         [Service]\nEnvironment=\"DOCKER_OPTS={} {}\"\n",
                        crate::cluster::DOCKER_TEST_OPTS,
                        pods::DOCKER_RUNC_SHIM_OPTS
                    ),
                )
            }
            WorkerRuntime::Containerd => bail!(containerd_not_yet()),
        }
    }

    /// Once the worker runs its runtime: waits until it answers, loads the
    /// pause and busybox images into it; returns the runtime's version.
    pub fn load_images(self, n: &SimNode, timeout: Duration) -> Result<String> {
        match self {
            WorkerRuntime::Docker => {
                let version = pods::wait_docker(n, TORCX_DOCKER, timeout)?;
                pods::docker_load(n, TORCX_DOCKER, &pods::pause_image()?)?;
                pods::docker_load(n, TORCX_DOCKER, &pods::busybox_image()?)?;
                Ok(version)
            }
            WorkerRuntime::Containerd => bail!(containerd_not_yet()),
        }
    }
}

/// Until the agent installs containerd (issue 26), a demo cluster of 1.24
/// or newer has no worker runtime.
fn containerd_not_yet() -> String {
    "a cluster of Kubernetes 1.24 or newer runs its pods on containerd, which the demo's \
     worker does not have yet (the agent's containerd runtime, issue 26)"
        .into()
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
