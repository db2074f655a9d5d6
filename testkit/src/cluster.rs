//! A real Kubernetes cluster of simulated nodes, provisioned as operators
//! provision theirs and bootstrapped by the real agent:
//!
//! - every node's Ignition config is rendered by `terraform/modules/ignition`
//!   (real terraform) and applied to the node ([`crate::ignition::apply`]):
//!   the agent (fetched and checked against its SHA-512), its config, the
//!   seed kubelet.env, the runtime mappings, the keyring, the kubeconfig,
//!   the kubelet's client CA, the units and kubelet's per-role drop-in;
//! - the OS image is a Container Linux one for docker: the real
//!   torcx-generator, a vendor docker that is not the one the cluster wants,
//!   and the kubelet-wrapper stand-in with the real kubelet of the
//!   cluster's release as image `quay.io/coreos/hyperkube:<version>` of its
//!   local store (a wrong tag finds no image); or, for a node of
//!   [`NodeSpec::on_flatcar`], today's Flatcar: its os-release, no torcx, no
//!   kubelet-wrapper, containerd (Debian's, standing in for the OS's) and
//!   the kubelet sysext from the rig's signed mirror, which the agent's
//!   default `kubelet.backend` (`auto`) takes;
//! - the docker addon's mirror serves the real docker as a torcx image
//!   ([`crate::docker_image`]) under a signed package manifest, and the
//!   runtime mappings send Kubernetes 1.20 to it;
//! - the bootkube master's assets ([`crate::kube::ControlPlane::bootkube_assets`])
//!   bring up etcd and kube-apiserver on it; workers find that API server;
//! - with a worker of [`Auth::BootstrapToken`], the control plane runs in
//!   bootstrap-token mode ([`crate::tls_bootstrap`]): one token rendered by
//!   `terraform/modules/bootstrap-token`, its Secret and the RBAC among
//!   the master's first manifests, the API server's and the controller
//!   manager's flags in its units, certificates signed for
//!   [`SIGNING_DURATION`]; such a worker's Ignition config carries the
//!   module's bootstrap kubeconfig (the ignition module's
//!   `bootstrap_kubeconfig`) and nothing else to authenticate with.
//!
//! The pods' network is the rig's: the controller manager gives each Node
//! a pod CIDR and the rig's network add-on ([`crate::podnet`]) writes each
//! node's CNI list where the agent's configuration points the kubelet
//! (dockershim, `--network-plugin=cni` as the agent renders it) or
//! containerd; pods get addresses of their own and reach the pods of
//! other nodes.
//!
//! Only what the test machine needs on top goes into test drop-ins: the
//! kubelet's ports (the nodes share the host's network namespace), swap;
//! docker's options for a root on overlayfs in a shared network namespace
//! (vfs, no bridge of docker's own, no iptables); a short RestartSec for
//! the agent.

use crate::agentnode::{self as an, KubeletImage, SEED_URL};
use crate::apiserver::KubeAuth;
use crate::docker_image::{self, RealDocker};
use crate::ignition::NodeVars;
use crate::kube::{ControlPlane, KubeParts, Kubectl, StaticToken};
use crate::kubelet_sysext::{Kubelet, KubeletMirror, fake_kubelet, kubelet_image, release};
use crate::simnode::SimNode;
use crate::tls_bootstrap::{BootstrapToken, RenderedToken, rfc3339_in};
use crate::torcx_fixtures::{AddonRig, runtime_mappings_yaml};
use anyhow::{Context as _, Result, bail};
use serde_json::json;
use sha2::{Digest, Sha512};
use std::collections::BTreeMap;
use std::time::Duration;

/// The nodes' OS version (one with remote torcx packages).
pub const OS_VERSION: &str = "1632.3.0";
/// The docker the OS image brings (a stand-in the addon replaces).
pub const VENDOR_DOCKER: &str = "1.12";
/// Where the nodes' assets live (the agent's default `paths.assets_dir`).
pub const ASSETS_DIR: &str = "/opt/tectonic";
/// The workers' seed kubelet image tag: an older release than the
/// cluster's, of which no node has an image.
pub const STALE_SEED_TAG: &str = "v1.19.7";
/// The cluster DNS address and domain the nodes' Ignition configs are
/// rendered with (not the module's defaults, so a kubelet that runs with
/// them got them from the rendered drop-in).
pub const CLUSTER_DNS_IP: &str = "10.3.0.53";
pub const CLUSTER_DOMAIN: &str = "nb-test.cluster";
/// docker's options on the nodes (test drop-in `20-test-node`): a root on
/// overlayfs (vfs), the host's network namespace shared by the nodes (no
/// bridge of docker's own: the kubelet gives pods the CNI network; no
/// iptables).
pub const DOCKER_TEST_OPTS: &str =
    "--storage-driver=vfs --bridge=none --iptables=false --ip-masq=false";
const AGENT_URL: &str = "https://mirror.test.invalid/node-bootstrap/node-bootstrap";
/// The docker CLI the addon's torcx image links on a node.
pub const TORCX_DOCKER: &str = "/run/torcx/bin/docker";
/// The pod sandbox image the rig builds and loads into each node's runtime
/// (kubelet 1.20's default, so docker nodes need no flag for it).
pub const PAUSE_IMAGE: &str = "k8s.gcr.io/pause:3.2";

/// How long the certificates the controller manager signs for kubelets
/// are valid in bootstrap-token mode: 10 minutes. The 1.20 signer backdates
/// them 5 minutes and a kubelet renews at 70-90 % of the lifetime, so a
/// kubelet renews its first certificate 2 to 4 minutes after it got it.
pub const SIGNING_DURATION: Duration = Duration::from_secs(600);

/// How a node's kubeconfig authenticates.
#[derive(Debug, Clone)]
pub enum Auth {
    /// A client certificate `system:node:<name>` of the cluster CA (the
    /// ignition module's `kubeconfig`).
    Cert,
    /// The rig's bootstrap token only (the ignition module's
    /// `bootstrap_kubeconfig`, rendered by the bootstrap-token module): the
    /// kubelet earns its client certificate through an approved request.
    BootstrapToken,
    /// A bearer token the API server knows as `system:node:<name>`.
    Token(String),
    /// A bearer token the API server does not know.
    UnknownToken(String),
}

/// The container runtime a node's agent is told to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `runtime.name` `auto`: docker for the cluster's 1.20, put in place
    /// by the addon (torcx) and reached through dockershim.
    Auto,
    /// `runtime.name` `containerd`: the OS's containerd (Debian's 1.6.20,
    /// as Flatcar ships one), configured and started by the agent,
    /// reached through CRI.
    Containerd,
}

/// One node of the cluster.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Node (and host) name.
    pub name: String,
    pub bootkube_master: bool,
    pub auth: Auth,
    /// Today's Flatcar: no kubelet-wrapper on the OS; the agent installs
    /// the kubelet as a system extension (`kubelet.backend = "sysext"`)
    /// from the rig's signed mirror of kubelet images.
    pub kubelet_sysext: bool,
    /// The OS version the update_engine stand-in offers this node (OS
    /// updates on in its agent config; the rig's mirror has the docker
    /// manifest of that version too). None: OS updates off.
    pub os_update: Option<String>,
    /// The runtime its agent is told to use.
    pub runtime: Runtime,
    /// Day two: the ignition module's `follow` switch on, the agent's
    /// follow settings of a test's size ([`crate::follow`]).
    pub follow: bool,
    /// Today's Flatcar of this release (e.g. `4459.2.0`): its os-release,
    /// no torcx and no kubelet-wrapper on the OS, and the agent's config
    /// names no kubelet backend: `auto` finds no wrapper and takes the
    /// system extension from the rig's signed mirror (implies
    /// [`kubelet_sysext`](Self::kubelet_sysext)). `None`: the Container
    /// Linux image ([`OS_VERSION`]).
    pub flatcar: Option<String>,
    /// The kubelet registers an address of its own (`--node-ip`: an address
    /// of 198.18.0.0/15 the rig adds to the host's loopback for the node,
    /// [`node_address`]) instead of the host's, which every simulated node
    /// shares. A TEST PART: on a real node the kubelet finds its own.
    pub own_address: bool,
}

/// The address a node of kubelet port `port` registers with
/// ([`NodeSpec::own_address`]): one of 198.18.0.0/15 (RFC 2544, for tests),
/// unique while the port is.
pub fn node_address(port: u16) -> String {
    format!("198.18.{}.{}", port >> 8, port & 0xff)
}

/// Addresses the rig added to the host's loopback, removed when dropped.
#[derive(Default)]
struct HostAddresses(std::sync::Mutex<Vec<String>>);

impl HostAddresses {
    fn add(&self, addr: &str) -> Result<()> {
        let out = std::process::Command::new("ip")
            .args(["addr", "add", &format!("{addr}/32"), "dev", "lo"])
            .output()
            .context("running ip addr add")?;
        let err = String::from_utf8_lossy(&out.stderr);
        // An address an interrupted run left behind is as good.
        anyhow::ensure!(
            out.status.success() || err.contains("File exists"),
            "ip addr add {addr}/32 dev lo: {err}"
        );
        self.0.lock().unwrap().push(addr.to_string());
        Ok(())
    }
}

impl Drop for HostAddresses {
    fn drop(&mut self) {
        for addr in self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = std::process::Command::new("ip")
                .args(["addr", "del", &format!("{addr}/32"), "dev", "lo"])
                .output();
        }
    }
}

impl NodeSpec {
    pub fn master(name: &str) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            bootkube_master: true,
            auth: Auth::Cert,
            kubelet_sysext: false,
            os_update: None,
            runtime: Runtime::Auto,
            follow: false,
            flatcar: None,
            own_address: false,
        }
    }
    pub fn worker(name: &str, auth: Auth) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            bootkube_master: false,
            auth,
            kubelet_sysext: false,
            os_update: None,
            runtime: Runtime::Auto,
            follow: false,
            flatcar: None,
            own_address: false,
        }
    }
    /// A worker whose agent is told to run containerd, starting with the
    /// bootstrap token as the examples' workers do.
    pub fn containerd_worker(name: &str) -> NodeSpec {
        NodeSpec {
            runtime: Runtime::Containerd,
            ..NodeSpec::worker(name, Auth::BootstrapToken)
        }
    }
    /// A worker of today's Flatcar (see [`NodeSpec::kubelet_sysext`]), on
    /// containerd as today's Flatcar runs it.
    pub fn sysext_worker(name: &str) -> NodeSpec {
        NodeSpec {
            kubelet_sysext: true,
            ..NodeSpec::containerd_worker(name)
        }
    }
    /// This node on today's Flatcar of `release` (see [`NodeSpec::flatcar`]),
    /// on containerd.
    pub fn on_flatcar(self, release: &str) -> NodeSpec {
        NodeSpec {
            flatcar: Some(release.into()),
            kubelet_sysext: true,
            runtime: Runtime::Containerd,
            ..self
        }
    }
    /// This node, registering an address of its own (see
    /// [`NodeSpec::own_address`]).
    pub fn with_own_address(self) -> NodeSpec {
        NodeSpec {
            own_address: true,
            ..self
        }
    }
    /// This node, following its cluster's version (see [`NodeSpec::follow`]).
    pub fn following(self) -> NodeSpec {
        NodeSpec {
            follow: true,
            ..self
        }
    }
    /// This node, with the update_engine stand-in offering OS `version`
    /// (see [`NodeSpec::os_update`]).
    pub fn with_os_update(self, version: &str) -> NodeSpec {
        NodeSpec {
            os_update: Some(version.into()),
            ..self
        }
    }
}

/// The cluster's shared parts.
pub struct ClusterRig {
    pub parts: KubeParts,
    pub docker: RealDocker,
    pub mirror: AddonRig,
    pub control_plane: ControlPlane,
    /// Kubelet system extension images of the cluster's release (the real
    /// kubelet), when a node wants them.
    pub kubelet_images: Option<KubeletMirror>,
    /// kubectl as the cluster's administrator.
    pub kubectl: Kubectl,
    specs: Vec<NodeSpec>,
    /// The bootstrap token of [`Auth::BootstrapToken`] nodes and what the
    /// module rendered for it.
    bootstrap: Option<(BootstrapToken, RenderedToken)>,
    /// Each node's Ignition config, once [`nodes`](Self::nodes) rendered them.
    ignition: std::sync::Mutex<BTreeMap<String, serde_json::Value>>,
    /// Each node's kubelet port (the nodes share the host's network).
    kubelet_ports: std::sync::Mutex<BTreeMap<String, u16>>,
    /// The nodes' own addresses ([`NodeSpec::own_address`]).
    addresses: HostAddresses,
    agent: Vec<u8>,
    dir: tempfile::TempDir,
}

/// A second docker the mirror offers: a stand-in image that cannot run a
/// kubelet's pods, so an addon that took it by a wrong rule leaves its
/// node unusable.
pub const OTHER_DOCKER: &str = "19.03";

/// The runtime mappings of the cluster: Kubernetes 1.20 runs on docker
/// 20.10, then 19.03; the mirror offers both.
pub fn runtime_mappings() -> String {
    runtime_mappings_yaml("1.20", &[docker_image::REFERENCE, OTHER_DOCKER])
}

/// `v1.20.2` -> `[v1.20.1, v1.21.0]` (no older patch of a `.0`).
pub(crate) fn neighbour_versions(version: &str) -> Result<Vec<String>> {
    let parts: Vec<u32> = version
        .trim_start_matches('v')
        .split('.')
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .with_context(|| format!("the cluster's version {version} is not vX.Y.Z"))?;
    let [major, minor, patch] = parts[..] else {
        bail!("the cluster's version {version} is not vX.Y.Z");
    };
    let mut v = vec![];
    if patch > 0 {
        v.push(format!("v{major}.{minor}.{}", patch - 1));
    }
    v.push(format!("v{major}.{}.0", minor + 1));
    Ok(v)
}

impl ClusterRig {
    /// The parts for a cluster of `nodes` (their tokens are registered with
    /// the control plane): the release, the docker image published in the
    /// signed mirror, the control plane's PKI and ports.
    pub fn new(nodes: &[NodeSpec]) -> Result<ClusterRig> {
        Self::with_agent(nodes, &crate::cli::agent_binary())
    }

    /// [`new`](Self::new) with another agent binary (a release build).
    pub fn with_agent(nodes: &[NodeSpec], agent: &std::path::Path) -> Result<ClusterRig> {
        let parts = crate::kube::parts()?;
        let docker = docker_image::real_docker()?;
        let mirror = AddonRig::new(OS_VERSION);
        let entry = mirror.publish_package(docker_image::REFERENCE, &docker.bytes()?);
        let other = mirror.publish_package(
            OTHER_DOCKER,
            &crate::torcx_fixtures::docker_archive(&format!("{OTHER_DOCKER}.15")),
        );
        let packages = [other, entry];
        mirror.publish_manifest(OS_VERSION, &packages);
        for next in nodes.iter().filter_map(|n| n.os_update.as_deref()) {
            mirror.publish_manifest(next, &packages);
        }
        let mut control_plane = ControlPlane::new(&[]);
        // `kubectl logs` and `exec` reach a pod through its kubelet, which
        // the API server dials by the Node's InternalIP (the nodes'
        // hostnames resolve nowhere).
        control_plane
            .extra_apiserver_args
            .push("--kubelet-preferred-address-types=InternalIP".into());
        for n in nodes {
            if let Auth::Token(t) = &n.auth {
                control_plane.tokens.push(StaticToken::for_node(&n.name, t));
            }
        }
        let bootstrap = if nodes.iter().any(|n| matches!(n.auth, Auth::BootstrapToken)) {
            // One token for the workers, as the examples give one; valid
            // longer than any test runs.
            let token = BootstrapToken::generate();
            let expiration = rfc3339_in(Duration::from_secs(4 * 3600));
            let mut rendered = control_plane.enable_tls_bootstrap(
                SIGNING_DURATION,
                &[(token.clone(), expiration)],
                None,
            )?;
            Some((token, rendered.remove(0)))
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix("nb-cluster-")
            .tempdir_in("/var/tmp")?;
        let admin = dir.path().join("admin.kubeconfig");
        std::fs::write(
            &admin,
            control_plane.kubeconfig(None, &KubeAuth::Cert(control_plane.admin.clone())),
        )?;
        let agent = std::fs::read(agent)
            .with_context(|| format!("reading the agent {}", agent.display()))?;
        let kubelet_images = if nodes.iter().any(|n| n.kubelet_sysext) {
            let mirror = KubeletMirror::start()?;
            let image = kubelet_image(Kubelet::Path(&parts.kubelet()), &release("_any", "1.0"))?;
            // Beside the cluster's own kubelet, one of an older patch and
            // one of the next minor (stand-ins that answer `--version` and
            // never register): an agent that chose either by a wrong rule
            // leaves its node NotReady.
            let others = neighbour_versions(&parts.version)?;
            let other_images = others
                .iter()
                .map(|v| kubelet_image(Kubelet::Bytes(&fake_kubelet(v)), &release("_any", "1.0")))
                .collect::<Result<Vec<_>>>()?;
            let mut published = vec![(parts.version.as_str(), image.as_slice())];
            published.extend(
                others
                    .iter()
                    .map(String::as_str)
                    .zip(other_images.iter().map(Vec::as_slice)),
            );
            mirror.publish(&published)?;
            Some(mirror)
        } else {
            None
        };
        Ok(ClusterRig {
            kubelet_images,
            kubectl: Kubectl::new(&parts.kubectl(), &admin),
            parts,
            docker,
            mirror,
            control_plane,
            specs: nodes.to_vec(),
            bootstrap,
            ignition: Default::default(),
            kubelet_ports: Default::default(),
            addresses: HostAddresses::default(),
            agent,
            dir,
        })
    }

    /// The kubelet image tag of the cluster's release (`v1.20.2`).
    pub fn tag(&self) -> String {
        self.parts.version.replace('+', "_")
    }

    /// The node's `kubeconfig` and `bootstrap_kubeconfig` for the ignition
    /// module (exactly one is given).
    fn kubeconfigs(&self, spec: &NodeSpec) -> (Option<String>, Option<String>) {
        match &spec.auth {
            Auth::Cert => (
                Some(self.control_plane.node_kubeconfig(&spec.name, None)),
                None,
            ),
            Auth::BootstrapToken => {
                let (_, rendered) = self.bootstrap.as_ref().expect("the rig's bootstrap token");
                (None, Some(rendered.kubeconfig.clone()))
            }
            Auth::Token(t) | Auth::UnknownToken(t) => (
                Some(
                    self.control_plane
                        .kubeconfig(None, &KubeAuth::Token(t.clone())),
                ),
                None,
            ),
        }
    }

    /// The bootstrap token of the [`Auth::BootstrapToken`] nodes.
    pub fn bootstrap_token(&self) -> Option<&BootstrapToken> {
        self.bootstrap.as_ref().map(|(t, _)| t)
    }

    /// Node `name`'s Ignition config, as [`nodes`](Self::nodes) rendered it.
    pub fn ignition_config(&self, name: &str) -> Option<serde_json::Value> {
        self.ignition.lock().unwrap().get(name).cloned()
    }

    /// The agent's config: the addon on (torcx, the rig's signed mirror),
    /// OS updates off unless the spec has [`NodeSpec::os_update`], API
    /// retries and timeouts of test size.
    fn agent_config(&self, spec: &NodeSpec) -> String {
        let full: serde_json::Value =
            serde_json::from_str(&self.mirror.config_json_for_root("", json!({}))).unwrap();
        let mut config = json!({
            "cluster": {"api_attempts": 3, "api_retry_initial_secs": 1, "api_retry_max_secs": 2, "api_timeout_secs": 5},
            "os_update": {"enabled": false},
            "reboot": {"wait_secs": 60},
            "addon": full["addon"],
        });
        if spec.kubelet_sysext {
            let mirror = self
                .kubelet_images
                .as_ref()
                .expect("the kubelet image mirror");
            // Today's Flatcar names no backend: `auto` decides on the node.
            let patch = if spec.flatcar.is_some() {
                mirror.sources_patch(crate::kubelet_sysext::KEYRING_PATH)
            } else {
                mirror.config_patch()
            };
            an::merge(&mut config, patch);
        }
        if spec.follow {
            an::merge(&mut config, crate::follow::follow_config());
        }
        if spec.os_update.is_some() {
            an::merge(
                &mut config,
                json!({"os_update": {"enabled": true, "timeout_secs": 60, "poll_interval_secs": 1}}),
            );
        }
        // The CNI plugins where Debian puts them (the kubelet's on docker,
        // containerd's).
        an::merge(
            &mut config,
            json!({"paths": {"cni_bin_dir": crate::pods::CNI_BIN_DIR}}),
        );
        if spec.runtime == Runtime::Containerd {
            // containerd's sandbox image: the pause image the rig loads
            // (there is no registry).
            an::merge(
                &mut config,
                json!({"runtime": {"name": "containerd", "sandbox_image": PAUSE_IMAGE}}),
            );
        }
        config.to_string()
    }

    /// Every node, provisioned from its rendered Ignition config on the OS
    /// image described above; not booted. In the order of the specs.
    pub fn nodes(&self) -> Result<Vec<SimNode>> {
        let sha512 = hex::encode(Sha512::digest(&self.agent));
        let vars: BTreeMap<String, NodeVars> = self
            .specs
            .iter()
            .map(|s| {
                let role = if s.bootkube_master {
                    "bootkube-master"
                } else {
                    "worker"
                };
                let (kubeconfig, bootstrap_kubeconfig) = self.kubeconfigs(s);
                let v = NodeVars {
                    role: role.into(),
                    agent_url: AGENT_URL.into(),
                    agent_sha512: sha512.clone(),
                    agent_config: self.agent_config(s),
                    // The bootkube master learns the cluster's version from
                    // its seed; workers carry a stale one (a config written
                    // before the cluster's last upgrade), which their agents
                    // must replace with the API server's: the node's store
                    // has no image of it.
                    kubelet_image_tag: if s.bootkube_master {
                        self.tag()
                    } else {
                        STALE_SEED_TAG.into()
                    },
                    runtime_mappings: runtime_mappings(),
                    keyring: Some(self.mirror.key.public_armored()),
                    kubeconfig,
                    bootstrap_kubeconfig,
                    cluster_dns_ip: CLUSTER_DNS_IP.into(),
                    cluster_domain: CLUSTER_DOMAIN.into(),
                    follow: s.follow,
                };
                (s.name.clone(), v)
            })
            .collect();
        let configs = crate::ignition::render(&vars)?;
        self.ignition.lock().unwrap().clone_from(&configs);
        self.specs
            .iter()
            .map(|s| self.node(s, &configs[&s.name]))
            .collect()
    }

    fn node(&self, spec: &NodeSpec, ignition: &serde_json::Value) -> Result<SimNode> {
        let mut n = SimNode::new(&spec.name)?;
        n.set_hostname(&spec.name)?;
        let enabled = crate::ignition::apply(
            &n,
            ignition,
            |url| (url == AGENT_URL).then(|| self.agent.clone()),
            None,
        );
        match &spec.flatcar {
            // Today's Flatcar: no torcx, no kubelet-wrapper.
            Some(release) => n.write(
                an::OS_RELEASE,
                format!(
                    "{}PRETTY_NAME=\"Flatcar Container Linux by Kinvolk {release} (Oklo)\"\n",
                    crate::kubelet_sysext::flatcar_os_release(release)
                ),
                0o644,
            )?,
            None => crate::torcx::install_os(
                &n,
                &self.mirror.board,
                OS_VERSION,
                VENDOR_DOCKER,
                &format!("{VENDOR_DOCKER}.2"),
            )?,
        }
        if spec.kubelet_sysext && spec.bootkube_master {
            // The rig's bootkube.sh runs the control plane from this store
            // (the kubelet is the extension's).
            an::install_kubelet_image(&n, SEED_URL, &self.tag(), KubeletImage::Real(&self.parts))?;
        }
        if spec.kubelet_sysext {
            // No kubelet on this OS: the agent brings it. (With
            // kubelet.backend "sysext" Ignition wrote kubelet.service's
            // sysext drop-in; on today's Flatcar the config names no
            // backend, and the agent writes it once auto chose the sysext.)
            let mirror = self
                .kubelet_images
                .as_ref()
                .expect("the kubelet image mirror");
            n.write(
                crate::kubelet_sysext::KEYRING_PATH,
                mirror.key.public_armored(),
                0o644,
            )?;
            crate::kubelet_sysext::share_root_for_merges(&n)?;
        } else {
            an::install_kubelet_wrapper(&n, &[])?;
            an::install_kubelet_image(&n, SEED_URL, &self.tag(), KubeletImage::Real(&self.parts))?;
        }
        let port = crate::kube::free_port();
        let healthz = crate::kube::free_port();
        self.kubelet_ports
            .lock()
            .unwrap()
            .insert(spec.name.clone(), port);
        let node_ip = if spec.own_address {
            let addr = node_address(port);
            self.addresses.add(&addr)?;
            format!(" --node-ip={addr}")
        } else {
            String::new()
        };
        // The pods' network: the rig plays the network add-on.
        crate::podnet::install(&n, &spec.name, &self.parts.kubectl())?;
        n.drop_in(
            "kubelet.service",
            "20-test-node",
            &format!(
                "# The test machine: nodes share the host's network (own ports; no iptables\n\
                 # chains of the kubelet's in the host's tables), the host may have swap, and\n\
                 # nodes share the host's disk, which other tests and builds fill (no eviction\n\
                 # for it).\n[Service]\n\
                 Environment=\"KUBELET_EXTRA_ARGS=--port={port} --healthz-port={healthz} --make-iptables-util-chains=false --fail-swap-on=false {}{node_ip}\"\n",
                 crate::pods::NO_DISK_EVICTION
            ),
        )?;
        crate::pods::install_runc_shim(&n)?;
        n.drop_in(
            "docker.service",
            "20-test-node",
            &format!(
                "# The test machine: a root on overlayfs, the host's network shared by nodes;\n\
                 # TEST PART: the runc shim as the default runtime (see testkit::pods).\n[Service]\n\
                 Environment=\"DOCKER_OPTS={DOCKER_TEST_OPTS} {}\"\n",
                crate::pods::DOCKER_RUNC_SHIM_OPTS
            ),
        )?;
        if spec.runtime == Runtime::Containerd {
            crate::pods::containerd_test_parts(&n)?;
            // The host's (Debian's) containerd config shows through the
            // node's root: Flatcar has none in /etc, the agent writes it.
            n.hide("/etc/containerd/config.toml")?;
        }
        n.drop_in(
            "k8s-node-bootstrap.service",
            "test-restart",
            "[Service]\nRestartSec=1\n",
        )?;
        let mut enable: Vec<&str> = enabled.iter().map(String::as_str).collect();
        if let Some(next) = &spec.os_update {
            let args = [
                "--scenario",
                "update",
                "--step-ms",
                "100",
                "--new-version",
                next,
            ];
            an::install_update_engine(
                &mut n,
                &crate::built_binary("fake-update-engine"),
                &args.map(String::from),
            )?;
            enable.push("update-engine.service");
        }
        n.enable(&enable)?;
        Ok(n)
    }

    /// Pushes the bootkube master's assets to `/opt/tectonic` (its
    /// `bootkube.sh` last: the path unit fires on it).
    pub fn push_assets(&self, master: &SimNode) -> Result<()> {
        let image_dir = an::image_dir(SEED_URL, &self.tag());
        for (rel, data, mode) in
            self.control_plane
                .bootkube_assets(ASSETS_DIR, &image_dir, &runtime_mappings())
        {
            master.write(&format!("{ASSETS_DIR}/{rel}"), data, mode)?;
        }
        Ok(())
    }

    /// Boots every node of [`nodes`](Self::nodes) (in the order of the
    /// specs) the plain way, all at once, and waits until every node
    /// whose agent is to join is Ready: the bootkube master's assets
    /// pushed, its first boot ending in the docker addon's reboot, bootkube
    /// and tectonic done on its second; the workers of
    /// [`Auth::BootstrapToken`] booted once the token's Secret is in the
    /// cluster; the first boot of a node that changes docker (the addon) or
    /// its OS ([`NodeSpec::os_update`]) ending in the agent's one reboot,
    /// a containerd node's without an OS update not. Nodes whose auth is
    /// [`Auth::UnknownToken`] are booted and not waited for. Each node's
    /// runtime gets the pause image (the pod sandbox: no registry serves
    /// it). Returns the Ready nodes as the API server shows them.
    pub fn boot_all(
        &self,
        nodes: &mut [SimNode],
        timeout: Duration,
    ) -> Result<Vec<crate::kube::NodeInfo>> {
        anyhow::ensure!(
            nodes.len() == self.specs.len(),
            "boot_all takes the nodes of nodes(), in order"
        );
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = nodes
                .iter_mut()
                .zip(&self.specs)
                .map(|(n, spec)| s.spawn(move || self.boot_one(n, spec, timeout)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a boot thread panicked")))
                })
                .collect()
        });
        for (r, spec) in results.into_iter().zip(&self.specs) {
            r.with_context(|| format!("booting {}", spec.name))?;
        }
        let joining: Vec<&str> = self
            .specs
            .iter()
            .filter(|s| !matches!(s.auth, Auth::UnknownToken(_)))
            .map(|s| s.name.as_str())
            .collect();
        self.kubectl.wait_ready(&joining, timeout)
    }

    fn boot_one(&self, n: &mut SimNode, spec: &NodeSpec, timeout: Duration) -> Result<()> {
        use crate::simnode::BootEnd;
        if spec.bootkube_master {
            self.push_assets(n)?;
        }
        if matches!(spec.auth, Auth::BootstrapToken) {
            let id = self
                .bootstrap_token()
                .expect("the rig's bootstrap token")
                .id
                .clone();
            let deadline = std::time::Instant::now() + 3 * timeout;
            while !self.kubectl.bootstrap_token_exists(&id).unwrap_or(false) {
                anyhow::ensure!(
                    std::time::Instant::now() < deadline,
                    "the bootstrap token's Secret never appeared"
                );
                std::thread::sleep(Duration::from_secs(2));
            }
        }
        if matches!(spec.auth, Auth::UnknownToken(_)) {
            return n.boot();
        }
        if spec.runtime == Runtime::Auto || spec.os_update.is_some() {
            n.boot()?;
            let end = n.wait_down(timeout)?;
            anyhow::ensure!(
                end == BootEnd::Reboot,
                "{}: the agent's reboot (docker addon, OS update) ended as {end:?}",
                spec.name
            );
        }
        n.boot()?;
        if spec.bootkube_master {
            n.wait_for("bootkube and tectonic to complete", timeout, |n| {
                (n.exists("/opt/tectonic/init_bootkube.done")
                    && n.exists("/opt/tectonic/init_tectonic.done"))
                .then_some(())
            })?;
        }
        n.wait_active_state("kubelet.service", "active", timeout)?;
        let pause = crate::pods::pause_image()?;
        match spec.runtime {
            Runtime::Auto => {
                crate::pods::wait_docker(n, TORCX_DOCKER, timeout)?;
                crate::pods::docker_load(n, TORCX_DOCKER, &pause)
            }
            Runtime::Containerd => {
                crate::pods::wait_containerd(n, crate::pods::CONTAINERD_SOCKET, timeout)?;
                crate::pods::ctr_import(n, &pause, None)
            }
        }
    }

    /// The port node `name`'s kubelet serves its API on (on 127.0.0.1).
    pub fn kubelet_port(&self, name: &str) -> Option<u16> {
        self.kubelet_ports.lock().unwrap().get(name).copied()
    }

    /// Scratch space that lives as long as the rig.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// What a user checks of a node's docker: the version its API reports (the
/// docker.service of the torcx image, started through docker.socket), and
/// the executable its daemon runs.
pub fn node_docker(n: &SimNode) -> Result<(String, String)> {
    let out = n.exec(&[
        "/run/torcx/bin/docker",
        "version",
        "--format",
        "{{.Server.Version}}",
    ])?;
    anyhow::ensure!(
        out.status.success(),
        "docker version failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let pid = n.prop("docker.service", "MainPID")?;
    let out = n.exec(&["readlink", &format!("/proc/{pid}/exe")])?;
    let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
    anyhow::ensure!(
        !exe.is_empty(),
        "docker.service has no running main process (MainPID {pid})"
    );
    Ok((version, exe))
}

/// The journal match of the agent's `run` processes
/// (`journalctl -o json <this>`).
pub const AGENT_JOURNAL_MATCH: &str = "_SYSTEMD_UNIT=k8s-node-bootstrap.service";

/// The agent processes' run time in a node's journal records
/// (`journalctl -o json` [`AGENT_JOURNAL_MATCH`]), summed over its boots:
/// for each process of the unit's main program (by boot and PID), from its
/// first record to its last before it began watching the join (`STEP=join`,
/// `cluster.join_watch_secs`): the watch only waits on the kubelet and the
/// control plane, after `READY=1` let the kubelet start.
pub fn agent_seconds(records: &[serde_json::Value]) -> Result<f64> {
    let mut spans: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let mut watching: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut timed = Vec::new();
    for e in records {
        if e["_COMM"] != "node-bootstrap" {
            continue;
        }
        let key = (
            e["_BOOT_ID"].as_str().unwrap_or_default().to_string(),
            e["_PID"].as_str().unwrap_or_default().to_string(),
        );
        let t: u64 = e["__REALTIME_TIMESTAMP"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .context("a journal record without __REALTIME_TIMESTAMP")?;
        if e["STEP"] == "join" {
            let w = watching.entry(key.clone()).or_insert(t);
            *w = (*w).min(t);
        }
        timed.push((key, t));
    }
    for (key, t) in timed {
        if watching.get(&key).is_some_and(|w| t >= *w) {
            continue;
        }
        let span = spans.entry(key).or_insert((t, t));
        span.0 = span.0.min(t);
        span.1 = span.1.max(t);
    }
    anyhow::ensure!(
        !spans.is_empty(),
        "no record of the agent in the node's journal"
    );
    Ok(spans.values().map(|(a, b)| (b - a) as f64 / 1e6).sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(pid: &str, secs: f64, step: Option<&str>) -> serde_json::Value {
        let mut r = json!({
            "_COMM": "node-bootstrap",
            "_BOOT_ID": "b1",
            "_PID": pid,
            "__REALTIME_TIMESTAMP": format!("{}", (secs * 1e6) as u64),
        });
        if let Some(s) = step {
            r["STEP"] = s.into();
        }
        r
    }

    #[test]
    fn the_agents_time_ends_where_it_starts_watching_the_join() {
        let records = [
            // First boot: 1.0 s to the reboot request.
            record("10", 100.0, None),
            record("10", 100.5, Some("docker-addon")),
            record("10", 101.0, Some("reboot")),
            // Second boot: 0.25 s to READY=1, then the watch for 20 s.
            record("20", 200.0, None),
            record("20", 200.25, Some("kubelet-env")),
            record("20", 200.3, Some("join")),
            record("20", 220.0, Some("join")),
            record("20", 220.1, None),
        ];
        let s = agent_seconds(&records).unwrap();
        assert!((s - 1.25).abs() < 1e-6, "{s}");
        // Without a watch, the whole run counts.
        let s = agent_seconds(&records[..5]).unwrap();
        assert!((s - 1.25).abs() < 1e-6, "{s}");
        assert!(agent_seconds(&[]).is_err());
    }
}
