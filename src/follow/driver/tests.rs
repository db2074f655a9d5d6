//! The driver against a cluster and nodes in memory: several nodes share
//! one API server, one follow lease and one clock; a kubelet comes back Ready
//! with its version a few seconds after its restart, unless its release
//! is broken (it never posts again).

use super::*;
use crate::follow::lease::{Holder, Readiness};
use crate::follow::plan::NodeLook;
use crate::follow::policy::{MinorVersion, Policy};
use crate::follow::record::{ENV, KUBELET_CONFIG};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a restarted kubelet takes to post Ready.
const COMES_BACK: u64 = 4;

#[derive(Debug, Clone)]
struct NodeState {
    /// The version the Node reports and when it last posted.
    reported: String,
    heartbeat: u64,
    ready: bool,
    unschedulable: bool,
    /// The kubelet installed, and when it was restarted.
    installed: String,
    restarted: Option<u64>,
}

#[derive(Default)]
struct Cluster {
    clock: Cell<u64>,
    /// What `/version` answers, in turn (the last one repeats).
    answers: RefCell<Vec<String>>,
    policy: RefCell<Policy>,
    lease: RefCell<(u64, Vec<Holder>, u64)>,
    nodes: RefCell<BTreeMap<String, NodeState>>,
    broken: RefCell<BTreeSet<String>>,
    events: RefCell<Vec<(String, String)>>,
    /// (time, node, what): restarts, cordons, drains.
    log: RefCell<Vec<(u64, String, String)>>,
}

impl Cluster {
    fn new(api: &str, nodes: &[&str], version: &str) -> Cluster {
        let c = Cluster {
            clock: Cell::new(1000),
            answers: RefCell::new(vec![api.into()]),
            ..Cluster::default()
        };
        for n in nodes {
            c.nodes.borrow_mut().insert(
                n.to_string(),
                NodeState {
                    reported: version.into(),
                    heartbeat: 1000,
                    ready: true,
                    unschedulable: false,
                    installed: version.into(),
                    restarted: None,
                },
            );
        }
        c
    }

    /// The kubelets come back (or not) as time passes.
    fn tick(&self, secs: u64) {
        self.clock.set(self.clock.get() + secs);
        let now = self.clock.get();
        for s in self.nodes.borrow_mut().values_mut() {
            if let Some(r) = s.restarted
                && now >= r + COMES_BACK
                && !self.broken.borrow().contains(&s.installed)
            {
                s.reported = s.installed.clone();
                s.heartbeat = now;
                s.ready = true;
                s.restarted = None;
            }
        }
    }

    fn holders(&self) -> Vec<Holder> {
        self.lease.borrow().1.clone()
    }
}

struct Node<'a> {
    c: &'a Cluster,
    name: String,
    dir: tempfile::TempDir,
    /// Fail the next kubelet restart (a crash in the middle).
    fail_restart: Cell<bool>,
}

impl<'a> Node<'a> {
    fn new(c: &'a Cluster, name: &str) -> Node<'a> {
        Node {
            c,
            name: name.into(),
            dir: tempfile::tempdir().unwrap(),
            fail_restart: Cell::new(false),
        }
    }

    fn driver(&self) -> Driver<'_, Self> {
        Driver {
            seams: self,
            files: Files::new(self.dir.path()),
            settings: Settings {
                stable_checks: 1,
                ready_timeout: Duration::from_secs(60),
                poll: Duration::from_secs(2),
                backend: Backend::Wrapper,
            },
        }
    }

    fn state(&self) -> NodeState {
        self.c.nodes.borrow()[&self.name].clone()
    }

    fn follow_state(&self) -> FollowState {
        Files::new(self.dir.path()).load_state().unwrap()
    }
}

impl Seams for Node<'_> {
    fn now(&self) -> u64 {
        self.c.clock.get()
    }
    async fn sleep(&self, d: Duration) {
        self.c.tick(d.as_secs());
    }
    fn node_name(&self) -> &str {
        &self.name
    }
    async fn apiserver_version(&self) -> Result<KubeVersion> {
        let mut a = self.c.answers.borrow_mut();
        let v = if a.len() > 1 {
            a.remove(0)
        } else {
            a[0].clone()
        };
        Ok(KubeVersion::parse(&v).unwrap())
    }
    async fn policy(&self) -> Result<Policy> {
        Ok(self.c.policy.borrow().clone())
    }
    async fn lease(&self) -> Result<LeaseView> {
        let (rv, holders, transitions) = self.c.lease.borrow().clone();
        Ok(LeaseView {
            resource_version: Some(rv.to_string()),
            holders,
            transitions,
            object: None,
        })
    }
    async fn write_lease(&self, view: &LeaseView) -> Result<bool> {
        let mut l = self.c.lease.borrow_mut();
        if view.resource_version.as_deref() != Some(&l.0.to_string()) {
            return Ok(false);
        }
        *l = (l.0 + 1, view.holders.clone(), view.transitions);
        Ok(true)
    }
    async fn readiness(&self) -> Result<Readiness> {
        let nodes = self.c.nodes.borrow();
        Ok(Readiness {
            me_ready: nodes[&self.name].ready,
            not_ready: nodes
                .iter()
                .filter(|(n, s)| **n != self.name && !s.ready)
                .map(|(n, _)| n.clone())
                .collect(),
        })
    }
    async fn node(&self) -> std::result::Result<NodeLook, String> {
        let s = self.state();
        Ok(NodeLook {
            ready: s.ready,
            kubelet_version: s.reported,
            heartbeat: Some(s.heartbeat),
            detail: None,
        })
    }
    async fn set_unschedulable(&self, on: bool) -> Result<()> {
        self.c
            .nodes
            .borrow_mut()
            .get_mut(&self.name)
            .unwrap()
            .unschedulable = on;
        let what = if on { "cordon" } else { "uncordon" };
        self.c
            .log
            .borrow_mut()
            .push((self.now(), self.name.clone(), what.into()));
        Ok(())
    }
    async fn drain(&self, _minor: u64) -> Result<()> {
        self.c
            .log
            .borrow_mut()
            .push((self.now(), self.name.clone(), "drain".into()));
        Ok(())
    }
    async fn event(&self, _kind: EventKind, reason: &str, _message: &str) {
        self.c
            .events
            .borrow_mut()
            .push((self.name.clone(), reason.into()));
    }
    fn current_version(&self) -> Result<KubeVersion> {
        // kubelet.env's tag: what is installed.
        Ok(KubeVersion::parse(&self.state().installed).unwrap())
    }
    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>> {
        Ok(None)
    }
    async fn prepare(&self, change: &mut Change) -> Result<()> {
        let f = Files::new(self.dir.path());
        let env = |v: &str| format!("KUBELET_IMAGE_TAG=\"{v}\"\n");
        f.save_set(
            Set::Previous,
            &[
                (ENV, Some(env(&change.from).as_bytes())),
                (KUBELET_CONFIG, None),
            ],
        )?;
        f.save_set(
            Set::Next,
            &[
                (ENV, Some(env(&change.to).as_bytes())),
                (KUBELET_CONFIG, None),
            ],
        )?;
        Ok(())
    }
    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()> {
        let v = match set {
            Set::Next => &change.to,
            Set::Previous => &change.from,
        };
        self.c
            .nodes
            .borrow_mut()
            .get_mut(&self.name)
            .unwrap()
            .installed = v.clone();
        Ok(())
    }
    async fn restart_kubelet(&self) -> Result<()> {
        if self.fail_restart.replace(false) {
            return Err(Error::retryable("lost systemd's signals (test)"));
        }
        let now = self.now();
        let mut nodes = self.c.nodes.borrow_mut();
        let s = nodes.get_mut(&self.name).unwrap();
        s.restarted = Some(now);
        // The kubelet that stops is not Ready for a moment, as the API
        // server sees it once the new one posts.
        s.ready = false;
        self.c
            .log
            .borrow_mut()
            .push((now, self.name.clone(), format!("restart {}", s.installed)));
        Ok(())
    }
}

fn run(n: &Node) -> Result<Ran> {
    crate::async_runtime::current_thread()
        .unwrap()
        .block_on(n.driver().run())
}

#[test]
fn every_node_follows_a_patch_release_one_at_a_time() {
    let c = Cluster::new("v1.20.3", &["w1", "w2", "w3"], "v1.20.2");
    let nodes: Vec<Node> = ["w1", "w2", "w3"]
        .iter()
        .map(|n| Node::new(&c, n))
        .collect();
    for n in &nodes {
        assert_eq!(
            run(n).unwrap(),
            Ran::Changed(ChangeResult::Succeeded),
            "{}",
            n.name
        );
        let s = n.state();
        assert_eq!((s.reported.as_str(), s.ready), ("v1.20.3", true));
        assert!(c.holders().is_empty(), "released: {:?}", c.holders());
        let f = n.follow_state();
        assert_eq!(f.standing, Standing::UpToDate);
        assert_eq!(
            f.last_change.as_ref().unwrap().back_after_secs,
            Some(COMES_BACK)
        );
        assert!(!Files::new(n.dir.path()).change().exists());
        // Up to date: a second run changes nothing.
        assert_eq!(run(n).unwrap(), Ran::Looked(Standing::UpToDate));
    }
    assert_eq!(c.lease.borrow().2, 3, "one take per node");
    let restarts: Vec<String> = c
        .log
        .borrow()
        .iter()
        .map(|(_, n, w)| format!("{n} {w}"))
        .collect();
    assert_eq!(
        restarts,
        [
            "w1 restart v1.20.3",
            "w2 restart v1.20.3",
            "w3 restart v1.20.3"
        ]
    );
    let reasons: Vec<String> = c
        .events
        .borrow()
        .iter()
        .map(|(n, r)| format!("{n} {r}"))
        .collect();
    assert_eq!(
        reasons[..2],
        [
            "w1 KubeletChangeStarted".to_string(),
            "w1 KubeletChanged".to_string()
        ]
    );
}

#[test]
fn a_node_waits_while_another_holds_the_lease_or_is_not_ready() {
    let c = Cluster::new("v1.20.3", &["w1", "w2", "w3"], "v1.20.2");
    let (w1, w2) = (Node::new(&c, "w1"), Node::new(&c, "w2"));
    // w1's change is cut short at its restart (the process dies): it keeps
    // its place and its record.
    w1.fail_restart.set(true);
    assert!(run(&w1).is_err());
    assert_eq!(c.holders().len(), 1);
    assert_eq!(
        Files::new(w1.dir.path())
            .load_change()
            .unwrap()
            .unwrap()
            .phase,
        Phase::Switching
    );
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    let why = w2.follow_state().why.unwrap();
    assert!(
        why.contains("1 of 1 places taken: w1 (v1.20.2 -> v1.20.3)"),
        "{why}"
    );
    assert_eq!(w2.state().installed, "v1.20.2");
    // w1 resumes where it stopped, and w2 follows after it.
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    // A node not Ready (w3 down) holds the others back.
    c.nodes.borrow_mut().get_mut("w3").unwrap().ready = false;
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    assert!(
        w2.follow_state()
            .why
            .unwrap()
            .contains("1 other node(s) not Ready (w3)")
    );
    c.nodes.borrow_mut().get_mut("w3").unwrap().ready = true;
    assert_eq!(run(&w2).unwrap(), Ran::Changed(ChangeResult::Succeeded));
}

#[test]
fn a_release_that_does_not_come_back_is_rolled_back_and_halts_the_rollout() {
    let c = Cluster::new("v1.20.3", &["w1", "w2"], "v1.20.2");
    c.broken.borrow_mut().insert("v1.20.3".into());
    let (w1, w2) = (Node::new(&c, "w1"), Node::new(&c, "w2"));
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::RolledBack));
    let s = w1.state();
    assert_eq!(
        (s.installed.as_str(), s.reported.as_str(), s.ready),
        ("v1.20.2", "v1.20.2", true)
    );
    let holders = c.holders();
    assert_eq!(holders.len(), 1);
    assert!(
        holders[0]
            .halted
            .as_deref()
            .unwrap()
            .contains("not Ready with kubelet v1.20.3 within 60 s"),
        "{holders:?}"
    );
    let f = w1.follow_state();
    assert_eq!(f.standing, Standing::Halted);
    assert_eq!(f.rolled_back, 1);
    assert!(
        c.events
            .borrow()
            .contains(&("w1".into(), "KubeletChangeRolledBack".into()))
    );
    // The others never start.
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    assert!(
        w2.follow_state()
            .why
            .unwrap()
            .contains("the rollout is halted at w1")
    );
    assert_eq!(w2.state().installed, "v1.20.2");
    // The halted node stays put on its next runs.
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Halted));
    assert_eq!(
        c.log.borrow().iter().filter(|(_, n, _)| n == "w1").count(),
        2
    );
    // The operator fixes the release and clears the halt: the node tries
    // again, and the rollout goes on.
    c.broken.borrow_mut().clear();
    c.lease.borrow_mut().1.clear();
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(w1.follow_state().halted, None);
    assert_eq!(run(&w2).unwrap(), Ran::Changed(ChangeResult::Succeeded));
}

#[test]
fn a_version_that_comes_and_goes_is_no_target() {
    let c = Cluster::new("v1.20.3", &["w1"], "v1.20.2");
    *c.answers.borrow_mut() = vec![
        "v1.20.3".into(),
        "v1.20.2".into(),
        "v1.20.3".into(),
        "v1.20.2".into(),
    ];
    let w1 = Node::new(&c, "w1");
    let mut d = w1.driver();
    d.settings.stable_checks = 2;
    let rt = crate::async_runtime::current_thread().unwrap();
    for _ in 0..3 {
        assert_eq!(
            rt.block_on(d.run()).unwrap(),
            Ran::Looked(Standing::Settling)
        );
    }
    assert!(c.holders().is_empty() && c.lease.borrow().2 == 0);
    // The last answer repeats now: settled.
    assert_eq!(
        rt.block_on(d.run()).unwrap(),
        Ran::Looked(Standing::Settling)
    );
    *c.answers.borrow_mut() = vec!["v1.20.3".into()];
    assert_eq!(
        rt.block_on(d.run()).unwrap(),
        Ran::Looked(Standing::Settling)
    );
    assert_eq!(
        rt.block_on(d.run()).unwrap(),
        Ran::Changed(ChangeResult::Succeeded)
    );
}

#[test]
fn a_minor_release_waits_for_the_operator_then_drains_first() {
    let c = Cluster::new("v1.21.1", &["w1"], "v1.20.3");
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::AwaitingOperator));
    assert!(c.log.borrow().is_empty() && c.holders().is_empty());
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    let log: Vec<String> = c.log.borrow().iter().map(|(_, _, w)| w.clone()).collect();
    assert_eq!(log, ["cordon", "drain", "restart v1.21.1", "uncordon"]);
    assert!(!w1.state().unschedulable);
    assert_eq!(
        w1.follow_state().last_change.unwrap().kind,
        target::Kind::Minor
    );
}

#[test]
fn a_target_newer_than_the_api_server_is_refused_and_nothing_moves() {
    let c = Cluster::new("v1.20.2", &["w1"], "v1.20.2");
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Refused));
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("target minor 1.21 is newer than the API server v1.20.2"),
        "{why}"
    );
    assert!(c.log.borrow().is_empty() && c.holders().is_empty());
}
