//! The agent with a bootstrap token, against the real 1.20 control plane on
//! this host in bootstrap-token mode (tokens, bootstrap kubeconfigs and
//! RBAC rendered by `terraform/modules/bootstrap-token`), each agent a
//! `node-bootstrap` process with its files in a temp dir and a private
//! system bus:
//! - `run` with `cluster.credential: bootstrap-token` reads `/version`
//!   with the bootstrap kubeconfig and writes kubelet.env;
//! - an expired or a deleted token: exit 5 naming the token by its id
//!   ("expired or deleted?"), no kubelet.env, one request (the API
//!   server's audit log counts the agent's), so not retried;
//! - a malformed token: exit 4 before any request (the audit log shows
//!   none), from `run` and `preflight` alike;
//! - the secret half of every token appears in none of the agent's log
//!   lines (text and JSON, at trace level: the fields the journald layer
//!   would send), the state journal, the metrics, `status` (text and JSON),
//!   `preflight`, `check-config`, or an error;
//! - the join as the agent reads it from the real API server, driven step
//!   by step as a kubelet and an administrator would: no certificate
//!   request yet, a request pending (auto-approval's binding removed),
//!   denied, pending again, issued; the kubelet's own kubeconfig written
//!   (its certificate and key in one file, as the kubelet writes them); the
//!   Node registered with the not-ready taint, then Ready (the controller
//!   manager lifts the taint). `run` watches it all after kubelet.env and
//!   ends once the node is Ready; `status --json` shows each state; a node
//!   that never gets a certificate ends its watch not Ready, and its
//!   textfile raises the alert.

use crate::support::{
    CLIENT_SIGNER, CLIENT_USAGES, NodeClient, create_csr, csr, issued_pem, wait_issued,
};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use testkit::cli::{stderr, stdout};
use testkit::kube::{ControlPlane, RunningControlPlane};
use testkit::tls_bootstrap::{BootstrapToken, RenderedToken, rfc3339_in};

/// The controller manager's signing duration (10 minutes: the 1.20 signer
/// backdates 5, and a kubelet renews at 70-90 % of the rest).
const SIGNING: Duration = Duration::from_secs(600);
/// The ClusterRoleBinding that lets the controller manager approve a
/// bootstrapper's request (terraform/modules/bootstrap-token).
const AUTO_APPROVAL: &str = "node-bootstrap:approve-node-client-csr";

fn skip() -> bool {
    testkit::kube::skip_unless_available()
        || testkit::skip_without(&["terraform", "promtool"])
        || testkit::fake_update_engine::skip_unless_bus()
}

/// A control plane in bootstrap-token mode with `tokens` (valid two
/// hours), its audit log recording every `/version` request.
struct Cluster {
    cp: ControlPlane,
    running: RunningControlPlane,
    rendered: Vec<RenderedToken>,
    audit: PathBuf,
    _dir: tempfile::TempDir,
}

fn start(tokens: &[BootstrapToken]) -> Cluster {
    let parts = testkit::kube::parts().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
         - level: Metadata\n  nonResourceURLs: [\"/version\"]\n- level: None\n",
    )
    .unwrap();
    let audit = dir.path().join("audit.log");
    let mut cp = ControlPlane::new(&[]);
    cp.extra_apiserver_args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit.display()),
        "--audit-log-format=json".into(),
    ];
    let with_expiry: Vec<(BootstrapToken, String)> = tokens
        .iter()
        .map(|t| (t.clone(), rfc3339_in(Duration::from_secs(7200))))
        .collect();
    let rendered = cp
        .enable_tls_bootstrap(SIGNING, &with_expiry, None)
        .unwrap();
    let running = cp.start(&parts).unwrap();
    Cluster {
        cp,
        running,
        rendered,
        audit,
        _dir: dir,
    }
}

impl Cluster {
    /// The `/version` requests the agent made (its user agent), with the
    /// status each got, in order.
    fn agent_version_requests(&self) -> Vec<u64> {
        let text = std::fs::read_to_string(&self.audit).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| {
                e["requestURI"] == "/version"
                    && e["userAgent"]
                        .as_str()
                        .is_some_and(|ua| ua.starts_with("node-bootstrap/"))
            })
            .filter_map(|e| e["responseStatus"]["code"].as_u64())
            .collect()
    }
}

/// One node's agent: its files under `dir` (a worker's, as
/// `testkit::fleet::agent_dir` lays them out), the bootstrap kubeconfig
/// with `cluster.credential: bootstrap-token`, the kubelet's dir, the
/// metrics textfile; a private system bus.
struct Agent {
    dir: PathBuf,
    config: PathBuf,
    bus: testkit::fleet::FleetBus,
}

impl Agent {
    /// `cluster`: fields added to the `cluster` section; `seed_extra`:
    /// lines added to the seed kubelet.env.
    fn new(dir: &Path, bootstrap_kubeconfig: &str, cluster: Value, seed_extra: &str) -> Agent {
        let mut section = json!({
            "credential": "bootstrap-token",
            "api_attempts": 3,
            "api_retry_initial_secs": 0,
            "api_retry_max_secs": 1,
            "api_timeout_secs": 5,
        });
        for (k, v) in cluster.as_object().unwrap() {
            section[k] = v.clone();
        }
        // No shared kubeconfig: a bootstrap-token node has none.
        let config = testkit::fleet::agent_dir(dir, "", section).unwrap();
        std::fs::remove_file(dir.join("kubeconfig")).unwrap();
        let seed = dir.join("installer/kubelet.env");
        let mut text = std::fs::read_to_string(&seed).unwrap();
        text.push_str(seed_extra);
        std::fs::write(&seed, text).unwrap();
        testkit::files::write_mode(
            &dir.join("bootstrap-kubeconfig"),
            bootstrap_kubeconfig.as_bytes(),
            0o600,
        )
        .unwrap();
        let mut c: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
        let p = |s: &str| dir.join(s).display().to_string();
        c["paths"]["bootstrap_kubeconfig"] = p("bootstrap-kubeconfig").into();
        c["paths"]["kubelet_dir"] = p("kubelet").into();
        c["paths"]["kubelet_config"] = p("kubelet-config.yaml").into();
        c["metrics"] = json!({"textfile_dir": p("textfile")});
        std::fs::create_dir_all(dir.join("textfile")).unwrap();
        std::fs::write(&config, c.to_string()).unwrap();
        Agent {
            dir: dir.to_path_buf(),
            config,
            bus: testkit::fleet::FleetBus::start(dir).unwrap(),
        }
    }

    /// The agent with `args` (after the global options), its log at trace
    /// level in `format`.
    fn command(&self, format: &str, args: &[&str]) -> Command {
        let mut c = testkit::cli::agent_command();
        c.args(["-vv", "--log-format", format])
            .args(args)
            .env("NODE_BOOTSTRAP_CONFIG", &self.config)
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.bus.address())
            .stdin(Stdio::null());
        c
    }

    fn output(&self, format: &str, args: &[&str]) -> Output {
        self.command(format, args).output().unwrap()
    }

    fn kubelet_env(&self) -> PathBuf {
        self.dir.join("kubelet.env")
    }

    /// Every file the agent keeps or publishes, with its text.
    fn files(&self) -> Vec<(String, String)> {
        [
            "state/state.json",
            "state/metrics.json",
            "textfile/node_bootstrap.prom",
            "kubelet.env",
        ]
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(self.dir.join(f)).ok()?;
            Some((f.to_string(), text))
        })
        .collect()
    }

    /// `status --json`.
    fn status_json(&self) -> Value {
        let out = self.output("text", &["status", "--json"]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("status --json ({e}): {}", stderr(&out)))
    }
}

/// Everything the agent says and keeps about a node, for the secret search:
/// `run`'s output (given), `status` in text and JSON, `preflight`,
/// `check-config`, and the files it wrote.
fn everything_said(agent: &Agent, run: &[&Output]) -> Vec<(String, String)> {
    let mut said: Vec<(String, String)> = run
        .iter()
        .enumerate()
        .map(|(i, o)| (format!("run #{i}"), format!("{}{}", stdout(o), stderr(o))))
        .collect();
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["preflight"],
        &["check-config"],
    ] {
        for format in ["text", "json"] {
            let o = agent.output(format, args);
            said.push((
                format!("{} ({format} log)", args.join(" ")),
                format!("{}{}", stdout(&o), stderr(&o)),
            ));
        }
    }
    said.extend(agent.files());
    said
}

/// The secret half of `token` is in none of `said`.
fn assert_secret_nowhere(token: &BootstrapToken, said: &[(String, String)]) {
    assert!(said.len() > 8, "{said:?}");
    for (what, text) in said {
        assert!(
            !text.contains(token.secret()),
            "the secret of bootstrap token {} is in {what}:\n{text}",
            token.id
        );
    }
}

/// Waits until `client`'s `GET /version` gets `want`.
fn wait_version_status(client: &NodeClient, want: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = client.get("/version");
        if status == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: /version still answers {status}, not {want}: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn run_reads_the_version_with_a_bootstrap_token_and_refuses_bad_ones_without_leaking_them() {
    if skip() {
        return;
    }
    let (good, expired, deleted) = (
        BootstrapToken::generate(),
        BootstrapToken::generate(),
        BootstrapToken::generate(),
    );
    let cluster = start(&[good.clone(), expired.clone(), deleted.clone()]);
    let kubectl = &cluster.running.kubectl;
    let version = testkit::kube::parts().unwrap().version;
    let work = tempfile::tempdir().unwrap();

    // The good token: the version from the API server, kubelet.env written.
    let agent = Agent::new(
        &work.path().join("good"),
        &cluster.rendered[0].kubeconfig,
        json!({}),
        "",
    );
    let out = agent.output("json", &["run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let env = std::fs::read_to_string(agent.kubelet_env()).unwrap();
    assert!(
        env.contains(&format!(
            "--bootstrap-kubeconfig={}",
            agent.dir.join("bootstrap-kubeconfig").display()
        )),
        "{env}"
    );
    let journal: Value =
        serde_json::from_slice(&std::fs::read(agent.dir.join("state/state.json")).unwrap())
            .unwrap();
    let cv = &journal["steps"]["cluster-version"]["result"];
    assert_eq!(cv["version"], version.as_str(), "{journal}");
    assert_eq!(cv["source"]["kind"], "api-server", "{journal}");
    assert_eq!(cluster.agent_version_requests(), [200]);
    let preflight = agent.output("text", &["preflight"]);
    assert!(
        stdout(&preflight).contains(&format!("bootstrap token {}", good.id)),
        "{}",
        stdout(&preflight)
    );
    assert_secret_nowhere(&good, &everything_said(&agent, &[&out]));

    // Expired, then deleted: 401 named as a rejected bootstrap token, exit
    // 5, one request each, nothing written.
    kubectl.expire_bootstrap_token(&expired.id).unwrap();
    kubectl.delete_bootstrap_token(&deleted.id).unwrap();
    for (i, (token, name)) in [(&expired, "expired"), (&deleted, "deleted")]
        .into_iter()
        .enumerate()
    {
        let kubeconfig = &cluster.rendered[i + 1].kubeconfig;
        wait_version_status(&NodeClient::from_kubeconfig(kubeconfig), 401, name);
        let agent = Agent::new(&work.path().join(name), kubeconfig, json!({}), "");
        let before = cluster.agent_version_requests().len();
        let text = agent.output("text", &["run"]);
        let json_log = agent.output("json", &["run"]);
        for out in [&text, &json_log] {
            assert_eq!(out.status.code(), Some(5), "{name}: {}", stderr(out));
            let err = stderr(out);
            assert!(
                err.contains(&format!(
                    "the API server rejected bootstrap token {} of ",
                    token.id
                )) && err.contains("expired or deleted?"),
                "{name}: {err}"
            );
        }
        assert!(!agent.kubelet_env().exists(), "{name}: kubelet.env written");
        assert_eq!(
            cluster.agent_version_requests()[before..],
            [401, 401],
            "{name}: one request per run, not retried"
        );
        let journal = std::fs::read_to_string(agent.dir.join("state/state.json")).unwrap();
        assert!(
            journal.contains("\"error_class\": \"bad-input\""),
            "{journal}"
        );
        assert_secret_nowhere(token, &everything_said(&agent, &[&text, &json_log]));
    }

    // Malformed (an upper-case id): a config error before any request.
    let malformed = BootstrapToken::new("ABCDEF", BootstrapToken::generate().secret());
    let kubeconfig = cluster.rendered[0]
        .kubeconfig
        .replace(&good.token(), &malformed.token());
    assert_ne!(kubeconfig, cluster.rendered[0].kubeconfig);
    let agent = Agent::new(&work.path().join("malformed"), &kubeconfig, json!({}), "");
    let before = cluster.agent_version_requests().len();
    let run = agent.output("text", &["run"]);
    let preflight = agent.output("text", &["preflight"]);
    for out in [&run, &preflight] {
        assert_eq!(out.status.code(), Some(4), "{}", stderr(out));
        let said = format!("{}{}", stdout(out), stderr(out));
        assert!(
            said.contains("users[kubelet-bootstrap].user.token: is not a bootstrap token: its id (before the '.') has characters outside [a-z0-9]"),
            "{said}"
        );
    }
    assert!(!agent.kubelet_env().exists());
    assert_eq!(
        cluster.agent_version_requests().len(),
        before,
        "a malformed token reached the API server"
    );
    assert_secret_nowhere(&malformed, &everything_said(&agent, &[&run, &preflight]));
}

/// The join states `run`'s watch logged (its JSON log lines' `join_state`),
/// in order, and the `message_id`s it logged with them.
fn watched(log: &Path) -> (Vec<String>, Vec<(String, String)>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut states = Vec::new();
    let mut ids = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let f = &v["fields"];
        let message = f["message"].as_str().unwrap_or_default();
        if matches!(
            message,
            "join state" | "the kubelet's certificate request was refused"
        ) && let Some(s) = f["join_state"].as_str()
        {
            states.push(s.to_string());
        }
        if let Some(id) = f["message_id"].as_str() {
            ids.push((
                id.to_string(),
                f["message"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    (states, ids)
}

/// Waits until the watch logged `state` (as its latest state) and
/// `status --json` shows it too; returns that status.
fn until_state(agent: &Agent, log: &Path, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (states, _) = watched(log);
        let status = agent.status_json();
        if states.last().map(String::as_str) == Some(state) && status["join"]["state"] == state {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "waiting for join state {state}: the watch logged {states:?}; status says {}",
            status["join"]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The kubelet's kubeconfig and `pki/kubelet-client-current.pem`, as a
/// 1.20 kubelet writes them once its request is signed (certificate and
/// key in one file, both fields naming it).
fn write_kubelet_identity(agent: &Agent, server: &str, ca_pem: &str, cert: &str, key: &str) {
    use base64::Engine as _;
    let pki = agent.dir.join("kubelet/pki");
    let pem = pki.join("kubelet-client-current.pem");
    testkit::files::write_mode(&pem, format!("{cert}{key}").as_bytes(), 0o600).unwrap();
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let kubeconfig = format!(
        "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {ca}\n    server: {server}\n  name: default-cluster\n\
         contexts:\n- context:\n    cluster: default-cluster\n    namespace: default\n    user: default-auth\n  name: default-context\n\
         current-context: default-context\nkind: Config\npreferences: {{}}\nusers:\n- name: default-auth\n  user:\n\
         \x20   client-certificate: {p}\n    client-key: {p}\n",
        p = pem.display()
    );
    testkit::files::write_mode(
        &agent.dir.join("kubelet/kubeconfig"),
        kubeconfig.as_bytes(),
        0o600,
    )
    .unwrap();
}

fn rfc3339_now() -> String {
    testkit::tls_bootstrap::rfc3339_in(Duration::ZERO)
}

#[test]
fn run_and_status_follow_the_join_on_the_real_api_server_until_the_node_is_ready() {
    if skip() {
        return;
    }
    let token = BootstrapToken::generate();
    let cluster = start(std::slice::from_ref(&token));
    let kubectl = &cluster.running.kubectl;
    let bootstrap_kubeconfig = &cluster.rendered[0].kubeconfig;
    // Nobody approves kubelet client requests: they stay pending.
    kubectl
        .run(&["delete", "clusterrolebinding", AUTO_APPROVAL])
        .unwrap();
    let work = tempfile::tempdir().unwrap();

    // A node whose kubelet never asks: its watch ends, the node not Ready.
    let stuck = Agent::new(
        &work.path().join("stuck"),
        bootstrap_kubeconfig,
        json!({"join_watch_secs": 8}),
        "KUBELET_EXTRA_ARGS=\"--hostname-override=stuck-node\"\n",
    );
    let stuck_run = stuck
        .command("json", &["run"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(stuck.dir.join("run.log")).unwrap())
        .spawn()
        .unwrap();

    // The node that joins, its name from the kubelet's override (upper
    // case: the kubelet lowercases it).
    let node = "joiner-node";
    let agent = Agent::new(
        &work.path().join("joiner"),
        bootstrap_kubeconfig,
        json!({"join_watch_secs": 300}),
        "KUBELET_EXTRA_ARGS=\"--v=2 --hostname-override=Joiner-Node\"\n",
    );
    let log = agent.dir.join("run.log");
    let mut run: Child = agent
        .command("json", &["run"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();

    // kubelet.env written (the unit's READY=1), the watch asks with the
    // bootstrap token: no request yet.
    let status = until_state(&agent, &log, "no-certificate-request");
    let j = &status["join"];
    assert_eq!(j["node_name"], node, "{j}");
    assert_eq!(j["asked_as"], "bootstrap-token", "{j}");
    assert_eq!(j["bootstrap_token_id"], token.id.as_str(), "{j}");
    assert!(agent.kubelet_env().exists());

    // The kubelet's request, made with the token: pending.
    let bootstrap = NodeClient::from_kubeconfig(bootstrap_kubeconfig);
    let (request, _) = csr(&format!("system:node:{node}"), "system:nodes", &[]);
    create_csr(
        &bootstrap,
        "node-csr-first",
        &request,
        CLIENT_SIGNER,
        &CLIENT_USAGES,
    );
    let status = until_state(&agent, &log, "certificate-pending");
    assert_eq!(
        status["join"]["certificate_request"],
        json!({"name": "node-csr-first", "state": "pending", "reason": null})
    );
    // Denied by an administrator.
    kubectl
        .run(&["certificate", "deny", "node-csr-first"])
        .unwrap();
    let status = until_state(&agent, &log, "certificate-denied");
    assert_eq!(status["join"]["certificate_request"]["state"], "denied");
    // The kubelet asks again; approved this time, and signed.
    let (request, key) = csr(&format!("system:node:{node}"), "system:nodes", &[]);
    create_csr(
        &bootstrap,
        "node-csr-second",
        &request,
        CLIENT_SIGNER,
        &CLIENT_USAGES,
    );
    until_state(&agent, &log, "certificate-pending");
    kubectl
        .run(&["certificate", "approve", "node-csr-second"])
        .unwrap();
    let issued = wait_issued(&bootstrap, &cluster.running, "node-csr-second");
    until_state(&agent, &log, "certificate-issued");

    // The kubelet writes its kubeconfig: the node's own identity asks now.
    let cert = issued_pem(&issued);
    write_kubelet_identity(
        &agent,
        &cluster.cp.url(),
        &cluster.cp.pki.ca_pem,
        &cert,
        &key,
    );
    let status = until_state(&agent, &log, "not-registered");
    assert_eq!(status["join"]["asked_as"], "kubelet", "{}", status["join"]);

    // It registers, tainted not-ready as a 1.20 kubelet does.
    let me = NodeClient::from_kubeconfig(&crate::support::cert_kubeconfig(
        &cluster.cp.url(),
        &cluster.cp.pki.ca_pem,
        &cert,
        &key,
    ));
    let (code, body) = me.call(
        "POST",
        "/api/v1/nodes",
        Some(&json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
        })),
    );
    assert_eq!(code, 201, "{body}");
    let status = until_state(&agent, &log, "not-ready");
    assert_eq!(
        status["join"]["node"]["not_ready_because"],
        "no Ready condition reported yet"
    );
    // Ready, as its kubelet reports it; the controller manager lifts the taint.
    let now = rfc3339_now();
    let (code, body) = me.call(
        "PATCH",
        &format!("/api/v1/nodes/{node}/status"),
        Some(&json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": "containerd://1.6.20",
                         "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                         "osImage": "", "kubeProxyVersion": "", "operatingSystem": "linux",
                         "architecture": "amd64"},
        }})),
    );
    assert_eq!(code, 200, "{body}");
    let status = until_state(&agent, &log, "ready");
    assert_eq!(
        status["join"]["node"],
        json!({"name": node, "ready": true, "not_ready_because": null,
               "kubelet_version": "v1.20.2", "container_runtime": "containerd://1.6.20"})
    );

    // The watch ends once Ready; the run's exit code is its bootstrap's.
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(st) = run.try_wait().unwrap() {
            break st.code();
        }
        assert!(
            Instant::now() < deadline,
            "run did not end once the node was Ready"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(code, Some(0), "{}", std::fs::read_to_string(&log).unwrap());
    let (states, ids) = watched(&log);
    assert_eq!(
        states,
        [
            "no-certificate-request",
            "certificate-pending",
            "certificate-denied",
            "certificate-pending",
            "certificate-issued",
            "not-registered",
            "not-ready",
            "ready"
        ]
    );
    let id_of = |m: &str| {
        ids.iter()
            .find(|(_, msg)| msg == m)
            .map(|(id, _)| id.as_str())
    };
    assert_eq!(
        id_of("node Ready in the cluster"),
        Some(node_bootstrap::message_ids::NODE_READY)
    );
    assert_eq!(
        id_of("the kubelet's certificate request was refused"),
        Some(node_bootstrap::message_ids::CERTIFICATE_REQUEST_REFUSED)
    );
    let prom = std::fs::read_to_string(agent.dir.join("textfile/node_bootstrap.prom")).unwrap();
    assert!(
        prom.contains("node_bootstrap_join_state{state=\"ready\"} 1\n"),
        "{prom}"
    );
    assert!(
        prom.contains("\nnode_bootstrap_node_ready_timestamp_seconds "),
        "{prom}"
    );

    // The node that never asked: its watch ended after 8 s, not Ready, exit 0.
    let mut stuck_run = stuck_run;
    let st = stuck_run.wait().unwrap();
    let stuck_log = std::fs::read_to_string(stuck.dir.join("run.log")).unwrap();
    assert_eq!(st.code(), Some(0), "{stuck_log}");
    let (_, ids) = watched(&stuck.dir.join("run.log"));
    assert!(
        ids.iter()
            .any(|(id, _)| id == node_bootstrap::message_ids::NODE_NOT_READY),
        "{stuck_log}"
    );
    let prom = std::fs::read_to_string(stuck.dir.join("textfile/node_bootstrap.prom")).unwrap();
    assert!(
        prom.contains("node_bootstrap_join_state{state=\"no-certificate-request\"} 1\n"),
        "{prom}"
    );
    assert!(!prom.contains("node_ready_timestamp"), "{prom}");
    alert_fires_on(&prom, "stuck-node");
}

/// `NodeBootstrapNotReadyInCluster` fires on `textfile` (the series of a
/// node, kept for an hour, kubelet.env's time moved to promtool's clock).
fn alert_fires_on(textfile: &str, instance: &str) {
    let dir = tempfile::tempdir().unwrap();
    let rules = testkit::project_root().join("monitoring/node-bootstrap.rules.yml");
    let mut series = Vec::new();
    for line in textfile
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, value) = line.rsplit_once(' ').unwrap();
        let value = if name.starts_with("node_bootstrap_kubelet_env_timestamp_seconds") {
            "0"
        } else if name.contains("_seconds") {
            continue;
        } else {
            value
        };
        let labelled = match name.split_once('{') {
            Some((n, l)) => format!("{n}{{instance=\"{instance}\",{l}"),
            None => format!("{name}{{instance=\"{instance}\"}}"),
        };
        series.push(json!({"series": labelled, "values": format!("{value}x60")}));
    }
    let test = json!({
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "NodeBootstrapNotReadyInCluster", "exp_alerts": []},
                {"eval_time": "25m", "alertname": "NodeBootstrapNotReadyInCluster",
                 "exp_alerts": [{"exp_labels": {"severity": "warning", "instance": instance}, "exp_annotations": {
                     "summary": format!("{instance}: not Ready in the cluster 25m 0s after kubelet.env"),
                     "description": format!("{instance} wrote kubelet.env more than 15 minutes ago and its Node is not Ready in the cluster. Where the join stands: node_bootstrap_join_state{{instance=\"{instance}\"}} == 1; on the node: `node-bootstrap status` (the cluster line) and `journalctl -x -u k8s-node-bootstrap -u kubelet`."),
                 }}]},
            ],
        }],
    });
    let file = dir.path().join("test.yml");
    std::fs::write(&file, serde_json::to_vec_pretty(&test).unwrap()).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}\n{textfile}",
        stdout(&out),
        stderr(&out)
    );
}
