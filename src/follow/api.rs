//! What `follow` asks of the API server, with the node's own identity:
//! the kubelet's kubeconfig (`<kubelet_dir>/kubeconfig`, earned by TLS
//! bootstrapping, with `cluster.credential` `bootstrap-token`; the shared
//! kubeconfig with `kubeconfig`), so the user is `system:node:<name>` in
//! `system:nodes`.
//!
//! What that identity may do (docs/operators.md, "Following the
//! cluster's version", says the same for operators):
//! - by the Node authorizer and the NodeRestriction admission plugin
//!   alone: read `/version`, list Nodes, read and patch its own Node
//!   (`spec.unschedulable`; not its taints), list pods, evict pods bound to
//!   itself, create Events;
//! - not without RBAC: the two ConfigMaps, the follow lease
//!   ([`super::lease`]) and the operator's (the Node authorizer lets a
//!   node read only the ConfigMaps its pods use). `terraform/modules/follow-rbac`
//!   creates the lease's ConfigMap and renders a Role in `follow.namespace`
//!   allowing `get`/`update` of it and `get` of the operator's, bound to
//!   the group `system:nodes`;
//! - not at all: any `coordination.k8s.io` Lease but its own heartbeat
//!   Lease: the NodeRestriction admission plugin refuses it whatever RBAC
//!   says (why the follow lease is a ConfigMap).

use super::drain::{self, Evicted, PodRef};
use super::lease::{self, LeaseView, Readiness};
use super::plan::NodeLook;
use super::policy::Policy;
use crate::cluster::apiclient::ApiClient;
use crate::cluster::kubeconfig::{self, Kubeconfig};
use crate::cluster::version::KubeVersion;
use crate::error::{Error, Result};
use crate::retry::RetryPolicy;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const JSON: &str = "application/json";
const MERGE_PATCH: &str = "application/merge-patch+json";

/// The API server as this node's kubelet identity sees it.
pub struct Cluster {
    pub client: ApiClient,
    pub node: String,
    pub namespace: String,
    pub lease: String,
    pub config_map: String,
    /// `leaseDurationSeconds` written (`follow.ready_timeout_secs`).
    pub lease_secs: u64,
}

/// The kubeconfig of the node's own identity (module docs), and the node
/// name its certificate says (`CN=system:node:<name>`), if it has one.
pub fn identity(
    paths: &crate::settings::Paths,
    cluster: &crate::cluster::config::ClusterSettings,
) -> Result<(Kubeconfig, Option<String>)> {
    use crate::cluster::config::Credential;
    let path = match cluster.credential {
        Credential::BootstrapToken => paths.kubelet_dir.join("kubeconfig"),
        Credential::Kubeconfig => paths.kubeconfig.clone(),
    };
    if !path.exists() {
        return Err(Error::retryable(format!(
            "{} does not exist: the kubelet has no identity of its own yet (TLS bootstrapping); follow waits for it",
            path.display()
        )));
    }
    let kc = kubeconfig::load(&path)?;
    let name = crate::join::observe::node_name_of(&kc);
    Ok((kc, name))
}

fn path_segment(s: &str) -> String {
    crate::join::observe::percent_encode(s)
}

impl Cluster {
    pub fn new(
        kc: &Kubeconfig,
        timeout: Duration,
        node: String,
        settings: &super::config::FollowSettings,
    ) -> Result<Cluster> {
        Ok(Cluster {
            client: ApiClient::new(kc, timeout)?,
            node,
            namespace: settings.namespace.clone(),
            lease: settings.lease.clone(),
            config_map: settings.config_map.clone(),
            lease_secs: settings.ready_timeout.as_secs(),
        })
    }

    /// One `GET /version`.
    pub async fn version(&self) -> Result<KubeVersion> {
        let once = RetryPolicy::new(Duration::ZERO, Duration::ZERO, 1);
        let v = self.client.version(once).await?;
        KubeVersion::parse(&v.git_version).map_err(Error::refused)
    }

    /// A GET that may be refused for want of RBAC: a 403 says which
    /// module renders it.
    async fn get_rbac(&self, path: &str, what: &str) -> Result<Option<Value>> {
        self.client.get_json(path).await.map_err(|e| {
            if e.class() == crate::error::ErrorClass::Refused {
                e.context(format!(
                    "this node may not read the {what}: apply the RBAC of terraform/modules/follow-rbac (docs/operators.md, \"Following the cluster's version\")"
                ))
            } else {
                e
            }
        })
    }

    pub async fn policy(&self) -> Result<Policy> {
        let path = format!(
            "/api/v1/namespaces/{}/configmaps/{}",
            self.namespace,
            path_segment(&self.config_map)
        );
        let cm = self.get_rbac(&path, "follow ConfigMap").await?;
        super::policy::read(cm.as_ref()).map_err(|e| {
            Error::refused(format!(
                "the follow ConfigMap {}/{}: {e}; nothing changes until it reads",
                self.namespace, self.config_map
            ))
        })
    }

    fn lease_path(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.namespace)
    }

    pub async fn lease(&self) -> Result<LeaseView> {
        let path = format!("{}/{}", self.lease_path(), path_segment(&self.lease));
        let l = self.get_rbac(&path, "follow lease").await?;
        lease::read(l.as_ref()).map_err(|why| {
            Error::refused(format!(
                "the follow lease {}/{}: {why}",
                self.namespace, self.lease
            ))
        })
    }

    /// PUT over the version read, or POST when there was none; `false` on
    /// a conflict (409: written or created by another node meanwhile).
    pub async fn write_lease(&self, view: &LeaseView, now: u64) -> Result<bool> {
        let body = lease::render(&self.namespace, &self.lease, view, self.lease_secs, now);
        let (method, path) = match view.resource_version {
            Some(_) => (
                Method::PUT,
                format!("{}/{}", self.lease_path(), path_segment(&self.lease)),
            ),
            None => (Method::POST, self.lease_path()),
        };
        let (code, answer) = self.client.send_json(method, &path, JSON, &body).await?;
        match code {
            200 | 201 => Ok(true),
            409 => Ok(false),
            403 => Err(Error::refused(format!(
                "this node may not {} the follow lease (ConfigMap {}/{}; HTTP 403: {}): apply the manifest of terraform/modules/follow-rbac (it creates the lease and lets the nodes update it)",
                if view.resource_version.is_some() {
                    "update"
                } else {
                    "create"
                },
                self.namespace,
                self.lease,
                answer["message"].as_str().unwrap_or_default()
            ))),
            code => Err(Error::retryable(format!(
                "writing the follow lease (ConfigMap {}/{}): HTTP {code}: {}",
                self.namespace,
                self.lease,
                answer["message"].as_str().unwrap_or_default()
            ))),
        }
    }

    pub async fn readiness(&self) -> Result<Readiness> {
        let list = self
            .client
            .get_json("/api/v1/nodes")
            .await?
            .ok_or_else(|| Error::retryable("GET /api/v1/nodes: 404"))?;
        Ok(lease::readiness(&list, &self.node))
    }

    pub async fn node(&self) -> std::result::Result<NodeLook, String> {
        let path = format!("/api/v1/nodes/{}", path_segment(&self.node));
        match self.client.get_json(&path).await {
            Ok(Some(n)) => Ok(node_look(&n)),
            Ok(None) => Err(format!("no Node {} in the cluster", self.node)),
            Err(e) => Err(e.to_string()),
        }
    }

    pub async fn set_unschedulable(&self, on: bool) -> Result<()> {
        let path = format!("/api/v1/nodes/{}", path_segment(&self.node));
        let patch = json!({"spec": {"unschedulable": if on { json!(true) } else { Value::Null }}});
        let (code, answer) = self
            .client
            .send_json(Method::PATCH, &path, MERGE_PATCH, &patch)
            .await?;
        if code == 200 {
            return Ok(());
        }
        Err(Error::retryable(format!(
            "{} Node {}: HTTP {code}: {}",
            if on { "cordoning" } else { "uncordoning" },
            self.node,
            answer["message"].as_str().unwrap_or_default()
        )))
    }

    /// Evicts this node's pods ([`drain`]) and waits until they are gone,
    /// within `timeout`, asking again every `poll`.
    pub async fn drain(
        &self,
        apiserver_minor: u64,
        timeout: Duration,
        poll: Duration,
    ) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let selector = format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{}",
            path_segment(&self.node)
        );
        let list = self
            .client
            .get_json(&selector)
            .await?
            .unwrap_or(Value::Null);
        let pods = drain::to_evict(&list).map_err(Error::refused)?;
        let api = drain::eviction_api(apiserver_minor);
        let mut pending: Vec<PodRef> = pods.clone();
        loop {
            let mut still = Vec::new();
            for p in pending {
                let path = format!(
                    "/api/v1/namespaces/{}/pods/{}/eviction",
                    path_segment(&p.namespace),
                    path_segment(&p.name)
                );
                let (code, answer) = self
                    .client
                    .send_json(Method::POST, &path, JSON, &drain::eviction(&p, api))
                    .await?;
                match drain::evicted(code, &answer) {
                    Evicted::Yes => tracing::info!(step = "follow", pod = %p, "pod evicted"),
                    Evicted::NotYet(why) => {
                        tracing::info!(step = "follow", pod = %p, why = %why, "eviction not allowed yet");
                        still.push(p);
                    }
                    Evicted::No(why) => {
                        return Err(Error::refused(format!("evicting pod {p}: {why}")));
                    }
                }
            }
            if still.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                let names: Vec<String> = still.iter().map(ToString::to_string).collect();
                return Err(Error::retryable(format!(
                    "the PodDisruptionBudgets did not allow evicting {} within {} s (follow.drain_timeout_secs)",
                    names.join(", "),
                    timeout.as_secs()
                )));
            }
            tokio::time::sleep(poll).await;
            pending = still;
        }
        self.wait_gone(&pods, deadline, poll, timeout).await
    }

    async fn wait_gone(
        &self,
        pods: &[PodRef],
        deadline: tokio::time::Instant,
        poll: Duration,
        timeout: Duration,
    ) -> Result<()> {
        for p in pods {
            loop {
                let path = format!(
                    "/api/v1/namespaces/{}/pods/{}",
                    path_segment(&p.namespace),
                    path_segment(&p.name)
                );
                if drain::gone(p, self.client.get_json(&path).await?.as_ref()) {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(Error::retryable(format!(
                        "evicted pod {p} was still there after {} s (follow.drain_timeout_secs)",
                        timeout.as_secs()
                    )));
                }
                tokio::time::sleep(poll).await;
            }
        }
        Ok(())
    }

    /// An Event on this node's Node, as the kubelet writes its own
    /// (`involvedObject.uid` is the node's name).
    pub async fn event(&self, warning: bool, reason: &str, message: &str) -> Result<()> {
        let now = crate::clock::now_rfc3339();
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{}.", self.node), "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self.node},
            "reason": reason,
            "message": message,
            "type": if warning { "Warning" } else { "Normal" },
            "source": {"component": "node-bootstrap", "host": self.node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let (code, answer) = self
            .client
            .send_json(
                Method::POST,
                "/api/v1/namespaces/default/events",
                JSON,
                &body,
            )
            .await?;
        if code == 201 || code == 200 {
            Ok(())
        } else {
            Err(Error::retryable(format!(
                "creating an Event: HTTP {code}: {}",
                answer["message"].as_str().unwrap_or_default()
            )))
        }
    }
}

/// A Node object as a verification reads it.
pub fn node_look(node: &Value) -> NodeLook {
    let view = crate::join::assess::node_view(node);
    let heartbeat = node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["lastHeartbeatTime"].as_str())
        .and_then(rfc3339_unix);
    NodeLook {
        ready: view.ready,
        kubelet_version: view.kubelet_version,
        heartbeat,
        detail: view.not_ready_because,
    }
}

/// Unix seconds of an RFC 3339 timestamp.
pub fn rfc3339_unix(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_reads_as_a_verification_needs_it() {
        let n = json!({
            "metadata": {"name": "w1"},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-28T00:00:10Z"}],
                "nodeInfo": {"kubeletVersion": "v1.20.3", "containerRuntimeVersion": "containerd://1.6.20"}
            }
        });
        let l = node_look(&n);
        assert!(l.ready);
        assert_eq!(l.kubelet_version, "v1.20.3");
        assert_eq!(l.heartbeat, rfc3339_unix("2026-11-28T00:00:10Z"));
        assert_eq!(rfc3339_unix("1970-01-01T00:01:40Z"), Some(100));
        assert_eq!(rfc3339_unix("yesterday"), None);
    }
}
