//! The `addon` config section: where the docker addon comes from, how it is
//! verified, and where it goes.
//!
//! ```json
//! "addon": {
//!   "enabled": true,
//!   "backend": "auto",
//!   "package_source": "torcx-manifest",
//!   "manifest_url": "https://mirror.example/manifests/{board}/{os_version}/torcx_manifest.json",
//!   "manifest_file": null,
//!   "mappings_file": null,
//!   "keyring": null,
//!   "allow_unsigned": false,
//!   "profile_name": "tectonic",
//!   "download_attempts": 5,
//!   "download_backoff_secs": 1,
//!   "download_backoff_max_secs": 30,
//!   "download_deadline_secs": 900,
//!   "connect_timeout_secs": 10,
//!   "read_timeout_secs": 60,
//!   "docker_api_timeout_secs": 20,
//!   "max_package_bytes": 536870912,
//!   "sysext_release_dir": "/usr/lib/extension-release.d",
//!   "sysext_mask": ["docker-flatcar", "containerd-flatcar"],
//!   "systemd_config_dir": "/etc/systemd/system"
//! }
//! ```
//!
//! `backend` is `auto` (default), `torcx` or `sysext`: how the chosen docker
//! is activated for the OS the node boots next. `auto` takes torcx on the
//! releases that have it (before 3794.0.0) and the system extension on the
//! ones that do not, where Flatcar's own docker is an extension too
//! (`docker-flatcar.raw`, which the addon's masks); `torcx` for an OS
//! without it is refused (exit 7, naming the release that removed it)
//! before anything is installed ([`crate::osrelease`]).
//!
//! `manifest_url` and `manifest_file` are templates: `{board}` and
//! `{os_version}` are replaced by the node's `COREOS_BOARD` and the OS
//! version the package is for. The detached signature is read from the same
//! place with `.asc` appended. `manifest_file` wins when both are set.
//!
//! ## Where packages come from: `package_source`
//! - `"torcx-manifest"` (default): the signed torcx package manifest above
//!   (`manifest_url`/`manifest_file`, `keyring`, `allow_unsigned`).
//! - `"metadata"`: the artifact metadata search path of the `sources`
//!   section ([`crate::metadata`]: `sources.dev_dir`, `sources.local_dir`,
//!   `sources.url`, the cluster's bucket, the default location when asked
//!   for; signed `.sjson` before unsigned, unsigned only where
//!   `sources.allow_unsigned` says).
//!   Nothing else in `addon` is needed; `manifest_url`, `manifest_file`,
//!   `keyring` and `allow_unsigned` belong to the manifest source and are
//!   refused here (their `sources.*` counterparts apply) rather than
//!   silently ignored.
//!
//! With `"metadata"` the docker package is the product
//! `com.node-bootstrap:<name>:<series>:<arch>` where
//! - name is `docker-torcx` (backend `torcx`: `.torcx.tgz` archives) or
//!   `docker-sysext` (backend `sysext`: `.raw` images),
//! - series is the OS version the node boots next (os-release `VERSION_ID`,
//!   or the pending update's version),
//! - arch is the node's `COREOS_BOARD` (e.g. `amd64-usr`),
//!
//! so `metadata generate` picks up files named e.g.
//! `docker-torcx_17.03.2_1632.3.0_amd64-usr.torcx.tgz` or
//! `docker-sysext_24.0.9_3815.2.0_amd64-usr.raw`. Choice and installation
//! are the manifest source's (runtime-mappings preference order, the
//! largest build of the first preferred `major.minor` any location offers,
//! nothing remote before OS 1520.3.0, store name `docker:<version>.torcx.tgz`,
//! reuse by sha512); items must carry a sha512, and are verified by size and
//! every hash the metadata gives before they get their final name.

use crate::settings::{FieldError, FieldResult, Paths, absolute_path, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// tectonic-torcx's `--torcx-profile` default ("torcx profile to create, if
/// needed").
pub const DEFAULT_PROFILE_NAME: &str = "tectonic";
/// Largest package accepted unless configured otherwise (512 MiB; the
/// docker torcx images of Container Linux were well under 100 MiB).
pub const DEFAULT_MAX_PACKAGE_BYTES: u64 = 512 * 1024 * 1024;

/// Which mechanism activates the docker addon on the next boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// torcx: a `.torcx.tgz` in the versioned store, a profile, next-profile.
    #[default]
    Torcx,
    /// systemd-sysext: a `docker.raw` image in `/etc/extensions`.
    Sysext,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Torcx => "torcx",
            Backend::Sysext => "sysext",
        }
    }
}

/// What `addon.backend` asks for: a [`Backend`], or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackendSetting {
    /// torcx where the release has it (before 3794.0.0), else sysext.
    #[default]
    Auto,
    Torcx,
    Sysext,
}

impl BackendSetting {
    pub fn name(self) -> &'static str {
        match self {
            BackendSetting::Auto => "auto",
            BackendSetting::Torcx => "torcx",
            BackendSetting::Sysext => "sysext",
        }
    }

    /// The backend for an OS of `os` (`next`: the release the node boots
    /// next, whose docker this is); torcx asked for on a release without
    /// it is refused, naming the release that removed it.
    pub fn resolve(
        self,
        next: crate::osrelease::OsVersion,
        os: &str,
    ) -> crate::error::Result<Backend> {
        let removed = crate::osrelease::OsVersion::WITHOUT_TORCX;
        match self {
            BackendSetting::Sysext => Ok(Backend::Sysext),
            BackendSetting::Torcx if next.has_torcx() => Ok(Backend::Torcx),
            BackendSetting::Torcx => Err(crate::error::Error::refused(format!(
                "addon.backend is \"torcx\", but {os} (the OS this node runs next) has no torcx: \
                 Flatcar removed it in {removed}, and its docker is a system extension there; set \
                 addon.backend to \"auto\" or \"sysext\"; nothing was changed"
            ))),
            BackendSetting::Auto if next.has_torcx() => Ok(Backend::Torcx),
            BackendSetting::Auto => Ok(Backend::Sysext),
        }
    }
}

/// Where the docker package and its trust come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackageSource {
    /// A signed torcx package manifest (`manifest_url` / `manifest_file`).
    #[default]
    TorcxManifest,
    /// The artifact metadata search path (`sources` section).
    Metadata,
}

impl PackageSource {
    pub fn as_str(self) -> &'static str {
        match self {
            PackageSource::TorcxManifest => "torcx-manifest",
            PackageSource::Metadata => "metadata",
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAddon {
    /// Run the docker addon step (default false until configured).
    #[serde(default)]
    pub enabled: bool,
    /// `auto` (default), `torcx` or `sysext`.
    #[serde(default)]
    pub backend: BackendSetting,
    /// `torcx-manifest` (default) or `metadata` (see module docs).
    #[serde(default)]
    pub package_source: PackageSource,
    /// URL template of the package manifest (`{board}`, `{os_version}`).
    pub manifest_url: Option<String>,
    /// Local file template of the package manifest (wins over the URL).
    pub manifest_file: Option<String>,
    /// Runtime mappings file (default `<seed_dir>/runtime-mappings.yaml`).
    pub mappings_file: Option<PathBuf>,
    /// OpenPGP public keyring, armored or binary (default
    /// `<seed_dir>/keyring.asc`).
    pub keyring: Option<PathBuf>,
    /// Accept a manifest without a detached signature (default false). A
    /// signature that is present must still verify. Logged as a warning on
    /// every use.
    #[serde(default)]
    pub allow_unsigned: bool,
    /// torcx profile to create when the user has none of their own
    /// (default `tectonic`).
    pub profile_name: Option<String>,
    /// Attempts per download (default 5, 1..=20).
    pub download_attempts: Option<u32>,
    /// First backoff step between attempts, seconds (default 1, 0..=60).
    pub download_backoff_secs: Option<u64>,
    /// Largest backoff step, seconds (default 30, 0..=600).
    pub download_backoff_max_secs: Option<u64>,
    /// Give up on one download after this long, seconds (default 900).
    pub download_deadline_secs: Option<u64>,
    /// TCP/TLS connect timeout, seconds (default 10).
    pub connect_timeout_secs: Option<u64>,
    /// Longest pause between two reads of a response, seconds (default 60).
    pub read_timeout_secs: Option<u64>,
    /// How long to wait for Docker's API (socket activation included),
    /// seconds (default 20).
    pub docker_api_timeout_secs: Option<u64>,
    /// Largest package accepted, bytes (default 512 MiB).
    pub max_package_bytes: Option<u64>,
    /// Where merged system extensions show their release files (sysext).
    pub sysext_release_dir: Option<PathBuf>,
    /// Extensions masked (linked to /dev/null) when our docker sysext is
    /// installed (default Flatcar's built-in `docker-flatcar` and
    /// `containerd-flatcar`).
    pub sysext_mask: Option<Vec<String>>,
    /// Where `systemd-sysext.service` is enabled (sysext).
    pub systemd_config_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddonSettings {
    pub enabled: bool,
    pub backend: BackendSetting,
    pub package_source: PackageSource,
    pub manifest_url: Option<String>,
    pub manifest_file: Option<String>,
    pub mappings_file: Option<PathBuf>,
    pub keyring: Option<PathBuf>,
    pub allow_unsigned: bool,
    pub profile_name: String,
    pub download_attempts: u32,
    pub download_backoff: Duration,
    pub download_backoff_max: Duration,
    pub download_deadline: Duration,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub docker_api_timeout: Duration,
    pub max_package_bytes: u64,
    pub sysext_release_dir: PathBuf,
    pub sysext_mask: Vec<String>,
    pub systemd_config_dir: PathBuf,
}

impl Default for AddonSettings {
    fn default() -> Self {
        RawAddon::default()
            .validate()
            .expect("the built-in addon defaults are valid")
    }
}

impl AddonSettings {
    /// The runtime mappings file in effect.
    pub fn mappings_path(&self, paths: &Paths) -> PathBuf {
        self.mappings_file
            .clone()
            .unwrap_or_else(|| paths.runtime_mappings())
    }

    /// The keyring of the torcx manifest in effect.
    pub fn keyring_path(&self, paths: &Paths) -> PathBuf {
        self.keyring
            .clone()
            .unwrap_or_else(|| paths.seed_dir.join("keyring.asc"))
    }

    /// The section as a config file writes it, every default filled in
    /// (the keyring only for the torcx manifest, the one source that reads
    /// it).
    pub fn to_raw(&self, paths: &Paths) -> RawAddon {
        let manifest = self.package_source == PackageSource::TorcxManifest;
        RawAddon {
            enabled: self.enabled,
            backend: self.backend,
            package_source: self.package_source,
            manifest_url: self.manifest_url.clone(),
            manifest_file: self.manifest_file.clone(),
            mappings_file: Some(self.mappings_path(paths)),
            keyring: manifest.then(|| self.keyring_path(paths)),
            allow_unsigned: self.allow_unsigned,
            profile_name: Some(self.profile_name.clone()),
            download_attempts: Some(self.download_attempts),
            download_backoff_secs: Some(self.download_backoff.as_secs()),
            download_backoff_max_secs: Some(self.download_backoff_max.as_secs()),
            download_deadline_secs: Some(self.download_deadline.as_secs()),
            connect_timeout_secs: Some(self.connect_timeout.as_secs()),
            read_timeout_secs: Some(self.read_timeout.as_secs()),
            docker_api_timeout_secs: Some(self.docker_api_timeout.as_secs()),
            max_package_bytes: Some(self.max_package_bytes),
            sysext_release_dir: Some(self.sysext_release_dir.clone()),
            sysext_mask: Some(self.sysext_mask.clone()),
            systemd_config_dir: Some(self.systemd_config_dir.clone()),
        }
    }
}

fn check_template(field: &str, t: &str, need_scheme: bool) -> FieldResult<()> {
    let rendered = t
        .replace("{board}", "amd64-usr")
        .replace("{os_version}", "1.0.0");
    if rendered.contains('{') || rendered.contains('}') {
        return Err(FieldError::new(
            field,
            format!("unknown placeholder in {t:?}; only {{board}} and {{os_version}} exist"),
        ));
    }
    if need_scheme {
        let u = url::Url::parse(&rendered)
            .map_err(|e| FieldError::new(field, format!("not a URL ({e}): {t:?}")))?;
        if !matches!(u.scheme(), "http" | "https" | "file") {
            return Err(FieldError::new(
                field,
                format!("scheme must be https, http or file, got {:?}", u.scheme()),
            ));
        }
    } else if !rendered.starts_with('/') {
        return Err(FieldError::new(
            field,
            format!("must be an absolute path, got {t:?}"),
        ));
    }
    Ok(())
}

impl RawAddon {
    pub fn validate(self) -> FieldResult<AddonSettings> {
        self.check_package_source()?;
        let profile_name = profile_name(self.profile_name)?;
        let attempts = in_range(
            "addon.download_attempts",
            self.download_attempts.unwrap_or(5),
            1,
            20,
            "",
        )?;
        let max_package_bytes = self.max_package_bytes.unwrap_or(DEFAULT_MAX_PACKAGE_BYTES);
        if max_package_bytes == 0 {
            return Err(FieldError::new(
                "addon.max_package_bytes",
                "must be greater than 0",
            ));
        }
        let sysext_mask = crate::sysext::masks_setting(
            "addon.sysext_mask",
            self.sysext_mask,
            &["docker-flatcar", "containerd-flatcar"],
            crate::sysext::DOCKER_EXTENSION,
        )?;
        let (backoff, backoff_max) =
            backoffs(self.download_backoff_secs, self.download_backoff_max_secs)?;
        Ok(AddonSettings {
            enabled: self.enabled,
            backend: self.backend,
            package_source: self.package_source,
            manifest_url: self.manifest_url,
            manifest_file: self.manifest_file,
            mappings_file: self
                .mappings_file
                .map(|p| absolute_path("addon.mappings_file", p))
                .transpose()?,
            keyring: self
                .keyring
                .map(|p| absolute_path("addon.keyring", p))
                .transpose()?,
            allow_unsigned: self.allow_unsigned,
            profile_name,
            download_attempts: attempts,
            download_backoff: backoff,
            download_backoff_max: backoff_max,
            download_deadline: seconds_in(
                "addon.download_deadline_secs",
                self.download_deadline_secs.unwrap_or(900),
                1,
                6 * 3600,
            )?,
            connect_timeout: seconds_in(
                "addon.connect_timeout_secs",
                self.connect_timeout_secs.unwrap_or(10),
                1,
                300,
            )?,
            read_timeout: seconds_in(
                "addon.read_timeout_secs",
                self.read_timeout_secs.unwrap_or(60),
                1,
                3600,
            )?,
            docker_api_timeout: seconds_in(
                "addon.docker_api_timeout_secs",
                self.docker_api_timeout_secs.unwrap_or(20),
                1,
                600,
            )?,
            max_package_bytes,
            sysext_release_dir: absolute_path(
                "addon.sysext_release_dir",
                self.sysext_release_dir
                    .unwrap_or_else(|| PathBuf::from(crate::sysext::DEFAULT_RELEASE_DIR)),
            )?,
            sysext_mask,
            systemd_config_dir: absolute_path(
                "addon.systemd_config_dir",
                self.systemd_config_dir
                    .unwrap_or_else(|| PathBuf::from(crate::sysext::DEFAULT_SYSTEMD_CONFIG_DIR)),
            )?,
        })
    }

    /// Where packages are found: the manifest templates, and the settings
    /// of the other package source left unset.
    fn check_package_source(&self) -> FieldResult<()> {
        if let Some(u) = &self.manifest_url {
            check_template("addon.manifest_url", u, true)?;
        }
        if let Some(f) = &self.manifest_file {
            check_template("addon.manifest_file", f, false)?;
        }
        if self.package_source == PackageSource::Metadata {
            for (field, set, instead) in [
                (
                    "addon.manifest_url",
                    self.manifest_url.is_some(),
                    "sources.url",
                ),
                (
                    "addon.manifest_file",
                    self.manifest_file.is_some(),
                    "sources.local_dir or sources.url",
                ),
                ("addon.keyring", self.keyring.is_some(), "sources.keyring"),
                (
                    "addon.allow_unsigned",
                    self.allow_unsigned,
                    "sources.allow_unsigned",
                ),
            ] {
                if set {
                    return Err(FieldError::new(
                        field,
                        format!(
                            "belongs to addon.package_source \"torcx-manifest\" and is not used with \"metadata\"; set {instead} instead (or remove it)"
                        ),
                    ));
                }
            }
        } else if self.enabled && self.manifest_url.is_none() && self.manifest_file.is_none() {
            return Err(FieldError::new(
                "addon.manifest_url",
                "required when addon.enabled is true (or set addon.manifest_file, or addon.package_source \"metadata\")",
            ));
        }
        Ok(())
    }
}

/// The torcx profile's name: a plain name, not one of torcx's own.
fn profile_name(name: Option<String>) -> FieldResult<String> {
    let profile_name = name.unwrap_or_else(|| DEFAULT_PROFILE_NAME.to_string());
    crate::sysext::check_name("addon.profile_name", &profile_name)?;
    if profile_name == "vendor" || profile_name == "oem" {
        return Err(FieldError::new(
            "addon.profile_name",
            format!("{profile_name:?} is torcx's own lower profile; choose another name"),
        ));
    }
    Ok(profile_name)
}

/// The download backoff and its cap, the cap not below the backoff.
fn backoffs(secs: Option<u64>, max_secs: Option<u64>) -> FieldResult<(Duration, Duration)> {
    let backoff = seconds_in("addon.download_backoff_secs", secs.unwrap_or(1), 0, 60)?;
    let backoff_max = seconds_in(
        "addon.download_backoff_max_secs",
        max_secs.unwrap_or(30),
        0,
        600,
    )?;
    if backoff_max < backoff {
        return Err(FieldError::new(
            "addon.download_backoff_max_secs",
            "must not be smaller than addon.download_backoff_secs",
        ));
    }
    Ok((backoff, backoff_max))
}
