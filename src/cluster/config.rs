//! The `cluster` config section.

use crate::config::{FieldError, FieldResult, seconds_in};
use serde::Deserialize;
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

#[derive(Debug, Default, Deserialize)]
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
}

impl RawCluster {
    pub fn validate(self) -> FieldResult<ClusterSettings> {
        let api_attempts = self.api_attempts.unwrap_or(3);
        if !(1..=100).contains(&api_attempts) {
            return Err(FieldError::new(
                "cluster.api_attempts",
                format!("must be between 1 and 100, got {api_attempts}"),
            ));
        }
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
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use std::path::Path;

    fn load(text: &str) -> crate::error::Result<Config> {
        Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
    }

    #[test]
    fn defaults() {
        let c = load("{}").unwrap().cluster;
        assert_eq!(c.forced_version, None);
        assert_eq!(c.api_attempts, 3);
        assert_eq!(c.api_timeout.as_secs(), 10);
        assert!(!c.fallback_to_seed);
        assert!(c.check_forced_skew);
        let p = c.api_retry_policy();
        assert_eq!(
            (p.max_attempts, p.initial.as_secs(), p.max_delay.as_secs()),
            (3, 2, 20)
        );
    }

    #[test]
    fn forced_version_must_be_a_kubernetes_version() {
        let e = load(r#"{"cluster":{"forced_version":"latest"}}"#).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::CONFIG);
        assert!(
            e.to_string()
                .contains("field `cluster.forced_version`: \"latest\" is not a Kubernetes version"),
            "{e}"
        );
        let c = load(r#"{"cluster":{"forced_version":"v1.9.6+coreos.0","fallback_to_seed":true}}"#)
            .unwrap()
            .cluster;
        assert_eq!(c.forced_version.as_deref(), Some("v1.9.6+coreos.0"));
        assert!(c.fallback_to_seed);
    }

    #[test]
    fn attempts_are_bounded() {
        let e = load(r#"{"cluster":{"api_attempts":0}}"#).unwrap_err();
        assert!(
            e.to_string().contains("field `cluster.api_attempts`"),
            "{e}"
        );
    }
}
