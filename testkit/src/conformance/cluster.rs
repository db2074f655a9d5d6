//! The cluster the suite runs against: provisioned and bootstrapped by the
//! agent as `tests/node/cluster_join.rs` does it ([`crate::cluster`]): a
//! bootkube master and one worker of each kind the agent makes, each with
//! the bootstrap token only, the pods' network of the rig's add-on
//! ([`crate::podnet`]); and the suite's registries.

use super::WorkerKind;
use super::registry::Registries;
use crate::cluster::{ClusterRig, NodeSpec};
use crate::simnode::SimNode;
use anyhow::Result;
use std::time::{Duration, Instant};

/// The master's name.
pub const MASTER: &str = "master-1";
/// The workers, by kind: docker through the addon and torcx, the OS's
/// containerd, the kubelet as a sysext (on containerd).
pub const WORKERS: [(WorkerKind, &str); 3] = [
    (WorkerKind::Docker, "worker-docker"),
    (WorkerKind::Containerd, "worker-containerd"),
    (WorkerKind::Sysext, "worker-sysext"),
];

/// How long a node may take to boot through its reboot to Ready.
pub const BOOT: Duration = Duration::from_secs(300);

/// The booted cluster and the running registries.
pub struct ConformanceCluster {
    pub rig: ClusterRig,
    /// The master, then the workers of [`WORKERS`].
    pub nodes: Vec<SimNode>,
    pub registries: Registries,
    /// How long the cluster took to be Ready.
    pub boot_time: Duration,
}

impl ConformanceCluster {
    /// Provisions and boots the cluster, waits until every node is Ready,
    /// starts the registries.
    pub fn up() -> Result<ConformanceCluster> {
        let t0 = Instant::now();
        let mut specs = vec![NodeSpec::master(MASTER)];
        for (kind, name) in WORKERS {
            specs.push(match kind {
                WorkerKind::Docker => NodeSpec::worker(name, crate::cluster::Auth::BootstrapToken),
                WorkerKind::Containerd => NodeSpec::containerd_worker(name),
                WorkerKind::Sysext => NodeSpec::sysext_worker(name),
                WorkerKind::Vm => unreachable!("no VM in the simulated cluster"),
            });
        }
        let registries = Registries::start(&super::images()?)?;
        let rig = ClusterRig::new(&specs)?;
        let mut nodes = rig.nodes()?;
        rig.boot_all(&mut nodes, BOOT)?;
        Ok(ConformanceCluster {
            rig,
            nodes,
            registries,
            boot_time: t0.elapsed(),
        })
    }

    /// The Node names of every worker but `kind`'s.
    pub fn others(&self, kind: WorkerKind) -> Vec<&'static str> {
        WORKERS
            .iter()
            .filter(|(k, _)| *k != kind)
            .map(|(_, n)| *n)
            .collect()
    }

    /// The node of worker `kind`.
    pub fn node(&self, kind: WorkerKind) -> Option<&SimNode> {
        let name = WORKERS.iter().find(|(k, _)| *k == kind)?.1;
        self.nodes.iter().find(|n| n.name() == name)
    }
}
