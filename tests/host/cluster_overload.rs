//! The real kube-apiserver overloaded: agents (`node-bootstrap run`
//! processes, the real binary) ask a real API server that is out of
//! request slots, get its `429 Too Many Requests` with `Retry-After: 1`,
//! wait at least that long, and join once it has room again.
//!
//! The agents' own backoff is zero (`api_retry_initial_secs` and
//! `api_retry_max_secs` 0), so the only thing that spaces their attempts is
//! the server's `Retry-After`: an agent that ignored it would come back
//! within milliseconds, and the audit log would show it.
//!
//! The overload is made deterministic: the API server runs with one slot
//! for reads (`--max-requests-inflight=1`, the classic limiter: API
//! priority and fairness off), and a client it must authorize through a
//! slow webhook (this test's authorizer answers `slowpoke` only after four
//! seconds; authorization runs inside the in-flight limit) holds that slot
//! while the agents start. What each agent's requests got, and when, comes
//! from the API server's own audit log.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use testkit::apiserver::KubeAuth;
use testkit::kube::{ControlPlane, Kubectl, StaticToken};
use tokio::io::AsyncWriteExt;

const AGENTS: usize = 4;
/// How long the slow authorizer takes for `slowpoke`.
const SLOW: Duration = Duration::from_secs(4);

/// An authorization webhook (`SubjectAccessReview` over HTTP) that denies
/// everything, `slowpoke`'s requests after [`SLOW`]; counts the slow ones
/// in progress.
async fn slow_authorizer(listener: tokio::net::TcpListener, slow_in_progress: Arc<AtomicUsize>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            return;
        };
        let slow = slow_in_progress.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Some(body) = testkit::node_authz::read_request(&mut conn, &mut buf).await {
                let review: Value = serde_json::from_slice(&body).unwrap_or_default();
                if review["spec"]["user"] == "slowpoke" {
                    slow.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(SLOW).await;
                    slow.fetch_sub(1, Ordering::SeqCst);
                }
                let body = json!({
                    "apiVersion": review["apiVersion"],
                    "kind": "SubjectAccessReview",
                    "status": {"allowed": false, "reason": "this test's authorizer allows nothing"},
                })
                .to_string();
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                if conn.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}

#[test]
fn agents_facing_an_overloaded_api_server_honour_retry_after_and_join() {
    if testkit::kube::skip_unless_available() || testkit::fake_update_engine::skip_unless_bus() {
        return;
    }
    let parts = testkit::kube::parts().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rt = testkit::server_runtime(2).unwrap();
    let slow = Arc::new(AtomicUsize::new(0));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let authz_port = listener.local_addr().unwrap().port();
    rt.spawn(slow_authorizer(listener, slow.clone()));

    let webhook = dir.path().join("authz-webhook.kubeconfig");
    std::fs::write(
        &webhook,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: authz\n  cluster:\n    server: http://127.0.0.1:{authz_port}/authorize\n\
             users:\n- name: apiserver\ncontexts:\n- name: webhook\n  context:\n    cluster: authz\n    user: apiserver\ncurrent-context: webhook\n"
        ),
    )
    .unwrap();
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [\"RequestReceived\"]\nrules:\n\
         - level: Metadata\n  nonResourceURLs: [\"/version\"]\n- level: None\n",
    )
    .unwrap();
    let audit = dir.path().join("audit.log");

    let mut cp = ControlPlane::new(&[]);
    for i in 0..AGENTS {
        cp.tokens.push(StaticToken::for_node(
            &format!("node-{i}"),
            &format!("node-{i}-token"),
        ));
    }
    cp.tokens.push(StaticToken {
        token: "slowpoke-token".into(),
        user: "slowpoke".into(),
        groups: vec![],
    });
    cp.extra_apiserver_args = vec![
        "--enable-priority-and-fairness=false".into(),
        "--max-requests-inflight=1".into(),
        "--authorization-mode=Node,RBAC,Webhook".into(),
        format!("--authorization-webhook-config-file={}", webhook.display()),
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit.display()),
        "--audit-log-format=json".into(),
    ];
    let running = cp.start(&parts).unwrap();
    let slowpoke_kc = dir.path().join("slowpoke.kubeconfig");
    std::fs::write(
        &slowpoke_kc,
        cp.kubeconfig(None, &KubeAuth::Token("slowpoke-token".into())),
    )
    .unwrap();
    let slowpoke = Kubectl::new(&parts.kubectl(), &slowpoke_kc);

    // The slot holder: two slow requests back to back (each its own
    // namespace: no cached decision), about eight seconds in all.
    let holder = std::thread::spawn(move || {
        for ns in ["hold-1", "hold-2"] {
            let _ = slowpoke.run(&["get", "configmaps", "-n", ns]);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the slot holder never reached the authorizer"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // The agents, while the slot is taken.
    let bus = testkit::fleet::FleetBus::start(dir.path()).unwrap();
    let mut agents = Vec::new();
    for i in 0..AGENTS {
        let d = dir.path().join(format!("node-{i}"));
        let kubeconfig = cp.kubeconfig(None, &KubeAuth::Token(format!("node-{i}-token")));
        let config = testkit::fleet::agent_dir(
            &d,
            &kubeconfig,
            json!({"api_attempts": 30, "api_retry_initial_secs": 0, "api_retry_max_secs": 0, "api_timeout_secs": 10}),
        )
        .unwrap();
        let child = std::process::Command::new(testkit::cli::agent_binary())
            .arg("run")
            .env("NODE_BOOTSTRAP_CONFIG", &config)
            .env("NODE_BOOTSTRAP_LOG_FORMAT", "text")
            .env("DBUS_SYSTEM_BUS_ADDRESS", bus.address())
            .env_remove("JOURNAL_STREAM")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(d.join("stderr")).unwrap())
            .spawn()
            .unwrap();
        agents.push((d, child));
    }
    for (d, child) in &mut agents {
        let st = child.wait().unwrap();
        let stderr = std::fs::read_to_string(d.join("stderr")).unwrap();
        assert_eq!(st.code(), Some(0), "{}: {stderr}", d.display());
        let env = std::fs::read_to_string(d.join("kubelet.env")).unwrap();
        testkit::agentnode::check_kubelet_env(
            &env,
            &parts.version,
            testkit::agentnode::host_cgroup_driver(),
        )
        .unwrap();
        assert!(stderr.contains("HTTP 429"), "{}: {stderr}", d.display());
    }
    holder.join().unwrap();
    drop(running);

    // The API server's account: each agent got 429s, came back no sooner
    // than Retry-After (1 s) each time, and finally got its version.
    let mut per_user: BTreeMap<String, Vec<(f64, u64)>> = BTreeMap::new();
    for line in std::fs::read_to_string(&audit).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let user = e["user"]["username"].as_str().unwrap_or_default();
        if e["requestURI"] == "/version" && user.starts_with("system:node:node-") {
            per_user.entry(user.to_string()).or_default().push((
                testkit::kube::rfc3339_epoch_secs(e["requestReceivedTimestamp"].as_str().unwrap())
                    .unwrap(),
                e["responseStatus"]["code"].as_u64().unwrap(),
            ));
        }
    }
    assert_eq!(per_user.len(), AGENTS, "{per_user:?}");
    for (user, mut reqs) in per_user {
        reqs.sort_by(|a, b| a.0.total_cmp(&b.0));
        let codes: Vec<u64> = reqs.iter().map(|r| r.1).collect();
        assert!(codes.contains(&429), "{user}: {codes:?}");
        assert_eq!(codes.last(), Some(&200), "{user}: {codes:?}");
        assert!(
            codes[..codes.len() - 1].iter().all(|c| *c == 429),
            "{user}: {codes:?}"
        );
        for w in reqs.windows(2) {
            let gap = w[1].0 - w[0].0;
            assert!(
                gap >= 1.0,
                "{user} came back {gap:.3} s after a 429 with Retry-After: 1: {reqs:?}"
            );
        }
    }
}
