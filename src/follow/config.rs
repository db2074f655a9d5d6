//! The `follow` config section: whether this node follows its cluster's
//! Kubernetes version, and where the cluster keeps what coordinates it.
//!
//! ```json
//! "follow": {
//!   "enabled": false,
//!   "namespace": "kube-system",
//!   "lease": "node-bootstrap-follow-lease",
//!   "config_map": "node-bootstrap-follow",
//!   "stable_checks": 3,
//!   "ready_timeout_secs": 300,
//!   "drain_timeout_secs": 300,
//!   "poll_secs": 5
//! }
//! ```
//!
//! - `enabled` (default false): `node-bootstrap follow` changes nothing
//!   unless it is on; the Ignition module sets it, and enables the timer,
//!   for the roles whose `follow` switch is on;
//! - `namespace`, `lease`, `config_map`: the follow lease (a ConfigMap used
//!   as the cluster-wide semaphore, [`super::lease`]) and the operator's
//!   ConfigMap (minor target, how many nodes change at once, how many may
//!   be not Ready; [`super::policy`]); the terraform module `follow-rbac`
//!   creates the lease and names both in its RBAC;
//! - `stable_checks` (1..=20, default 3): how many consecutive looks at
//!   the API server's `/version` must agree before its version is a
//!   target (an HA control plane behind a load balancer answers from one
//!   instance at a time while it is upgraded);
//! - `ready_timeout_secs` (30..=3600, default 300): how long the changed
//!   kubelet has to bring the Node back Ready, reporting the new version,
//!   before the change is rolled back;
//! - `drain_timeout_secs` (10..=3600, default 300): how long the evictions
//!   of a minor change may take (a PodDisruptionBudget that does not allow
//!   one within it stops the change, nothing changed on the node);
//! - `poll_secs` (1..=60, default 5): how often a wait looks again.

use crate::settings::{FieldError, FieldResult, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawFollow {
    /// Follow the cluster (default false).
    pub enabled: Option<bool>,
    /// The lease's and the ConfigMap's namespace (default `kube-system`).
    pub namespace: Option<String>,
    /// The follow lease's ConfigMap (default `node-bootstrap-follow-lease`).
    pub lease: Option<String>,
    /// The operator's ConfigMap (default `node-bootstrap-follow`).
    pub config_map: Option<String>,
    /// Consecutive agreeing looks at `/version` (default 3).
    pub stable_checks: Option<u64>,
    /// Bound on the changed kubelet's way back to Ready, seconds (default 300).
    pub ready_timeout_secs: Option<u64>,
    /// Bound on a minor change's evictions, seconds (default 300).
    pub drain_timeout_secs: Option<u64>,
    /// How often a wait looks again, seconds (default 5).
    pub poll_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowSettings {
    pub enabled: bool,
    pub namespace: String,
    pub lease: String,
    pub config_map: String,
    pub stable_checks: usize,
    pub ready_timeout: Duration,
    pub drain_timeout: Duration,
    pub poll: Duration,
}

/// The default name of the operator's ConfigMap.
pub const DEFAULT_NAME: &str = "node-bootstrap-follow";
/// The default name of the follow lease's ConfigMap.
pub const DEFAULT_LEASE: &str = "node-bootstrap-follow-lease";
/// The default namespace of both.
pub const DEFAULT_NAMESPACE: &str = "kube-system";

impl Default for FollowSettings {
    fn default() -> Self {
        RawFollow::default()
            .validate()
            .expect("the built-in follow defaults are valid")
    }
}

/// A Kubernetes object name (an RFC 1123 DNS subdomain, as Leases and
/// ConfigMaps take; a namespace is a label, so no dots there).
fn object_name(field: &str, value: String, dots: bool) -> FieldResult<String> {
    let ok = !value.is_empty()
        && value.len() <= if dots { 253 } else { 63 }
        && value.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || (dots && b == b'.')
        })
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(value)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be a Kubernetes name (lowercase letters, digits, '-'{}; starting and ending with a letter or digit), got {value:?}",
                if dots { ", '.'" } else { "" }
            ),
        ))
    }
}

impl RawFollow {
    pub fn validate(self) -> FieldResult<FollowSettings> {
        Ok(FollowSettings {
            enabled: self.enabled.unwrap_or(false),
            namespace: object_name(
                "follow.namespace",
                self.namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.into()),
                false,
            )?,
            lease: object_name(
                "follow.lease",
                self.lease.unwrap_or_else(|| DEFAULT_LEASE.into()),
                true,
            )?,
            config_map: object_name(
                "follow.config_map",
                self.config_map.unwrap_or_else(|| DEFAULT_NAME.into()),
                true,
            )?,
            stable_checks: in_range(
                "follow.stable_checks",
                self.stable_checks.unwrap_or(3),
                1,
                20,
                "",
            )? as usize,
            ready_timeout: seconds_in(
                "follow.ready_timeout_secs",
                self.ready_timeout_secs.unwrap_or(300),
                30,
                3600,
            )?,
            drain_timeout: seconds_in(
                "follow.drain_timeout_secs",
                self.drain_timeout_secs.unwrap_or(300),
                10,
                3600,
            )?,
            poll: seconds_in("follow.poll_secs", self.poll_secs.unwrap_or(5), 1, 60)?,
        })
    }
}

impl FollowSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawFollow {
        RawFollow {
            enabled: Some(self.enabled),
            namespace: Some(self.namespace.clone()),
            lease: Some(self.lease.clone()),
            config_map: Some(self.config_map.clone()),
            stable_checks: Some(self.stable_checks as u64),
            ready_timeout_secs: Some(self.ready_timeout.as_secs()),
            drain_timeout_secs: Some(self.drain_timeout.as_secs()),
            poll_secs: Some(self.poll.as_secs()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> FieldResult<FollowSettings> {
        serde_json::from_str::<RawFollow>(json).unwrap().validate()
    }

    #[test]
    fn defaults_are_off_and_name_the_cluster_objects() {
        let s = parse("{}").unwrap();
        assert!(!s.enabled);
        assert_eq!(
            (
                s.namespace.as_str(),
                s.lease.as_str(),
                s.config_map.as_str()
            ),
            ("kube-system", DEFAULT_LEASE, DEFAULT_NAME)
        );
        assert_eq!(s.stable_checks, 3);
        assert_eq!(s.ready_timeout, Duration::from_secs(300));
        let back = serde_json::to_string(&s.to_raw()).unwrap();
        assert_eq!(parse(&back).unwrap(), s);
    }

    #[test]
    fn bad_values_name_the_field() {
        for (json, field) in [
            (r#"{"namespace":"Kube-System"}"#, "follow.namespace"),
            (r#"{"namespace":"a.b"}"#, "follow.namespace"),
            (r#"{"lease":"-x"}"#, "follow.lease"),
            (r#"{"config_map":""}"#, "follow.config_map"),
            (r#"{"stable_checks":0}"#, "follow.stable_checks"),
            (r#"{"ready_timeout_secs":5}"#, "follow.ready_timeout_secs"),
            (
                r#"{"drain_timeout_secs":99999}"#,
                "follow.drain_timeout_secs",
            ),
            (r#"{"poll_secs":0}"#, "follow.poll_secs"),
        ] {
            let e = parse(json).unwrap_err();
            assert_eq!(e.field, field, "{json}: {e:?}");
        }
        assert!(serde_json::from_str::<RawFollow>(r#"{"enable":true}"#).is_err());
    }
}
