//! Where the node's containerd comes from: the OS's where it fits the
//! cluster, else a containerd system extension from the artifact search
//! path (`runtime.containerd.package: sysext`), the first thing the
//! `containerd` step does.
//!
//! [`choose`]:
//! 1. with `package: sysext` and the agent's extension already linked
//!    (`/etc/extensions/containerd.raw`, from an earlier run), the package
//!    again: the merged `/usr/bin/containerd` is the agent's then, not the
//!    OS's, and the choice is made anew (the same image when nothing
//!    changed, reused and not merged again);
//! 2. otherwise the OS's containerd: `paths.containerd_binary --version`
//!    (absent: the OS has none, as Container Linux before Flatcar 2765,
//!    whose containerd came inside the docker torcx image) held to the
//!    runtime mappings' containerd list for the cluster's `major.minor`
//!    ([`super::version::os_fits`]); it fits, or `package: none` refuses
//!    (exit 7) naming it and the list;
//! 3. the package: every containerd image of the search path (product
//!    `containerd`, series `any`, the node's architecture as systemd names
//!    it: `containerd_1.7.13_any_x86-64.raw`), the list's preference order
//!    ([`super::version::choose_offer`]); none allowed is exit 7 naming
//!    what is offered.
//!
//! [`provide`] installs the package as [`crate::sysext::package`] installs
//! every extension of the agent: verified (exit 6), checked as
//! systemd-sysext would merge it here with `usr/bin/containerd` answering
//! `--version` with the chosen version and `usr/lib/systemd/system/containerd.service`
//! present (exit 5), linked, merged with `systemd-sysext refresh` (no
//! reboot; Flatcar's own `containerd-flatcar` masked), the merged
//! `/usr/bin/containerd` answering the chosen version (exit 7); then it
//! enables `containerd.service` for later boots (Flatcar's
//! `ensure-sysext.service` reloads units once `systemd-sysext.service` has
//! merged the extensions at boot, and starts what is enabled). The step
//! goes on with the config, the start (systemd reloaded first: the unit
//! came with the image) and the CRI probe.
//!
//! Why not torcx: torcx applies packages only at boot (a reboot for every
//! change, its own profile beside docker's), Flatcar deprecated it in 3185
//! and removed it in 3815, and the OSes that have torcx but no
//! systemd-sysext (Container Linux, Flatcar before 3185) are past their
//! end of life, with no Kubernetes that needs a containerd they lack.

use super::ensure::{Inputs, STEP};
use super::version::{self, ContainerdVersion, Series};
use crate::error::{Error, Result};
use crate::kubelet_config::table::Minor;
use crate::sysext::install::Extension;
use crate::sysext::offers::{self, Taken};
use crate::sysext::package as sysext_package;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tracing::info;

/// The metadata product of containerd images (series `any`, as every
/// extension image of the agent: [`crate::sysext::offers`]).
pub const PRODUCT: &str = "containerd";
/// Where containerd is, inside the image and (merged) on the node.
pub const PROGRAM: &str = "usr/bin/containerd";
/// The unit an image must bring (an OS without containerd has none).
pub const UNIT_FILE: &str = "usr/lib/systemd/system/containerd.service";
/// Where the agent enables it for later boots.
const WANTS: &str = "multi-user.target.wants/containerd.service";

/// What the OS's containerd says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OsContainerd {
    pub binary: PathBuf,
    /// Its `--version` answer, or why it gave none.
    pub says: String,
    /// The version in that answer.
    pub version: Option<String>,
}

/// Where the node's containerd comes from (`containerd choose` prints it).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum Choice {
    /// The OS's: it fits.
    Os {
        containerd: OsContainerd,
        /// The runtime mappings' series for the cluster, when they list some.
        listed: Option<Vec<String>>,
    },
    /// The agent's extension.
    Sysext {
        /// Why not the OS's.
        why: String,
        #[serde(flatten)]
        chosen: Taken<ContainerdVersion>,
    },
}

/// The package in the `containerd` step's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageRecord {
    /// The containerd merged, e.g. `1.7.13`.
    pub version: String,
    /// Why not the OS's.
    pub why: String,
    /// The image (`/opt/extensions/containerd/containerd-1.7.13-x86-64.raw`,
    /// linked as `/etc/extensions/containerd.raw`), where it came from,
    /// and what the install did.
    #[serde(flatten)]
    pub installed: sysext_package::Installed,
}

impl Inputs<'_> {
    /// The containerd extension: its images, its link, its release file.
    pub fn extension(&self) -> Extension<'_> {
        Extension {
            name: crate::sysext::CONTAINERD_EXTENSION,
            images_dir: &self.runtime.containerd.images_dir,
            extensions_dir: &self.paths.extensions_dir,
            release_dir: self.sysext_release_dir,
        }
    }

    fn spec(&self) -> sysext_package::Spec<'_> {
        let c = &self.runtime.containerd;
        sysext_package::Spec {
            extension: self.extension(),
            step: STEP,
            program: PROGRAM,
            what: "containerd",
            requires: &[UNIT_FILE],
            max_bytes: ("runtime.containerd.max_image_bytes", c.max_image_bytes),
            merge_timeout: ("runtime.containerd.merge_timeout_secs", c.merge_timeout),
            systemd_config_dir: self.systemd_config_dir,
            remedy: "set runtime.containerd.package to \"none\" and give the node a containerd that fits",
            masks: &c.sysext_mask,
            os_release: &self.paths.os_release,
            scratch: &self.paths.run_dir,
        }
    }
}

/// What `binary --version` says; `None` when there is no such file.
pub fn os_containerd(binary: &Path) -> Option<OsContainerd> {
    if std::fs::symlink_metadata(binary).is_err() {
        return None;
    }
    let says = crate::sysext::image::run_version(binary).unwrap_or_else(|e| e);
    let version = version::from_version_answer(&says).map(|v| v.text);
    Some(OsContainerd {
        binary: binary.to_path_buf(),
        says,
        version,
    })
}

/// Where containerd comes from for a cluster of `kube` with the mappings'
/// `list` (module docs). Installs nothing.
pub async fn choose(inputs: &Inputs<'_>, kube: Minor, list: Option<&[Series]>) -> Result<Choice> {
    let c = &inputs.runtime.containerd;
    let sysext = c.package == super::config::Package::Sysext;
    let link = inputs.extension().link_path();
    let why = if sysext && inputs.extension().linked_image().is_some() {
        format!(
            "the agent's containerd extension is installed ({})",
            link.display()
        )
    } else {
        let why = match os_containerd(&inputs.paths.containerd_binary) {
            None => format!(
                "the OS has no containerd ({} is absent)",
                inputs.paths.containerd_binary.display()
            ),
            Some(containerd) => {
                let parsed = ContainerdVersion::parse(containerd.version.as_deref().unwrap_or(""));
                match version::os_fits(kube, list, parsed.as_ref()) {
                    Ok(()) => {
                        info!(step = STEP, binary = %containerd.binary.display(),
                            says = %containerd.says, "the OS's containerd fits the cluster");
                        return Ok(Choice::Os {
                            containerd,
                            listed: list.map(|l| l.iter().map(Series::to_string).collect()),
                        });
                    }
                    Err(e) => format!(
                        "the OS's containerd {} does not fit: {e}",
                        containerd
                            .version
                            .clone()
                            .unwrap_or_else(|| format!("({:?})", containerd.says))
                    ),
                }
            }
        };
        if !sysext {
            return Err(Error::refused(format!(
                "{why}, and runtime.containerd.package is \"none\": give the node a containerd that \
                 fits, or set it to \"sysext\" to install one from the artifact search path"
            )));
        }
        why
    };
    info!(step = STEP, why = %why, "containerd comes as a package");
    let chosen = choose_image(inputs, kube, list)
        .await
        .map_err(|e| e.context(format!("{why}; no containerd package to install instead")))?;
    Ok(Choice::Sysext { why, chosen })
}

/// Step 3 of [`choose`]: the image the search path offers.
async fn choose_image(
    inputs: &Inputs<'_>,
    kube: Minor,
    list: Option<&[Series]>,
) -> Result<Taken<ContainerdVersion>> {
    let offers = offers::find(&inputs.metadata, PRODUCT, "containerd", STEP, |v| {
        ContainerdVersion::parse(v).ok_or_else(|| format!("{v:?} is not a containerd version"))
    })
    .await?;
    let index = version::choose_offer(kube, list, &offers.versions()).map_err(|why| {
        Error::refused(format!(
            "no containerd to install: {why}; publish one, nothing was installed"
        ))
    })?;
    let image = offers.take(index);
    info!(step = STEP, version = %image.version, url = %image.url,
        location = %image.location, signed = image.signed, "containerd image chosen");
    Ok(image)
}

/// Installs and merges the chosen image (module docs); `None` for the
/// OS's containerd.
pub async fn provide(inputs: &Inputs<'_>, choice: &Choice) -> Result<Option<PackageRecord>> {
    let Choice::Sysext { why, chosen } = choice else {
        return Ok(None);
    };
    let want = &chosen.parsed;
    let says_version =
        |says: &str| version::from_version_answer(says).is_some_and(|v| v.same_release(want));
    let installed = sysext_package::install(
        &inputs.spec(),
        &inputs.metadata,
        &chosen.found,
        chosen.arch,
        &says_version,
    )
    .await?;
    enable_for_later_boots(inputs.systemd_config_dir)?;
    Ok(Some(PackageRecord {
        version: chosen.version.clone(),
        why: why.clone(),
        installed,
    }))
}

/// `containerd.service` wanted by `multi-user.target` (a link in
/// `<systemd_config_dir>`), unless it is already.
fn enable_for_later_boots(systemd_config_dir: &Path) -> Result<()> {
    let wants = systemd_config_dir.join(WANTS);
    if std::fs::symlink_metadata(&wants).is_ok() {
        return Ok(());
    }
    crate::sysext::atomic_symlink(&Path::new("/").join(UNIT_FILE), &wants)?;
    info!(step = STEP, path = %wants.display(), "containerd.service enabled for later boots");
    Ok(())
}

impl Choice {
    /// The version containerd must answer with: the package's, or the
    /// OS's binary's when it named one.
    pub fn expected_version(&self) -> Option<ContainerdVersion> {
        match self {
            Choice::Sysext { chosen, .. } => Some(chosen.parsed.clone()),
            Choice::Os { containerd, .. } => {
                ContainerdVersion::parse(containerd.version.as_deref()?)
            }
        }
    }

    /// One line for an operator.
    pub fn describe(&self) -> String {
        match self {
            Choice::Os { containerd, listed } => format!(
                "the OS's containerd ({}: {}) fits{}",
                containerd.binary.display(),
                containerd.says,
                listed
                    .as_ref()
                    .map(|l| format!(" (the runtime mappings list {})", l.join(", ")))
                    .unwrap_or_default()
            ),
            Choice::Sysext { why, chosen } => format!(
                "{why}: containerd {} from {} ({} metadata); offered: {}",
                chosen.version,
                chosen.url,
                if chosen.signed { "signed" } else { "UNSIGNED" },
                chosen.offered.join(", ")
            ),
        }
    }
}
