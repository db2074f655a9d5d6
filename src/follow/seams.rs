//! Everything `follow` does to the outside world goes through two seams:
//! [`ClusterSeam`], the API server as this node's identity sees it (its
//! version, the operator's ConfigMap, the lease, this node's own Node,
//! this node's pods and their evictions, Events), and [`NodeSeam`], this
//! node (its clock, its kubelet's version and files, the sysext mirror,
//! systemd). The driver is tested with both in memory; the real cluster
//! seam ([`super::api::Cluster`]) also runs under the fleet benchmark with
//! a simulated node seam, and both real seams on simulated nodes of a
//! real cluster.
//!
//! What the cluster seam asks of the API server is what a node may ask
//! from Kubernetes 1.32 on: its own Node only (no Node list), its own pods
//! only (a list by `spec.nodeName`), the two ConfigMaps and the API
//! server's Endpoints through the follow RBAC.

use super::drain::Plan;
use super::lease::{EntryPatch, LeaseView};
use super::plan::{Change, NodeLook};
use super::policy::Policy;
use super::record::Set;
use crate::cluster::version::KubeVersion;
use crate::error::Result;
use std::time::Duration;

/// How an Event on the Node reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Normal,
    Warning,
}

/// What each API server said, when they can be asked one by one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersions {
    /// `address:port` -> its `/version`, or why it did not answer.
    pub answers: Vec<(String, std::result::Result<KubeVersion, String>)>,
}

#[allow(async_fn_in_trait)]
pub trait ClusterSeam {
    /// The name of this node's Node.
    fn node_name(&self) -> &str;
    /// One `GET /version` (through the kubeconfig's server: a load
    /// balancer in front of an HA control plane answers from one of them).
    async fn apiserver_version(&self) -> Result<KubeVersion>;
    /// Every API server's `/version`, each asked at its own address from
    /// the `default/kubernetes` Endpoints; `None` when those cannot be read
    /// (the follow RBAC does not grant it).
    async fn apiserver_versions(&self) -> Result<Option<ServerVersions>>;
    /// The operator's ConfigMap, read ([`super::policy`]; a key that does
    /// not read is an error naming it).
    async fn policy(&self) -> Result<Policy>;
    /// The lease as it is now.
    async fn lease(&self) -> Result<LeaseView>;
    /// Writes `view` over the lease read as `view.resource_version` (or
    /// creates it); `Ok(false)` when someone wrote it in between (409).
    /// A take: the compare-and-swap of the whole object.
    async fn write_lease(&self, view: &LeaseView) -> Result<bool>;
    /// Writes `node`'s own key alone ([`EntryPatch`]); `Ok(false)` when
    /// the key no longer holds what the patch expects.
    async fn patch_entry(&self, node: &str, patch: &EntryPatch) -> Result<bool>;
    /// This node's own Node (`Err(why)` when it cannot be read).
    async fn own_node(&self) -> std::result::Result<NodeLook, String>;
    /// Cordons (`true`) or uncordons this node.
    async fn set_unschedulable(&self, on: bool) -> Result<()>;
    /// What a drain of this node would do now ([`super::drain::plan`]):
    /// `Ok(Err(why))` when a pod stops it.
    async fn drain_plan(
        &self,
        delete_emptydir_data: bool,
    ) -> Result<std::result::Result<Plan, String>>;
    /// Asks the Eviction API (`policy/v1beta1` or `policy/v1` by the API
    /// server's minor) to evict `pod`: `Ok(None)` accepted (or gone),
    /// `Ok(Some(why))` not now (a PodDisruptionBudget), `Err` refused.
    async fn evict(
        &self,
        pod: &super::drain::PodRef,
        apiserver_minor: u64,
    ) -> Result<Option<String>>;
    /// An Event on this node's Node; never fails the caller.
    async fn event(&self, kind: EventKind, reason: &str, message: &str);
}

#[allow(async_fn_in_trait)]
pub trait NodeSeam {
    /// Unix seconds, this node's clock.
    fn now(&self) -> u64;
    /// Waits `d` (between looks).
    async fn sleep(&self, d: Duration);
    /// The version this node's kubelet runs (kubelet.env's tag).
    fn current_version(&self) -> Result<KubeVersion>;
    /// The kubelets the mirror offers (the sysext); `None` on a
    /// kubelet-wrapper node.
    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>>;
    /// Before a place is taken: whether the kubelet of `to` can run here
    /// (the container runtime it wants is this node's, its files render;
    /// for the sysext its image fetched, verified and checked beside the
    /// others, not linked). Nothing the kubelet uses changes.
    async fn check(&self, to: &str) -> Result<()>;
    /// Saves the kubelet's files as they are (`previous/`), renders the
    /// new version's (`next/`), both stamped with this change; the
    /// sysext's image linked now goes in `change.previous_image`.
    async fn prepare(&self, change: &mut Change) -> Result<()>;
    /// Puts set `set`'s kubelet in place: for the sysext its image
    /// (exactly the version the change names) linked and merged, then the
    /// KubeletConfiguration and kubelet.env. Idempotent.
    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()>;
    /// Restarts kubelet.service (D-Bus), waiting for the job.
    async fn restart_kubelet(&self) -> Result<()>;
}
