//! The agent's configuration: one JSON file, read strictly and validated
//! into typed settings.
//!
//! The file (default `/etc/node-bootstrap/config.json`, overridable with
//! `--config` or `NODE_BOOTSTRAP_CONFIG`) is parsed into raw serde structs with
//! `deny_unknown_fields`, so a typo is an error rather than a silently
//! ignored setting. Each subsystem owns its section (raw form and
//! validation) in its own folder; this module owns the top level, the node's
//! role, and the paths the agent touches, all with the real defaults so tests
//! point them elsewhere without special code paths.
//!
//! Every error names the file and the field (`paths.state_dir`).

mod paths;

pub use paths::Paths;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the config is read from when neither flag nor env says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/node-bootstrap/config.json";

/// The node's part in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Joins an existing cluster.
    #[default]
    Worker,
    /// A control-plane node that joins an existing cluster.
    Master,
    /// The first master: runs bootkube and tectonic, and does not wait on an
    /// API server that cannot exist before it.
    BootkubeMaster,
}

impl Role {
    pub fn is_bootkube_master(self) -> bool {
        self == Role::BootkubeMaster
    }
}

/// The raw file, exactly as written. Every section is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub paths: paths::RawPaths,
    #[serde(default)]
    pub cluster: crate::cluster::config::RawCluster,
    #[serde(default)]
    pub os_update: crate::updater::config::RawOsUpdate,
    #[serde(default)]
    pub addon: crate::addon::config::RawAddon,
    #[serde(default)]
    pub assets: crate::assets::config::RawAssets,
    #[serde(default)]
    pub sources: crate::metadata::config::RawSources,
    #[serde(default)]
    pub helpers: crate::helper::config::RawHelpers,
    #[serde(default)]
    pub metrics: crate::metrics::config::RawMetrics,
    #[serde(default)]
    pub reboot: crate::reboot::config::RawReboot,
    #[serde(default)]
    pub agent: crate::upgrade::config::RawAgent,
    #[serde(default)]
    pub kubelet: crate::kubelet::config::RawKubelet,
}

/// Validated settings the rest of the agent uses.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file these settings came from (or `<defaults>`).
    pub source: PathBuf,
    pub role: Role,
    pub paths: Paths,
    pub cluster: crate::cluster::config::ClusterSettings,
    pub os_update: crate::updater::config::OsUpdateSettings,
    pub addon: crate::addon::config::AddonSettings,
    pub assets: crate::assets::config::AssetsSettings,
    pub sources: crate::metadata::config::SourcesSettings,
    pub helpers: crate::helper::config::HelpersSettings,
    pub metrics: crate::metrics::config::MetricsSettings,
    pub reboot: crate::reboot::config::RebootSettings,
    pub agent: crate::upgrade::config::AgentSettings,
    pub kubelet: crate::kubelet::config::KubeletSettings,
}

/// A validation failure of one field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path of the field, e.g. `os_update.timeout_secs`.
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

pub type FieldResult<T> = std::result::Result<T, FieldError>;

/// Checks that a configured path is absolute (the agent runs from systemd,
/// where a relative path has no useful meaning).
pub fn absolute_path(field: &str, p: PathBuf) -> FieldResult<PathBuf> {
    if p.is_absolute() {
        Ok(p)
    } else {
        Err(FieldError::new(
            field,
            format!(
                "must be an absolute path, got {:?}",
                p.display().to_string()
            ),
        ))
    }
}

/// A duration in seconds that must lie within bounds.
pub fn seconds_in(field: &str, secs: u64, min: u64, max: u64) -> FieldResult<std::time::Duration> {
    if secs < min || secs > max {
        return Err(FieldError::new(
            field,
            format!("must be between {min} and {max} seconds, got {secs}"),
        ));
    }
    Ok(std::time::Duration::from_secs(secs))
}

impl RawConfig {
    /// Validates every section into settings; the first failing field wins.
    pub fn validate(self, source: &Path) -> FieldResult<Config> {
        Ok(Config {
            source: source.to_path_buf(),
            role: self.role,
            paths: self.paths.validate()?,
            cluster: self.cluster.validate()?,
            os_update: self.os_update.validate()?,
            addon: self.addon.validate()?,
            assets: self.assets.validate()?,
            sources: self.sources.validate()?,
            helpers: self.helpers.validate()?,
            metrics: self.metrics.validate()?,
            reboot: self.reboot.validate()?,
            agent: self.agent.validate()?,
            kubelet: self.kubelet.validate()?,
        })
    }
}

impl Config {
    /// Reads and validates the config file. Errors name the file and field
    /// and carry [`crate::error::ErrorClass::Config`].
    pub fn load(path: &Path) -> Result<Config> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::config(format!(
                "failed to read config file {}: {e}",
                path.display()
            ))
        })?;
        Self::from_json(&text, path)
    }

    /// Parses config text; `source` is only used in messages.
    pub fn from_json(text: &str, source: &Path) -> Result<Config> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            if field == "." || field.is_empty() {
                Error::config(format!("invalid config file {}: {inner}", source.display()))
            } else {
                Error::config(format!(
                    "invalid config file {}: field `{field}`: {inner}",
                    source.display()
                ))
            }
        })?;
        raw.validate(source).map_err(|fe| {
            Error::config(format!(
                "invalid config file {}: field `{}`: {}",
                source.display(),
                fe.field,
                fe.message
            ))
        })
    }

    /// All defaults, as if the file were `{}`.
    pub fn defaults() -> Config {
        RawConfig::default()
            .validate(Path::new("<defaults>"))
            .expect("the built-in defaults are valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config> {
        Config::from_json(text, Path::new("/etc/node-bootstrap/config.json"))
    }

    #[test]
    fn empty_object_gives_real_defaults() {
        let c = load("{}").unwrap();
        assert_eq!(c.role, Role::Worker);
        assert_eq!(
            c.paths.kubelet_env,
            PathBuf::from("/etc/kubernetes/kubelet.env")
        );
        assert_eq!(c.paths.seed_dir, PathBuf::from("/etc/kubernetes/installer"));
        assert_eq!(c.paths.state_dir, PathBuf::from("/var/lib/node-bootstrap"));
        assert_eq!(c.paths.assets_dir, PathBuf::from("/opt/tectonic"));
        assert_eq!(c.paths.torcx_store, PathBuf::from("/var/lib/torcx/store"));
    }

    #[test]
    fn unknown_field_is_named_with_file() {
        let err = load(r#"{"paths": {"kubelet_evn": "/x"}}"#).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/etc/node-bootstrap/config.json"), "{msg}");
        assert!(msg.contains("paths"), "{msg}");
        assert!(msg.contains("kubelet_evn"), "{msg}");
        assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
    }

    #[test]
    fn wrong_type_names_the_field() {
        let err = load(r#"{"role": "captain"}"#).unwrap_err();
        assert!(err.to_string().contains("field `role`"), "{err}");
    }

    #[test]
    fn relative_path_is_rejected_by_field() {
        let err = load(r#"{"paths": {"state_dir": "var/lib"}}"#).unwrap_err();
        assert!(
            err.to_string()
                .contains("field `paths.state_dir`: must be an absolute path"),
            "{err}"
        );
    }

    #[test]
    fn syntax_error_names_the_file() {
        let err = load("{").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid config file /etc/node-bootstrap/config.json"),
            "{err}"
        );
    }

    #[test]
    fn missing_file_is_a_config_error() {
        let err = Config::load(Path::new("/nonexistent/config.json")).unwrap_err();
        assert_eq!(err.exit_code(), crate::error::exit::CONFIG);
        assert!(err.to_string().contains("/nonexistent/config.json"));
    }

    #[test]
    fn bootkube_master_role_parses() {
        assert_eq!(
            load(r#"{"role":"bootkube-master"}"#).unwrap().role,
            Role::BootkubeMaster
        );
    }
}
