//! The `kubelet` config section: where the node's kubelet comes from.
//!
//! ```json
//! "kubelet": {
//!   "backend": "auto",
//!   "extension_name": "kubernetes",
//!   "images_dir": "/opt/extensions/kubernetes",
//!   "max_minor_lag": 0,
//!   "max_image_bytes": 1073741824,
//!   "merge_timeout_secs": 120
//! }
//! ```
//!
//! - `backend`: `auto` (default: what the node's release has, see
//!   [`super::backend`]: the system extension on every Flatcar from
//!   2857.0.0, which has no kubelet-wrapper, so on every release that reads
//!   the Ignition module's spec 3.3.0 configs; kubelet-wrapper on the
//!   Container Linux-era releases that still have it), `sysext` (the
//!   `kubelet-sysext` step puts a kubernetes system extension image of the
//!   cluster's version in place and merges it, see [`crate::kubelet_sysext`])
//!   or `wrapper` (kubelet-wrapper runs the image kubelet.env names, nothing
//!   else is done; refused, exit 7, on a release without it);
//! - `extension_name`: the extension's name, so `/etc/extensions/<name>.raw`
//!   and the image's `usr/lib/extension-release.d/extension-release.<name>`
//!   (`kubernetes`, as Flatcar's sysext-bakery builds it);
//! - `images_dir`: where the versioned images are kept
//!   (`<name>-<version>-<arch>.raw`, the bakery's names);
//! - `max_minor_lag`: how many minor versions older than the cluster a
//!   kubelet may be when the mirror has none of the cluster's minor (0..=3,
//!   default 0: a new node joins at the cluster's minor or not at all);
//! - `max_image_bytes`: the largest image accepted (default 1 GiB);
//! - `merge_timeout_secs`: how long `systemd-sysext refresh` may take.
//!
//! Where merged extensions show their release files and where
//! `systemd-sysext.service` is enabled are the node's, shared with the
//! docker addon's sysext backend: `addon.sysext_release_dir` and
//! `addon.systemd_config_dir`; the links go in `paths.extensions_dir`.

use crate::cluster::version::MAX_KUBELET_MINOR_LAG;
use crate::settings::{FieldError, FieldResult, absolute_path, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Largest image accepted unless configured otherwise (1 GiB; the bakery's
/// kubernetes images are about 100 MiB).
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 1024 * 1024 * 1024;

/// What runs the kubelet, as the config asks ([`super::backend`] resolves
/// it against the node's release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// What the node's release has: kubelet-wrapper before Flatcar
    /// 2857.0.0, the system extension from there.
    #[default]
    Auto,
    /// kubelet-wrapper runs the kubelet image kubelet.env names.
    Wrapper,
    /// A kubernetes systemd-sysext image, chosen by the cluster's version.
    Sysext,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawKubelet {
    /// `auto` (default), `sysext` or `wrapper`.
    #[serde(default)]
    pub backend: Backend,
    /// Extension name (default `kubernetes`).
    pub extension_name: Option<String>,
    /// Versioned images (default `/opt/extensions/kubernetes`).
    pub images_dir: Option<PathBuf>,
    /// Older minors accepted when the cluster's is not offered (default 0).
    pub max_minor_lag: Option<u64>,
    /// Largest image accepted, bytes (default 1 GiB).
    pub max_image_bytes: Option<u64>,
    /// Bound on `systemd-sysext refresh`, seconds (default 120).
    pub merge_timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletSettings {
    pub backend: Backend,
    pub extension_name: String,
    pub images_dir: PathBuf,
    pub max_minor_lag: u64,
    pub max_image_bytes: u64,
    pub merge_timeout: Duration,
}

impl Default for KubeletSettings {
    fn default() -> Self {
        RawKubelet::default()
            .validate()
            .expect("the built-in kubelet defaults are valid")
    }
}

impl KubeletSettings {
    /// The section as a config file writes it, every default filled in.
    pub fn to_raw(&self) -> RawKubelet {
        RawKubelet {
            backend: self.backend,
            extension_name: Some(self.extension_name.clone()),
            images_dir: Some(self.images_dir.clone()),
            max_minor_lag: Some(self.max_minor_lag),
            max_image_bytes: Some(self.max_image_bytes),
            merge_timeout_secs: Some(self.merge_timeout.as_secs()),
        }
    }
}

impl RawKubelet {
    pub fn validate(self) -> FieldResult<KubeletSettings> {
        let extension_name = self
            .extension_name
            .unwrap_or_else(|| "kubernetes".to_string());
        crate::sysext::check_name("kubelet.extension_name", &extension_name)?;
        for (taken, whose) in [
            (crate::sysext::DOCKER_EXTENSION, "the docker addon's"),
            (crate::sysext::CONTAINERD_EXTENSION, "containerd's package"),
        ] {
            if extension_name == taken {
                return Err(FieldError::new(
                    "kubelet.extension_name",
                    format!("is {whose} extension; choose another name"),
                ));
            }
        }
        let max_minor_lag = in_range(
            "kubelet.max_minor_lag",
            self.max_minor_lag.unwrap_or(0),
            0,
            MAX_KUBELET_MINOR_LAG,
            " (the Kubernetes version-skew policy)",
        )?;
        let max_image_bytes = self.max_image_bytes.unwrap_or(DEFAULT_MAX_IMAGE_BYTES);
        if max_image_bytes == 0 {
            return Err(FieldError::new(
                "kubelet.max_image_bytes",
                "must be greater than 0",
            ));
        }
        Ok(KubeletSettings {
            backend: self.backend,
            extension_name,
            images_dir: absolute_path(
                "kubelet.images_dir",
                self.images_dir
                    .unwrap_or_else(|| PathBuf::from("/opt/extensions/kubernetes")),
            )?,
            max_minor_lag,
            max_image_bytes,
            merge_timeout: seconds_in(
                "kubelet.merge_timeout_secs",
                self.merge_timeout_secs.unwrap_or(120),
                1,
                1800,
            )?,
        })
    }
}
