//! One Node as the API server shows it, watched from before its node boots
//! (`kubectl get nodes --field-selector metadata.name=NAME --watch -o json`):
//! each change is stamped with the host's clock as it arrives, so the
//! moments of interest are those the API server made visible, not a poll's
//! granularity. The nodes share the host's clock (simulated nodes) or are
//! timed from the host as well.
//!
//! Ready, as a user means it: the Ready condition True **and** no
//! `node.kubernetes.io/not-ready` taint left (the node lifecycle controller
//! lifts it after it saw the condition; until then nothing without a
//! toleration is scheduled there).

use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::io::BufReader;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use testkit::kube::{Kubectl, rfc3339_epoch_secs};

/// The taint the node lifecycle controller keeps on a Node until it has
/// seen it Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// What one Node object says, as far as Ready goes.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeState {
    pub ready: bool,
    pub not_ready_taint: bool,
    /// The Ready condition's `lastTransitionTime` (API server's clock,
    /// whole seconds).
    pub ready_since: Option<f64>,
    /// The Ready condition's message (why not ready), empty without one.
    pub ready_message: String,
}

impl NodeState {
    pub fn from_json(n: &Value) -> NodeState {
        let cond = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready");
        NodeState {
            ready: cond.is_some_and(|c| c["status"] == "True"),
            not_ready_taint: n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|t| t["key"] == NOT_READY_TAINT),
            ready_since: cond
                .and_then(|c| c["lastTransitionTime"].as_str())
                .and_then(rfc3339_epoch_secs),
            ready_message: cond
                .and_then(|c| c["message"].as_str())
                .unwrap_or_default()
                .to_string(),
        }
    }

    /// Ready as a user means it (module docs).
    pub fn usable(&self) -> bool {
        self.ready && !self.not_ready_taint
    }
}

/// When the Node reached each point (host clock, seconds since the epoch).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Milestones {
    /// The Node object first seen (the kubelet registered it).
    pub registered: Option<f64>,
    /// The Ready condition first seen True.
    pub ready_condition: Option<f64>,
    /// Ready and the not-ready taint gone, first seen.
    pub usable: Option<f64>,
    /// The Ready condition's `lastTransitionTime` when it was first seen True.
    pub ready_since: Option<f64>,
    /// Each new message of the Ready condition until Ready (when first
    /// seen, the message): why the node was not ready, in order.
    pub not_ready_reasons: Vec<(f64, String)>,
}

impl Milestones {
    /// Takes in one observed state of the Node at `at`.
    pub fn observe(&mut self, at: f64, s: &NodeState) {
        self.registered.get_or_insert(at);
        if self.ready_condition.is_none()
            && self.not_ready_reasons.last().map(|r| &r.1) != Some(&s.ready_message)
        {
            self.not_ready_reasons.push((at, s.ready_message.clone()));
        }
        if s.ready && self.ready_condition.is_none() {
            self.ready_condition = Some(at);
            self.ready_since = s.ready_since;
        }
        if s.usable() {
            self.usable.get_or_insert(at);
        }
    }
}

/// A running watch of one Node; stops when dropped.
pub struct NodeWatch {
    name: String,
    child: Child,
    seen: Arc<Mutex<Milestones>>,
}

pub fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl NodeWatch {
    /// Starts watching Node `name` as the cluster's administrator.
    pub fn start(kubectl: &Kubectl, name: &str) -> Result<NodeWatch> {
        let mut child = kubectl
            .command()
            .args([
                "get",
                "nodes",
                "--watch",
                "-o",
                "json",
                "--request-timeout=0",
            ])
            .arg(format!("--field-selector=metadata.name={name}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kubectl --watch")?;
        let out = child.stdout.take().context("kubectl's stdout")?;
        let seen = Arc::new(Mutex::new(Milestones::default()));
        let shared = seen.clone();
        std::thread::spawn(move || {
            let stream = serde_json::Deserializer::from_reader(BufReader::new(out));
            for v in stream.into_iter::<Value>() {
                let Ok(v) = v else { break };
                let at = epoch_secs(SystemTime::now());
                let items = match v["items"].as_array() {
                    Some(items) => items.clone(),
                    None => vec![v],
                };
                let mut m = shared.lock().unwrap();
                for n in &items {
                    m.observe(at, &NodeState::from_json(n));
                }
            }
        });
        Ok(NodeWatch {
            name: name.into(),
            child,
            seen,
        })
    }

    /// Waits until the Node is Ready and untainted (module docs).
    pub fn wait_usable(&mut self, timeout: Duration) -> Result<Milestones> {
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.seen.lock().unwrap().clone();
            if m.usable.is_some() {
                return Ok(m);
            }
            if let Some(st) = self.child.try_wait()? {
                bail!("the watch of node {} ended ({st}): {m:?}", self.name);
            }
            if Instant::now() > deadline {
                bail!(
                    "node {} not Ready and untainted within {timeout:?}: {m:?}",
                    self.name
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for NodeWatch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, taints: &[&str]) -> Value {
        json!({
            "metadata": {"name": "w"},
            "spec": {"taints": taints.iter().map(|k| json!({"key": k, "effect": "NoSchedule"})).collect::<Vec<_>>()},
            "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": ready, "lastTransitionTime": "2026-11-25T07:30:00Z"},
            ]},
        })
    }

    #[test]
    fn ready_means_the_condition_and_no_not_ready_taint() {
        let mut m = Milestones::default();
        m.observe(
            1.0,
            &NodeState::from_json(&node("False", &[NOT_READY_TAINT])),
        );
        m.observe(
            2.0,
            &NodeState::from_json(&node("True", &[NOT_READY_TAINT])),
        );
        assert_eq!(m.usable, None, "the taint is still there");
        m.observe(3.0, &NodeState::from_json(&node("True", &["other"])));
        m.observe(4.0, &NodeState::from_json(&node("True", &[])));
        assert_eq!(m.registered, Some(1.0));
        assert_eq!(m.ready_condition, Some(2.0));
        assert_eq!(m.usable, Some(3.0));
        assert_eq!(m.ready_since, Some(1_795_591_800.0));
        // Without a Ready condition at all: not ready.
        let bare = json!({"metadata": {"name": "w"}});
        assert!(!NodeState::from_json(&bare).usable());
    }
}
