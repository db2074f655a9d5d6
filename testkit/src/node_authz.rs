//! What Kubernetes 1.32's Node authorizer grants a node, on the 1.20 API
//! server the rig runs: an authorization webhook (`SubjectAccessReview`
//! over HTTP, the API server's `--authorization-mode=Webhook,Node,RBAC`)
//! that denies a node, before 1.20's Node authorizer can allow it, what
//! 1.32 no longer allows, and has no opinion on the rest (1.20's Node
//! authorizer and RBAC then decide as 1.32's do).
//!
//! How it mirrors upstream `plugin/pkg/auth/authorizer/node/node_authorizer.go`
//! of 1.32 with `AuthorizeNodeWithSelectors` (on by default from 1.32,
//! locked on from 1.34), for a user `system:node:<name>` in `system:nodes`:
//!
//! - `nodes`, no subresource, `get`/`list`/`watch`: 1.32's `authorizeNode`
//!   allows only the node's own name (a list or watch with
//!   `fieldSelector=metadata.name=<name>` carries that name in its
//!   attributes) and says "node '…' cannot read all nodes, only its own
//!   Node object" (or "cannot read '…'") otherwise. Here: the own name,
//!   no opinion (1.20 allows it); any other, or none, **denied**, with
//!   1.32's words. `create`/`update`/`patch` and `nodes/status`: no
//!   opinion (1.20 and 1.32 both allow them; NodeRestriction confines them
//!   to the node's own);
//! - `pods`, no subresource, `get`: 1.32 allows it only for a pod related
//!   to the node in its graph (bound to it: `spec.nodeName`, which the
//!   graph forgets when the pod is deleted). Here: the pod is read as the
//!   administrator; bound to the node, no opinion; else (another node's,
//!   or gone) **denied**;
//! - `pods` `list`/`watch`: 1.32 allows them only with
//!   `fieldSelector=spec.nodeName=<name>`. A 1.20 API server does not put
//!   field selectors in a SubjectAccessReview (that came with 1.31's
//!   `AuthorizeWithSelectors`), so the webhook cannot tell: no opinion
//!   (1.20 allows them), and what a test asks of the agent's requests is
//!   read from the API server's audit log instead (each pod list of a
//!   node must carry that selector);
//! - everything else (pod creation, status, evictions; events; secrets,
//!   configmaps and the rest, which 1.20's graph already narrows as
//!   1.32's does; the follow RBAC's ConfigMaps and Endpoints): no opinion.
//!
//! Where 1.32 says "no opinion" and this webhook denies (another node's
//! Node, an unbound pod), 1.32 would still let RBAC allow it; the rig and
//! the follow RBAC grant nodes no such rule, so for them the outcome is
//! 1.32's.

use crate::kube::Kubectl;
use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the webhook answers one review.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No opinion: the API server's next authorizers decide.
    NoOpinion,
    /// Denied, 1.32's words.
    Deny(String),
    /// Depends on whether pod `namespace/name` is bound to `node`.
    PodOfNode {
        node: String,
        namespace: String,
        name: String,
    },
}

/// The node a user is, as the Node authorizer identifies it
/// (`system:node:<name>` in the group `system:nodes`).
fn node_of(spec: &Value) -> Option<String> {
    let groups = spec["groups"]
        .as_array()
        .or_else(|| spec["group"].as_array())?;
    if !groups.iter().any(|g| g == "system:nodes") {
        return None;
    }
    spec["user"]
        .as_str()?
        .strip_prefix("system:node:")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// The module docs' rules for one `SubjectAccessReview`'s spec.
pub fn decide(spec: &Value) -> Decision {
    let Some(node) = node_of(spec) else {
        return Decision::NoOpinion;
    };
    let r = &spec["resourceAttributes"];
    if r.is_null() || !r["group"].as_str().unwrap_or("").is_empty() {
        return Decision::NoOpinion;
    }
    let s = |k: &str| r[k].as_str().unwrap_or("").to_string();
    let (resource, sub, verb, name) = (s("resource"), s("subresource"), s("verb"), s("name"));
    let reads = matches!(verb.as_str(), "get" | "list" | "watch");
    match (resource.as_str(), sub.as_str()) {
        ("nodes", "") if reads && name == node => Decision::NoOpinion,
        ("nodes", "") if reads && name.is_empty() => Decision::Deny(format!(
            "node '{node}' cannot read all nodes, only its own Node object"
        )),
        ("nodes", "") if reads => Decision::Deny(format!(
            "node '{node}' cannot read '{name}', only its own Node object"
        )),
        ("pods", "") if verb == "get" => Decision::PodOfNode {
            node,
            namespace: s("namespace"),
            name,
        },
        _ => Decision::NoOpinion,
    }
}

/// The webhook, serving on loopback from its own thread until dropped.
pub struct NodeAuthorizer {
    pub port: u16,
    /// Every denial: `user verb resource/name: why`.
    pub denied: Arc<Mutex<Vec<String>>>,
    /// How many reviews it answered.
    pub reviews: Arc<std::sync::atomic::AtomicUsize>,
    /// The administrator's kubectl, to read pods (set once the API server
    /// is up: before that no pod exists).
    pub admin: Arc<Mutex<Option<Kubectl>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NodeAuthorizer {
    pub fn start() -> Result<NodeAuthorizer> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let denied = Arc::new(Mutex::new(Vec::new()));
        let reviews = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let admin: Arc<Mutex<Option<Kubectl>>> = Arc::new(Mutex::new(None));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let state = Shared {
            denied: denied.clone(),
            reviews: reviews.clone(),
            admin: admin.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("node-authz".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                rt.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                    tokio::select! {
                        _ = serve(listener, state) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(NodeAuthorizer {
            port,
            denied,
            reviews,
            admin,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The API server's `--authorization-webhook-config-file` contents.
    pub fn webhook_kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: node-authz\n  cluster:\n    server: http://127.0.0.1:{}/authorize\n\
             users:\n- name: apiserver\ncontexts:\n- name: webhook\n  context:\n    cluster: node-authz\n    user: apiserver\ncurrent-context: webhook\n",
            self.port
        )
    }

    /// The API server's flags for it, its config file at `config_path`
    /// (each replaces the rig's flag of the same name).
    pub fn apiserver_args(config_path: &str) -> Vec<String> {
        vec![
            "--authorization-mode=Webhook,Node,RBAC".into(),
            format!("--authorization-webhook-config-file={config_path}"),
        ]
    }

    /// The denials so far.
    pub fn denials(&self) -> Vec<String> {
        self.denied.lock().unwrap().clone()
    }
}

impl Drop for NodeAuthorizer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone)]
struct Shared {
    denied: Arc<Mutex<Vec<String>>>,
    reviews: Arc<std::sync::atomic::AtomicUsize>,
    admin: Arc<Mutex<Option<Kubectl>>>,
}

async fn serve(listener: tokio::net::TcpListener, state: Shared) {
    loop {
        let Ok((conn, _)) = listener.accept().await else {
            return;
        };
        tokio::spawn(connection(conn, state.clone()));
    }
}

/// One HTTP/1.1 request of a keep-alive connection (what the API server
/// sends an authorization webhook): its body, or `None` at the
/// connection's end. `buf` carries what was read past it to the next call.
pub async fn read_request(conn: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 8192];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let mut chunk = [0u8; 8192];
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..head_end + len].to_vec();
    buf.drain(..head_end + len);
    Some(body)
}

async fn connection(mut conn: tokio::net::TcpStream, state: Shared) {
    let mut buf = Vec::new();
    while let Some(body) = read_request(&mut conn, &mut buf).await {
        let review: Value = serde_json::from_slice(&body).unwrap_or_default();
        let status = answer(&review["spec"], &state).await;
        state
            .reviews
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = json!({
            "apiVersion": review["apiVersion"],
            "kind": "SubjectAccessReview",
            "status": status,
        })
        .to_string();
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{out}",
            out.len()
        );
        if conn.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
    }
}

async fn answer(spec: &Value, state: &Shared) -> Value {
    let why = match decide(spec) {
        Decision::NoOpinion => None,
        Decision::Deny(why) => Some(why),
        Decision::PodOfNode {
            node,
            namespace,
            name,
        } => {
            let admin = state.admin.lock().unwrap().clone();
            let bound = match admin {
                Some(k) => tokio::task::spawn_blocking(move || {
                    k.run(&[
                        "-n",
                        &namespace,
                        "get",
                        "pod",
                        &name,
                        "-o",
                        "jsonpath={.spec.nodeName}",
                    ])
                    .ok()
                })
                .await
                .ok()
                .flatten(),
                None => None,
            };
            (bound.as_deref().map(str::trim) != Some(node.as_str()))
                .then(|| format!("no relationship found between node '{node}' and this object"))
        }
    };
    match why {
        None => json!({"allowed": false}),
        Some(why) => {
            let r = &spec["resourceAttributes"];
            state.denied.lock().unwrap().push(format!(
                "{} {} {}/{}: {why}",
                spec["user"].as_str().unwrap_or(""),
                r["verb"].as_str().unwrap_or(""),
                r["resource"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            ));
            json!({"allowed": false, "denied": true, "reason": why})
        }
    }
}

/// Writes the webhook's config for an API server running on this host
/// (the fleet), returning its flags.
pub fn host_args(authz: &NodeAuthorizer, dir: &std::path::Path) -> Result<Vec<String>> {
    let path = dir.join("node-authz.kubeconfig");
    std::fs::write(&path, authz.webhook_kubeconfig())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(NodeAuthorizer::apiserver_args(&path.display().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(user: &str, verb: &str, resource: &str, name: &str) -> Value {
        json!({
            "user": user,
            "group": ["system:nodes", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "name": name, "group": "", "version": "v1"},
        })
    }

    #[test]
    fn a_node_reads_only_its_own_node_as_from_1_32() {
        let me = "system:node:w1";
        assert_eq!(
            decide(&review(me, "get", "nodes", "w1")),
            Decision::NoOpinion
        );
        assert_eq!(
            decide(&review(me, "list", "nodes", "w1")),
            Decision::NoOpinion
        );
        assert_eq!(
            decide(&review(me, "list", "nodes", "")),
            Decision::Deny("node 'w1' cannot read all nodes, only its own Node object".into())
        );
        assert_eq!(
            decide(&review(me, "get", "nodes", "w2")),
            Decision::Deny("node 'w1' cannot read 'w2', only its own Node object".into())
        );
        assert_eq!(
            decide(&review(me, "patch", "nodes", "w1")),
            Decision::NoOpinion
        );
        assert!(matches!(
            decide(&review(me, "get", "pods", "web-1")),
            Decision::PodOfNode { node, .. } if node == "w1"
        ));
        assert_eq!(decide(&review(me, "list", "pods", "")), Decision::NoOpinion);
        assert_eq!(
            decide(&review(me, "get", "configmaps", "x")),
            Decision::NoOpinion
        );
        // Not a node: no opinion.
        let mut admin = review("admin", "list", "nodes", "");
        admin["group"] = json!(["system:masters"]);
        assert_eq!(decide(&admin), Decision::NoOpinion);
    }
}
