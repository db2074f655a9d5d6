//! First boot to Node Ready (`nb-bench node-ready`): a worker of the real
//! cluster rig (`testkit::cluster`: provisioned from its rendered Ignition
//! config, the real docker through the addon and torcx, the real kubelet)
//! against a control plane on the host, timed from the outside (the boot
//! to the Node's Ready condition, polled through the API), with the
//! agent's share from the node's journal, against the floor: the same
//! worker with nothing to bootstrap (its OS image already brings the
//! docker the cluster wants, and its kubelet.env is already written, so
//! the bootstrap unit is skipped), booted once to Ready.

use anyhow::{Result, bail};
use std::time::{Duration, Instant};
use testkit::kube::Kubectl;
use testkit::simnode::{BootEnd, SimNode};

const T: Duration = Duration::from_secs(300);

/// Waits until Node `name` is Ready; the time it was first seen Ready.
pub fn wait_node_ready(kubectl: &Kubectl, name: &str) -> Result<Instant> {
    let deadline = Instant::now() + T;
    loop {
        if let Ok(nodes) = kubectl.nodes()
            && nodes.iter().any(|n| n.name == name && n.ready)
        {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!("node {name} not Ready within {T:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The agent processes' run time on `n`, summed over its boots
/// ([`testkit::cluster::agent_seconds`] of its journal).
pub fn agent_seconds(n: &SimNode) -> Result<f64> {
    testkit::cluster::agent_seconds(&n.journal_json(&[testkit::cluster::AGENT_JOURNAL_MATCH]))
}

/// Boots a fresh worker to Ready: the agent's reboot for the docker
/// change and the boot after it when `reboots`, else one boot. Seconds
/// from the first boot to the Node seen Ready.
pub fn first_boot_to_ready(n: &mut SimNode, kubectl: &Kubectl, reboots: bool) -> Result<f64> {
    let t0 = Instant::now();
    n.boot()?;
    if reboots {
        match n.wait_down(T)? {
            BootEnd::Reboot => {}
            other => bail!(
                "{}: the first boot ended as {other:?}, not in the agent's reboot",
                n.name()
            ),
        }
        n.boot()?;
    }
    let ready = wait_node_ready(kubectl, n.name())?;
    Ok((ready - t0).as_secs_f64())
}

/// Makes a worker of the rig (before boot) one with nothing to bootstrap:
/// the OS image's docker is the one the cluster wants (the real docker
/// image as its vendor docker and profile), and kubelet.env is written.
pub fn nothing_to_bootstrap(n: &SimNode, rig: &testkit::cluster::ClusterRig) -> Result<()> {
    let reference = testkit::docker_image::REFERENCE;
    n.write(
        &format!("/usr/share/torcx/store/docker:{reference}.torcx.tgz"),
        rig.docker.bytes()?,
        0o644,
    )?;
    n.write(
        "/usr/share/torcx/profiles/vendor.json",
        format!(r#"{{"kind":"profile-manifest-v0","value":{{"images":[{{"name":"docker","reference":"{reference}"}}]}}}}"#),
        0o644,
    )?;
    n.write(
        "/etc/kubernetes/kubelet.env",
        format!(
            "KUBELET_IMAGE_URL=\"{}\"\nKUBELET_IMAGE_TAG=\"{}\"\n",
            testkit::agentnode::SEED_URL,
            rig.tag()
        ),
        0o644,
    )
}
