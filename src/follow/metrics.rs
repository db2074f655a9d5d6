//! The rollout seen from the fleet: `follow` leaves its own textfile,
//! `<metrics.textfile_dir>/node_bootstrap_follow.prom`, beside the agent's
//! (node_exporter reads every `*.prom` there), rendered whole from
//! `state.json` ([`super::record::FollowState`]) by [`render`] (pure) after
//! every run, atomically.
//!
//! | metric | type | labels |
//! | --- | --- | --- |
//! | `node_bootstrap_follow_state` | gauge (0/1) | `state` (unknown, up-to-date, settling, awaiting-operator, waiting, refused, changing, halted) |
//! | `node_bootstrap_follow_kubelet_info` | gauge (1) | `version` (the kubelet's), `target` (what it follows) |
//! | `node_bootstrap_follow_last_check_timestamp_seconds` | gauge | |
//! | `node_bootstrap_follow_changes_total` | counter | `result` (succeeded, rolled-back, aborted) |
//! | `node_bootstrap_follow_last_change_timestamp_seconds` | gauge | `result` |
//! | `node_bootstrap_follow_last_change_duration_seconds` | gauge | |
//! | `node_bootstrap_follow_last_back_after_seconds` | gauge | (the kubelet's restart to the Node Ready with the new version) |
//!
//! Label values are bounded: states, results, Kubernetes versions.

use super::record::{ChangeResult, FollowState, Standing};
use std::fmt::Write as _;

/// The file's name in the textfile directory.
pub const FILE: &str = "node_bootstrap_follow.prom";

fn family(out: &mut String, name: &str, help: &str, kind: &str, samples: &[(String, f64)]) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, v) in samples {
        let _ = writeln!(out, "{name}{labels} {v}");
    }
}

fn label(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// The textfile for `s`.
pub fn render(s: &FollowState) -> String {
    let mut out = String::new();
    let states: Vec<(String, f64)> = Standing::ALL
        .iter()
        .map(|st| {
            (
                label(&[("state", st.name())]),
                f64::from(u8::from(*st == s.standing)),
            )
        })
        .collect();
    family(
        &mut out,
        "node_bootstrap_follow_state",
        "Where following the cluster's Kubernetes version stands on this node (1 for the state it is in).",
        "gauge",
        &states,
    );
    if let Some(v) = &s.current {
        let target = s.target.as_deref().unwrap_or(v);
        family(
            &mut out,
            "node_bootstrap_follow_kubelet_info",
            "The kubelet's version on this node and the version it follows (always 1).",
            "gauge",
            &[(label(&[("version", v), ("target", target)]), 1.0)],
        );
    }
    if let Some(t) = s.last_check {
        family(
            &mut out,
            "node_bootstrap_follow_last_check_timestamp_seconds",
            "When follow last asked the API server, unix time.",
            "gauge",
            &[(String::new(), t as f64)],
        );
    }
    let counts: Vec<(String, f64)> = ChangeResult::ALL
        .iter()
        .map(|r| {
            let n = match r {
                ChangeResult::Succeeded => s.succeeded,
                ChangeResult::RolledBack => s.rolled_back,
                ChangeResult::Aborted => s.aborted,
            };
            (label(&[("result", r.name())]), n as f64)
        })
        .collect();
    family(
        &mut out,
        "node_bootstrap_follow_changes_total",
        "Kubelet changes this node made, by how they ended.",
        "counter",
        &counts,
    );
    if let Some(c) = &s.last_change {
        family(
            &mut out,
            "node_bootstrap_follow_last_change_timestamp_seconds",
            "When the last kubelet change ended, unix time, with how.",
            "gauge",
            &[(label(&[("result", c.result.name())]), c.ended_at as f64)],
        );
        family(
            &mut out,
            "node_bootstrap_follow_last_change_duration_seconds",
            "How long the last kubelet change took, from taking the lease to its end.",
            "gauge",
            &[(
                String::new(),
                c.ended_at.saturating_sub(c.started_at) as f64,
            )],
        );
        if let Some(b) = c.back_after_secs {
            family(
                &mut out,
                "node_bootstrap_follow_last_back_after_seconds",
                "From the kubelet's restart to the Node Ready with the new version, last change.",
                "gauge",
                &[(String::new(), b as f64)],
            );
        }
    }
    out
}

/// Writes the textfile into `dir` (atomically, not synced: derived).
pub fn publish(dir: &std::path::Path, s: &FollowState) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    crate::fsutil::atomic_write_with(
        &dir.join(FILE),
        render(s).as_bytes(),
        crate::fsutil::MODE_PUBLIC,
        crate::fsutil::Durability::AtomicOnly,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::follow::record::Outcome;
    use crate::follow::target::Kind;

    #[test]
    fn a_halted_node_shows_halted_its_versions_and_the_rolled_back_change() {
        let mut s = FollowState {
            current: Some("v1.20.2".into()),
            target: Some("v1.20.3".into()),
            standing: Standing::Halted,
            last_check: Some(1000),
            ..FollowState::default()
        };
        s.ended(Outcome {
            from: "v1.20.2".into(),
            to: "v1.20.3".into(),
            kind: Kind::Patch,
            result: ChangeResult::RolledBack,
            why: Some("not Ready".into()),
            started_at: 900,
            ended_at: 990,
            back_after_secs: None,
        });
        let t = render(&s);
        assert!(
            t.contains("node_bootstrap_follow_state{state=\"halted\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("node_bootstrap_follow_state{state=\"up-to-date\"} 0\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "node_bootstrap_follow_kubelet_info{version=\"v1.20.2\",target=\"v1.20.3\"} 1\n"
            ),
            "{t}"
        );
        assert!(
            t.contains("node_bootstrap_follow_changes_total{result=\"rolled-back\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("node_bootstrap_follow_last_change_duration_seconds 90\n"),
            "{t}"
        );
        assert!(!t.contains("back_after"), "{t}");
        assert!(!t.contains("not Ready"), "no error text in a label: {t}");
    }
}
