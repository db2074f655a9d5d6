//! Today's Flatcar's containerd on the tests' nodes: containerd 2.1.4
//! (built from its source by `scripts/build-containerd2.sh`,
//! [`crate::containerd::v2_bin`]) as a simulated node's OS containerd, laid
//! out as Flatcar ships it ([`install_os`]: the binaries in `/usr/bin`,
//! Flatcar's `containerd.service`, which runs `containerd --config
//! ${CONTAINERD_CONFIG}`, and its two config files), Flatcar's own
//! cgroup-v1 drop-in ([`install_flatcar_cgroupfs_dropin`]), or as the
//! sysext-bakery's containerd image ([`image`]); and crictl 1.32, the CRI
//! v1 client, driving a pod the way a 1.32 kubelet does ([`CrictlPod`]).

use crate::simnode::SimNode;
use crate::torcx_fixtures::sysext_image_of;
use anyhow::{Context as _, Result, bail, ensure};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Flatcar's `containerd.service` (flatcar/scripts, coreos-overlay
/// `coreos/sysext/containerd/usr/lib/systemd/system/containerd.service`),
/// without the torcx prefix of its `--config` (empty on today's Flatcar)
/// and the docker socket link.
pub const FLATCAR_UNIT: &str = "\
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target

[Service]
Delegate=yes
Environment=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/opt/bin
Environment=CONTAINERD_CONFIG=/usr/share/containerd/config.toml
ExecStart=/usr/bin/containerd --config ${CONTAINERD_CONFIG}
KillMode=process
Type=notify
Restart=always
RestartSec=5
LimitNOFILE=1048576
LimitNPROC=infinity
LimitCORE=infinity
TasksMax=infinity

[Install]
WantedBy=multi-user.target
";

/// Flatcar's `/usr/share/containerd/config.toml` (version 2, systemd
/// cgroups), its settings.
pub const FLATCAR_CONFIG: &str = "version = 2
root = \"/var/lib/containerd\"
state = \"/run/containerd\"
subreaper = true
oom_score = -999
[grpc]
address = \"/run/containerd/containerd.sock\"
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]
runtime_type = \"io.containerd.runc.v2\"
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]
SystemdCgroup = true
";

/// Flatcar's `/usr/share/containerd/config-cgroupfs.toml`, its settings.
pub const FLATCAR_CONFIG_CGROUPFS: &str = "version = 2
root = \"/var/lib/containerd\"
state = \"/run/containerd\"
subreaper = true
oom_score = -999
[grpc]
address = \"/run/containerd/containerd.sock\"
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]
runtime_type = \"io.containerd.runc.v2\"
[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]
SystemdCgroup = false
";

/// The sysext-bakery's `/usr/share/containerd/config.toml` (version 3;
/// flatcar/sysext-bakery `containerd.sysext/files/usr/share/containerd/config.toml`).
pub const BAKERY_CONFIG: &str = "version = 3
# set containerd's OOM score
oom_score = -999
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = true
";

/// Flatcar's drop-in on nodes upgraded across 2969 with cgroup v1 kept
/// (Flatcar's "Switching to unified cgroups" docs).
pub const FLATCAR_CGROUPFS_DROPIN: &str = "\
[Service]
Environment=CONTAINERD_CONFIG=/usr/share/containerd/config-cgroupfs.toml
";

/// containerd 2.1.4's programs and where Flatcar has them.
const PROGRAMS: &[(&str, &str)] = &[
    ("containerd", "usr/bin/containerd"),
    ("ctr", "usr/bin/ctr"),
    ("containerd-shim-runc-v2", "usr/bin/containerd-shim-runc-v2"),
];

/// What `containerd --version` of 2.1.4 names: `v2.1.4`.
pub const VERSION: &str = "v2.1.4";

/// Makes containerd 2.1.4 the node's OS containerd, before boot: its
/// programs over Debian's in `/usr/bin`, Flatcar's unit and config files.
pub fn install_os(n: &SimNode) -> Result<()> {
    crate::containerd::can_run_v2()?;
    let bin = crate::containerd::v2_bin();
    for (program, inside) in PROGRAMS {
        n.install_file(&bin.join(program), &format!("/{inside}"), 0o755)?;
    }
    n.write(
        "/usr/lib/systemd/system/containerd.service",
        FLATCAR_UNIT,
        0o644,
    )?;
    n.write("/usr/share/containerd/config.toml", FLATCAR_CONFIG, 0o644)?;
    n.write(
        "/usr/share/containerd/config-cgroupfs.toml",
        FLATCAR_CONFIG_CGROUPFS,
        0o644,
    )?;
    // Debian's own config is not Flatcar's.
    n.hide("/etc/containerd/config.toml")
}

/// Flatcar's `containerd.service.d/10-use-cgroupfs.conf`, before boot.
pub fn install_flatcar_cgroupfs_dropin(n: &SimNode) -> Result<()> {
    n.drop_in(
        "containerd.service",
        "10-use-cgroupfs",
        FLATCAR_CGROUPFS_DROPIN,
    )
}

/// A containerd 2.1.4 image laid out as the sysext-bakery builds it: the
/// programs, Flatcar's unit, the bakery's version-3 config, `release`.
pub fn image(release: &str) -> Result<Vec<u8>> {
    crate::containerd::can_run_v2()?;
    let bin = crate::containerd::v2_bin();
    let mut files: Vec<(String, Vec<u8>, u32)> = Vec::new();
    for (program, inside) in PROGRAMS {
        let bytes = std::fs::read(bin.join(program))
            .with_context(|| format!("reading containerd 2.1.4's {program}"))?;
        files.push((inside.to_string(), bytes, 0o755));
    }
    files.push((
        "usr/lib/systemd/system/containerd.service".into(),
        FLATCAR_UNIT.into(),
        0o644,
    ));
    files.push((
        "usr/share/containerd/config.toml".into(),
        BAKERY_CONFIG.into(),
        0o644,
    ));
    let refs: Vec<(&str, &[u8], u32)> = files
        .iter()
        .map(|(p, b, m)| (p.as_str(), b.as_slice(), *m))
        .collect();
    sysext_image_of(crate::containerd_sysext::PRODUCT, &refs, release)
}

/// crictl 1.32 inside the node (the host's build, seen through the
/// node's root), at `endpoint` (`unix:///run/containerd/containerd.sock`).
pub fn crictl(n: &SimNode, endpoint: &str, args: &[&str]) -> Result<String> {
    let crictl = crate::containerd::v2_bin().join("crictl");
    let crictl = crictl.display().to_string();
    let mut argv = vec![
        crictl.as_str(),
        "--runtime-endpoint",
        endpoint,
        "--image-endpoint",
        endpoint,
        "--timeout",
        "30s",
    ];
    argv.extend_from_slice(args);
    let out = n.exec(&argv)?;
    if !out.status.success() {
        bail!(
            "crictl {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A pod run through crictl as a kubelet runs one: `runp` (the sandbox,
/// from the runtime's configured sandbox image), `create` and `start` of a
/// container of `image`, in the node's network (no CNI needed), its
/// cgroup parent in the form `cgroup_driver` calls for.
pub struct CrictlPod {
    pub pod_id: String,
    pub container_id: String,
}

/// The cgroup parent a kubelet of `driver` gives its pods: a slice for
/// systemd, a path for cgroupfs.
pub fn cgroup_parent(driver: &str) -> &'static str {
    if driver == "systemd" {
        "nbtest.slice"
    } else {
        "/nbtest"
    }
}

impl CrictlPod {
    /// Runs it; the container writes `MARKER` to its log and to
    /// `/tmp/marker` in its own root, then sleeps.
    pub fn run(
        n: &SimNode,
        endpoint: &str,
        name: &str,
        image: &str,
        driver: &str,
    ) -> Result<CrictlPod> {
        let pod = json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid"), "attempt": 0},
            "log_directory": format!("/var/log/pods/{name}"),
            "linux": {
                "cgroup_parent": cgroup_parent(driver),
                "security_context": {"namespace_options": {"network": 2}}
            }
        });
        let ctr = json!({
            "metadata": {"name": "main"},
            "image": {"image": image},
            "command": ["/bin/sh", "-c", format!("echo {MARKER}; echo inside > /tmp/marker; exec sleep 3600")],
            "log_path": "main.log",
            "linux": {}
        });
        n.write(&format!("/tmp/{name}-pod.json"), pod.to_string(), 0o644)?;
        n.write(&format!("/tmp/{name}-ctr.json"), ctr.to_string(), 0o644)?;
        let (pod_json, ctr_json) = (
            format!("/tmp/{name}-pod.json"),
            format!("/tmp/{name}-ctr.json"),
        );
        let pod_id = crictl(n, endpoint, &["runp", &pod_json])?;
        let container_id = crictl(n, endpoint, &["create", &pod_id, &ctr_json, &pod_json])?;
        crictl(n, endpoint, &["start", &container_id])?;
        Ok(CrictlPod {
            pod_id,
            container_id,
        })
    }

    /// `crictl inspect` of the container, once it runs.
    pub fn wait_running(&self, n: &SimNode, endpoint: &str, within: Duration) -> Result<Value> {
        let deadline = Instant::now() + within;
        loop {
            let v: Value = serde_json::from_str(&crictl(
                n,
                endpoint,
                &["inspect", "-o", "json", &self.container_id],
            )?)?;
            if v["status"]["state"] == "CONTAINER_RUNNING" {
                return Ok(v);
            }
            ensure!(
                Instant::now() < deadline,
                "container {} not running within {within:?}: {v:#}",
                self.container_id
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// What the pod's container prints first.
pub const MARKER: &str = "hello-from-crictl-pod";
