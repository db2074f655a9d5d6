//! What a node costs the API server in steady state, from the API server's
//! own audit log: the kubelet's writes of its Node's status and of its
//! lease (and, for context, its reads of its Node), per node per minute,
//! over a window in which the node is Ready and nothing changes on it.
//!
//! The control plane logs, at `Metadata` level, only the requests of
//! `system:nodes` on `nodes`, `nodes/status` and `leases` ([`POLICY`]); an
//! event belongs to node `N` when its user is `system:node:N` (a kubelet
//! with its own credential, as the NodeRestriction admission plugin
//! requires for these writes).

use anyhow::{Context as _, Result};
use serde_json::Value;
use std::path::{Path, PathBuf};
use testkit::kube::rfc3339_epoch_secs;

/// The audit policy: the kubelets' reads and writes of Nodes and leases,
/// nothing else.
pub const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    userGroups: ["system:nodes"]
    verbs: ["get", "create", "update", "patch"]
    resources:
      - group: ""
        resources: ["nodes", "nodes/status"]
      - group: "coordination.k8s.io"
        resources: ["leases"]
  - level: None
"#;

/// The API server's audit log: its policy and log files in a directory
/// that lives as long as this value.
pub struct AuditLog {
    dir: tempfile::TempDir,
}

impl AuditLog {
    pub fn new() -> Result<AuditLog> {
        let dir = tempfile::Builder::new()
            .prefix("nb-bench-audit-")
            .tempdir_in("/var/tmp")?;
        std::fs::write(dir.path().join("policy.yaml"), POLICY)?;
        Ok(AuditLog { dir })
    }

    /// The API server's flags that write this log.
    pub fn apiserver_args(&self) -> Vec<String> {
        vec![
            format!(
                "--audit-policy-file={}",
                self.dir.path().join("policy.yaml").display()
            ),
            format!("--audit-log-path={}", self.path().display()),
            "--audit-log-format=json".into(),
            // One file, never rotated while the benchmark runs.
            "--audit-log-maxsize=0".into(),
        ]
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// Every event logged so far.
    pub fn events(&self) -> Result<Vec<Event>> {
        read_events(&self.path())
    }
}

/// What one audit event says, as far as counting goes.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When the API server received it (seconds since the epoch).
    pub at: f64,
    /// The node it came from (`system:node:<name>`).
    pub node: String,
    pub kind: Kind,
}

/// What a kubelet did to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A patch or update of `nodes/status`.
    StatusWrite,
    /// A create, patch or update of the Node object itself.
    NodeWrite,
    /// A create, update or patch of its lease.
    LeaseWrite,
    /// A get of its Node.
    NodeRead,
    Other,
}

impl Event {
    /// One line of the log, `None` when it is not a completed request of a
    /// node.
    pub fn of(v: &Value) -> Option<Event> {
        if v["stage"] != "ResponseComplete" {
            return None;
        }
        let node = v["user"]["username"]
            .as_str()?
            .strip_prefix("system:node:")?;
        let at = rfc3339_epoch_secs(v["requestReceivedTimestamp"].as_str()?)?;
        let verb = v["verb"].as_str().unwrap_or_default();
        let resource = v["objectRef"]["resource"].as_str().unwrap_or_default();
        let sub = v["objectRef"]["subresource"].as_str().unwrap_or_default();
        let write = matches!(verb, "create" | "update" | "patch");
        let kind = match (resource, sub) {
            ("nodes", "status") if write => Kind::StatusWrite,
            ("nodes", "") if write => Kind::NodeWrite,
            ("nodes", _) if verb == "get" => Kind::NodeRead,
            ("leases", _) if write => Kind::LeaseWrite,
            _ => Kind::Other,
        };
        Some(Event {
            at,
            node: node.to_string(),
            kind,
        })
    }
}

fn read_events(path: &Path) -> Result<Vec<Event>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the audit log {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| Event::of(&v))
        .collect())
}

/// One node's requests per minute over a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    pub minutes: f64,
    pub status_writes: usize,
    pub node_writes: usize,
    pub lease_writes: usize,
    pub node_reads: usize,
}

impl Rates {
    /// Node `node`'s events in `[from, to)` (seconds since the epoch).
    pub fn of(events: &[Event], node: &str, from: f64, to: f64) -> Rates {
        let count = |k: Kind| {
            events
                .iter()
                .filter(|e| e.node == node && e.kind == k && e.at >= from && e.at < to)
                .count()
        };
        Rates {
            minutes: (to - from) / 60.0,
            status_writes: count(Kind::StatusWrite),
            node_writes: count(Kind::NodeWrite),
            lease_writes: count(Kind::LeaseWrite),
            node_reads: count(Kind::NodeRead),
        }
    }

    pub fn per_minute(&self, n: usize) -> f64 {
        n as f64 / self.minutes
    }

    /// Writes of the Node (status or object) per minute.
    pub fn node_status_per_minute(&self) -> f64 {
        self.per_minute(self.status_writes + self.node_writes)
    }

    pub fn lease_per_minute(&self) -> f64 {
        self.per_minute(self.lease_writes)
    }

    pub fn reads_per_minute(&self) -> f64 {
        self.per_minute(self.node_reads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(user: &str, verb: &str, resource: &str, sub: Option<&str>, at: &str) -> Value {
        let mut r = json!({"resource": resource, "name": "w"});
        if let Some(s) = sub {
            r["subresource"] = s.into();
        }
        json!({
            "kind": "Event", "level": "Metadata", "stage": "ResponseComplete",
            "verb": verb, "user": {"username": user, "groups": ["system:nodes"]},
            "objectRef": r, "requestReceivedTimestamp": at,
        })
    }

    #[test]
    fn a_nodes_writes_are_counted_by_kind_in_the_window() {
        let lines = [
            event(
                "system:node:w",
                "patch",
                "nodes",
                Some("status"),
                "2026-12-01T12:00:01.5Z",
            ),
            event(
                "system:node:w",
                "update",
                "leases",
                None,
                "2026-12-01T12:00:10Z",
            ),
            event(
                "system:node:w",
                "update",
                "leases",
                None,
                "2026-12-01T12:00:20Z",
            ),
            event(
                "system:node:w",
                "get",
                "nodes",
                None,
                "2026-12-01T12:00:21Z",
            ),
            event(
                "system:node:w",
                "patch",
                "nodes",
                None,
                "2026-12-01T12:00:30Z",
            ),
            // Another node, another user, another stage, outside the window.
            event(
                "system:node:v",
                "update",
                "leases",
                None,
                "2026-12-01T12:00:10Z",
            ),
            event(
                "admin",
                "patch",
                "nodes",
                Some("status"),
                "2026-12-01T12:00:10Z",
            ),
            event(
                "system:node:w",
                "update",
                "leases",
                None,
                "2026-12-01T12:01:00Z",
            ),
        ];
        let mut text: Vec<String> = lines.iter().map(Value::to_string).collect();
        let mut received = lines[1].clone();
        received["stage"] = "RequestReceived".into();
        text.push(received.to_string());
        text.push("not json".into());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, text.join("\n")).unwrap();
        let events = read_events(&path).unwrap();
        assert_eq!(events.len(), 7, "{events:?}");
        let from = rfc3339_epoch_secs("2026-12-01T12:00:00Z").unwrap();
        let r = Rates::of(&events, "w", from, from + 30.0);
        assert_eq!(
            (r.status_writes, r.node_writes, r.lease_writes, r.node_reads),
            (1, 0, 2, 1),
            "{r:?}"
        );
        assert!((r.lease_per_minute() - 4.0).abs() < 1e-9);
        let r = Rates::of(&events, "w", from, from + 60.0);
        assert_eq!((r.status_writes, r.node_writes), (1, 1));
        assert!((r.node_status_per_minute() - 2.0).abs() < 1e-9);
    }
}
