//! What `follow` asks of the API server, with the node's own identity:
//! the kubelet's kubeconfig (`<kubelet_dir>/kubeconfig`, earned by TLS
//! bootstrapping, with `cluster.credential` `bootstrap-token`; the shared
//! kubeconfig with `kubeconfig`), so the user is `system:node:<name>` in
//! `system:nodes`. [`Cluster`] is the real [`ClusterSeam`].
//!
//! What that identity may do (docs/operators.md, "Following the
//! cluster's version", says the same for operators):
//! - by the Node authorizer and the NodeRestriction admission plugin
//!   alone, as Kubernetes 1.32 and later narrow them
//!   (`AuthorizeNodeWithSelectors`, `plugin/pkg/auth/authorizer/node/node_authorizer.go`):
//!   read `/version`; read and patch **its own** Node (`spec.unschedulable`
//!   for the cordon of a minor change; not its taints), never another's
//!   nor a list of them; list **its own** pods (`fieldSelector=spec.nodeName=<node>`),
//!   evict pods bound to it; create Events. Every request here is one of
//!   those: no Node is listed, no pod read by name;
//! - not without RBAC (`terraform/modules/follow-rbac`): the two
//!   ConfigMaps, the follow lease ([`super::lease`], get, update and
//!   patch: a take updates the whole object over the version read, a
//!   node's other writes patch its own key) and
//!   the operator's (get), and the `default/kubernetes` Endpoints (get:
//!   the API servers' addresses, to ask each one's version before a take;
//!   without it the load balancer's answer stands);
//! - not at all: any `coordination.k8s.io` Lease but its own heartbeat
//!   Lease: the NodeRestriction admission plugin refuses it whatever RBAC
//!   says (why the follow lease is a ConfigMap).

use super::drain::{self, Evicted, Plan, PodRef};
use super::lease::{self, EntryPatch, LeaseView};
use super::plan::NodeLook;
use super::policy::Policy;
use super::seams::{ClusterSeam, EventKind, ServerVersions};
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
const JSON_PATCH: &str = "application/json-patch+json";

/// The API server as this node's kubelet identity sees it.
pub struct Cluster {
    pub client: ApiClient,
    /// The kubeconfig it asks with (each API server is asked with it at its
    /// own address).
    pub kubeconfig: Kubeconfig,
    pub timeout: Duration,
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

fn message(answer: &Value) -> &str {
    answer["message"].as_str().unwrap_or_default()
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
            kubeconfig: kc.clone(),
            timeout,
            node,
            namespace: settings.namespace.clone(),
            lease: settings.lease.clone(),
            config_map: settings.config_map.clone(),
            lease_secs: settings.ready_timeout.as_secs(),
        })
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

    fn lease_path(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.namespace)
    }

    fn node_path(&self) -> String {
        format!("/api/v1/nodes/{}", path_segment(&self.node))
    }

    /// This node's pods: the list a node may ask for (module docs).
    async fn own_pods(&self) -> Result<Value> {
        let selector = format!(
            "/api/v1/pods?fieldSelector=spec.nodeName%3D{}",
            path_segment(&self.node)
        );
        Ok(self
            .client
            .get_json(&selector)
            .await?
            .unwrap_or(Value::Null))
    }

    /// `/version` of the API server at `address` (`ip:port`).
    async fn version_at(&self, address: &str) -> std::result::Result<KubeVersion, String> {
        let mut kc = self.kubeconfig.clone();
        kc.server = url::Url::parse(&format!("https://{address}/"))
            .map_err(|e| format!("{address} is no address: {e}"))?;
        let client = ApiClient::new(&kc, self.timeout).map_err(|e| e.to_string())?;
        let once = RetryPolicy::new(Duration::ZERO, Duration::ZERO, 1);
        let v = client.version(once).await.map_err(|e| e.to_string())?;
        KubeVersion::parse(&v.git_version)
    }
}

/// The API servers' `address:port`s of an Endpoints object (its `https`
/// port, or its only one).
pub fn endpoint_addresses(endpoints: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for subset in endpoints["subsets"].as_array().into_iter().flatten() {
        let ports = subset["ports"].as_array();
        let port = ports.and_then(|p| {
            p.iter()
                .find(|p| p["name"] == "https")
                .or_else(|| (p.len() == 1).then(|| &p[0]))
                .and_then(|p| p["port"].as_u64())
        });
        let Some(port) = port else { continue };
        for a in subset["addresses"].as_array().into_iter().flatten() {
            if let Some(ip) = a["ip"].as_str() {
                out.push(if ip.contains(':') {
                    format!("[{ip}]:{port}")
                } else {
                    format!("{ip}:{port}")
                });
            }
        }
    }
    out
}

impl ClusterSeam for Cluster {
    fn node_name(&self) -> &str {
        &self.node
    }

    async fn apiserver_version(&self) -> Result<KubeVersion> {
        let once = RetryPolicy::new(Duration::ZERO, Duration::ZERO, 1);
        let v = self.client.version(once).await?;
        KubeVersion::parse(&v.git_version).map_err(Error::refused)
    }

    async fn apiserver_versions(&self) -> Result<Option<ServerVersions>> {
        let ep = match self
            .client
            .get_json("/api/v1/namespaces/default/endpoints/kubernetes")
            .await
        {
            Ok(Some(ep)) => ep,
            Ok(None) => return Ok(None),
            Err(e) if e.class() == crate::error::ErrorClass::Refused => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut answers = Vec::new();
        for a in endpoint_addresses(&ep) {
            let v = self.version_at(&a).await;
            answers.push((a, v));
        }
        Ok((!answers.is_empty()).then_some(ServerVersions { answers }))
    }

    async fn policy(&self) -> Result<Policy> {
        let path = format!("{}/{}", self.lease_path(), path_segment(&self.config_map));
        let cm = self.get_rbac(&path, "follow ConfigMap").await?;
        super::policy::read(cm.as_ref()).map_err(|e| {
            Error::refused(format!(
                "the follow ConfigMap {}/{}: {e}; nothing changes until it reads",
                self.namespace, self.config_map
            ))
        })
    }

    async fn lease(&self) -> Result<LeaseView> {
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
    async fn write_lease(&self, view: &LeaseView) -> Result<bool> {
        let body = lease::render(&self.namespace, &self.lease, view, self.lease_secs);
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
                message(&answer)
            ))),
            code => Err(Error::retryable(format!(
                "writing the follow lease (ConfigMap {}/{}): HTTP {code}: {}",
                self.namespace,
                self.lease,
                message(&answer)
            ))),
        }
    }

    /// A merge patch (a [`EntryPatch::Set`]: no condition) or a JSON patch
    /// whose `test` is the condition (a failed test is HTTP 422).
    async fn patch_entry(&self, node: &str, patch: &EntryPatch) -> Result<bool> {
        let key = lease::key(node);
        let pointer = format!("/data/{}", key.replace('~', "~0").replace('/', "~1"));
        let (kind, body) = match patch {
            EntryPatch::Set(e) => (MERGE_PATCH, json!({"data": {key: lease::entry_text(e)}})),
            EntryPatch::Replace { old, new } => (
                JSON_PATCH,
                json!([
                    {"op": "test", "path": pointer, "value": old},
                    {"op": "replace", "path": pointer, "value": lease::entry_text(new)},
                ]),
            ),
            EntryPatch::Remove { old } => (
                JSON_PATCH,
                json!([
                    {"op": "test", "path": pointer, "value": old},
                    {"op": "remove", "path": pointer},
                ]),
            ),
        };
        let path = format!("{}/{}", self.lease_path(), path_segment(&self.lease));
        let (code, answer) = self
            .client
            .send_json(Method::PATCH, &path, kind, &body)
            .await?;
        match code {
            200 => Ok(true),
            409 | 422 => Ok(false),
            403 => Err(Error::refused(format!(
                "this node may not patch the follow lease (ConfigMap {}/{}; HTTP 403: {}): apply the manifest of terraform/modules/follow-rbac",
                self.namespace,
                self.lease,
                message(&answer)
            ))),
            code => Err(Error::retryable(format!(
                "writing this node's key of the follow lease (ConfigMap {}/{}): HTTP {code}: {}",
                self.namespace,
                self.lease,
                message(&answer)
            ))),
        }
    }

    async fn own_node(&self) -> std::result::Result<NodeLook, String> {
        match self.client.get_json(&self.node_path()).await {
            Ok(Some(n)) => Ok(node_look(&n)),
            Ok(None) => Err(format!("no Node {} in the cluster", self.node)),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn set_unschedulable(&self, on: bool) -> Result<()> {
        let patch = json!({"spec": {"unschedulable": if on { json!(true) } else { Value::Null }}});
        let (code, answer) = self
            .client
            .send_json(Method::PATCH, &self.node_path(), MERGE_PATCH, &patch)
            .await?;
        if code == 200 {
            tracing::info!(step = "follow", node = %self.node, "{}", if on { "node cordoned" } else { "node uncordoned" });
            return Ok(());
        }
        Err(Error::retryable(format!(
            "{} Node {}: HTTP {code}: {}",
            if on { "cordoning" } else { "uncordoning" },
            self.node,
            message(&answer)
        )))
    }

    async fn drain_plan(
        &self,
        delete_emptydir_data: bool,
    ) -> Result<std::result::Result<Plan, String>> {
        let list = self.own_pods().await?;
        Ok(drain::plan(&list, delete_emptydir_data))
    }

    async fn evict(&self, p: &PodRef, apiserver_minor: u64) -> Result<Option<String>> {
        let path = format!(
            "/api/v1/namespaces/{}/pods/{}/eviction",
            path_segment(&p.namespace),
            path_segment(&p.name)
        );
        let api = drain::eviction_api(apiserver_minor);
        let (code, answer) = self
            .client
            .send_json(Method::POST, &path, JSON, &drain::eviction(p, api))
            .await?;
        match drain::evicted(code, &answer) {
            Evicted::Yes => {
                tracing::info!(step = "follow", pod = %p, "pod evicted");
                Ok(None)
            }
            Evicted::NotYet(why) => {
                tracing::info!(step = "follow", pod = %p, why = %why, "eviction not allowed yet");
                Ok(Some(why))
            }
            Evicted::No(why) => Err(Error::refused(format!("evicting pod {p}: {why}"))),
        }
    }

    /// An Event on this node's Node, as the kubelet writes its own
    /// (`involvedObject.uid` is the node's name); a failure is logged.
    async fn event(&self, kind: EventKind, reason: &str, message_text: &str) {
        let now = crate::clock::now_rfc3339();
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{}.", self.node), "namespace": "default"},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": self.node},
            "reason": reason,
            "message": message_text,
            "type": if kind == EventKind::Warning { "Warning" } else { "Normal" },
            "source": {"component": "node-bootstrap", "host": self.node},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let r = self
            .client
            .send_json(
                Method::POST,
                "/api/v1/namespaces/default/events",
                JSON,
                &body,
            )
            .await;
        let why = match r {
            Ok((200 | 201, _)) => return,
            Ok((code, answer)) => format!("HTTP {code}: {}", message(&answer)),
            Err(e) => e.to_string(),
        };
        tracing::warn!(step = "follow", reason, error = %why, "cannot record an Event on the Node");
    }
}

/// A Node object as a verification and a take read it.
pub fn node_look(node: &Value) -> NodeLook {
    let view = crate::join::assess::node_view(node);
    let heartbeat = node["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["lastHeartbeatTime"].as_str())
        .and_then(rfc3339_unix);
    NodeLook {
        ready: view.ready,
        unschedulable: node["spec"]["unschedulable"] == true,
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
            "spec": {"unschedulable": true},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-28T00:00:10Z"}],
                "nodeInfo": {"kubeletVersion": "v1.20.3", "containerRuntimeVersion": "containerd://1.6.20"}
            }
        });
        let l = node_look(&n);
        assert!(l.ready && l.unschedulable);
        assert_eq!(l.kubelet_version, "v1.20.3");
        assert_eq!(l.heartbeat, rfc3339_unix("2026-11-28T00:00:10Z"));
        assert_eq!(rfc3339_unix("1970-01-01T00:01:40Z"), Some(100));
        assert_eq!(rfc3339_unix("yesterday"), None);
        assert!(!node_look(&json!({"spec": {}})).unschedulable);
    }

    #[test]
    fn the_api_servers_addresses_come_from_their_endpoints() {
        let ep = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"name": "https", "port": 6443}]},
            {"addresses": [{"ip": "fd00::3"}], "ports": [{"port": 443}]},
            {"addresses": [{"ip": "10.0.0.9"}], "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]},
        ]});
        assert_eq!(
            endpoint_addresses(&ep),
            ["10.0.0.1:6443", "10.0.0.2:6443", "[fd00::3]:443"]
        );
        assert!(endpoint_addresses(&json!({})).is_empty());
    }
}
