//! `follow` at fleet scale, against the real kube-apiserver and etcd
//! (`testkit::kube`, the API server alone: no controller marks Nodes
//! NotReady for want of a kubelet): a thousand simulated nodes (or a
//! hundred in CI, `tests/host/follow_fleet.rs`), each a Node object whose
//! status the harness keeps, each running the real follow driver with the
//! real cluster seam (the node's own identity, a static token
//! `system:node:<name>`, authorized as Kubernetes 1.32 authorizes nodes:
//! `testkit::node_authz`, and the follow RBAC as terraform renders it) and
//! a simulated node seam ([`sim`]), all in this process, each on a timer
//! as the real one (a run, then the period and up to `jitter` more).
//!
//! The API server's audit log records every write of the follow lease with
//! its response, and every request of a node; [`audit`] reads the rollout
//! from it: the most holders after any write (never more than
//! `maxChanging`), the takes, the halt and that no take came after it, the
//! requests each waiting node made per run. The API server's CPU time
//! comes from `/proc`.

pub mod audit;
pub mod report;
pub mod sim;

use anyhow::{Context as _, Result, bail};
use node_bootstrap::cluster::apiclient::ApiClient;
use node_bootstrap::cluster::kubeconfig;
use node_bootstrap::follow::api::Cluster;
use node_bootstrap::follow::driver::{Driver, Settings};
use node_bootstrap::follow::plan::Backend;
use node_bootstrap::follow::record::Files;
use sim::{FailPlan, Restart, SimNode, now_f64};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use testkit::apiserver::KubeAuth;
use testkit::kube::{ControlPlane, Kubectl, RunningControlPlane, StaticToken};
use testkit::node_authz::NodeAuthorizer;

/// The release the simulated kubelets start at; the API server is the
/// rig's (v1.20.2), the target.
pub const START: &str = "v1.20.1";
const LEASE: &str = testkit::follow::LEASE;

/// A fleet against its API server.
pub struct Fleet {
    pub names: Vec<String>,
    pub kubectl: Kubectl,
    pub target: String,
    pub authz: NodeAuthorizer,
    installed: Vec<Arc<Mutex<String>>>,
    kubeconfigs: Vec<std::path::PathBuf>,
    admin_kc: std::path::PathBuf,
    audit: std::path::PathBuf,
    running: RunningControlPlane,
    dir: tempfile::TempDir,
}

/// One round's settings.
#[derive(Debug, Clone)]
pub struct RoundSpec {
    pub max_changing: u32,
    /// A simulated kubelet's restart to its Node posting Ready.
    pub change: Duration,
    /// The follow timer: a run, then `timer` and up to `jitter` more.
    pub timer: Duration,
    pub jitter: Duration,
    /// The n-th kubelet restarted to the target never posts Ready.
    pub fail_nth: Option<usize>,
    /// How long a changed kubelet has (follow.ready_timeout_secs).
    pub ready_timeout: Duration,
    pub poll: Duration,
    /// How long the fleet keeps running after a halt.
    pub after_halt: Duration,
    /// The round gives up after this.
    pub deadline: Duration,
}

/// One run of one node's follow.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub node: String,
    pub start: f64,
    pub end: f64,
    /// `Looked(Waiting)`, `Changed(Succeeded)`, an error.
    pub outcome: String,
    /// Why it stands where it does (`state.json`).
    pub why: String,
}

/// What a round showed.
#[derive(Debug, Clone)]
pub struct Round {
    pub spec: RoundSpec,
    pub nodes: usize,
    /// From the first node's first run to the end (the last release, or
    /// the halt).
    pub took: Duration,
    /// From the first run to the round's last look: `took`, and after a
    /// halt the `after_halt` watched for nodes starting. The requests and
    /// the CPU are counted over it.
    pub watched: Duration,
    pub history: audit::History,
    pub runs: Vec<RunRecord>,
    pub restarts: Vec<Restart>,
    /// Requests per run of the nodes waiting for a place.
    pub waiting: Waiting,
    /// Requests of nodes in the round, and of everyone (audit log).
    pub node_requests: usize,
    /// Requests beyond what a 1.32 node may ask, or refused
    /// ([`audit::beyond_a_node`]): must be none.
    pub node_lists: usize,
    /// kube-apiserver's and etcd's CPU time in the round, seconds.
    pub apiserver_cpu: f64,
    pub etcd_cpu: f64,
    pub failing: Option<String>,
    /// Nodes at the target at the end.
    pub at_target: usize,
}

/// CPU seconds of process `pid` so far (`/proc/<pid>/stat`).
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<f64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    // utime and stime: fields 14 and 15, the 12th and 13th after ")".
    f.get(11).copied().unwrap_or(0.0) / 100.0 + f.get(12).copied().unwrap_or(0.0) / 100.0
}

const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
- level: RequestResponse\n  verbs: [\"create\", \"update\", \"patch\"]\n  resources: [{group: \"\", resources: [\"configmaps\"], resourceNames: [\"node-bootstrap-follow-lease\"]}]\n\
- level: Metadata\n  userGroups: [\"system:nodes\"]\n\
- level: None\n";

impl Fleet {
    /// The API server (its audit log, the 1.32 node authorizer), the
    /// follow RBAC and `n` Nodes at [`START`], Ready.
    pub fn start(n: usize) -> Result<Fleet> {
        let parts = testkit::kube::parts()?;
        let dir = tempfile::Builder::new()
            .prefix("nb-follow-fleet-")
            .tempdir_in("/var/tmp")?;
        let authz = NodeAuthorizer::start()?;
        let names: Vec<String> = (0..n).map(|i| format!("fleet-{i:04}")).collect();
        let mut cp = ControlPlane::new(&[]);
        for name in &names {
            cp.tokens
                .push(StaticToken::for_node(name, &format!("{name}-token")));
        }
        let policy = dir.path().join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY)?;
        let audit = dir.path().join("audit.log");
        cp.extra_apiserver_args = testkit::node_authz::host_args(&authz, dir.path())?;
        cp.extra_apiserver_args.extend([
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit.display()),
            "--audit-log-format=json".into(),
            // One file, never rotated (the default rotates at 100 MB,
            // which a thousand nodes write in minutes): a round reads its
            // part from where the file ended when it started.
            "--audit-log-maxsize=1000000".into(),
            // The fleet's requests, not a limiter's, are measured.
            "--max-requests-inflight=2000".into(),
            "--max-mutating-requests-inflight=1000".into(),
        ]);
        let running = cp.start_apiserver_only(&parts)?;
        let kubectl = running.kubectl.clone();
        *authz.admin.lock().unwrap() = Some(kubectl.clone());
        let config_map = testkit::follow::apply_follow_rbac(&kubectl)?;
        testkit::follow::apply_yaml(&kubectl, &config_map)?;
        let admin_kc = dir.path().join("admin.kubeconfig");
        std::fs::write(
            &admin_kc,
            cp.kubeconfig(None, &KubeAuth::Cert(cp.admin.clone())),
        )?;
        let mut kubeconfigs = Vec::new();
        for name in &names {
            let p = dir.path().join(format!("{name}.kubeconfig"));
            std::fs::write(
                &p,
                cp.kubeconfig(None, &KubeAuth::Token(format!("{name}-token"))),
            )?;
            kubeconfigs.push(p);
        }
        let fleet = Fleet {
            installed: names
                .iter()
                .map(|_| Arc::new(Mutex::new(START.to_string())))
                .collect(),
            names,
            kubectl,
            target: parts.version.clone(),
            authz,
            kubeconfigs,
            admin_kc,
            audit,
            running,
            dir,
        };
        fleet.create_nodes()?;
        Ok(fleet)
    }

    fn admin(&self) -> Result<ApiClient> {
        let kc = kubeconfig::load(&self.admin_kc)?;
        Ok(ApiClient::new(&kc, Duration::from_secs(30))?)
    }

    fn create_nodes(&self) -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let admin = self.admin()?;
        rt.block_on(async {
            for name in &self.names {
                let mut node = serde_json::json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                });
                node["status"] = sim::status(START, true)["status"].clone();
                let (code, answer) = admin
                    .send_json(
                        reqwest::Method::POST,
                        "/api/v1/nodes",
                        "application/json",
                        &node,
                    )
                    .await?;
                if code != 201 {
                    bail!("creating Node {name}: HTTP {code}: {answer}");
                }
                // The status a create carries is not kept by every version:
                // posted as a kubelet posts it. The not-ready taint that
                // admission puts on a new Node, which the node lifecycle
                // controller would lift once it is Ready, lifted.
                sim::post_status(&admin, name, START, true).await?;
                let (code, answer) = admin
                    .send_json(
                        reqwest::Method::PATCH,
                        &format!("/api/v1/nodes/{name}"),
                        "application/merge-patch+json",
                        &serde_json::json!({"spec": {"taints": null}}),
                    )
                    .await?;
                if code != 200 {
                    bail!("untainting Node {name}: HTTP {code}: {answer}");
                }
            }
            Ok(())
        })
    }

    /// Every simulated kubelet back at [`START`] (the Nodes say so).
    pub fn reset(&self) -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let admin = self.admin()?;
        rt.block_on(async {
            for (name, v) in self.names.iter().zip(&self.installed) {
                *v.lock().unwrap() = START.into();
                sim::post_status(&admin, name, START, true).await?;
            }
            anyhow::Ok(())
        })
    }

    /// The operator's ConfigMap with `maxChanging` and as many `maxNotReady`.
    pub fn set_max_changing(&self, n: u32) -> Result<()> {
        testkit::follow::set_policy(
            &self.kubectl,
            serde_json::json!({"maxChanging": n.to_string(), "maxNotReady": "1"}),
        )
    }

    /// The operator removes `node`'s entry from the lease, as
    /// docs/operators.md says to clear a halt.
    pub fn clear_entry(&self, node: &str) -> Result<()> {
        testkit::follow::clear_halt(&self.kubectl, node)
    }

    /// The audit log so far.
    pub fn audit_log(&self) -> String {
        std::fs::read_to_string(&self.audit).unwrap_or_default()
    }

    /// The follow lease's entries now.
    pub fn lease(&self) -> Result<node_bootstrap::follow::lease::LeaseView> {
        let v = testkit::follow::lease_object(&self.kubectl)?;
        node_bootstrap::follow::lease::read(Some(&v)).map_err(anyhow::Error::msg)
    }

    /// Where a node keeps its follow records.
    fn files(&self, i: usize) -> Files {
        Files::new(&self.dir.path().join("nodes").join(&self.names[i]))
    }

    /// One round (module docs): the nodes run until every one is at the
    /// target with the lease empty, or `after_halt` after a halt, or the
    /// deadline.
    pub fn round(&self, spec: &RoundSpec, threads: usize) -> Result<Round> {
        let audit_from = self.audit_log().len();
        let cpu0 = (
            cpu_secs(self.running.apiserver_pid()),
            cpu_secs(self.running.etcd_pid()),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let runs = Arc::new(Mutex::new(Vec::new()));
        let restarts = Arc::new(Mutex::new(Vec::new()));
        let fail = Arc::new(FailPlan {
            nth: spec.fail_nth,
            ..FailPlan::default()
        });
        let t0 = Instant::now();
        let mut workers = Vec::new();
        for t in 0..threads {
            let mine: Vec<usize> = (0..self.names.len()).filter(|i| i % threads == t).collect();
            let w = Worker {
                nodes: mine
                    .iter()
                    .map(|&i| {
                        (
                            self.names[i].clone(),
                            self.kubeconfigs[i].clone(),
                            self.installed[i].clone(),
                            self.files(i),
                        )
                    })
                    .collect(),
                admin_kc: self.admin_kc.clone(),
                target: self.target.clone(),
                spec: spec.clone(),
                stop: stop.clone(),
                runs: runs.clone(),
                restarts: restarts.clone(),
                fail: fail.clone(),
            };
            workers.push(std::thread::spawn(move || w.run()));
        }
        let ended = self.watch(spec, t0, &fail, &runs);
        let watched = t0.elapsed();
        stop.store(true, Ordering::SeqCst);
        for w in workers {
            w.join()
                .map_err(|_| anyhow::anyhow!("a fleet thread panicked"))??;
        }
        let took = ended?;
        let cpu1 = (
            cpu_secs(self.running.apiserver_pid()),
            cpu_secs(self.running.etcd_pid()),
        );
        let whole = self.audit_log();
        let Some(text) = whole.get(audit_from..) else {
            bail!(
                "the audit log is shorter ({} bytes) than when the round started ({audit_from}): was it rotated?",
                whole.len()
            );
        };
        let text = text.to_string();
        drop(whole);
        let writes = audit::lease_writes(&text, LEASE).map_err(anyhow::Error::msg)?;
        let history = audit::check(&writes, spec.max_changing as usize)
            .map_err(|e| anyhow::anyhow!("the lease's history breaks the rule: {e}"))?;
        let runs = runs.lock().unwrap().clone();
        let requests = audit::node_requests(&text);
        let node_lists = audit::beyond_a_node(&requests).len();
        let at_target = self
            .installed
            .iter()
            .filter(|v| *v.lock().unwrap() == self.target)
            .count();
        Ok(Round {
            spec: spec.clone(),
            nodes: self.names.len(),
            took,
            watched,
            waiting: waiting_requests(&runs, &requests),
            node_requests: requests.len(),
            node_lists,
            history,
            runs,
            restarts: restarts.lock().unwrap().clone(),
            apiserver_cpu: cpu1.0 - cpu0.0,
            etcd_cpu: cpu1.1 - cpu0.1,
            failing: fail.failing.lock().unwrap().clone(),
            at_target,
        })
    }

    /// Waits for the round's end (module docs); how long it took.
    fn watch(
        &self,
        spec: &RoundSpec,
        t0: Instant,
        fail: &FailPlan,
        runs: &Mutex<Vec<RunRecord>>,
    ) -> Result<Duration> {
        let mut halted_at: Option<Instant> = None;
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let all = self
                .installed
                .iter()
                .all(|v| *v.lock().unwrap() == self.target);
            if halted_at.is_none() && fail.failing.lock().unwrap().is_some() {
                let l = self.lease()?;
                if l.halted().is_some() {
                    halted_at = Some(Instant::now());
                }
            }
            if let Some(h) = halted_at {
                if h.elapsed() >= spec.after_halt {
                    return Ok(h - t0);
                }
            } else if all && self.lease()?.holders().next().is_none() {
                return Ok(t0.elapsed());
            }
            if t0.elapsed() > spec.deadline {
                let l = self.lease()?;
                let last: BTreeMap<String, String> = runs
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|r| (r.node.clone(), format!("{}: {}", r.outcome, r.why)))
                    .collect();
                let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
                for o in last.values() {
                    *outcomes.entry(o.as_str()).or_default() += 1;
                }
                bail!(
                    "the round did not end within {:?}: {} of {} nodes at {}, lease {:?}; the nodes' last runs: {outcomes:?}",
                    spec.deadline,
                    self.installed
                        .iter()
                        .filter(|v| *v.lock().unwrap() == self.target)
                        .count(),
                    self.installed.len(),
                    self.target,
                    l.entries
                );
            }
        }
    }
}

/// Requests per run of the nodes waiting for a place, from the audit log.
#[derive(Debug, Clone, Copy, Default)]
pub struct Waiting {
    /// Runs of a node waiting with no place free (one that ended waiting
    /// after one that did, asking neither the API servers' addresses nor
    /// to write the lease: it saw no place to take).
    pub runs: usize,
    pub mean: f64,
    pub max: usize,
    /// Runs that saw a place free and tried to take it, but another node
    /// was first (they end waiting too): their count and mean requests.
    pub tries: usize,
    pub tries_mean: f64,
}

fn waiting_requests(runs: &[RunRecord], requests: &[audit::Request]) -> Waiting {
    let mut by_node: BTreeMap<&str, Vec<&audit::Request>> = BTreeMap::new();
    for r in requests {
        by_node.entry(&r.node).or_default().push(r);
    }
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    let (mut waits, mut tries) = (Vec::new(), Vec::new());
    for run in runs {
        let waiting = run.outcome == "Looked(Waiting)"
            && last.get(run.node.as_str()) == Some(&"Looked(Waiting)");
        if waiting {
            let asked: Vec<&&audit::Request> = by_node
                .get(run.node.as_str())
                .into_iter()
                .flatten()
                .filter(|r| r.at >= run.start - 0.001 && r.at <= run.end + 0.001)
                .collect();
            let tried = asked
                .iter()
                .any(|r| r.resource == "endpoints" || r.verb == "update");
            if tried {
                tries.push(asked.len());
            } else {
                waits.push(asked.len());
            }
        }
        last.insert(&run.node, &run.outcome);
    }
    let mean = |v: &[usize]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<usize>() as f64 / v.len() as f64
        }
    };
    Waiting {
        runs: waits.len(),
        mean: mean(&waits),
        max: waits.iter().copied().max().unwrap_or(0),
        tries: tries.len(),
        tries_mean: mean(&tries),
    }
}

/// The nodes of one thread.
struct Worker {
    nodes: Vec<(String, std::path::PathBuf, Arc<Mutex<String>>, Files)>,
    admin_kc: std::path::PathBuf,
    target: String,
    spec: RoundSpec,
    stop: Arc<AtomicBool>,
    runs: Arc<Mutex<Vec<RunRecord>>>,
    restarts: Arc<Mutex<Vec<Restart>>>,
    fail: Arc<FailPlan>,
}

impl Worker {
    fn run(self) -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let local = tokio::task::LocalSet::new();
        let admin = Rc::new(ApiClient::new(
            &kubeconfig::load(&self.admin_kc)?,
            Duration::from_secs(30),
        )?);
        let posting = Rc::new(RefCell::new(Vec::new()));
        let w = Rc::new(self);
        local.block_on(&rt, async {
            let mut tasks = Vec::new();
            for (name, kc, installed, files) in w.nodes.clone() {
                let node = SimNode {
                    name: name.clone(),
                    installed,
                    files,
                    admin: admin.clone(),
                    change: w.spec.change,
                    target: w.target.clone(),
                    fail: w.fail.clone(),
                    restarts: w.restarts.clone(),
                    posting: posting.clone(),
                };
                let w = w.clone();
                tasks.push(tokio::task::spawn_local(async move {
                    w.node_loop(node, &kc).await
                }));
            }
            for t in tasks {
                t.await.context("a node's task")??;
            }
            let posts: Vec<_> = posting.borrow_mut().drain(..).collect();
            for p in posts {
                let _ = p.await;
            }
            anyhow::Ok(())
        })
    }

    async fn node_loop(&self, node: SimNode, kc: &std::path::Path) -> Result<()> {
        let kc = kubeconfig::load(kc)?;
        let settings = node_bootstrap::follow::config::FollowSettings {
            enabled: true,
            ..Default::default()
        };
        let cluster = Cluster::new(&kc, Duration::from_secs(30), node.name.clone(), &settings)?;
        let driver = Driver {
            cluster: &cluster,
            node: &node,
            files: node.files.clone(),
            settings: Settings {
                stable_checks: 1,
                ready_timeout: self.spec.ready_timeout,
                drain_timeout: Duration::from_secs(30),
                poll: self.spec.poll,
                backend: Backend::Wrapper,
            },
        };
        // The fleet does not start in step: the first run within a period.
        let first = self.spec.timer.mul_f64(fastrand::f64());
        tokio::time::sleep(first).await;
        while !self.stop.load(Ordering::SeqCst) {
            let start = now_f64();
            let outcome = match driver.run().await {
                Ok(ran) => format!("{ran:?}"),
                Err(e) => format!("error: {e}"),
            };
            let why = node
                .files
                .load_state()
                .ok()
                .and_then(|s| s.why)
                .unwrap_or_default();
            self.runs.lock().unwrap().push(RunRecord {
                node: node.name.clone(),
                start,
                end: now_f64(),
                outcome,
                why,
            });
            let pause = self.spec.timer + self.spec.jitter.mul_f64(fastrand::f64());
            tokio::time::sleep(pause).await;
        }
        Ok(())
    }
}

/// `nb-bench follow-fleet`: `nodes` simulated nodes on `threads` threads,
/// three rounds (maxChanging 10, maxChanging 1, maxChanging 10 with the
/// 100th restart failing), each checked ([`report::verify`]); the rows.
pub fn bench(
    nodes: usize,
    threads: usize,
    change: Duration,
    timer: Duration,
) -> Result<Vec<String>> {
    let t = Instant::now();
    let fleet = Fleet::start(nodes)?;
    eprintln!(
        "follow-fleet: {nodes} Nodes and the API server up in {:?}",
        t.elapsed()
    );
    let base = RoundSpec {
        max_changing: 10,
        change,
        timer,
        jitter: timer / 2,
        fail_nth: None,
        ready_timeout: Duration::from_secs(15),
        poll: Duration::from_millis(200),
        after_halt: timer * 3,
        deadline: Duration::from_secs(3600),
    };
    let specs = [
        base.clone(),
        RoundSpec {
            max_changing: 1,
            ..base.clone()
        },
        RoundSpec {
            fail_nth: Some(100.min(nodes / 2).max(1)),
            ..base
        },
    ];
    let mut lines = Vec::new();
    for spec in specs {
        fleet.reset()?;
        fleet.set_max_changing(spec.max_changing)?;
        let r = fleet.round(&spec, threads)?;
        eprintln!(
            "follow-fleet: maxChanging {} fail {:?}: {:?}, {} changes, most holders {}",
            spec.max_changing,
            spec.fail_nth,
            r.took,
            r.history.takes.len(),
            r.history.max_holders
        );
        report::verify(&r)?;
        lines.extend(report::rows(&r).iter().map(crate::report::Row::line));
        if let Some(f) = &r.failing {
            lines.push(format!(
                "STEPS	halted at {f} after {} changes; {} of {} nodes never started",
                r.history.takes.len() - 1,
                r.nodes - r.history.takes.len(),
                r.nodes
            ));
            fleet.clear_entry(f)?;
        }
    }
    let denied = fleet.authz.denials();
    if !denied.is_empty() {
        bail!(
            "the 1.32 node authorizer denied the fleet: {:?}",
            &denied[..denied.len().min(5)]
        );
    }
    Ok(lines)
}
