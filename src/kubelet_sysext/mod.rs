//! The node's kubelet as a systemd-sysext image chosen by the cluster's
//! version (`kubelet.backend = "sysext"`, today's Flatcar, which has no
//! kubelet-wrapper): the `kubelet-sysext` step of `run`, before
//! `kubelet-env`, and `node-bootstrap kubelet ensure`.
//!
//! [`ensure`]:
//! 1. the offers: every kubelet image of the metadata search path
//!    ([`crate::metadata`], `sources` section): product `kubernetes`, series
//!    `any`, the node's architecture as systemd names it (`x86-64`,
//!    `arm64`), so a mirror holds files named
//!    `kubernetes_v1.20.2_any_x86-64.raw`; each location read signed first,
//!    unsigned only where `sources.allow_unsigned` allows;
//! 2. the choice ([`choice`]): the cluster's exact version, else the newest
//!    patch of its minor not newer than it; none allowed is exit 7 naming
//!    what is offered;
//! 3. the image put in place and merged as [`crate::sysext::package`] does
//!    it for every extension of the agent: reused or downloaded and
//!    verified (exit 6, nothing installed); checked as systemd-sysext would
//!    merge it on this node, `usr/bin/kubelet` present and answering
//!    `--version` with the chosen version (exit 5, nothing installed);
//!    renamed to `/opt/extensions/kubernetes/kubernetes-<version>-<arch>.raw`,
//!    `/etc/extensions/kubernetes.raw` pointed at it in one step,
//!    `systemd-sysext.service` enabled for later boots; merged with
//!    `systemd-sysext refresh` unless it is already, then the merged
//!    `/usr/bin/kubelet --version` must be the chosen version (exit 7 when
//!    not). No reboot. The image the link named before is kept, older ones
//!    removed.
//!
//! The step runs after any reboot the flow needs (the image is checked
//! against the OS that will run kubelet) and before kubelet.env, whose
//! `READY=1` lets kubelet.service start: kubelet starts only once the image
//! is merged. kubelet.env is written as with kubelet-wrapper (its unit may
//! read it). kubelet.service runs `/usr/bin/kubelet` through the drop-in
//! `units/kubelet-sysext.conf`, which the flow puts in place with the image
//! ([`unit`]). Whether a node runs this step at all is [`backend`]'s
//! decision: `kubelet.backend` `auto` (the default) takes it on every
//! release without kubelet-wrapper.

pub mod backend;
pub mod choice;
pub mod config;
pub mod unit;

use crate::cluster::version::KubeVersion;
use crate::error::{Error, Result};
use crate::metadata;
use crate::sysext::install::Extension;
use crate::sysext::offers::{self, Taken};
use crate::sysext::package;
use choice::{Decision, Rule};
use serde::{Deserialize, Serialize};
use std::path::Path;
#[cfg(test)]
use std::path::PathBuf;
use tracing::info;

/// What the kubelet sysext step reads of the agent's config: its own
/// section, the node's paths, systemd-sysext's directories (kept in the
/// `addon` section, shared with the docker addon's sysext backend) and the
/// artifact sources it finds images with.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub kubelet: &'a config::KubeletSettings,
    /// Where merged extensions' release files are (`addon.sysext_release_dir`).
    pub sysext_release_dir: &'a Path,
    /// Where `systemd-sysext.service` is enabled (`addon.systemd_config_dir`).
    pub systemd_config_dir: &'a Path,
    pub metadata: metadata::Inputs<'a>,
}

impl Inputs<'_> {
    /// The kubernetes extension: its images, its link, its release file.
    pub fn extension(&self) -> Extension<'_> {
        Extension {
            name: &self.kubelet.extension_name,
            images_dir: &self.kubelet.images_dir,
            extensions_dir: &self.paths.extensions_dir,
            release_dir: self.sysext_release_dir,
        }
    }

    fn spec(&self) -> package::Spec<'_> {
        package::Spec {
            extension: self.extension(),
            step: STEP,
            program: KUBELET_PATH,
            what: "kubelet",
            requires: &[],
            max_bytes: ("kubelet.max_image_bytes", self.kubelet.max_image_bytes),
            merge_timeout: ("kubelet.merge_timeout_secs", self.kubelet.merge_timeout),
            systemd_config_dir: self.systemd_config_dir,
            remedy: "on a release with kubelet-wrapper (before 2857.0.0), set kubelet.backend to \"wrapper\"",
            masks: &[],
            os_release: &self.paths.os_release,
            scratch: &self.paths.run_dir,
        }
    }
}

/// Settings behind [`Inputs`] for unit tests: the defaults, changed where a
/// test says.
#[cfg(test)]
pub(crate) struct OwnedInputs {
    pub paths: crate::settings::Paths,
    pub kubelet: config::KubeletSettings,
    pub sysext_release_dir: PathBuf,
    pub systemd_config_dir: PathBuf,
    pub sources: crate::metadata::config::SourcesSettings,
}

#[cfg(test)]
impl OwnedInputs {
    pub fn defaults() -> OwnedInputs {
        OwnedInputs {
            paths: crate::settings::Paths::defaults(),
            kubelet: config::KubeletSettings::default(),
            sysext_release_dir: crate::sysext::DEFAULT_RELEASE_DIR.into(),
            systemd_config_dir: crate::sysext::DEFAULT_SYSTEMD_CONFIG_DIR.into(),
            sources: crate::metadata::config::SourcesSettings::default(),
        }
    }

    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            paths: &self.paths,
            kubelet: &self.kubelet,
            sysext_release_dir: &self.sysext_release_dir,
            systemd_config_dir: &self.systemd_config_dir,
            metadata: metadata::Inputs {
                paths: &self.paths,
                sources: &self.sources,
                s3: None,
            },
        }
    }
}

/// The journal's step name and the log's `step` field.
pub const STEP: &str = "kubelet-sysext";
/// The metadata product of kubelet sysext images.
pub const PRODUCT: &str = "kubernetes";
/// Where the kubelet is, inside the image and (merged) on the node.
pub const KUBELET_PATH: &str = "usr/bin/kubelet";

/// The version in `kubelet --version`'s answer (`Kubernetes v1.20.2`).
pub fn kubelet_version(answer: &str) -> Option<KubeVersion> {
    let v = answer.trim().strip_prefix("Kubernetes ")?;
    KubeVersion::parse(v.trim()).ok()
}

/// What the step did (the state journal's `kubelet-sysext` record, and
/// what `kubelet ensure --json` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletSysextRecord {
    /// The version the choice was made for.
    pub cluster_version: String,
    /// The kubelet merged, e.g. `v1.20.2`.
    pub version: String,
    pub rule: Rule,
    /// The image, where it came from, and what the install did.
    #[serde(flatten)]
    pub installed: package::Installed,
}

/// The product id of kubelet images for this machine.
pub fn product_id(config: &Inputs<'_>) -> Result<(String, &'static str)> {
    crate::sysext::offers::product_id(config.metadata.sources, PRODUCT)
}

/// The image chosen for a cluster version, and where it comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Chosen {
    pub cluster_version: String,
    pub rule: Rule,
    #[serde(flatten)]
    pub image: Taken<KubeVersion>,
}

/// Steps 1 and 2 of [`ensure`]: which image the search path offers for
/// `cluster_version`, by the rule of [`choice`] (`kubelet choose`).
pub async fn choose(config: &Inputs<'_>, cluster_version: &str) -> Result<Chosen> {
    let cluster = KubeVersion::parse(cluster_version)
        .map_err(|e| Error::bad_input(format!("cluster version: {e}")))?;
    let offers = offers::find(&config.metadata, PRODUCT, "kubelet sysext", STEP, |v| {
        KubeVersion::parse(v)
    })
    .await?;
    let (index, rule) = match choice::choose(
        &cluster,
        &offers.versions(),
        config.kubelet.max_minor_lag,
    ) {
        Decision::Take { index, rule } => (index, rule),
        Decision::Refuse { why } => {
            return Err(Error::refused(format!(
                "{why} ({}); publish a kubelet image of the cluster's version, nothing was installed",
                offers.listed()
            )));
        }
    };
    let image = offers.take(index);
    info!(step = STEP, version = %image.version, rule = rule.as_str(), cluster_version,
        url = %image.url, location = %image.location, signed = image.signed, "kubelet image chosen");
    Ok(Chosen {
        cluster_version: cluster_version.to_string(),
        rule,
        image,
    })
}

/// Puts the kubelet image for `cluster_version` in place and merges it
/// (module docs).
pub async fn ensure(config: &Inputs<'_>, cluster_version: &str) -> Result<KubeletSysextRecord> {
    let chosen = choose(config, cluster_version).await?;
    install_chosen(config, chosen).await
}

/// Whether a kubelet's `--version` answer is `version` (by precedence: a
/// `+build` is not in what a kubelet prints).
fn says(version: &KubeVersion) -> impl Fn(&str) -> bool + Sync + '_ {
    move |says: &str| {
        kubelet_version(says)
            .is_some_and(|s| choice::precedence(&s, version) == std::cmp::Ordering::Equal)
    }
}

async fn install_chosen(config: &Inputs<'_>, chosen: Chosen) -> Result<KubeletSysextRecord> {
    let (version, found) = (&chosen.image.parsed, &*chosen.image.found);
    let installed = package::install(
        &config.spec(),
        &config.metadata,
        found,
        chosen.image.arch,
        &says(version),
    )
    .await?;
    Ok(KubeletSysextRecord {
        cluster_version: chosen.cluster_version.clone(),
        version: found.version.clone(),
        rule: chosen.rule,
        installed,
    })
}

/// The image of exactly `version` (its `+build` too) in the search path,
/// never another: what `follow` decided on (an image no longer offered
/// is an error naming what is).
pub async fn choose_exact(config: &Inputs<'_>, version: &str) -> Result<Chosen> {
    let want = KubeVersion::parse(version)
        .map_err(|e| Error::bad_input(format!("kubelet version: {e}")))?;
    let offers = offers::find(&config.metadata, PRODUCT, "kubelet sysext", STEP, |v| {
        KubeVersion::parse(v)
    })
    .await?;
    let Some(index) = offers.versions().iter().position(|v| *v == want) else {
        return Err(Error::refused(format!(
            "the search path does not offer kubelet {version} ({}); nothing was installed",
            offers.listed()
        )));
    };
    Ok(Chosen {
        cluster_version: version.to_string(),
        rule: Rule::Exact,
        image: offers.take(index),
    })
}

/// The image of exactly `version` fetched, verified and checked under
/// its versioned name, not linked ([`package::fetch`]); its path.
pub async fn fetch_exact(config: &Inputs<'_>, version: &str) -> Result<std::path::PathBuf> {
    let chosen = choose_exact(config, version).await?;
    let fetched = package::fetch(
        &config.spec(),
        &config.metadata,
        &chosen.image.found,
        chosen.image.arch,
        &says(&chosen.image.parsed),
    )
    .await?;
    Ok(fetched.image)
}

/// [`ensure`] of exactly `version` ([`choose_exact`]).
pub async fn ensure_exact(config: &Inputs<'_>, version: &str) -> Result<KubeletSysextRecord> {
    let chosen = choose_exact(config, version).await?;
    install_chosen(config, chosen).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_answers_parse() {
        assert_eq!(
            kubelet_version("Kubernetes v1.20.2\n").unwrap().to_string(),
            "v1.20.2"
        );
        assert!(kubelet_version("kubelet version 1.20").is_none());
    }

    #[test]
    fn the_product_is_kubernetes_for_any_os_on_this_arch() {
        let (id, arch) = product_id(&OwnedInputs::defaults().inputs()).unwrap();
        assert_eq!(arch, "x86-64");
        assert_eq!(id, "com.node-bootstrap:kubernetes:any:x86-64");
        let owned = OwnedInputs::defaults();
        assert_eq!(
            owned.inputs().extension().image_file_name("v1.20.2", arch),
            "kubernetes-v1.20.2-x86-64.raw"
        );
    }

    /// kubelet.service and the sysext drop-in run the kubelet with the same
    /// arguments: only the program differs.
    #[test]
    fn the_sysext_drop_in_runs_usr_bin_kubelet_with_kubelet_services_arguments() {
        fn exec_start(unit: &str) -> Vec<Vec<String>> {
            let joined = unit.replace("\\\n", " ");
            joined
                .lines()
                .filter_map(|l| l.trim().strip_prefix("ExecStart="))
                .map(|v| v.split_whitespace().map(str::to_string).collect())
                .collect()
        }
        let base = exec_start(include_str!("../../units/kubelet.service"));
        let drop_in = exec_start(include_str!("../../units/kubelet-sysext.conf"));
        assert_eq!(base.len(), 1, "{base:?}");
        assert_eq!(drop_in.len(), 2, "a reset, then the command: {drop_in:?}");
        assert!(drop_in[0].is_empty(), "{drop_in:?}");
        assert_eq!(drop_in[1][0], "/usr/bin/kubelet");
        assert_eq!(base[0][1..], drop_in[1][1..]);
    }
}
