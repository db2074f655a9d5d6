//! Day two on the real cluster ([`crate::cluster`]): what the tests and
//! the benchmark of `node-bootstrap follow` need beside the rig.
//!
//! - [`next_patch_parts`], [`next_minor_parts`]: kube-apiserver and kubelet
//!   built again from the same Debian source, stamped as the next patch
//!   and the next minor release (`scripts/build-kubernetes.sh`,
//!   `stand-in-v1.20.3/`, `stand-in-v1.21.0/`): **stand-ins for the 1.20.3
//!   and 1.21.0 releases**. What the day-two path reads of a release is
//!   real: an API server that reports it, a kubelet that reports it, an
//!   image on the mirror;
//! - the cluster's side of following: the `follow-rbac` module's manifests
//!   rendered by real terraform and applied ([`apply_follow_rbac`]), the
//!   operator's ConfigMap ([`set_policy`]), the control plane moved to
//!   another release on the bootkube master ([`move_control_plane`]);
//! - a release published for the workers ([`publish_release`]): its
//!   kubelet image in each kubelet-wrapper node's store (what rkt would
//!   fetch) and on the sysext mirror;
//! - the follow timer of a test's size ([`fast_timer`]) and the agent's
//!   follow settings of a test's size ([`FOLLOW_CONFIG`]);
//! - [`Watch`]: the lease's holders and every Node's Ready, version and
//!   unschedulable, polled twice a second from the API server while a
//!   rollout runs, and what a test asks of that history;
//! - the cluster of `tests/node/follow_cluster.rs` and `nb-bench follow`
//!   ([`rig`], [`boot`], [`pod_on_each`]): a bootkube master and three
//!   following workers, one of each kind (docker through kubelet-wrapper,
//!   containerd, today's Flatcar with the kubelet sysext), a pod on each.
//!   The containerd worker is provisioned without the `follow` switch and
//!   turned on once running (`node-bootstrap follow --enable`, what an
//!   operator does for a node that exists). The API server authorizes the
//!   nodes as Kubernetes 1.32 does (their own Node only:
//!   [`crate::node_authz`], a webhook of this process) and writes an audit
//!   log ([`AUDIT_LOG`] on the master: every write of the follow lease
//!   with its response, every request of a node).

use crate::agentnode::{self as an, KubeletImage, SEED_URL};
use crate::cluster::{Auth, ClusterRig, NodeSpec};
use crate::kube::{KubeParts, Kubectl};
use crate::kubelet_sysext::{Kubelet, fake_kubelet, kubelet_image, release};
use crate::simnode::BootEnd;
use crate::simnode::SimNode;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, atomic::AtomicBool, atomic::Ordering};
use std::time::{Duration, Instant};

/// The operator's ConfigMap and the follow lease (a ConfigMap too) the
/// agent uses by default.
pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "node-bootstrap-follow";
pub const LEASE: &str = "node-bootstrap-follow-lease";
/// The prefix of the lease's data keys, one per node (src/follow/lease.rs).
pub const ENTRY_PREFIX: &str = "node.";

/// The following workers of [`rig`], in its order after the master.
pub const WORKERS: [&str; 3] = ["w-docker", "w-ctr", "w-sysext"];
/// The worker turned on with `follow --enable` once running.
pub const ENABLED_LATER: &str = "w-ctr";
/// On the master: the webhook's config, the audit policy and log.
pub const AUTHZ_CONFIG: &str = "/opt/tectonic/auth/node-authz.kubeconfig";
pub const AUDIT_POLICY: &str = "/opt/tectonic/auth/audit-policy.yaml";
pub const AUDIT_LOG: &str = "/var/log/kube-apiserver-audit.log";

/// The audit policy of the follow rig: the follow lease's writes with
/// their response (the lease's history), the nodes' requests (who asked
/// what), nothing of their heartbeats and watches.
pub const AUDIT_POLICY_YAML: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
- level: RequestResponse\n  verbs: [\"create\", \"update\", \"patch\"]\n  resources: [{group: \"\", resources: [\"configmaps\"], resourceNames: [\"node-bootstrap-follow-lease\"]}]\n\
- level: None\n  verbs: [\"watch\"]\n\
- level: None\n  resources: [{group: \"coordination.k8s.io\", resources: [\"leases\"]}]\n\
- level: Metadata\n  userGroups: [\"system:nodes\"]\n\
- level: None\n";

/// While this file exists on a node, a start of its kubelet is held (at
/// most 60 s, less than the agent's 90 s restart timeout): the sysext
/// worker's test drop-in, [`boot`]. A power cut then lands in the switching
/// phase whatever the machine's load (an 8 s sleep in its place let a
/// loaded CI run see the phase late and cut the power after it).
pub const SLOW_RESTART: &str = "/run/nb-test-slow-restart";

/// A drop-in's `[Service]` section whose `ExecStartPre=` holds the unit's
/// start while `path` exists on the node, `max_secs` at most (`$$` is
/// systemd's escape of `$`).
pub fn hold_while(path: &str, max_secs: u32) -> String {
    format!(
        "[Service]\nExecStartPre=/bin/sh -c 'i=0; while [ -e {path} ] && [ $$i -lt {} ]; do sleep 0.5; i=$$((i+1)); done'\n",
        max_secs * 2
    )
}

/// The API server's audit log so far (on the master).
pub fn audit_log(master: &SimNode) -> String {
    master.read(AUDIT_LOG).unwrap_or_default()
}

/// The day-two cluster and the webhook that authorizes its nodes as 1.32.
pub struct FollowRig {
    pub rig: ClusterRig,
    pub authz: crate::node_authz::NodeAuthorizer,
}

impl std::ops::Deref for FollowRig {
    type Target = ClusterRig;
    fn deref(&self) -> &ClusterRig {
        &self.rig
    }
}
/// A node's first boot through its reboot to a running kubelet.
const BOOT: Duration = Duration::from_secs(240);

/// The day-two cluster: a bootkube master (not following) and the three
/// [`WORKERS`], all joining with the bootstrap token but the master, the
/// ignition module's `follow` switch on for all but [`ENABLED_LATER`];
/// `agent` is the agent binary their Ignition configs deliver. The API
/// server authorizes nodes as 1.32 (module docs) and keeps an audit log.
pub fn rig(agent: &std::path::Path) -> Result<FollowRig> {
    let authz = crate::node_authz::NodeAuthorizer::start()?;
    let mut rig = ClusterRig::with_agent(
        &[
            NodeSpec::master("master-1"),
            NodeSpec::worker(WORKERS[0], Auth::BootstrapToken).following(),
            NodeSpec::containerd_worker(WORKERS[1]),
            NodeSpec::sysext_worker(WORKERS[2]).following(),
        ],
        agent,
    )?;
    *authz.admin.lock().unwrap() = Some(rig.kubectl.clone());
    let args = &mut rig.control_plane.extra_apiserver_args;
    args.extend(crate::node_authz::NodeAuthorizer::apiserver_args(
        AUTHZ_CONFIG,
    ));
    args.extend([
        format!("--audit-policy-file={AUDIT_POLICY}"),
        format!("--audit-log-path={AUDIT_LOG}"),
        "--audit-log-format=json".into(),
    ]);
    Ok(FollowRig { rig, authz })
}

/// Turns following on for `n`, running, as an operator does
/// (docs/operators.md "Turning it on"): the test's follow settings in its
/// config file, then `node-bootstrap follow --enable`. Returns its output.
pub fn enable_follow(n: &SimNode) -> Result<String> {
    let path = "/etc/node-bootstrap/config.json";
    let mut config: Value = serde_json::from_str(&n.read(path).context("the agent's config")?)?;
    an::merge(&mut config, follow_config());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(n.path(path))?.permissions());
    n.write(path, config.to_string(), mode & 0o777)?;
    let out = n.exec(&["/opt/bin/node-bootstrap", "follow", "--enable"])?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    anyhow::ensure!(
        out.status.success(),
        "{}: follow --enable: {said}",
        n.name()
    );
    Ok(said)
}

/// Provisions and boots [`rig`]'s nodes (the workers' follow timer
/// shortened, [`fast_timer`]): the master (its docker reboot, then
/// bootkube), the workers once the bootstrap token's Secret is there (the
/// docker worker reboots once for the addon's docker). The follow-rbac
/// module's lease and RBAC are applied before the first worker boots (as
/// operators.md says: a worker's follow runs from its first boot, and
/// without them its reads of the lease are refused), and the ConfigMap
/// it renders (the defaults: one node at a time) once every node is
/// Ready. Returns the nodes, master first.
pub fn boot(rig: &FollowRig) -> Result<Vec<SimNode>> {
    let mut nodes = rig.nodes()?;
    for w in &nodes[1..] {
        fast_timer(w)?;
    }
    let sysext = nodes.iter().find(|n| n.name() == WORKERS[2]).unwrap();
    sysext.drop_in(
        "kubelet.service",
        "30-test-slow-restart",
        &format!(
            "# The test: while {SLOW_RESTART} exists (a file of /run: gone at the next\n\
             # boot), a start of the kubelet is held (60 s at most), so that a power cut\n\
             # lands while a change of the kubelet is switching.\n{}",
            hold_while(SLOW_RESTART, 60)
        ),
    )?;
    let master = &nodes[0];
    master.write(AUTHZ_CONFIG, rig.authz.webhook_kubeconfig(), 0o600)?;
    master.write(AUDIT_POLICY, AUDIT_POLICY_YAML, 0o600)?;
    let rig: &ClusterRig = rig;
    let applied: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let applied_ref = &applied;
    let results: Vec<Result<()>> = std::thread::scope(|s| {
        let (master, workers) = nodes.split_first_mut().unwrap();
        let mut handles = vec![s.spawn(move || -> Result<()> {
            rig.push_assets(master)?;
            master.boot()?;
            anyhow::ensure!(
                master.wait_down(BOOT)? == BootEnd::Reboot,
                "the master's docker reboot"
            );
            master.boot()?;
            master.wait_for("bootkube and tectonic", BOOT, |n| {
                n.exists("/opt/tectonic/init_tectonic.done").then_some(())
            })
        })];
        for w in workers.iter_mut() {
            handles.push(s.spawn(move || -> Result<()> {
                let id = &rig
                    .bootstrap_token()
                    .context("the rig's bootstrap token")?
                    .id;
                let deadline = Instant::now() + 3 * BOOT;
                while !rig.kubectl.bootstrap_token_exists(id).unwrap_or(false) {
                    anyhow::ensure!(
                        Instant::now() < deadline,
                        "the bootstrap token's Secret never appeared"
                    );
                    std::thread::sleep(Duration::from_secs(2));
                }
                {
                    let mut config_map = applied_ref.lock().unwrap_or_else(|e| e.into_inner());
                    if config_map.is_none() {
                        *config_map = Some(apply_follow_rbac(&rig.kubectl)?);
                    }
                }
                w.boot()?;
                if w.name() == WORKERS[0] {
                    anyhow::ensure!(
                        w.wait_down(BOOT)? == BootEnd::Reboot,
                        "{}: the docker reboot",
                        w.name()
                    );
                    w.boot()?;
                }
                w.wait_active_state("kubelet.service", "active", BOOT)
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("a boot thread panicked"))
            .collect()
    });
    for r in results {
        r?;
    }
    let mut all = vec!["master-1"];
    all.extend(WORKERS);
    rig.kubectl.wait_ready(&all, BOOT)?;
    let config_map = applied
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .context("no worker applied the follow RBAC")?;
    apply_yaml(&rig.kubectl, &config_map)?;
    let later = nodes.iter().find(|n| n.name() == ENABLED_LATER).unwrap();
    enable_follow(later)?;
    Ok(nodes)
}

/// The kubelet-wrapper workers of `nodes` (their kubelet comes from the
/// node's store).
pub fn wrappers(nodes: &[SimNode]) -> Vec<&SimNode> {
    nodes[1..]
        .iter()
        .filter(|n| n.name() != WORKERS[2])
        .collect()
}

/// A pod of the busybox image on each of `workers` (the images loaded
/// into its runtime: there is no registry), named
/// `keep-<node><suffix>`, Running. Returns their names.
pub fn pod_on_each(rig: &ClusterRig, workers: &[&SimNode], suffix: &str) -> Result<Vec<String>> {
    use crate::pods;
    let pause = pods::pause_image()?;
    let busybox = pods::busybox_image()?;
    let mut names = Vec::new();
    for n in workers {
        if n.name() == WORKERS[0] {
            pods::docker_load(n, "/run/torcx/bin/docker", &pause)?;
            pods::docker_load(n, "/run/torcx/bin/docker", &busybox)?;
        } else {
            pods::ctr_import(n, &pause, None)?;
            pods::ctr_import(n, &busybox, None)?;
        }
        let name = format!("keep-{}{suffix}", n.name());
        pods::create_pod(
            &rig.kubectl,
            &pods::busybox_pod(&name, n.name(), &busybox.tag, "still-here", true),
        )?;
        names.push(name);
    }
    for p in &names {
        pods::wait_pod_running(&rig.kubectl, p, pods::POD_TIMEOUT)?;
    }
    Ok(names)
}

/// The agent's `follow` section on the tests' nodes: two agreeing looks at
/// the API server, a kubelet back within 30 s or rolled back (a 1.20
/// kubelet posts Ready within seconds of its start), looks every second;
/// a drain may wait 120 s for the PodDisruptionBudget (the replica evicted
/// from the node before must be running elsewhere first: at load 12 that
/// took over 30 s, and the drain aborted and backed off past the test's
/// deadline). A drain that is allowed ends at once: no cost when quiet.
pub fn follow_config() -> Value {
    json!({"follow": {"stable_checks": 2, "ready_timeout_secs": 30, "drain_timeout_secs": 120, "poll_secs": 1}})
}

/// kube-apiserver and kubelet stamped as the next patch release of
/// [`crate::kube::parts`] (v1.20.3): the stand-in for that release (module
/// docs).
pub fn next_patch_parts() -> Result<KubeParts> {
    standin(|base, v| v.minor == base.minor && v.patch == base.patch + 1)
}

/// kube-apiserver and kubelet stamped as the next minor release (v1.21.0):
/// the stand-in for that release. The agent configures a 1.21 kubelet as a
/// 1.20 one (its tables change at 1.23, 1.24 and 1.27), so the 1.20 code
/// runs as it would.
pub fn next_minor_parts() -> Result<KubeParts> {
    standin(|base, v| v.minor == base.minor + 1 && v.patch == 0)
}

/// The stand-in under the release's directory whose version `pick`s.
fn standin(pick: impl Fn(&Version, &Version) -> bool) -> Result<KubeParts> {
    let base = crate::kube::parts()?;
    let base_v = Version::parse(&base.version)?;
    for e in std::fs::read_dir(&base.dir)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(version) = name.strip_prefix("stand-in-") else {
            continue;
        };
        if !pick(&base_v, &Version::parse(version)?) {
            continue;
        }
        let dir = e.path();
        let said = std::process::Command::new(dir.join("kubelet"))
            .arg("--version")
            .output()?;
        let said = String::from_utf8_lossy(&said.stdout);
        if said.trim() != format!("Kubernetes {version}") {
            bail!("the stand-in kubelet of {version} says {said:?}");
        }
        return Ok(KubeParts {
            dir,
            version: version.to_string(),
        });
    }
    bail!(
        "no such stand-in under {} (scripts/build-kubernetes.sh builds them)",
        base.dir.display()
    )
}

/// `vX.Y.Z`.
struct Version {
    minor: u64,
    patch: u64,
}

impl Version {
    fn parse(v: &str) -> Result<Version> {
        let n: Vec<u64> = v
            .trim_start_matches('v')
            .split('.')
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .with_context(|| format!("{v} is not vX.Y.Z"))?;
        anyhow::ensure!(n.len() == 3, "{v} is not vX.Y.Z");
        Ok(Version {
            minor: n[1],
            patch: n[2],
        })
    }
}

/// Shortens node-bootstrap-follow.timer on `n` (before boot): a run two
/// seconds after boot and two seconds after each run, no jitter.
pub fn fast_timer(n: &SimNode) -> Result<()> {
    n.drop_in(
        "node-bootstrap-follow.timer",
        "20-test",
        // An empty OnBootSec= resets every monotonic trigger of the timer
        // (OnUnitInactiveSec= too), so once, before both.
        "# The test: a look every two seconds.\n[Timer]\nOnBootSec=\nOnBootSec=2s\nOnUnitInactiveSec=2s\nRandomizedDelaySec=0\nAccuracySec=1s\n",
    )
}

/// Renders `terraform/modules/follow-rbac` (real terraform) and applies
/// its manifest (the lease, Role, RoleBinding) as the administrator;
/// returns the ConfigMap it rendered (not applied).
pub fn apply_follow_rbac(kubectl: &Kubectl) -> Result<String> {
    let work = tempfile::Builder::new()
        .prefix("nb-follow-rbac-")
        .tempdir()?;
    let module = crate::project_root().join("terraform/modules/follow-rbac");
    std::fs::write(
        work.path().join("main.tf"),
        format!(
            "module \"follow\" {{\n  source = \"{}\"\n}}\noutput \"out\" {{\n  value = module.follow\n}}\n",
            module.display()
        ),
    )?;
    let out = crate::terraform::Terraform::new(work.path())
        .render(&[], "out")
        .with_context(|| format!("rendering {}", module.display()))?;
    let manifest = out["manifest"].as_str().context("no manifest output")?;
    apply_yaml(kubectl, manifest)?;
    Ok(out["config_map"]
        .as_str()
        .context("no config_map output")?
        .to_string())
}

/// `kubectl apply -f` of YAML text.
pub fn apply_yaml(kubectl: &Kubectl, yaml: &str) -> Result<()> {
    let f = tempfile::Builder::new().suffix(".yaml").tempfile()?;
    std::fs::write(f.path(), yaml)?;
    kubectl.run(&["apply", "-f", &f.path().display().to_string()])?;
    Ok(())
}

/// Writes the operator's ConfigMap with `data` (replacing it).
pub fn set_policy(kubectl: &Kubectl, data: Value) -> Result<()> {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "data": data,
    });
    let f = tempfile::Builder::new().suffix(".json").tempfile()?;
    std::fs::write(f.path(), cm.to_string())?;
    kubectl.run(&["replace", "--force", "-f", &f.path().display().to_string()])?;
    Ok(())
}

/// Clears the halt at `node` as the operator does (docs/operators.md):
/// that node's key removed from the lease, the others' untouched.
pub fn clear_halt(kubectl: &Kubectl, node: &str) -> Result<()> {
    kubectl.run(&[
        "-n",
        NAMESPACE,
        "patch",
        "configmap",
        LEASE,
        "--type",
        "json",
        "-p",
        &json!([{"op": "remove", "path": format!("/data/node.{node}")}]).to_string(),
    ])?;
    Ok(())
}

/// The follow lease's ConfigMap as the API server has it.
pub fn lease_object(kubectl: &Kubectl) -> Result<Value> {
    let out = kubectl.run(&["-n", NAMESPACE, "get", "configmap", LEASE, "-o", "json"])?;
    Ok(serde_json::from_str(&out)?)
}

/// The follow lease's holders: node -> halted.
pub fn holders(kubectl: &Kubectl) -> Result<std::collections::BTreeMap<String, bool>> {
    Ok(holders_of(&lease_object(kubectl)?))
}

/// The holders of the lease object `cm` (its `node.<name>` keys that are
/// changing or halted, src/follow/lease.rs): node -> halted.
fn holders_of(cm: &Value) -> std::collections::BTreeMap<String, bool> {
    cm["data"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let node = k.strip_prefix(ENTRY_PREFIX)?;
            let e: Value = serde_json::from_str(v.as_str()?).ok()?;
            match e["state"].as_str()? {
                "changing" => Some((node.to_string(), false)),
                "halted" => Some((node.to_string(), true)),
                _ => None,
            }
        })
        .collect()
}

/// What a node's kubelet-wrapper store and the sysext mirror hold of a
/// release.
#[derive(Debug, Clone, Copy)]
pub enum Release<'a> {
    /// The real binaries of `parts`.
    Real(&'a KubeParts),
    /// A kubelet that answers `--version` and never registers (the
    /// wrapper's stand-in image; the sysext's fake kubelet): a release
    /// whose kubelet cannot start.
    Broken(&'a str),
}

impl Release<'_> {
    pub fn version(&self) -> &str {
        match self {
            Release::Real(p) => &p.version,
            Release::Broken(v) => v,
        }
    }
}

/// Publishes `releases` for the workers: each kubelet-wrapper worker's
/// store gets the image (replacing one of the same tag; a running node
/// sees it at once, as rkt would fetch it), and the sysext mirror is
/// published again with the cluster's release, its two neighbours and
/// these.
pub fn publish_release(
    rig: &ClusterRig,
    wrapper_nodes: &[&SimNode],
    releases: &[Release],
) -> Result<()> {
    for n in wrapper_nodes {
        for r in releases {
            let tag = r.version().replace('+', "_");
            let dir = n.path(&an::image_dir(SEED_URL, &tag));
            let _ = std::fs::remove_dir_all(&dir);
            match r {
                Release::Real(p) => {
                    an::install_kubelet_image(n, SEED_URL, &tag, KubeletImage::Real(p))?
                }
                Release::Broken(_) => {
                    an::install_kubelet_image(n, SEED_URL, &tag, KubeletImage::StandIn)?
                }
            }
        }
    }
    let Some(mirror) = &rig.kubelet_images else {
        return Ok(());
    };
    let rel = release("_any", "1.0");
    let mut images: Vec<(String, Vec<u8>)> = vec![(
        rig.parts.version.clone(),
        kubelet_image(Kubelet::Path(&rig.parts.kubelet()), &rel)?,
    )];
    for v in crate::cluster::neighbour_versions(&rig.parts.version)? {
        images.push((
            v.clone(),
            kubelet_image(Kubelet::Bytes(&fake_kubelet(&v)), &rel)?,
        ));
    }
    for r in releases {
        let bytes = match r {
            Release::Real(p) => kubelet_image(Kubelet::Path(&p.kubelet()), &rel)?,
            Release::Broken(v) => kubelet_image(Kubelet::Bytes(&fake_kubelet(v)), &rel)?,
        };
        images.retain(|(v, _)| v != r.version());
        images.push((r.version().to_string(), bytes));
    }
    let list: Vec<(&str, &[u8])> = images
        .iter()
        .map(|(v, b)| (v.as_str(), b.as_slice()))
        .collect();
    mirror.publish(&list)
}

/// When the API server restarted, in unix seconds (the audit log's
/// clock): from just before the restart until it answered the
/// administrator's `/version` with its new release. A server that has just
/// started refuses what its RBAC policy would allow until that policy is
/// read (the product says so on a 403 from `/version`), so a check of the
/// audit log needs these windows.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    pub from: f64,
    pub answering: f64,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Moves the control plane on the bootkube master to `parts`'s
/// kube-apiserver, as an operator upgrades it: the release's image in the
/// master's store, kube-apiserver.service pointed at it, restarted; returns
/// once `/version` says so, with when it restarted.
pub fn move_control_plane(
    rig: &ClusterRig,
    master: &SimNode,
    parts: &KubeParts,
) -> Result<Restart> {
    let tag = parts.version.replace('+', "_");
    let dir = n_image_dir(master, &tag);
    std::fs::create_dir_all(&dir)?;
    let link = dir.join("kube-apiserver");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(parts.kube_apiserver(), &link)?;
    let unit_path = "/etc/systemd/system/kube-apiserver.service";
    let unit = master
        .read(unit_path)
        .context("no kube-apiserver.service on the master")?;
    // The release it runs now: the cluster's first, or one it was moved
    // to before (a minor after a patch).
    let store = an::image_dir(SEED_URL, "");
    let Some(old) = unit.find(&store).and_then(|start| {
        unit[start..]
            .find("/kube-apiserver")
            .map(|len| unit[start..start + len].to_string())
    }) else {
        bail!("kube-apiserver.service runs no kube-apiserver of {store}:\n{unit}");
    };
    let new = an::image_dir(SEED_URL, &tag);
    master.write(
        unit_path,
        unit.replace(
            &format!("{old}/kube-apiserver"),
            &format!("{new}/kube-apiserver"),
        ),
        0o644,
    )?;
    master.systemctl(&["daemon-reload"])?;
    let from = unix_now();
    master.systemctl(&["restart", "kube-apiserver.service"])?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(120);
    loop {
        let v = rig.kubectl.run(&["get", "--raw", "/version"]).ok();
        if let Some(v) = v.and_then(|t| serde_json::from_str::<Value>(&t).ok())
            && v["gitVersion"] == parts.version.as_str()
        {
            return Ok(Restart {
                from,
                answering: unix_now(),
            });
        }
        if Instant::now() > deadline {
            bail!(
                "the API server does not report {} after its restart",
                parts.version
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn n_image_dir(n: &SimNode, tag: &str) -> std::path::PathBuf {
    n.path(&an::image_dir(SEED_URL, tag))
}

/// One look at the cluster.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Since the watch started.
    pub at: Duration,
    /// The lease's holders: (node, halted).
    pub holders: Vec<(String, bool)>,
    /// Every node: name -> (Ready, kubeletVersion, unschedulable).
    pub nodes: std::collections::BTreeMap<String, (bool, String, bool)>,
}

/// The cluster, looked at twice a second from its own thread until
/// dropped.
pub struct Watch {
    /// When it started: [`Snapshot::at`] counts from here.
    pub started: Instant,
    /// The same, unix seconds (the audit log's clock: the same host's).
    pub started_unix: f64,
    seen: Arc<Mutex<Vec<Snapshot>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn look(kubectl: &Kubectl, t0: Instant) -> Option<Snapshot> {
    let holders = holders(kubectl).ok()?;
    let nodes: Value =
        serde_json::from_str(&kubectl.run(&["get", "nodes", "-o", "json"]).ok()?).ok()?;
    let nodes = nodes["items"]
        .as_array()?
        .iter()
        .map(|n| {
            let ready = n["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .is_some_and(|c| c["status"] == "True");
            (
                n["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                (
                    ready,
                    n["status"]["nodeInfo"]["kubeletVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    n["spec"]["unschedulable"] == true,
                ),
            )
        })
        .collect();
    Some(Snapshot {
        at: t0.elapsed(),
        holders: holders.into_iter().collect(),
        nodes,
    })
}

impl Watch {
    pub fn start(kubectl: &Kubectl) -> Watch {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, st2, k) = (seen.clone(), stop.clone(), kubectl.clone());
        let started = Instant::now();
        let started_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let thread = std::thread::spawn(move || {
            let t0 = started;
            while !st2.load(Ordering::Relaxed) {
                if let Some(s) = look(&k, t0) {
                    s2.lock().unwrap().push(s);
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        Watch {
            started,
            started_unix,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// Everything seen so far.
    pub fn history(&self) -> Vec<Snapshot> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Each node's windows in `history`: (first, last) look at which it held
/// the lease, and at which it was not Ready.
#[derive(Debug, Clone, Default)]
pub struct Windows {
    pub holding: Vec<(Duration, Duration)>,
    pub not_ready: Vec<(Duration, Duration)>,
    /// When its kubeletVersion first read `version` (of [`windows`]).
    pub changed_at: Option<Duration>,
}

/// The windows of `node` (module docs) and when it first reported `version`.
pub fn windows(history: &[Snapshot], node: &str, version: &str) -> Windows {
    let mut w = Windows::default();
    let spans = |on: &dyn Fn(&Snapshot) -> bool, out: &mut Vec<(Duration, Duration)>| {
        let mut open: Option<(Duration, Duration)> = None;
        for s in history {
            if on(s) {
                open = Some(open.map_or((s.at, s.at), |(a, _)| (a, s.at)));
            } else if let Some(o) = open.take() {
                out.push(o);
            }
        }
        out.extend(open);
    };
    spans(
        &|s: &Snapshot| s.holders.iter().any(|(n, _)| n == node),
        &mut w.holding,
    );
    spans(
        &|s: &Snapshot| s.nodes.get(node).is_some_and(|x| !x.0),
        &mut w.not_ready,
    );
    w.changed_at = history
        .iter()
        .find(|s| s.nodes.get(node).is_some_and(|x| x.1 == version))
        .map(|s| s.at);
    w
}

/// Whether two windows of different nodes overlap.
pub fn overlap(a: &[(Duration, Duration)], b: &[(Duration, Duration)]) -> bool {
    a.iter()
        .any(|(a0, a1)| b.iter().any(|(b0, b1)| a0 <= b1 && b0 <= a1))
}

/// A Deployment `name` of `replicas` busybox pods (host network, the
/// image loaded on every worker, never pulled) and a PodDisruptionBudget
/// keeping all but one of them available: what a drain must move without
/// taking the service down (YAML for `kubectl apply`).
pub fn replicated_workload(name: &str, replicas: u32) -> String {
    let image = crate::pods::busybox_image()
        .map(|i| i.tag)
        .unwrap_or_default();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      hostNetwork: true\n      terminationGracePeriodSeconds: 1\n      automountServiceAccountToken: false\n      containers:\n      - name: main\n        image: {image}\n        imagePullPolicy: Never\n        command: [/bin/sh, -c, 'exec sleep 3600']\n---\napiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  minAvailable: {}\n  selector:\n    matchLabels: {{app: {name}}}\n",
        replicas.saturating_sub(1).max(1)
    )
}

/// Waits until Deployment `name` has `n` available replicas.
pub fn wait_available(kubectl: &Kubectl, name: &str, n: u64, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = kubectl
            .run(&[
                "get",
                "deployment",
                name,
                "-o",
                "jsonpath={.status.availableReplicas}",
            ])
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0);
        if got >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("deployment {name}: {got} of {n} replicas available after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
