//! The `kubelet_config` config section: what the node's kubelet is
//! configured with, whatever the cluster's version (the agent renders it as
//! the file or the flags that version takes, see the module docs).
//!
//! ```json
//! "kubelet_config": {
//!   "cluster_dns": ["10.3.0.10"],
//!   "cluster_domain": "cluster.local",
//!   "taints": ["node-role.kubernetes.io/master=:NoSchedule"],
//!   "server_tls_bootstrap": false,
//!   "allow_newer_kubernetes": false
//! }
//! ```
//!
//! - `cluster_dns`: the cluster DNS service's addresses (default
//!   `["10.3.0.10"]`, Tectonic's service network);
//! - `cluster_domain`: default `cluster.local`;
//! - `taints`: `key=value:Effect` taints the node registers with (default:
//!   the master taint on `master` and `bootkube-master`, none on workers);
//! - `server_tls_bootstrap`: the kubelet's serving certificate from the
//!   cluster CA through a certificate signing request, which the cluster
//!   must approve (Kubernetes' own approver never approves serving
//!   requests; default false: the kubelet serves a self-signed one);
//! - `allow_newer_kubernetes`: configure a cluster newer than the newest
//!   Kubernetes the agent knows by that version's rules (default false:
//!   refused, exit 7).

use super::Taint;
use crate::settings::{FieldError, FieldResult};
use serde::{Deserialize, Serialize};

/// The taint master roles register with unless configured.
pub const MASTER_TAINT: &str = "node-role.kubernetes.io/master=:NoSchedule";

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawKubeletConfig {
    pub cluster_dns: Option<Vec<String>>,
    pub cluster_domain: Option<String>,
    pub taints: Option<Vec<String>>,
    pub server_tls_bootstrap: Option<bool>,
    pub allow_newer_kubernetes: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletConfigSettings {
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    /// `None`: the role's default.
    pub taints: Option<Vec<Taint>>,
    pub server_tls_bootstrap: bool,
    pub allow_newer_kubernetes: bool,
}

impl KubeletConfigSettings {
    /// The section as a config file writes it, every default filled in
    /// (`taints` `null`: the role's).
    pub fn to_raw(&self) -> RawKubeletConfig {
        RawKubeletConfig {
            cluster_dns: Some(self.cluster_dns.clone()),
            cluster_domain: Some(self.cluster_domain.clone()),
            taints: self
                .taints
                .as_ref()
                .map(|t| t.iter().map(Taint::flag_form).collect()),
            server_tls_bootstrap: Some(self.server_tls_bootstrap),
            allow_newer_kubernetes: Some(self.allow_newer_kubernetes),
        }
    }

    /// The taints a node of this role registers with.
    pub fn taints_for(&self, master: bool) -> Vec<Taint> {
        match &self.taints {
            Some(t) => t.clone(),
            None if master => vec![Taint::parse(MASTER_TAINT).expect("the master taint parses")],
            None => Vec::new(),
        }
    }
}

impl RawKubeletConfig {
    pub fn validate(self) -> FieldResult<KubeletConfigSettings> {
        let cluster_dns = self.cluster_dns.unwrap_or_else(|| vec!["10.3.0.10".into()]);
        for (i, a) in cluster_dns.iter().enumerate() {
            if a.parse::<std::net::IpAddr>().is_err() {
                return Err(FieldError::new(
                    format!("kubelet_config.cluster_dns[{i}]"),
                    format!("{a:?} is not an IP address"),
                ));
            }
        }
        let cluster_domain = self
            .cluster_domain
            .unwrap_or_else(|| "cluster.local".into());
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if cluster_domain.len() > 253 || !cluster_domain.split('.').all(label_ok) {
            return Err(FieldError::new(
                "kubelet_config.cluster_domain",
                format!("{cluster_domain:?} is not a DNS domain (e.g. cluster.local)"),
            ));
        }
        let taints = match self.taints {
            None => None,
            Some(list) => Some(
                list.iter()
                    .enumerate()
                    .map(|(i, t)| {
                        Taint::parse(t)
                            .map_err(|e| FieldError::new(format!("kubelet_config.taints[{i}]"), e))
                    })
                    .collect::<FieldResult<Vec<_>>>()?,
            ),
        };
        Ok(KubeletConfigSettings {
            cluster_dns,
            cluster_domain,
            taints,
            server_tls_bootstrap: self.server_tls_bootstrap.unwrap_or(false),
            allow_newer_kubernetes: self.allow_newer_kubernetes.unwrap_or(false),
        })
    }
}
