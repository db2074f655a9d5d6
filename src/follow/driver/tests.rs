//! The driver against a cluster and nodes in memory: several nodes share
//! one API server, one follow lease and one clock; a kubelet comes back
//! Ready with its version a few seconds after its restart, unless its
//! release is broken (it never posts again). Faults are injected per
//! phase (prepare, switch, restart, the API server during the
//! verification, the halt's write), and two nodes race between their read
//! and their write of the lease.

use super::*;
use crate::follow::drain::{Plan, PodRef};
use crate::follow::lease::{LeaseView, State};
use crate::follow::plan::NodeLook;
use crate::follow::policy::{MinorVersion, Policy};
use crate::follow::record::{ChangeResult, ENV, KUBELET_CONFIG, Set, stamp};
use crate::follow::seams::ServerVersions;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

mod faults;

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

/// Where a fault is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    Check,
    Prepare,
    PutInPlace,
    Restart,
    /// Putting the previous kubelet back.
    RollBack,
    /// The API server does not answer the node's reads of its Node.
    NodeReads,
    /// The write that marks this node halted fails.
    HaltWrite,
}

/// A pod: its name, whether it has an emptyDir volume, whether a budget
/// lets it be evicted now.
type Pod = (String, bool, bool);

#[derive(Default)]
struct Cluster {
    clock: Cell<u64>,
    /// What `/version` answers, in turn (the last one repeats).
    answers: RefCell<Vec<String>>,
    /// What each API server answers, when they can be asked one by one.
    servers: RefCell<Option<Vec<String>>>,
    policy: RefCell<Policy>,
    /// resourceVersion, the lease (its entries, transitions).
    lease: RefCell<(u64, LeaseView)>,
    nodes: RefCell<BTreeMap<String, NodeState>>,
    broken: RefCell<BTreeSet<String>>,
    /// node -> its pods.
    pods: RefCell<BTreeMap<String, Vec<Pod>>>,
    events: RefCell<Vec<(String, String)>>,
    /// (time, node, what): restarts, cordons, drains.
    log: RefCell<Vec<(u64, String, String)>>,
    /// Every request a node made: (node, what).
    requests: RefCell<Vec<(String, &'static str)>>,
    /// Lease reads yield to other tasks (the race seam).
    yield_on_read: Cell<bool>,
    faults: RefCell<BTreeSet<(String, Fault)>>,
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
                // A kubelet reports its version without a `+build`.
                s.reported = s.installed.split('+').next().unwrap().to_string();
                s.heartbeat = now;
                s.ready = true;
                s.restarted = None;
            }
        }
    }

    fn entries(&self) -> BTreeMap<String, lease::Entry> {
        self.lease.borrow().1.entries.clone()
    }

    fn holders(&self) -> Vec<String> {
        self.entries()
            .into_iter()
            .filter(|(_, e)| e.holds())
            .map(|(n, _)| n)
            .collect()
    }

    /// The operator removes `node`'s entry (the documented un-halt).
    fn remove_entry(&self, node: &str) {
        let mut l = self.lease.borrow_mut();
        l.0 += 1;
        l.1 = stored(&lease::release(&l.1, node));
    }

    fn fault(&self, node: &str, f: Fault) -> bool {
        self.faults.borrow().contains(&(node.to_string(), f))
    }

    fn set_fault(&self, node: &str, f: Fault, on: bool) {
        let k = (node.to_string(), f);
        if on {
            self.faults.borrow_mut().insert(k);
        } else {
            self.faults.borrow_mut().remove(&k);
        }
    }

    fn restarts(&self, node: &str) -> Vec<String> {
        self.log
            .borrow()
            .iter()
            .filter(|(_, n, w)| n == node && w.starts_with("restart"))
            .map(|(_, _, w)| w.clone())
            .collect()
    }
}

struct Node<'a> {
    c: &'a Cluster,
    name: String,
    dir: tempfile::TempDir,
}

impl<'a> Node<'a> {
    fn new(c: &'a Cluster, name: &str) -> Node<'a> {
        Node {
            c,
            name: name.into(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn driver(&self) -> Driver<'_, Self, Self> {
        Driver {
            cluster: self,
            node: self,
            files: Files::new(self.dir.path()),
            settings: Settings {
                stable_checks: 1,
                ready_timeout: Duration::from_secs(60),
                drain_timeout: Duration::from_secs(30),
                poll: Duration::from_secs(2),
                backend: Backend::Wrapper,
            },
        }
    }

    fn state(&self) -> NodeState {
        self.c.nodes.borrow()[&self.name].clone()
    }

    fn set(&self, f: impl FnOnce(&mut NodeState)) {
        f(self.c.nodes.borrow_mut().get_mut(&self.name).unwrap())
    }

    fn follow_state(&self) -> FollowState {
        Files::new(self.dir.path()).load_state().unwrap()
    }

    fn change(&self) -> Option<Change> {
        Files::new(self.dir.path()).load_change().unwrap()
    }

    fn asked(&self, what: &'static str) {
        self.c.requests.borrow_mut().push((self.name.clone(), what));
    }

    fn log(&self, what: String) {
        self.c
            .log
            .borrow_mut()
            .push((self.c.clock.get(), self.name.clone(), what));
    }

    fn fails(&self, f: Fault, what: &str) -> Result<()> {
        if self.c.fault(&self.name, f) {
            return Err(Error::retryable(format!("{what} failed (test)")));
        }
        Ok(())
    }
}

impl ClusterSeam for Node<'_> {
    fn node_name(&self) -> &str {
        &self.name
    }
    async fn apiserver_version(&self) -> Result<KubeVersion> {
        self.asked("version");
        let mut a = self.c.answers.borrow_mut();
        let v = if a.len() > 1 {
            a.remove(0)
        } else {
            a[0].clone()
        };
        Ok(KubeVersion::parse(&v).unwrap())
    }
    async fn apiserver_versions(&self) -> Result<Option<ServerVersions>> {
        self.asked("endpoints");
        Ok(self.c.servers.borrow().as_ref().map(|s| ServerVersions {
            answers: s
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("10.0.0.{i}:6443"), KubeVersion::parse(v)))
                .collect(),
        }))
    }
    async fn policy(&self) -> Result<Policy> {
        self.asked("policy");
        Ok(self.c.policy.borrow().clone())
    }
    async fn lease(&self) -> Result<LeaseView> {
        self.asked("lease");
        let (rv, view) = self.c.lease.borrow().clone();
        if self.c.yield_on_read.get() {
            tokio::task::yield_now().await;
        }
        Ok(LeaseView {
            resource_version: Some(rv.to_string()),
            ..view
        })
    }
    async fn write_lease(&self, view: &LeaseView) -> Result<bool> {
        self.asked("lease write");
        let mut l = self.c.lease.borrow_mut();
        if view.resource_version.as_deref() != Some(&l.0.to_string()) {
            return Ok(false);
        }
        *l = (l.0 + 1, stored(view));
        Ok(true)
    }
    async fn patch_entry(&self, node: &str, patch: &lease::EntryPatch) -> Result<bool> {
        use lease::EntryPatch;
        self.asked("lease patch");
        if matches!(patch, EntryPatch::Set(e) if e.state == State::Halted) {
            self.fails(Fault::HaltWrite, "writing the lease")?;
        }
        let mut l = self.c.lease.borrow_mut();
        let mut v = l.1.clone();
        match patch {
            EntryPatch::Set(e) => {
                v.entries.insert(node.into(), e.clone());
            }
            EntryPatch::Replace { old, new } if v.raw.get(node) == Some(old) => {
                v.entries.insert(node.into(), new.clone());
            }
            EntryPatch::Remove { old } if v.raw.get(node) == Some(old) => {
                v.entries.remove(node);
            }
            _ => return Ok(false),
        }
        *l = (l.0 + 1, stored(&v));
        Ok(true)
    }
    async fn own_node(&self) -> std::result::Result<NodeLook, String> {
        self.asked("own node");
        // The API server away once the kubelet was switched.
        let switched = self.change().is_some_and(|c| c.phase == Phase::Switched);
        if switched && self.c.fault(&self.name, Fault::NodeReads) {
            return Err("HTTP 503 (test)".into());
        }
        let s = self.state();
        Ok(NodeLook {
            ready: s.ready,
            unschedulable: s.unschedulable,
            kubelet_version: s.reported,
            heartbeat: Some(s.heartbeat),
            detail: (!s.ready).then(|| "KubeletNotReady (test)".into()),
        })
    }
    async fn set_unschedulable(&self, on: bool) -> Result<()> {
        self.asked("node patch");
        self.set(|s| s.unschedulable = on);
        self.log(if on { "cordon" } else { "uncordon" }.into());
        Ok(())
    }
    async fn drain_plan(
        &self,
        delete_emptydir_data: bool,
    ) -> Result<std::result::Result<Plan, String>> {
        self.asked("pods");
        // The node's pods as the API server lists them (each a ReplicaSet's,
        // with an emptyDir volume where the test says so), planned by the
        // product's own rules.
        let items: Vec<serde_json::Value> = self
            .c
            .pods
            .borrow()
            .get(&self.name)
            .into_iter()
            .flatten()
            .map(|(name, emptydir, _)| {
                let volumes = if *emptydir {
                    serde_json::json!([{"name": "cache", "emptyDir": {}}])
                } else {
                    serde_json::json!([])
                };
                serde_json::json!({
                    "metadata": {
                        "namespace": "apps", "name": name, "uid": name,
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": true}],
                    },
                    "spec": {"volumes": volumes},
                    "status": {"phase": "Running"},
                })
            })
            .collect();
        Ok(crate::follow::drain::plan(
            &serde_json::json!({ "items": items }),
            delete_emptydir_data,
        ))
    }
    async fn evict(&self, pod: &PodRef, _minor: u64) -> Result<Option<String>> {
        self.asked("eviction");
        let mut pods = self.c.pods.borrow_mut();
        let mine = pods.entry(self.name.clone()).or_default();
        let Some(i) = mine.iter().position(|p| p.0 == pod.name) else {
            return Ok(None);
        };
        if !mine[i].2 {
            return Ok(Some("the disruption budget (test)".into()));
        }
        mine.remove(i);
        self.log(format!("evict {}", pod.name));
        Ok(None)
    }
    async fn event(&self, _kind: EventKind, reason: &str, _message: &str) {
        self.asked("event");
        self.c
            .events
            .borrow_mut()
            .push((self.name.clone(), reason.into()));
    }
}

impl NodeSeam for Node<'_> {
    fn now(&self) -> u64 {
        self.c.clock.get()
    }
    async fn sleep(&self, d: Duration) {
        self.c.tick(d.as_secs());
    }
    fn current_version(&self) -> Result<KubeVersion> {
        // kubelet.env's tag: what is installed.
        Ok(KubeVersion::parse(&self.state().installed).unwrap())
    }
    async fn offers(&self) -> Result<Option<Vec<KubeVersion>>> {
        Ok(None)
    }
    async fn check(&self, to: &str) -> Result<()> {
        if self.c.fault(&self.name, Fault::Check) {
            return Err(Error::refused(format!(
                "Kubernetes {to} wants the container runtime containerd and this node runs docker (test)"
            )));
        }
        Ok(())
    }
    async fn prepare(&self, change: &mut Change) -> Result<()> {
        self.fails(Fault::Prepare, "preparing")?;
        let f = Files::new(self.dir.path());
        let env = |v: &str| format!("KUBELET_IMAGE_TAG=\"{v}\"\n");
        let mine = stamp(change);
        f.save_set(
            Set::Previous,
            &mine,
            &[
                (ENV, Some(env(&change.from).as_bytes())),
                (KUBELET_CONFIG, None),
            ],
        )?;
        f.save_set(
            Set::Next,
            &mine,
            &[
                (ENV, Some(env(&change.to).as_bytes())),
                (KUBELET_CONFIG, None),
            ],
        )?;
        Ok(())
    }
    async fn put_in_place(&self, change: &Change, set: Set) -> Result<()> {
        let v = match set {
            Set::Next => {
                self.fails(Fault::PutInPlace, "putting the new kubelet in place")?;
                &change.to
            }
            Set::Previous => {
                self.fails(Fault::RollBack, "putting the previous kubelet back")?;
                &change.from
            }
        };
        self.set(|s| s.installed = v.clone());
        Ok(())
    }
    async fn restart_kubelet(&self) -> Result<()> {
        // Fails once.
        if self.c.fault(&self.name, Fault::Restart) {
            self.c.set_fault(&self.name, Fault::Restart, false);
            return Err(Error::retryable("the kubelet's restart failed (test)"));
        }
        let now = self.now();
        let installed = self.state().installed;
        self.set(|s| {
            s.restarted = Some(now);
            // The kubelet that stops is not Ready for a moment, as the API
            // server sees it once the new one posts.
            s.ready = false;
        });
        self.log(format!("restart {installed}"));
        Ok(())
    }
}

/// The lease as the API server keeps it: rendered and read back.
fn stored(view: &LeaseView) -> LeaseView {
    let obj = lease::render("kube-system", "l", view, 300);
    LeaseView {
        resource_version: None,
        object: None,
        ..lease::read(Some(&obj)).unwrap()
    }
}

fn rt() -> tokio::runtime::Runtime {
    crate::async_runtime::current_thread().unwrap()
}

fn run(n: &Node) -> Result<Ran> {
    rt().block_on(n.driver().run())
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
        assert!(n.change().is_none());
        assert!(!Files::new(n.dir.path()).set(Set::Previous).exists());
        // Up to date: a second run changes nothing.
        assert_eq!(run(n).unwrap(), Ran::Looked(Standing::UpToDate));
    }
    assert_eq!(c.lease.borrow().1.transitions, 3, "one take per node");
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

/// Requests of one run of `n`, by what.
fn asked_in(c: &Cluster, n: &Node, f: impl FnOnce()) -> Vec<&'static str> {
    let before = c.requests.borrow().len();
    f();
    c.requests.borrow()[before..]
        .iter()
        .filter(|(who, _)| *who == n.name)
        .map(|(_, w)| *w)
        .collect()
}

#[test]
fn a_waiting_node_asks_two_things_a_run_and_never_lists_nodes() {
    let c = Cluster::new("v1.20.3", &["w1", "w2"], "v1.20.2");
    let (w1, w2) = (Node::new(&c, "w1"), Node::new(&c, "w2"));
    // w1 holds the place: its kubelet is broken mid-change... simply
    // held: it takes and its change waits (the kubelet not back yet).
    c.lease.borrow_mut().1 =
        stored(&lease::take(&LeaseView::default(), "w1", "v1.20.2", "v1.20.3", 1000).unwrap());
    // The first run decides (the version, the operator's word) and waits.
    let first = asked_in(&c, &w2, || {
        assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    });
    assert_eq!(first, ["version", "policy", "lease"]);
    // Every later run while waiting: the operator's word and the lease.
    for _ in 0..3 {
        let again = asked_in(&c, &w2, || {
            assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
        });
        assert_eq!(again, ["policy", "lease"]);
    }
    // Up to date: the version and its own Node.
    let w1_done = Cluster::new("v1.20.3", &["w1"], "v1.20.3");
    let n = Node::new(&w1_done, "w1");
    let steady = asked_in(&w1_done, &n, || {
        assert_eq!(run(&n).unwrap(), Ran::Looked(Standing::UpToDate));
    });
    assert_eq!(steady, ["version", "own node"]);
    drop(w1);
}

#[test]
fn two_nodes_racing_between_read_and_write_take_one_place() {
    let c = Cluster::new("v1.20.3", &["w1", "w2"], "v1.20.2");
    let (w1, w2) = (Node::new(&c, "w1"), Node::new(&c, "w2"));
    // Both read the lease before either writes: each read yields.
    c.yield_on_read.set(true);
    let (d1, d2) = (w1.driver(), w2.driver());
    let (r1, r2) = rt().block_on(async { tokio::join!(d1.run(), d2.run()) });
    let (r1, r2) = (r1.unwrap(), r2.unwrap());
    // Exactly one changed; the other was told 409 and waits.
    let (won, lost) = if r1 == Ran::Changed(ChangeResult::Succeeded) {
        (&w1, &w2)
    } else {
        (&w2, &w1)
    };
    assert_eq!(
        [&r1, &r2]
            .iter()
            .filter(|r| ***r == Ran::Changed(ChangeResult::Succeeded))
            .count(),
        1,
        "{r1:?} {r2:?}"
    );
    let why = lost.follow_state().why.unwrap();
    assert!(
        why.contains("another node wrote the lease at the same moment"),
        "{why}"
    );
    assert_eq!(c.restarts(&lost.name), Vec::<String>::new());
    assert_eq!(c.restarts(&won.name), ["restart v1.20.3"]);
    // It goes next.
    c.yield_on_read.set(false);
    assert_eq!(run(lost).unwrap(), Ran::Changed(ChangeResult::Succeeded));
}

#[test]
fn a_node_waits_while_another_holds_the_lease_or_said_it_is_not_ready() {
    let c = Cluster::new("v1.20.3", &["w1", "w2", "w3"], "v1.20.2");
    let (w1, w2, w3) = (
        Node::new(&c, "w1"),
        Node::new(&c, "w2"),
        Node::new(&c, "w3"),
    );
    // w1's process dies in the middle of its switch (the record says
    // Switching): it keeps its place and its record.
    w1.driver()
        .files
        .save_change(&Change {
            node: "w1".into(),
            from: "v1.20.2".into(),
            to: "v1.20.3".into(),
            kind: target::Kind::Patch,
            backend: Backend::Wrapper,
            phase: Phase::Switching,
            started_at: 1000,
            restarted_at: None,
            cordoned: false,
            previous_image: None,
            why: None,
            delete_emptydir_data: false,
        })
        .unwrap();
    rt().block_on(w1.prepare(&mut w1.change().unwrap()))
        .unwrap();
    c.lease.borrow_mut().1 =
        stored(&lease::take(&LeaseView::default(), "w1", "v1.20.2", "v1.20.3", 1000).unwrap());
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    let why = w2.follow_state().why.unwrap();
    assert!(
        why.contains("1 of 1 places taken: w1 (v1.20.2 -> v1.20.3)"),
        "{why}"
    );
    assert_eq!(w2.state().installed, "v1.20.2");
    // w1 resumes where it stopped.
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    // w3's own Node goes not Ready: being up to date... it is not (it
    // waits for v1.20.3); make it up to date to report.
    c.answers.borrow_mut()[0] = "v1.20.2".into();
    w3.set(|s| s.ready = false);
    assert_eq!(run(&w3).unwrap(), Ran::Looked(Standing::UpToDate));
    assert_eq!(c.entries()["w3"].state, State::NotReady);
    assert!(w3.follow_state().reported_not_ready);
    // The rollout goes on: w2 waits for w3 to be Ready (maxNotReady 1).
    c.answers.borrow_mut()[0] = "v1.20.3".into();
    w2.set(|s| s.ready = true);
    let f = Files::new(w2.dir.path());
    let mut st = f.load_state().unwrap();
    st.waiting_for = None;
    f.save_state(&st, false).unwrap();
    assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    assert!(
        w2.follow_state()
            .why
            .unwrap()
            .contains("1 other node(s) not Ready (w3)")
    );
    // w3 is Ready again and says so (its run is an up-to-date one at the
    // old release: the test points the API server back for it).
    w3.set(|s| s.ready = true);
    c.answers.borrow_mut()[0] = "v1.20.2".into();
    assert_eq!(run(&w3).unwrap(), Ran::Looked(Standing::UpToDate));
    assert!(!c.entries().contains_key("w3"));
    c.answers.borrow_mut()[0] = "v1.20.3".into();
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
    let e = &c.entries()["w1"];
    assert_eq!(e.state, State::Halted);
    assert!(
        e.why
            .as_deref()
            .unwrap()
            .contains("not Ready with kubelet v1.20.3 within 60 s"),
        "{e:?}"
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
    for _ in 0..3 {
        assert_eq!(run(&w2).unwrap(), Ran::Looked(Standing::Waiting));
    }
    assert!(
        w2.follow_state()
            .why
            .unwrap()
            .contains("the rollout is halted at w1")
    );
    assert_eq!(w2.state().installed, "v1.20.2");
    // The halted node stays put on its next runs.
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Halted));
    assert_eq!(c.restarts("w1").len(), 2);
    // The operator fixes the release and removes w1's entry only: the
    // node tries again, and the rollout goes on.
    c.broken.borrow_mut().clear();
    c.remove_entry("w1");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(w1.follow_state().halted, None);
    assert_eq!(run(&w2).unwrap(), Ran::Changed(ChangeResult::Succeeded));
}

#[test]
fn a_node_provisioned_again_under_a_halted_name_does_not_clear_the_halt() {
    let c = Cluster::new("v1.20.3", &["w1", "w2"], "v1.20.2");
    c.broken.borrow_mut().insert("v1.20.3".into());
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::RolledBack));
    // The machine is replaced: same name, no files of its own.
    let again = Node::new(&c, "w1");
    assert_eq!(run(&again).unwrap(), Ran::Looked(Standing::Halted));
    assert_eq!(run(&again).unwrap(), Ran::Looked(Standing::Halted));
    assert_eq!(c.entries()["w1"].state, State::Halted);
    assert!(
        again
            .follow_state()
            .why
            .unwrap()
            .contains("the operator removes data.node.w1")
    );
    assert_eq!(c.restarts("w1").len(), 2, "no new change");
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
    let rt = rt();
    // An HA pair answering in turn: settling when it says the new
    // version, up to date when it says the node's own; never a change.
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(rt.block_on(d.run()).unwrap());
    }
    assert_eq!(
        seen,
        [
            Ran::Looked(Standing::Settling),
            Ran::Looked(Standing::UpToDate),
            Ran::Looked(Standing::Settling),
            Ran::Looked(Standing::UpToDate),
            Ran::Looked(Standing::UpToDate),
        ]
    );
    assert!(c.holders().is_empty() && c.lease.borrow().1.transitions == 0);
    // The new version, twice in a row: a target.
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
fn every_api_server_must_run_the_release_before_a_take() {
    let c = Cluster::new("v1.20.3", &["w1"], "v1.20.2");
    // Behind the load balancer, one of three still runs v1.20.2.
    *c.servers.borrow_mut() = Some(vec!["v1.20.3".into(), "v1.20.2".into(), "v1.20.3".into()]);
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Settling));
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("the API server at 10.0.0.1:6443 runs v1.20.2, not v1.20.3"),
        "{why}"
    );
    assert!(c.holders().is_empty());
    *c.servers.borrow_mut() = Some(vec!["v1.20.3".into(); 3]);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(w1.state().reported, "v1.20.3");
}

#[test]
fn a_minor_release_waits_for_the_operator_then_drains_first() {
    let c = Cluster::new("v1.21.1", &["w1"], "v1.20.3");
    c.pods
        .borrow_mut()
        .insert("w1".into(), vec![("web-1".into(), false, true)]);
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::AwaitingOperator));
    assert!(c.log.borrow().is_empty() && c.holders().is_empty());
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    let log: Vec<String> = c.log.borrow().iter().map(|(_, _, w)| w.clone()).collect();
    assert_eq!(
        log,
        ["cordon", "evict web-1", "restart v1.21.1", "uncordon"]
    );
    assert!(!w1.state().unschedulable);
    assert_eq!(
        w1.follow_state().last_change.unwrap().kind,
        target::Kind::Minor
    );
}

#[test]
fn the_operators_cordon_is_kept_and_the_node_waits_for_it_to_go() {
    let c = Cluster::new("v1.21.1", &["w1"], "v1.20.3");
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    let w1 = Node::new(&c, "w1");
    w1.set(|s| s.unschedulable = true);
    for _ in 0..2 {
        assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Waiting));
    }
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("cordoned (spec.unschedulable) by someone else"),
        "{why}"
    );
    assert!(w1.state().unschedulable, "still cordoned");
    assert!(c.log.borrow().is_empty() && c.holders().is_empty());
    // The operator uncordons: it changes, cordoning and uncordoning itself.
    w1.set(|s| s.unschedulable = false);
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert!(!w1.state().unschedulable);
}

#[test]
fn an_emptydir_pod_keeps_a_minor_change_from_starting_unless_allowed() {
    let c = Cluster::new("v1.21.1", &["w1"], "v1.20.3");
    c.policy.borrow_mut().minor = MinorVersion::parse("1.21");
    c.pods
        .borrow_mut()
        .insert("w1".into(), vec![("cache-0".into(), true, true)]);
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Waiting));
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("pod apps/cache-0 has an emptyDir volume"),
        "{why}"
    );
    assert!(
        c.log.borrow().is_empty() && c.holders().is_empty(),
        "not even cordoned"
    );
    c.policy.borrow_mut().delete_emptydir_data = true;
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert!(c.log.borrow().iter().any(|(_, _, w)| w == "evict cache-0"));
}

#[test]
fn a_target_newer_than_the_api_server_is_refused_and_nothing_moves() {
    let c = Cluster::new("v1.21.0", &["w1"], "v1.20.2");
    c.policy.borrow_mut().minor = MinorVersion::parse("1.22");
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::Refused));
    let why = w1.follow_state().why.unwrap();
    assert!(
        why.contains("target minor 1.22 is newer than the API server v1.21.0"),
        "{why}"
    );
    assert!(c.log.borrow().is_empty() && c.holders().is_empty());
}

#[test]
fn a_build_suffix_or_a_distributions_suffix_is_the_same_release() {
    // The API server of a distribution (`-eks-…`) at the node's release:
    // up to date, not "newer" nor a target.
    let c = Cluster::new("v1.20.2-eks-6b7464", &["w1"], "v1.20.2");
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Looked(Standing::UpToDate));
    let why = w1.follow_state().why.unwrap();
    assert!(why.ends_with("the API server's release"), "{why}");
    // The release v1.20.3+flatcar.1, whose kubelet reports v1.20.3: back,
    // not rolled back.
    let c = Cluster::new("v1.20.3+flatcar.1", &["w1"], "v1.20.2");
    let w1 = Node::new(&c, "w1");
    assert_eq!(run(&w1).unwrap(), Ran::Changed(ChangeResult::Succeeded));
    assert_eq!(w1.state().reported, "v1.20.3");
    assert_eq!(w1.state().installed, "v1.20.3+flatcar.1");
}
