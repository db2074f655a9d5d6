//! What the host tier's tests of kubelet TLS bootstrapping share: HTTPS to
//! the real API server as a node sends it ([`NodeClient`], from a
//! kubeconfig: its CA and a bearer token or a client certificate), and
//! certificate signing requests made, waited for and read as a kubelet
//! makes them.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use testkit::kube::RunningControlPlane;

/// The signer of a kubelet's client certificate requests.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The usages a 1.20 kubelet asks for.
pub const CLIENT_USAGES: [&str; 3] = ["digital signature", "key encipherment", "client auth"];

/// What a node sends: HTTPS to the API server with a kubeconfig's CA and
/// credentials (a bearer token or a client certificate).
pub struct NodeClient {
    server: String,
    token: Option<String>,
    client: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

pub fn b64d(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

impl NodeClient {
    pub fn from_kubeconfig(yaml: &str) -> NodeClient {
        let kc: Value = serde_saphyr::from_str(yaml).expect("a kubeconfig");
        let cluster = &kc["clusters"][0]["cluster"];
        let user = &kc["users"][0]["user"];
        let ca = b64d(cluster["certificate-authority-data"].as_str().unwrap());
        let mut b = reqwest::Client::builder()
            .tls_certs_only(reqwest::Certificate::from_pem_bundle(&ca).unwrap())
            .timeout(Duration::from_secs(20))
            .no_proxy();
        if let Some(cert) = user["client-certificate-data"].as_str() {
            let mut pem = b64d(cert);
            pem.extend(b64d(user["client-key-data"].as_str().unwrap()));
            b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
        }
        NodeClient {
            server: cluster["server"].as_str().unwrap().to_string(),
            token: user["token"].as_str().map(str::to_string),
            client: b.build().unwrap(),
            rt: testkit::runtime(),
        }
    }

    /// `METHOD path` with an optional JSON body (a PATCH is a merge
    /// patch): the status and the body as JSON (null if it is not).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .client
            .request(method.clone(), format!("{}{path}", self.server));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            let ct = if method == reqwest::Method::PATCH {
                "application/merge-patch+json"
            } else {
                "application/json"
            };
            req = req.header("Content-Type", ct).body(b.to_string());
        }
        self.rt.block_on(async {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            let text = resp.text().await.unwrap_or_default();
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }
}

/// A kubeconfig for `server` that presents a client certificate.
pub fn cert_kubeconfig(server: &str, ca_pem: &str, cert_pem: &str, key_pem: &str) -> String {
    use base64::Engine as _;
    let e = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\n\
         users:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n",
        e(ca_pem),
        e(cert_pem),
        e(key_pem)
    )
}

/// A certificate request (PEM) and its new key (PEM): `CN`, `O`, DNS
/// names.
pub fn csr(cn: &str, org: &str, dns: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p =
        rcgen::CertificateParams::new(dns.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    (
        p.serialize_request(&key).unwrap().pem().unwrap(),
        key.serialize_pem(),
    )
}

pub const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// Creates CSR `name` as `client` (201 expected) and returns what the API
/// server made of it.
pub fn create_csr(
    client: &NodeClient,
    name: &str,
    request_pem: &str,
    signer: &str,
    usages: &[&str],
) -> Value {
    use base64::Engine as _;
    let body = json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request_pem),
            "signerName": signer,
            "usages": usages,
        },
    });
    let (status, created) = client.call("POST", CSRS, Some(&body));
    assert_eq!(status, 201, "creating CSR {name}: {created}");
    created
}

/// Waits (as the creator, who may read its CSR) until CSR `name` carries a
/// certificate; returns the CSR. Fails on a Denied or Failed condition.
pub fn wait_issued(client: &NodeClient, running: &RunningControlPlane, name: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, csr) = client.get(&format!("{CSRS}/{name}"));
        assert_eq!(status, 200, "reading CSR {name}: {csr}");
        if csr["status"]["certificate"].is_string() {
            return csr;
        }
        let conditions = csr["status"]["conditions"].as_array().cloned();
        for c in conditions.iter().flatten() {
            assert!(
                c["type"] != "Denied" && c["type"] != "Failed",
                "CSR {name}: {c}"
            );
        }
        assert!(
            Instant::now() < deadline,
            "CSR {name} was not approved and signed within 60 s: {csr}\n{}",
            running.logs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The certificate an issued CSR carries (PEM).
pub fn issued_pem(csr: &Value) -> String {
    String::from_utf8(b64d(csr["status"]["certificate"].as_str().unwrap())).unwrap()
}
