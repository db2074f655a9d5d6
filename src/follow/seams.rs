//! Everything `follow` does to the outside world goes through [`Seams`]:
//! the API server (its version, the operator's ConfigMap, the lease, the
//! Nodes, evictions, Events) and this node (its kubelet's version and
//! files, the sysext mirror, systemd). The driver is tested with a node
//! and a cluster in memory; the real seams ([`super::node::NodeSeams`]) on
//! simulated nodes in a real cluster.

use super::lease::{LeaseView, Readiness};
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

#[allow(async_fn_in_trait)]
pub trait Seams {
    /// Unix seconds, this node's clock.
    fn now(&self) -> u64;
    /// Waits `d` (between looks).
    async fn sleep(&self, d: Duration);
    /// The name of this node's Node.
    fn node_name(&self) -> &str;

    /// One `GET /version`.
    async fn apiserver_version(&self) -> Result<KubeVersion>;
    /// The operator's ConfigMap, read ([`super::policy`]; a key that does
    /// not read is an error naming it).
    async fn policy(&self) -> Result<Policy>;
    /// The lease as it is now.
    async fn lease(&self) -> Result<LeaseView>;
    /// Writes `view` over the lease read as `view.resource_version` (or
    /// creates it); `Ok(false)` when someone wrote it in between (409).
    async fn write_lease(&self, view: &LeaseView) -> Result<bool>;
    /// How the cluster's Nodes stand.
    async fn readiness(&self) -> Result<Readiness>;
    /// This node's Node (`Err(why)` when it cannot be read).
    async fn node(&self) -> std::result::Result<NodeLook, String>;
    /// Cordons (`true`) or uncordons this node.
    async fn set_unschedulable(&self, on: bool) -> Result<()>;
    /// Evicts this node's pods ([`super::drain`]), bounded by
    /// `follow.drain_timeout_secs`; an error says why it could not.
    async fn drain(&self, apiserver_minor: u64) -> Result<()>;
    /// An Event on this node's Node; never fails the caller.
    async fn event(&self, kind: EventKind, reason: &str, message: &str);

    /// The version this node's kubelet runs (kubelet.env's tag).
    fn current_version(&self) -> Result<KubeVersion>;
    /// The kubelets the mirror offers (the sysext); `None` on a
    /// kubelet-wrapper node.
    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>>;
    /// Saves the kubelet's files as they are (`previous/`), renders the
    /// new version's (`next/`); the sysext's image linked now goes in
    /// `change.previous_image`.
    async fn prepare(&self, change: &mut Change) -> Result<()>;
    /// Puts set `set`'s kubelet in place: for the sysext its image (the
    /// new one fetched and verified) linked and merged, then the
    /// KubeletConfiguration and kubelet.env. Idempotent.
    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()>;
    /// Restarts kubelet.service (D-Bus), waiting for the job.
    async fn restart_kubelet(&self) -> Result<()>;
}
