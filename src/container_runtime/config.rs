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
//!     "start_timeout_secs": 60
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

use super::choice::Requested;
use crate::settings::{FieldError, FieldResult, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// containerd's sandbox image unless configured: the one containerd 2.0
/// and 2.1 default to, on the registry every Kubernetes release uses.
pub const DEFAULT_SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.10";

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
        Ok(RuntimeSettings {
            requested: self.name.unwrap_or(Requested::Auto),
            sandbox_image: self.sandbox_image,
            containerd: ContainerdSettings {
                snapshotter,
                existing_config: self.containerd.existing_config.unwrap_or_default(),
                start_timeout: seconds_in(
                    "runtime.containerd.start_timeout_secs",
                    self.containerd.start_timeout_secs.unwrap_or(60),
                    1,
                    600,
                )?,
            },
        })
    }
}
