//! Asking the API server where this node stands (the I/O beside
//! [`super::assess`], which reads the answers).
//!
//! Who asks: the node's own identity once the kubelet has one; with
//! `cluster.credential` `bootstrap-token` that is the kubeconfig the
//! kubelet writes when its first certificate request is signed
//! (`<paths.kubelet_dir>/kubeconfig`), with `kubeconfig` the shared
//! kubeconfig the kubelet uses as it is. While the kubelet has none yet,
//! the bootstrap token asks where its certificate request stands (the
//! `system:node-bootstrapper` role lets it list requests; it may not read
//! Nodes).
//!
//! What is asked: `GET /api/v1/nodes/<name>` (the node's own Node: a 404
//! means not registered), or the list of certificate signing requests
//! (`certificates.k8s.io/v1`, Kubernetes 1.19 and newer), whose newest
//! kubelet client request for `CN=system:node:<name>` tells pending,
//! denied, failed or issued. `<name>` is the kubelet's node name
//! ([`super::node_name`]); the `CN=system:node:<name>` of the certificate
//! the question goes with, when there is one, overrides it.
//!
//! One request or two, bounded by the given timeout; nothing is retried
//! here (the watch asks again on its own schedule, `status` once). An
//! answer that cannot be had is an [`Observation`] with an error, never a
//! failure of the caller.

use super::assess::{self, JoinState};
use crate::cluster::apiclient::ApiClient;
use crate::cluster::config::{ClusterSettings, Credential};
use crate::cluster::kubeconfig::{self, Kubeconfig};
use crate::error::{Error, Result};
use crate::settings::Paths;
use serde::Serialize;
use std::time::Duration;

/// The certificate signing requests, as a bootstrapper lists them.
const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// What the join's view reads of the agent's config.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a Paths,
    pub cluster: &'a ClusterSettings,
}

impl Inputs<'_> {
    /// The kubeconfig the kubelet writes once TLS bootstrapping earned it
    /// a certificate (`--kubeconfig` with a bootstrap token).
    pub fn kubelet_kubeconfig(&self) -> std::path::PathBuf {
        self.paths.kubelet_dir.join("kubeconfig")
    }
}

/// Whose identity the question went with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskedAs {
    /// The kubelet's own certificate (its kubeconfig under `kubelet_dir`).
    Kubelet,
    /// The shared kubeconfig (`cluster.credential` `kubeconfig`).
    Kubeconfig,
    /// The bootstrap token, before the kubelet has a certificate.
    BootstrapToken,
}

impl AskedAs {
    pub fn name(self) -> &'static str {
        match self {
            AskedAs::Kubelet => "kubelet",
            AskedAs::Kubeconfig => "kubeconfig",
            AskedAs::BootstrapToken => "bootstrap-token",
        }
    }
}

/// One look at the node from the API server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// The name asked about.
    pub node_name: String,
    pub asked_as: AskedAs,
    /// The kubeconfig the question went with.
    pub kubeconfig: String,
    /// The bootstrap token's id, when it asked (never its secret).
    pub bootstrap_token_id: Option<String>,
    /// What the answers say; `None` when there were none (`error`).
    pub state: Option<JoinState>,
    /// Why there is no answer (unreachable, refused, unreadable files).
    pub error: Option<String>,
}

impl Observation {
    /// [`JoinState::name`], or `unknown` without an answer.
    pub fn state_name(&self) -> &'static str {
        self.state.as_ref().map_or(UNKNOWN, JoinState::name)
    }

    pub fn is_ready(&self) -> bool {
        self.state.as_ref().is_some_and(JoinState::is_ready)
    }

    /// The state in words, for logs, `status` and the unit's `STATUS=`.
    pub fn describe(&self) -> String {
        let name = &self.node_name;
        match (&self.state, &self.error) {
            (_, Some(e)) => format!("node {name}: cannot tell ({e})"),
            (None, None) => format!("node {name}: not asked"),
            (Some(s), None) => format!("node {name}: {}", describe_state(s)),
        }
    }
}

/// The state name of an observation without an answer.
pub const UNKNOWN: &str = "unknown";

/// A join state in words.
pub fn describe_state(s: &JoinState) -> String {
    match s {
        JoinState::AwaitingCertificate { csr: None } => {
            "the kubelet has no certificate yet and no certificate request for this node exists"
                .into()
        }
        JoinState::AwaitingCertificate { csr: Some(c) } => {
            let why = c
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            match c.state {
                assess::CsrState::Pending => format!(
                    "certificate request {} pending (nobody approved it yet; `kubectl certificate approve {}`, or the auto-approval RBAC)",
                    c.name, c.name
                ),
                assess::CsrState::Denied => format!("certificate request {} denied{why}", c.name),
                assess::CsrState::Failed => {
                    format!(
                        "certificate request {} approved but not signed{why}",
                        c.name
                    )
                }
                assess::CsrState::Issued => format!(
                    "certificate request {} issued; the kubelet has not written its kubeconfig yet",
                    c.name
                ),
            }
        }
        JoinState::NotRegistered => "not registered (the cluster has no Node of this name)".into(),
        JoinState::Registered(n) if n.ready => format!(
            "Ready (kubelet {}, {})",
            n.kubelet_version, n.container_runtime
        ),
        JoinState::Registered(n) => format!(
            "registered, not Ready: {} (kubelet {}, {})",
            n.not_ready_because.as_deref().unwrap_or("not ready"),
            n.kubelet_version,
            n.container_runtime
        ),
    }
}

/// Asks the API server about the node named `name_hint` (see the module
/// docs for who asks and what), each request bounded by `timeout`.
pub async fn observe(inputs: &Inputs<'_>, name_hint: &str, timeout: Duration) -> Observation {
    let own = inputs.kubelet_kubeconfig();
    let (asked_as, path) = match inputs.cluster.credential {
        Credential::BootstrapToken if own.exists() => (AskedAs::Kubelet, own),
        Credential::BootstrapToken => (
            AskedAs::BootstrapToken,
            inputs.paths.bootstrap_kubeconfig.clone(),
        ),
        Credential::Kubeconfig => (AskedAs::Kubeconfig, inputs.paths.kubeconfig.clone()),
    };
    let mut obs = Observation {
        node_name: name_hint.to_string(),
        asked_as,
        kubeconfig: path.display().to_string(),
        bootstrap_token_id: None,
        state: None,
        error: None,
    };
    let kc = match asked_as {
        AskedAs::BootstrapToken => {
            crate::cluster::credential::load(inputs.paths, Credential::BootstrapToken)
        }
        _ => kubeconfig::load(&path),
    };
    let answer = async {
        let kc = kc?;
        if let Some(name) = node_name_of(&kc) {
            obs.node_name = name;
        }
        obs.bootstrap_token_id = (asked_as == AskedAs::BootstrapToken)
            .then(|| kc.credentials.bootstrap_token_id().map(str::to_string))
            .flatten();
        let client = ApiClient::new(&kc, timeout)?;
        ask(&client, asked_as, &obs.node_name).await
    };
    match answer.await {
        Ok(state) => obs.state = Some(state),
        Err(e) => obs.error = Some(e.to_string()),
    }
    obs
}

/// The questions for one identity.
async fn ask(client: &ApiClient, asked_as: AskedAs, name: &str) -> Result<JoinState> {
    if asked_as == AskedAs::BootstrapToken {
        let list = client.get_json(CSRS).await?.ok_or_else(|| {
            Error::refused(format!(
                "the API server serves no {CSRS} (certificates.k8s.io/v1: Kubernetes 1.19 and newer)"
            ))
        })?;
        return Ok(JoinState::AwaitingCertificate {
            csr: assess::newest_csr_for(&list, name),
        });
    }
    let path = format!("/api/v1/nodes/{}", percent_encode(name));
    Ok(match client.get_json(&path).await? {
        Some(node) => JoinState::Registered(assess::node_view(&node)),
        None => JoinState::NotRegistered,
    })
}

/// `<name>` of a client certificate's `CN=system:node:<name>`.
pub(crate) fn node_name_of(kc: &Kubeconfig) -> Option<String> {
    let pem = &kc.credentials.client_cert.as_ref()?.cert_pem;
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).ok()?;
    let cert = block.parse_x509().ok()?;
    let cn = cert.subject().iter_common_name().next()?.as_str().ok()?;
    cn.strip_prefix("system:node:")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// A node name as one path segment (names are DNS subdomains; anything
/// else is escaped rather than trusted).
pub(crate) fn percent_encode(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_certificates_cn_names_the_node() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(rcgen::DnType::CommonName, "system:node:worker-7");
        let cert = p.self_signed(&key).unwrap();
        let kc = Kubeconfig {
            path: "/k".into(),
            context: String::new(),
            cluster_name: String::new(),
            user_name: String::new(),
            server: url::Url::parse("https://a").unwrap(),
            ca_pem: Vec::new(),
            ca_source: String::new(),
            proxy_url: None,
            credentials: kubeconfig::Credentials {
                client_cert: Some(kubeconfig::ClientCert {
                    cert_pem: cert.pem().into_bytes(),
                    key_pem: key.serialize_pem().into_bytes(),
                }),
                token: None,
                basic: None,
            },
        };
        assert_eq!(node_name_of(&kc).as_deref(), Some("worker-7"));
        assert_eq!(percent_encode("worker-7.example"), "worker-7.example");
        assert_eq!(percent_encode("a/b"), "a%2Fb");
    }
}
