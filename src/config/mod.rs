//! The agent's configuration: one JSON file, read strictly and validated
//! into typed settings.
//!
//! The file (default `/etc/node-bootstrap/config.json`, overridable with
//! `--config` or `NODE_BOOTSTRAP_CONFIG`) is parsed into raw serde structs with
//! `deny_unknown_fields`, so a typo is an error rather than a silently
//! ignored setting. Each subsystem owns its section (raw form and
//! validation) in its own folder, validated with the vocabulary of
//! [`crate::settings`], which also holds the node's role and the paths the
//! agent touches, all with the real defaults so tests point them elsewhere
//! without special code paths. This module is the composition root: it
//! knows every section, and nothing below it imports it.
//!
//! Every error names the file and the field (`paths.state_dir`).

use crate::error::{Error, Result};
use crate::settings::{FieldResult, Paths, RawPaths, Role};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub mod checks;
#[cfg(test)]
mod field_names;
mod serde_errors;

/// Where the config is read from when neither flag nor env says otherwise.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/node-bootstrap/config.json";

/// The raw file, exactly as written. Every section is optional.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub paths: RawPaths,
    #[serde(default)]
    pub cluster: crate::cluster::config::RawCluster,
    #[serde(default)]
    pub os_update: crate::os_update::config::RawOsUpdate,
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
    pub agent: crate::agent_upgrade::config::RawAgent,
    #[serde(default)]
    pub kubelet: crate::kubelet_sysext::config::RawKubelet,
    #[serde(default)]
    pub kubelet_config: crate::kubelet_config::config::RawKubeletConfig,
    #[serde(default)]
    pub runtime: crate::container_runtime::config::RawRuntime,
    #[serde(default)]
    pub follow: crate::follow::config::RawFollow,
}

/// Validated settings the rest of the agent uses.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file these settings came from (or `<defaults>`).
    pub source: PathBuf,
    pub role: Role,
    pub paths: Paths,
    pub cluster: crate::cluster::config::ClusterSettings,
    pub os_update: crate::os_update::config::OsUpdateSettings,
    pub addon: crate::addon::config::AddonSettings,
    pub assets: crate::assets::config::AssetsSettings,
    pub sources: crate::metadata::config::SourcesSettings,
    pub helpers: crate::helper::config::HelpersSettings,
    pub metrics: crate::metrics::config::MetricsSettings,
    pub reboot: crate::reboot::config::RebootSettings,
    pub agent: crate::agent_upgrade::config::AgentSettings,
    pub kubelet: crate::kubelet_sysext::config::KubeletSettings,
    pub kubelet_config: crate::kubelet_config::config::KubeletConfigSettings,
    pub runtime: crate::container_runtime::config::RuntimeSettings,
    pub follow: crate::follow::config::FollowSettings,
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
            kubelet_config: self.kubelet_config.validate()?,
            runtime: self.runtime.validate()?,
            follow: self.follow.validate()?,
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
            let inner = serde_errors::describe(&e.into_inner().to_string());
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

    /// The settings in effect as a config file writes them: every field
    /// of every section, defaults filled in (`null` where unset means
    /// off or none), durations in `*_secs` and sizes in the units the file
    /// uses, secrets in `helpers.*.docker.env` shown as `<redacted>`. Read
    /// back, it gives the same settings (`check-config` prints it).
    pub fn to_raw(&self) -> RawConfig {
        RawConfig {
            role: self.role,
            paths: self.paths.to_raw(),
            cluster: self.cluster.to_raw(),
            os_update: self.os_update.to_raw(),
            addon: self.addon.to_raw(&self.paths),
            assets: self.assets.to_raw(),
            sources: self.sources.to_raw(&self.paths),
            helpers: self.helpers.to_raw(&self.paths.assets_dir),
            metrics: self.metrics.to_raw(),
            reboot: self.reboot.to_raw(),
            agent: self.agent.to_raw(),
            kubelet: self.kubelet.to_raw(),
            kubelet_config: self.kubelet_config.to_raw(),
            runtime: self.runtime.to_raw(),
            follow: self.follow.to_raw(),
        }
    }

    /// All defaults, as if the file were `{}`.
    pub fn defaults() -> Config {
        RawConfig::default()
            .validate(Path::new("<defaults>"))
            .expect("the built-in defaults are valid")
    }
}

/// What each subsystem reads of the config: its own section, and the
/// paths, role and neighbouring settings it needs. Subsystems take these,
/// never the whole [`Config`].
impl Config {
    pub fn metadata_inputs(&self) -> crate::metadata::Inputs<'_> {
        crate::metadata::Inputs {
            paths: &self.paths,
            sources: &self.sources,
            s3: self.assets.s3.as_ref(),
        }
    }

    pub fn addon_inputs(&self) -> crate::addon::Inputs<'_> {
        crate::addon::Inputs {
            paths: &self.paths,
            addon: &self.addon,
            sources: &self.sources,
            s3: self.assets.s3.as_ref(),
        }
    }

    pub fn kubelet_sysext_inputs(&self) -> crate::kubelet_sysext::Inputs<'_> {
        crate::kubelet_sysext::Inputs {
            paths: &self.paths,
            kubelet: &self.kubelet,
            sysext_release_dir: &self.addon.sysext_release_dir,
            systemd_config_dir: &self.addon.systemd_config_dir,
            metadata: self.metadata_inputs(),
        }
    }

    pub fn agent_upgrade_inputs(&self) -> crate::agent_upgrade::Inputs<'_> {
        crate::agent_upgrade::Inputs {
            agent: &self.agent,
            metadata: self.metadata_inputs(),
        }
    }

    pub fn cluster_inputs(&self) -> crate::cluster::Inputs<'_> {
        crate::cluster::Inputs {
            role: self.role,
            paths: &self.paths,
            cluster: &self.cluster,
        }
    }

    pub fn join_inputs(&self) -> crate::join::Inputs<'_> {
        crate::join::Inputs {
            paths: &self.paths,
            cluster: &self.cluster,
        }
    }

    pub fn assets_inputs(&self) -> crate::assets::Inputs<'_> {
        crate::assets::Inputs {
            paths: &self.paths,
            assets: &self.assets,
        }
    }

    pub fn helper_inputs(&self) -> crate::helper::Inputs<'_> {
        crate::helper::Inputs {
            paths: &self.paths,
            helpers: &self.helpers,
        }
    }

    pub fn containerd_inputs(&self) -> crate::container_runtime::Inputs<'_> {
        crate::container_runtime::Inputs {
            paths: &self.paths,
            runtime: &self.runtime,
            systemd_config_dir: &self.addon.systemd_config_dir,
            sysext_release_dir: &self.addon.sysext_release_dir,
            metadata: self.metadata_inputs(),
        }
    }

    /// What the containerd step needs to know of the cluster at
    /// `cluster_version` whose kubelet follows the rules of
    /// `kubelet_rules`: its `major.minor` and the runtime mappings'
    /// containerd series for it (none when the mappings file is absent, as
    /// a node that never runs docker may have no mappings, or lists none for
    /// that Kubernetes; a file that is there must read).
    pub fn containerd_for_cluster(
        &self,
        cluster_version: &str,
        kubelet_rules: crate::kubelet_config::table::Minor,
    ) -> Result<crate::container_runtime::ensure::ForCluster> {
        let v = crate::cluster::KubeVersion::parse(cluster_version)
            .map_err(|e| Error::bad_input(format!("cluster version: {e}")))?;
        let path = self.addon.mappings_path(&self.paths);
        let listed = if path.exists() {
            crate::addon::mappings::RuntimeMappings::load(&path)?.containerd_for(cluster_version)?
        } else {
            None
        };
        Ok(crate::container_runtime::ensure::ForCluster {
            kubernetes: crate::kubelet_config::table::Minor(v.major, v.minor),
            listed,
            kubelet_rules,
        })
    }

    pub fn kubelet_config_inputs(&self) -> crate::kubelet_config::Inputs<'_> {
        crate::kubelet_config::Inputs {
            paths: &self.paths,
            settings: &self.kubelet_config,
            tls_bootstrap: self.cluster.credential
                == crate::cluster::config::Credential::BootstrapToken,
            master: !matches!(self.role, crate::settings::Role::Worker),
            sandbox_image: self.runtime.sandbox_image.as_deref(),
            containerd_sandbox_image: self.runtime.containerd_sandbox_image(),
        }
    }

    pub fn follow_inputs(&self) -> crate::follow::Inputs<'_> {
        crate::follow::Inputs {
            paths: &self.paths,
            cluster: &self.cluster,
            follow: &self.follow,
            kubelet: self.kubelet_sysext_inputs(),
            runtime_requested: self.runtime.requested,
            allow_newer_kubernetes: self.kubelet_config.allow_newer_kubernetes,
            textfile_dir: self.metrics.textfile_dir.as_deref(),
        }
    }

    pub fn reboot_inputs(&self) -> crate::reboot::Inputs<'_> {
        crate::reboot::Inputs {
            paths: &self.paths,
            reboot: &self.reboot,
        }
    }
}

#[cfg(test)]
mod tests;
