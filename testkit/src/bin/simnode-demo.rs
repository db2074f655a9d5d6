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
//! Run with `./scripts/demo.sh --standins` (root; it builds what it runs
//! first). `./scripts/demo.sh` runs the real cluster instead
//! (`cluster-demo`).

use anyhow::{Context, Result, bail};
use serde_json::json;
use std::time::{Duration, Instant};
use testkit::agentnode::{AgentNode, Cluster, OS_RELEASE};
use testkit::apiserver::ApiServerOptions;
use testkit::demo::show;
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
    let seen = print_agent_log(&node, 0)?;
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
    let seen = print_agent_log(&node, seen)?;
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
    let _ = print_agent_log(&node, seen)?;
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
    testkit::torcx::install_os_image(n, rig, OS, "1.12", "1.12.2")?;
    n.write(
        testkit::torcx::DOCKER_DATA_MARKER,
        "old docker data\n",
        0o644,
    )?;
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
fn print_agent_log(n: &SimNode, already: usize) -> Result<usize> {
    show::print_new(
        &mut std::io::stdout(),
        &show::agent_records(n)?,
        already,
        "    | ",
    )
}

fn print_journal_summary(n: &SimNode) {
    let lines = show::state_journal_lines(n);
    if lines.is_empty() {
        return;
    }
    println!("[boot 2] state journal (/var/lib/node-bootstrap/state.json):");
    for l in lines {
        println!("           {l}");
    }
}

fn print_status(n: &SimNode) {
    let Ok((code, text)) = show::status(n) else {
        return;
    };
    if code == 2 {
        return;
    }
    println!("[boot 2] node-bootstrap status (exit {code}):");
    for line in text.lines() {
        println!("           {line}");
    }
}
