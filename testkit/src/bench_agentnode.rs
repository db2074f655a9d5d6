//! A simulated node running the real agent, for the benchmarks and the
//! reliability campaign: the project's units, the agent binary at
//! `/opt/bin/node-bootstrap`, the kubelet-wrapper stand-in, the seed
//! kubelet.env, an os-release, the agent's config and kubeconfig, and
//! optionally the fake update_engine as `update-engine.service` on the node's
//! own system bus.
//!
//! Also the "floor" node of the critical-path benchmark: the same units with
//! an agent that only copies the seed kubelet.env into place (what systemd
//! alone costs between the bootstrap unit starting and kubelet running).

use crate::simnode::SimNode;
use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};

/// The six units of a node (path units only matter on the bootkube master).
pub const UNITS: &[&str] = &[
    "k8s-node-bootstrap.service",
    "kubelet.service",
    "bootkube.path",
    "bootkube.service",
    "tectonic.path",
    "tectonic.service",
];

pub const SEED_KUBELET_ENV: &str =
    "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n";
pub const OS_RELEASE: &str =
    "ID=coreos\nVERSION=1520.3.0\nVERSION_ID=1520.3.0\nCOREOS_BOARD=amd64-usr\n";
/// Where the node's os-release lives (Flatcar's path, the agent's default);
/// the boot after an update the fake update_engine staged switches it.
pub const OS_RELEASE_PATH: &str = crate::agentnode::OS_RELEASE;
pub const KUBECONFIG_PATH: &str = "/etc/kubernetes/kubeconfig";
pub const CONFIG_PATH: &str = "/etc/node-bootstrap/config.json";
pub const AGENT_PATH: &str = "/opt/bin/node-bootstrap";

/// The fake update_engine as a unit of the node.
#[derive(Debug, Clone)]
pub struct UpdateEngineUnit {
    /// Host path of the `fake-update-engine` binary (visible inside the node
    /// at the same path, through the overlay's lower dir).
    pub binary: PathBuf,
    /// Extra arguments, e.g. `--scenario update --step-ms 100`.
    pub args: Vec<String>,
}

/// What to put on the node.
#[derive(Debug, Clone)]
pub struct AgentNodeSpec {
    pub name: String,
    /// Host path of the agent binary.
    pub agent: PathBuf,
    /// The agent's config (JSON text).
    pub config: String,
    /// The kubeconfig text, if any.
    pub kubeconfig: Option<String>,
    pub update_engine: Option<UpdateEngineUnit>,
    /// Drop-ins: (unit, name, contents).
    pub drop_ins: Vec<(String, String, String)>,
    /// More unit files to install, and units to enable.
    pub extra_units: Vec<PathBuf>,
    pub extra_enable: Vec<String>,
}

impl AgentNodeSpec {
    pub fn new(name: &str, agent: &Path, config: impl Into<String>) -> Self {
        AgentNodeSpec {
            name: name.to_string(),
            agent: agent.to_path_buf(),
            config: config.into(),
            kubeconfig: None,
            update_engine: None,
            drop_ins: Vec::new(),
            extra_units: Vec::new(),
            extra_enable: Vec::new(),
        }
    }
}

fn install_common(n: &SimNode, units_dir: Option<&Path>) -> Result<()> {
    let units: Vec<PathBuf> = UNITS
        .iter()
        .map(|u| match units_dir {
            Some(d) => d.join(u),
            None => crate::unit_file(u),
        })
        .collect();
    n.install_units(&units)?;
    n.install_file(
        &crate::standin("kubelet-wrapper"),
        "/usr/lib/coreos/kubelet-wrapper",
        0o755,
    )?;
    n.write(
        "/etc/kubernetes/installer/kubelet.env",
        SEED_KUBELET_ENV,
        0o644,
    )?;
    n.write(OS_RELEASE_PATH, OS_RELEASE, 0o644)?;
    Ok(())
}

/// A node (not booted) with the real agent as described by `spec`.
pub fn agent_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let mut n = SimNode::new(&spec.name)?;
    install_common(&n, None)?;
    n.install_file(&spec.agent, AGENT_PATH, 0o755)
        .with_context(|| format!("installing the agent {}", spec.agent.display()))?;
    n.write(CONFIG_PATH, &spec.config, 0o644)?;
    if let Some(kc) = &spec.kubeconfig {
        n.write(KUBECONFIG_PATH, kc, 0o600)?;
    }
    let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
    if let Some(ue) = &spec.update_engine {
        n.install_file(
            &crate::standin("com.coreos.update1.conf"),
            "/etc/dbus-1/system.d/com.coreos.update1.conf",
            0o644,
        )?;
        let unit = format!(
            "[Unit]\nDescription=update_engine stand-in\n\n[Service]\nType=dbus\nBusName=com.coreos.update1\n\
             ExecStart={} {}\n\n[Install]\nWantedBy=multi-user.target\n",
            ue.binary.display(),
            ue.args.join(" ")
        );
        n.write("/etc/systemd/system/update-engine.service", unit, 0o644)?;
        enable.push("update-engine.service");
        crate::fake_update_engine::boot_into_pending_updates(&mut n, OS_RELEASE_PATH);
    }
    n.install_units(&spec.extra_units)?;
    enable.extend(spec.extra_enable.iter().map(String::as_str));
    for (unit, name, contents) in &spec.drop_ins {
        n.drop_in(unit, name, contents)?;
    }
    n.enable(&enable)?;
    Ok(n)
}

/// The floor node: the same node as `spec` (units, files, update_engine),
/// with an "agent" that only copies the seed kubelet.env into place.
pub fn floor_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("no-op-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh\nexec cp /etc/kubernetes/installer/kubelet.env /etc/kubernetes/kubelet.env\n",
    )?;
    let mut spec = spec.clone();
    spec.agent = agent;
    agent_node(&spec)
}

/// Microseconds from `k8s-node-bootstrap.service` leaving inactive to
/// `kubelet.service` entering active, from systemd's own monotonic
/// timestamps (both on the node's clock).
pub fn critical_path_us(n: &SimNode) -> Result<u64> {
    let start = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "InactiveExitTimestampMonotonic",
    )?;
    let end = n.timestamp_us("kubelet.service", "ActiveEnterTimestampMonotonic")?;
    if start == 0 || end == 0 || end < start {
        bail!(
            "unusable timestamps: k8s-node-bootstrap InactiveExit={start}, kubelet ActiveEnter={end}\n{}",
            n.diagnostics()
        );
    }
    Ok(end - start)
}

/// Microseconds the bootstrap unit's main process (`ExecStart=`, the
/// agent) ran, from systemd's timestamps.
pub fn agent_runtime_us(n: &SimNode) -> Result<u64> {
    let start = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "ExecMainStartTimestampMonotonic",
    )?;
    let end = n.timestamp_us(
        "k8s-node-bootstrap.service",
        "ExecMainExitTimestampMonotonic",
    )?;
    if start == 0 || end < start {
        bail!("unusable timestamps: ExecMainStart={start}, ExecMainExit={end}");
    }
    Ok(end - start)
}

/// Checks the node's kubelet.env: present, parseable systemd EnvironmentFile
/// lines, every seed key, and the image tag of `cluster_version`.
pub fn check_kubelet_env(text: &str, cluster_version: &str) -> Result<()> {
    let want_tag = cluster_version.replace('+', "_");
    let mut keys = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            bail!("kubelet.env line {}: {line:?} is not KEY=value", i + 1);
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        keys.insert(k.trim().to_string(), v.to_string());
    }
    if !text.ends_with('\n') {
        bail!("kubelet.env does not end with a newline (truncated?): {text:?}");
    }
    match keys.get("KUBELET_IMAGE_URL").map(String::as_str) {
        Some("quay.io/coreos/hyperkube") => {}
        other => bail!("kubelet.env KUBELET_IMAGE_URL is {other:?}: {text:?}"),
    }
    match keys.get("KUBELET_IMAGE_TAG") {
        Some(t) if *t == want_tag => {}
        other => bail!("kubelet.env KUBELET_IMAGE_TAG is {other:?}, want {want_tag:?}: {text:?}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_env_check_accepts_the_real_file_and_rejects_truncation() {
        let good = "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n";
        check_kubelet_env(good, "v1.9.6+coreos.0").unwrap();
        assert!(check_kubelet_env(&good[..good.len() - 5], "v1.9.6+coreos.0").is_err());
        assert!(check_kubelet_env(&good[..40], "v1.9.6+coreos.0").is_err());
        assert!(check_kubelet_env(good, "v1.10.2+coreos.0").is_err());
        assert!(check_kubelet_env("", "v1.9.6+coreos.0").is_err());
    }
}
