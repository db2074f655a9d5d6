//! The `runtime` config section: which container runtime the kubelet runs
//! on, and how containerd is configured when it is the one.
//!
//! ```json
//! "runtime": {
//!   "name": "auto",
//!   "sandbox_image": "registry.k8s.io/pause:3.10",
//!   "containerd": {
//!     "snapshotter": "overlayfs",
//!     "existing_config": "use",
//!     "start_timeout_secs": 60,
//!     "package": "sysext",
//!     "images_dir": "/opt/extensions/containerd",
//!     "sysext_mask": ["containerd-flatcar"],
//!     "max_image_bytes": 536870912,
//!     "merge_timeout_secs": 120
//!   }
//! }
//! ```
//!
//! - `name`: `auto` (default: docker through dockershim up to Kubernetes
//!   1.23, containerd from 1.24), `docker` (refused for 1.24 and newer,
//!   before anything is installed) or `containerd` (any version).
//! - `sandbox_image`: the pod sandbox ("pause") image. containerd's
//!   `sandbox_image` (default `registry.k8s.io/pause:3.10`); with docker,
//!   the kubelet's `--pod-infra-container-image` when set (else the
//!   kubelet's own default).
//! - `containerd.snapshotter`: containerd's snapshotter (default
//!   `overlayfs`; `native` where the root file system cannot hold overlay
//!   mounts).
//! - `containerd.existing_config`: what to do when containerd's config
//!   file exists and is not the agent's: `use` (default: keep it, say so,
//!   and take the cgroup driver containerd reports) or `refuse` (exit 4,
//!   naming the file).
//! - `containerd.start_timeout_secs`: how long containerd may take to
//!   answer on its socket once started (default 60, 1..600).
//! - `containerd.package`: where the OS's containerd does not fit the
//!   cluster (none, or a version the runtime mappings do not list for the
//!   cluster's Kubernetes: [`super::version`]), `sysext` (default) installs
//!   a containerd system extension from the artifact search path
//!   ([`super::package`]); `none` refuses (exit 7), naming the OS's
//!   containerd and the list.
//! - `containerd.images_dir`: where containerd's versioned images are kept
//!   (`containerd-<version>-<arch>.raw`); the link is
//!   `<paths.extensions_dir>/containerd.raw`.
//! - `containerd.sysext_mask`: the OS's own extensions switched off
//!   (linked to `/dev/null`) while the agent's containerd is merged
//!   (default Flatcar's built-in `containerd-flatcar`).
//! - `containerd.max_image_bytes`: the largest image accepted (default
//!   512 MiB); `containerd.merge_timeout_secs`: how long `systemd-sysext
//!   refresh` may take (default 120, 1..1800).

use super::choice::Requested;
use crate::settings::{FieldError, FieldResult, absolute_path, seconds_in};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// containerd's sandbox image unless configured: the one containerd 2.0
/// and 2.1 default to, on the registry every Kubernetes release uses.
pub const DEFAULT_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Largest containerd image accepted unless configured (the bakery's
/// containerd images are about 40 MiB).
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 512 * 1024 * 1024;

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRuntime {
    pub name: Option<Requested>,
    pub sandbox_image: Option<String>,
    #[serde(default)]
    pub containerd: RawContainerd,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawContainerd {
    pub snapshotter: Option<String>,
    pub existing_config: Option<ExistingConfig>,
    pub start_timeout_secs: Option<u64>,
    pub package: Option<Package>,
    pub images_dir: Option<PathBuf>,
    pub sysext_mask: Option<Vec<String>>,
    pub max_image_bytes: Option<u64>,
    pub merge_timeout_secs: Option<u64>,
}

/// Whether the agent may install containerd where the OS's does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Package {
    /// The OS's containerd or nothing (refused, exit 7).
    None,
    /// A containerd system extension from the artifact search path.
    #[default]
    Sysext,
}

/// What to do with a containerd config file the agent did not write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ExistingConfig {
    #[default]
    Use,
    Refuse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    pub requested: Requested,
    /// As configured; `None`: containerd's [`DEFAULT_SANDBOX_IMAGE`], the
    /// kubelet's default with docker.
    pub sandbox_image: Option<String>,
    pub containerd: ContainerdSettings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdSettings {
    pub snapshotter: String,
    pub existing_config: ExistingConfig,
    pub start_timeout: Duration,
    pub package: Package,
    pub images_dir: PathBuf,
    pub sysext_mask: Vec<String>,
    pub max_image_bytes: u64,
    pub merge_timeout: Duration,
}

impl RuntimeSettings {
    /// The section as a config file writes it, every default filled in
    /// (`sandbox_image` `null`: containerd's default, the kubelet's with
    /// docker).
    pub fn to_raw(&self) -> RawRuntime {
        RawRuntime {
            name: Some(self.requested),
            sandbox_image: self.sandbox_image.clone(),
            containerd: RawContainerd {
                snapshotter: Some(self.containerd.snapshotter.clone()),
                existing_config: Some(self.containerd.existing_config),
                start_timeout_secs: Some(self.containerd.start_timeout.as_secs()),
                package: Some(self.containerd.package),
                images_dir: Some(self.containerd.images_dir.clone()),
                sysext_mask: Some(self.containerd.sysext_mask.clone()),
                max_image_bytes: Some(self.containerd.max_image_bytes),
                merge_timeout_secs: Some(self.containerd.merge_timeout.as_secs()),
            },
        }
    }

    /// The sandbox image containerd is configured with.
    pub fn containerd_sandbox_image(&self) -> &str {
        self.sandbox_image
            .as_deref()
            .unwrap_or(DEFAULT_SANDBOX_IMAGE)
    }
}

impl RawRuntime {
    pub fn validate(self) -> FieldResult<RuntimeSettings> {
        if let Some(image) = &self.sandbox_image
            && !super::containerd::is_image_reference(image)
        {
            return Err(FieldError::new(
                "runtime.sandbox_image",
                format!("{image:?} is not an image reference (e.g. registry.k8s.io/pause:3.10)"),
            ));
        }
        let snapshotter = self
            .containerd
            .snapshotter
            .clone()
            .unwrap_or_else(|| "overlayfs".into());
        if snapshotter.is_empty()
            || !snapshotter
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(FieldError::new(
                "runtime.containerd.snapshotter",
                format!("{snapshotter:?} is not a snapshotter name (e.g. overlayfs, native)"),
            ));
        }
        let c = self.containerd;
        Ok(RuntimeSettings {
            requested: self.name.unwrap_or(Requested::Auto),
            sandbox_image: self.sandbox_image,
            containerd: ContainerdSettings {
                snapshotter,
                existing_config: c.existing_config.unwrap_or_default(),
                start_timeout: seconds_in(
                    "runtime.containerd.start_timeout_secs",
                    c.start_timeout_secs.unwrap_or(60),
                    1,
                    600,
                )?,
                package: c.package.unwrap_or_default(),
                images_dir: absolute_path(
                    "runtime.containerd.images_dir",
                    c.images_dir
                        .unwrap_or_else(|| PathBuf::from("/opt/extensions/containerd")),
                )?,
                sysext_mask: crate::sysext::masks_setting(
                    "runtime.containerd.sysext_mask",
                    c.sysext_mask,
                    &["containerd-flatcar"],
                    crate::sysext::CONTAINERD_EXTENSION,
                )?,
                max_image_bytes: match c.max_image_bytes.unwrap_or(DEFAULT_MAX_IMAGE_BYTES) {
                    0 => {
                        return Err(FieldError::new(
                            "runtime.containerd.max_image_bytes",
                            "must be greater than 0",
                        ));
                    }
                    n => n,
                },
                merge_timeout: seconds_in(
                    "runtime.containerd.merge_timeout_secs",
                    c.merge_timeout_secs.unwrap_or(120),
                    1,
                    1800,
                )?,
            },
        })
    }
}
