//! The cluster-wide semaphore, the follow lease: one ConfigMap
//! (`follow.namespace`/`follow.lease`, `kube-system/node-bootstrap-follow-lease`)
//! whose holders are the nodes changing their kubelet. Pure: reading it and
//! the NodeList, deciding whether this node may take a place, and the
//! object written back (the I/O, with the API server's optimistic
//! concurrency on `resourceVersion`: a write over a version someone else
//! replaced is refused with 409, is [`super::api`]).
//!
//! Why a ConfigMap and not a `coordination.k8s.io` Lease: the agent asks
//! with the node's own identity (`system:node:<name>`), and the
//! NodeRestriction admission plugin refuses every Lease write of a node
//! but to its own heartbeat Lease (`kube-node-lease/<name>`), whatever
//! RBAC allows (Kubernetes 1.20's `plugin/pkg/admission/noderestriction`,
//! `admitLease`; seen in the node test: HTTP 403). It does not restrict
//! ConfigMaps, so RBAC can let nodes update this one. The data keys keep
//! a lease's names:
//!
//! | key | what |
//! | --- | --- |
//! | `holders` | the holders, a JSON list: node, from, to, since, renewed, and `halted` with why once a change was rolled back |
//! | `holderIdentity` | their names, comma-separated (`kubectl get configmap ... -o yaml` at a glance) |
//! | `leaseTransitions` | every take, counted |
//! | `acquireTime`, `renewTime` | the last take's and the last write's (RFC 3339) |
//! | `leaseDurationSeconds` | after how long without a renewal a holder shows as stale |
//!
//! A node may take a place ([`may_take`]) only when: nobody's change was
//! rolled back and left halted (the rollout halts at the first node that
//! did not come back: the operator looks, fixes, and clears the holders,
//! docs/operators.md); the operator has not paused the rollout; fewer than
//! `maxChanging` hold it; this node is Ready; and the nodes not Ready,
//! counting this one (its change may take it out), would be no more than
//! `maxNotReady`. A holder keeps its place until it releases it: a node
//! that loses power in the middle of its change finishes it when it comes
//! back, and one that never comes back holds the rollout as a halted one
//! does (it shows as stale: not renewed for longer than
//! `leaseDurationSeconds`).

use super::policy::Policy;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The data key holding the holders.
pub const HOLDERS: &str = "holders";

/// One node with a place in the lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub node: String,
    pub from: String,
    pub to: String,
    /// Unix seconds.
    pub since: u64,
    pub renewed: u64,
    /// Why its change was rolled back: the rollout halts here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
}

/// The lease as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseView {
    /// `None`: there is no lease ConfigMap (the follow-rbac module creates
    /// it). A take then POSTs one, refused (403) unless an operator granted
    /// nodes `create`; the refusal says to apply follow-rbac.
    pub resource_version: Option<String>,
    pub holders: Vec<Holder>,
    pub transitions: u64,
    /// The object as read: a write keeps what others put there (labels,
    /// other annotations) and changes only the agent's fields.
    pub object: Option<Value>,
}

impl LeaseView {
    pub fn holder(&self, node: &str) -> Option<&Holder> {
        self.holders.iter().find(|h| h.node == node)
    }

    pub fn halted(&self) -> Option<&Holder> {
        self.holders.iter().find(|h| h.halted.is_some())
    }
}

/// Reads the lease's ConfigMap (`None`: there is none).
pub fn read(lease: Option<&Value>) -> Result<LeaseView, String> {
    let Some(l) = lease else {
        return Ok(LeaseView::default());
    };
    let data = &l["data"];
    let holders = match data[HOLDERS].as_str() {
        None => Vec::new(),
        Some(s) => serde_json::from_str(s).map_err(|e| {
            format!("its data.{HOLDERS} is not the agent's list of holders ({e}): {s:?}")
        })?,
    };
    Ok(LeaseView {
        resource_version: l["metadata"]["resourceVersion"]
            .as_str()
            .map(str::to_string),
        holders,
        transitions: data["leaseTransitions"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .unwrap_or(0),
        object: Some(l.clone()),
    })
}

/// The whole ConfigMap for `view` (a PUT over `view.resource_version`, or
/// the body of the POST that creates it): what others put on the object
/// is kept, the data keys of the module docs written.
pub fn render(
    namespace: &str,
    name: &str,
    view: &LeaseView,
    duration_secs: u64,
    now: u64,
) -> Value {
    let holders = serde_json::to_string(&view.holders).expect("holders serialize");
    let mut lease = view.object.clone().unwrap_or_else(|| {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace},
        })
    });
    let metadata = &mut lease["metadata"];
    match &view.resource_version {
        Some(rv) => metadata["resourceVersion"] = json!(rv),
        None => {
            if let Some(m) = metadata.as_object_mut() {
                m.remove("resourceVersion");
            }
        }
    }
    if !lease["data"].is_object() {
        lease["data"] = json!({});
    }
    let data = &mut lease["data"];
    let names: Vec<&str> = view.holders.iter().map(|h| h.node.as_str()).collect();
    data[HOLDERS] = json!(holders);
    data["holderIdentity"] = json!(names.join(","));
    data["leaseTransitions"] = json!(view.transitions.to_string());
    data["leaseDurationSeconds"] = json!(duration_secs.to_string());
    data["renewTime"] = json!(rfc3339(now));
    if let Some(since) = view.holders.iter().map(|h| h.since).max() {
        data["acquireTime"] = json!(rfc3339(since));
    }
    lease
}

/// `unix` as RFC 3339, UTC.
pub fn rfc3339(unix: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix as i64)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// How the cluster's nodes stand, as far as a take goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Readiness {
    /// This node's Node is Ready.
    pub me_ready: bool,
    /// Other nodes whose Ready condition is not True.
    pub not_ready: Vec<String>,
}

/// Reads a NodeList for `me`.
pub fn readiness(nodes: &Value, me: &str) -> Readiness {
    let mut r = Readiness::default();
    for n in nodes["items"].as_array().into_iter().flatten() {
        let name = n["metadata"]["name"].as_str().unwrap_or_default();
        let ready = n["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .is_some_and(|c| c["status"] == "True");
        if name == me {
            r.me_ready = ready;
        } else if !ready {
            r.not_ready.push(name.to_string());
        }
    }
    r
}

/// Whether this node may hold a place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// It holds one already (a change under way, or interrupted).
    Held,
    /// It may take one.
    Take,
    /// Not now, and why.
    Wait { why: String },
}

/// The rule of the module docs.
pub fn may_take(
    view: &LeaseView,
    me: &str,
    policy: &Policy,
    ready: &Readiness,
    now: u64,
    duration_secs: u64,
) -> Grant {
    if view.holder(me).is_some() {
        return Grant::Held;
    }
    if let Some(h) = view.halted() {
        return Grant::Wait {
            why: format!(
                "the rollout is halted at {}: its change {} -> {} was rolled back ({}); the operator clears it (docs/operators.md, \"When a node does not come back\")",
                h.node,
                h.from,
                h.to,
                h.halted.as_deref().unwrap_or_default()
            ),
        };
    }
    if policy.paused {
        return Grant::Wait {
            why: "the operator paused the rollout (data.paused of the follow ConfigMap)".into(),
        };
    }
    if view.holders.len() >= policy.max_changing as usize {
        let who: Vec<String> = view
            .holders
            .iter()
            .map(|h| {
                let stale = now.saturating_sub(h.renewed) > duration_secs;
                format!(
                    "{} ({} -> {}{})",
                    h.node,
                    h.from,
                    h.to,
                    if stale {
                        ", not renewed for longer than the lease: did it go down?"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        return Grant::Wait {
            why: format!(
                "{} of {} places taken: {}",
                view.holders.len(),
                policy.max_changing,
                who.join(", ")
            ),
        };
    }
    if !ready.me_ready {
        return Grant::Wait {
            why: "this node is not Ready: only a Ready node changes its kubelet".into(),
        };
    }
    // The change may take this node out too: it counts.
    if ready.not_ready.len() + 1 > policy.max_not_ready as usize {
        return Grant::Wait {
            why: format!(
                "{} other node(s) not Ready ({}); the follow ConfigMap's maxNotReady is {}",
                ready.not_ready.len(),
                ready.not_ready.join(", "),
                policy.max_not_ready
            ),
        };
    }
    Grant::Take
}

/// `view` with `me` holding a place for `from` -> `to`.
pub fn take(view: &LeaseView, me: &str, from: &str, to: &str, now: u64) -> LeaseView {
    let mut v = view.clone();
    v.holders.retain(|h| h.node != me);
    v.holders.push(Holder {
        node: me.into(),
        from: from.into(),
        to: to.into(),
        since: now,
        renewed: now,
        halted: None,
    });
    v.transitions += 1;
    v
}

/// `view` with `me`'s place renewed (taken again if it was removed: a
/// change under way keeps going), and marked halted with `halted`.
pub fn renew(view: &LeaseView, me: &Holder, now: u64, halted: Option<&str>) -> LeaseView {
    let mut v = view.clone();
    match v.holders.iter_mut().find(|h| h.node == me.node) {
        Some(h) => {
            h.renewed = now;
            if halted.is_some() {
                h.halted = halted.map(str::to_string);
            }
        }
        None => v.holders.push(Holder {
            renewed: now,
            halted: halted.map(str::to_string),
            ..me.clone()
        }),
    }
    v
}

/// `view` without `me`.
pub fn release(view: &LeaseView, me: &str) -> LeaseView {
    let mut v = view.clone();
    v.holders.retain(|h| h.node != me);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> Readiness {
        Readiness {
            me_ready: true,
            not_ready: vec![],
        }
    }

    fn holding(nodes: &[&str]) -> LeaseView {
        let mut v = LeaseView::default();
        for n in nodes {
            v = take(&v, n, "v1.20.2", "v1.20.3", 100);
        }
        v
    }

    #[test]
    fn one_at_a_time_by_default() {
        let p = Policy::default();
        assert_eq!(
            may_take(&LeaseView::default(), "w1", &p, &ready(), 100, 300),
            Grant::Take
        );
        let v = holding(&["w1"]);
        assert_eq!(may_take(&v, "w1", &p, &ready(), 100, 300), Grant::Held);
        let Grant::Wait { why } = may_take(&v, "w2", &p, &ready(), 100, 300) else {
            panic!()
        };
        assert_eq!(why, "1 of 1 places taken: w1 (v1.20.2 -> v1.20.3)");
        // Stale: said so, still held.
        let Grant::Wait { why } = may_take(&v, "w2", &p, &ready(), 1000, 300) else {
            panic!()
        };
        assert!(why.contains("did it go down?"), "{why}");
        // maxChanging 2: a second place.
        let p2 = Policy {
            max_changing: 2,
            max_not_ready: 2,
            ..Policy::default()
        };
        let r = Readiness {
            me_ready: true,
            not_ready: vec!["w1".into()],
        };
        assert_eq!(may_take(&v, "w2", &p2, &r, 100, 300), Grant::Take);
    }

    #[test]
    fn a_halted_holder_stops_everyone_until_it_is_cleared() {
        let v = holding(&["w1"]);
        let me = v.holder("w1").unwrap().clone();
        let halted = renew(
            &v,
            &me,
            150,
            Some("not Ready with kubelet v1.20.3 within 300 s"),
        );
        let p = Policy {
            max_changing: 5,
            ..Policy::default()
        };
        let Grant::Wait { why } = may_take(&halted, "w2", &p, &ready(), 200, 300) else {
            panic!()
        };
        assert!(why.starts_with("the rollout is halted at w1: its change v1.20.2 -> v1.20.3 was rolled back (not Ready"), "{why}");
        // The halted node itself still holds its place.
        assert_eq!(may_take(&halted, "w1", &p, &ready(), 200, 300), Grant::Held);
        assert_eq!(
            may_take(&release(&halted, "w1"), "w2", &p, &ready(), 200, 300),
            Grant::Take
        );
    }

    #[test]
    fn not_ready_nodes_pause_or_stop_takes() {
        let p = Policy::default();
        let me_down = Readiness {
            me_ready: false,
            not_ready: vec![],
        };
        assert!(
            matches!(may_take(&LeaseView::default(), "w1", &p, &me_down, 0, 300),
            Grant::Wait { why } if why.contains("this node is not Ready"))
        );
        let other_down = Readiness {
            me_ready: true,
            not_ready: vec!["w3".into()],
        };
        let Grant::Wait { why } = may_take(&LeaseView::default(), "w1", &p, &other_down, 0, 300)
        else {
            panic!()
        };
        assert_eq!(
            why,
            "1 other node(s) not Ready (w3); the follow ConfigMap's maxNotReady is 1"
        );
        let paused = Policy {
            paused: true,
            ..Policy::default()
        };
        assert!(
            matches!(may_take(&LeaseView::default(), "w1", &paused, &ready(), 0, 300),
            Grant::Wait { why } if why.contains("paused"))
        );
        let two = Policy {
            max_not_ready: 2,
            ..Policy::default()
        };
        assert_eq!(
            may_take(&LeaseView::default(), "w1", &two, &other_down, 0, 300),
            Grant::Take
        );
    }

    #[test]
    fn the_lease_round_trips_through_its_object() {
        let v = holding(&["w1", "w2"]);
        let mut obj = render("kube-system", "node-bootstrap-follow-lease", &v, 300, 100);
        assert_eq!(obj["kind"], "ConfigMap");
        assert_eq!(obj["data"]["holderIdentity"], "w1,w2");
        assert_eq!(obj["data"]["leaseTransitions"], "2");
        assert_eq!(obj["data"]["renewTime"], "1970-01-01T00:01:40Z");
        assert!(obj["metadata"].get("resourceVersion").is_none());
        obj["metadata"]["resourceVersion"] = json!("42");
        let back = read(Some(&obj)).unwrap();
        assert_eq!(back.holders, v.holders);
        assert_eq!(back.resource_version.as_deref(), Some("42"));
        assert_eq!(back.transitions, 2);
        let empty = render(
            "kube-system",
            "l",
            &release(&release(&back, "w1"), "w2"),
            300,
            100,
        );
        assert_eq!(empty["data"]["holderIdentity"], "", "{empty}");
        assert_eq!(empty["data"]["holders"], "[]", "{empty}");
        // What others put there stays.
        let mut labelled = obj.clone();
        labelled["metadata"]["labels"] = json!({"team": "infra"});
        labelled["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/last-applied-configuration": "{}"});
        let again = render(
            "kube-system",
            "l",
            &read(Some(&labelled)).unwrap(),
            300,
            100,
        );
        assert_eq!(again["metadata"]["labels"]["team"], "infra");
        assert_eq!(
            again["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
            "{}"
        );
        assert_eq!(again["metadata"]["resourceVersion"], "42");
        // Someone else's data is refused, not overwritten blindly.
        obj["data"][HOLDERS] = json!("w9");
        assert!(
            read(Some(&obj))
                .unwrap_err()
                .contains("not the agent's list")
        );
        // renew re-adds a holder the operator removed mid-change.
        let me = v.holder("w1").unwrap().clone();
        let gone = release(&v, "w1");
        assert_eq!(
            renew(&gone, &me, 120, None).holder("w1").unwrap().renewed,
            120
        );
    }

    #[test]
    fn readiness_reads_the_node_list() {
        let list = json!({"items": [
            {"metadata": {"name": "w1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"name": "w2"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
            {"metadata": {"name": "w3"}, "status": {}},
            {"metadata": {"name": "m1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        ]});
        assert_eq!(
            readiness(&list, "w1"),
            Readiness {
                me_ready: true,
                not_ready: vec!["w2".into(), "w3".into()]
            }
        );
        assert!(!readiness(&list, "w3").me_ready);
    }
}
