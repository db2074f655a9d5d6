//! Kubelet system extension images and a signed mirror of them, for the
//! agent's `kubelet-sysext` step (`kubelet.backend = "sysext"`): the image
//! laid out as Flatcar's sysext-bakery builds kubernetes images
//! (`usr/bin/kubelet`, `usr/lib/extension-release.d/extension-release.kubernetes`
//! with `ID`, `SYSEXT_LEVEL`, `ARCHITECTURE`), with any kubelet binary (a
//! real one by path, or [`fake_kubelet`]); the mirror served on loopback
//! with metadata written and signed by the agent's own `metadata generate
//! --sign-key`, as an operator publishes one; and what a simulated node
//! needs to use both ([`prepare_node`]).
//!
//! A node test with a real kubelet:
//! ```ignore
//! let mirror = KubeletMirror::start()?;
//! // `_any`: fits the node whatever its os-release (a Container Linux
//! // test OS included); `release("flatcar", "1.0")` fits Flatcar only.
//! let image = kubelet_image(Kubelet::Path(&real_kubelet), &release("_any", "1.0"))?;
//! mirror.publish(&[("v1.20.2", &image)])?;
//! let n = AgentNode::new("w").config(mirror.config_patch()).kubeconfig(kc).build()?;
//! prepare_node(&n, &mirror)?; // keyring, kubelet.service's drop-in, shared root
//! ```
//! A rig with a signed mirror of its own can instead put the image in its
//! mirror directory as [`artifact_name`] before `metadata generate`, and
//! merge `{"kubelet": {"backend": "sysext"}}` into the agent config.

use crate::pkgserver::PkgServer;
use crate::simnode::SimNode;
use crate::torcx_fixtures::{SigningKey, sysext_image_of};
use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use std::path::Path;

/// The extension's name (the agent's default `kubelet.extension_name`).
pub const EXTENSION: &str = "kubernetes";
/// This machine's architecture as systemd and the bakery name it.
pub const ARCH: &str = "x86-64";
/// Where [`prepare_node`] puts the mirror's public key on the node.
pub const KEYRING_PATH: &str = "/etc/kubernetes/installer/kubelet-images.asc";
/// Where [`fake_kubelet`] records its starts.
pub const FAKE_STARTS: &str = "/var/lib/fake-kubelet/starts";

/// The kubelet binary an image carries.
pub enum Kubelet<'a> {
    /// A file on the host (a real kubelet).
    Path(&'a Path),
    /// These bytes.
    Bytes(&'a [u8]),
}

/// A kubelet stand-in for images: answers `--version` as the real one
/// does (`Kubernetes <version>`); run as the service, it records its start
/// (version and arguments) in [`FAKE_STARTS`] and then runs until stopped.
pub fn fake_kubelet(version: &str) -> Vec<u8> {
    format!(
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then echo \"Kubernetes {version}\"; exit 0; fi\n\
         mkdir -p {dir}\n\
         echo \"start version={version} args=$*\" >> {FAKE_STARTS}\n\
         exec sleep infinity\n",
        dir = Path::new(FAKE_STARTS).parent().unwrap().display()
    )
    .into_bytes()
}

/// An extension-release as the bakery writes it for kubernetes images.
pub fn release(id: &str, sysext_level: &str) -> String {
    format!("ID={id}\nSYSEXT_LEVEL={sysext_level}\nARCHITECTURE={ARCH}\n")
}

/// A Flatcar os-release of `version_id` (with `SYSEXT_LEVEL=1.0`, as
/// Flatcar has it).
pub fn flatcar_os_release(version_id: &str) -> String {
    format!(
        "NAME=\"Flatcar Container Linux by Kinvolk\"\nID=flatcar\nVERSION={version_id}\nVERSION_ID={version_id}\n\
         SYSEXT_LEVEL=1.0\nCOREOS_BOARD=\"amd64-usr\"\n"
    )
}

/// A kubelet sysext image: `usr/bin/kubelet` and
/// `extension-release.kubernetes` holding `release`.
pub fn kubelet_image(kubelet: Kubelet<'_>, release: &str) -> Result<Vec<u8>> {
    let owned;
    let bytes = match kubelet {
        Kubelet::Bytes(b) => b,
        Kubelet::Path(p) => {
            owned = std::fs::read(p).with_context(|| format!("reading {}", p.display()))?;
            &owned[..]
        }
    };
    sysext_image_of(EXTENSION, &[("usr/bin/kubelet", bytes, 0o755)], release)
}

/// The mirror's file name of a kubelet image (`metadata generate` reads
/// version, series and arch from it).
pub fn artifact_name(version: &str) -> String {
    artifact_name_of(EXTENSION, version)
}

/// The mirror's file name of an image of `product`.
pub fn artifact_name_of(product: &str, version: &str) -> String {
    format!("{product}_{version}_any_{ARCH}.raw")
}

/// A signed mirror of system extension images of one product (the
/// agent's `kubernetes` and `containerd`) on a loopback package server.
pub struct ExtensionMirror {
    dir: tempfile::TempDir,
    product: String,
    pub key: SigningKey,
    pub server: PkgServer,
}

/// A mirror of kubelet images.
pub type KubeletMirror = ExtensionMirror;

impl ExtensionMirror {
    /// A mirror of kubelet images (product `kubernetes`).
    pub fn start() -> Result<ExtensionMirror> {
        Self::of(EXTENSION)
    }

    /// A mirror of `product` images.
    pub fn of(product: &str) -> Result<ExtensionMirror> {
        Ok(ExtensionMirror {
            dir: tempfile::tempdir()?,
            product: product.to_string(),
            key: SigningKey::generate("Extension images <extension-images@example.invalid>"),
            server: PkgServer::start()?,
        })
    }

    /// Publishes `images` (version, image), replacing what was published:
    /// the files go to `<product>/` of a mirror directory, the agent's
    /// `metadata generate --sign-key` writes and signs the metadata, and
    /// everything is served under `/mirror/`.
    pub fn publish(&self, images: &[(&str, &[u8])]) -> Result<()> {
        let all: Vec<(&str, &str, &[u8])> = images
            .iter()
            .map(|(version, image)| (self.product.as_str(), *version, *image))
            .collect();
        self.publish_products(&all)
    }

    /// [`publish`](Self::publish) of images of any products
    /// (`(product, version, image)`) in this one mirror, as an operator's
    /// mirror serves the kubelet and containerd side by side: a node whose
    /// `sources` name it finds each product under `<product>/`.
    pub fn publish_products(&self, images: &[(&str, &str, &[u8])]) -> Result<()> {
        let m = self.dir.path().join("mirror");
        let _ = std::fs::remove_dir_all(&m);
        for (product, version, image) in images {
            let dir = m.join(product);
            std::fs::create_dir_all(&dir)?;
            std::fs::write(dir.join(artifact_name_of(product, version)), image)?;
        }
        crate::cli::publish_mirror(
            &self.server,
            &m,
            &self.dir.path().join("signing-key.asc"),
            &self.key.secret_armored(),
        )
    }

    /// The served path of a published image (to serve other bytes there).
    pub fn image_path(&self, version: &str) -> String {
        format!(
            "/mirror/{}/{}",
            self.product,
            artifact_name_of(&self.product, version)
        )
    }

    /// The mirror's URL (`sources.url`).
    pub fn url(&self) -> String {
        self.server.url("/mirror")
    }

    /// The agent config patch for a node of this mirror of kubelet images:
    /// `kubelet.backend` `sysext`, and [`sources_patch`](Self::sources_patch).
    pub fn config_patch(&self) -> Value {
        self.config_patch_with_keyring(KEYRING_PATH)
    }

    /// [`config_patch`](Self::config_patch) with the keyring at `keyring`
    /// (a node laid out in a temp dir).
    pub fn config_patch_with_keyring(&self, keyring: &str) -> Value {
        let mut patch = self.sources_patch(keyring);
        crate::agentnode::merge(&mut patch, json!({"kubelet": {"backend": "sysext"}}));
        patch
    }

    /// The agent config patch that makes `sources` read only this mirror,
    /// trusting the key at `keyring` ([`prepare_node`] installs it at
    /// [`KEYRING_PATH`]).
    pub fn sources_patch(&self, keyring: &str) -> Value {
        json!({
            "sources": {
                "local_dir": "/nonexistent/node-bootstrap-local-store",
                "url": self.url(),
                "use_default": false,
                "use_cluster_bucket": false,
                "keyring": keyring,
                "timeout_secs": 10,
                "attempts": 2,
            },
        })
    }
}

/// Prepares a simulated node (before boot) for `kubelet.backend =
/// "sysext"`: the mirror's public key at [`KEYRING_PATH`], kubelet.service's
/// drop-in `units/kubelet-sysext.conf` (the kubelet is `/usr/bin/kubelet`
/// of the merged extension), and, for the simulated node only, a shared
/// root mount ([`share_root_for_merges`]): a real PID 1's root is shared,
/// the simulated node's is private, and a merge would then stay in
/// systemd-sysext's own mount namespace.
pub fn prepare_node(n: &SimNode, mirror: &KubeletMirror) -> Result<()> {
    n.write(KEYRING_PATH, mirror.key.public_armored(), 0o644)?;
    let drop_in = std::fs::read_to_string(crate::unit_file("kubelet-sysext.conf"))?;
    n.drop_in("kubelet.service", "10-kubelet-sysext", &drop_in)?;
    share_root_for_merges(n)
}

/// The simulated node's part of [`prepare_node`] (before boot): the
/// node's root mount shared, as a real PID 1 makes it at boot (systemd's
/// `mount_setup()` does `mount --make-rshared /` unless it runs in a
/// container, which the simulated node says it is). Only then does a merge
/// by `systemd-sysext` (which mounts from a mount namespace of its own)
/// reach PID 1's namespace, and from there every service's, the agent's
/// sandbox included (systemd makes a service's namespace a slave of the
/// node's, which propagates nothing when the node's root is private).
///
/// A unit of its own, with no sandbox, ordered before every service that
/// matters: a drop-in `ExecStartPre=+mount --make-rshared /` of a
/// sandboxed unit (k8s-node-bootstrap.service) does not do it, since `+`
/// drops the sandbox's restrictions but still runs the command in the
/// unit's own mount namespace (systemd 252, `exec_needs_mount_namespace`).
pub fn share_root_for_merges(n: &SimNode) -> Result<()> {
    n.write(
        &format!("/etc/systemd/system/{SHARED_ROOT_UNIT}"),
        SHARED_ROOT_UNIT_TEXT,
        0o644,
    )?;
    let wants = n.path("/etc/systemd/system/sysinit.target.wants");
    std::fs::create_dir_all(&wants).with_context(|| format!("creating {}", wants.display()))?;
    let link = wants.join(SHARED_ROOT_UNIT);
    if link.symlink_metadata().is_err() {
        std::os::unix::fs::symlink(format!("../{SHARED_ROOT_UNIT}"), &link)
            .with_context(|| format!("enabling {SHARED_ROOT_UNIT} on node {}", n.name()))?;
    }
    Ok(())
}

/// The simulated node's unit of [`share_root_for_merges`].
pub const SHARED_ROOT_UNIT: &str = "simnode-shared-root.service";
const SHARED_ROOT_UNIT_TEXT: &str = "\
# Simulated node only: what a real PID 1 does at boot outside a container.
[Unit]
Description=Simulated node: the root mount shared, as a real PID 1 makes it
DefaultDependencies=no
Before=sysinit.target systemd-sysext.service k8s-node-bootstrap.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/mount --make-rshared /
";

/// What [`fake_kubelet`] recorded of its starts on a node.
pub fn fake_kubelet_starts(n: &SimNode) -> Vec<String> {
    n.read(FAKE_STARTS)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A node laid out in a temp dir for `node-bootstrap kubelet ensure` (or
/// `containerd choose`) run on the host (the checks before anything is
/// installed): an os-release, the mirror's key, and a config with every
/// path under the dir (the OS's containerd at `/usr/bin/containerd` under
/// it: none unless a test puts one there). A `systemd-sysext` that fails
/// loudly comes first on the agent's `PATH`: outside a simulated node
/// nothing may ever be merged into the host.
pub struct DirNode {
    dir: tempfile::TempDir,
    pub mirror: ExtensionMirror,
}

impl DirNode {
    /// A node running `os_release` with an empty mirror of kubelet images.
    pub fn new(os_release: &str) -> Result<DirNode> {
        Self::with_mirror(os_release, ExtensionMirror::start()?)
    }

    /// A node running `os_release` with `mirror` (empty).
    pub fn with_mirror(os_release: &str, mirror: ExtensionMirror) -> Result<DirNode> {
        let n = DirNode {
            dir: tempfile::tempdir()?,
            mirror,
        };
        crate::torcx_fixtures::write(&n.path("/usr/lib/os-release"), os_release)?;
        crate::torcx_fixtures::write(&n.path(KEYRING_PATH), n.mirror.key.public_armored())?;
        let guard = n.path("/guard/systemd-sysext");
        crate::torcx_fixtures::write(
            &guard,
            "#!/bin/sh\necho 'systemd-sysext must not run on the host in this test' >&2\nexit 99\n",
        )?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755))?;
        let p = |s: &str| n.path(s).display().to_string();
        let mut config = json!({
            "paths": {
                "state_dir": p("/var/lib/node-bootstrap"),
                "run_dir": p("/run/node-bootstrap"),
                "os_release": p("/usr/lib/os-release"),
                "extensions_dir": p("/etc/extensions"),
                "seed_dir": p("/etc/kubernetes/installer"),
                "containerd_binary": p("/usr/bin/containerd"),
            },
            "addon": {
                "sysext_release_dir": p("/usr/lib/extension-release.d"),
                "systemd_config_dir": p("/etc/systemd/system"),
            },
            "kubelet": {"images_dir": p("/opt/extensions/kubernetes")},
            "runtime": {"containerd": {"images_dir": p("/opt/extensions/containerd")}},
        });
        let patch = if n.mirror.product == EXTENSION {
            n.mirror.config_patch_with_keyring(&p(KEYRING_PATH))
        } else {
            n.mirror.sources_patch(&p(KEYRING_PATH))
        };
        crate::agentnode::merge(&mut config, patch);
        crate::torcx_fixtures::write(&n.config_path(), config.to_string())?;
        Ok(n)
    }

    /// A node path under the temp dir.
    pub fn path(&self, inside: &str) -> std::path::PathBuf {
        self.dir.path().join(inside.trim_start_matches('/'))
    }

    pub fn config_path(&self) -> std::path::PathBuf {
        self.path("/etc/node-bootstrap/config.json")
    }

    /// Merges `patch` into the node's agent config.
    pub fn configure(&self, patch: Value) -> Result<()> {
        let mut config: Value = serde_json::from_slice(&std::fs::read(self.config_path())?)?;
        crate::agentnode::merge(&mut config, patch);
        crate::torcx_fixtures::write(&self.config_path(), config.to_string())
    }

    /// The agent with `args`, this node's config, text logs, the
    /// `systemd-sysext` guard first on its `PATH`, and a system bus that
    /// does not exist (the agent asks systemd for a merge: never this
    /// host's).
    pub fn agent(&self, args: &[&str]) -> std::process::Output {
        let path = format!(
            "{}:{}",
            self.path("/guard").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        crate::cli::agent_command()
            .arg("--config")
            .arg(self.config_path())
            .args(["--log-format", "text"])
            .args(args)
            .env("PATH", path)
            .env("DBUS_SYSTEM_BUS_ADDRESS", self.no_system_bus())
            .output()
            .expect("running the agent")
    }

    /// The system bus address [`DirNode::agent`] gives the agent: a socket
    /// nobody listens on.
    pub fn no_system_bus(&self) -> String {
        format!("unix:path={}", self.path("/guard/no-system-bus").display())
    }

    /// `node-bootstrap kubelet ensure --cluster-version <v> --json`.
    pub fn ensure(&self, cluster_version: &str) -> std::process::Output {
        self.agent(&[
            "kubelet",
            "ensure",
            "--cluster-version",
            cluster_version,
            "--json",
        ])
    }

    /// What is installed: the names in the images dir of the mirror's
    /// product (hidden partials included) and in the extensions dir.
    pub fn installed(&self) -> (Vec<String>, Vec<String>) {
        (
            crate::files::names(&self.path(&format!("/opt/extensions/{}", self.mirror.product))),
            crate::files::names(&self.path("/etc/extensions")),
        )
    }
}
