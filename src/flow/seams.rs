//! The seams between the flow and the node: everything `run` does to the
//! outside world goes through [`Seams`], so the driver is tested with a node
//! in memory and the real implementation ([`super::node::NodeSeams`]) is
//! tested on a simulated node.

use crate::addon::AddonOutcome;
use crate::agent_upgrade::UpgradeOutcome;
use crate::cluster::ClusterVersion;
use crate::container_runtime::choice::RuntimeRecord;
use crate::container_runtime::ensure::ContainerdRecord;
use crate::error::Result;
use crate::journal::{AssetsRecord, KubeletEnvRecord, Step};
use crate::kubelet_config::table::Minor;
use crate::kubelet_sysext::KubeletSysextRecord;
use crate::os_update::OsUpdateRecord;
use std::convert::Infallible;

/// What `run` tells the service manager (and the metrics) as it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// A step starts (shown by `systemctl status`).
    Step(Step),
    /// kubelet.env is in place and durable: kubelet may start. The run's
    /// last record is written after this, beside kubelet's start.
    KubeletEnvInPlace,
    /// The reboot's record is durable and the reboot is asked for next:
    /// the last moment this process surely has (the shutdown stops it).
    RebootRequested,
}

#[allow(async_fn_in_trait)]
pub trait Seams {
    /// Tells the service manager (and the metrics) how the run stands.
    /// Never fails the run.
    fn progress(&self, progress: Progress);
    /// Whether kubelet.env (the commit point) exists.
    fn kubelet_env_present(&self) -> bool;
    /// Upgrade the agent as `agent.upgrade` allows (it is on).
    async fn agent_upgrade(&self) -> Result<UpgradeOutcome>;
    /// The inputs `run` needs are in place (seed kubelet.env, kubeconfig,
    /// pulled assets).
    async fn check_assets(&self) -> Result<AssetsRecord>;
    /// The cluster version and where it came from.
    async fn discover_version(&self) -> Result<ClusterVersion>;
    /// The container runtime for the cluster version, and whether the
    /// agent knows how to configure that version's kubelet (pure: from the
    /// config; a refusal here comes before anything changes).
    fn decide_runtime(&self, cluster_version: &str) -> Result<RuntimeRecord>;
    /// Ask update_engine for an update and follow it to its end.
    async fn os_update(&self) -> Result<OsUpdateRecord>;
    /// Updates disabled: only learn whether a reboot is already pending.
    async fn os_update_disabled(&self) -> Result<OsUpdateRecord>;
    /// The OS version running now (os-release VERSION_ID).
    async fn os_version(&self) -> Result<String>;
    /// Put the docker the cluster needs in place for the next boot.
    async fn addon_ensure(
        &self,
        cluster_version: &str,
        next_os_version: Option<&str>,
    ) -> Result<AddonOutcome>;
    /// After a reboot: is the docker the addon step installed now active?
    async fn addon_confirm(&self, intended: &AddonOutcome) -> Result<bool>;
    /// Record durably that docker's data directory is owed a wipe (the
    /// marker the shutdown's cleanup unit, or a later boot's `run`,
    /// honours). The driver calls it before it records a reboot that wipes,
    /// so no record of such a reboot exists without it.
    async fn owe_docker_wipe(&self) -> Result<()>;
    /// Install the docker datadir cleanup unit if asked, request the reboot,
    /// and wait to be stopped. Returns only with an error.
    async fn reboot(&self, reason: &str, wipe_docker_datadir: bool) -> Result<Infallible>;
    /// Put the kubelet sysext image for the cluster version in place and
    /// merge it (`kubelet.backend = "sysext"`).
    async fn kubelet_sysext(&self, cluster_version: &str) -> Result<KubeletSysextRecord>;
    /// containerd (the OS's, or a package where the OS's does not fit the
    /// cluster at `cluster_version`) configured, started and answering on
    /// a CRI API the kubelet of `kubelet_rules` speaks.
    async fn containerd(
        &self,
        cluster_version: &str,
        kubelet_rules: Minor,
    ) -> Result<ContainerdRecord>;
    /// Write the kubelet's configuration for the cluster version and the
    /// runtime (`containerd`'s record when it is containerd), then
    /// kubelet.env (each atomically; kubelet.env is the commit point).
    async fn write_kubelet_env(
        &self,
        cluster_version: &str,
        runtime: &RuntimeRecord,
        containerd: Option<&ContainerdRecord>,
    ) -> Result<KubeletEnvRecord>;
}
