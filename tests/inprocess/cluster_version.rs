//! Cluster version discovery against the API server stand-in
//! (`testkit::apiserver`: real TLS on loopback, client-certificate or token
//! authentication, scripted faults).
//!
//! What an operator would check: the node learns the version the cluster
//! runs; credentials never reach a server the kubeconfig's CA does not
//! vouch for; an unreachable server ends in a clear, retryable error after a
//! bounded number of attempts (or the seed, when configured); a version skew
//! is refused; the bootkube master never waits on an API server.

use node_bootstrap::cluster::{self, VersionSource};
use node_bootstrap::config::Config;
use node_bootstrap::error::{ErrorClass, exit};
use std::path::Path;
use std::time::{Duration, Instant};
use testkit::apiserver::{
    ApiServerOptions, FakeApiServer, Fault, KubeAuth, Pki, ServerTls, unreachable_url,
};

struct Node {
    dir: tempfile::TempDir,
}

impl Node {
    fn new() -> Node {
        Node {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    /// A node whose kubeconfig names `server` with `auth` (and `pki`'s CA).
    fn at(pki: &Pki, server: &str, auth: &KubeAuth) -> Node {
        let node = Node::new();
        node.write_kubeconfig(pki, server, auth);
        node
    }
    /// `cluster::discover` as `role` with the `cluster` fields of
    /// [`config`](Self::config) and the seed's image tag.
    async fn discover(
        &self,
        role: &str,
        cluster: &str,
        seed: Option<&str>,
    ) -> node_bootstrap::error::Result<cluster::ClusterVersion> {
        cluster::discover(&self.config(role, cluster).cluster_inputs(), seed).await
    }
    fn kubeconfig(&self) -> std::path::PathBuf {
        self.dir.path().join("kubeconfig")
    }
    fn write_kubeconfig(&self, pki: &Pki, server: &str, auth: &KubeAuth) {
        pki.write_kubeconfig(&self.kubeconfig(), server, auth)
            .unwrap();
    }
    /// A config pointing at this node's files; `cluster` (fields of the
    /// `cluster` section) overrides the test defaults: immediate retries so
    /// tests stay fast.
    fn config(&self, role: &str, cluster: &str) -> Config {
        let mut section = serde_json::json!({
            "api_retry_initial_secs": 0,
            "api_retry_max_secs": 0,
            "api_timeout_secs": 5
        });
        let extra: serde_json::Value = serde_json::from_str(&format!("{{{cluster}}}")).unwrap();
        for (k, v) in extra.as_object().unwrap() {
            section[k] = v.clone();
        }
        let json = serde_json::json!({
            "role": role,
            "paths": {
                "kubeconfig": self.kubeconfig(),
                "seed_dir": self.dir.path().join("installer"),
            },
            "cluster": section,
        });
        Config::from_json(&json.to_string(), Path::new("/test/config.json")).unwrap()
    }
}

fn opts(git_version: &str) -> ApiServerOptions {
    ApiServerOptions {
        git_version: git_version.into(),
        ..Default::default()
    }
}

/// v1.9.6+coreos.0, after `faults` (one per connection).
fn failing(faults: Vec<Fault>) -> ApiServerOptions {
    ApiServerOptions {
        faults,
        ..opts("v1.9.6+coreos.0")
    }
}

async fn serve(pki: &Pki, options: ApiServerOptions) -> FakeApiServer {
    FakeApiServer::start(pki, options).await.unwrap()
}

#[tokio::test]
async fn version_from_api_server_with_client_certificate() {
    let pki = Pki::generate();
    let server = serve(&pki, opts("v1.9.6+coreos.0")).await;
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let v = node
        .discover("worker", "", Some("v1.8.4_coreos.0"))
        .await
        .unwrap();
    assert_eq!(v.version, "v1.9.6+coreos.0");
    assert_eq!(v.image_tag(), "v1.9.6_coreos.0");
    assert_eq!(v.apiserver_version.as_deref(), Some("v1.9.6+coreos.0"));
    assert_eq!(
        v.source,
        VersionSource::ApiServer {
            url: format!("{}/version", server.url())
        }
    );
    let log = server.log();
    assert_eq!(log.requests.len(), 1, "{log:?}");
    let r = &log.requests[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.status),
        ("GET", "/version", 200)
    );
    assert!(r.client_cert, "the node presented its client certificate");
    assert_eq!(r.authorization, None);
}

#[tokio::test]
async fn version_from_api_server_with_token() {
    let pki = Pki::generate();
    let server = FakeApiServer::start(
        &pki,
        ApiServerOptions {
            token: Some("abcdef.0123456789abcdef".into()),
            ..opts("v1.10.2")
        },
    )
    .await
    .unwrap();
    let node = Node::at(
        &pki,
        &server.url(),
        &KubeAuth::Token("abcdef.0123456789abcdef".into()),
    );
    let v = node.discover("master", "", None).await.unwrap();
    assert_eq!(v.version, "v1.10.2");
    let log = server.log();
    assert_eq!(log.requests.len(), 1);
    assert_eq!(
        log.requests[0].authorization.as_deref(),
        Some("Bearer abcdef.0123456789abcdef")
    );
    assert!(!log.requests[0].client_cert);
    assert_eq!(log.requests[0].status, 200);
}

#[tokio::test]
async fn server_from_another_ca_gets_no_credentials() {
    for auth in [KubeAuth::ClientCert, KubeAuth::Token("secret-token".into())] {
        let pki = Pki::generate();
        let server = FakeApiServer::start(
            &pki,
            ApiServerOptions {
                tls: ServerTls::OtherCa,
                token: Some("secret-token".into()),
                ..opts("v1.9.6+coreos.0")
            },
        )
        .await
        .unwrap();
        let node = Node::at(&pki, &server.url(), &auth);
        // Even with the seed fallback on: an untrusted server is not
        // "unreachable", it is refused.
        let e = node
            .discover(
                "worker",
                r#""api_attempts":3,"fallback_to_seed":true"#,
                Some("v1.9.6_coreos.0"),
            )
            .await
            .unwrap_err();
        assert_eq!(e.class(), ErrorClass::Verification, "{auth:?}: {e}");
        assert_eq!(e.exit_code(), exit::VERIFICATION);
        let m = e.to_string();
        assert!(
            m.contains("the API server's certificate does not verify against the kubeconfig's CA"),
            "{m}"
        );
        assert!(m.contains("no credentials were sent"), "{m}");
        // The server task sees the client's alert a moment later.
        let log = settled(&server, |l| !l.handshake_failures.is_empty()).await;
        assert_eq!(log.connections, 1, "not retried in-process: {log:?}");
        assert!(
            log.requests.is_empty(),
            "no HTTP request reached it: {log:?}"
        );
        assert_eq!(
            log.client_certs_presented, 0,
            "no client certificate: {log:?}"
        );
        assert_eq!(log.handshake_failures.len(), 1, "{log:?}");
    }
}

#[tokio::test]
async fn unreachable_api_server_is_retryable_after_bounded_attempts() {
    let pki = Pki::generate();
    let node = Node::at(&pki, &unreachable_url(), &KubeAuth::ClientCert);
    let t0 = Instant::now();
    let e = node
        .discover("worker", r#""api_attempts":4"#, Some("v1.9.6_coreos.0"))
        .await
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(e.class(), ErrorClass::Retryable, "{e}");
    assert_eq!(e.exit_code(), exit::RETRYABLE);
    let m = e.to_string();
    assert!(
        m.contains("cannot learn the cluster version from the API server"),
        "{m}"
    );
    assert!(m.contains("set cluster.fallback_to_seed"), "{m}");
    assert!(m.contains("failed after 4 attempts"), "{m}");
    assert!(m.contains("cannot connect"), "{m}");
}

#[tokio::test]
async fn unreachable_api_server_falls_back_to_seed_only_when_configured() {
    let pki = Pki::generate();
    let node = Node::at(&pki, &unreachable_url(), &KubeAuth::ClientCert);
    let v = node
        .discover(
            "worker",
            r#""api_attempts":2,"fallback_to_seed":true"#,
            Some("v1.9.6_coreos.0"),
        )
        .await
        .unwrap();
    assert_eq!(v.version, "v1.9.6+coreos.0");
    assert_eq!(v.apiserver_version, None);
    assert!(
        matches!(v.source, VersionSource::Seed { .. }),
        "{:?}",
        v.source
    );
}

#[tokio::test]
async fn transient_failures_are_retried_then_succeed() {
    let pki = Pki::generate();
    let server = FakeApiServer::start(
        &pki,
        ApiServerOptions {
            faults: vec![
                Fault::Reset,
                Fault::Status(503),
                Fault::StatusRetryAfter(429, 1),
            ],
            ..opts("v1.9.6+coreos.0")
        },
    )
    .await
    .unwrap();
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let t0 = Instant::now();
    let v = node
        .discover("worker", r#""api_attempts":4,"api_retry_max_secs":2"#, None)
        .await
        .unwrap();
    assert_eq!(v.version, "v1.9.6+coreos.0");
    assert!(
        t0.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    let log = server.log();
    assert_eq!(log.connections, 4, "{log:?}");
    let statuses: Vec<u16> = log.requests.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![503, 429, 200]);
}

/// The agent comes back when the server says, not when its own backoff
/// would: here the backoff is 0.5-1 s (`api_retry_initial_secs` and
/// `api_retry_max_secs` 1) and the server asks for 4 s. An agent that
/// ignored `Retry-After`, or capped it at its own 1 s maximum (as it did
/// before), asks again within about a second.
#[tokio::test]
async fn retry_after_beyond_the_agents_own_backoff_is_honoured() {
    let pki = Pki::generate();
    let server = FakeApiServer::start(
        &pki,
        ApiServerOptions {
            faults: vec![Fault::StatusRetryAfter(429, 4)],
            ..opts("v1.20.2")
        },
    )
    .await
    .unwrap();
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let t0 = Instant::now();
    let v = node
        .discover(
            "worker",
            r#""api_attempts":2,"api_retry_initial_secs":1,"api_retry_max_secs":1"#,
            None,
        )
        .await
        .unwrap();
    let waited = t0.elapsed();
    assert_eq!(v.version, "v1.20.2");
    assert!(
        waited >= Duration::from_secs(4),
        "asked again {waited:?} after a 429 with Retry-After: 4"
    );
    // Honoured with the jitter on top (at most the 1 s step's half), no
    // more: Retry-After is a floor, not a reason to wait longer.
    assert!(waited < Duration::from_secs(6), "{waited:?}");
    let statuses: Vec<u16> = server.log().requests.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![429, 200]);
}

#[tokio::test]
async fn server_errors_until_attempts_run_out_are_retryable() {
    let pki = Pki::generate();
    let server = serve(&pki, failing(vec![Fault::Status(500); 5])).await;
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let e = node
        .discover("worker", r#""api_attempts":3"#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(e.to_string().contains("failed after 3 attempts"), "{e}");
    assert!(e.to_string().contains("HTTP 500"), "{e}");
    assert_eq!(server.log().requests.len(), 3);
}

/// A kube-apiserver that has just started answers 403 to `/version` until
/// its default RBAC policy exists (seen against the real one, whose
/// `system:public-info-viewer` binding comes from a post-start hook): the
/// agent tries again, and a 403 that lasts is retryable, naming the role.
#[tokio::test]
async fn forbidden_version_is_retried_as_a_server_still_starting() {
    let pki = Pki::generate();
    let server = serve(&pki, failing(vec![Fault::Status(403); 2])).await;
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let v = node
        .discover("worker", r#""api_attempts":3"#, None)
        .await
        .unwrap();
    assert_eq!(v.version, "v1.9.6+coreos.0");
    let statuses: Vec<u16> = server.log().requests.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![403, 403, 200]);

    let lasting = serve(&pki, failing(vec![Fault::Status(403); 5])).await;
    node.write_kubeconfig(&pki, &lasting.url(), &KubeAuth::ClientCert);
    let e = node
        .discover("worker", r#""api_attempts":2"#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable, "{e}");
    assert_eq!(e.exit_code(), exit::RETRYABLE);
    let m = e.to_string();
    assert!(
        m.contains("does not let this user read /version (HTTP 403"),
        "{m}"
    );
    assert!(m.contains("system:public-info-viewer"), "{m}");
}

#[tokio::test]
async fn rejected_token_is_bad_input_without_retry() {
    let pki = Pki::generate();
    let server = FakeApiServer::start(
        &pki,
        ApiServerOptions {
            token: Some("right".into()),
            ..opts("v1.9.6+coreos.0")
        },
    )
    .await
    .unwrap();
    let node = Node::at(&pki, &server.url(), &KubeAuth::Token("wrong".into()));
    let e = node
        .discover("worker", r#""api_attempts":3"#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::BadInput, "{e}");
    assert!(
        e.to_string()
            .contains("the API server rejected the kubeconfig's credentials (HTTP 401)"),
        "{e}"
    );
    assert_eq!(server.log().requests.len(), 1);
}

/// A bootstrap token the API server does not know yet (a new cluster's
/// master has not applied its Secret): asked again, a second or more
/// apart, within `bootstrap_token_grace_secs`; with no grace, one request.
#[tokio::test]
async fn a_bootstrap_token_not_known_yet_is_asked_again_within_the_grace() {
    const TOKEN: &str = "abcdef.0123456789abcdef";
    let pki = Pki::generate();
    for (grace, faults, expect) in [(10, 2, Ok(3..=3)), (0, 2, Err(1..=1)), (2, 9, Err(2..=3))] {
        let server = FakeApiServer::start(
            &pki,
            ApiServerOptions {
                token: Some(TOKEN.into()),
                faults: vec![Fault::Status(401); faults],
                ..opts("v1.9.6+coreos.0")
            },
        )
        .await
        .unwrap();
        let node = Node::at(&pki, &server.url(), &KubeAuth::Token(TOKEN.into()));
        let cluster = format!(r#""bootstrap_token_grace_secs":{grace}"#);
        let t0 = Instant::now();
        let got = node.discover("worker", &cluster, None).await;
        let (took, asked) = (t0.elapsed(), server.log().requests.len());
        match (got, expect) {
            (Ok(v), Ok(n)) => {
                assert_eq!(v.version, "v1.9.6+coreos.0");
                assert!(n.contains(&asked), "grace {grace}: {asked} requests");
                assert!(
                    took >= Duration::from_secs(2),
                    "two waits of 1 s or more: {took:?}"
                );
            }
            (Err(e), Err(n)) => {
                assert_eq!(e.class(), ErrorClass::BadInput, "{e}");
                let m = e.to_string();
                assert!(
                    m.contains("the API server rejected bootstrap token abcdef of "),
                    "{m}"
                );
                assert_eq!(m.contains("still rejected after"), grace > 0, "{m}");
                assert!(n.contains(&asked), "grace {grace}: {asked} requests");
                assert!(
                    took < Duration::from_secs(grace + 2),
                    "grace {grace}: {took:?}"
                );
            }
            (got, expect) => panic!("grace {grace}: {got:?}, expected {expect:?}"),
        }
    }
}

#[tokio::test]
async fn client_certificate_from_another_ca_is_rejected_as_bad_input() {
    let pki = Pki::generate();
    let server = serve(&pki, opts("v1.9.6+coreos.0")).await;
    let node = Node::new();
    // The kubeconfig trusts the right CA but carries a client certificate
    // the cluster CA never signed.
    let stranger = Pki::generate();
    let text = pki.kubeconfig(&server.url(), &KubeAuth::ClientCert);
    let text = text.replace(
        &b64_of(&pki.client.cert_pem),
        &b64_of(&stranger.client.cert_pem),
    );
    let text = text.replace(
        &b64_of(&pki.client.key_pem),
        &b64_of(&stranger.client.key_pem),
    );
    assert!(text.contains(&b64_of(&stranger.client.cert_pem)));
    assert!(text.contains(&b64_of(&stranger.client.key_pem)));
    std::fs::write(node.kubeconfig(), text).unwrap();
    let e = node
        .discover("worker", r#""api_attempts":3"#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::BadInput, "{e}");
    assert!(
        e.to_string()
            .contains("rejected the kubeconfig's client certificate"),
        "{e}"
    );
    assert!(server.log().requests.is_empty());
}

#[tokio::test]
async fn not_a_version_answer_is_retried_then_retryable() {
    let pki = Pki::generate();
    let server = FakeApiServer::start(
        &pki,
        ApiServerOptions {
            body: Some("<html>maintenance</html>".into()),
            ..opts("v1.9.6+coreos.0")
        },
    )
    .await
    .unwrap();
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let e = node
        .discover("worker", r#""api_attempts":2"#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Retryable);
    assert!(e.to_string().contains("not Kubernetes version JSON"), "{e}");
    assert_eq!(server.log().requests.len(), 2);
}

#[tokio::test]
async fn forced_version_that_breaks_skew_is_refused() {
    let pki = Pki::generate();
    let server = serve(&pki, opts("v1.9.6+coreos.0")).await;
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let e = node
        .discover("worker", r#""forced_version":"v1.10.2""#, None)
        .await
        .unwrap_err();
    assert_eq!(e.class(), ErrorClass::Refused, "{e}");
    assert_eq!(e.exit_code(), exit::REFUSED);
    let m = e.to_string();
    assert!(
        m.contains("cluster.forced_version does not fit the cluster"),
        "{m}"
    );
    assert!(
        m.contains("kubelet v1.10.2 cannot join API server v1.9.6+coreos.0"),
        "{m}"
    );

    // Within the policy: accepted, and the server's version is recorded.
    let v = node
        .discover("worker", r#""forced_version":"v1.8.15""#, None)
        .await
        .unwrap();
    assert_eq!(v.version, "v1.8.15");
    assert_eq!(v.source, VersionSource::Forced);
    assert_eq!(v.apiserver_version.as_deref(), Some("v1.9.6+coreos.0"));

    // The check can be switched off: no request at all.
    let before = server.log().connections;
    let v = node
        .discover(
            "worker",
            r#""forced_version":"v1.10.2","check_forced_skew":false"#,
            None,
        )
        .await
        .unwrap();
    assert_eq!((v.version.as_str(), v.apiserver_version), ("v1.10.2", None));
    assert_eq!(server.log().connections, before);
}

#[tokio::test]
async fn forced_version_with_unreachable_server_is_only_a_warning() {
    let pki = Pki::generate();
    let node = Node::at(&pki, &unreachable_url(), &KubeAuth::ClientCert);
    let v = node
        .discover("worker", r#""forced_version":"v1.10.2""#, None)
        .await
        .unwrap();
    assert_eq!((v.version.as_str(), v.apiserver_version), ("v1.10.2", None));
}

#[tokio::test]
async fn bootkube_master_never_contacts_the_api_server() {
    let pki = Pki::generate();
    let server = serve(&pki, opts("v1.10.2")).await;
    let node = Node::at(&pki, &server.url(), &KubeAuth::ClientCert);
    let v = node
        .discover("bootkube-master", "", Some("v1.9.6_coreos.0"))
        .await
        .unwrap();
    assert_eq!(v.version, "v1.9.6+coreos.0");
    assert!(matches!(v.source, VersionSource::Seed { .. }));
    assert_eq!(server.log().connections, 0);
}

#[tokio::test]
async fn bad_kubeconfig_is_bad_input_naming_file_and_field() {
    let pki = Pki::generate();
    let node = Node::new();
    let text = pki
        .kubeconfig("https://127.0.0.1:6443", &KubeAuth::ClientCert)
        .replace(
            "    certificate-authority-data",
            "    insecure-skip-tls-verify: true\n    certificate-authority-data",
        );
    std::fs::write(node.kubeconfig(), text).unwrap();
    let e = node.discover("worker", "", None).await.unwrap_err();
    assert_eq!(e.exit_code(), exit::BAD_INPUT);
    let m = e.to_string();
    assert!(m.contains(&node.kubeconfig().display().to_string()), "{m}");
    assert!(
        m.contains("clusters[local].cluster.insecure-skip-tls-verify"),
        "{m}"
    );
}

/// The server's log once `done` holds (or after 5 s).
async fn settled(
    server: &FakeApiServer,
    done: impl Fn(&testkit::apiserver::ServerLog) -> bool,
) -> testkit::apiserver::ServerLog {
    let t0 = Instant::now();
    loop {
        let log = server.log();
        if done(&log) || t0.elapsed() > Duration::from_secs(5) {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn b64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}
