//! The filesystem locations the agent reads and writes, with the real
//! Container Linux defaults.

use super::{FieldResult, absolute_path};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

macro_rules! paths {
    ($( $(#[$doc:meta])* $name:ident = $default:expr; )*) => {
        /// Raw `paths` section: every entry optional.
        #[derive(Debug, Default, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawPaths {
            $( $(#[$doc])* pub $name: Option<PathBuf>, )*
        }

        /// Validated paths: all absolute.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Paths {
            $( $(#[$doc])* pub $name: PathBuf, )*
        }

        impl RawPaths {
            pub fn validate(self) -> FieldResult<Paths> {
                Ok(Paths {
                    $( $name: absolute_path(
                        concat!("paths.", stringify!($name)),
                        self.$name.unwrap_or_else(|| PathBuf::from($default)),
                    )?, )*
                })
            }
        }

        impl Paths {
            /// The section as a config file writes it, every path given.
            pub fn to_raw(&self) -> RawPaths {
                RawPaths {
                    $( $name: Some(self.$name.clone()), )*
                }
            }
        }
    };
}

paths! {
    /// The file kubelet.service reads; its existence is the commit point.
    kubelet_env = "/etc/kubernetes/kubelet.env";
    /// Provisioned inputs: `kubelet.env`, `runtime-mappings.yaml`, keyrings.
    seed_dir = "/etc/kubernetes/installer";
    /// The node's kubeconfig (API server URL, CA, client credentials),
    /// with `cluster.credential` `kubeconfig`.
    kubeconfig = "/etc/kubernetes/kubeconfig";
    /// The bootstrap kubeconfig (API server URL, CA, a bootstrap token),
    /// with `cluster.credential` `bootstrap-token`.
    bootstrap_kubeconfig = "/etc/kubernetes/bootstrap-kubeconfig";
    /// The kubelet's own state: with TLS bootstrapping, the kubeconfig it
    /// writes (`kubeconfig`) and the certificates it earns (`pki/`).
    kubelet_dir = "/var/lib/kubelet";
    /// The kubelet's configuration file (`KubeletConfiguration`, Kubernetes
    /// 1.10 and newer).
    kubelet_config = "/etc/kubernetes/kubelet-config.yaml";
    /// The CA the kubelet trusts for client certificates (the API server's).
    kubelet_client_ca = "/etc/kubernetes/ca.crt";
    /// Static pods the kubelet runs.
    static_pod_dir = "/etc/kubernetes/manifests";
    /// CNI network configs (the network add-on writes them).
    cni_conf_dir = "/etc/kubernetes/cni/net.d";
    /// CNI plugin binaries.
    cni_bin_dir = "/opt/cni/bin";
    /// containerd's configuration file (written by the agent unless an
    /// operator's is there).
    containerd_config = "/etc/containerd/config.toml";
    /// containerd's API socket (CRI).
    containerd_socket = "/run/containerd/containerd.sock";
    /// The OS's containerd, as `containerd.service` runs it: its
    /// `--version` decides whether it fits the cluster (a containerd the
    /// agent installs is merged at `/usr/bin/containerd`).
    containerd_binary = "/usr/bin/containerd";
    /// The durable state journal and the run lock.
    state_dir = "/var/lib/node-bootstrap";
    /// Per-boot scratch (tmpfs): boot id, progress.
    run_dir = "/run/node-bootstrap";
    /// Cluster assets (bootkube.sh, tectonic-wrapper.sh, manifests, TLS).
    assets_dir = "/opt/tectonic";
    /// The writable torcx store (per-OS-version subdirectories below).
    torcx_store = "/var/lib/torcx/store";
    /// The vendor torcx store shipped with the OS image.
    torcx_vendor_store = "/usr/share/torcx/store";
    /// The OEM torcx store.
    torcx_oem_store = "/usr/share/oem/torcx/store";
    /// torcx's user config: `profiles/` and `next-profile`.
    torcx_config_dir = "/etc/torcx";
    /// torcx's runtime state: `profile.json`.
    torcx_run_dir = "/run/torcx";
    /// OS identity (VERSION_ID, COREOS_BOARD).
    os_release = "/usr/lib/os-release";
    /// systemd-sysext images.
    extensions_dir = "/etc/extensions";
    /// Where runtime units go (the docker datadir cleanup unit).
    systemd_runtime_dir = "/run/systemd/system";
    /// Docker's data directory, wiped when the docker version changes.
    docker_datadir = "/var/lib/docker";
    /// Docker's API socket.
    docker_socket = "/var/run/docker.sock";
}

impl Paths {
    /// The real defaults, as if the `paths` section were empty.
    pub fn defaults() -> Paths {
        RawPaths::default()
            .validate()
            .expect("the built-in paths are absolute")
    }
    /// `seed_dir/kubelet.env`, written by provisioning.
    pub fn seed_kubelet_env(&self) -> PathBuf {
        self.seed_dir.join("kubelet.env")
    }
    /// `seed_dir/runtime-mappings.yaml`.
    pub fn runtime_mappings(&self) -> PathBuf {
        self.seed_dir.join("runtime-mappings.yaml")
    }
    /// `state_dir/state.json`: the state journal.
    pub fn state_journal(&self) -> PathBuf {
        self.state_dir.join("state.json")
    }
    /// `state_dir/run.lock`: held by `run` for its whole duration.
    pub fn run_lock(&self) -> PathBuf {
        self.state_dir.join("run.lock")
    }
    /// `assets_dir/init_bootkube.done`.
    pub fn bootkube_done(&self) -> PathBuf {
        self.assets_dir.join("init_bootkube.done")
    }
    /// `assets_dir/init_tectonic.done`.
    pub fn tectonic_done(&self) -> PathBuf {
        self.assets_dir.join("init_tectonic.done")
    }
}
