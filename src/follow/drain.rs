//! Before a minor change the node is drained, as `kubectl drain` does by
//! default: cordoned (`spec.unschedulable`), then each of its pods evicted
//! through the Eviction API, which honours PodDisruptionBudgets (an
//! eviction a budget does not allow now is answered 429 and asked again,
//! within `follow.drain_timeout_secs`). Pure: which pods, the Eviction's
//! body, what an answer means; [`super::api`] asks.
//!
//! Which pods ([`plan`]): not the DaemonSets' (their controller puts
//! them back on the node at once, and they tolerate unschedulable), not
//! static pods' mirrors (the kubelet runs them from files), not pods
//! already finished. Pods being deleted are not evicted again but waited
//! for: the drain is done once they are gone. A pod no controller owns
//! stops the drain (`kubectl drain` wants `--force` for it: evicting it
//! deletes it for good), and so does a pod with an `emptyDir` volume
//! (its data would go with it) unless the operator's ConfigMap says
//! `deleteEmptyDirData: "true"` (`kubectl drain --delete-emptydir-data`);
//! either is found before the node takes a place in the lease, so the
//! change does not start and nothing on the node changes.
//!
//! The drain goes in passes, each a list of the node's pods (by the field
//! selector `spec.nodeName`, which is all a node may list from Kubernetes
//! 1.32) and evictions: the evicted pods are gone when a list no longer
//! shows them (a node may not read a pod by name once it is no longer
//! bound to it).

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

/// What a drain pass does with the node's pods.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// To evict now.
    pub evict: Vec<PodRef>,
    /// Being deleted: waited for.
    pub terminating: Vec<PodRef>,
}

impl Plan {
    /// Nothing left to evict or wait for: the drain is done.
    pub fn done(&self) -> bool {
        self.evict.is_empty() && self.terminating.is_empty()
    }
}

/// Whether a pod has an `emptyDir` volume.
fn has_emptydir(pod: &Value) -> bool {
    pod["spec"]["volumes"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v.get("emptyDir").is_some()))
}

/// The pods of a PodList (`GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`)
/// to evict and to wait for, or why the drain cannot go on
/// (`delete_emptydir_data`: the operator's `deleteEmptyDirData`).
pub fn plan(pods: &Value, delete_emptydir_data: bool) -> Result<Plan, String> {
    let mut out = Plan::default();
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
        if finished || mirror {
            continue;
        }
        let owners = meta["ownerReferences"].as_array();
        let controller = owners.and_then(|o| o.iter().find(|o| o["controller"] == true));
        if controller.is_some_and(|c| c["kind"] == "DaemonSet") {
            continue;
        }
        if !meta["deletionTimestamp"].is_null() {
            out.terminating.push(r);
            continue;
        }
        if controller.is_none() {
            return Err(format!(
                "pod {r} has no controller: evicting it would delete it for good (kubectl drain refuses it too, without --force); move or delete it, then the change goes on"
            ));
        }
        if has_emptydir(p) && !delete_emptydir_data {
            return Err(format!(
                "pod {r} has an emptyDir volume, whose data an eviction deletes (kubectl drain refuses it too, without --delete-emptydir-data); set deleteEmptyDirData: \"true\" in the follow ConfigMap to allow it, or move the pod"
            ));
        }
        out.evict.push(r);
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

    fn names(p: &[PodRef]) -> Vec<String> {
        p.iter().map(|p| p.to_string()).collect()
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
        let p = plan(&list, false).unwrap();
        assert_eq!(names(&p.evict), ["apps/web-1", "apps/db-0"]);
        // Being deleted: waited for, not evicted again.
        assert_eq!(names(&p.terminating), ["apps/going"]);
        assert!(!p.done());
        assert!(
            plan(
                &json!({"items": [pod("agent", Some("DaemonSet"), json!({}))]}),
                false
            )
            .unwrap()
            .done()
        );
    }

    #[test]
    fn a_pod_without_a_controller_stops_the_drain() {
        let list = json!({"items": [pod("web-1", Some("ReplicaSet"), json!({})), pod("pet", None, json!({}))]});
        let e = plan(&list, true).unwrap_err();
        assert!(e.starts_with("pod apps/pet has no controller"), "{e}");
    }

    #[test]
    fn an_emptydir_pod_stops_the_drain_unless_the_operator_allows_it() {
        let cache = json!({"spec": {"volumes": [{"name": "cache", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "x"}}]}});
        let list = json!({"items": [pod("web-1", Some("ReplicaSet"), cache)]});
        let e = plan(&list, false).unwrap_err();
        assert!(
            e.starts_with("pod apps/web-1 has an emptyDir volume")
                && e.contains("deleteEmptyDirData"),
            "{e}"
        );
        assert_eq!(names(&plan(&list, true).unwrap().evict), ["apps/web-1"]);
        // Other volumes are no reason.
        let cfg = json!({"spec": {"volumes": [{"name": "cfg", "configMap": {"name": "x"}}]}});
        let list = json!({"items": [pod("web-2", Some("ReplicaSet"), cfg)]});
        assert_eq!(names(&plan(&list, false).unwrap().evict), ["apps/web-2"]);
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
    }
}
