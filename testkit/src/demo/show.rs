//! What the demos print of a node: the agent's journal records with their
//! structured fields, read from the running node or, after the node went
//! down (the agent's reboot), from its persistent journal on disk; files
//! and command output, indented under the step that shows them.

use crate::simnode::SimNode;
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::io::Write;

/// The agent's unit.
pub const AGENT_UNIT: &str = "k8s-node-bootstrap.service";

/// The agent's journal records on `n` (`journalctl -o json -u` the agent's
/// unit, every boot), from the running node or, when it is down, from its
/// journal files.
pub fn agent_records(n: &SimNode) -> Result<Vec<Value>> {
    let args = ["--no-pager", "-o", "json", "-u", AGENT_UNIT];
    let text = if n.is_running() {
        let mut argv = vec!["journalctl"];
        argv.extend(args);
        String::from_utf8_lossy(&n.exec(&argv)?.stdout).into_owned()
    } else {
        let dir = journal_dir(n)?;
        let out = std::process::Command::new("journalctl")
            .arg(format!("--directory={dir}"))
            .args(args)
            .output()
            .context("running journalctl on the node's journal files")?;
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// The node's persistent journal directory, on the host (`/var/log/journal/<machine id>`).
fn journal_dir(n: &SimNode) -> Result<String> {
    let dir = n.upper().join("var/log/journal");
    for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            return Ok(p.display().to_string());
        }
    }
    bail!("no journal under {}", dir.display())
}

/// Prints the records of `records` after the first `already`, each as
/// `prefix` + [`describe`]; returns how many records there are.
pub fn print_new(
    out: &mut dyn Write,
    records: &[Value],
    already: usize,
    prefix: &str,
) -> Result<usize> {
    for r in records.iter().skip(already) {
        writeln!(out, "{prefix}{}", describe(r))?;
    }
    Ok(records.len())
}

/// Like [`print_new`], but only the events an operator searches for: the
/// agent's records with a `MESSAGE_ID` (run started, each step done or
/// failed, the reboot requested, the node bootstrapped, a package
/// refused), each in one line ([`summary`], cut at [`WIDTH`]).
pub fn print_events(
    out: &mut dyn Write,
    records: &[Value],
    already: usize,
    prefix: &str,
) -> Result<usize> {
    for r in records.iter().skip(already) {
        if r.get("MESSAGE_ID").is_some() && r["_COMM"] == "node-bootstrap" {
            cut(out, prefix, &summary(r))?;
        }
    }
    Ok(records.len())
}

/// One line for an event: a step's outcome in words where the demo knows
/// the step's result, else its message and fields ([`describe`]).
pub fn summary(entry: &Value) -> String {
    let field = |k: &str| entry[k].as_str().unwrap_or_default();
    let step = field("STEP");
    let result: Option<Value> = entry["RESULT"]
        .as_str()
        .and_then(|r| serde_json::from_str(r).ok());
    match result {
        Some(r) if !step.is_empty() => format!("{step:<16} {}", step_result(step, &r)),
        _ if !field("REASON").is_empty() => format!(
            "{:<16} reboot requested: {}{}",
            "reboot",
            field("REASON"),
            if field("WIPE_DOCKER_DATADIR") == "true" {
                "; docker's old datadir wiped on the way down"
            } else {
                ""
            }
        ),
        _ if !field("ERROR").is_empty() => format!("{step:<16} FAILED: {}", field("ERROR")),
        _ => describe(entry),
    }
}

/// What a step's result says, in words, for the steps of a worker's
/// first boot; other steps' scalar fields as `key=value`.
fn step_result(step: &str, r: &Value) -> String {
    let s = |k: &str| match &r[k] {
        Value::String(v) => v.clone(),
        Value::Null => "-".into(),
        v => v.to_string(),
    };
    let confirmed = r.get("confirmed_in_boot").is_some();
    match step {
        "cluster-version" => match r["source"]["url"].as_str() {
            Some(url) => format!("{} from the API server {url}", s("version")),
            None => format!(
                "{} from the {}",
                s("version"),
                r["source"]["kind"].as_str().unwrap_or("seed")
            ),
        },
        "runtime" => format!(
            "{} for Kubernetes {} (runtime.name {}); kubelet: {} ({})",
            s("runtime"),
            s("kubernetes"),
            s("requested"),
            s("kubelet"),
            s("kubelet_why")
        ),
        "kubelet-sysext" => format!(
            "kubelet {} ({} for the cluster's {}) from {}, signed: {}, merged with systemd-sysext",
            s("version"),
            s("rule"),
            s("cluster_version"),
            s("url"),
            s("signed")
        ),
        "containerd" => format!(
            "{} through CRI {}, config {} ({}), cgroup driver {}",
            s("runtime"),
            s("cri_api"),
            s("config"),
            s("config_source"),
            s("cgroup_driver")
        ),
        "os-update" if confirmed => format!("confirmed: the node booted OS {}", s("new_version")),
        "os-update" if r["new_version"].is_null() => {
            format!("OS {}: {}", s("current_version"), s("outcome"))
        }
        "os-update" => format!(
            "OS {} -> {} through update_engine: {}",
            s("current_version"),
            s("new_version"),
            s("outcome")
        ),
        "docker-addon" if confirmed => format!("confirmed: docker {} runs", s("docker_next")),
        "docker-addon" => format!(
            "docker {} -> {} ({}, from the signed mirror), reboot needed: {}",
            s("docker_running"),
            s("docker_next"),
            s("backend"),
            s("reboot_needed")
        ),
        "reboot" => format!("the node rebooted ({})", s("reason")),
        "kubelet-env" => format!("{} written: image tag {}", s("path"), s("image_tag")),
        _ => r
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| !v.is_object() && !v.is_array())
            .map(|(k, _)| format!("{k}={}", s(k)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Journal fields that say nothing a reader of the demo needs.
const NOISE: &[&str] = &[
    "MESSAGE",
    "PRIORITY",
    "SYSLOG_IDENTIFIER",
    "TARGET",
    "CODE_FILE",
    "CODE_LINE",
    "CODE_FUNC",
    "MESSAGE_ID",
    "SYSLOG_FACILITY",
    "SYSLOG_PID",
    "SYSLOG_TIMESTAMP",
    "UNIT",
    "INVOCATION_ID",
    "JOB_ID",
    "JOB_TYPE",
    "JOB_RESULT",
    "EXIT_CODE",
    "EXIT_STATUS",
];

/// "MESSAGE  field=value …" for the structured fields the agent logs.
pub fn describe(entry: &Value) -> String {
    let msg = entry["MESSAGE"].as_str().unwrap_or("").to_string();
    let Some(obj) = entry.as_object() else {
        return msg;
    };
    let fields: Vec<String> = obj
        .iter()
        .filter(|(k, _)| {
            !k.starts_with('_')
                && !NOISE.contains(&k.as_str())
                && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        })
        .map(|(k, v)| {
            let v = v
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string());
            format!("{}={v}", k.to_lowercase())
        })
        .collect();
    if fields.is_empty() {
        msg
    } else {
        format!("{msg:<42} {}", fields.join(" "))
    }
}

/// The width the demo's screen is written for.
pub const WIDTH: usize = 100;

/// Prints `text` after `label` (padded to 12 columns), its words wrapped
/// at [`WIDTH`] under the first line's start.
pub fn labelled(out: &mut dyn Write, label: &str, text: &str) -> Result<()> {
    let mut line = format!("{label:<12}");
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.len() + 1 + word.len() > WIDTH {
            writeln!(out, "{line}")?;
            line = " ".repeat(12);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    writeln!(out, "{line}")?;
    Ok(())
}

/// Prints each line of `text` after `indent`, cut at [`WIDTH`] (`…`).
pub fn cut(out: &mut dyn Write, indent: &str, text: &str) -> Result<()> {
    for line in text.lines() {
        let line = format!("{indent}{line}");
        match line.char_indices().nth(WIDTH - 1) {
            Some((i, _)) if line.chars().count() > WIDTH => writeln!(out, "{}…", &line[..i])?,
            _ => writeln!(out, "{line}")?,
        }
    }
    Ok(())
}

/// Prints each line of `text` after `indent`.
pub fn indented(out: &mut dyn Write, indent: &str, text: &str) -> Result<()> {
    for line in text.lines() {
        writeln!(out, "{indent}{line}")?;
    }
    Ok(())
}

/// A node's state journal steps: `name status result` lines.
pub fn state_journal_lines(n: &SimNode) -> Vec<String> {
    let Some(j) = crate::agentnode::state_journal(n) else {
        return vec![];
    };
    j["steps"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, rec)| {
            format!(
                "{name:<16} {:<8} attempts={} {}",
                rec["status"].as_str().unwrap_or("?"),
                rec["attempts"],
                rec["result"]
            )
        })
        .collect()
}

/// `node-bootstrap status` on the node: its exit code and output.
pub fn status(n: &SimNode) -> Result<(i32, String)> {
    let out = n.exec(&[crate::agentnode::AGENT_PATH, "status"])?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_record_shows_its_message_and_the_agents_fields_only() {
        let r = json!({
            "MESSAGE": "cluster version found",
            "STEP": "cluster-version",
            "VERSION": "v1.20.2",
            "PRIORITY": "6",
            "_PID": "42",
            "CODE_LINE": "7",
        });
        assert_eq!(
            describe(&r),
            format!(
                "{:<42} step=cluster-version version=v1.20.2",
                "cluster version found"
            )
        );
        assert_eq!(describe(&json!({"MESSAGE": "hello"})), "hello");
    }

    #[test]
    fn an_event_shows_its_steps_outcome_in_one_line() {
        let done = |step: &str, result: Value| {
            summary(
                &json!({"MESSAGE": "step done", "MESSAGE_ID": "x", "STEP": step, "RESULT": result.to_string()}),
            )
        };
        assert_eq!(
            done(
                "os-update",
                json!({"current_version": "1632.3.0", "new_version": "1688.5.3", "outcome": "reboot-pending"})
            ),
            format!(
                "{:<16} OS 1632.3.0 -> 1688.5.3 through update_engine: reboot-pending",
                "os-update"
            )
        );
        assert_eq!(
            done(
                "cluster-version",
                json!({"version": "v1.20.2", "source": {"kind": "api-server", "url": "https://a/version"}})
            ),
            format!(
                "{:<16} v1.20.2 from the API server https://a/version",
                "cluster-version"
            )
        );
        assert_eq!(
            done(
                "runtime",
                json!({"runtime": "containerd", "requested": "containerd", "kubernetes": "1.20", "kubelet_rules": "1.20",
                    "kubelet": "sysext", "kubelet_why": "auto: Flatcar 4459.2.0 has no kubelet-wrapper"})
            ),
            format!(
                "{:<16} containerd for Kubernetes 1.20 (runtime.name containerd); kubelet: sysext (auto: Flatcar 4459.2.0 has no kubelet-wrapper)",
                "runtime"
            )
        );
        assert_eq!(
            done("assets", json!({"assets": "none", "n": 2, "list": [1]})),
            format!("{:<16} assets=none n=2", "assets")
        );
        let mut out = Vec::new();
        labelled(&mut out, "real", &"word ".repeat(30)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.lines().all(|l| l.len() <= WIDTH), "{text}");
        assert!(text.starts_with("real        word word"), "{text}");
        assert!(
            text.lines().nth(1).unwrap().starts_with("            word"),
            "{text}"
        );
        let mut out = Vec::new();
        cut(&mut out, "  ", &format!("{}\nshort", "é".repeat(200))).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().next().unwrap().chars().count(),
            WIDTH,
            "{text}"
        );
        assert_eq!(text.lines().nth(1), Some("  short"));
        let failed = json!({"MESSAGE": "step failed", "MESSAGE_ID": "x", "STEP": "os-update", "ERROR": "boom"});
        assert_eq!(
            summary(&failed),
            format!("{:<16} FAILED: boom", "os-update")
        );
    }
}
