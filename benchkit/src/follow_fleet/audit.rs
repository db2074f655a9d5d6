//! What the API server's audit log says of a rollout: every write of the
//! follow lease, in the order etcd committed them (each write's
//! `resourceVersion`), read with the agent's own reader
//! (`node_bootstrap::follow::lease::read`), and every request of a node.
//! The rules are checked on that whole history, not on samples:
//! never more holders than `maxChanging`; no take once a node halted the
//! rollout; which node took when.

use node_bootstrap::follow::lease::{self, State};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One committed write of the lease.
#[derive(Debug, Clone)]
pub struct LeaseWrite {
    pub resource_version: u64,
    /// When the API server received it (unix seconds).
    pub at: f64,
    pub user: String,
    /// node -> its entry's state after the write.
    pub entries: BTreeMap<String, State>,
}

/// One request of a node (`system:node:<name>`).
#[derive(Debug, Clone)]
pub struct Request {
    pub node: String,
    pub at: f64,
    pub verb: String,
    pub resource: String,
    pub uri: String,
    pub user_agent: String,
    pub code: u64,
}

/// RFC 3339 with fractions (the audit log's timestamps), unix seconds.
pub fn unix(ts: &str) -> Option<f64> {
    let t = time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e9)
}

/// The committed writes of the lease `name` in the audit log `text`, in
/// commit order.
pub fn lease_writes(text: &str, name: &str) -> Result<Vec<LeaseWrite>, String> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let e: Value = serde_json::from_str(line).map_err(|e| format!("an audit line: {e}"))?;
        let code = e["responseStatus"]["code"].as_u64().unwrap_or(0);
        let writes = matches!(e["verb"].as_str(), Some("update" | "create" | "patch"));
        if e["objectRef"]["resource"] != "configmaps"
            || e["objectRef"]["name"] != name
            || !writes
            || !(200..300).contains(&code)
        {
            continue;
        }
        let obj = &e["responseObject"];
        if obj.is_null() {
            return Err(format!(
                "a write of the lease without its response in the audit log (level RequestResponse needed): {line}"
            ));
        }
        let view = lease::read(Some(obj))?;
        out.push(LeaseWrite {
            resource_version: obj["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|r| r.parse().ok())
                .ok_or("a lease write's resourceVersion does not read")?,
            at: e["requestReceivedTimestamp"]
                .as_str()
                .and_then(unix)
                .unwrap_or(0.0),
            user: e["user"]["username"].as_str().unwrap_or("").to_string(),
            entries: view
                .entries
                .iter()
                .map(|(n, en)| (n.clone(), en.state))
                .collect(),
        });
    }
    out.sort_by_key(|w| w.resource_version);
    Ok(out)
}

/// Every request of a node in the audit log `text`.
pub fn node_requests(text: &str) -> Vec<Request> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| {
            let node = e["user"]["username"]
                .as_str()?
                .strip_prefix("system:node:")?
                .to_string();
            Some(Request {
                node,
                at: unix(e["requestReceivedTimestamp"].as_str()?)?,
                verb: e["verb"].as_str().unwrap_or("").to_string(),
                resource: e["objectRef"]["resource"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                uri: e["requestURI"].as_str().unwrap_or("").to_string(),
                user_agent: e["userAgent"].as_str().unwrap_or("").to_string(),
                code: e["responseStatus"]["code"].as_u64().unwrap_or(0),
            })
        })
        .collect()
}

/// What the history of the lease shows.
#[derive(Debug, Clone, Default)]
pub struct History {
    pub writes: usize,
    /// The most holders (changing or halted) after any write.
    pub max_holders: usize,
    /// Each node's takes (its entry going to `changing` from none).
    pub takes: BTreeMap<String, usize>,
    /// The first node that halted the rollout, and the write at which it
    /// did.
    pub halted: Option<(String, usize)>,
    /// node -> (take time, release time), the first of each.
    pub held: BTreeMap<String, (f64, Option<f64>)>,
}

/// Reads the history; `Err` names the first write that breaks a rule:
/// more holders than `max_changing`, or a take while a halt stands (until
/// the operator removes the halted node's entry).
pub fn check(writes: &[LeaseWrite], max_changing: usize) -> Result<History, String> {
    let mut h = History {
        writes: writes.len(),
        ..History::default()
    };
    let mut before: BTreeMap<String, State> = BTreeMap::new();
    let mut standing: Option<(String, usize)> = None;
    for (i, w) in writes.iter().enumerate() {
        let holders: BTreeSet<&String> = w
            .entries
            .iter()
            .filter(|(_, s)| **s != State::NotReady)
            .map(|(n, _)| n)
            .collect();
        if holders.len() > max_changing {
            return Err(format!(
                "write {i} (resourceVersion {}, by {}): {} holders {holders:?}, maxChanging {max_changing}",
                w.resource_version,
                w.user,
                holders.len()
            ));
        }
        h.max_holders = h.max_holders.max(holders.len());
        if standing
            .as_ref()
            .is_some_and(|(n, _)| w.entries.get(n) != Some(&State::Halted))
        {
            standing = None;
        }
        for (n, s) in &w.entries {
            let was = before.get(n);
            if *s == State::Changing && was.is_none_or(|s| *s == State::NotReady) {
                if let Some((halter, at)) = &standing {
                    return Err(format!(
                        "write {i} (resourceVersion {}): {n} took a place after {halter} halted the rollout at write {at}",
                        w.resource_version
                    ));
                }
                *h.takes.entry(n.clone()).or_default() += 1;
                h.held.entry(n.clone()).or_insert((w.at, None));
            }
            if *s == State::Halted && standing.is_none() {
                standing = Some((n.clone(), i));
                h.halted.get_or_insert((n.clone(), i));
            }
        }
        for n in before.keys().filter(|n| !w.entries.contains_key(*n)) {
            if let Some((_, end @ None)) = h.held.get_mut(n) {
                *end = Some(w.at);
            }
        }
        before = w.entries.clone();
    }
    Ok(h)
}

/// Each node's spans holding a place (changing, from its take to its
/// release or its halt), unix seconds, from the lease's writes.
pub fn spans(writes: &[LeaseWrite]) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let mut open: BTreeMap<String, f64> = BTreeMap::new();
    for w in writes {
        for (n, s) in &w.entries {
            if *s == State::Changing && !open.contains_key(n) {
                open.insert(n.clone(), w.at);
            }
        }
        let closed: Vec<String> = open
            .keys()
            .filter(|n| w.entries.get(*n) != Some(&State::Changing))
            .cloned()
            .collect();
        for n in closed {
            let start = open.remove(&n).expect("open");
            out.entry(n).or_default().push((start, w.at));
        }
    }
    let end = writes.last().map_or(0.0, |w| w.at);
    for (n, start) in open {
        out.entry(n).or_default().push((start, end));
    }
    out
}

/// Whether any request in `requests` is one a node may not make from
/// Kubernetes 1.32 (a list of Nodes, a Node but its own, a pod by name, a
/// pod list without its own field selector) or was refused; the
/// offending ones, described.
pub fn beyond_a_node(requests: &[Request]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| {
            let own_pods = format!("fieldSelector=spec.nodeName%3D{}", r.node);
            let path = r.uri.split('?').next().unwrap_or("");
            let own_node = path == format!("/api/v1/nodes/{}", r.node)
                || path.starts_with(&format!("/api/v1/nodes/{}/", r.node));
            let bad = match (r.resource.as_str(), r.verb.as_str()) {
                ("nodes", "list" | "watch") => true,
                ("nodes", _) => !own_node,
                ("pods", "list") => !r.uri.contains(&own_pods),
                ("pods", "get") => true,
                _ => false,
            };
            bad || r.code == 403
        })
        .map(|r| {
            format!(
                "{} {} {} -> {} at {:.1}",
                r.node, r.verb, r.uri, r.code, r.at
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(rv: u64, at: f64, entries: &[(&str, State)]) -> LeaseWrite {
        LeaseWrite {
            resource_version: rv,
            at,
            user: "system:node:x".into(),
            entries: entries.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
        }
    }

    #[test]
    fn the_history_counts_holders_takes_and_halts() {
        use State::*;
        let ws = [
            write(1, 1.0, &[("a", Changing)]),
            write(2, 2.0, &[("a", Changing), ("b", Changing)]),
            write(3, 3.0, &[("b", Changing)]),
            write(4, 4.0, &[("b", Halted), ("c", NotReady)]),
        ];
        let h = check(&ws, 2).unwrap();
        assert_eq!(h.max_holders, 2);
        assert_eq!(h.takes.len(), 2);
        assert_eq!(h.halted, Some(("b".into(), 3)));
        assert_eq!(h.held["a"], (1.0, Some(3.0)));
        // One at a time: the second write breaks it.
        let e = check(&ws, 1).unwrap_err();
        assert!(e.starts_with("write 1 (resourceVersion 2"), "{e}");
        // A take after the halt.
        let mut late = ws.to_vec();
        late.push(write(5, 5.0, &[("b", Halted), ("d", Changing)]));
        let e = check(&late, 2).unwrap_err();
        assert!(e.contains("d took a place after b halted"), "{e}");
        // Once the operator removed the halted entry, takes go on.
        let mut cleared = ws.to_vec();
        cleared.push(write(5, 5.0, &[]));
        cleared.push(write(6, 6.0, &[("d", Changing)]));
        assert_eq!(check(&cleared, 2).unwrap().takes.len(), 3);
    }

    #[test]
    fn spans_run_from_take_to_release() {
        use State::*;
        let ws = [
            write(1, 1.0, &[("a", Changing)]),
            write(2, 2.0, &[]),
            write(3, 3.0, &[("a", Changing)]),
            write(4, 4.0, &[("a", Halted)]),
            write(5, 5.0, &[("b", Changing)]),
        ];
        let s = spans(&ws);
        assert_eq!(s["a"], [(1.0, 2.0), (3.0, 4.0)]);
        assert_eq!(s["b"], [(5.0, 5.0)]);
    }

    #[test]
    fn what_a_node_may_not_ask_is_found() {
        let r = |verb: &str, resource: &str, uri: &str, code| Request {
            node: "w1".into(),
            at: 0.0,
            verb: verb.into(),
            resource: resource.into(),
            uri: uri.into(),
            user_agent: String::new(),
            code,
        };
        let ok = [
            r("get", "nodes", "/api/v1/nodes/w1", 200),
            r("patch", "nodes", "/api/v1/nodes/w1", 200),
            r(
                "list",
                "pods",
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dw1",
                200,
            ),
            r(
                "get",
                "configmaps",
                "/api/v1/namespaces/kube-system/configmaps/x",
                200,
            ),
        ];
        assert!(beyond_a_node(&ok).is_empty());
        let bad = [
            r("list", "nodes", "/api/v1/nodes", 200),
            r("get", "nodes", "/api/v1/nodes/w2", 200),
            r("list", "pods", "/api/v1/pods", 200),
            r("get", "pods", "/api/v1/namespaces/a/pods/p", 200),
            r(
                "get",
                "configmaps",
                "/api/v1/namespaces/kube-system/configmaps/x",
                403,
            ),
        ];
        assert_eq!(beyond_a_node(&bad).len(), 5);
    }

    #[test]
    fn writes_come_from_the_audit_log_in_commit_order() {
        let line = |rv: u64, data: &str| {
            format!(
                r#"{{"verb":"update","user":{{"username":"system:node:a"}},"objectRef":{{"resource":"configmaps","name":"l"}},"responseStatus":{{"code":200}},"requestReceivedTimestamp":"2026-12-01T00:00:0{rv}.5Z","responseObject":{{"metadata":{{"resourceVersion":"{rv}"}},"data":{data}}}}}"#
            )
        };
        let text = [
            line(3, "{}"),
            line(
                2,
                r#"{"node.a":"{\"state\":\"changing\",\"from\":\"v1\",\"to\":\"v2\",\"since\":1,\"renewed\":1}"}"#,
            ),
            r#"{"verb":"get","objectRef":{"resource":"configmaps","name":"l"},"responseStatus":{"code":200}}"#.into(),
        ]
        .join("\n");
        let ws = lease_writes(&text, "l").unwrap();
        assert_eq!(
            ws.iter().map(|w| w.resource_version).collect::<Vec<_>>(),
            [2, 3]
        );
        assert_eq!(ws[0].entries["a"], State::Changing);
        assert!(ws[1].entries.is_empty());
        assert!((ws[0].at - unix("2026-12-01T00:00:02.5Z").unwrap()).abs() < 1e-6);
    }
}
