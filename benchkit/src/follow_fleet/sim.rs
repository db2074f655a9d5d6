//! A simulated node for the fleet: the real driver and the real cluster
//! seam (`node_bootstrap::follow::api::Cluster`, the node's own identity
//! against the real API server), and this node seam in place of the
//! node's files and systemd. Its "kubelet" is a version in memory; a
//! restart posts the Node's status (Ready, `kubeletVersion`, a heartbeat)
//! as the administrator after the change time, as a kubelet posts its
//! own; the failing node's new kubelet posts NotReady instead.

use node_bootstrap::cluster::apiclient::ApiClient;
use node_bootstrap::cluster::version::KubeVersion;
use node_bootstrap::error::{Error, Result};
use node_bootstrap::follow::plan::Change;
use node_bootstrap::follow::record::{ENV, Files, KUBELET_CONFIG, Set, stamp};
use node_bootstrap::follow::seams::NodeSeam;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Unix seconds, with fractions.
pub fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Which restart to the target fails (shared by the whole fleet).
#[derive(Debug, Default)]
pub struct FailPlan {
    /// The n-th restart to the target (1-based) brings a kubelet that
    /// never posts Ready.
    pub nth: Option<usize>,
    pub restarts: AtomicUsize,
    /// The node that got it.
    pub failing: Mutex<Option<String>>,
}

/// One kubelet restart: (node, version, when).
pub type Restart = (String, String, f64);

pub struct SimNode {
    pub name: String,
    pub installed: Arc<Mutex<String>>,
    pub files: Files,
    pub admin: Rc<ApiClient>,
    /// From a restart to the Node posting.
    pub change: Duration,
    pub target: String,
    pub fail: Arc<FailPlan>,
    pub restarts: Arc<Mutex<Vec<Restart>>>,
    /// Status posts in flight (awaited before a round ends).
    pub posting: Rc<RefCell<Vec<tokio::task::JoinHandle<()>>>>,
}

/// The Node's status as a kubelet posts it.
pub fn status(version: &str, ready: bool) -> serde_json::Value {
    let now = node_bootstrap::follow::lease::rfc3339(now_f64() as u64);
    json!({"status": {
        "conditions": [{
            "type": "Ready",
            "status": if ready { "True" } else { "False" },
            "reason": if ready { "KubeletReady" } else { "KubeletNotReady" },
            "message": if ready { "kubelet is posting ready status" } else { "the simulated kubelet of the failing node is not ready" },
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }],
        "nodeInfo": {"kubeletVersion": version},
    }})
}

/// Posts `name`'s status as the administrator.
pub async fn post_status(admin: &ApiClient, name: &str, version: &str, ready: bool) -> Result<()> {
    let (code, answer) = admin
        .send_json(
            reqwest::Method::PATCH,
            &format!("/api/v1/nodes/{name}/status"),
            "application/merge-patch+json",
            &status(version, ready),
        )
        .await?;
    if code != 200 {
        return Err(Error::retryable(format!(
            "posting {name}'s status: HTTP {code}: {answer}"
        )));
    }
    Ok(())
}

impl NodeSeam for SimNode {
    fn now(&self) -> u64 {
        now_f64() as u64
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
    fn current_version(&self) -> Result<KubeVersion> {
        KubeVersion::parse(&self.installed.lock().unwrap()).map_err(Error::internal)
    }
    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>> {
        Ok(None)
    }
    async fn check(&self, _to: &str) -> Result<()> {
        Ok(())
    }
    async fn prepare(&self, change: &mut Change) -> Result<()> {
        let env = |v: &str| format!("KUBELET_IMAGE_TAG=\"{v}\"\n");
        let mine = stamp(change);
        for (set, v) in [(Set::Previous, &change.from), (Set::Next, &change.to)] {
            self.files.save_set(
                set,
                &mine,
                &[(ENV, Some(env(v).as_bytes())), (KUBELET_CONFIG, None)],
            )?;
        }
        Ok(())
    }
    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()> {
        let v = match set {
            Set::Next => &change.to,
            Set::Previous => &change.from,
        };
        *self.installed.lock().unwrap() = v.clone();
        Ok(())
    }
    async fn restart_kubelet(&self) -> Result<()> {
        let v = self.installed.lock().unwrap().clone();
        self.restarts
            .lock()
            .unwrap()
            .push((self.name.clone(), v.clone(), now_f64()));
        let broken = v == self.target && {
            let mut failing = self.fail.failing.lock().unwrap();
            if failing.as_deref() == Some(&self.name) {
                true
            } else {
                let n = self.fail.restarts.fetch_add(1, Ordering::SeqCst) + 1;
                let hit = self.fail.nth == Some(n);
                if hit {
                    *failing = Some(self.name.clone());
                }
                hit
            }
        };
        let (admin, name, change) = (self.admin.clone(), self.name.clone(), self.change);
        let post = tokio::task::spawn_local(async move {
            tokio::time::sleep(change).await;
            if let Err(e) = post_status(&admin, &name, &v, !broken).await {
                eprintln!("fleet: {e}");
            }
        });
        self.posting.borrow_mut().push(post);
        Ok(())
    }
}
