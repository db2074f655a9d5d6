//! Before a minor change the node is drained, as `kubectl drain` does by
//! default: cordoned (`spec.unschedulable`), then each of its pods evicted
//! through the Eviction API, which honours PodDisruptionBudgets (an
//! eviction a budget does not allow now is answered 429 and asked again,
//! within `follow.drain_timeout_secs`). Pure: which pods, the Eviction's
//! body, what an answer means; [`super::api`] asks.
//!
//! Which pods ([`to_evict`]): not the DaemonSets' (their controller puts
//! them back on the node at once, and they tolerate unschedulable), not
//! static pods' mirrors (the kubelet runs them from files), not pods
//! already finished or being deleted. A pod no controller owns stops the
//! drain (`kubectl drain` wants `--force` for it: evicting it deletes it
//! for good); the change does not start, nothing on the node changed.
//! Pods with `emptyDir` volumes are evicted (their data goes, as with
//! `kubectl drain --delete-emptydir-data`).

use serde_json::{Value, json};

/// A pod to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pods of a PodList (`GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`)
/// to evict, or why the drain cannot go on.
pub fn to_evict(pods: &Value) -> Result<Vec<PodRef>, String> {
    let mut out = Vec::new();
    for p in pods["items"].as_array().into_iter().flatten() {
        let meta = &p["metadata"];
        let r = PodRef {
            namespace: meta["namespace"].as_str().unwrap_or("default").to_string(),
            name: meta["name"].as_str().unwrap_or_default().to_string(),
            uid: meta["uid"].as_str().unwrap_or_default().to_string(),
        };
        let finished = matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
        let mirror = meta["annotations"]
            .get("kubernetes.io/config.mirror")
            .is_some();
        if finished || mirror || !meta["deletionTimestamp"].is_null() {
            continue;
        }
        let owners = meta["ownerReferences"].as_array();
        let controller = owners.and_then(|o| o.iter().find(|o| o["controller"] == true));
        match controller {
            Some(c) if c["kind"] == "DaemonSet" => continue,
            Some(_) => out.push(r),
            None => {
                return Err(format!(
                    "pod {r} has no controller: evicting it would delete it for good (kubectl drain refuses it too, without --force); move or delete it, then the change goes on"
                ));
            }
        }
    }
    Ok(out)
}

/// The Eviction API's group/version the API server at `minor` serves
/// (`policy/v1` from 1.22, `policy/v1beta1` before; 1.25 serves only v1).
pub fn eviction_api(minor: u64) -> &'static str {
    if minor >= 22 {
        "policy/v1"
    } else {
        "policy/v1beta1"
    }
}

/// The body of `POST .../pods/<name>/eviction`.
pub fn eviction(pod: &PodRef, api_version: &str) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": "Eviction",
        "metadata": { "name": pod.name, "namespace": pod.namespace },
        "deleteOptions": { "preconditions": { "uid": pod.uid } },
    })
}

/// What an eviction's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Evicted {
    /// Accepted (201), or the pod is gone already (404, or another pod
    /// by that name: 409 on the uid precondition).
    Yes,
    /// Not now (429: a PodDisruptionBudget does not allow it yet); the
    /// API server's words.
    NotYet(String),
    /// Refused for good (anything else; e.g. 500 when two budgets cover
    /// the pod).
    No(String),
}

pub fn evicted(status: u16, body: &Value) -> Evicted {
    let said = body["message"].as_str().unwrap_or_default().to_string();
    match status {
        200..=299 | 404 | 409 => Evicted::Yes,
        429 => Evicted::NotYet(said),
        code => Evicted::No(format!("HTTP {code}: {said}")),
    }
}

/// Whether the pod evicted as `pod` is gone from the node: no such pod,
/// or one of another uid.
pub fn gone(pod: &PodRef, current: Option<&Value>) -> bool {
    current.is_none_or(|p| p["metadata"]["uid"].as_str() != Some(pod.uid.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, owner: Option<&str>, extra: Value) -> Value {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}")},
            "status": {"phase": "Running"},
        });
        if let Some(kind) = owner {
            p["metadata"]["ownerReferences"] =
                json!([{"kind": kind, "name": "x", "controller": true}]);
        }
        merge(&mut p, extra);
        p
    }

    fn merge(a: &mut Value, b: Value) {
        match (a, b) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    #[test]
    fn controllers_pods_are_evicted_daemonsets_mirrors_and_finished_ones_are_not() {
        let list = json!({"items": [
            pod("web-1", Some("ReplicaSet"), json!({})),
            pod("db-0", Some("StatefulSet"), json!({})),
            pod("agent", Some("DaemonSet"), json!({})),
            pod("static", Some("Node"), json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}})),
            pod("job-done", Some("Job"), json!({"status": {"phase": "Succeeded"}})),
            pod("going", Some("ReplicaSet"), json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})),
        ]});
        let names: Vec<String> = to_evict(&list)
            .unwrap()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(names, ["apps/web-1", "apps/db-0"]);
    }

    #[test]
    fn a_pod_without_a_controller_stops_the_drain() {
        let list = json!({"items": [pod("web-1", Some("ReplicaSet"), json!({})), pod("pet", None, json!({}))]});
        let e = to_evict(&list).unwrap_err();
        assert!(e.starts_with("pod apps/pet has no controller"), "{e}");
    }

    #[test]
    fn evictions_speak_the_servers_version() {
        assert_eq!(eviction_api(20), "policy/v1beta1");
        assert_eq!(eviction_api(25), "policy/v1");
        let p = PodRef {
            namespace: "apps".into(),
            name: "web-1".into(),
            uid: "u1".into(),
        };
        let body = eviction(&p, "policy/v1beta1");
        assert_eq!(body["metadata"]["name"], "web-1");
        assert_eq!(body["deleteOptions"]["preconditions"]["uid"], "u1");
        assert_eq!(evicted(201, &json!({})), Evicted::Yes);
        assert_eq!(evicted(404, &json!({})), Evicted::Yes);
        let budget =
            json!({"message": "Cannot evict pod as it would violate the pod's disruption budget."});
        assert!(
            matches!(evicted(429, &budget), Evicted::NotYet(m) if m.contains("disruption budget"))
        );
        assert!(
            matches!(evicted(500, &json!({"message": "more than one PodDisruptionBudget"})), Evicted::No(m) if m.starts_with("HTTP 500"))
        );
        assert!(gone(&p, None));
        assert!(gone(&p, Some(&json!({"metadata": {"uid": "u2"}}))));
        assert!(!gone(&p, Some(&json!({"metadata": {"uid": "u1"}}))));
    }
}
