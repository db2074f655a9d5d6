//! The `helpers` config section: how `bootkube.service` and
//! `tectonic.service` run their step.
//!
//! ```json
//! "helpers": {
//!   "bootkube": {
//!     "mode": "docker",
//!     "timeout_secs": 1200,
//!     "log_tail_lines": 40,
//!     "docker": {
//!       "image": "quay.io/coreos/bootkube:v0.10.0",
//!       "entrypoint": ["/bootkube"],
//!       "args": ["start", "--asset-dir=/assets"],
//!       "mounts": ["/opt/tectonic:/assets", "/etc/kubernetes:/etc/kubernetes"],
//!       "env": {"HOME": "/root"}
//!     }
//!   },
//!   "tectonic": { "mode": "script", "script": "/opt/tectonic/tectonic-wrapper.sh" }
//! }
//! ```
//!
//! Defaults: `mode` is `script`; the script is `<paths.assets_dir>/bootkube.sh`
//! or `<paths.assets_dir>/tectonic-wrapper.sh` (i.e. `/opt/tectonic/...`);
//! `timeout_secs` 1500 (25 minutes, below the units' `TimeoutStartSec=30min`
//! so the helper, not systemd, ends a hung step and records why);
//! `log_tail_lines` 40. In docker mode `image` is required; the bootkube
//! step defaults to what `bootkube.sh` ran (`--entrypoint=/bootkube start
//! --asset-dir=/assets`); both steps default to the mounts `bootkube.sh`
//! used (`<assets_dir>:/assets`, `/etc/kubernetes:/etc/kubernetes`) and to
//! the host network.

use crate::settings::{FieldError, FieldResult, absolute_path, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest allowed step timeout: just under the units' 30 minute start timeout.
pub const MAX_TIMEOUT_SECS: u64 = 29 * 60;
pub const DEFAULT_TIMEOUT_SECS: u64 = 25 * 60;
pub const DEFAULT_LOG_TAIL_LINES: usize = 40;
pub const MAX_LOG_TAIL_LINES: usize = 1000;
/// The asset scripts run in script mode, in `paths.assets_dir` unless
/// `script` says otherwise.
pub const BOOTKUBE_SCRIPT: &str = "bootkube.sh";
pub const TECTONIC_SCRIPT: &str = "tectonic-wrapper.sh";

/// How a helper runs its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HelperMode {
    /// The asset script as a child process (`bash <script>`).
    #[default]
    Script,
    /// The container itself, through Docker's API.
    Docker,
}

impl HelperMode {
    pub fn as_str(self) -> &'static str {
        match self {
            HelperMode::Script => "script",
            HelperMode::Docker => "docker",
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawHelpers {
    #[serde(default)]
    pub bootkube: RawStep,
    #[serde(default)]
    pub tectonic: RawStep,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub mode: Option<HelperMode>,
    /// Script to run in script mode (absolute).
    pub script: Option<PathBuf>,
    pub timeout_secs: Option<u64>,
    pub log_tail_lines: Option<usize>,
    pub docker: Option<RawDocker>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawDocker {
    pub image: Option<String>,
    /// Replaces the image's entrypoint (`docker run --entrypoint`).
    pub entrypoint: Option<Vec<String>>,
    /// The command / arguments after the image name.
    pub args: Option<Vec<String>>,
    /// Bind mounts `host:container[:ro]`; `host` absolute.
    pub mounts: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `--network=host` (default true, as bootkube.sh ran it).
    pub host_network: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HelpersSettings {
    pub bootkube: StepSettings,
    pub tectonic: StepSettings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepSettings {
    pub mode: HelperMode,
    /// `None`: the default script in `paths.assets_dir` ([`StepSettings::script_path`]).
    pub script: Option<PathBuf>,
    pub timeout: Duration,
    pub log_tail_lines: usize,
    /// Present in docker mode (always validated when given).
    pub docker: Option<DockerSettings>,
}

impl Default for StepSettings {
    fn default() -> Self {
        StepSettings {
            mode: HelperMode::Script,
            script: None,
            timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            log_tail_lines: DEFAULT_LOG_TAIL_LINES,
            docker: None,
        }
    }
}

impl StepSettings {
    /// The script this step runs: the configured one, or `default_name` in
    /// the assets dir.
    pub fn script_path(&self, assets_dir: &Path, default_name: &str) -> PathBuf {
        self.script
            .clone()
            .unwrap_or_else(|| assets_dir.join(default_name))
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct DockerSettings {
    pub image: String,
    pub entrypoint: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    /// `None`: the bootkube.sh mounts (`<assets_dir>:/assets`, `/etc/kubernetes:/etc/kubernetes`).
    pub mounts: Option<Vec<String>>,
    pub env: BTreeMap<String, String>,
    pub host_network: bool,
}

/// `env` values may be tokens: a `{:?}` shows only the names (as
/// `check-config` does, [`HelpersSettings::to_raw`]).
impl std::fmt::Debug for DockerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: BTreeMap<&str, &str> = self.env.keys().map(|k| (k.as_str(), REDACTED)).collect();
        f.debug_struct("DockerSettings")
            .field("image", &self.image)
            .field("entrypoint", &self.entrypoint)
            .field("args", &self.args)
            .field("mounts", &self.mounts)
            .field("env", &env)
            .field("host_network", &self.host_network)
            .finish()
    }
}

impl DockerSettings {
    /// The bind mounts in effect, given the assets dir.
    pub fn binds(&self, assets_dir: &Path) -> Vec<String> {
        self.mounts.clone().unwrap_or_else(|| {
            vec![
                format!("{}:/assets", assets_dir.display()),
                "/etc/kubernetes:/etc/kubernetes".to_string(),
            ]
        })
    }
}

/// What `check-config` shows of an `env` value.
pub const REDACTED: &str = "<redacted>";

impl HelpersSettings {
    /// The section as a config file writes it, every default filled in
    /// (scripts and mounts in `assets_dir`), `env` values shown as
    /// [`REDACTED`]: they may be tokens.
    pub fn to_raw(&self, assets_dir: &Path) -> RawHelpers {
        RawHelpers {
            bootkube: self.bootkube.to_raw(assets_dir, BOOTKUBE_SCRIPT),
            tectonic: self.tectonic.to_raw(assets_dir, TECTONIC_SCRIPT),
        }
    }
}

impl StepSettings {
    fn to_raw(&self, assets_dir: &Path, default_script: &str) -> RawStep {
        RawStep {
            mode: Some(self.mode),
            script: Some(self.script_path(assets_dir, default_script)),
            timeout_secs: Some(self.timeout.as_secs()),
            log_tail_lines: Some(self.log_tail_lines),
            docker: self.docker.as_ref().map(|d| RawDocker {
                image: Some(d.image.clone()),
                entrypoint: d.entrypoint.clone(),
                args: d.args.clone(),
                mounts: Some(d.binds(assets_dir)),
                env: d
                    .env
                    .keys()
                    .map(|k| (k.clone(), REDACTED.to_string()))
                    .collect(),
                host_network: Some(d.host_network),
            }),
        }
    }
}

impl RawHelpers {
    pub fn validate(self) -> FieldResult<HelpersSettings> {
        Ok(HelpersSettings {
            bootkube: self.bootkube.validate(
                "helpers.bootkube",
                Some((
                    vec!["/bootkube".into()],
                    vec!["start".into(), "--asset-dir=/assets".into()],
                )),
            )?,
            tectonic: self.tectonic.validate("helpers.tectonic", None)?,
        })
    }
}

type DefaultCommand = Option<(Vec<String>, Vec<String>)>;

impl RawStep {
    fn validate(self, field: &str, default_cmd: DefaultCommand) -> FieldResult<StepSettings> {
        let mode = self.mode.unwrap_or_default();
        let script = self
            .script
            .map(|p| absolute_path(&format!("{field}.script"), p))
            .transpose()?;
        let timeout = seconds_in(
            &format!("{field}.timeout_secs"),
            self.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS),
            1,
            MAX_TIMEOUT_SECS,
        )?;
        let log_tail_lines = in_range(
            &format!("{field}.log_tail_lines"),
            self.log_tail_lines.unwrap_or(DEFAULT_LOG_TAIL_LINES),
            1,
            MAX_LOG_TAIL_LINES,
            "",
        )?;
        let docker = match self.docker {
            Some(d) => Some(d.validate(&format!("{field}.docker"), default_cmd)?),
            None if mode == HelperMode::Docker => {
                return Err(FieldError::new(
                    format!("{field}.docker.image"),
                    "is required when mode is \"docker\"",
                ));
            }
            None => None,
        };
        Ok(StepSettings {
            mode,
            script,
            timeout,
            log_tail_lines,
            docker,
        })
    }
}

impl RawDocker {
    fn validate(self, field: &str, default_cmd: DefaultCommand) -> FieldResult<DockerSettings> {
        let image = match self.image {
            Some(i) if !i.trim().is_empty() && !i.chars().any(char::is_whitespace) => i,
            Some(i) => {
                return Err(FieldError::new(
                    format!("{field}.image"),
                    format!("must be an image reference without spaces, got {i:?}"),
                ));
            }
            None => {
                return Err(FieldError::new(
                    format!("{field}.image"),
                    "is required in the docker section",
                ));
            }
        };
        if let Some(m) = &self.mounts {
            for (i, spec) in m.iter().enumerate() {
                validate_mount(&format!("{field}.mounts[{i}]"), spec)?;
            }
        }
        for k in self.env.keys() {
            if k.is_empty() || k.contains('=') {
                return Err(FieldError::new(
                    format!("{field}.env"),
                    format!("invalid variable name {k:?}"),
                ));
            }
        }
        if let Some(ep) = &self.entrypoint
            && ep.is_empty()
        {
            return Err(FieldError::new(
                format!("{field}.entrypoint"),
                "must not be empty (leave it out to use the default)",
            ));
        }
        let (entrypoint, args) = match (self.entrypoint, self.args, default_cmd) {
            (None, None, Some((ep, args))) => (Some(ep), Some(args)),
            (ep, args, _) => (ep, args),
        };
        Ok(DockerSettings {
            image,
            entrypoint,
            args,
            mounts: self.mounts,
            env: self.env,
            host_network: self.host_network.unwrap_or(true),
        })
    }
}

fn validate_mount(field: &str, spec: &str) -> FieldResult<()> {
    let parts: Vec<&str> = spec.split(':').collect();
    let ok = match parts.as_slice() {
        [h, c] => h.starts_with('/') && c.starts_with('/'),
        [h, c, opt] => {
            h.starts_with('/')
                && c.starts_with('/')
                && opt.split(',').all(|o| matches!(o, "ro" | "rw" | "z" | "Z"))
        }
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(FieldError::new(
            field,
            format!("must be \"/host/path:/container/path[:ro]\", got {spec:?}"),
        ))
    }
}
