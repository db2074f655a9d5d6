//! The critical-path benchmark (`nb-bench critical-path`): a node with the
//! real agent ([`testkit::agentnode::agent_node`]) against the "floor"
//! node, the same units with an agent that only copies the seed
//! kubelet.env into place (what systemd alone costs between the bootstrap
//! unit starting and kubelet running), timed from systemd's own
//! timestamps.

use anyhow::{Result, bail};
use testkit::agentnode::{AgentNodeSpec, agent_node};
use testkit::simnode::SimNode;

/// The floor node: the same node as `spec` (units, files, update_engine),
/// with an "agent" that only copies the seed kubelet.env into place.
pub fn floor_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("no-op-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh\nexec cp /etc/kubernetes/installer/kubelet.env /etc/kubernetes/kubelet.env\n",
    )?;
    no_op_node(spec, agent)
}

/// `spec` with `agent` as the agent, in a `Type=oneshot` unit: the no-op
/// agents do not speak the notification protocol, so their start job ends
/// when they exit, as the agent's unit did before it was `Type=notify`.
fn no_op_node(spec: &AgentNodeSpec, agent: std::path::PathBuf) -> Result<SimNode> {
    let mut spec = spec.clone();
    spec.agent = agent;
    spec.drop_ins.push((
        "k8s-node-bootstrap.service".into(),
        "no-op-oneshot.conf".into(),
        "[Service]\nType=oneshot\nNotifyAccess=none\n".into(),
    ));
    agent_node(&spec)
}

/// The durable floor node: like [`floor_node`], but the copy is made
/// durable the way the agent writes kubelet.env (data synced, renamed into
/// place, directory synced), with coreutils: `dd conv=fsync`, `mv`, `sync
/// DIR` (three processes where the floor has one).
pub fn durable_floor_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join("durable-no-op-agent");
    std::fs::write(
        &agent,
        "#!/bin/sh
set -e
cd /etc/kubernetes
         dd if=installer/kubelet.env of=.kubelet.env.tmp conv=fsync status=none
         mv .kubelet.env.tmp kubelet.env
exec sync /etc/kubernetes
",
    )?;
    no_op_node(spec, agent)
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

/// The critical path in phases, from systemd's timestamps (µs after the
/// bootstrap unit left inactive): where the agent's process started and
/// ended, when its unit became active, when kubelet's start began and
/// when kubelet was active. journald's receive times are no use here: a
/// busy journald shifts them by milliseconds.
pub fn phases(n: &SimNode) -> Result<String> {
    const AGENT: &str = "k8s-node-bootstrap.service";
    let t0 = n.timestamp_us(AGENT, "InactiveExitTimestampMonotonic")?;
    let points = [
        (AGENT, "ExecMainStartTimestampMonotonic", "agent exec"),
        (AGENT, "ExecMainExitTimestampMonotonic", "agent exit"),
        (AGENT, "ActiveEnterTimestampMonotonic", "unit active"),
        (
            "kubelet.service",
            "InactiveExitTimestampMonotonic",
            "kubelet starting",
        ),
        (
            "kubelet.service",
            "ActiveEnterTimestampMonotonic",
            "kubelet active",
        ),
    ];
    let mut line = String::from("phases (ms after the unit started):");
    for (unit, prop, label) in points {
        let t = n.timestamp_us(unit, prop)?;
        line.push_str(&format!(
            " {label} {:.1};",
            t.saturating_sub(t0) as f64 / 1000.0
        ));
    }
    Ok(line)
}
