//! The repository's alert rules (`monitoring/node-bootstrap.rules.yml`)
//! evaluated by Prometheus's own `promtool test rules` against what a node
//! published: the host tier's join tests and the real cluster's stuck
//! worker both ask [`join_alert_fires_on`]; the day-two test asks
//! [`follow_halted_alert_fires_on`] of the node whose change was rolled back.

use anyhow::{Context as _, Result, bail};
use serde_json::json;
use std::process::Command;

/// Whether `NodeBootstrapNotReadyInCluster` fires on `textfile` (a node's
/// `node_bootstrap.prom`) as its series, labelled `instance`, stay for an
/// hour with kubelet.env's timestamp moved to promtool's clock (0): not
/// at 10 minutes, and at 25 with the rule's labels and annotations. Other
/// `_seconds` series are left out (their values are wall-clock times).
pub fn join_alert_fires_on(textfile: &str, instance: &str) -> Result<()> {
    let rules = crate::project_root().join("monitoring/node-bootstrap.rules.yml");
    let series = series_of(textfile, instance, "x60", |name, value| {
        if name.starts_with("node_bootstrap_kubelet_env_timestamp_seconds") {
            Some("0")
        } else if name.contains("_seconds") {
            None
        } else {
            Some(value)
        }
    })?;
    let test = json!({
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "NodeBootstrapNotReadyInCluster", "exp_alerts": []},
                {"eval_time": "25m", "alertname": "NodeBootstrapNotReadyInCluster",
                 "exp_alerts": [{"exp_labels": {"severity": "warning", "instance": instance}, "exp_annotations": {
                     "summary": format!("{instance}: not Ready in the cluster 25m 0s after kubelet.env"),
                     "description": format!("{instance} wrote kubelet.env more than 15 minutes ago and its Node is not Ready in the cluster. Where the join stands: node_bootstrap_join_state{{instance=\"{instance}\"}} == 1; on the node: `node-bootstrap status` (the cluster line) and `journalctl -x -u k8s-node-bootstrap -u kubelet`."),
                 }}]},
            ],
        }],
    });
    run_test(&test, "NodeBootstrapNotReadyInCluster", instance, textfile)?;
    Ok(())
}

/// Whether `NodeBootstrapFollowHalted` fires on `textfile` (a node's
/// `node_bootstrap_follow.prom`) as its series, labelled `instance`, stay
/// for ten minutes: not at once (the rule's `for: 1m`), and at 5 minutes
/// with the rule's labels and summary. `_seconds` series are left out
/// (wall-clock values).
pub fn follow_halted_alert_fires_on(textfile: &str, instance: &str) -> Result<()> {
    let rules = crate::project_root().join("monitoring/node-bootstrap.rules.yml");
    let series = series_of(textfile, instance, "x10", |name, value| {
        (!name.contains("_seconds")).then_some(value)
    })?;
    let test = json!({
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "0m", "alertname": "NodeBootstrapFollowHalted", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "NodeBootstrapFollowHalted",
                 "exp_alerts": [{"exp_labels": {"severity": "critical", "instance": instance, "state": "halted"}, "exp_annotations": {
                     "summary": format!("{instance}: kubelet change rolled back; the cluster's node rollout is halted here"),
                     "description": format!("node-bootstrap follow on {instance} changed the kubelet, the Node did not come back Ready with the new version, and the previous kubelet was put back. No other node changes until the halt is cleared. On the node: `node-bootstrap status`, `journalctl -x -u node-bootstrap-follow -u kubelet`; fix the release, then clear the halt (docs/operators.md, \"When a node does not come back\")."),
                 }}]},
            ],
        }],
    });
    run_test(&test, "NodeBootstrapFollowHalted", instance, textfile)?;
    Ok(())
}

/// A node's textfile as promtool's input series, labelled `instance`,
/// each held `repeat` (`x60`) at the value `value_of(name, value)` gives,
/// or left out when it gives `None`.
fn series_of<'a>(
    textfile: &'a str,
    instance: &str,
    repeat: &str,
    value_of: impl Fn(&str, &'a str) -> Option<&'a str>,
) -> Result<Vec<serde_json::Value>> {
    let mut series = Vec::new();
    for line in textfile
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, value) = line
            .rsplit_once(' ')
            .with_context(|| format!("a textfile line without a value: {line}"))?;
        let Some(value) = value_of(name, value) else {
            continue;
        };
        let labelled = match name.split_once('{') {
            Some((n, l)) => format!("{n}{{instance=\"{instance}\",{l}"),
            None => format!("{name}{{instance=\"{instance}\"}}"),
        };
        series.push(json!({"series": labelled, "values": format!("{value}{repeat}")}));
    }
    Ok(series)
}

/// Runs `promtool test rules` on `test`; an error names the alert that
/// did not fire as expected on `instance`'s `textfile`.
fn run_test(test: &serde_json::Value, alert: &str, instance: &str, textfile: &str) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("test.yml");
    std::fs::write(&file, serde_json::to_vec_pretty(test)?)?;
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .context("running promtool")?;
    if !out.status.success() {
        bail!(
            "promtool test rules: {alert} did not fire as expected on {instance}'s textfile:\n{}{}\n{textfile}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
