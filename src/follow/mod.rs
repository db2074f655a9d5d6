//! Day two: the node follows its cluster's Kubernetes version
//! (`node-bootstrap follow`, run by `node-bootstrap-follow.timer`, which
//! the Ignition config enables for the roles whose `follow` switch is on).
//!
//! Each run looks at the cluster and, when the kubelet should move,
//! changes it, one node at a time cluster-wide, and proves it or rolls it
//! back:
//! 1. **the target** ([`target`]): the API server's version once several
//!    consecutive looks agree, for patch releases within the node's
//!    minor; a minor version only when the operator names it in the
//!    follow ConfigMap ([`policy`]); never newer than the API server nor
//!    outside the version-skew policy;
//! 2. **a place in the follow lease** ([`lease`]): a ConfigMap used as a
//!    semaphore (`maxChanging` holders, default 1; a `coordination.k8s.io`
//!    Lease cannot be: NodeRestriction refuses nodes any Lease but their
//!    own heartbeat), taken only
//!    by a Ready node while no more nodes are not Ready than `maxNotReady`
//!    allows, and never while a rolled-back node halts the rollout;
//! 3. **the change** ([`plan`]): for a minor version, cordon and evict the
//!    pods through the Eviction API ([`drain`]); the kubelet's files saved
//!    and the new ones rendered (the KubeletConfiguration of the new
//!    version, kubelet.env's tag, as Tectonic's Node Agent rewrote it);
//!    for the sysext, the new image from the signed mirror through the
//!    search path, checked, linked, merged (`systemd-sysext refresh`), the
//!    previous image kept; kubelet.service restarted over D-Bus, the node
//!    not rebooted;
//! 4. **proved or rolled back**: the Node Ready again reporting the new
//!    `kubeletVersion` within `follow.ready_timeout_secs`; else the
//!    previous kubelet put back and restarted, the lease kept (marked
//!    halted, so the rollout stops at this node), the journal
//!    (`MESSAGE_ID`), `status`, the metrics ([`metrics`]) and an Event on
//!    the Node say why;
//! 5. **power cuts**: every phase is recorded durably before its work
//!    ([`record`]), each is idempotent, and at boot
//!    `node-bootstrap-follow-converge.service` (before kubelet.service, only
//!    while a change is recorded) makes the files one kubelet's whole set.
//!
//! [`driver`] runs it through [`seams`]; [`node`] and [`api`] are the real
//! seams; [`command`] the entry points.

pub mod api;
pub mod command;
pub mod config;
pub mod drain;
pub mod driver;
pub mod enable;
pub mod lease;
pub mod metrics;
pub mod node;
pub mod plan;
pub mod policy;
pub mod record;
pub mod seams;
pub mod target;

pub use driver::Ran;

use crate::container_runtime::choice::RuntimeRecord;
use crate::container_runtime::ensure::ContainerdRecord;

/// What `follow` reads of the agent's config: its own section, the
/// node's paths, the cluster section (the credential, the API timeout),
/// the kubelet's (the backend, the sysext's inputs), what decides the
/// runtime for a version, and where the metrics go. Built by `config/`.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub cluster: &'a crate::cluster::config::ClusterSettings,
    pub follow: &'a config::FollowSettings,
    pub kubelet: crate::kubelet_sysext::Inputs<'a>,
    pub runtime_requested: crate::container_runtime::choice::Requested,
    pub allow_newer_kubernetes: bool,
    pub textfile_dir: Option<&'a std::path::Path>,
}

/// The kubelet's files for a version on this node, rendered (the
/// KubeletConfiguration when the version takes one, kubelet.env), as `run`
/// renders them: given by the caller, which knows the whole config
/// (`crate::flow::node::render_kubelet_files`).
pub type RenderKubelet<'a> = &'a dyn Fn(
    &str,
    &RuntimeRecord,
    Option<&ContainerdRecord>,
) -> crate::error::Result<(Option<String>, String)>;
