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
//! 3. the image: reused when its versioned file is in place with the
//!    metadata's sha512, else downloaded under a hidden name beside it and
//!    verified by size, sha256 and sha512 (exit 6, nothing installed);
//! 4. the check ([`image`]): the image as systemd-sysext would merge it on
//!    this node (extension-release `ID`, `SYSEXT_LEVEL` or `VERSION_ID`,
//!    `ARCHITECTURE`), `usr/bin/kubelet` present and answering `--version`
//!    with the chosen version (exit 5, nothing installed);
//! 5. the install ([`install`]): the versioned file renamed into place, then
//!    `/etc/extensions/kubernetes.raw` pointed at it in one step;
//!    `systemd-sysext.service` enabled for later boots;
//! 6. the merge: `systemd-sysext refresh`, unless the merged extension is
//!    already this image; then the merged `/usr/bin/kubelet --version` must
//!    be the chosen version (exit 7 when not). No reboot. The image the link
//!    named before is kept, older ones removed.
//!
//! The step runs after any reboot the flow needs (the image is checked
//! against the OS that will run kubelet) and before kubelet.env, whose
//! `READY=1` lets kubelet.service start: kubelet starts only once the image
//! is merged. kubelet.env is written as with kubelet-wrapper (its unit may
//! read it). kubelet.service runs `/usr/bin/kubelet` through the drop-in
//! `units/kubelet-sysext.conf`.

pub mod choice;
pub mod config;
pub mod image;
pub mod install;

use crate::cluster::version::KubeVersion;
use crate::digest::{Sha512, sha512_file};
use crate::error::{Error, ErrorClass, Result};
use crate::metadata::{self, ArtifactQuery, Found, format::VersionMatch};
use choice::{Decision, Rule};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tracing::{info, warn};

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
/// Their series: they fit any OS release their extension-release allows.
pub const SERIES: &str = "any";

/// What the step did (the state journal's `kubelet-sysext` record, and
/// what `kubelet ensure --json` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeletSysextRecord {
    /// The version the choice was made for.
    pub cluster_version: String,
    /// The kubelet merged, e.g. `v1.20.2`.
    pub version: String,
    pub rule: Rule,
    /// The versioned image, e.g. `/opt/extensions/kubernetes/kubernetes-v1.20.2-x86-64.raw`.
    pub image: PathBuf,
    /// The link systemd-sysext reads, e.g. `/etc/extensions/kubernetes.raw`.
    pub link: PathBuf,
    pub sha512: String,
    /// Where it came from.
    pub url: String,
    pub location: String,
    pub signed: bool,
    /// Downloaded by this run (false: the verified file was in place).
    pub downloaded: bool,
    /// The image the link named before, when this run replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PathBuf>,
    /// `systemd-sysext refresh` ran (false: this image was merged already).
    pub refreshed: bool,
    /// Older images removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<PathBuf>,
}

/// The product id of kubelet images for this machine.
pub fn product_id(config: &Inputs<'_>) -> Result<(String, &'static str)> {
    let arch = image::systemd_arch().ok_or_else(|| {
        Error::refused(format!(
            "no kubelet sysext images exist for architecture {}",
            std::env::consts::ARCH
        ))
    })?;
    let q = ArtifactQuery::new(
        config.metadata.sources,
        PRODUCT,
        SERIES,
        arch,
        VersionMatch::Latest,
    );
    Ok((q.product_id, arch))
}

/// Where the merged kubelet is.
pub fn merged_kubelet() -> PathBuf {
    Path::new("/").join(image::KUBELET_PATH)
}

/// "v1.21.0 (https://mirror/…), …": what the search path offered.
fn offered(items: &[Found]) -> String {
    let mut v: Vec<String> = items
        .iter()
        .map(|f| format!("{} at {}", f.version, f.location))
        .collect();
    v.dedup();
    v.join(", ")
}

/// The image chosen for a cluster version, and where it comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Chosen {
    pub cluster_version: String,
    pub version: String,
    pub rule: Rule,
    pub url: String,
    pub location: String,
    pub signed: bool,
    /// Every version the search path offered, in search order.
    pub offered: Vec<String>,
    #[serde(skip)]
    found: Box<Found>,
    #[serde(skip)]
    parsed: KubeVersion,
    #[serde(skip)]
    arch: &'static str,
}

/// Steps 1 and 2 of [`ensure`]: which image the search path offers for
/// `cluster_version`, by the rule of [`choice`] (`kubelet choose`).
pub async fn choose(config: &Inputs<'_>, cluster_version: &str) -> Result<Chosen> {
    let cluster = KubeVersion::parse(cluster_version)
        .map_err(|e| Error::bad_input(format!("cluster version: {e}")))?;
    let (id, arch) = product_id(config)?;
    let offers = metadata::find_all(&config.metadata, &id)
        .await
        .map_err(|e| e.context(format!("no kubelet sysext image ({id}) in the search path")))?;
    let mut usable: Vec<(KubeVersion, &Found)> = Vec::new();
    for f in &offers.items {
        match KubeVersion::parse(&f.version) {
            Ok(v) => usable.push((v, f)),
            Err(e) => {
                warn!(step = STEP, url = %f.url, error = %e, "ignoring a kubelet image whose version is not a Kubernetes version")
            }
        }
    }
    let versions: Vec<KubeVersion> = usable.iter().map(|(v, _)| v.clone()).collect();
    let (index, rule) = match choice::choose(&cluster, &versions, config.kubelet.max_minor_lag) {
        Decision::Take { index, rule } => (index, rule),
        Decision::Refuse { why } => {
            return Err(Error::refused(format!(
                "{why} ({}); publish a kubelet image of the cluster's version, nothing was installed",
                offered(&offers.items)
            )));
        }
    };
    let (version, found) = &usable[index];
    info!(step = STEP, version = %found.version, rule = rule.as_str(), cluster_version,
        url = %found.url, location = %found.location, signed = found.signed, "kubelet image chosen");
    Ok(Chosen {
        cluster_version: cluster_version.to_string(),
        version: found.version.clone(),
        rule,
        url: found.url.clone(),
        location: found.location.clone(),
        signed: found.signed,
        offered: offers.items.iter().map(|f| f.version.clone()).collect(),
        found: Box::new((*found).clone()),
        parsed: version.clone(),
        arch,
    })
}

/// Puts the kubelet image for `cluster_version` in place and merges it
/// (module docs).
pub async fn ensure(config: &Inputs<'_>, cluster_version: &str) -> Result<KubeletSysextRecord> {
    let k = &config.kubelet;
    let chosen = choose(config, cluster_version).await?;
    let (version, found, arch, rule) = (&chosen.parsed, &*chosen.found, chosen.arch, chosen.rule);
    let Some(hex) = found.item.sha512.as_deref() else {
        return Err(Error::bad_input(format!(
            "{}: item {} has no sha512; kubelet images need one (`metadata generate` writes it)",
            found.url, found.item_name
        )));
    };
    let hash = Sha512::parse_manifest_hash(&format!("sha512-{hex}")).ok_or_else(|| {
        Error::bad_input(format!(
            "{}: item {} has a malformed sha512",
            found.url, found.item_name
        ))
    })?;
    let name = install::image_file_name(k, &found.version, arch);
    let image_path = k.images_dir.join(&name);
    let in_place = image_path.is_file() && sha512_file(&image_path).is_ok_and(|h| h == hash);
    let staged = if in_place {
        None
    } else {
        Some(
            metadata::fetch_staged(
                &config.metadata,
                found,
                &k.images_dir,
                &name,
                &hash,
                ("kubelet.max_image_bytes", k.max_image_bytes),
                STEP,
            )
            .await?,
        )
    };
    let checked = staged
        .as_ref()
        .map_or(image_path.clone(), |s| s.partial().to_path_buf());
    let inspection = check(config, &checked, version, &found.url)
        .await
        .map_err(|e| e.context(format!("kubelet {} was not installed", found.version)))?;
    let downloaded = staged.is_some();
    if let Some(s) = staged {
        s.commit()?;
    }
    let before = install::linked_image(config);
    let relinked = install::link_to(config, &image_path)?;
    crate::sysext::ensure_unit_enabled(
        config.systemd_config_dir,
        STEP,
        "set kubelet.backend to \"wrapper\"",
    )?;
    let merged_already = !relinked
        && install::merged_release(config).as_deref() == Some(inspection.release_text.as_str())
        && merged_version(version).is_ok();
    if !merged_already {
        install::refresh(k.merge_timeout).await?;
    }
    let merged = merged_version(version).map_err(|why| {
        Error::refused(format!(
            "kubelet {} is installed at {} but did not take effect: {why}; check `systemd-sysext status` and `journalctl -u systemd-sysext`",
            found.version,
            install::link_path(config).display()
        ))
    })?;
    // The image the link named before, unless the link was a plain file
    // (an image put there by hand, now replaced by the link).
    let link = install::link_path(config);
    let previous = if relinked {
        before.filter(|p| *p != image_path && *p != link)
    } else {
        None
    };
    let removed = match &previous {
        Some(p) => install::remove_old_images(config, &[image_path.as_path(), p.as_path()]),
        None => Vec::new(),
    };
    info!(step = STEP, version = %found.version, merged = %merged, refreshed = !merged_already,
        image = %image_path.display(), previous = ?previous, "kubelet image merged");
    Ok(KubeletSysextRecord {
        cluster_version: cluster_version.to_string(),
        version: found.version.clone(),
        rule,
        image: image_path,
        link,
        sha512: hex.to_ascii_lowercase(),
        url: found.url.clone(),
        location: found.location.clone(),
        signed: found.signed,
        downloaded,
        previous,
        refreshed: !merged_already,
        removed,
    })
}

/// The image check of [`image`] against this node's os-release, and its
/// kubelet against the version the metadata names.
async fn check(
    config: &Inputs<'_>,
    file: &Path,
    version: &KubeVersion,
    url: &str,
) -> Result<image::Inspection> {
    let host_text = crate::fsutil::read_input("os-release", &config.paths.os_release)?;
    let host = crate::osrelease::parse_env(&host_text);
    let (file2, name, scratch) = (
        file.to_path_buf(),
        config.kubelet.extension_name.clone(),
        config.paths.run_dir.clone(),
    );
    let inspection = tokio::task::spawn_blocking(move || image::inspect(&file2, &name, &scratch))
        .await
        .map_err(|e| Error::internal(format!("the image check did not finish: {e}")))??;
    let arch = image::systemd_arch().unwrap_or("unknown");
    image::compatible(&host, &inspection.release, arch).map_err(|why| {
        Error::bad_input(format!(
            "{url} is not for this node: {why} (systemd-sysext would not merge it; {} says: {})",
            config.paths.os_release.display(),
            host_text
                .lines()
                .filter(|l| l.starts_with("ID=")
                    || l.starts_with("VERSION_ID=")
                    || l.starts_with("SYSEXT_LEVEL="))
                .collect::<Vec<_>>()
                .join(" ")
        ))
    })?;
    let says = image::kubelet_version(&inspection.kubelet_says);
    if says
        .as_ref()
        .is_none_or(|s| choice::precedence(s, version) != std::cmp::Ordering::Equal)
    {
        return Err(Error::new(
            ErrorClass::BadInput,
            format!(
                "{url}: its kubelet says {:?}, the metadata lists it as {version}",
                inspection.kubelet_says
            ),
        ));
    }
    info!(step = STEP, url, kubelet = %inspection.kubelet_says, "the image is one systemd-sysext merges here");
    Ok(inspection)
}

/// What the merged `/usr/bin/kubelet --version` says, when it is `want`.
fn merged_version(want: &KubeVersion) -> std::result::Result<String, String> {
    let kubelet = merged_kubelet();
    let says = image::run_kubelet_version(&kubelet)?;
    match image::kubelet_version(&says) {
        Some(v) if choice::precedence(&v, want) == std::cmp::Ordering::Equal => Ok(says),
        _ => Err(format!("{} --version says {says:?}", kubelet.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_is_kubernetes_for_any_os_on_this_arch() {
        let (id, arch) = product_id(&OwnedInputs::defaults().inputs()).unwrap();
        assert_eq!(arch, "x86-64");
        assert_eq!(id, "com.node-bootstrap:kubernetes:any:x86-64");
        let k = config::KubeletSettings::default();
        assert_eq!(
            install::image_file_name(&k, "v1.20.2", arch),
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
