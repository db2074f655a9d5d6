//! The seams between the flow and the node: everything `run` does to the
//! outside world goes through [`Seams`], so the driver is tested with a node
//! in memory and the real implementation ([`super::node::NodeSeams`]) is
//! tested on a simulated node.

use crate::error::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::convert::Infallible;

/// What the os-update step found, as recorded in the state journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsUpdateRecord {
    pub outcome: OsOutcome,
    /// VERSION_ID the node runs now.
    pub current_version: String,
    /// The version it boots next, when a reboot is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_version: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OsOutcome {
    /// update_engine found nothing newer.
    NoUpdate,
    /// An update is installed and waits for a reboot.
    RebootPending,
    /// Updates are disabled in config and none is pending.
    Disabled,
}

#[allow(async_fn_in_trait)]
pub trait Seams {
    /// Whether kubelet.env (the commit point) exists.
    fn kubelet_env_present(&self) -> bool;
    /// The inputs `run` needs are in place (seed kubelet.env, kubeconfig,
    /// pulled assets). Result recorded under `assets`.
    async fn check_assets(&self) -> Result<Value>;
    /// The cluster version: `{"version": "v1.9.6+coreos.0", "source": …}`.
    async fn discover_version(&self) -> Result<Value>;
    /// Ask update_engine for an update and follow it to its end.
    async fn os_update(&self) -> Result<OsUpdateRecord>;
    /// Updates disabled: only learn whether a reboot is already pending.
    async fn os_update_disabled(&self) -> Result<OsUpdateRecord>;
    /// The OS version running now (os-release VERSION_ID).
    async fn os_version(&self) -> Result<String>;
    /// Put the docker the cluster needs in place for the next boot.
    /// Result: `{"docker_running", "docker_next", "reboot_needed", "wipe_docker_datadir", …}`.
    async fn addon_ensure(
        &self,
        cluster_version: &str,
        next_os_version: Option<&str>,
    ) -> Result<Value>;
    /// After a reboot: is the docker the addon step installed now active?
    async fn addon_confirm(&self, intended: &Value) -> Result<bool>;
    /// Install the docker datadir cleanup unit if asked, request the reboot,
    /// and wait to be stopped. Returns only with an error.
    async fn reboot(&self, reason: &str, wipe_docker_datadir: bool) -> Result<Infallible>;
    /// Write kubelet.env for the cluster version (atomically).
    async fn write_kubelet_env(&self, cluster_version: &str) -> Result<Value>;
}
