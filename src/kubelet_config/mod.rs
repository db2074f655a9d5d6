//! The kubelet's configuration for the cluster's Kubernetes version: the
//! `KubeletConfiguration` file (`/etc/kubernetes/kubelet-config.yaml`) and
//! the command-line flags that kubelet.env hands to kubelet.service
//! (`KUBELET_ARGS`).
//!
//! What a kubelet takes changed over the years: 1.8 and 1.9 have no file;
//! from 1.10 most settings moved into it and their flags were deprecated;
//! 1.24 removed dockershim and its CNI flags, 1.27 `--container-runtime`,
//! 1.35 `--pod-infra-container-image`. A kubelet exits on a flag it does
//! not know, and drops a file field it does not know (with one warning
//! line), so each setting is passed in the one form its version takes:
//! the field from the version that has it, the flag before, and never a
//! flag a version removed. [`table`] holds the versions, each with its
//! source in Kubernetes' changelog; [`render`] applies them.

pub mod config;
pub mod table;

use crate::error::{Error, Result};
use crate::settings::Paths;
use table::{CONFIG_FILE_SINCE, Key, Minor, NEWEST, OLDEST, row_of};

/// What rendering reads of the agent's config.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a Paths,
    pub settings: &'a config::KubeletConfigSettings,
    /// `cluster.credential` is `bootstrap-token`: the kubelet earns its
    /// own client certificate and rotates it.
    pub tls_bootstrap: bool,
    /// `master` or `bootkube-master`: the master taint by default.
    pub master: bool,
    /// `runtime.sandbox_image` as configured.
    pub sandbox_image: Option<&'a str>,
    /// The sandbox image containerd is configured with (configured, or
    /// containerd's default the agent writes).
    pub containerd_sandbox_image: &'a str,
}

/// The runtime the kubelet talks to, as the flow found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeFacts {
    Docker {
        cgroup_driver: String,
    },
    Containerd {
        socket: String,
        cgroup_driver: String,
    },
}

impl RuntimeFacts {
    pub fn name(&self) -> &'static str {
        match self {
            RuntimeFacts::Docker { .. } => "docker",
            RuntimeFacts::Containerd { .. } => "containerd",
        }
    }

    pub fn cgroup_driver(&self) -> &str {
        match self {
            RuntimeFacts::Docker { cgroup_driver }
            | RuntimeFacts::Containerd { cgroup_driver, .. } => cgroup_driver,
        }
    }
}

impl Inputs<'_> {
    /// What the kubelet runs with on this node, for `runtime`.
    pub fn kubelet_inputs(&self, runtime: &RuntimeFacts, cgroup_v1_host: bool) -> KubeletInputs {
        let p = self.paths;
        let path = |p: &std::path::Path| p.display().to_string();
        let (kubeconfig, bootstrap) = if self.tls_bootstrap {
            (
                path(&p.kubelet_dir.join("kubeconfig")),
                Some(Bootstrap {
                    bootstrap_kubeconfig: path(&p.bootstrap_kubeconfig),
                    cert_dir: path(&p.kubelet_dir.join("pki")),
                }),
            )
        } else {
            (path(&p.kubeconfig), None)
        };
        let endpoint = match runtime {
            RuntimeFacts::Docker { .. } => RuntimeEndpoint::Dockershim {
                sandbox_image: self.sandbox_image.map(str::to_string),
                cni_conf_dir: path(&p.cni_conf_dir),
                cni_bin_dir: path(&p.cni_bin_dir),
            },
            RuntimeFacts::Containerd { socket, .. } => RuntimeEndpoint::Cri {
                endpoint: format!("unix://{socket}"),
                sandbox_image: self.containerd_sandbox_image.to_string(),
            },
        };
        KubeletInputs {
            kubeconfig,
            bootstrap,
            client_ca_file: path(&p.kubelet_client_ca),
            static_pod_path: path(&p.static_pod_dir),
            cluster_dns: self.settings.cluster_dns.clone(),
            cluster_domain: self.settings.cluster_domain.clone(),
            cgroup_driver: runtime.cgroup_driver().to_string(),
            taints: self.settings.taints_for(self.master),
            server_tls_bootstrap: self.settings.server_tls_bootstrap,
            runtime: endpoint,
            cgroup_v1_host,
        }
    }
}

/// Serving certificates through CSRs are beta from here (the field exists
/// from 1.11, alpha: PR #62352); the agent does not offer them to older
/// kubelets.
const SERVER_TLS_BOOTSTRAP_SINCE: Minor = Minor(1, 12);

/// Where the agent writes the file.
pub const CONFIG_FILE: &str = "/etc/kubernetes/kubelet-config.yaml";

/// From here the kubelet's heartbeat is its lease alone (CHANGELOG-1.17.md:
/// NodeLease GA, #84351; the lease is renewed every 10 s whatever the
/// status settings) and it writes its Node's status only when the status
/// changed or after `nodeStatusReportFrequency` (default 5m, #84007). The
/// agent then has the kubelet compute its status every
/// [`NODE_STATUS_UPDATE_FREQUENCY`] instead of every 10 s, so a new node's
/// first Ready is written within that of the kubelet knowing it (the
/// registration's status is nearly always NotReady: the network add-on
/// has not written its CNI list yet), not up to 10 s later. Before 1.17
/// the lease may be off (a feature gate, alpha in 1.12-1.13, beta in
/// 1.14-1.16) and every computed status is written: the defaults stay.
pub const NODE_STATUS_SINCE: Minor = Minor(1, 17);
/// How often the kubelet computes its status (its default: 10s). Each
/// time it reads its Node from the API server's cache; it writes nothing
/// unless the status changed. Not lower: the kubelet also takes it as the
/// timeout of its heartbeat client (cmd/kubelet/app/server.go:
/// `heartbeatClientConfig.Timeout`, the lesser of it and the lease's
/// 40 s), the client of its lease renewals and its status reads and
/// patches (pkg/kubelet/kubelet.go, kubelet_node_status.go), and 2 s
/// leaves a slow API server room that 1 s would not.
pub const NODE_STATUS_UPDATE_FREQUENCY: &str = "2s";
/// How often the kubelet writes an unchanged status: its default from
/// 1.17, set because without it the kubelet would take
/// `nodeStatusUpdateFrequency` (v1beta1/defaults.go) and write its whole
/// Node every 2 s.
pub const NODE_STATUS_REPORT_FREQUENCY: &str = "5m";

/// How the kubelet reaches its container runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEndpoint {
    /// Docker through the kubelet's built-in dockershim (up to 1.23), with
    /// CNI run by the kubelet and the pod sandbox image it names.
    Dockershim {
        /// `--pod-infra-container-image`; `None`: the kubelet's default.
        sandbox_image: Option<String>,
        cni_conf_dir: String,
        cni_bin_dir: String,
    },
    /// A CRI runtime (containerd) at a socket, e.g.
    /// `unix:///run/containerd/containerd.sock`; CNI and the sandbox image
    /// are the runtime's. The kubelet is told the sandbox image too where
    /// it takes `--pod-infra-container-image` (before 1.35), but its image
    /// garbage collector honours the flag only before 1.29 (kubernetes
    /// #118544): from 1.29 only the runtime's pin keeps the image
    /// (containerd labels its `sandbox_image` pinned from 1.6.22 and 1.7.3;
    /// the containerd step warns below that, `container_runtime::version`).
    Cri {
        endpoint: String,
        sandbox_image: String,
    },
}

/// A taint the node registers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl Taint {
    /// Parses the flag's form, `key=value:Effect` or `key:Effect`; the
    /// error says what is wrong (the caller names the field).
    pub fn parse(s: &str) -> std::result::Result<Taint, String> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not a taint (expected key=value:Effect)"))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(format!(
                "{s:?}: effect {effect:?} is not NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        let (key, value) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        let key_ok = !key.is_empty()
            && key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._/".contains(&b));
        let value_ok = value.as_deref().is_none_or(|v| {
            v.len() <= 63
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        });
        if !key_ok || !value_ok {
            return Err(format!("{s:?} is not a taint (expected key=value:Effect)"));
        }
        Ok(Taint {
            key: key.to_string(),
            value,
            effect: effect.to_string(),
        })
    }

    /// The flag's form, which [`Taint::parse`] reads back.
    pub fn flag_form(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={}:{}", self.key, v, self.effect),
            None => format!("{}:{}", self.key, self.effect),
        }
    }
}

/// What the node's kubelet is to run with, whatever its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletInputs {
    /// The kubelet's own kubeconfig: the shared one, or where TLS
    /// bootstrapping writes the one it earns.
    pub kubeconfig: String,
    /// With TLS bootstrapping: the bootstrap-token kubeconfig and where
    /// the kubelet keeps the certificates it earns.
    pub bootstrap: Option<Bootstrap>,
    pub client_ca_file: String,
    pub static_pod_path: String,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    /// `systemd` or `cgroupfs`: the runtime's.
    pub cgroup_driver: String,
    pub taints: Vec<Taint>,
    /// Serving certificates from the cluster's CA through CSRs, which the
    /// cluster must approve (Kubernetes' approver never does).
    pub server_tls_bootstrap: bool,
    pub runtime: RuntimeEndpoint,
    /// The host runs cgroup v1: kubelets from 1.35 refuse it unless told.
    pub cgroup_v1_host: bool,
}

/// TLS bootstrapping: a bootstrap token gets the kubelet its own client
/// certificate, which it then rotates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    pub bootstrap_kubeconfig: String,
    pub cert_dir: String,
}

/// The file (none before 1.10) and the flags, in a fixed order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub file: Option<String>,
    pub flags: Vec<String>,
}

/// Whether the table knows `v`; `allow_newer` lets a version past the
/// table through, rendered by the newest rules it has.
pub fn check_known(v: Minor, allow_newer: bool) -> Result<Minor> {
    if v < OLDEST {
        return Err(Error::refused(format!(
            "Kubernetes {v} is older than the oldest this agent configures ({OLDEST})"
        )));
    }
    if v > NEWEST {
        if !allow_newer {
            return Err(Error::refused(format!(
                "Kubernetes {v} is newer than the newest this agent knows ({NEWEST}): its kubelet \
                 may have removed a flag the agent would pass; set \
                 kubelet_config.allow_newer_kubernetes to proceed with {NEWEST}'s rules"
            )));
        }
        return Ok(NEWEST);
    }
    Ok(v)
}

/// Renders the configuration for a kubelet of `v` (checked by
/// [`check_known`]). Refused when the runtime cannot serve `v` (docker
/// through dockershim from 1.24).
pub fn render(v: Minor, inputs: &KubeletInputs) -> Result<Rendered> {
    let mut out = Out::new(v);
    out.flag_only("--kubeconfig", &inputs.kubeconfig);
    if let Some(b) = &inputs.bootstrap {
        out.flag_only("--bootstrap-kubeconfig", &b.bootstrap_kubeconfig);
        out.flag_only("--cert-dir", &b.cert_dir);
    }
    out.set(Key::ClientCaFile, Value::Str(&inputs.client_ca_file))?;
    out.set(Key::AnonymousAuth, Value::Bool(false))?;
    out.set(Key::WebhookAuthentication, Value::Bool(true))?;
    out.set(Key::AuthorizationMode, Value::Word("Webhook"))?;
    out.set(Key::ReadOnlyPort, Value::Int(0))?;
    out.set(Key::StaticPodPath, Value::Str(&inputs.static_pod_path))?;
    if !inputs.cluster_dns.is_empty() {
        out.set(Key::ClusterDns, Value::List(&inputs.cluster_dns))?;
    }
    out.set(Key::ClusterDomain, Value::Str(&inputs.cluster_domain))?;
    out.set(Key::CgroupDriver, Value::Word(&inputs.cgroup_driver))?;
    if !inputs.taints.is_empty() {
        out.set(Key::RegisterWithTaints, Value::Taints(&inputs.taints))?;
    }
    if inputs.bootstrap.is_some() {
        out.set(Key::RotateCertificates, Value::Bool(true))?;
    }
    if inputs.server_tls_bootstrap {
        if v < SERVER_TLS_BOOTSTRAP_SINCE {
            return Err(Error::refused(format!(
                "serving certificates through TLS bootstrapping need Kubernetes \
                 {SERVER_TLS_BOOTSTRAP_SINCE} or newer (CHANGELOG-1.12.md, #66726); the cluster runs {v}"
            )));
        }
        out.set(Key::ServerTlsBootstrap, Value::Bool(true))?;
    }
    match &inputs.runtime {
        RuntimeEndpoint::Dockershim {
            sandbox_image,
            cni_conf_dir,
            cni_bin_dir,
        } => {
            if !row_of(Key::NetworkPlugin).flag_at(v) {
                return Err(Error::refused(format!(
                    "Kubernetes {v} has no dockershim (removed in 1.24): its kubelet cannot run pods on docker"
                )));
            }
            out.set(Key::NetworkPlugin, Value::Word("cni"))?;
            out.set(Key::CniConfDir, Value::Str(cni_conf_dir))?;
            out.set(Key::CniBinDir, Value::Str(cni_bin_dir))?;
            if let Some(image) = sandbox_image {
                out.set(Key::PodInfraContainerImage, Value::Str(image))?;
            }
        }
        RuntimeEndpoint::Cri {
            endpoint,
            sandbox_image,
        } => {
            if row_of(Key::ContainerRuntime).flag_at(v) {
                out.set(Key::ContainerRuntime, Value::Word("remote"))?;
            }
            out.set(Key::ContainerRuntimeEndpoint, Value::Str(endpoint))?;
            if row_of(Key::PodInfraContainerImage).flag_at(v) {
                out.set(Key::PodInfraContainerImage, Value::Str(sandbox_image))?;
            }
        }
    }
    if inputs.cgroup_v1_host && row_of(Key::FailCgroupV1).field_at(v) {
        out.set(Key::FailCgroupV1, Value::Bool(false))?;
    }
    if v >= NODE_STATUS_SINCE {
        out.set(
            Key::NodeStatusUpdateFrequency,
            Value::Word(NODE_STATUS_UPDATE_FREQUENCY),
        )?;
        // Never one without the other (NODE_STATUS_REPORT_FREQUENCY).
        out.set(
            Key::NodeStatusReportFrequency,
            Value::Word(NODE_STATUS_REPORT_FREQUENCY),
        )?;
    }
    out.finish()
}

/// A setting's value, in the one shape both forms can take.
#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Bool(bool),
    Int(i64),
    /// A plain word (an enum value): unquoted in the file.
    Word(&'a str),
    Str(&'a str),
    List(&'a [String]),
    Taints(&'a [Taint]),
}

impl Value<'_> {
    /// The flag's form, which [`Taint::parse`] reads back.
    pub fn flag_form(&self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Word(s) | Value::Str(s) => s.to_string(),
            Value::List(l) => l.join(","),
            Value::Taints(t) => t.iter().map(Taint::flag_form).collect::<Vec<_>>().join(","),
        }
    }

    /// The value as YAML after `key:`, at `indent` for nested lines.
    fn yaml_form(&self, indent: &str) -> String {
        let quote = |s: &str| serde_json::to_string(s).expect("a string serializes");
        match self {
            Value::Bool(b) => format!(" {b}"),
            Value::Int(i) => format!(" {i}"),
            Value::Word(s) => format!(" {s}"),
            Value::Str(s) => format!(" {}", quote(s)),
            Value::List(l) => l
                .iter()
                .map(|s| format!("\n{indent}- {}", quote(s)))
                .collect(),
            Value::Taints(t) => t
                .iter()
                .map(|t| {
                    let value = t
                        .value
                        .as_ref()
                        .map(|v| format!("\n{indent}  value: {}", quote(v)))
                        .unwrap_or_default();
                    format!(
                        "\n{indent}- key: {}{value}\n{indent}  effect: {}",
                        quote(&t.key),
                        t.effect
                    )
                })
                .collect(),
        }
    }
}

/// The file's fields (path, value) and the flags, as they are decided.
struct Out<'a> {
    v: Minor,
    fields: Vec<(&'static str, Value<'a>)>,
    flags: Vec<String>,
}

impl<'a> Out<'a> {
    fn new(v: Minor) -> Self {
        Out {
            v,
            fields: Vec::new(),
            flags: Vec::new(),
        }
    }

    fn flag_only(&mut self, flag: &str, value: &str) {
        self.flags.push(format!("{flag}={value}"));
    }

    fn set(&mut self, key: Key, value: Value<'a>) -> Result<()> {
        let row = row_of(key);
        if row.field_at(self.v) && self.v >= CONFIG_FILE_SINCE {
            self.fields
                .push((row.field.expect("field_at implies a field"), value));
        } else if row.flag_at(self.v) {
            let flag = row.flag.expect("flag_at implies a flag");
            self.flags.push(format!("{flag}={}", value.flag_form()));
        } else {
            return Err(Error::internal(format!(
                "the kubelet of Kubernetes {} takes {key:?} neither as a field nor as a flag",
                self.v
            )));
        }
        Ok(())
    }

    fn finish(self) -> Result<Rendered> {
        // kubelet.service passes the flags as `$KUBELET_ARGS`, split at
        // whitespace: a value with a space would become two arguments.
        if let Some(f) = self
            .flags
            .iter()
            .find(|f| f.chars().any(char::is_whitespace))
        {
            return Err(Error::config(format!(
                "the kubelet flag {f:?} holds whitespace, which kubelet.service cannot pass as one \
                 argument (a path or setting with a space?)"
            )));
        }
        Ok(self.finish_checked())
    }

    fn finish_checked(mut self) -> Rendered {
        if self.v < CONFIG_FILE_SINCE {
            return Rendered {
                file: None,
                flags: self.flags,
            };
        }
        self.flags.insert(0, format!("--config={CONFIG_FILE}"));
        Rendered {
            file: Some(yaml(self.v, &self.fields)),
            flags: self.flags,
        }
    }
}

/// The file: fields in the order they were set, nested by their dotted
/// paths (a path's parents come out once, where it first appears).
fn yaml(v: Minor, fields: &[(&'static str, Value)]) -> String {
    let mut out = format!(
        "# Written by node-bootstrap for Kubernetes {v}; replaced on the next bootstrap.\n\
         apiVersion: kubelet.config.k8s.io/v1beta1\n\
         kind: KubeletConfiguration\n"
    );
    let mut open: Vec<&str> = Vec::new();
    for (path, value) in fields {
        let parts: Vec<&str> = path.split('.').collect();
        let (leaf, parents) = parts.split_last().expect("a path has a leaf");
        let shared = open.iter().zip(parents).take_while(|(a, b)| a == b).count();
        open.truncate(shared);
        for (depth, p) in parents.iter().enumerate().skip(shared) {
            out.push_str(&format!("{}{p}:\n", "  ".repeat(depth)));
            open.push(p);
        }
        let indent = "  ".repeat(parents.len());
        out.push_str(&format!("{indent}{leaf}:{}\n", value.yaml_form(&indent)));
    }
    out
}

#[cfg(test)]
mod tests;
