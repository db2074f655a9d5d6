//! The main job: a worker's first boot on a simulated node (a real systemd
//! as PID 1 in a namespace) with the real agent, printed step by step.
//!
//! The API server stand-in reports the cluster version, the update_engine
//! stand-in offers an OS update, a package server offers signed docker
//! packages; the agent finds the version, updates the OS, installs the
//! docker the cluster needs for the OS it boots next, reboots once (wiping
//! docker's old datadir on the way down), confirms the new OS and docker,
//! writes kubelet.env and kubelet starts; the next boot skips the agent.
//!
//! Run with `./scripts/demo.sh` (root; it builds the workspace first).

use anyhow::{Context, Result, bail};
use serde_json::json;
use std::time::{Duration, Instant};
use testkit::agentnode::{AgentNode, Cluster, OS_RELEASE, state_journal};
use testkit::apiserver::ApiServerOptions;
use testkit::simnode::{BootEnd, SimNode};
use testkit::torcx_fixtures::{AddonRig, docker_archive};

const T: Duration = Duration::from_secs(120);
const OS: &str = "1632.3.0";
const NEXT_OS: &str = "1688.5.3";

fn main() -> Result<()> {
    testkit::simnode::can_run().context("the demo needs root and util-linux")?;
    let t0 = Instant::now();
    println!("== node-bootstrap demo: a worker's first boot on a simulated node ==\n");
    let cluster = Cluster::start(ApiServerOptions {
        git_version: "v1.9.6+coreos.0".into(),
        ..Default::default()
    })?;
    println!(
        "API server stand-in  {} reports gitVersion v1.9.6+coreos.0 (client certificates required)",
        cluster.api.url()
    );
    println!(
        "update_engine        stand-in on the node's system bus offers OS {NEXT_OS} (node runs {OS})"
    );
    let rig = AddonRig::new(OS);
    let e112 = rig.publish_package("1.12", &docker_archive("1.12.2"));
    let e1703 = rig.publish_package("17.03", &docker_archive("17.03.2"));
    rig.publish_manifest(OS, &[e112.clone(), e1703.clone()]);
    rig.publish_manifest(NEXT_OS, &[e112, e1703]);
    println!(
        "package server       {} serves signed torcx manifests, docker 1.12 and 17.03",
        rig.server.url("/")
    );
    println!(
        "runtime mappings     kubernetes 1.9 -> docker 17.03, else 1.12; the OS image ships docker 1.12"
    );
    println!("seed kubelet.env     KUBELET_IMAGE_TAG=v1.8.4_coreos.0 (provisioning-time guess)\n");
    let addon: serde_json::Value = serde_json::from_str(&rig.config_json_for_root("", json!({})))?;
    let mut node = AgentNode::new("demo")
        .kubeconfig(cluster.kubeconfig())
        .update_engine(&[
            "--scenario",
            "update",
            "--step-ms",
            "100",
            "--new-version",
            NEXT_OS,
        ])
        .config(json!({"addon": addon["addon"]}))
        .shipped_restart_delay()
        .build()?;
    install_os_image_parts(&node, &rig)?;

    node.boot()?;
    println!("[boot 1] systemd is up; k8s-node-bootstrap.service runs `node-bootstrap run`");
    let end = node.wait_down(T)?;
    let seen = print_agent_log(&node, 0, true)?;
    if end != BootEnd::Reboot {
        bail!("expected the node to reboot, it ended as {end:?}");
    }
    println!(
        "[boot 1] the node rebooted; kubelet.env written: {}; docker's old datadir left: {}\n",
        yes_no(node.exists("/etc/kubernetes/kubelet.env")),
        yes_no(node.exists("/var/lib/docker/image/marker"))
    );

    node.boot()?;
    node.wait_active_state("kubelet.service", "active", T)?;
    println!(
        "[boot 2] the node boots OS {} (update_engine switched partitions)",
        os_version(&node)
    );
    let docker = node.exec(&["/run/torcx/bin/docker", "--version"])?;
    println!(
        "[boot 2] torcx applied the next profile: {}",
        String::from_utf8_lossy(&docker.stdout).trim()
    );
    let seen = print_agent_log(&node, seen, false)?;
    println!("[boot 2] kubelet.service is active; /etc/kubernetes/kubelet.env:");
    for line in node
        .read("/etc/kubernetes/kubelet.env")
        .unwrap_or_default()
        .lines()
    {
        println!("           {line}");
    }
    print_journal_summary(&node);
    print_status(&node);

    node.exec(&["systemctl", "reboot"])?;
    node.wait_down(T)?;
    node.boot()?;
    node.wait_active_state("kubelet.service", "active", T)?;
    let _ = print_agent_log(&node, seen, false)?;
    println!(
        "\n[boot 3] k8s-node-bootstrap.service condition: {} (skipped: kubelet.env exists); kubelet.service: {}",
        node.prop("k8s-node-bootstrap.service", "ConditionResult")?,
        node.prop("kubelet.service", "ActiveState")?
    );
    node.shutdown()?;
    println!(
        "\n== done in {:.1}s: 3 boots, 1 reboot requested by the agent (OS and docker together), kubelet running ==",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What a Container Linux image brings: torcx (the real boot-time
/// generator), the vendor docker 1.12 with its profile, docker's datadir;
/// and what provisioning wrote: the runtime mappings and the keyring.
fn install_os_image_parts(n: &SimNode, rig: &AddonRig) -> Result<()> {
    n.write(
        OS_RELEASE,
        testkit::torcx_fixtures::os_release(OS, &rig.board),
        0o644,
    )?;
    testkit::torcx::install_generator(n)?;
    n.write(
        "/etc/kubernetes/installer/runtime-mappings.yaml",
        testkit::torcx_fixtures::runtime_mappings_yaml("1.9", &["17.03", "1.12"]),
        0o644,
    )?;
    n.write(
        "/etc/kubernetes/installer/keyring.asc",
        rig.key.public_armored(),
        0o644,
    )?;
    n.write(
        "/usr/share/torcx/profiles/vendor.json",
        r#"{"kind":"profile-manifest-v0","value":{"images":[{"name":"docker","reference":"1.12"}]}}"#,
        0o644,
    )?;
    n.write(
        "/usr/share/torcx/store/docker:1.12.torcx.tgz",
        docker_archive("1.12.2"),
        0o644,
    )?;
    n.write("/var/lib/docker/image/marker", "old docker data\n", 0o644)?;
    Ok(())
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn os_version(n: &SimNode) -> String {
    n.read(OS_RELEASE)
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("VERSION_ID=").map(str::to_string))
        })
        .unwrap_or_else(|| "?".into())
}

/// Prints the agent's journal lines not printed yet, with their structured
/// fields; returns how many there are.
fn print_agent_log(n: &SimNode, already: usize, from_disk: bool) -> Result<usize> {
    let args = [
        "--no-pager",
        "-o",
        "json",
        "-u",
        "k8s-node-bootstrap.service",
    ];
    // After a reboot the node is down: read its persistent journal offline.
    let text = if from_disk {
        let dir = find_journal_dir(&n.upper().join("var/log/journal"))?;
        let out = std::process::Command::new("journalctl")
            .arg(format!("--directory={dir}"))
            .args(args)
            .output()?;
        String::from_utf8_lossy(&out.stdout).into_owned()
    } else {
        let mut argv = vec!["journalctl"];
        argv.extend(args);
        String::from_utf8_lossy(&n.exec(&argv)?.stdout).into_owned()
    };
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for l in lines.iter().skip(already) {
        println!("    | {}", describe(l));
    }
    Ok(lines.len())
}

/// "MESSAGE  FIELD=value …" for the fields the agent logs.
fn describe(entry: &serde_json::Value) -> String {
    let msg = entry["MESSAGE"].as_str().unwrap_or("").to_string();
    let Some(obj) = entry.as_object() else {
        return msg;
    };
    let skip = [
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
    let fields: Vec<String> = obj
        .iter()
        .filter(|(k, _)| {
            !k.starts_with('_')
                && !skip.contains(&k.as_str())
                && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        })
        .map(|(k, v)| {
            format!(
                "{}={}",
                k.to_lowercase(),
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            )
        })
        .collect();
    if fields.is_empty() {
        msg
    } else {
        format!("{msg:<42} {}", fields.join(" "))
    }
}

fn find_journal_dir(dir: &std::path::Path) -> Result<String> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            return Ok(p.display().to_string());
        }
    }
    bail!("no journal under {}", dir.display())
}

fn print_journal_summary(n: &SimNode) {
    let Some(j) = state_journal(n) else { return };
    println!("[boot 2] state journal (/var/lib/node-bootstrap/state.json):");
    if let Some(steps) = j["steps"].as_object() {
        for (name, rec) in steps {
            println!(
                "           {name:<16} {:<8} attempts={} {}",
                rec["status"].as_str().unwrap_or("?"),
                rec["attempts"],
                rec["result"]
            );
        }
    }
}

fn print_status(n: &SimNode) {
    let Ok(out) = n.exec(&["/opt/bin/node-bootstrap", "status"]) else {
        return;
    };
    if out.status.code() == Some(2)
        || String::from_utf8_lossy(&out.stderr).contains("not available")
    {
        return;
    }
    println!(
        "[boot 2] node-bootstrap status (exit {}):",
        out.status.code().unwrap_or(-1)
    );
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("           {line}");
    }
}
