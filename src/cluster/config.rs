//! The `cluster` config section.

use crate::settings::{FieldError, FieldResult, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

impl ClusterSettings {
    /// The retry policy of `GET /version`.
    pub fn api_retry_policy(&self) -> crate::retry::RetryPolicy {
        crate::retry::RetryPolicy::new(
            self.api_retry_initial,
            self.api_retry_max,
            self.api_attempts,
        )
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    /// Use this version and do not ask anyone (e.g. "v1.9.6+coreos.0").
    pub forced_version: Option<String>,
    /// Attempts at `GET /version` before giving up (default 3).
    pub api_attempts: Option<u32>,
    /// First backoff step between attempts, seconds (default 2).
    pub api_retry_initial_secs: Option<u64>,
    /// Backoff cap, seconds (default 20).
    pub api_retry_max_secs: Option<u64>,
    /// Timeout of one request, seconds (default 10).
    pub api_timeout_secs: Option<u64>,
    /// When the API server stays unreachable after `api_attempts`, use the
    /// seed kubelet.env's `KUBELET_IMAGE_TAG` (with a warning) instead of
    /// failing with a retryable error (default false: a joining node does not
    /// guess its cluster's version).
    pub fallback_to_seed: Option<bool>,
    /// With `forced_version` on a node that joins a cluster, ask the API
    /// server once for its version and refuse a forced version that breaks
    /// the skew policy; an unreachable server is then only a warning
    /// (default true).
    pub check_forced_skew: Option<bool>,
    /// What the node authenticates to the API server with (default
    /// `kubeconfig`): see [`Credential`].
    pub credential: Option<Credential>,
    /// How long `run` watches the join after kubelet.env: asks the API
    /// server about this node every few seconds until it is Ready in the
    /// cluster, for at most this long (seconds, 0..=7200; default 0: not at
    /// all, so an agent run by hand or by a test ends with its run; the
    /// Ignition module sets 1800). The unit is started once kubelet.env is
    /// in place (`READY=1`); the watch only reports (journal, metrics, the
    /// unit's status line) and never changes `run`'s exit code.
    pub join_watch_secs: Option<u64>,
}

/// The node's credential at first boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Credential {
    /// `paths.kubeconfig`: a long-lived client certificate or token the
    /// operator made for the node; the kubelet uses it as it is.
    #[default]
    Kubeconfig,
    /// `paths.bootstrap_kubeconfig`: a bootstrap token, with which the
    /// kubelet earns a client certificate of its own (TLS bootstrapping)
    /// and rotates it.
    BootstrapToken,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    pub forced_version: Option<String>,
    pub api_attempts: u32,
    pub api_retry_initial: Duration,
    pub api_retry_max: Duration,
    pub api_timeout: Duration,
    pub fallback_to_seed: bool,
    pub check_forced_skew: bool,
    pub credential: Credential,
    pub join_watch: Duration,
}

impl ClusterSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawCluster {
        RawCluster {
            forced_version: self.forced_version.clone(),
            api_attempts: Some(self.api_attempts),
            api_retry_initial_secs: Some(self.api_retry_initial.as_secs()),
            api_retry_max_secs: Some(self.api_retry_max.as_secs()),
            api_timeout_secs: Some(self.api_timeout.as_secs()),
            fallback_to_seed: Some(self.fallback_to_seed),
            check_forced_skew: Some(self.check_forced_skew),
            credential: Some(self.credential),
            join_watch_secs: Some(self.join_watch.as_secs()),
        }
    }
}

impl RawCluster {
    pub fn validate(self) -> FieldResult<ClusterSettings> {
        let api_attempts = in_range(
            "cluster.api_attempts",
            self.api_attempts.unwrap_or(3),
            1,
            100,
            "",
        )?;
        if let Some(v) = &self.forced_version {
            if v.trim().is_empty() {
                return Err(FieldError::new(
                    "cluster.forced_version",
                    "must not be empty",
                ));
            }
            super::version::KubeVersion::parse(v)
                .map_err(|e| FieldError::new("cluster.forced_version", e))?;
        }
        Ok(ClusterSettings {
            forced_version: self.forced_version,
            api_attempts,
            api_retry_initial: seconds_in(
                "cluster.api_retry_initial_secs",
                self.api_retry_initial_secs.unwrap_or(2),
                0,
                600,
            )?,
            api_retry_max: seconds_in(
                "cluster.api_retry_max_secs",
                self.api_retry_max_secs.unwrap_or(20),
                0,
                3600,
            )?,
            api_timeout: seconds_in(
                "cluster.api_timeout_secs",
                self.api_timeout_secs.unwrap_or(10),
                1,
                600,
            )?,
            fallback_to_seed: self.fallback_to_seed.unwrap_or(false),
            check_forced_skew: self.check_forced_skew.unwrap_or(true),
            credential: self.credential.unwrap_or_default(),
            join_watch: seconds_in(
                "cluster.join_watch_secs",
                self.join_watch_secs.unwrap_or(0),
                0,
                7200,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cluster.join_watch_secs` the Ignition module sets: 30 minutes,
    /// beyond the alert's bound (monitoring/node-bootstrap.rules.yml,
    /// `NodeBootstrapNotReadyInCluster`: 15 minutes after kubelet.env,
    /// held 5), so a node that joins late still clears it.
    const RECOMMENDED_JOIN_WATCH_SECS: u64 = 1800;

    #[test]
    fn the_ignition_module_sets_the_recommended_join_watch() {
        let module = include_str!("../../terraform/modules/ignition/main.tf");
        assert!(
            module.contains(&format!(
                "{{ join_watch_secs = {RECOMMENDED_JOIN_WATCH_SECS} }}"
            )),
            "terraform/modules/ignition/main.tf no longer sets cluster.join_watch_secs = {RECOMMENDED_JOIN_WATCH_SECS}"
        );
        let c = RawCluster::default().validate().unwrap();
        assert!(c.join_watch.is_zero(), "off unless configured");
        let e = RawCluster {
            join_watch_secs: Some(7201),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(e.field, "cluster.join_watch_secs");
    }
}
