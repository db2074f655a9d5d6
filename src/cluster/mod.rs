//! Cluster version discovery: which Kubernetes version this node joins.
//!
//! First hit wins (docs/formats.md §3):
//! 1. `cluster.forced_version` from the config. On a joining node (not the
//!    bootkube master) with a kubeconfig, the API server is asked once for
//!    its version and a forced version that breaks the skew policy is
//!    refused; an unreachable server is only a warning there
//!    (`cluster.check_forced_skew`, default on).
//! 2. The API server's `GET /version` (`gitVersion`), using the node's
//!    kubeconfig, or its bootstrap kubeconfig with `cluster.credential`
//!    `bootstrap-token` ([`credential`]), with `cluster.api_attempts`
//!    jittered, bounded attempts.
//!    The bootkube master skips this step: its API server cannot exist
//!    before it has bootstrapped.
//! 3. The seed kubelet.env's `KUBELET_IMAGE_TAG` (`_` back to `+`): on the
//!    bootkube master; on a joining node only when the API server stayed
//!    unreachable and `cluster.fallback_to_seed` is true.
//!
//! A joining node whose API server stays unreachable fails with a
//! [`crate::error::ErrorClass::Retryable`] error rather than guessing: running
//! a kubelet newer than the cluster breaks the skew policy, and systemd
//! restarts the unit. A bad kubeconfig is `BadInput` (exit 5), a server whose
//! certificate does not chain to the kubeconfig's CA is `Verification`
//! (exit 6, no credentials sent), rejected credentials are `BadInput` (a
//! bootstrap token named by its id: expired or deleted), a malformed
//! bootstrap token is `Config` (exit 4, before any request), a skew
//! violation is `Refused` (exit 7).

pub mod apiclient;
pub mod config;
pub mod credential;
pub mod kubeconfig;
pub mod version;

pub use version::{KubeVersion, check_skew, tag_from_version, version_from_tag};

use crate::error::{Error, ErrorClass, Result, ResultExt};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use tracing::{info, warn};

const STEP: &str = "cluster-version";

/// The Kubernetes version this node's kubelet will run, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterVersion {
    /// e.g. `v1.9.6+coreos.0`; the kubelet image tag is [`Self::image_tag`].
    pub version: String,
    pub source: VersionSource,
    /// What the API server reported, when it was asked and answered.
    pub apiserver_version: Option<String>,
}

impl ClusterVersion {
    /// `KUBELET_IMAGE_TAG` for this version (`+` -> `_`).
    pub fn image_tag(&self) -> String {
        tag_from_version(&self.version)
    }
}

/// Where the version came from (recorded in the state journal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum VersionSource {
    /// `cluster.forced_version` in the config.
    Forced,
    /// The API server's `/version`.
    ApiServer { url: String },
    /// `KUBELET_IMAGE_TAG` of the seed kubelet.env.
    Seed { path: PathBuf },
}

impl std::fmt::Display for VersionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionSource::Forced => write!(f, "config cluster.forced_version"),
            VersionSource::ApiServer { url } => write!(f, "API server {url}"),
            VersionSource::Seed { path } => write!(f, "seed {}", path.display()),
        }
    }
}

/// What cluster version discovery reads of the agent's config: its own
/// section, the node's role and paths.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub role: crate::settings::Role,
    pub paths: &'a crate::settings::Paths,
    pub cluster: &'a config::ClusterSettings,
}

/// Determines the cluster version (see the module docs for the order).
/// `seed_tag` is `KUBELET_IMAGE_TAG` of the seed kubelet.env, already read by
/// the caller (`None` when the seed has none).
pub async fn discover(config: &Inputs<'_>, seed_tag: Option<&str>) -> Result<ClusterVersion> {
    let c = &config.cluster;
    let seed_path = config.paths.seed_kubelet_env();

    if let Some(forced) = &c.forced_version {
        let apiserver_version = if config.role.is_bootkube_master() || !c.check_forced_skew {
            None
        } else {
            probe_forced(config, forced).await?
        };
        info!(step = STEP, version = %forced, source = "forced", "cluster version forced by config");
        return Ok(ClusterVersion {
            version: forced.clone(),
            source: VersionSource::Forced,
            apiserver_version,
        });
    }

    if config.role.is_bootkube_master() {
        let v = from_seed(seed_tag, &seed_path)?;
        info!(step = STEP, version = %v.version, path = %seed_path.display(), source = "seed",
            "bootkube master: using the seed version (no API server exists before this node bootstraps it)");
        return Ok(v);
    }

    let kc = credential::load(config.paths, c.credential)?;
    let client = apiclient::ApiClient::new(&kc, c.api_timeout)?;
    let url = client.url().to_string();
    info!(step = STEP, url = %url, credentials = %kc.credentials.kinds(), attempts = c.api_attempts,
        "asking the API server for the cluster version");
    match client
        .version_once_the_token_is_known(c.api_retry_policy(), c.bootstrap_token_grace)
        .await
    {
        Ok(sv) => {
            info!(step = STEP, version = %sv.git_version, url = %url, source = "api-server", "cluster version from the API server");
            Ok(ClusterVersion {
                version: sv.git_version.clone(),
                source: VersionSource::ApiServer { url },
                apiserver_version: Some(sv.git_version),
            })
        }
        Err(e) if e.class() == ErrorClass::Retryable && c.fallback_to_seed => {
            let v = from_seed(seed_tag, &seed_path).context(|| {
                format!("the API server is unreachable ({e}) and the seed has no usable version")
            })?;
            warn!(step = STEP, version = %v.version, url = %url, error = %e, path = %seed_path.display(),
                "API server unreachable: falling back to the seed version (cluster.fallback_to_seed)");
            Ok(v)
        }
        Err(e) if e.class() == ErrorClass::Retryable => Err(e.context(format!(
            "cannot learn the cluster version from the API server named by {} \
             (a joining node does not guess; set cluster.fallback_to_seed to use the seed kubelet.env instead)",
            kc.path.display()
        ))),
        Err(e) => Err(e.context(format!(
            "cannot learn the cluster version from the API server named by {}",
            kc.path.display()
        ))),
    }
}

/// The seed's `KUBELET_IMAGE_TAG` as a version.
fn from_seed(seed_tag: Option<&str>, seed_path: &std::path::Path) -> Result<ClusterVersion> {
    let tag = seed_tag.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        Error::bad_input(format!(
            "seed kubelet.env {} has no KUBELET_IMAGE_TAG to take the cluster version from",
            seed_path.display()
        ))
    })?;
    let version = version_from_tag(tag.trim());
    KubeVersion::parse(&version).map_err(|e| {
        Error::bad_input(format!(
            "seed kubelet.env {}: KUBELET_IMAGE_TAG: {e}",
            seed_path.display()
        ))
    })?;
    Ok(ClusterVersion {
        version,
        source: VersionSource::Seed {
            path: seed_path.to_path_buf(),
        },
        apiserver_version: None,
    })
}

/// One look at the API server to check a forced version against it.
async fn probe_forced(config: &Inputs<'_>, forced: &str) -> Result<Option<String>> {
    let path = credential::path(config.paths, config.cluster.credential);
    if !path.exists() {
        info!(step = STEP, path = %path.display(), "no kubeconfig: forced version not checked against the API server");
        return Ok(None);
    }
    let kc = credential::load(config.paths, config.cluster.credential)?;
    let client = apiclient::ApiClient::new(&kc, config.cluster.api_timeout)?;
    let once =
        crate::retry::RetryPolicy::new(std::time::Duration::ZERO, std::time::Duration::ZERO, 1);
    match client.version(once).await {
        Ok(sv) => {
            check_skew(forced, &sv.git_version)
                .map_err(|e| e.context("cluster.forced_version does not fit the cluster"))?;
            Ok(Some(sv.git_version))
        }
        Err(e) if e.class() == ErrorClass::Retryable => {
            warn!(step = STEP, version = %forced, url = %client.url(), error = %e,
                "API server unreachable: forced version not checked against it");
            Ok(None)
        }
        Err(e) => Err(e.context("checking cluster.forced_version against the API server")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Paths, RawPaths, Role, section};

    struct Owned {
        role: Role,
        paths: Paths,
        cluster: config::ClusterSettings,
    }

    impl Owned {
        fn inputs(&self) -> Inputs<'_> {
            Inputs {
                role: self.role,
                paths: &self.paths,
                cluster: &self.cluster,
            }
        }
    }

    /// The sections cluster discovery reads, from a config file's JSON.
    fn config(json: &str) -> Owned {
        let file: serde_json::Value = serde_json::from_str(json).unwrap();
        Owned {
            role: section(&file, "role"),
            paths: section::<RawPaths>(&file, "paths").validate().unwrap(),
            cluster: section::<config::RawCluster>(&file, "cluster")
                .validate()
                .unwrap(),
        }
    }

    #[tokio::test]
    async fn forced_wins_over_everything() {
        let c = config(r#"{"role":"bootkube-master","cluster":{"forced_version":"v1.10.2"}}"#);
        let v = discover(&c.inputs(), Some("v1.9.6_coreos.0"))
            .await
            .unwrap();
        assert_eq!(v.version, "v1.10.2");
        assert_eq!(v.source, VersionSource::Forced);
        assert_eq!(v.apiserver_version, None);
    }

    #[tokio::test]
    async fn forced_on_a_worker_without_kubeconfig_is_not_probed() {
        let c = config(
            r#"{"paths":{"kubeconfig":"/nonexistent/kubeconfig"},"cluster":{"forced_version":"v1.9.6+coreos.0"}}"#,
        );
        let v = discover(&c.inputs(), None).await.unwrap();
        assert_eq!(
            (v.version.as_str(), v.apiserver_version),
            ("v1.9.6+coreos.0", None)
        );
    }

    #[tokio::test]
    async fn bootkube_master_uses_the_seed_without_any_kubeconfig() {
        let c = config(
            r#"{"role":"bootkube-master","paths":{"kubeconfig":"/nonexistent/kubeconfig","seed_dir":"/seed"}}"#,
        );
        let v = discover(&c.inputs(), Some("v1.9.6_coreos.0"))
            .await
            .unwrap();
        assert_eq!(v.version, "v1.9.6+coreos.0");
        assert_eq!(v.image_tag(), "v1.9.6_coreos.0");
        assert_eq!(
            v.source,
            VersionSource::Seed {
                path: "/seed/kubelet.env".into()
            }
        );
        let e = discover(&c.inputs(), None).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert_eq!(
            e.to_string(),
            "seed kubelet.env /seed/kubelet.env has no KUBELET_IMAGE_TAG to take the cluster version from"
        );
        let e = discover(&c.inputs(), Some("latest")).await.unwrap_err();
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert!(
            e.to_string()
                .contains("KUBELET_IMAGE_TAG: \"latest\" is not a Kubernetes version"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn worker_with_missing_kubeconfig_is_bad_input() {
        let c = config(r#"{"paths":{"kubeconfig":"/nonexistent/kubeconfig"}}"#);
        let e = discover(&c.inputs(), Some("v1.9.6_coreos.0"))
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::BAD_INPUT);
        assert!(e.to_string().contains("/nonexistent/kubeconfig"), "{e}");
    }

    #[test]
    fn version_source_serializes_for_the_journal() {
        let v = ClusterVersion {
            version: "v1.9.6+coreos.0".into(),
            source: VersionSource::ApiServer {
                url: "https://a/version".into(),
            },
            apiserver_version: Some("v1.9.6+coreos.0".into()),
        };
        let j = serde_json::to_value(&v).unwrap();
        assert_eq!(j["source"]["kind"], "api-server");
        assert_eq!(j["source"]["url"], "https://a/version");
        let back: ClusterVersion = serde_json::from_value(j).unwrap();
        assert_eq!(back, v);
        assert_eq!(
            serde_json::to_value(VersionSource::Forced).unwrap(),
            serde_json::json!({"kind":"forced"})
        );
    }
}
