//! Kubelet TLS bootstrapping against the real 1.20 control plane on this
//! host (etcd, kube-apiserver with `--enable-bootstrap-token-auth` and
//! NodeRestriction, kube-controller-manager signing with the cluster CA,
//! with bootstrapsigner and tokencleaner), with the token Secret, the
//! bootstrap kubeconfig and the RBAC rendered by
//! `terraform/modules/bootstrap-token` (real terraform). The tests do over
//! HTTPS what a kubelet does with them (the real kubelet joins in the node
//! tier): read `/version` with the bootstrap kubeconfig, ask for a client
//! certificate (`CN=system:node:<name>`, `O=system:nodes`, signer
//! `kubernetes.io/kube-apiserver-client-kubelet`) and get it approved and
//! signed by the cluster CA, use it (its own Node: yes; another's: 403 from
//! NodeRestriction), renew it with itself, and be refused once the token
//! expired or was deleted.

use crate::support::{
    CLIENT_SIGNER, CLIENT_USAGES, CSRS, NodeClient, cert_kubeconfig, create_csr, csr, issued_pem,
    wait_issued,
};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use testkit::kube::{ControlPlane, RunningControlPlane};
use testkit::tls_bootstrap::{BootstrapToken, rfc3339_in, verify_client_cert};

/// The controller manager's `--cluster-signing-duration` here: minutes, so
/// a kubelet would renew within a test's reach. The 1.20 signer backdates
/// every certificate by 5 minutes (NotBefore = now - 5 min, NotAfter =
/// NotBefore + the duration), so a certificate is good for the duration
/// minus 5 minutes from its signing: 5 minutes here.
const SIGNING: Duration = Duration::from_secs(600);
const BACKDATE_SECS: i64 = 300;

fn skip() -> bool {
    testkit::kube::skip_unless_available() || testkit::skip_without(&["terraform"])
}

/// A control plane in bootstrap-token mode with `token` (valid two hours).
fn start(token: &BootstrapToken) -> (ControlPlane, RunningControlPlane, String) {
    let parts = testkit::kube::parts().unwrap();
    let mut cp = ControlPlane::new(&[]);
    let rendered = cp
        .enable_tls_bootstrap(
            SIGNING,
            &[(token.clone(), rfc3339_in(Duration::from_secs(7200)))],
            None,
        )
        .unwrap();
    let running = cp.start(&parts).unwrap();
    let kubeconfig = rendered[0].kubeconfig.clone();
    (cp, running, kubeconfig)
}

fn approval(csr: &Value) -> Value {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Approved")
        .cloned()
        .unwrap_or(Value::Null)
}

/// What a user reads off an issued certificate.
#[derive(Debug, PartialEq)]
struct CertInfo {
    cn: Vec<String>,
    org: Vec<String>,
    issuer: String,
    serial: String,
    lifetime_secs: i64,
    /// NotBefore, seconds before now.
    age_secs: i64,
}

fn cert_info(pem: &str) -> CertInfo {
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let strs = |it: Vec<&x509_parser::x509::AttributeTypeAndValue>| -> Vec<String> {
        it.iter().map(|a| a.as_str().unwrap().to_string()).collect()
    };
    CertInfo {
        cn: strs(cert.subject().iter_common_name().collect()),
        org: strs(cert.subject().iter_organization().collect()),
        issuer: cert.issuer().to_string(),
        serial: cert.raw_serial_as_string(),
        lifetime_secs: cert.validity().not_after.timestamp()
            - cert.validity().not_before.timestamp(),
        age_secs: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            - cert.validity().not_before.timestamp(),
    }
}

fn ca_subject(ca_pem: &str) -> String {
    let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes()).unwrap();
    pem.parse_x509().unwrap().subject().to_string()
}

/// The cluster and the node the steps below act for.
struct Rig {
    cp: ControlPlane,
    running: RunningControlPlane,
    node: &'static str,
}

impl Rig {
    fn ca(&self) -> &str {
        &self.cp.pki.ca_pem
    }

    fn client_with(&self, cert: &str, key: &str) -> NodeClient {
        NodeClient::from_kubeconfig(&cert_kubeconfig(&self.cp.url(), self.ca(), cert, key))
    }
}

/// (a) The module's bootstrap kubeconfig, as the agent and the kubelet read
/// it: `/version` answers, through client-go (kubectl) and plain HTTPS; and
/// nothing about nodes or secrets does.
fn bootstrap_kubeconfig_reads_version_and_nothing_else(kubeconfig: &str) -> NodeClient {
    let parts = testkit::kube::parts().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc_path = dir.path().join("bootstrap-kubeconfig");
    std::fs::write(&kc_path, kubeconfig).unwrap();
    let out = std::process::Command::new(parts.kubectl())
        .arg(format!("--kubeconfig={}", kc_path.display()))
        .args(["get", "--raw", "/version"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl with the bootstrap kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bootstrap = NodeClient::from_kubeconfig(kubeconfig);
    let (status, version) = bootstrap.get("/version");
    assert_eq!(
        (status, version["gitVersion"].as_str()),
        (200, Some(parts.version.as_str()))
    );
    for path in ["/api/v1/nodes", "/api/v1/namespaces/kube-system/secrets"] {
        assert_eq!(
            bootstrap.get(path).0,
            403,
            "{path} with the bootstrap token"
        );
    }
    bootstrap
}

/// (b) A client certificate request made with the token: approved by the
/// controller manager (nodeclient, for system:bootstrappers), signed by the
/// cluster CA for the signing duration. Returns the certificate and key.
fn first_certificate(
    rig: &Rig,
    bootstrap: &NodeClient,
    token: &BootstrapToken,
) -> (String, String) {
    let node = rig.node;
    let (request, key) = csr(&format!("system:node:{node}"), "system:nodes", &[]);
    let created = create_csr(
        bootstrap,
        "node-csr-first",
        &request,
        CLIENT_SIGNER,
        &CLIENT_USAGES,
    );
    assert_eq!(created["spec"]["username"], token.user());
    let groups = created["spec"]["groups"].as_array().unwrap();
    for g in [
        "system:bootstrappers",
        "system:bootstrappers:node-bootstrap",
    ] {
        assert!(groups.contains(&json!(g)), "{g} not in {groups:?}");
    }
    let first = wait_issued(bootstrap, &rig.running, "node-csr-first");
    let a = approval(&first);
    assert_eq!(
        (a["reason"].as_str(), a["message"].as_str()),
        (
            Some("AutoApproved"),
            Some("Auto approving kubelet client certificate after SubjectAccessReview.")
        ),
        "{first}"
    );
    let cert = issued_pem(&first);
    verify_client_cert(rig.ca(), &cert).unwrap();
    let info = cert_info(&cert);
    assert_eq!(info.cn, [format!("system:node:{node}")]);
    assert_eq!(info.org, ["system:nodes"]);
    assert_eq!(info.issuer, ca_subject(rig.ca()));
    assert_eq!(info.lifetime_secs, SIGNING.as_secs() as i64);
    assert!(
        (BACKDATE_SECS..BACKDATE_SECS + 60).contains(&info.age_secs),
        "NotBefore {} s ago",
        info.age_secs
    );
    (cert, key)
}

/// (c) With its certificate the node registers and reads its own Node, may
/// change it, and may not change another node's: NodeRestriction.
fn confined_to_its_own_node(rig: &Rig, me: &NodeClient) {
    let node = rig.node;
    let (status, body) = me.call(
        "POST",
        "/api/v1/nodes",
        Some(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})),
    );
    assert_eq!(status, 201, "{body}");
    let (status, body) = me.get(&format!("/api/v1/nodes/{node}"));
    assert_eq!(
        (status, body["metadata"]["name"].as_str()),
        (200, Some(node))
    );
    let kubectl = &rig.running.kubectl;
    kubectl
        .apply_yaml("apiVersion: v1\nkind: Node\nmetadata:\n  name: other-node\n")
        .unwrap();
    let label = json!({"metadata": {"labels": {"example.com/rack": "r1"}}});
    let (status, body) = me.call("PATCH", &format!("/api/v1/nodes/{node}"), Some(&label));
    assert_eq!(status, 200, "patching its own Node: {body}");
    let (status, body) = me.call("PATCH", "/api/v1/nodes/other-node", Some(&label));
    assert_eq!(status, 403, "patching another node's Node: {body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains(&format!(
            "node \"{node}\" is not allowed to modify node \"other-node\""
        )),
        "not NodeRestriction's refusal: {msg}"
    );
    let other = kubectl
        .run(&["get", "node", "other-node", "-o", "json"])
        .unwrap();
    let other: Value = serde_json::from_str(&other).unwrap();
    assert!(
        other["metadata"]["labels"]
            .get("example.com/rack")
            .is_none()
    );
}

/// (e) Renewal: a new request made with the node's own certificate
/// (`cert`), approved as selfnodeclient (for system:nodes), a new serial;
/// the new certificate works.
fn renewal_with_its_own_certificate(rig: &Rig, me: &NodeClient, cert: &str) {
    let node = rig.node;
    let (request, key) = csr(&format!("system:node:{node}"), "system:nodes", &[]);
    let created = create_csr(
        me,
        "node-csr-renewal",
        &request,
        CLIENT_SIGNER,
        &CLIENT_USAGES,
    );
    assert_eq!(created["spec"]["username"], format!("system:node:{node}"));
    let renewal = wait_issued(me, &rig.running, "node-csr-renewal");
    assert_eq!(
        approval(&renewal)["message"],
        "Auto approving self kubelet client certificate after SubjectAccessReview.",
        "{renewal}"
    );
    let renewed_cert = issued_pem(&renewal);
    verify_client_cert(rig.ca(), &renewed_cert).unwrap();
    let (old, new) = (cert_info(cert), cert_info(&renewed_cert));
    assert_eq!((&new.cn, &new.org), (&old.cn, &old.org));
    assert_ne!(new.serial, old.serial, "the renewal is a new certificate");
    assert_eq!(new.lifetime_secs, SIGNING.as_secs() as i64);
    let renewed = rig.client_with(&renewed_cert, &key);
    assert_eq!(renewed.get(&format!("/api/v1/nodes/{node}")).0, 200);
}

#[test]
fn a_node_with_the_modules_bootstrap_token_earns_renews_and_is_confined_to_its_own_certificate() {
    if skip() {
        return;
    }
    let token = BootstrapToken::generate();
    let (cp, running, bootstrap_kubeconfig) = start(&token);
    let rig = Rig {
        cp,
        running,
        node: "worker-tls",
    };
    let bootstrap = bootstrap_kubeconfig_reads_version_and_nothing_else(&bootstrap_kubeconfig);
    let (cert, key) = first_certificate(&rig, &bootstrap, &token);
    let me = rig.client_with(&cert, &key);
    confined_to_its_own_node(&rig, &me);

    // A serving certificate request (serverTLSBootstrap) is left for an
    // administrator: the controller manager approves client requests only.
    let node = rig.node;
    let (serving_req, _) = csr(&format!("system:node:{node}"), "system:nodes", &[node]);
    create_csr(
        &me,
        "node-csr-serving",
        &serving_req,
        "kubernetes.io/kubelet-serving",
        &["digital signature", "key encipherment", "server auth"],
    );

    renewal_with_its_own_certificate(&rig, &me, &cert);

    // The serving request is still waiting (the renewal, made after it, was
    // signed); an administrator's approval gets it signed by the cluster CA.
    std::thread::sleep(Duration::from_secs(2));
    let (_, serving) = me.get(&format!("{CSRS}/node-csr-serving"));
    assert_eq!(serving["status"], json!({}), "{serving}");
    rig.running
        .kubectl
        .run(&["certificate", "approve", "node-csr-serving"])
        .unwrap();
    let serving = wait_issued(&me, &rig.running, "node-csr-serving");
    let serving_info = cert_info(&issued_pem(&serving));
    assert_eq!(serving_info.issuer, ca_subject(rig.ca()));
    assert_eq!(serving_info.cn, [format!("system:node:{node}")]);
}

/// Waits until `client`'s `GET /version` gets `want`.
fn wait_status(client: &NodeClient, want: u16, what: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = client.get("/version");
        if status == want {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: /version still answers {status}, not {want}: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn expired_and_deleted_bootstrap_tokens_are_refused_and_tokencleaner_removes_the_expired() {
    if skip() {
        return;
    }
    let first = BootstrapToken::generate();
    let (cp, running, first_kubeconfig) = start(&first);
    let kubectl = &running.kubectl;

    // Two more tokens made on the running cluster as an operator would:
    // rendered by the module, the Secret applied.
    let mut clients = Vec::new();
    for _ in 0..2 {
        let token = BootstrapToken::generate();
        let r = cp
            .render_bootstrap_token(&token, &rfc3339_in(Duration::from_secs(3600)), None)
            .unwrap();
        kubectl.apply_yaml(&r.secret_manifest).unwrap();
        let client = NodeClient::from_kubeconfig(&r.kubeconfig);
        wait_status(&client, 200, "a new token");
        clients.push((token, client));
    }
    let (expiring, expiring_client) = &clients[0];
    let (deleted, deleted_client) = &clients[1];

    kubectl.expire_bootstrap_token(&expiring.id).unwrap();
    let body = wait_status(expiring_client, 401, "an expired token");
    assert_eq!(body["reason"], "Unauthorized", "{body}");
    kubectl.delete_bootstrap_token(&deleted.id).unwrap();
    let body = wait_status(deleted_client, 401, "a deleted token");
    assert_eq!(body["reason"], "Unauthorized", "{body}");

    // tokencleaner deletes the expired token's Secret; the first token,
    // untouched, still works.
    let deadline = Instant::now() + Duration::from_secs(30);
    while kubectl.bootstrap_token_exists(&expiring.id).unwrap() {
        assert!(
            Instant::now() < deadline,
            "tokencleaner left the expired token's Secret:\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(kubectl.bootstrap_token_exists(&first.id).unwrap());
    assert_eq!(
        NodeClient::from_kubeconfig(&first_kubeconfig)
            .get("/version")
            .0,
        200
    );
}
