//! First boot to Node Ready (`nb-bench node-ready`): workers of the real
//! cluster rig (`testkit::cluster`: provisioned from their rendered
//! Ignition configs, the real kubelet) of three kinds ([`Kind`]): docker
//! through the addon and torcx (one reboot), the OS's containerd through
//! CRI, and today's default path, containerd with the kubelet system
//! extension downloaded, verified and merged on first boot. Each is timed
//! from the outside against a control plane on the host: from the start of
//! its first boot to the Ready condition, and to Ready **and** without the
//! `node.kubernetes.io/not-ready` taint, as a watch of the API server saw
//! it ([`crate::nodewatch`]). The node's journal (all boots) is kept, to
//! break the time down ([`crate::timeline`]).
//!
//! Beside each kind's workers, the floor ([`crate::floor`]): the same
//! worker with nothing to bootstrap. With a second agent (`--agent-b`,
//! the previous release to compare with), its workers take turns with the
//! first's. Then, with a write window, one more worker of each kind and
//! agent is kept Ready for that long, and the API server's audit log
//! ([`crate::writes`]) says how often each wrote its Node's status and its
//! lease.

use crate::nodewatch::{Milestones, NodeWatch, epoch_secs};
use crate::report::{Row, median};
use crate::timeline::Timeline;
use crate::writes::{AuditLog, Rates};
use anyhow::{Context as _, Result, bail};
use std::path::Path;
use std::time::{Duration, SystemTime};
use testkit::cluster::{Auth, ClusterRig, NodeSpec, Runtime};
use testkit::kube::Kubectl;
use testkit::simnode::{BootEnd, SimNode};

const T: Duration = Duration::from_secs(300);

/// A kind of worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `runtime.name` `auto`: docker 20.10 through the addon (torcx), one
    /// reboot; the kubelet through kubelet-wrapper; a client certificate.
    Docker,
    /// The OS's containerd, configured and proved by the agent; the
    /// kubelet through kubelet-wrapper; a bootstrap token.
    Containerd,
    /// Today's Flatcar: containerd as above, and no kubelet on the OS: the
    /// agent downloads, verifies and merges the kubelet system extension
    /// of the cluster's version; a bootstrap token.
    Sysext,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Docker, Kind::Containerd, Kind::Sysext];

    /// The name its rows and nodes carry.
    pub fn tag(self) -> &'static str {
        match self {
            Kind::Docker => "docker",
            Kind::Containerd => "containerd",
            Kind::Sysext => "sysext",
        }
    }

    pub fn parse(s: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.tag() == s)
            .with_context(|| format!("{s:?} is not a worker kind (docker, containerd, sysext)"))
    }

    fn spec(self, name: &str) -> NodeSpec {
        match self {
            Kind::Docker => NodeSpec::worker(name, Auth::Cert),
            Kind::Containerd => NodeSpec::containerd_worker(name),
            Kind::Sysext => NodeSpec::sysext_worker(name),
        }
    }

    /// Whether its first boot ends in the agent's reboot.
    fn reboots(self) -> bool {
        self.spec("x").runtime == Runtime::Auto
    }

    /// The Ready condition's target, from the first boot (seconds).
    pub fn target_secs(self) -> f64 {
        match self {
            Kind::Docker => 10.0,
            Kind::Containerd | Kind::Sysext => 8.0,
        }
    }
}

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
    /// Why the node was not ready, each message with the seconds since the
    /// first boot it was first seen.
    pub fn reasons(&self) -> String {
        self.seen
            .not_ready_reasons
            .iter()
            .map(|(at, m)| format!("+{:.1} s {m:?}", at - self.t0))
            .collect::<Vec<_>>()
            .join("; ")
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

/// What `nb-bench node-ready` is asked to do.
pub struct Plan<'a> {
    pub agent: &'a Path,
    /// The agent to compare with (the previous main).
    pub agent_b: Option<&'a Path>,
    pub runs: usize,
    pub kinds: Vec<Kind>,
    /// How long the steady-state workers are watched (zero: not at all).
    pub write_window: Duration,
    /// Where each node's journal is kept (`<node>.json`).
    pub dump: Option<&'a Path>,
}

/// One worker measured: its kind, side (`a`, `b` or `floor`), timeline.
struct Seen {
    kind: Kind,
    side: &'static str,
    timeline: Timeline,
    m: Measured,
}

/// `nb-bench node-ready`: `runs` rounds; in each, for every kind, a
/// worker of `agent` (and one of `agent_b`, taking turns which goes first)
/// and a floor worker with nothing to bootstrap; then the write window.
/// Returns the `ROW` and `STEPS` lines.
pub fn bench(plan: &Plan) -> Result<Vec<String>> {
    let sides: Vec<&'static str> = if plan.agent_b.is_some() {
        vec!["a", "b", "floor"]
    } else {
        vec!["a", "floor"]
    };
    let ab = &sides[..sides.len() - 1];
    let mut specs = Vec::new();
    for i in 0..plan.runs {
        for k in &plan.kinds {
            for side in &sides {
                specs.push(k.spec(&format!("{side}-{}-{i}", k.tag())));
            }
        }
    }
    let steady = !plan.write_window.is_zero();
    if steady {
        for k in &plan.kinds {
            for side in ab {
                specs.push(k.spec(&format!("steady-{side}-{}", k.tag())));
            }
        }
    }
    let audit = AuditLog::new()?;
    let mut rig = ClusterRig::with_agent(&specs, plan.agent)?;
    rig.control_plane
        .extra_apiserver_args
        .extend(audit.apiserver_args());
    let cp = rig.control_plane.start(&rig.parts)?;
    let mut nodes = rig.nodes()?;
    if let Ok(extra) = std::env::var("NB_BENCH_KUBELET_ARGS") {
        for n in &nodes {
            more_kubelet_args(n, &extra)?;
        }
    }
    let rounds = plan.runs * plan.kinds.len() * sides.len();
    let (measured, steady_nodes) = nodes.split_at_mut(rounds);
    let mut seen: Vec<Seen> = Vec::new();
    for (g, group) in measured.chunks_mut(sides.len()).enumerate() {
        let (kind, round) = (plan.kinds[g % plan.kinds.len()], g / plan.kinds.len());
        let (workers, floor) = group.split_at_mut(ab.len());
        let mut order: Vec<usize> = (0..workers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for w in order {
            let n = &mut workers[w];
            if let (1, Some(b)) = (w, plan.agent_b) {
                n.install_file(b, "/opt/bin/node-bootstrap", 0o755)?;
            }
            let m = boot_to_ready(n, &cp.kubectl, kind.reboots())?;
            n.shutdown()?;
            keep(plan.dump, n, &m)?;
            let t = Timeline::of(m.t0, &m.journal, &m.seen)
                .with_context(|| format!("the timeline of {}", n.name()))?;
            eprintln!(
                "node-ready {}: first boot to the Ready condition {:.2} s, to Ready and untainted {:.2} s, the agent {:.2} s; not ready: {}",
                n.name(),
                m.first_boot_to_condition(),
                m.first_boot_to_ready(),
                t.agent_total(),
                m.reasons()
            );
            seen.push(Seen {
                kind,
                side: sides[w],
                timeline: t,
                m,
            });
        }
        let f = &mut floor[0];
        crate::floor::nothing_to_bootstrap(f, &rig, kind, &workers[0])?;
        let m = boot_to_ready(f, &cp.kubectl, false)?;
        f.shutdown()?;
        keep(plan.dump, f, &m)?;
        let t = Timeline::of_floor(m.t0, &m.journal, &m.seen)?;
        eprintln!(
            "node-ready {}: nothing to bootstrap, first boot to the Ready condition {:.2} s, to Ready and untainted {:.2} s; not ready: {}",
            f.name(),
            m.first_boot_to_condition(),
            m.first_boot_to_ready(),
            m.reasons()
        );
        seen.push(Seen {
            kind,
            side: "floor",
            timeline: t,
            m,
        });
    }
    let mut lines = Vec::new();
    for &kind in &plan.kinds {
        lines.extend(kind_lines(kind, &seen));
    }
    if steady {
        let names: Vec<(Kind, &'static str)> = plan
            .kinds
            .iter()
            .flat_map(|&k| ab.iter().map(move |&s| (k, s)))
            .collect();
        for ((kind, side), n) in names.iter().zip(steady_nodes.iter_mut()) {
            if let (&"b", Some(b)) = (side, plan.agent_b) {
                n.install_file(b, "/opt/bin/node-bootstrap", 0o755)?;
            }
            boot_to_ready(n, &cp.kubectl, kind.reboots())?;
        }
        lines.extend(write_rates(
            &audit,
            &names,
            steady_nodes,
            plan.write_window,
        )?);
    }
    Ok(lines)
}

/// A kind's `ROW` and `STEPS` lines.
fn kind_lines(kind: Kind, seen: &[Seen]) -> Vec<String> {
    let of = |side: &str| -> Vec<&Seen> {
        seen.iter()
            .filter(|s| s.kind == kind && s.side == side)
            .collect()
    };
    let (a, b, floor) = (of("a"), of("b"), of("floor"));
    let mut lines: Vec<String> = rows(kind, &a, &floor, "").iter().map(Row::line).collect();
    if !b.is_empty() {
        lines.extend(rows(kind, &b, &floor, " (B)").iter().map(Row::line));
    }
    let timelines = |s: &[&Seen]| s.iter().map(|s| s.timeline.clone()).collect::<Vec<_>>();
    let title = format!("{} worker, simulated node", kind.tag());
    let tb = timelines(&b);
    lines.extend(crate::breakdown::table(
        &title,
        &timelines(&a),
        (!b.is_empty()).then_some(tb.as_slice()),
    ));
    lines.extend(crate::breakdown::table(
        &format!("{title}, nothing to bootstrap"),
        &timelines(&floor),
        None,
    ));
    lines
}

/// The share of first boot to the Ready condition the agent may take on a
/// simulated worker.
pub const AGENT_SHARE_TARGET: f64 = 0.05;

fn rows(kind: Kind, ours: &[&Seen], floor: &[&Seen], side: &str) -> Vec<Row> {
    let tag = kind.tag();
    let med =
        |s: &[&Seen], f: fn(&Seen) -> f64| median(&s.iter().map(|s| f(s)).collect::<Vec<_>>());
    let cond = med(ours, |s| s.m.first_boot_to_condition());
    let usable = med(ours, |s| s.m.first_boot_to_ready());
    let floor_cond = med(floor, |s| s.m.first_boot_to_condition());
    let floor_usable = med(floor, |s| s.m.first_boot_to_ready());
    let agent = med(ours, |s| s.timeline.agent_total());
    let target = kind.target_secs();
    let reboot = if kind.reboots() { ", one reboot" } else { "" };
    vec![
        Row {
            name: format!(
                "worker first boot to the Ready condition, {tag}{reboot}, simulated node{side} (s, median of {})",
                ours.len()
            ),
            ours: format!("{cond:.1}"),
            theirs: format!("{floor_cond:.1}"),
            theirs_label: "the same worker with nothing to bootstrap".into(),
            ratio: format!("{:.2}x", cond / floor_cond),
            target: format!("< {target:.0} s"),
            met: cond < target,
        },
        Row {
            name: format!("  the same, to Ready and untainted ({tag}{side}, s)"),
            ours: format!("{usable:.1}"),
            theirs: format!("{floor_usable:.1}"),
            theirs_label: "nothing to bootstrap".into(),
            ratio: format!("{:.2}x", usable / floor_usable),
            target: "(context)".into(),
            met: true,
        },
        Row {
            name: format!(
                "the agent's share of first boot to the Ready condition ({tag}{side}, s)"
            ),
            ours: format!("{agent:.2}"),
            theirs: format!("{cond:.1}"),
            theirs_label: "first boot to the Ready condition".into(),
            ratio: format!("{:.1}%", 100.0 * agent / cond),
            target: format!("< {:.0}%", 100.0 * AGENT_SHARE_TARGET),
            met: agent / cond < AGENT_SHARE_TARGET,
        },
    ]
}

/// Settles the steady-state workers (all Ready), watches them for
/// `window`, then reads the audit log: each one's writes per minute, as
/// `ROW` lines (ours beside the previous main's when there is one).
fn write_rates(
    audit: &AuditLog,
    names: &[(Kind, &'static str)],
    nodes: &mut [SimNode],
    window: Duration,
) -> Result<Vec<String>> {
    // The first minutes' writes (the images pulled, the first reports)
    // are not steady state.
    const SETTLE: Duration = Duration::from_secs(60);
    eprintln!(
        "node-ready: {} steady-state workers Ready; {} s to settle, then {} s of the audit log",
        nodes.len(),
        SETTLE.as_secs(),
        window.as_secs()
    );
    std::thread::sleep(SETTLE);
    let from = epoch_secs(SystemTime::now());
    std::thread::sleep(window);
    let to = epoch_secs(SystemTime::now());
    // Let the last requests reach the log.
    std::thread::sleep(Duration::from_secs(2));
    let events = audit.events()?;
    for n in nodes.iter_mut() {
        n.shutdown()?;
    }
    let rate = |kind: Kind, side: &str| -> Option<Rates> {
        let i = names.iter().position(|&(k, s)| k == kind && s == side)?;
        Some(Rates::of(&events, nodes[i].name(), from, to))
    };
    let mut rows = Vec::new();
    let mut kinds: Vec<Kind> = names.iter().map(|n| n.0).collect();
    kinds.dedup();
    for kind in kinds {
        let (a, b) = (
            rate(kind, "a").context("no steady worker")?,
            rate(kind, "b"),
        );
        eprintln!("node-ready steady {}: ours {a:?}; B {b:?}", kind.tag());
        let minutes = a.minutes;
        let measures: [Measure; 3] = [
            (
                "Node status writes (PATCH nodes/status, and of the Node)",
                Rates::node_status_per_minute,
                true,
            ),
            (
                "lease writes (kube-node-lease)",
                Rates::lease_per_minute,
                true,
            ),
            (
                "reads of its Node (GET, from the API server's cache)",
                Rates::reads_per_minute,
                false,
            ),
        ];
        for (what, f, target) in measures {
            let (ours, theirs) = (f(&a), b.as_ref().map(f));
            // One event more in the window is the phase of a periodic
            // write, not a higher rate.
            let slack = 1.0 / minutes;
            rows.push(Row {
                name: format!(
                    "steady state, {what} per node per minute ({}, audit log, {minutes:.0} min)",
                    kind.tag()
                ),
                ours: format!("{ours:.2}"),
                theirs: theirs.map_or("-".into(), |t| format!("{t:.2}")),
                theirs_label: "the previous main's agent".into(),
                ratio: theirs.map_or("-".into(), |t| format!("{:.2}x", ours / t)),
                target: if target {
                    "<= previous main".into()
                } else {
                    "(context)".into()
                },
                met: !target || theirs.is_none_or(|t| ours <= t + slack),
            });
        }
    }
    Ok(rows.iter().map(Row::line).collect())
}

/// One steady-state measure: its name, how it is read from the rates,
/// whether it has a target (no more than the previous main).
type Measure = (&'static str, fn(&Rates) -> f64, bool);

/// `NB_BENCH_KUBELET_ARGS` (to look into a kubelet, e.g. `--v=4`): added
/// to the kubelet's arguments of the rig's test drop-in.
fn more_kubelet_args(n: &SimNode, extra: &str) -> Result<()> {
    const DROP_IN: &str = "/etc/systemd/system/kubelet.service.d/20-test-node.conf";
    let text = n.read(DROP_IN).context("the rig's kubelet drop-in")?;
    let text = text.replacen(
        "KUBELET_EXTRA_ARGS=",
        &format!("KUBELET_EXTRA_ARGS={extra} "),
        1,
    );
    n.write(DROP_IN, text, 0o644)
}

/// Keeps a node's journal in `dump` (one record a line).
fn keep(dump: Option<&Path>, n: &SimNode, m: &Measured) -> Result<()> {
    let Some(dir) = dump else { return Ok(()) };
    std::fs::create_dir_all(dir)?;
    let lines: Vec<String> = m.journal.iter().map(|r| r.to_string()).collect();
    std::fs::write(dir.join(format!("{}.json", n.name())), lines.join("\n"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_back_and_only_docker_reboots() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.tag()).unwrap(), k);
        }
        assert!(Kind::parse("podman").is_err());
        assert!(Kind::Docker.reboots());
        assert!(!Kind::Containerd.reboots() && !Kind::Sysext.reboots());
        assert!(Kind::Sysext.spec("w").kubelet_sysext);
    }
}
