//! A simulated node running the real agent: the project's units, the
//! agent at `/opt/bin/node-bootstrap`, its config, the seed files, an
//! os-release of its own at the real path (switched to the staged version
//! before the boot after an update, as a machine's bootloader would), the
//! kubelet-wrapper stand-in, and optionally the fake update_engine as a
//! D-Bus service and a kubeconfig for a [`Cluster`] (the API server
//! stand-in on host loopback, which the node reaches because it shares the
//! host's network namespace).
//!
//! Two ways to build one: [`AgentNode`], the builder tests use (this
//! workspace's binaries, a worker with test-sized timeouts, merged config
//! patches), and [`AgentNodeSpec`] + [`agent_node`], where everything is
//! explicit (any agent binary, e.g. a release build; the config as text),
//! for the power-loss rig (`crate::powerloss`) and the benchmarks
//! (`benchkit`). Both install the node's pieces with the same functions
//! ([`install_units`], [`install_kubelet_wrapper`], [`install_update_engine`]),
//! which tests with a node of their own (the agent stub) use too.

use crate::apiserver::{ApiServerOptions, FakeApiServer, KubeAuth, Pki};
use crate::simnode::SimNode;
use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The node's OS identity, where Flatcar and the agent's default have it.
pub const OS_RELEASE: &str = "/usr/lib/os-release";
/// Where Ignition puts the agent (the units' `ExecStart=` runs it there).
pub const AGENT_PATH: &str = "/opt/bin/node-bootstrap";
/// The agent's config file (the units' `NODE_BOOTSTRAP_CONFIG`).
pub const CONFIG_PATH: &str = "/etc/node-bootstrap/config.json";
/// The kubeconfig the agent reads (its default `paths.kubeconfig`).
pub const KUBECONFIG_PATH: &str = "/etc/kubernetes/kubeconfig";
/// Where Container Linux has kubelet-wrapper (kubelet.service runs it).
pub const KUBELET_WRAPPER_PATH: &str = "/usr/lib/coreos/kubelet-wrapper";
/// The six units of a node (the path units matter only on the bootkube
/// master).
pub const UNITS: &[&str] = &[
    "k8s-node-bootstrap.service",
    "kubelet.service",
    "bootkube.path",
    "bootkube.service",
    "tectonic.path",
    "tectonic.service",
];
/// The steps of the state journal, in the order a first boot runs them
/// (README "The flow on a node").
pub const STEPS: &[&str] = &[
    "assets",
    "cluster-version",
    "os-update",
    "docker-addon",
    "reboot",
    "kubelet-sysext",
    "kubelet-env",
];

/// Installs `units` (names of `units/`, or of `NODE_BOOTSTRAP_UNITS_DIR`:
/// see [`crate::unit_file`]) on a node, before boot.
pub fn install_units(n: &SimNode, units: &[&str]) -> Result<()> {
    let paths: Vec<_> = units.iter().map(|u| crate::unit_file(u)).collect();
    n.install_units(&paths)
}

/// The local image store the kubelet-wrapper stand-in runs kubelets from
/// (`<KUBELET_IMAGE_URL>/<KUBELET_IMAGE_TAG>/kubelet`), as rkt runs them
/// from what it fetched.
pub const IMAGE_STORE: &str = "/var/lib/kubelet-wrapper/images";

/// What an image of the node's store holds.
#[derive(Debug, Clone, Copy)]
pub enum KubeletImage<'a> {
    /// The stand-in kubelet (`testkit/standins/kubelet`: says which image
    /// it is, then sleeps), for tests of the units and the agent alone.
    StandIn,
    /// The real binaries of a release (kubelet, kube-apiserver, kubectl, as
    /// a hyperkube image holds them).
    Real(&'a crate::kube::KubeParts),
}

/// The store directory of image `url:tag`, inside the node.
pub fn image_dir(url: &str, tag: &str) -> String {
    format!("{IMAGE_STORE}/{url}/{tag}")
}

/// Puts image `url:tag` in the node's local store, before boot: links to
/// the host's binaries (visible in the node through the overlay's lower
/// dir), so no node copies a release.
pub fn install_kubelet_image(n: &SimNode, url: &str, tag: &str, image: KubeletImage) -> Result<()> {
    let dir = n.path(&image_dir(url, tag));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let links: Vec<(String, PathBuf)> = match image {
        KubeletImage::StandIn => vec![("kubelet".into(), crate::standin("kubelet"))],
        KubeletImage::Real(parts) => crate::kube::KubeParts::BINARIES
            .iter()
            .map(|b| (b.to_string(), parts.dir.join(b)))
            .collect(),
    };
    for (name, target) in links {
        let link = dir.join(&name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link)
            .with_context(|| format!("linking {} to {}", link.display(), target.display()))?;
    }
    Ok(())
}

/// Installs the kubelet-wrapper stand-in (`testkit/standins/`: records
/// each start, then runs the kubelet of the image kubelet.env names from
/// the node's store, or fails as rkt fails to fetch a missing image) where
/// the OS has the real one, with stand-in images of the seed's repository
/// for `stand_in_tags`, before boot.
pub fn install_kubelet_wrapper(n: &SimNode, stand_in_tags: &[&str]) -> Result<()> {
    n.install_file(
        &crate::standin("kubelet-wrapper"),
        KUBELET_WRAPPER_PATH,
        0o755,
    )?;
    for tag in stand_in_tags {
        install_kubelet_image(n, SEED_URL, tag, KubeletImage::StandIn)?;
    }
    Ok(())
}
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
        let rt = crate::server_runtime(1)?;
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
    kubelet_images: Vec<String>,
}

/// The kubelet image tag of the API server stand-in's default version
/// (`v1.9.6+coreos.0`): the one stand-in image an [`AgentNode`]'s store
/// holds unless the test says otherwise ([`AgentNode::kubelet_images`]).
pub const STANDIN_CLUSTER_TAG: &str = "v1.9.6_coreos.0";

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
            kubelet_images: vec![STANDIN_CLUSTER_TAG.into()],
        }
    }

    /// The stand-in kubelet images (tags of the seed's repository) the
    /// node's store holds: a kubelet.env naming any other tag runs no
    /// kubelet. Default: [`STANDIN_CLUSTER_TAG`].
    pub fn kubelet_images(mut self, tags: &[&str]) -> Self {
        self.kubelet_images = tags.iter().map(|t| t.to_string()).collect();
        self
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
        install_units(&n, UNITS)?;
        n.install_file(&crate::cli::agent_binary(), AGENT_PATH, 0o755)?;
        let tags: Vec<&str> = self.kubelet_images.iter().map(String::as_str).collect();
        install_kubelet_wrapper(&n, &tags)?;
        n.write(CONFIG_PATH, serde_json::to_vec_pretty(&self.config)?, 0o644)?;
        n.write("/etc/kubernetes/installer/kubelet.env", &self.seed, 0o644)?;
        n.write(
            OS_RELEASE,
            format!("ID=coreos\nNAME=\"Container Linux by CoreOS\"\nVERSION={v}\nVERSION_ID={v}\nCOREOS_BOARD=amd64-usr\n", v = self.os_version),
            0o644,
        )?;
        if let Some(kc) = &self.kubeconfig {
            n.write(KUBECONFIG_PATH, kc, 0o600)?;
        }
        let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
        if let Some(args) = &self.update_engine {
            install_update_engine(&mut n, &crate::built_binary("fake-update-engine"), args)?;
            enable.push("update-engine.service");
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

/// Runs `binary` (the fake update_engine) with `args` as
/// `update-engine.service` on the node's own system bus, with the shipped
/// D-Bus policy (`com.coreos.update1.conf`), and makes the node boot into an
/// OS update it staged (see
/// [`boot_into_pending_updates`](crate::fake_update_engine::boot_into_pending_updates)).
/// Before boot; the caller enables `update-engine.service`.
pub fn install_update_engine(n: &mut SimNode, binary: &Path, args: &[String]) -> Result<()> {
    n.install_file(
        &crate::standin("com.coreos.update1.conf"),
        "/etc/dbus-1/system.d/com.coreos.update1.conf",
        0o644,
    )?;
    n.write(
        "/etc/systemd/system/update-engine.service",
        format!(
            "[Unit]\nDescription=update_engine stand-in\n\n[Service]\nType=dbus\nBusName=com.coreos.update1\n\
             ExecStart={} {}\n\n[Install]\nWantedBy=multi-user.target\n",
            binary.display(),
            args.join(" ")
        ),
        0o644,
    )?;
    crate::fake_update_engine::boot_into_pending_updates(n, OS_RELEASE);
    Ok(())
}

/// The arguments the shipped `units/kubelet.service` gives kubelet-wrapper
/// with the unit's own defaults (a node without the Ignition config's
/// drop-in) and `kubelet_args` as kubelet.env's `KUBELET_ARGS`, as its
/// start record shows them (`start image=URL:TAG args=<these>`). Read from
/// the unit's `ExecStart=`, `${VAR}` and `$VAR` expanded from its
/// `Environment=` lines as systemd expands them; always the repository's
/// unit, so a mutated unit under test differs from it.
pub fn shipped_kubelet_args(kubelet_args: &str) -> String {
    let path = crate::project_root().join("units/kubelet.service");
    let text = std::fs::read_to_string(&path).expect("reading units/kubelet.service");
    let mut env = std::collections::BTreeMap::new();
    env.insert("KUBELET_ARGS".to_string(), kubelet_args.to_string());
    let mut exec = String::new();
    let mut in_exec = false;
    for line in text.lines() {
        if in_exec {
            exec.push(' ');
            exec.push_str(line.trim_end_matches('\\').trim());
            in_exec = line.ends_with('\\');
        } else if let Some(kv) = line.strip_prefix("Environment=") {
            let (k, v) = kv.split_once('=').expect("Environment=NAME=value");
            env.insert(k.to_string(), v.to_string());
        } else if let Some(cmd) = line.strip_prefix("ExecStart=") {
            exec.push_str(cmd.trim_end_matches('\\').trim());
            in_exec = line.ends_with('\\');
        }
    }
    let mut args = Vec::new();
    for word in exec.split_whitespace().skip(1) {
        if let Some(name) = word.strip_prefix('$').filter(|n| !n.starts_with('{')) {
            args.extend(
                env.get(name)
                    .into_iter()
                    .flat_map(|v| v.split_whitespace().map(str::to_string)),
            );
        } else {
            let mut w = word.to_string();
            for (k, v) in &env {
                w = w.replace(&format!("${{{k}}}"), v);
            }
            args.push(w);
        }
    }
    args.join(" ")
}

/// The start record kubelet-wrapper writes for image `SEED_URL:tag` under
/// the shipped unit with its defaults and `kubelet_args` as kubelet.env's
/// `KUBELET_ARGS`.
pub fn kubelet_start_record(tag: &str, kubelet_args: &str) -> String {
    format!(
        "start image={SEED_URL}:{tag} args={}",
        shipped_kubelet_args(kubelet_args)
    )
}

/// What the agent gives a kubelet of Kubernetes 1.8 or 1.9 (no
/// configuration file yet: every setting a flag) on docker, for a worker
/// with the default `kubelet_config` and the shared kubeconfig: the
/// expectation, written out here rather than derived from the renderer.
pub fn flags_only_kubelet_args(cgroup_driver: &str) -> String {
    flags_only(cgroup_driver, None)
}

/// [`flags_only_kubelet_args`] for a master (`master` or `bootkube-master`):
/// the master taint too.
pub fn flags_only_master_kubelet_args(cgroup_driver: &str) -> String {
    flags_only(
        cgroup_driver,
        Some("--register-with-taints=node-role.kubernetes.io/master=:NoSchedule"),
    )
}

fn flags_only(cgroup_driver: &str, taints: Option<&str>) -> String {
    let cgroup_driver = format!("--cgroup-driver={cgroup_driver}");
    [
        "--kubeconfig=/etc/kubernetes/kubeconfig",
        "--client-ca-file=/etc/kubernetes/ca.crt",
        "--anonymous-auth=false",
        "--authentication-token-webhook=true",
        "--authorization-mode=Webhook",
        "--read-only-port=0",
        "--pod-manifest-path=/etc/kubernetes/manifests",
        "--cluster-dns=10.3.0.10",
        "--cluster-domain=cluster.local",
        &cgroup_driver,
    ]
    .into_iter()
    .chain(taints)
    .chain([
        "--network-plugin=cni",
        "--cni-conf-dir=/etc/kubernetes/cni/net.d",
        "--cni-bin-dir=/opt/cni/bin",
    ])
    .collect::<Vec<_>>()
    .join(" ")
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

/// The seed kubelet.env of an [`AgentNodeSpec`] node (and of the fleet's
/// processes): the tag of the cluster the power-loss rig's API server runs.
pub const SEED_KUBELET_ENV: &str =
    "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\n";
/// The os-release of an [`AgentNodeSpec`] node (and of the fleet's
/// processes) before any update.
pub const OS_RELEASE_TEXT: &str =
    "ID=coreos\nVERSION=1520.3.0\nVERSION_ID=1520.3.0\nCOREOS_BOARD=amd64-usr\n";

/// The fake update_engine as a unit of the node.
#[derive(Debug, Clone)]
pub struct UpdateEngineUnit {
    /// Host path of the `fake-update-engine` binary (visible inside the node
    /// at the same path, through the overlay's lower dir).
    pub binary: PathBuf,
    /// Extra arguments, e.g. `--scenario update --step-ms 100`.
    pub args: Vec<String>,
}

/// A node with the real agent where everything is given explicitly (any
/// agent binary, e.g. a release build; the config as text; drop-ins and
/// more units), for the power-loss rig and the benchmarks; tests use the
/// [`AgentNode`] builder instead. Built by [`agent_node`].
#[derive(Debug, Clone)]
pub struct AgentNodeSpec {
    pub name: String,
    /// Host path of the agent binary.
    pub agent: PathBuf,
    /// The agent's config (JSON text).
    pub config: String,
    /// The kubeconfig text, if any.
    pub kubeconfig: Option<String>,
    pub update_engine: Option<UpdateEngineUnit>,
    /// Drop-ins: (unit, name, contents).
    pub drop_ins: Vec<(String, String, String)>,
    /// More unit files to install, and units to enable.
    pub extra_units: Vec<PathBuf>,
    pub extra_enable: Vec<String>,
}

impl AgentNodeSpec {
    pub fn new(name: &str, agent: &Path, config: impl Into<String>) -> Self {
        AgentNodeSpec {
            name: name.to_string(),
            agent: agent.to_path_buf(),
            config: config.into(),
            kubeconfig: None,
            update_engine: None,
            drop_ins: Vec::new(),
            extra_units: Vec::new(),
            extra_enable: Vec::new(),
        }
    }
}

/// A node (not booted) with the real agent as described by `spec`.
pub fn agent_node(spec: &AgentNodeSpec) -> Result<SimNode> {
    let mut n = SimNode::new(&spec.name)?;
    install_units(&n, UNITS)?;
    install_kubelet_wrapper(&n, &[STANDIN_CLUSTER_TAG])?;
    n.write(
        "/etc/kubernetes/installer/kubelet.env",
        SEED_KUBELET_ENV,
        0o644,
    )?;
    n.write(OS_RELEASE, OS_RELEASE_TEXT, 0o644)?;
    n.install_file(&spec.agent, AGENT_PATH, 0o755)
        .with_context(|| format!("installing the agent {}", spec.agent.display()))?;
    n.write(CONFIG_PATH, &spec.config, 0o644)?;
    if let Some(kc) = &spec.kubeconfig {
        n.write(KUBECONFIG_PATH, kc, 0o600)?;
    }
    let mut enable = vec!["k8s-node-bootstrap.service", "kubelet.service"];
    if let Some(ue) = &spec.update_engine {
        install_update_engine(&mut n, &ue.binary, &ue.args)?;
        enable.push("update-engine.service");
    }
    n.install_units(&spec.extra_units)?;
    enable.extend(spec.extra_enable.iter().map(String::as_str));
    for (unit, name, contents) in &spec.drop_ins {
        n.drop_in(unit, name, contents)?;
    }
    n.enable(&enable)?;
    Ok(n)
}

/// Checks the node's kubelet.env: present, parseable systemd EnvironmentFile
/// lines, every seed key, the image tag of `cluster_version` and the cgroup
/// driver of the node's docker.
pub fn check_kubelet_env(text: &str, cluster_version: &str, cgroup_driver: &str) -> Result<()> {
    let want_tag = cluster_version.replace('+', "_");
    let mut keys = std::collections::BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((k, v)) = l.split_once('=') else {
            bail!("kubelet.env line {}: {line:?} is not KEY=value", i + 1);
        };
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(v);
        keys.insert(k.trim().to_string(), v.to_string());
    }
    if !text.ends_with('\n') {
        bail!("kubelet.env does not end with a newline (truncated?): {text:?}");
    }
    match keys.get("KUBELET_IMAGE_URL").map(String::as_str) {
        Some("quay.io/coreos/hyperkube") => {}
        other => bail!("kubelet.env KUBELET_IMAGE_URL is {other:?}: {text:?}"),
    }
    match keys.get("KUBELET_IMAGE_TAG") {
        Some(t) if *t == want_tag => {}
        other => bail!("kubelet.env KUBELET_IMAGE_TAG is {other:?}, want {want_tag:?}: {text:?}"),
    }
    match keys.get("KUBELET_CGROUP_DRIVER") {
        Some(d) if d == cgroup_driver => {}
        other => bail!(
            "kubelet.env KUBELET_CGROUP_DRIVER is {other:?}, want {cgroup_driver:?}: {text:?}"
        ),
    }
    Ok(())
}

/// The cgroup driver docker uses by default on this host, and so on its
/// simulated nodes (they see the host's hierarchy): `systemd` on a unified
/// cgroup v2 hierarchy, `cgroupfs` on v1.
pub fn host_cgroup_driver() -> &'static str {
    if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        "systemd"
    } else {
        "cgroupfs"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_kubelet_args_are_the_units_with_its_defaults() {
        let args = shipped_kubelet_args("--config=/x --kubeconfig=/y");
        assert_eq!(
            args,
            "--lock-file=/var/run/lock/kubelet.lock --exit-on-lock-contention \
             --node-labels=node.kubernetes.io/role=worker --config=/x --kubeconfig=/y"
        );
        assert!(!args.contains('$') && !args.contains('\\'), "{args}");
    }

    #[test]
    fn kubelet_env_check_accepts_the_real_file_and_rejects_truncation() {
        let good = "KUBELET_IMAGE_URL=\"quay.io/coreos/hyperkube\"\nKUBELET_IMAGE_TAG=\"v1.9.6_coreos.0\"\nKUBELET_CGROUP_DRIVER=\"cgroupfs\"\n";
        check_kubelet_env(good, "v1.9.6+coreos.0", "cgroupfs").unwrap();
        assert!(check_kubelet_env(&good[..good.len() - 5], "v1.9.6+coreos.0", "cgroupfs").is_err());
        assert!(check_kubelet_env(&good[..40], "v1.9.6+coreos.0", "cgroupfs").is_err());
        assert!(check_kubelet_env(good, "v1.10.2+coreos.0", "cgroupfs").is_err());
        assert!(check_kubelet_env(good, "v1.9.6+coreos.0", "systemd").is_err());
        assert!(check_kubelet_env("", "v1.9.6+coreos.0", "cgroupfs").is_err());
    }
}
