//! A simulated node running the real agent: the project's units, the built
//! `node-bootstrap` at `/opt/bin/node-bootstrap`, its config, the seed
//! files, an os-release of its own at the real path (switched to the staged
//! version before the boot after an update, as a machine's bootloader
//! would), the kubelet-wrapper stand-in, and optionally the fake
//! update_engine as a D-Bus service and a
//! kubeconfig for a [`Cluster`] (the API server stand-in on host loopback,
//! which the node reaches because it shares the host's network namespace).

use crate::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use crate::simnode::SimNode;
use anyhow::Result;
use serde_json::{Value, json};

/// The node's OS identity, where Flatcar and the agent's default have it.
pub const OS_RELEASE: &str = "/usr/lib/os-release";
pub const SEED_URL: &str = "quay.io/coreos/hyperkube";
pub const SEED_TAG: &str = "v1.8.4_coreos.0";

/// The API server stand-in with its PKI, and the runtime that serves it.
pub struct Cluster {
    pub pki: Pki,
    pub api: FakeApiServer,
    pub rt: tokio::runtime::Runtime,
}

impl Cluster {
    pub fn start(opts: ApiServerOptions) -> Result<Cluster> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let pki = Pki::generate();
        let api = rt.block_on(FakeApiServer::start(&pki, opts))?;
        Ok(Cluster { pki, api, rt })
    }

    /// A kubeconfig with the node's client certificate for this server.
    pub fn kubeconfig(&self) -> String {
        self.pki.kubeconfig(&self.api.url(), &KubeAuth::ClientCert)
    }
}

/// Merges `patch` into `base` (objects recursively; anything else replaces).
pub fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, p) => *b = p,
    }
}

pub struct AgentNode {
    name: String,
    config: Value,
    seed: String,
    os_version: String,
    kubeconfig: Option<String>,
    update_engine: Option<Vec<String>>,
    master: bool,
    fast_restart: bool,
}

impl AgentNode {
    /// A worker with OS updates off and test-sized timeouts.
    pub fn new(name: &str) -> AgentNode {
        AgentNode {
            name: name.into(),
            config: json!({
                "role": "worker",
                "cluster": {"api_attempts": 3, "api_retry_initial_secs": 0, "api_retry_max_secs": 1, "api_timeout_secs": 3},
                "os_update": {"enabled": false, "timeout_secs": 60, "poll_interval_secs": 1},
                "reboot": {"wait_secs": 30}
            }),
            seed: format!("KUBELET_IMAGE_URL=\"{SEED_URL}\"\nKUBELET_IMAGE_TAG=\"{SEED_TAG}\"\n"),
            os_version: "1520.3.0".into(),
            kubeconfig: None,
            update_engine: None,
            master: false,
            fast_restart: true,
        }
    }

    /// Merges into the agent's config.
    pub fn config(mut self, patch: Value) -> Self {
        merge(&mut self.config, patch);
        self
    }

    pub fn seed(mut self, text: &str) -> Self {
        self.seed = text.into();
        self
    }

    pub fn kubeconfig(mut self, text: String) -> Self {
        self.kubeconfig = Some(text);
        self
    }

    /// Runs the fake update_engine in the node with these extra arguments
    /// (e.g. `["--scenario", "update"]`) and turns OS updates on.
    pub fn update_engine(mut self, args: &[&str]) -> Self {
        self.update_engine = Some(args.iter().map(|s| s.to_string()).collect());
        self.config(json!({"os_update": {"enabled": true}}))
    }

    /// The bootkube master: role and the bootkube/tectonic path units.
    pub fn bootkube_master(mut self) -> Self {
        self.master = true;
        self.config(json!({"role": "bootkube-master"}))
    }

    /// Keep the shipped RestartSec=10 (default: 1 s, to keep tests short).
    pub fn shipped_restart_delay(mut self) -> Self {
        self.fast_restart = false;
        self
    }

    pub fn build(self) -> Result<SimNode> {
        let mut n = SimNode::new(&self.name)?;
        let units: Vec<_> = [
            "k8s-node-bootstrap.service",
            "kubelet.service",
            "bootkube.path",
            "bootkube.service",
            "tectonic.path",
            "tectonic.service",
        ]
        .iter()
        .map(|u| crate::unit_file(u))
        .collect();
        n.install_units(&units)?;
        n.install_file(
            &crate::built_binary("node-bootstrap"),
            "/opt/bin/node-bootstrap",
            0o755,
        )?;
        n.install_file(
            &crate::standin("kubelet-wrapper"),
            "/usr/lib/coreos/kubelet-wrapper",
            0o755,
        )?;
        n.write(
            "/etc/node-bootstrap/config.json",
            serde_json::to_vec_pretty(&self.config)?,
            0o644,
        )?;
        n.write("/etc/kubernetes/installer/kubelet.env", &self.seed, 0o644)?;
        n.write(
            OS_RELEASE,
            format!("ID=coreos\nNAME=\"Container Linux by CoreOS\"\nVERSION={v}\nVERSION_ID={v}\nCOREOS_BOARD=amd64-usr\n", v = self.os_version),
            0o644,
        )?;
        if let Some(kc) = &self.kubeconfig {
            n.write("/etc/kubernetes/kubeconfig", kc, 0o600)?;
        }
        let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
        if let Some(args) = &self.update_engine {
            n.install_file(
                &crate::standin("com.coreos.update1.conf"),
                "/etc/dbus-1/system.d/com.coreos.update1.conf",
                0o644,
            )?;
            let bin = crate::built_binary("fake-update-engine");
            n.write(
                "/etc/systemd/system/update-engine.service",
                format!(
                    "[Unit]\nDescription=update_engine stand-in\n\n[Service]\nType=dbus\nBusName=com.coreos.update1\n\
                     ExecStart={} {}\n\n[Install]\nWantedBy=multi-user.target\n",
                    bin.display(),
                    args.join(" ")
                ),
                0o644,
            )?;
            enable.push("update-engine.service");
            crate::fake_update_engine::boot_into_pending_updates(&mut n, OS_RELEASE);
        }
        if self.master {
            enable.extend(["bootkube.path", "tectonic.path"]);
        }
        if self.fast_restart {
            n.drop_in(
                "k8s-node-bootstrap.service",
                "test-restart",
                "[Service]\nRestartSec=1\n",
            )?;
        }
        n.enable(&enable)?;
        Ok(n)
    }
}

/// The kubelet-wrapper stand-in's record of its starts.
pub fn kubelet_starts(n: &SimNode) -> Vec<String> {
    n.read("/var/lib/kubelet-wrapper/starts")
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The kubelet-wrapper stand-in's record once it holds `count` starts, or
/// what it holds after 30 s: systemd reports kubelet.service active as soon
/// as the wrapper is forked, a moment before it writes its record.
pub fn wait_kubelet_starts(n: &SimNode, count: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let starts = kubelet_starts(n);
        if starts.len() >= count || std::time::Instant::now() > deadline {
            return starts;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The state journal the agent keeps on the node, parsed.
pub fn state_journal(n: &SimNode) -> Option<Value> {
    n.read("/var/lib/node-bootstrap/state.json")
        .and_then(|t| serde_json::from_str(&t).ok())
}

/// Holds the node's shutdown with a logind delay lock (logind waits for it
/// up to an hour): a reboot requested while it is held is accepted but does
/// not happen until `systemctl stop hold-shutdown.service`. Before boot.
pub fn hold_shutdown(n: &SimNode) -> Result<()> {
    n.write(
        "/etc/systemd/logind.conf.d/delay.conf",
        "[Login]\nInhibitDelayMaxSec=3600\n",
        0o644,
    )?;
    n.write(
        "/etc/systemd/system/hold-shutdown.service",
        "[Service]\nExecStart=/usr/bin/systemd-inhibit --what=shutdown --mode=delay --who=test --why=holding /usr/bin/sleep infinity\n\
         [Install]\nWantedBy=multi-user.target\n",
        0o644,
    )?;
    n.enable(&["hold-shutdown.service"])
}
