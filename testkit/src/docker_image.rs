//! The real docker as a torcx image: Debian's docker.io 20.10 (dockerd, the
//! docker CLI, containerd with its runc shim, runc, docker-init,
//! docker-proxy) packed as Flatcar packed its docker torcx images
//! (`tar -C root -czf docker:<ref>.torcx.tgz .`, `.torcx/manifest.json`
//! listing the binaries torcx links into `/run/torcx/bin` and the units it
//! copies into `/run/systemd/system`), with Flatcar-style units:
//! `containerd.service`, `docker.service` (`dockerd --host=fd://` with the
//! image's containerd, `$DOCKER_OPTS` for the node's own options) and
//! `docker.socket` (`/var/run/docker.sock`, enabled through
//! `sockets.target.wants`, so the first client starts docker, as on
//! Container Linux).
//!
//! The binaries are the host's (the node's libraries are the host's too: a
//! simulated node's root is the host's `/`; the VM image carries the same
//! Debian libraries). The archive is built once per set of inputs and
//! cached under `$NB_TEST_CACHE/docker-torcx/` (about 60 MB; a few seconds
//! to pack).

use anyhow::{Context as _, Result, bail};
use sha2::{Digest, Sha256};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The torcx reference of the image (what the runtime mappings and the
/// package manifest name).
pub const REFERENCE: &str = "20.10";

/// The binaries: (name in the image's `bin/`, where Debian installs it).
const BINARIES: &[(&str, &str)] = &[
    ("dockerd", "/usr/sbin/dockerd"),
    ("docker", "/usr/bin/docker"),
    ("containerd", "/usr/bin/containerd"),
    (
        "containerd-shim-runc-v2",
        "/usr/bin/containerd-shim-runc-v2",
    ),
    ("runc", "/usr/sbin/runc"),
    ("docker-init", "/usr/bin/docker-init"),
    ("docker-proxy", "/usr/sbin/docker-proxy"),
];

const CONTAINERD_SERVICE: &str = "[Unit]\nDescription=containerd container runtime (torcx image)\n\
Documentation=https://containerd.io\nAfter=network.target\n\n[Service]\n\
EnvironmentFile=/run/metadata/torcx\nDelegate=yes\n\
ExecStart=/usr/bin/env PATH=${TORCX_BINDIR}:${PATH} ${TORCX_BINDIR}/containerd --config ${TORCX_UNPACKDIR}/docker/usr/share/containerd/config.toml\n\
KillMode=process\nRestart=always\nLimitNOFILE=1048576\nLimitNPROC=infinity\nLimitCORE=infinity\nTasksMax=infinity\n\n\
[Install]\nWantedBy=multi-user.target\n";

const DOCKER_SERVICE: &str = "[Unit]\nDescription=Docker Application Container Engine (torcx image)\n\
Documentation=https://docs.docker.com\n\
After=containerd.service docker.socket network-online.target\nWants=network-online.target\n\
Requires=containerd.service docker.socket\n\n[Service]\nType=notify\n\
EnvironmentFile=/run/metadata/torcx\nEnvironmentFile=-/run/flannel/flannel_docker_opts.env\n\
ExecStart=/usr/bin/env PATH=${TORCX_BINDIR}:${PATH} ${TORCX_BINDIR}/dockerd --host=fd:// \
--containerd=/run/docker/libcontainerd/docker-containerd.sock $DOCKER_OPTS $DOCKER_CGROUPS $DOCKER_OPT_BIP $DOCKER_OPT_MTU $DOCKER_OPT_IPMASQ\n\
ExecReload=/bin/kill -s HUP $MAINPID\nLimitNOFILE=1048576\nLimitNPROC=infinity\nLimitCORE=infinity\nTasksMax=infinity\n\
TimeoutStartSec=0\nDelegate=yes\nKillMode=process\nRestart=on-failure\nStartLimitBurst=3\nStartLimitIntervalSec=60s\n\n\
[Install]\nWantedBy=multi-user.target\n";

const DOCKER_SOCKET: &str = "[Unit]\nDescription=Docker Socket for the API (torcx image)\nPartOf=docker.service\n\n\
[Socket]\nListenStream=/var/run/docker.sock\nSocketMode=0660\nSocketUser=root\nSocketGroup=root\n\n\
[Install]\nWantedBy=sockets.target\n";

const CONTAINERD_CONFIG: &str = "# containerd for dockerd (torcx image): no CRI plugin, the socket docker.service names.\n\
version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/docker/libcontainerd/containerd\"\n\
disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n[grpc]\n  address = \"/run/docker/libcontainerd/docker-containerd.sock\"\n";

/// The real docker's torcx image.
#[derive(Debug, Clone)]
pub struct RealDocker {
    /// The `.torcx.tgz` (in the cache; read it, do not change it).
    pub archive: PathBuf,
    /// What Docker's API reports as its version (`20.10.24+dfsg1`): the
    /// runtime version a kubelet on it registers (`docker://<version>`).
    pub version: String,
}

impl RealDocker {
    pub fn bytes(&self) -> Result<Vec<u8>> {
        std::fs::read(&self.archive).with_context(|| format!("reading {}", self.archive.display()))
    }
}

/// The image, packed (or found in the cache) once per test process.
pub fn real_docker() -> Result<RealDocker> {
    static FOUND: std::sync::OnceLock<std::result::Result<RealDocker, String>> =
        std::sync::OnceLock::new();
    crate::once(&FOUND, pack)
}

fn pack() -> Result<RealDocker> {
    let out = Command::new("/usr/sbin/dockerd").arg("--version").output().context(
        "running /usr/sbin/dockerd --version (Debian's docker.io; scripts/setup.sh installs it)",
    )?;
    // "Docker version 20.10.24+dfsg1, build 5d6db84"
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let version = text
        .split_whitespace()
        .nth(2)
        .map(|v| v.trim_end_matches(',').to_string())
        .with_context(|| format!("no version in dockerd --version: {text:?}"))?;
    if !version.starts_with(&format!("{REFERENCE}.")) {
        bail!("the host's dockerd is {version}, not docker {REFERENCE}");
    }
    // The cache key: each binary's identity (path, size, mtime: a package
    // upgrade changes them) and everything this module writes.
    let mut h = Sha256::new();
    for (name, path) in BINARIES {
        let m =
            std::fs::metadata(path).with_context(|| format!("{path} (docker.io) is missing"))?;
        h.update(format!("{name} {path} {} {}\n", m.len(), m.mtime()));
    }
    for text in [
        CONTAINERD_SERVICE,
        DOCKER_SERVICE,
        DOCKER_SOCKET,
        CONTAINERD_CONFIG,
    ] {
        h.update(text);
    }
    h.update(manifest());
    let key = &hex::encode(h.finalize())[..16];
    let cache = std::env::var_os("NB_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/node-bootstrap-tests"))
        .join("docker-torcx")
        .join(key);
    let archive = cache.join(format!("docker:{REFERENCE}.torcx.tgz"));
    if !archive.exists() {
        std::fs::create_dir_all(&cache)?;
        let stage = tempfile::tempdir_in(&cache)?;
        let root = stage.path().join("root");
        lay_out(&root)?;
        let tmp = stage.path().join("image.torcx.tgz");
        let st = Command::new("tar")
            .args([
                "--sort=name",
                "--owner=0",
                "--group=0",
                "--numeric-owner",
                "--mtime=@1500000000",
                "-I",
                "gzip -1",
                "-C",
            ])
            .arg(&root)
            .arg("-cf")
            .arg(&tmp)
            .arg(".")
            .status()
            .context("running tar")?;
        if !st.success() {
            bail!("tar of the docker torcx image failed: {st}");
        }
        std::fs::rename(&tmp, &archive)?;
    }
    Ok(RealDocker { archive, version })
}

fn manifest() -> String {
    let bins: Vec<String> = BINARIES.iter().map(|(n, _)| format!("/bin/{n}")).collect();
    serde_json::json!({"kind": "image-manifest-v0", "value": {
        "bin": bins,
        "units": [
            "/lib/systemd/system/containerd.service",
            "/lib/systemd/system/docker.service",
            "/lib/systemd/system/docker.socket",
            "/lib/systemd/system/sockets.target.wants",
        ],
    }})
    .to_string()
}

/// The image's tree under `root`.
fn lay_out(root: &Path) -> Result<()> {
    let write =
        |rel: &str, data: &[u8], mode: u32| crate::files::write_mode(&root.join(rel), data, mode);
    write(".torcx/manifest.json", manifest().as_bytes(), 0o644)?;
    for (name, path) in BINARIES {
        // Copy the file itself (docker-init is a link to tini-static).
        let data = std::fs::read(path).with_context(|| format!("reading {path}"))?;
        write(&format!("bin/{name}"), &data, 0o755)?;
    }
    write(
        "lib/systemd/system/containerd.service",
        CONTAINERD_SERVICE.as_bytes(),
        0o644,
    )?;
    write(
        "lib/systemd/system/docker.service",
        DOCKER_SERVICE.as_bytes(),
        0o644,
    )?;
    write(
        "lib/systemd/system/docker.socket",
        DOCKER_SOCKET.as_bytes(),
        0o644,
    )?;
    write(
        "usr/share/containerd/config.toml",
        CONTAINERD_CONFIG.as_bytes(),
        0o644,
    )?;
    let wants = root.join("lib/systemd/system/sockets.target.wants");
    std::fs::create_dir_all(&wants)?;
    std::os::unix::fs::symlink("../docker.socket", wants.join("docker.socket"))?;
    Ok(())
}
