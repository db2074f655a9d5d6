//! First boot to Node Ready (`nb-bench node-ready`): a worker of the real
//! cluster rig (`testkit::cluster`: provisioned from its rendered Ignition
//! config, the real kubelet, and the runtime its agent was told: docker
//! through the addon and torcx, or the OS's containerd through CRI)
//! against a control plane on the host, timed from the outside: from the
//! start of its first boot to its Node Ready **and** without the
//! `node.kubernetes.io/not-ready` taint, as a watch of the API server saw
//! it ([`crate::nodewatch`]). The node's journal (all boots) is kept, to
//! break the time down ([`crate::timeline`]).
//!
//! The floor is the same worker with nothing to bootstrap: its OS image
//! already brings the runtime the cluster wants, and what the agent wrote
//! on the measured worker (kubelet.env, the kubelet's configuration file,
//! containerd's config and drop-in) is already there, so the bootstrap
//! unit is skipped; booted once to Ready.

use crate::nodewatch::{Milestones, NodeWatch, epoch_secs};
use crate::report::{Row, median};
use crate::timeline::Timeline;
use anyhow::{Context as _, Result, bail};
use std::time::{Duration, SystemTime};
use testkit::cluster::{ClusterRig, Runtime};
use testkit::kube::Kubectl;
use testkit::simnode::{BootEnd, SimNode};

const T: Duration = Duration::from_secs(300);

/// One worker's way to Ready.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The first boot's start (host clock, seconds since the epoch).
    pub t0: f64,
    pub seen: Milestones,
    /// The node's journal, every boot (`journalctl -o json`).
    pub journal: Vec<serde_json::Value>,
}

impl Measured {
    /// Seconds from the first boot to Ready and untainted.
    pub fn first_boot_to_ready(&self) -> f64 {
        self.seen.usable.unwrap_or(f64::NAN) - self.t0
    }
    /// Seconds from the first boot to the Ready condition alone.
    pub fn first_boot_to_condition(&self) -> f64 {
        self.seen.ready_condition.unwrap_or(f64::NAN) - self.t0
    }
}

/// Boots a fresh worker to Ready: the agent's reboot for the docker
/// change and the boot after it when `reboots`, else one boot.
pub fn boot_to_ready(n: &mut SimNode, kubectl: &Kubectl, reboots: bool) -> Result<Measured> {
    let mut watch = NodeWatch::start(kubectl, n.name())?;
    // The watch lists (nothing) before the boot starts.
    std::thread::sleep(Duration::from_millis(300));
    let t0 = epoch_secs(SystemTime::now());
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
    let seen = watch
        .wait_usable(T)
        .with_context(|| format!("{}:\n{}", n.name(), n.diagnostics()))?;
    Ok(Measured {
        t0,
        seen,
        journal: n.journal_json(&[]),
    })
}

/// What the agent writes that a worker with nothing to bootstrap already
/// has (copied from a worker the agent bootstrapped).
const AGENT_FILES: &[&str] = &[
    "/etc/kubernetes/kubelet.env",
    "/etc/kubernetes/kubelet-config.yaml",
    "/etc/containerd/config.toml",
];
/// containerd.service's drop-in the agent writes, where it may be.
const CONTAINERD_DROPIN: &str = "containerd.service.d/50-node-bootstrap.conf";

/// Makes a worker of the rig (before boot) one with nothing to bootstrap,
/// from `done`, a worker of the same runtime the agent bootstrapped: the
/// OS image's runtime is the one the cluster wants (for docker the real
/// docker image as its vendor docker and profile; containerd is the OS's,
/// enabled at boot), and the agent's files are in place.
pub fn nothing_to_bootstrap(
    n: &SimNode,
    rig: &ClusterRig,
    runtime: Runtime,
    done: &SimNode,
) -> Result<()> {
    for f in AGENT_FILES {
        if let Some(text) = done.read(f) {
            n.write(f, text, 0o644)?;
        }
    }
    anyhow::ensure!(
        n.exists("/etc/kubernetes/kubelet.env"),
        "{} has no kubelet.env to copy",
        done.name()
    );
    match runtime {
        Runtime::Auto => {
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
        }
        Runtime::Containerd => {
            let dropin = ["/etc/systemd/system", "/run/systemd/system"]
                .iter()
                .find_map(|d| done.read(&format!("{d}/{CONTAINERD_DROPIN}")))
                .with_context(|| format!("{} has no {CONTAINERD_DROPIN}", done.name()))?;
            n.write(
                &format!("/etc/systemd/system/{CONTAINERD_DROPIN}"),
                dropin,
                0o644,
            )?;
            testkit::pods::enable_os_unit(n, "containerd.service", "multi-user.target")?;
        }
    }
    Ok(())
}

/// `nb-bench node-ready`: `runs` rounds; in each, for docker and then
/// containerd, a worker of `agent` (and one of `agent_b`, taking turns
/// which goes first) and a floor worker with nothing to bootstrap. With
/// `dump`, each node's journal is kept there (`<node>.json`). Returns the
/// `ROW` and `STEPS` lines.
pub fn bench(
    agent: &std::path::Path,
    agent_b: Option<&std::path::Path>,
    runs: usize,
    dump: Option<&std::path::Path>,
) -> Result<Vec<String>> {
    use testkit::cluster::{Auth, NodeSpec};
    let kinds = [Runtime::Auto, Runtime::Containerd];
    let sides: Vec<&str> = if agent_b.is_some() {
        vec!["a", "b", "floor"]
    } else {
        vec!["a", "floor"]
    };
    let mut specs = Vec::new();
    for i in 0..runs {
        for k in kinds {
            for side in &sides {
                let name = format!("{side}-{}-{i}", runtime_tag(k));
                specs.push(match k {
                    Runtime::Auto => NodeSpec::worker(&name, Auth::Cert),
                    Runtime::Containerd => NodeSpec::containerd_worker(&name),
                });
            }
        }
    }
    let rig = ClusterRig::with_agent(&specs, agent)?;
    let cp = rig.control_plane.start(&rig.parts)?;
    let mut nodes = rig.nodes()?;
    let mut seen: Vec<(Runtime, &str, Timeline, Measured)> = Vec::new();
    for (g, group) in nodes.chunks_mut(sides.len()).enumerate() {
        let (kind, round) = (kinds[g % kinds.len()], g / kinds.len());
        let (workers, floor) = group.split_at_mut(sides.len() - 1);
        let mut order: Vec<usize> = (0..workers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for w in order {
            let n = &mut workers[w];
            if let (1, Some(b)) = (w, agent_b) {
                n.install_file(b, "/opt/bin/node-bootstrap", 0o755)?;
            }
            let m = boot_to_ready(n, &cp.kubectl, kind == Runtime::Auto)?;
            n.shutdown()?;
            keep(dump, n, &m)?;
            let t = Timeline::of(m.t0, &m.journal, &m.seen)
                .with_context(|| format!("the timeline of {}", n.name()))?;
            eprintln!(
                "node-ready {}: first boot to Ready {:.2} s (condition {:.2} s), the agent {:.2} s",
                n.name(),
                m.first_boot_to_ready(),
                m.first_boot_to_condition(),
                t.agent_total()
            );
            seen.push((kind, sides[w], t, m));
        }
        let f = &mut floor[0];
        nothing_to_bootstrap(f, &rig, kind, &workers[0])?;
        let m = boot_to_ready(f, &cp.kubectl, false)?;
        f.shutdown()?;
        keep(dump, f, &m)?;
        let t = Timeline::of_floor(m.t0, &m.journal, &m.seen)?;
        eprintln!(
            "node-ready {}: nothing to bootstrap, first boot to Ready {:.2} s",
            f.name(),
            m.first_boot_to_ready()
        );
        seen.push((kind, "floor", t, m));
    }
    let mut lines = Vec::new();
    for kind in kinds {
        let of = |side: &str| -> Vec<Timeline> {
            seen.iter()
                .filter(|s| s.0 == kind && s.1 == side)
                .map(|s| s.2.clone())
                .collect()
        };
        let (a, b, floor) = (of("a"), of("b"), of("floor"));
        let cond = |side: &str| -> Vec<f64> {
            seen.iter()
                .filter(|s| s.0 == kind && s.1 == side)
                .map(|s| s.3.first_boot_to_condition())
                .collect()
        };
        lines.extend(rows(kind, &a, &floor, &cond("a"), "").iter().map(Row::line));
        if !b.is_empty() {
            lines.extend(
                rows(kind, &b, &floor, &cond("b"), " (B)")
                    .iter()
                    .map(Row::line),
            );
        }
        let title = format!("{} worker, simulated node", runtime_tag(kind));
        lines.extend(crate::breakdown::table(
            &title,
            &a,
            (!b.is_empty()).then_some(b.as_slice()),
        ));
        lines.extend(crate::breakdown::table(
            &format!("{title}, nothing to bootstrap"),
            &floor,
            None,
        ));
    }
    Ok(lines)
}

/// The share of first boot to Ready the agent may take on a simulated
/// worker.
pub const AGENT_SHARE_TARGET: f64 = 0.05;

fn rows(
    kind: Runtime,
    ours: &[Timeline],
    floor: &[Timeline],
    cond: &[f64],
    side: &str,
) -> Vec<Row> {
    let tag = runtime_tag(kind);
    let total = median(&ours.iter().map(|t| t.total).collect::<Vec<_>>());
    let base = median(&floor.iter().map(|t| t.total).collect::<Vec<_>>());
    let agent = median(&ours.iter().map(Timeline::agent_total).collect::<Vec<_>>());
    let (target, met) = match kind {
        Runtime::Auto => ("<= 2x (one reboot more)".to_string(), total <= 2.0 * base),
        Runtime::Containerd => ("(context)".to_string(), true),
    };
    vec![
        Row {
            name: format!(
                "worker first boot to Node Ready and untainted, {tag}, simulated node{side} (s, median of {})",
                ours.len()
            ),
            ours: format!("{total:.1}"),
            theirs: format!("{base:.1}"),
            theirs_label: "the same worker with nothing to bootstrap".into(),
            ratio: format!("{:.2}x", total / base),
            target,
            met,
        },
        Row {
            name: format!("  the same, to the Ready condition alone ({tag}{side}, s)"),
            ours: format!("{:.1}", median(cond)),
            theirs: "-".into(),
            theirs_label: "context".into(),
            ratio: "-".into(),
            target: "(context)".into(),
            met: true,
        },
        Row {
            name: format!("the agent's share of that first boot ({tag}{side}, s)"),
            ours: format!("{agent:.2}"),
            theirs: format!("{total:.1}"),
            theirs_label: "first boot to Ready".into(),
            ratio: format!("{:.1}%", 100.0 * agent / total),
            target: format!("< {:.0}%", 100.0 * AGENT_SHARE_TARGET),
            met: agent / total < AGENT_SHARE_TARGET,
        },
    ]
}

/// The name a runtime's rows and nodes carry.
pub fn runtime_tag(kind: Runtime) -> &'static str {
    match kind {
        Runtime::Auto => "docker",
        Runtime::Containerd => "containerd",
    }
}

/// Keeps a node's journal in `dump` (one record a line).
fn keep(dump: Option<&std::path::Path>, n: &SimNode, m: &Measured) -> Result<()> {
    let Some(dir) = dump else { return Ok(()) };
    std::fs::create_dir_all(dir)?;
    let lines: Vec<String> = m.journal.iter().map(|r| r.to_string()).collect();
    std::fs::write(dir.join(format!("{}.json", n.name())), lines.join("\n"))?;
    Ok(())
}
