//! The `cluster` config section.

use crate::config::{FieldError, FieldResult, seconds_in};
use serde::Deserialize;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCluster {
    /// Use this version and do not ask anyone (e.g. "v1.9.6+coreos.0").
    pub forced_version: Option<String>,
    /// Attempts at `GET /version` before falling back to the seed (default 3).
    pub api_attempts: Option<u32>,
    /// First backoff step between attempts, seconds (default 2).
    pub api_retry_initial_secs: Option<u64>,
    /// Backoff cap, seconds (default 20).
    pub api_retry_max_secs: Option<u64>,
    /// Timeout of one request, seconds (default 10).
    pub api_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    pub forced_version: Option<String>,
    pub api_attempts: u32,
    pub api_retry_initial: Duration,
    pub api_retry_max: Duration,
    pub api_timeout: Duration,
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
        if let Some(v) = &self.forced_version
            && v.trim().is_empty()
        {
            return Err(FieldError::new(
                "cluster.forced_version",
                "must not be empty",
            ));
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
        })
    }
}
