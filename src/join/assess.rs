//! What the API server's objects say of this node's join: the pure
//! reading of its Node object and of the certificate signing requests
//! made for it.

use base64::Engine as _;
use serde_json::Value;
use x509_parser::prelude::FromDer as _;

/// The signer a kubelet's client certificate request names.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The taint a node carries until its kubelet reports Ready (what the
/// scheduler waits on).
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Where the node stands in its cluster.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum JoinState {
    /// TLS bootstrapping: the kubelet has no certificate of its own yet.
    AwaitingCertificate {
        /// The newest request for this node, if any.
        csr: Option<CsrView>,
    },
    /// The kubelet has an identity but the cluster has no Node of its name.
    NotRegistered,
    /// The Node exists; `ready` only once its Ready condition is True and
    /// the not-ready taint is gone (pods can be scheduled).
    Registered(NodeView),
}

impl JoinState {
    pub fn is_ready(&self) -> bool {
        matches!(self, JoinState::Registered(n) if n.ready)
    }

    /// One word for metrics and logs.
    pub fn name(&self) -> &'static str {
        match self {
            JoinState::AwaitingCertificate { csr: None } => "no-certificate-request",
            JoinState::AwaitingCertificate { csr: Some(c) } => match c.state {
                CsrState::Pending => "certificate-pending",
                CsrState::Denied => "certificate-denied",
                CsrState::Failed => "certificate-failed",
                CsrState::Issued => "certificate-issued",
            },
            JoinState::NotRegistered => "not-registered",
            JoinState::Registered(n) if n.ready => "ready",
            JoinState::Registered(_) => "not-ready",
        }
    }

    /// Every [`name`](Self::name), for the metric's series.
    pub const NAMES: [&'static str; 8] = [
        "no-certificate-request",
        "certificate-pending",
        "certificate-denied",
        "certificate-failed",
        "certificate-issued",
        "not-registered",
        "not-ready",
        "ready",
    ];
}

/// A certificate signing request, as far as the join goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CsrView {
    pub name: String,
    pub state: CsrState,
    /// The approver's or denier's reason and message.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CsrState {
    /// Nobody approved or denied it yet.
    Pending,
    Denied,
    /// Approved, but the signer failed.
    Failed,
    /// Approved and signed.
    Issued,
}

/// The Node object, as far as the join goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeView {
    pub name: String,
    pub ready: bool,
    /// The Ready condition's reason and message when it is not True.
    pub not_ready_because: Option<String>,
    pub kubelet_version: String,
    /// e.g. `containerd://1.6.20`, `docker://20.10.24`.
    pub container_runtime: String,
}

/// Reads a Node object (`GET /api/v1/nodes/<name>`).
pub fn node_view(node: &Value) -> NodeView {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let conditions = node["status"]["conditions"].as_array();
    let ready_condition = conditions.and_then(|c| c.iter().find(|c| c["type"] == "Ready"));
    let condition_true = ready_condition.is_some_and(|c| c["status"] == "True");
    let not_ready_taint = node["spec"]["taints"]
        .as_array()
        .is_some_and(|t| t.iter().any(|t| t["key"] == NOT_READY_TAINT));
    let not_ready_because = if condition_true && not_ready_taint {
        Some(format!("still tainted {NOT_READY_TAINT}"))
    } else if condition_true {
        None
    } else {
        Some(match ready_condition {
            Some(c) => format!("{}: {}", s(&c["reason"]), s(&c["message"])),
            None => "no Ready condition reported yet".to_string(),
        })
    };
    NodeView {
        name: s(&node["metadata"]["name"]),
        ready: not_ready_because.is_none(),
        not_ready_because,
        kubelet_version: s(&node["status"]["nodeInfo"]["kubeletVersion"]),
        container_runtime: s(&node["status"]["nodeInfo"]["containerRuntimeVersion"]),
    }
}

/// The newest kubelet client certificate request for `node_name` in a
/// CSR list (`GET /apis/certificates.k8s.io/v1/certificatesigningrequests`):
/// the one whose request's subject is `CN=system:node:<name>`.
pub fn newest_csr_for(list: &Value, node_name: &str) -> Option<CsrView> {
    let wanted = format!("system:node:{node_name}");
    let items = list["items"].as_array()?;
    items
        .iter()
        .filter(|csr| csr["spec"]["signerName"] == KUBELET_CLIENT_SIGNER)
        .filter(|csr| {
            csr["spec"]["request"]
                .as_str()
                .and_then(request_common_name)
                .is_some_and(|cn| cn == wanted)
        })
        .max_by_key(|csr| {
            csr["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .map(csr_view)
}

fn csr_view(csr: &Value) -> CsrView {
    let conditions = csr["status"]["conditions"].as_array();
    let find = |t: &str| conditions.and_then(|c| c.iter().find(|c| c["type"] == t));
    let because = |c: &Value| {
        let r = c["reason"].as_str().unwrap_or_default();
        let m = c["message"].as_str().unwrap_or_default();
        Some(format!("{r}: {m}").trim_matches([':', ' ']).to_string()).filter(|s| !s.is_empty())
    };
    let (state, reason) = if let Some(c) = find("Denied") {
        (CsrState::Denied, because(c))
    } else if let Some(c) = find("Failed") {
        (CsrState::Failed, because(c))
    } else if let Some(c) = find("Approved") {
        let signed = csr["status"]["certificate"]
            .as_str()
            .is_some_and(|c| !c.is_empty());
        (
            if signed {
                CsrState::Issued
            } else {
                CsrState::Pending
            },
            because(c),
        )
    } else {
        (CsrState::Pending, None)
    };
    CsrView {
        name: csr["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        state,
        reason,
    }
}

/// The subject CN of a CSR's `spec.request` (base64 of a PEM
/// `CERTIFICATE REQUEST`).
fn request_common_name(b64: &str) -> Option<String> {
    let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    let (_, req) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .ok()?;
    let subject = &req.certification_request_info.subject;
    let cn = subject.iter_common_name().next()?.as_str().ok()?;
    Some(cn.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, taints: Value) -> Value {
        json!({
            "metadata": {"name": "worker-1"},
            "spec": {"taints": taints},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": ready, "reason": "KubeletNotReady",
                     "message": "container runtime network not ready"}
                ],
                "nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": "containerd://1.6.20"}
            }
        })
    }

    #[test]
    fn a_node_is_ready_once_its_condition_is_true_and_the_taint_is_gone() {
        let v = node_view(&node("True", json!([])));
        assert!(v.ready);
        assert_eq!(v.kubelet_version, "v1.20.2");
        assert_eq!(v.container_runtime, "containerd://1.6.20");
        let tainted = node_view(&node(
            "True",
            json!([{"key": NOT_READY_TAINT, "effect": "NoSchedule"}]),
        ));
        assert!(!tainted.ready);
        assert_eq!(
            tainted.not_ready_because.as_deref(),
            Some("still tainted node.kubernetes.io/not-ready")
        );
        let not_ready = node_view(&node("False", json!(null)));
        assert!(!not_ready.ready);
        assert_eq!(
            not_ready.not_ready_because.as_deref(),
            Some("KubeletNotReady: container runtime network not ready")
        );
        assert_eq!(JoinState::Registered(not_ready).name(), "not-ready");
        let bare = node_view(&json!({"metadata": {"name": "w"}}));
        assert_eq!(
            bare.not_ready_because.as_deref(),
            Some("no Ready condition reported yet")
        );
    }

    fn csr_request(cn: &str) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:nodes");
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr(name: &str, cn: &str, created: &str, status: Value) -> Value {
        json!({
            "metadata": {"name": name, "creationTimestamp": created},
            "spec": {"signerName": KUBELET_CLIENT_SIGNER, "request": csr_request(cn),
                     "username": "system:bootstrap:abcdef"},
            "status": status
        })
    }

    #[test]
    fn the_newest_request_for_this_node_tells_where_its_certificate_is() {
        let list = json!({"items": [
            csr("csr-old", "system:node:worker-1", "2026-11-26T10:00:00Z",
                json!({"conditions": [{"type": "Denied", "reason": "NotOurs", "message": "no"}]})),
            csr("csr-other", "system:node:worker-2", "2026-11-26T12:00:00Z", json!({})),
            csr("csr-new", "system:node:worker-1", "2026-11-26T11:00:00Z", json!({})),
        ]});
        let view = newest_csr_for(&list, "worker-1").unwrap();
        assert_eq!(view.name, "csr-new");
        assert_eq!(view.state, CsrState::Pending);
        let state = JoinState::AwaitingCertificate { csr: Some(view) };
        assert_eq!(state.name(), "certificate-pending");

        let denied = json!({"items": [csr("csr-d", "system:node:worker-1", "2026-11-26T10:00:00Z",
            json!({"conditions": [{"type": "Denied", "reason": "AutoDenied", "message": "not for you"}]}))]});
        let view = newest_csr_for(&denied, "worker-1").unwrap();
        assert_eq!(view.state, CsrState::Denied);
        assert_eq!(view.reason.as_deref(), Some("AutoDenied: not for you"));

        let issued = json!({"items": [csr("csr-i", "system:node:worker-1", "2026-11-26T10:00:00Z",
            json!({"conditions": [{"type": "Approved", "reason": "AutoApproved", "message": ""}],
                   "certificate": "LS0t"}))]});
        assert_eq!(
            newest_csr_for(&issued, "worker-1").unwrap().state,
            CsrState::Issued
        );
        assert_eq!(newest_csr_for(&issued, "worker-9"), None);
    }

    #[test]
    fn requests_for_other_signers_or_unreadable_ones_are_not_this_nodes() {
        let mut serving = csr(
            "csr-s",
            "system:node:worker-1",
            "2026-11-26T10:00:00Z",
            json!({}),
        );
        serving["spec"]["signerName"] = json!("kubernetes.io/kubelet-serving");
        let mut garbage = csr(
            "csr-g",
            "system:node:worker-1",
            "2026-11-26T10:00:00Z",
            json!({}),
        );
        garbage["spec"]["request"] = json!("bm90IGEgQ1NS");
        let list = json!({"items": [serving, garbage]});
        assert_eq!(newest_csr_for(&list, "worker-1"), None);
    }

    #[test]
    fn every_state_name_is_listed() {
        let names: Vec<&str> = [
            JoinState::AwaitingCertificate { csr: None },
            JoinState::NotRegistered,
        ]
        .iter()
        .map(JoinState::name)
        .collect();
        for n in names {
            assert!(JoinState::NAMES.contains(&n), "{n}");
        }
    }
}
