//! Day two on a real cluster (testkit::cluster, testkit::follow): a
//! bootkube master and three workers, each of another kind, at v1.20.2:
//! docker through kubelet-wrapper, containerd (kubelet-wrapper too), and
//! today's Flatcar (the kubelet a system extension from the signed
//! mirror, containerd). Two workers' Ignition configs have the ignition
//! module's `follow` switch on; the containerd worker is turned on once
//! running, with `node-bootstrap follow --enable` (the follow timer, here
//! shortened to a look every two seconds); the cluster has what
//! terraform/modules/follow-rbac renders (the lease, the Roles and
//! RoleBindings for system:nodes) and the operator's ConfigMap. The API
//! server authorizes the nodes as Kubernetes 1.32 does (a node reads its
//! own Node only: testkit::node_authz) and keeps an audit log. A pod runs
//! on every worker.
//!
//! 1. The control plane moves to v1.20.3 (a stand-in for the 1.20.3
//!    release: kube-apiserver and kubelet built from the same source,
//!    stamped v1.20.3), but the release published for the workers is
//!    broken: its kubelet answers `--version` and never registers. The
//!    sysext worker takes the lease first and loses power while its switch
//!    is under way (its kubelet's files and image changed, the restart not
//!    done), boots, converges to one kubelet (the new one's files and image
//!    whole), does not come back Ready with v1.20.3, rolls back to v1.20.2
//!    (Ready again), and keeps the lease marked halted: the other workers
//!    never start. Its status, metrics (the alert fires, promtool), journal
//!    and an Event say so.
//! 2. The operator cordons the docker worker, publishes the real release
//!    and removes the halted node's key from the lease: the other workers
//!    follow to v1.20.3, one at a time (the lease's every write, from the
//!    audit log, never shows two holders), each pod keeps running (same
//!    container, restart count 0); the cordoned worker waits, still
//!    cordoned, until the operator uncordons it, then follows; the master
//!    (not following) stays at v1.20.2.
//! 3. The control plane moves to v1.21.0 (the stand-in of that release,
//!    built as the 1.20.3 one): no worker moves without the operator's
//!    target (`awaiting-operator`); with `minor: "1.21"`, each in turn
//!    cordons, evicts its pods through the Eviction API (a Deployment of two
//!    replicas under a PodDisruptionBudget of one), changes, uncordons.
//! 4. Through it all, from the audit log: no agent listed Nodes or another
//!    node's pods, and the 1.32 authorizer denied the agents nothing.

use benchkit::follow_fleet::audit;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use testkit::cluster::ClusterRig;
use testkit::follow::{self, Release, WORKERS, Watch};
use testkit::simnode::SimNode;

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::torcx::skip_unless_available()
        || testkit::skip_without(&["terraform", "promtool"])
}

/// `node-bootstrap status --json` of `n`.
fn status(n: &SimNode) -> serde_json::Value {
    let out = n
        .exec(&["/opt/bin/node-bootstrap", "status", "--json"])
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: status --json: {e}: {}",
            n.name(),
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// What each worker's follow says, and its last runs' journal: what a
/// test that gives up shows.
fn follow_diagnostics(workers: &[&SimNode]) -> String {
    workers
        .iter()
        .map(|w| {
            let journal = w.journal("node-bootstrap-follow.service");
            let tail: Vec<&str> = journal.lines().rev().take(15).collect();
            format!(
                "{}: {}\n  {}",
                w.name(),
                status(w)["follow"],
                tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn wait_standing(n: &SimNode, standing: &str, timeout: Duration) -> serde_json::Value {
    n.wait_for(&format!("follow {standing}"), timeout, |n| {
        let s = status(n);
        (s["follow"]["standing"] == standing).then(|| s["follow"].clone())
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e:#}\n{}\n{}",
            status(n)["follow"],
            n.journal("node-bootstrap-follow.service")
        )
    })
}

/// The follow lease's holders: node -> halted.
fn holders(rig: &ClusterRig) -> BTreeMap<String, bool> {
    follow::holders(&rig.kubectl).unwrap()
}

fn kubelet_versions(rig: &ClusterRig) -> BTreeMap<String, String> {
    rig.kubectl
        .nodes()
        .unwrap()
        .into_iter()
        .map(|n| (n.name, n.kubelet_version))
        .collect()
}

/// The pod on each worker: name -> (container id, restart count, phase).
fn pod_states(rig: &ClusterRig, names: &[String]) -> BTreeMap<String, (String, u64, String)> {
    names
        .iter()
        .map(|p| {
            let j: serde_json::Value =
                serde_json::from_str(&rig.kubectl.run(&["get", "pod", p, "-o", "json"]).unwrap())
                    .unwrap();
            let c = &j["status"]["containerStatuses"][0];
            (
                p.clone(),
                (
                    c["containerID"].as_str().unwrap_or_default().to_string(),
                    c["restartCount"].as_u64().unwrap_or(99),
                    j["status"]["phase"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ),
            )
        })
        .collect()
}

#[test]
pub(crate) fn workers_follow_the_control_plane_one_at_a_time_and_a_bad_release_halts_at_the_first()
{
    if skip() {
        return;
    }
    let t0 = Instant::now();
    let standin = follow::next_patch_parts().unwrap();
    let minor = follow::next_minor_parts().unwrap();
    let rig = follow::rig(&testkit::cli::agent_binary()).unwrap();
    let base = rig.parts.version.clone();
    let mut nodes = follow::boot(&rig).unwrap();
    let booted = t0.elapsed();
    eprintln!("cluster Ready after {booted:?}");
    let workers: Vec<&SimNode> = nodes[1..].iter().collect();
    let mut pod_names = follow::pod_on_each(&rig, &workers, "").unwrap();
    // Every worker follows (the one turned on with --enable too): up to
    // date with the API server's v1.20.2.
    for w in &workers {
        let f = wait_standing(w, "up-to-date", Duration::from_secs(60));
        assert_eq!(f["current"], base.as_str(), "{f}");
    }
    let ctr = workers
        .iter()
        .find(|n| n.name() == follow::ENABLED_LATER)
        .unwrap();
    let timer = ctr
        .exec(&["systemctl", "is-enabled", "node-bootstrap-follow.timer"])
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&timer.stdout).trim(), "enabled");

    // 1. The control plane moves; the release the workers find is broken.
    let t1 = Instant::now();
    follow::publish_release(
        &rig,
        &follow::wrappers(&nodes),
        &[Release::Broken(&standin.version)],
    )
    .unwrap();
    // The sysext worker first, by holding the others' timers until it has
    // the lease (which worker goes first is otherwise a race); its kubelet's
    // starts slowed (testkit::follow::SLOW_RESTART) so that the power cut
    // lands while the switch is under way.
    for w in &nodes[1..3] {
        w.systemctl(&["stop", "node-bootstrap-follow.timer"])
            .unwrap();
    }
    // (/run inside the node is its own tmpfs: touched there.)
    nodes[3].exec(&["touch", follow::SLOW_RESTART]).unwrap();
    let mut restarts = vec![follow::move_control_plane(&rig, &nodes[0], &standin).unwrap()];
    let first =
        a_bad_release_is_rolled_back_on_the_first_node(&rig, &mut nodes, &standin.version, &base);
    assert_eq!(first, WORKERS[2]);
    for w in &nodes[1..3] {
        w.systemctl(&["start", "node-bootstrap-follow.timer"])
            .unwrap();
    }
    let workers: Vec<&SimNode> = nodes[1..].iter().collect();
    the_others_never_start(&rig, &workers, &first, &base);
    let halted_took = t1.elapsed();

    // 2. The operator's cordon, the real release, the halt cleared: one at
    // a time, pods untouched. The first node's pod went with its power: a
    // new one there.
    let n_first = workers.iter().find(|n| n.name() == first).unwrap();
    pod_names.retain(|p| *p != format!("keep-{first}"));
    pod_names.extend(follow::pod_on_each(&rig, &[n_first], "-2").unwrap());
    let pods_before = pod_states(&rig, &pod_names);
    let t2 = Instant::now();
    let cordoned = WORKERS[0];
    rig.kubectl.run(&["cordon", cordoned]).unwrap();
    follow::publish_release(&rig, &follow::wrappers(&nodes), &[Release::Real(&standin)]).unwrap();
    let watch = Watch::start(&rig.kubectl);
    follow::clear_halt(&rig.kubectl, &first).unwrap();
    let others: Vec<&str> = WORKERS.iter().copied().filter(|w| *w != cordoned).collect();
    wait_followed(&rig, &workers, &others, &standin.version);
    // The cordoned worker waits, still cordoned, and changed nothing.
    let n_cordoned = workers.iter().find(|n| n.name() == cordoned).unwrap();
    n_cordoned
        .wait_for(
            "waiting for its cordon to go",
            Duration::from_secs(30),
            |n| {
                let f = status(n)["follow"].clone();
                (f["standing"] == "waiting"
                    && f["why"].as_str().is_some_and(|w| {
                        w.contains("cordoned (spec.unschedulable) by someone else")
                    }))
                .then_some(())
            },
        )
        .unwrap_or_else(|e| panic!("{e:#}\n{}", status(n_cordoned)["follow"]));
    assert_eq!(kubelet_versions(&rig)[cordoned], base);
    assert!(
        unschedulable(&rig, cordoned),
        "the operator's cordon is kept"
    );
    rig.kubectl.run(&["uncordon", cordoned]).unwrap();
    wait_followed(&rig, &workers, &WORKERS, &standin.version);
    let rollout_took = t2.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let history = watch.history();
    let started = watch.started_unix;
    drop(watch);
    one_at_a_time(&nodes[0], &history, started, &standin.version);
    let pods_after = pod_states(&rig, &pod_names);
    assert_eq!(pods_after, pods_before, "a pod was restarted or replaced");
    for (p, (_, restarts, phase)) in &pods_after {
        assert_eq!((*restarts, phase.as_str()), (0, "Running"), "{p}");
    }
    every_worker_runs_the_release(&rig, &workers, &standin.version, &base);

    // 3. The next minor: only with the operator's target, drained first.
    let t3 = Instant::now();
    // Every bare pod goes (a drain refuses a pod without a controller),
    // the one on the power-cut node's first boot too: its object outlived
    // the cut.
    let first_pod = format!("keep-{first}");
    for p in pod_names.iter().chain([&first_pod]) {
        rig.kubectl
            .run(&[
                "delete",
                "pod",
                p,
                "--grace-period=1",
                "--wait=false",
                "--ignore-not-found",
            ])
            .unwrap();
    }
    let (history, started, restart) = a_minor_release_waits_for_the_operator_then_drains_each_node(
        &rig,
        &nodes,
        &minor,
        &standin.version,
    );
    one_at_a_time(&nodes[0], &history, started, &minor.version);
    let minor_took = t3.elapsed();
    restarts.push(restart);
    the_agents_asked_only_what_a_1_32_node_may(&rig, &nodes[0], &restarts);
    eprintln!(
        "follow test: cluster {booted:?}, bad release halted {halted_took:?}, rollout {rollout_took:?}, minor {minor_took:?}, total {:?}",
        t0.elapsed()
    );
}

/// Waits until every worker of `names` reports `version`, with no holder.
fn wait_followed(rig: &ClusterRig, workers: &[&SimNode], names: &[&str], version: &str) {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let v = kubelet_versions(rig);
        if names.iter().all(|w| v[*w] == version) && holders(rig).is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every worker of {names:?} followed: {v:?}, lease {:?}\n{}",
            holders(rig),
            follow_diagnostics(workers)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// While this file exists on the node whose power was cut, its follow run
/// waits (a drop-in of the test's, written while the node is down).
const HOLD_FOLLOW: &str = "/var/lib/nb-test-hold-follow";

/// The agent's `follow` lines on `n`, oldest first: when, which unit,
/// what, and the phase and converge fields (for a failure's message).
fn follow_lines(n: &SimNode) -> String {
    n.journal_json(&["STEP=follow"])
        .iter()
        .map(|l| {
            let f = |k: &str| l[k].as_str().unwrap_or("-").to_string();
            format!(
                "{} {} {} phase={} converged={}",
                f("__REALTIME_TIMESTAMP"),
                f("OBJECT_SYSTEMD_UNIT"),
                f("MESSAGE"),
                f("PHASE"),
                f("CONVERGED")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn unschedulable(rig: &ClusterRig, node: &str) -> bool {
    rig.kubectl
        .run(&["get", "node", node, "-o", "jsonpath={.spec.unschedulable}"])
        .unwrap()
        .trim()
        == "true"
}

/// 1: the first node to take the lease (the sysext worker) loses power
/// while its switch is under way, converges, rolls back, halts. Returns
/// its name.
fn a_bad_release_is_rolled_back_on_the_first_node(
    rig: &ClusterRig,
    nodes: &mut [SimNode],
    bad: &str,
    base: &str,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    let first = loop {
        if let Some((n, _)) = holders(rig).into_iter().next() {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no worker took the lease after the control plane moved\n{}",
            follow_diagnostics(&nodes[1..].iter().collect::<Vec<_>>())
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let n = nodes.iter_mut().find(|n| n.name() == first).unwrap();
    // The power goes while the switch is under way: the record says
    // switching, the new kubelet's files are in place, its restart (slowed)
    // not done.
    n.wait_for("the switch under way", Duration::from_secs(90), |n| {
        let switching = n
            .read("/var/lib/node-bootstrap/follow/change.json")
            .is_some_and(|c| c.contains("\"phase\": \"switching\""));
        let env = n.read("/etc/kubernetes/kubelet.env").unwrap_or_default();
        // ... and the new kubelet's start held (the drop-in's ExecStartPre).
        let held = n.prop("kubelet.service", "SubState").ok()? == "start-pre";
        (switching && held && env.contains(&format!("KUBELET_IMAGE_TAG=\"{bad}\""))).then_some(())
    })
    .unwrap();
    n.power_cut().unwrap();
    // Flatcar starts its containerd at boot; the rig's OS does not enable
    // it (the agent enables only a containerd package of its own).
    testkit::pods::enable_os_unit(n, "containerd.service", "multi-user.target").unwrap();
    // The follow run at boot proves the converged change or rolls it back
    // 30 s after the converge; a loaded machine's boot can take that long
    // to return. It waits (while HOLD_FOLLOW exists, 120 s at most) until
    // the converge's result is read.
    n.drop_in(
        "node-bootstrap-follow.service",
        "30-test-hold",
        &format!(
            "# The test: the follow run waits while {HOLD_FOLLOW} exists (120 s at most).\n{}",
            follow::hold_while(HOLD_FOLLOW, 120)
        ),
    )
    .unwrap();
    n.write(HOLD_FOLLOW, "", 0o644).unwrap();
    n.boot().unwrap();
    // One kubelet's files, whole, at boot: the new one's, its image linked.
    n.wait_for("the converge at boot", Duration::from_secs(60), |n| {
        n.journal("node-bootstrap-follow-converge.service")
            .contains("converged before the kubelet starts")
            .then_some(())
    })
    .unwrap();
    let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
    assert!(
        env.contains(&format!("KUBELET_IMAGE_TAG=\"{bad}\"")),
        "{first}: {env}\nthe agent's follow lines:\n{}",
        follow_lines(n)
    );
    let link = n
        .exec(&["readlink", "/etc/extensions/kubernetes.raw"])
        .unwrap();
    assert!(
        String::from_utf8_lossy(&link.stdout).contains(bad),
        "{first}"
    );
    let converged = n.journal("node-bootstrap-follow-converge.service");
    assert!(
        converged.contains("converged before the kubelet starts"),
        "{converged}"
    );
    n.exec(&["rm", HOLD_FOLLOW]).unwrap();
    // Rolled back: halted in the lease, Ready again with the previous kubelet.
    let f = wait_standing(n, "halted", Duration::from_secs(150));
    assert!(
        f["why"]
            .as_str()
            .unwrap()
            .contains(&format!("not Ready with kubelet {bad} within 30 s")),
        "{f}"
    );
    assert_eq!(f["current"], base, "{f}");
    assert_eq!(holders(rig), BTreeMap::from([(first.clone(), true)]));
    rig.kubectl
        .wait_ready(&[first.as_str()], Duration::from_secs(90))
        .unwrap();
    assert_eq!(kubelet_versions(rig)[&first], base);
    let env = n.read("/etc/kubernetes/kubelet.env").unwrap();
    assert!(
        env.contains(&format!("KUBELET_IMAGE_TAG=\"{base}\"")),
        "{first}: {env}"
    );
    // What the operator sees: the journal entry of the catalog, the Event,
    // the metric and the alert on it.
    let journal = n.journal("node-bootstrap-follow.service");
    assert!(journal.contains("rolled back"), "{journal}");
    let events = rig
        .kubectl
        .run(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={first},reason=KubeletChangeRolledBack"),
            "-o",
            "json",
        ])
        .unwrap();
    assert!(
        events.contains("the follow lease keeps this node"),
        "{events}"
    );
    let prom = n
        .read("/var/lib/node_exporter/textfile_collector/node_bootstrap_follow.prom")
        .expect("the follow textfile");
    assert!(
        prom.contains("node_bootstrap_follow_state{state=\"halted\"} 1\n"),
        "{prom}"
    );
    testkit::promtool::follow_halted_alert_fires_on(&prom, &first).unwrap();
    first
}

/// The workers other than `first` never started the broken change.
fn the_others_never_start(rig: &ClusterRig, workers: &[&SimNode], first: &str, base: &str) {
    // Several of their runs (every two seconds).
    std::thread::sleep(Duration::from_secs(10));
    for w in workers.iter().filter(|w| w.name() != first) {
        let f = status(w)["follow"].clone();
        assert_eq!(f["standing"], "waiting", "{}: {f}", w.name());
        assert!(
            f["why"]
                .as_str()
                .unwrap()
                .contains(&format!("the rollout is halted at {first}")),
            "{f}"
        );
        assert_eq!(kubelet_versions(rig)[w.name()], base);
        let env = w.read("/etc/kubernetes/kubelet.env").unwrap();
        assert!(
            env.contains(&format!("KUBELET_IMAGE_TAG=\"{base}\"")),
            "{}",
            w.name()
        );
        assert!(
            !w.exists("/var/lib/node-bootstrap/follow/change.json"),
            "{}",
            w.name()
        );
    }
    assert_eq!(holders(rig).len(), 1);
}

/// From the audit log: after no write of the lease did two workers hold
/// it, and none took it while a halt stood (every write, in etcd's order,
/// not samples); each changed its version while it held the lease. From
/// the API server's Nodes, watched (sampled, what the audit log does not
/// keep): while a worker's change took it out (a not-Ready window of its
/// own that meets its holding), no other worker was not Ready. A
/// not-Ready window that meets no holding of its node is the control
/// plane's restart (the controller manager marks every node Unknown when
/// the API server was away longer than its grace period: seen in one run
/// of two, 5 s on two workers at once, before anyone held the lease): no
/// change of the agent's, shown and not counted.
fn one_at_a_time(master: &SimNode, history: &[follow::Snapshot], started: f64, version: &str) {
    let writes = audit::lease_writes(&follow::audit_log(master), follow::LEASE).unwrap();
    assert!(writes.len() > 5, "too few writes of the lease: {writes:?}");
    let h = audit::check(&writes, 1)
        .unwrap_or_else(|e| panic!("the lease's history breaks one at a time: {e}"));
    assert_eq!(h.max_holders, 1);
    let spans = audit::spans(&writes);
    let rel = |t: f64| Duration::from_secs_f64((t - started).max(0.0));
    let w: Vec<(&str, follow::Windows)> = WORKERS
        .iter()
        .map(|n| {
            let mut win = follow::windows(history, n, version);
            win.holding = spans
                .get(*n)
                .into_iter()
                .flatten()
                .filter(|(_, b)| *b >= started)
                .map(|(a, b)| (rel(*a), rel(*b)))
                .collect();
            (*n, win)
        })
        .collect();
    // The not-Ready windows of each worker's own change.
    let changing = |wa: &follow::Windows| -> Vec<(Duration, Duration)> {
        let own: Vec<_> = wa
            .not_ready
            .iter()
            .copied()
            .filter(|nr| follow::overlap(&[*nr], &wa.holding))
            .collect();
        if own.len() < wa.not_ready.len() {
            eprintln!(
                "not Ready outside its changes (not counted): {:?}",
                wa.not_ready
                    .iter()
                    .filter(|nr| !own.contains(nr))
                    .collect::<Vec<_>>()
            );
        }
        own
    };
    for (i, (a, wa)) in w.iter().enumerate() {
        for (b, wb) in &w[i + 1..] {
            assert!(
                !follow::overlap(&changing(wa), &wb.not_ready)
                    && !follow::overlap(&wa.not_ready, &changing(wb)),
                "{a} and {b} not Ready at once during a change: {wa:?} {wb:?}"
            );
        }
        let at = wa
            .changed_at
            .unwrap_or_else(|| panic!("{a} never reported {version}"));
        assert!(
            wa.holding.iter().any(
                |(s, e)| *s <= at + Duration::from_secs(1) && at <= *e + Duration::from_secs(2)
            ),
            "{a} reported {version} at {at:?} outside its holding {:?}",
            wa.holding
        );
    }
}

/// 4: what the agents asked, from the audit log: only what a node may
/// ask from Kubernetes 1.32 (its own Node, its own pods by their field
/// selector), nothing refused; the 1.32 authorizer's denials of others
/// (the 1.20 kubelets) are shown. One refusal is the server's, not the
/// agent's: `/version`, which the default policy lets every user read
/// (`system:public-info-viewer`), refused by an API server that has just
/// restarted and not yet read that policy; such a refusal is excused
/// only inside a restart of the control plane (until its `/version`
/// answers, and `RBAC_GRACE` after), and shown.
fn the_agents_asked_only_what_a_1_32_node_may(
    rig: &follow::FollowRig,
    master: &SimNode,
    restarts: &[follow::Restart],
) {
    const RBAC_GRACE: f64 = 10.0;
    let (starting, requests): (Vec<audit::Request>, Vec<audit::Request>) =
        audit::node_requests(&follow::audit_log(master))
            .into_iter()
            .filter(|r| r.user_agent.starts_with("node-bootstrap/"))
            .partition(|r| {
                r.code == 403
                    && r.uri == "/version"
                    && restarts
                        .iter()
                        .any(|s| s.from <= r.at && r.at <= s.answering + RBAC_GRACE)
            });
    if !starting.is_empty() {
        eprintln!(
            "refused by an API server still starting (restarts {restarts:?}): {:?}",
            starting
                .iter()
                .map(|r| format!("{} {} at {:.1}", r.node, r.uri, r.at))
                .collect::<Vec<_>>()
        );
    }
    assert!(
        requests.len() > 50,
        "{} requests of the agents",
        requests.len()
    );
    assert!(
        requests
            .iter()
            .any(|r| r.resource == "pods" && r.verb == "list"),
        "the drains' pod lists are in the log"
    );
    let beyond = audit::beyond_a_node(&requests);
    assert!(beyond.is_empty(), "{beyond:#?}\nrestarts: {restarts:?}");
    let denied = rig.authz.denials();
    if !denied.is_empty() {
        eprintln!("the 1.32 node authorizer denied (not the agents): {denied:?}");
    }
}

/// After the rollout: each worker's files and kubelet are the release's,
/// the sysext's previous image kept; the master did not follow.
fn every_worker_runs_the_release(
    rig: &ClusterRig,
    workers: &[&SimNode],
    version: &str,
    base: &str,
) {
    let v = kubelet_versions(rig);
    assert_eq!(v["master-1"], base, "the master does not follow");
    for w in workers {
        let env = w.read("/etc/kubernetes/kubelet.env").unwrap();
        assert!(
            env.contains(&format!("KUBELET_IMAGE_TAG=\"{version}\"")),
            "{}: {env}",
            w.name()
        );
        let f = status(w)["follow"].clone();
        assert_eq!(
            (f["standing"].as_str(), f["current"].as_str()),
            (Some("up-to-date"), Some(version)),
            "{f}"
        );
        assert_eq!(f["last_change"]["result"], "succeeded", "{f}");
    }
    let sysext = workers.iter().find(|n| n.name() == "w-sysext").unwrap();
    let link = sysext
        .exec(&["readlink", "/etc/extensions/kubernetes.raw"])
        .unwrap();
    assert!(String::from_utf8_lossy(&link.stdout).contains(version));
    let kept = sysext.exec(&["ls", "/opt/extensions/kubernetes"]).unwrap();
    let kept = String::from_utf8_lossy(&kept.stdout);
    assert!(
        kept.contains(&format!("kubernetes-{base}-x86-64.raw")),
        "the previous image is kept: {kept}"
    );
    let merged = sysext.exec(&["/usr/bin/kubelet", "--version"]).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&merged.stdout).trim(),
        format!("Kubernetes {version}")
    );
}

/// 4: the control plane at the next minor (the stand-in of v1.21.0): no
/// worker moves without the operator's target; with it, each cordons,
/// evicts its pods through the Eviction API (a PodDisruptionBudget keeps
/// one of the two replicas available), changes, and uncordons, one at a
/// time.
fn a_minor_release_waits_for_the_operator_then_drains_each_node(
    rig: &ClusterRig,
    nodes: &[SimNode],
    minor: &testkit::kube::KubeParts,
    patch: &str,
) -> (Vec<follow::Snapshot>, f64, follow::Restart) {
    let workers: Vec<&SimNode> = nodes[1..].iter().collect();
    follow::publish_release(rig, &follow::wrappers(nodes), &[Release::Real(minor)]).unwrap();
    let restart = follow::move_control_plane(rig, &nodes[0], minor).unwrap();
    for w in &workers {
        let f = wait_standing(w, "awaiting-operator", Duration::from_secs(60));
        assert!(
            f["why"]
                .as_str()
                .unwrap()
                .contains("data.minor of the follow ConfigMap"),
            "{f}"
        );
    }
    // Two more runs of each.
    std::thread::sleep(Duration::from_secs(4));
    assert!(holders(rig).is_empty());
    assert!(
        WORKERS.iter().all(|w| kubelet_versions(rig)[*w] == patch),
        "{:?}",
        kubelet_versions(rig)
    );
    // The workload a drain moves: two replicas, at most one away.
    follow::apply_yaml(&rig.kubectl, &follow::replicated_workload("web", 2)).unwrap();
    follow::wait_available(&rig.kubectl, "web", 2, Duration::from_secs(90)).unwrap();
    let watch = Watch::start(&rig.kubectl);
    follow::set_policy(&rig.kubectl, serde_json::json!({"minor": "1.21"})).unwrap();
    let deadline = Instant::now() + Duration::from_secs(360);
    loop {
        let v = kubelet_versions(rig);
        if WORKERS.iter().all(|w| v[*w] == minor.version) && holders(rig).is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every worker took the minor: {v:?}, lease {:?}\n{}",
            holders(rig),
            follow_diagnostics(&workers)
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    std::thread::sleep(Duration::from_secs(2));
    let history = watch.history();
    let started = watch.started_unix;
    drop(watch);
    for w in &workers {
        let f = status(w)["follow"].clone();
        assert_eq!(f["last_change"]["kind"], "minor", "{f}");
        assert_eq!(f["last_change"]["result"], "succeeded", "{f}");
        let journal = w.journal("node-bootstrap-follow.service");
        assert!(
            journal.contains("node cordoned") && journal.contains("node uncordoned"),
            "{}: {journal}",
            w.name()
        );
    }
    // Cordoned only while holding the lease (in that look or the next: a
    // look reads the lease, then the Nodes, and a take with its cordon
    // may fall between), uncordoned at the end.
    for (i, s) in history.iter().enumerate() {
        let held = |n: &str, k: usize| {
            history
                .get(k)
                .is_some_and(|x| x.holders.iter().any(|(h, _)| h == n))
        };
        for (n, (_, _, unschedulable)) in &s.nodes {
            if *unschedulable {
                assert!(
                    held(n, i) || held(n, i + 1),
                    "{n} cordoned at {:?} without the lease",
                    s.at
                );
            }
        }
    }
    assert!(
        history.last().unwrap().nodes.values().all(|n| !n.2),
        "a node stayed cordoned"
    );
    follow::wait_available(&rig.kubectl, "web", 2, Duration::from_secs(90)).unwrap();
    (history, started, restart)
}
