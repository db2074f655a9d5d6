//! A real Kubernetes control plane for the tests: kube-apiserver,
//! kube-controller-manager, kube-scheduler, kubelet and kubectl of one
//! release built from Debian 12's `kubernetes` source
//! package (`scripts/build-kubernetes.sh`, cached outside the checkout),
//! and Debian's `etcd`.
//!
//! One description of a control plane ([`ControlPlane`]: its PKI, ports,
//! static tokens and API server flags) gives both ways the tests run one:
//! - on the host, as child processes of the test ([`ControlPlane::start`],
//!   [`RunningControlPlane`]), for tests that need a cluster but do not
//!   test its bootstrap (a worker VM joining, the overload test, the
//!   benchmark);
//! - as the bootkube master's assets ([`ControlPlane::bootkube_assets`]):
//!   a `bootkube.sh` that installs etcd, kube-apiserver,
//!   kube-controller-manager and kube-scheduler as systemd units
//!   on the master (static pods would need images no registry here serves)
//!   and exits once the API server is ready, and a `tectonic-wrapper.sh`
//!   that applies the cluster's first manifests with kubectl.
//!
//! Either runs in bootstrap-token mode when [`crate::tls_bootstrap`] turns
//! it on ([`ControlPlane::enable_tls_bootstrap`]): bootstrap token
//! authentication, the controller manager signing node certificates with the
//! cluster CA, and the tokens' Secrets and RBAC as rendered by
//! `terraform/modules/bootstrap-token` among the first manifests.
//!
//! [`Kubectl`] talks to either as the cluster's administrator.

use crate::apiserver::{Issued, KubeAuth, Pki};
use anyhow::{Context as _, Result, bail};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's etcd (package `etcd-server`).
pub const ETCD: &str = "/usr/bin/etcd";

/// The Kubernetes binaries of one release.
#[derive(Debug, Clone)]
pub struct KubeParts {
    pub dir: PathBuf,
    /// `gitVersion` they report, e.g. `v1.20.2`.
    pub version: String,
}

impl KubeParts {
    pub fn kubelet(&self) -> PathBuf {
        self.dir.join("kubelet")
    }
    pub fn kube_apiserver(&self) -> PathBuf {
        self.dir.join("kube-apiserver")
    }
    pub fn kubectl(&self) -> PathBuf {
        self.dir.join("kubectl")
    }
    /// The names of the binaries (what a hyperkube image of this release holds).
    pub const BINARIES: &'static [&'static str] = &[
        "kubelet",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
    ];
}

/// The parts, built (or found in the cache) by `scripts/build-kubernetes.sh`
/// once per test process.
pub fn parts() -> Result<KubeParts> {
    static FOUND: std::sync::OnceLock<std::result::Result<KubeParts, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, build)
}

fn build() -> Result<KubeParts> {
    if !Path::new(ETCD).exists() {
        bail!("{ETCD} is missing (Debian's etcd-server; scripts/setup.sh installs it)");
    }
    let dir = crate::run_build_script("build-kubernetes.sh")?;
    let v = Command::new(dir.join("kubelet"))
        .arg("--version")
        .output()?;
    // "Kubernetes v1.20.2"
    let version = String::from_utf8_lossy(&v.stdout)
        .split_whitespace()
        .nth(1)
        .map(str::to_string)
        .with_context(|| format!("{}/kubelet --version printed no version", dir.display()))?;
    Ok(KubeParts { dir, version })
}

/// Skips the running test (returns `true`) when the real Kubernetes parts
/// cannot be had here (not root, no etcd, the source build failed), saying
/// why; under CI (`CI=true`) it panics instead.
pub fn skip_unless_available() -> bool {
    crate::skip_unless(
        crate::simnode::can_run().and_then(|()| parts().map(drop)),
        "the real Kubernetes parts are not available",
    )
}

/// A free TCP port for a server the rig starts (released at once: the
/// caller binds it soon), below the kernel's ephemeral range.
///
/// Below it, because a rig's servers go down and come back (a master's
/// power cut, an API server's restart): a port of the ephemeral range is
/// the kernel's to hand out meanwhile, as the source port of any outgoing
/// connection on the host (the other nodes' kubelets, kubectl, the agents)
/// or to any `bind(:0)`, and the server that comes back finds its port
/// taken. Ports below the range are given only to an explicit bind: this
/// function's, the only chooser. Never one this process handed out before
/// either: a control plane whose etcd client and peer ports came out alike
/// never starts (etcd: "address already in use"; seen once).
pub fn free_port() -> u16 {
    static NEXT: std::sync::Mutex<Option<u32>> = std::sync::Mutex::new(None);
    let (low, high) = rig_port_range();
    let span = high - low;
    let mut next = NEXT.lock().unwrap_or_else(|e| e.into_inner());
    // Each test process starts at its own place (its pid), so that two
    // running at once rarely meet; the bind below settles it when they do.
    let mut offset = next.unwrap_or(std::process::id().wrapping_mul(7919) % span);
    for _ in 0..span {
        let port = (low + offset % span) as u16;
        offset = (offset + 1) % span;
        // Free for a listener on any address, and for one on loopback.
        let free = std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free {
            *next = Some(offset);
            return port;
        }
    }
    panic!("no free port in {low}..{high}, below the ephemeral range");
}

/// The rig's ports: from 20000 (clear of Kubernetes' own defaults,
/// 10248-10259) up to the start of the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`; 32768 by default), or the top 10000
/// ports where that range starts too low to leave room.
fn rig_port_range() -> (u32, u32) {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    if ephemeral_low >= 22000 {
        (20000, ephemeral_low)
    } else {
        (55536, 65536)
    }
}

/// A static token the API server accepts (`--token-auth-file`).
#[derive(Debug, Clone)]
pub struct StaticToken {
    pub token: String,
    pub user: String,
    pub groups: Vec<String>,
}

impl StaticToken {
    /// A token that authenticates a kubelet as node `node`.
    pub fn for_node(node: &str, token: &str) -> StaticToken {
        StaticToken {
            token: token.into(),
            user: format!("system:node:{node}"),
            groups: vec!["system:nodes".into()],
        }
    }
}

/// The cluster's service network (its first address is the `kubernetes`
/// service, which the API server certificate names) and the cluster DNS
/// address inside it, as Tectonic laid them out.
pub const SERVICE_CIDR: &str = "10.3.0.0/24";
pub const CLUSTER_DNS: &str = "10.3.0.10";

/// A control plane: PKI, ports, tokens and API server flags.
pub struct ControlPlane {
    pub pki: Pki,
    /// `system:masters`: what kubectl, bootkube and tectonic use.
    pub admin: Issued,
    /// What the API server presents to kubelets.
    pub kubelet_client: Issued,
    /// `system:kube-controller-manager` and `system:kube-scheduler`: the
    /// users the default RBAC policy gives those components' rights.
    pub controller_manager: Issued,
    pub scheduler: Issued,
    /// Service account signing key (PKCS#8 PEM) and its public half.
    pub sa_key_pem: String,
    pub sa_pub_pem: String,
    pub apiserver_port: u16,
    pub etcd_client_port: u16,
    pub etcd_peer_port: u16,
    pub tokens: Vec<StaticToken>,
    /// Flags added to kube-apiserver's, each replacing a default of the
    /// same name.
    pub extra_apiserver_args: Vec<String>,
    /// Kubelet TLS bootstrapping (bootstrap tokens, the controller manager
    /// signing with the cluster CA): off unless
    /// [`enable_tls_bootstrap`](Self::enable_tls_bootstrap) turns it on.
    pub tls_bootstrap: Option<crate::tls_bootstrap::TlsBootstrap>,
    /// The pods' addresses: the controller manager gives each Node a `/24`
    /// of it (`--allocate-node-cidrs`), which the rig's network add-on
    /// hands to the node's runtime ([`crate::podnet`]). Every control
    /// plane of a process has its own.
    pub cluster_cidr: String,
}

impl ControlPlane {
    /// A control plane on free loopback ports whose API server certificate
    /// is also valid for `extra_names` (e.g. the address a VM reaches the
    /// host at).
    pub fn new(extra_names: &[&str]) -> ControlPlane {
        let mut names = vec!["10.3.0.1", "kubernetes", "kubernetes.default"];
        names.extend_from_slice(extra_names);
        let pki = Pki::generate_for(&names);
        let admin = pki.issue_client("admin", Some("system:masters"));
        let kubelet_client =
            pki.issue_client("kube-apiserver-kubelet-client", Some("system:masters"));
        let sa = rcgen::KeyPair::generate().expect("service account key");
        ControlPlane {
            admin,
            kubelet_client,
            controller_manager: pki.issue_client("system:kube-controller-manager", None),
            scheduler: pki.issue_client("system:kube-scheduler", None),
            sa_key_pem: sa.serialize_pem(),
            sa_pub_pem: sa.public_key_pem(),
            pki,
            apiserver_port: free_port(),
            etcd_client_port: free_port(),
            etcd_peer_port: free_port(),
            tokens: Vec::new(),
            extra_apiserver_args: Vec::new(),
            tls_bootstrap: None,
            cluster_cidr: crate::podnet::claim_cluster_cidr(),
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.apiserver_port)
    }

    /// A kubeconfig for `server` (default [`url`](Self::url)) as `auth`.
    pub fn kubeconfig(&self, server: Option<&str>, auth: &KubeAuth) -> String {
        self.pki.kubeconfig(server.unwrap_or(&self.url()), auth)
    }

    /// A kubelet's kubeconfig for node `node`, with a client certificate
    /// (`system:node:<node>`, group `system:nodes`).
    pub fn node_kubeconfig(&self, node: &str, server: Option<&str>) -> String {
        let cert = self
            .pki
            .issue_client(&format!("system:node:{node}"), Some("system:nodes"));
        self.kubeconfig(server, &KubeAuth::Cert(cert))
    }

    /// The files the control plane runs from, relative to its directory.
    pub fn files(&self) -> Vec<(String, Vec<u8>, u32)> {
        let tokens: String = self
            .tokens
            .iter()
            .map(|t| {
                format!(
                    "{},{},{},\"{}\"\n",
                    t.token,
                    t.user,
                    t.user,
                    t.groups.join(",")
                )
            })
            .collect();
        let signing_key = self.tls_bootstrap.as_ref().map(|_| {
            (
                "tls/ca.key".to_string(),
                self.pki.ca_key_pem().into_bytes(),
                0o600,
            )
        });
        let mut files = vec![
            (
                "tls/ca.crt".into(),
                self.pki.ca_pem.clone().into_bytes(),
                0o644,
            ),
            (
                "tls/apiserver.crt".into(),
                self.pki.server.cert_pem.clone().into_bytes(),
                0o644,
            ),
            (
                "tls/apiserver.key".into(),
                self.pki.server.key_pem.clone().into_bytes(),
                0o600,
            ),
            (
                "tls/apiserver-kubelet-client.crt".into(),
                self.kubelet_client.cert_pem.clone().into_bytes(),
                0o644,
            ),
            (
                "tls/apiserver-kubelet-client.key".into(),
                self.kubelet_client.key_pem.clone().into_bytes(),
                0o600,
            ),
            (
                "tls/service-account.key".into(),
                self.sa_key_pem.clone().into_bytes(),
                0o600,
            ),
            (
                "tls/service-account.pub".into(),
                self.sa_pub_pem.clone().into_bytes(),
                0o644,
            ),
            (
                "auth/kubeconfig".into(),
                self.kubeconfig(None, &KubeAuth::Cert(self.admin.clone()))
                    .into_bytes(),
                0o600,
            ),
            (
                "auth/controller-manager.kubeconfig".into(),
                self.kubeconfig(None, &KubeAuth::Cert(self.controller_manager.clone()))
                    .into_bytes(),
                0o600,
            ),
            (
                "auth/scheduler.kubeconfig".into(),
                self.kubeconfig(None, &KubeAuth::Cert(self.scheduler.clone()))
                    .into_bytes(),
                0o600,
            ),
            ("auth/tokens.csv".into(), tokens.into_bytes(), 0o600),
        ];
        files.extend(signing_key);
        files
    }

    /// kube-controller-manager's command line (binary `bin`, files in
    /// `dir`): one instance (no leader election), no serving port of its
    /// own (tests run several control planes on one host). Among its
    /// controllers, the node lifecycle controller lifts the not-ready taint
    /// off Ready nodes; the service account controllers sign tokens; the
    /// node IPAM controller gives each Node a pod CIDR of
    /// [`cluster_cidr`](Self::cluster_cidr).
    pub fn controller_manager_args(&self, bin: &str, dir: &str) -> Vec<String> {
        let mut args = vec![
            bin.to_string(),
            format!("--kubeconfig={dir}/auth/controller-manager.kubeconfig"),
            format!("--authentication-kubeconfig={dir}/auth/controller-manager.kubeconfig"),
            format!("--authorization-kubeconfig={dir}/auth/controller-manager.kubeconfig"),
            format!("--service-account-private-key-file={dir}/tls/service-account.key"),
            format!("--root-ca-file={dir}/tls/ca.crt"),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--use-service-account-credentials=true".into(),
            "--leader-elect=false".into(),
            "--port=0".into(),
            "--secure-port=0".into(),
        ];
        args.extend(crate::podnet::controller_manager_args(&self.cluster_cidr));
        if let Some(tb) = &self.tls_bootstrap {
            args.extend(tb.controller_manager_args(dir));
        }
        args
    }

    /// kube-scheduler's command line: one instance, no serving port.
    pub fn scheduler_args(&self, bin: &str, dir: &str) -> Vec<String> {
        vec![
            bin.to_string(),
            format!("--kubeconfig={dir}/auth/scheduler.kubeconfig"),
            format!("--authentication-kubeconfig={dir}/auth/scheduler.kubeconfig"),
            format!("--authorization-kubeconfig={dir}/auth/scheduler.kubeconfig"),
            "--leader-elect=false".into(),
            "--port=0".into(),
            "--secure-port=0".into(),
        ]
    }

    /// etcd's command line, its data in `data_dir`.
    pub fn etcd_args(&self, data_dir: &str) -> Vec<String> {
        let client = format!("http://127.0.0.1:{}", self.etcd_client_port);
        let peer = format!("http://127.0.0.1:{}", self.etcd_peer_port);
        vec![
            ETCD.into(),
            "--name=controller".into(),
            format!("--data-dir={data_dir}"),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=controller={peer}"),
        ]
    }

    /// kube-apiserver's command line: the binary `bin`, its files in `dir`.
    /// Anonymous requests are refused, authorization is Node + RBAC (with
    /// the NodeRestriction admission plugin: a kubelet can only register
    /// and update its own Node), clients authenticate with certificates of
    /// the cluster CA or the static tokens.
    pub fn apiserver_args(&self, bin: &str, dir: &str) -> Vec<String> {
        let mut args = vec![
            bin.to_string(),
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_client_port),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={}", self.apiserver_port),
            "--insecure-port=0".into(),
            format!("--tls-cert-file={dir}/tls/apiserver.crt"),
            format!("--tls-private-key-file={dir}/tls/apiserver.key"),
            format!("--client-ca-file={dir}/tls/ca.crt"),
            format!("--kubelet-client-certificate={dir}/tls/apiserver-kubelet-client.crt"),
            format!("--kubelet-client-key={dir}/tls/apiserver-kubelet-client.key"),
            format!("--service-account-key-file={dir}/tls/service-account.pub"),
            format!("--service-account-signing-key-file={dir}/tls/service-account.key"),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            format!("--service-cluster-ip-range={SERVICE_CIDR}"),
            "--anonymous-auth=false".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--enable-admission-plugins=NodeRestriction".into(),
            "--allow-privileged=true".into(),
            format!("--token-auth-file={dir}/auth/tokens.csv"),
        ];
        if let Some(tb) = &self.tls_bootstrap {
            args.extend(tb.apiserver_args());
        }
        // An extra flag replaces the default of the same name (list flags
        // such as --authorization-mode would otherwise accumulate).
        let name = |a: &str| a.split('=').next().unwrap_or(a).to_string();
        let replaced: Vec<String> = self.extra_apiserver_args.iter().map(|a| name(a)).collect();
        args.retain(|a| !replaced.contains(&name(a)));
        args.extend(self.extra_apiserver_args.iter().cloned());
        args
    }

    /// Runs the control plane on the host (etcd, then kube-apiserver of
    /// `parts`), waiting until the API server is ready.
    pub fn start(&self, parts: &KubeParts) -> Result<RunningControlPlane> {
        self.start_with(parts, true)
    }

    /// etcd and kube-apiserver only, no controller manager nor scheduler:
    /// Nodes whose status a test keeps (no node lifecycle controller marks
    /// them NotReady for want of a kubelet's heartbeats).
    pub fn start_apiserver_only(&self, parts: &KubeParts) -> Result<RunningControlPlane> {
        self.start_with(parts, false)
    }

    fn start_with(&self, parts: &KubeParts, controllers: bool) -> Result<RunningControlPlane> {
        let dir = tempfile::Builder::new()
            .prefix("nb-control-plane-")
            .tempdir_in("/var/tmp")?;
        for (rel, data, mode) in self.files() {
            crate::files::write_mode(&dir.path().join(&rel), &data, mode)?;
        }
        let d = dir.path().display().to_string();
        let etcd = spawn_logged(
            &self.etcd_args(&format!("{d}/etcd")),
            &dir.path().join("etcd.log"),
        )?;
        let mut running = RunningControlPlane {
            children: vec![etcd],
            kubectl: Kubectl::new(&parts.kubectl(), &dir.path().join("auth/kubeconfig")),
            dir,
        };
        let apiserver = spawn_logged(
            &self.apiserver_args(&parts.kube_apiserver().display().to_string(), &d),
            &running.dir.path().join("kube-apiserver.log"),
        )?;
        running.children.push(apiserver);
        running.wait_ready(Duration::from_secs(120))?;
        if let Some(tb) = &self.tls_bootstrap {
            let manifests = running.dir.path().join("manifests");
            for (name, yaml) in &tb.manifests {
                crate::files::write_mode(&manifests.join(name), yaml.as_bytes(), 0o600)?;
            }
            running
                .kubectl
                .apply_path(&manifests)
                .context("applying the bootstrap tokens and their RBAC")?;
        }
        if !controllers {
            return Ok(running);
        }
        let components = [
            (
                self.controller_manager_args(
                    &parts
                        .dir
                        .join("kube-controller-manager")
                        .display()
                        .to_string(),
                    &d,
                ),
                "kube-controller-manager.log",
            ),
            (
                self.scheduler_args(&parts.dir.join("kube-scheduler").display().to_string(), &d),
                "kube-scheduler.log",
            ),
        ];
        for (argv, log) in components {
            let child = spawn_logged(&argv, &running.dir.path().join(log))?;
            running.children.push(child);
        }
        Ok(running)
    }

    /// The bootkube master's assets (relative to `assets_dir` on the node,
    /// e.g. `/opt/tectonic`): the control plane's files, its etcd and
    /// kube-apiserver as systemd units running the binaries of the image
    /// directory `image_dir` (the hyperkube image of the node's local store),
    /// `bootkube.sh`, which installs and starts them and exits once the API
    /// server is ready (later boots start them as enabled units), and
    /// `tectonic-wrapper.sh`, which applies `manifests/` (a namespace and the
    /// runtime mappings config map) with kubectl and checks they exist.
    pub fn bootkube_assets(
        &self,
        assets_dir: &str,
        image_dir: &str,
        runtime_mappings: &str,
    ) -> Vec<(String, Vec<u8>, u32)> {
        let unit = |desc: &str, after: &str, argv: &[String]| {
            format!(
                "# Installed by bootkube.sh (node-bootstrap test assets).\n[Unit]\nDescription={desc}\n{after}\n\
                 [Service]\nExecStart={}\nRestart=always\nRestartSec=2\n\n[Install]\nWantedBy=multi-user.target\n",
                argv.join(" \\\n  ")
            )
        };
        let etcd = unit(
            "etcd for the cluster (bootkube test assets)",
            "",
            &self.etcd_args("/var/lib/kube-etcd"),
        );
        let apiserver = unit(
            "kube-apiserver (bootkube test assets)",
            "Wants=kube-etcd.service\nAfter=kube-etcd.service\n",
            &self.apiserver_args(&format!("{image_dir}/kube-apiserver"), assets_dir),
        );
        let controller_manager = unit(
            "kube-controller-manager (bootkube test assets)",
            "Wants=kube-apiserver.service\nAfter=kube-apiserver.service\n",
            &self.controller_manager_args(
                &format!("{image_dir}/kube-controller-manager"),
                assets_dir,
            ),
        );
        let scheduler = unit(
            "kube-scheduler (bootkube test assets)",
            "Wants=kube-apiserver.service\nAfter=kube-apiserver.service\n",
            &self.scheduler_args(&format!("{image_dir}/kube-scheduler"), assets_dir),
        );
        let kubectl = format!("{image_dir}/kubectl --kubeconfig={assets_dir}/auth/kubeconfig");
        let bootkube = format!(
            r#"#!/bin/bash
# bootkube for the node-bootstrap tests: brings up the control plane that
# these assets describe, etcd and the kube-apiserver, kube-controller-manager
# and kube-scheduler of the hyperkube image in this node's image store, as
# systemd units (static pods would need
# images that no registry here serves), and exits 0 once the API server
# answers /readyz. Idempotent: a run cut short by a power loss is redone.
set -euo pipefail
assets={assets_dir}
units="kube-etcd.service kube-apiserver.service kube-controller-manager.service kube-scheduler.service"
for u in $units; do
    install -m 0644 "$assets/units/$u" /etc/systemd/system/
done
systemctl daemon-reload
systemctl enable $units
systemctl start $units
for _ in $(seq 1 240); do
    if {kubectl} get --raw=/readyz >/dev/null 2>&1; then
        echo "bootkube: the API server is ready"
        exit 0
    fi
    sleep 0.5
done
echo "bootkube: the API server did not become ready in 120 s" >&2
systemctl --no-pager status kube-etcd.service kube-apiserver.service >&2 || true
exit 1
"#
        );
        let tectonic = format!(
            r#"#!/bin/bash
# tectonic for the node-bootstrap tests: applies the cluster's first
# manifests with kubectl (retrying while the API server settles, as
# Tectonic's installer did) and exits once they exist.
set -euo pipefail
assets={assets_dir}
for _ in $(seq 1 60); do
    if {kubectl} apply -f "$assets/manifests/"; then
        {kubectl} -n tectonic-system get configmap tectonic-torcx-runtime-mappings
        echo "tectonic: manifests applied"
        exit 0
    fi
    sleep 1
done
echo "tectonic: could not apply $assets/manifests" >&2
exit 1
"#
        );
        let namespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tectonic-system\n";
        let indented: String = runtime_mappings
            .lines()
            .map(|l| format!("    {l}\n"))
            .collect();
        let config_map = format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tectonic-torcx-runtime-mappings\n  namespace: tectonic-system\ndata:\n  runtime-mappings.yaml: |\n{indented}"
        );
        let mut files = self.files();
        // The bootstrap tokens' Secrets and their RBAC (tectonic-wrapper.sh
        // applies them with the other manifests).
        for (name, yaml) in self.tls_bootstrap.iter().flat_map(|tb| &tb.manifests) {
            files.push((
                format!("manifests/20-{name}"),
                yaml.clone().into_bytes(),
                0o600,
            ));
        }
        files.extend([
            ("units/kube-etcd.service".into(), etcd.into_bytes(), 0o644),
            (
                "units/kube-apiserver.service".into(),
                apiserver.into_bytes(),
                0o644,
            ),
            (
                "units/kube-controller-manager.service".into(),
                controller_manager.into_bytes(),
                0o644,
            ),
            (
                "units/kube-scheduler.service".into(),
                scheduler.into_bytes(),
                0o644,
            ),
            (
                "manifests/00-namespace.yaml".into(),
                namespace.as_bytes().to_vec(),
                0o644,
            ),
            (
                "manifests/10-runtime-mappings.yaml".into(),
                config_map.into_bytes(),
                0o644,
            ),
            ("tectonic-wrapper.sh".into(), tectonic.into_bytes(), 0o755),
            // Last: bootkube.path fires on it.
            ("bootkube.sh".into(), bootkube.into_bytes(), 0o755),
        ]);
        files
    }
}

/// Starts `argv` with stdout and stderr to the file `log`.
fn spawn_logged(argv: &[String], log: &Path) -> Result<Child> {
    let out = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("starting {}", argv[0]))
}

/// A control plane running on the host; stops when dropped.
pub struct RunningControlPlane {
    pub kubectl: Kubectl,
    dir: tempfile::TempDir,
    children: Vec<Child>,
}

impl RunningControlPlane {
    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.kubectl.run(&["get", "--raw=/readyz"]).is_ok() {
                return Ok(());
            }
            for c in &mut self.children {
                if let Some(st) = c.try_wait()? {
                    bail!("a control plane process exited ({st}):\n{}", self.logs());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "the API server was not ready within {timeout:?}:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The tails of etcd's and kube-apiserver's logs.
    pub fn logs(&self) -> String {
        [
            "etcd.log",
            "kube-apiserver.log",
            "kube-controller-manager.log",
            "kube-scheduler.log",
        ]
        .iter()
        .map(|l| {
            let text = std::fs::read_to_string(self.dir.path().join(l)).unwrap_or_default();
            let tail: Vec<_> = text.lines().rev().take(30).collect();
            format!(
                "--- {l} (last lines)\n{}\n",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect()
    }

    /// The kube-apiserver process's id (its CPU time is in
    /// `/proc/<pid>/stat`).
    pub fn apiserver_pid(&self) -> u32 {
        self.children[1].id()
    }

    /// etcd's process id.
    pub fn etcd_pid(&self) -> u32 {
        self.children[0].id()
    }

    /// The API server's log so far.
    pub fn apiserver_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kube-apiserver.log")).unwrap_or_default()
    }
}

impl Drop for RunningControlPlane {
    fn drop(&mut self) {
        for c in self.children.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A Node as `kubectl get node -o json` shows it: what a user checks.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    pub name: String,
    pub ready: bool,
    pub kubelet_version: String,
    pub container_runtime_version: String,
    pub labels: serde_json::Map<String, Value>,
    /// `key=value:effect` of each taint.
    pub taints: Vec<String>,
    /// When its Ready condition last changed (seconds since the epoch, from
    /// the API server's clock, to the second).
    pub ready_since: Option<f64>,
    /// Its `InternalIP` address (`kubectl get nodes -o wide`'s INTERNAL-IP).
    pub internal_ip: Option<String>,
}

impl NodeInfo {
    fn from_json(n: &Value) -> NodeInfo {
        let ready_condition = n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Ready");
        let ready = ready_condition.is_some_and(|c| c["status"] == "True");
        let ready_since = ready_condition
            .and_then(|c| c["lastTransitionTime"].as_str())
            .and_then(rfc3339_epoch_secs);
        NodeInfo {
            name: n["metadata"]["name"].as_str().unwrap_or_default().into(),
            ready,
            kubelet_version: n["status"]["nodeInfo"]["kubeletVersion"]
                .as_str()
                .unwrap_or_default()
                .into(),
            container_runtime_version: n["status"]["nodeInfo"]["containerRuntimeVersion"]
                .as_str()
                .unwrap_or_default()
                .into(),
            labels: n["metadata"]["labels"]
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ready_since,
            internal_ip: n["status"]["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|a| a["type"] == "InternalIP")
                .and_then(|a| a["address"].as_str())
                .map(str::to_string),
            taints: n["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    format!(
                        "{}={}:{}",
                        t["key"].as_str().unwrap_or_default(),
                        t["value"].as_str().unwrap_or_default(),
                        t["effect"].as_str().unwrap_or_default()
                    )
                })
                .collect(),
        }
    }
}

/// kubectl with an administrator's kubeconfig.
#[derive(Debug, Clone)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(bin: &Path, kubeconfig: &Path) -> Kubectl {
        Kubectl {
            bin: bin.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
        }
    }

    /// The administrator's kubeconfig (for another client: `e2e.test`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The kubectl binary.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// kubectl with the kubeconfig, no other argument (for a caller that
    /// reads its output as it comes: a watch).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        c
    }

    /// Runs kubectl (20 s request timeout); stdout on success.
    pub fn run(&self, args: &[&str]) -> Result<String> {
        let out = self
            .command()
            .arg("--request-timeout=20s")
            .args(args)
            .output()
            .with_context(|| format!("running {}", self.bin.display()))?;
        if !out.status.success() {
            bail!(
                "kubectl {args:?} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// `kubectl get nodes -o json`.
    pub fn nodes(&self) -> Result<Vec<NodeInfo>> {
        let v: Value = serde_json::from_str(&self.run(&["get", "nodes", "-o", "json"])?)?;
        Ok(v["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(NodeInfo::from_json)
            .collect())
    }

    /// Waits until every node of `names` is registered and Ready, and the
    /// control plane's node lifecycle controller agrees (no
    /// `node.kubernetes.io/not-ready` or `unreachable` taint left: pods
    /// can be scheduled there); returns all nodes then. On timeout, says
    /// which are missing or not Ready.
    pub fn wait_ready(&self, names: &[&str], timeout: Duration) -> Result<Vec<NodeInfo>> {
        let deadline = Instant::now() + timeout;
        let usable = |x: &NodeInfo| {
            x.ready
                && !x.taints.iter().any(|t| {
                    t.starts_with("node.kubernetes.io/not-ready=")
                        || t.starts_with("node.kubernetes.io/unreachable=")
                })
        };
        loop {
            let nodes = self.nodes();
            if let Ok(nodes) = &nodes
                && names
                    .iter()
                    .all(|n| nodes.iter().any(|x| x.name == *n && usable(x)))
            {
                return Ok(nodes.clone());
            }
            if Instant::now() > deadline {
                let table = self
                    .run(&["get", "nodes", "-o", "wide"])
                    .unwrap_or_else(|e| format!("{e:#}"));
                bail!("nodes {names:?} not all Ready within {timeout:?}:\n{table}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Seconds since the epoch of a UTC RFC 3339 timestamp as the API server
/// writes them (`2026-11-25T07:30:00Z`, `2026-11-25T07:30:00.123456Z`).
pub fn rfc3339_epoch_secs(ts: &str) -> Option<f64> {
    let (date, time) = ts.strip_suffix('Z')?.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<f64> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m) = if d[1] <= 2 {
        (d[0] - 1, d[1] + 9)
    } else {
        (d[0], d[1] - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d[2] - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some(days as f64 * 86400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_server_timestamps_read_as_epoch_seconds() {
        assert_eq!(rfc3339_epoch_secs("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(
            rfc3339_epoch_secs("2000-03-01T00:00:01Z"),
            Some(951_868_801.0)
        );
        assert_eq!(
            rfc3339_epoch_secs("2026-11-25T07:30:00.5Z"),
            Some(1_795_591_800.5)
        );
        assert_eq!(rfc3339_epoch_secs("2026-11-25 07:30:00"), None);
    }
}
