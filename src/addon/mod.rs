//! The docker addon step: pick, fetch, verify and activate the docker
//! version the cluster needs (torcx, or systemd-sysext), for the OS version
//! the node boots next.
//!
//! [`ensure`] is what `run` calls:
//! 1. the runtime mappings give the docker versions the cluster's
//!    Kubernetes minor wants, in preference order ([`mappings`]);
//! 2. os-release gives `VERSION_ID` and `COREOS_BOARD`; a pending OS update
//!    gives the version the node boots next ([`osrelease`]). OS versions
//!    before 1520.3.0 have no remote packages: the vendor docker stays;
//! 3. the package manifest for that board and OS version is read (URL or
//!    file template) and its detached OpenPGP signature verified against the
//!    keyring before anything in it is used ([`crate::openpgp`]); unsigned only when
//!    `addon.allow_unsigned` says so, with a warning every time;
//! 4. the first preferred version the manifest offers for the board, the
//!    largest build of it ([`manifest`]);
//! 5. the package is reused from any store by hash, or downloaded with
//!    retries and resume, verified by sha512, checked to be an image torcx
//!    can apply ([`torcx_image`]), and only then renamed into
//!    `/var/lib/torcx/store/<os_version>/docker:<version>.torcx.tgz`
//!    ([`fetch`], [`torcx`]); also for the running OS version when an update
//!    is pending and its manifest offers the same version (a rollback then
//!    still finds its docker);
//! 6. the profile and `/etc/torcx/next-profile` are written atomically;
//!    the answer says whether docker after the next boot differs from the
//!    docker running now (Docker's API, else `/run/torcx/profile.json`): a
//!    reboot only then, never "always" as the original did.
//!
//! With `addon.package_source = "metadata"` steps 3-4 read the artifact
//! metadata search path instead of a manifest ([`metasource`]): same
//! preference rules, candidates and trust from the `sources` section; the
//! chosen item is fetched from the location that served it and verified by
//! the metadata's size and hashes. Steps 5-6 are shared.
//!
//! With `addon.backend = "sysext"` steps 5-6 install `/etc/extensions/docker.raw`
//! instead ([`sysext`]). [`pre_reboot_hook`] prepares the next OS version's
//! package before an OS-update reboot and garbage-collects stores of older
//! OS versions ([`gc`]).
//!
//! Errors name what and where: bad mappings/manifest = BadInput,
//! signature/hash = Verification (nothing installed), network after
//! retries = Retryable.

pub(crate) mod config;
pub(crate) mod fetch;
pub(crate) mod follow;
pub mod manifest;
pub mod mappings;
pub(crate) mod metasource;
pub(crate) mod sysext;
pub mod torcx;
pub(crate) mod torcx_image;
pub(crate) mod version;

use crate::error::{Error, Result, ResultExt as _};
use crate::fsutil::staged::Staged;
use crate::osrelease::{OsIdentity, OsVersion};
use config::{Backend, PackageSource};
use fetch::{Fetcher, Source};
use manifest::{Choice, PackageManifest};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tracing::{debug, error, info, warn};
use version::DockerVersion;

const STEP: &str = "docker-addon";

/// What the docker addon reads of the agent's config: its own section, the
/// node's paths, and for `addon.package_source = "metadata"` the artifact
/// sources (`sources`, and `assets.s3` for the cluster bucket).
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub addon: &'a config::AddonSettings,
    pub sources: &'a crate::metadata::config::SourcesSettings,
    pub s3: Option<&'a crate::assets::config::S3Settings>,
}

impl<'a> Inputs<'a> {
    /// What the metadata search takes of these.
    pub fn metadata(&self) -> crate::metadata::Inputs<'a> {
        crate::metadata::Inputs {
            paths: self.paths,
            sources: self.sources,
            s3: self.s3,
        }
    }
}

/// What the flow asks of the addon step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddonRequest {
    /// The cluster's Kubernetes version, e.g. `v1.9.6+coreos.0`.
    pub cluster_version: String,
    /// The OS version a pending update boots next (from update_engine).
    pub next_os_version: Option<String>,
}

/// Settings behind [`Inputs`] for unit tests, parsed from sections as a
/// config file has them.
#[cfg(test)]
pub(crate) struct OwnedInputs {
    pub paths: crate::settings::Paths,
    pub addon: config::AddonSettings,
    pub sources: crate::metadata::config::SourcesSettings,
}

#[cfg(test)]
impl OwnedInputs {
    pub fn parse(addon: serde_json::Value, sources: serde_json::Value) -> OwnedInputs {
        let addon: config::RawAddon = serde_json::from_value(addon).unwrap();
        let sources: crate::metadata::config::RawSources = serde_json::from_value(sources).unwrap();
        OwnedInputs {
            paths: crate::settings::Paths::defaults(),
            addon: addon.validate().unwrap(),
            sources: sources.validate().unwrap(),
        }
    }

    pub fn inputs(&self) -> Inputs<'_> {
        Inputs {
            paths: &self.paths,
            addon: &self.addon,
            sources: &self.sources,
            s3: None,
        }
    }
}

/// What the step did and what the flow must do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddonOutcome {
    /// The docker running now, e.g. `1.12` (Docker's API when docker is up,
    /// else `/run/torcx/profile.json` or the merged sysext).
    pub docker_running: Option<String>,
    /// The docker that runs after the next boot, e.g. `17.03`.
    pub docker_next: String,
    /// `docker_next` differs from `docker_running`.
    pub reboot_needed: bool,
    /// The docker change crosses a `major.minor` (or what runs now is
    /// unknown): docker's datadir must be wiped before it starts again.
    pub wipe_docker_datadir: bool,
    /// Files this call wrote (store files, profile, next-profile, sysext
    /// image, masks); empty when everything was in place.
    pub installed: Vec<PathBuf>,
    #[serde(default)]
    pub backend: Backend,
    /// Where `docker_running` came from: `docker-api`, `torcx-run-profile`,
    /// `sysext-release`, `sysext-record`.
    #[serde(default)]
    pub docker_running_source: Option<String>,
    /// The OS versions the package is in place for.
    #[serde(default)]
    pub os_versions: Vec<String>,
    /// The torcx profile activated (torcx backend).
    #[serde(default)]
    pub profile: Option<String>,
    /// Why nothing was done, when nothing was (e.g. an OS before 1520.3.0).
    #[serde(default)]
    pub note: Option<String>,
}

/// The runtime mappings file in effect.
pub fn mappings_path(config: &Inputs<'_>) -> PathBuf {
    config.addon.mappings_path(config.paths)
}

/// The keyring in effect (`<seed_dir>/keyring.asc` by default).
pub fn keyring_path(config: &Inputs<'_>) -> PathBuf {
    config.addon.keyring_path(config.paths)
}

/// Puts the docker the cluster needs in place for the next boot.
/// Idempotent: with everything in place it downloads and writes nothing.
pub async fn ensure(config: &Inputs<'_>, req: &AddonRequest) -> Result<AddonOutcome> {
    let prefs = mappings::RuntimeMappings::load(&mappings_path(config))?
        .docker_for(&req.cluster_version)?;
    let os = OsIdentity::read(&config.paths.os_release)?;
    let next_os = match &req.next_os_version {
        Some(v) => Some(OsVersion::parse(v).ok_or_else(|| {
            Error::bad_input(format!(
                "the pending OS update's version {v:?} is not an OS version like 1632.3.0"
            ))
        })?),
        None => None,
    };
    let target = next_os.unwrap_or(os.version);
    let target_str = req.next_os_version.clone().unwrap_or(os.version_id.clone());
    let target_os = match &req.next_os_version {
        Some(v) => format!("OS {v}"),
        None => os.describe(),
    };
    // Before anything is fetched or written: torcx on a release without it
    // is refused.
    let backend = config.addon.backend.resolve(target, &target_os)?;
    info!(
        step = STEP,
        version = %req.cluster_version,
        preferences = %prefs.join(","),
        os_version = %os.version_id,
        next_os_version = %target_str,
        board = %os.board,
        backend = backend.name(),
        backend_setting = ?config.addon.backend,
        "choosing the docker addon"
    );
    let fetcher = Fetcher::new(config.addon)?;
    if !target.has_remote_packages() {
        return skip_old_os(config, backend, &target_str).await;
    }
    let choice = match config.addon.package_source {
        PackageSource::TorcxManifest => {
            let (m, base) = load_manifest(config, &fetcher, &os.board, &target_str, true)
                .await?
                .expect("a required manifest is never None");
            let choice = m.choose(&prefs, &os.board, &base)?;
            info!(step = STEP, version = %choice.version, preference = %choice.preference,
                source = PackageSource::TorcxManifest.as_str(), url = %m.source, "docker version chosen");
            choice
        }
        PackageSource::Metadata => {
            let choice = Box::pin(metasource::choose(
                config,
                backend,
                &prefs,
                &os.board,
                &target_str,
            ))
            .await?;
            let found = &choice
                .origin
                .as_ref()
                .expect("metadata choices say where")
                .0;
            info!(step = STEP, version = %choice.version, preference = %choice.preference,
                source = PackageSource::Metadata.as_str(), url = %found.url,
                location = %found.location, location_kind = found.kind.as_str(),
                "docker version chosen");
            choice
        }
    };
    // Boxed: the install futures nest deep enough (download, retry, body
    // loop) that a caller's future would outgrow rustc's layout query
    // depth; one allocation per run of the step costs nothing.
    match backend {
        Backend::Torcx => Box::pin(ensure_torcx(config, &fetcher, &os, &target_str, choice)).await,
        Backend::Sysext => Box::pin(ensure_sysext(config, &fetcher, choice)).await,
    }
}

async fn ensure_torcx(
    config: &Inputs<'_>,
    fetcher: &Fetcher,
    os: &OsIdentity,
    target: &str,
    choice: Choice,
) -> Result<AddonOutcome> {
    let tp = torcx::TorcxPaths::new(config.paths);
    let mut plans: Vec<(String, Choice)> = vec![(target.to_string(), choice.clone())];
    if target != os.version_id && os.version.has_remote_packages() {
        // A rollback to the running OS must still find this docker.
        if let Some(c) = same_docker_for_running_os(config, fetcher, os, &choice).await? {
            plans.push((os.version_id.clone(), c));
        }
    }
    // Stage everything before anything gets a final name.
    let mut created_dirs = Vec::new();
    let mut staged: Vec<(crate::digest::Sha512, Staged)> = Vec::new();
    let mut os_versions = Vec::new();
    for (osv, c) in &plans {
        let dir = tp.user_store_for(osv);
        if !dir.exists() {
            created_dirs.push(dir);
        }
        let same_build = staged
            .iter()
            .find(|(h, _)| *h == c.hash)
            .map(|(_, s)| s.partial().to_path_buf());
        let res = torcx::prepare_package(
            config,
            &tp,
            fetcher,
            osv,
            &os.version_id,
            c,
            same_build.as_deref(),
        )
        .await
        .and_then(|plan| check_applicable(plan, c, osv));
        match res {
            Ok(torcx::PackagePlan::Staged { staged: s, .. }) => staged.push((c.hash, s)),
            Ok(_) => {}
            Err(e) => {
                drop(staged);
                // Directories this run created and left empty go again.
                for d in created_dirs {
                    let _ = std::fs::remove_dir(d);
                }
                return Err(e.context(format!(
                    "docker {} for OS {osv} was not installed",
                    c.version
                )));
            }
        }
        os_versions.push(osv.clone());
    }
    let mut installed = Vec::new();
    for (_, s) in staged {
        installed.push(s.commit()?);
    }
    let profile = torcx::profile_to_use(&tp, &config.addon.profile_name)?;
    installed.extend(torcx::activate(&tp, &profile, &choice.version)?);
    let (running, source) = running_docker_torcx(config, &tp).await;
    Ok(outcome(
        Backend::Torcx,
        running,
        source,
        choice.version,
        installed,
        os_versions,
        Some(profile),
        None,
    ))
}

/// Refuses a package torcx could not apply ([`torcx_image`]) before it gets
/// a final name or a profile points at it. A package the next OS image
/// ships in its own store cannot be read from here: it is the vendor's.
/// A download that the check followed ([`follow`]) has its answer; any
/// other package (resumed, copied, local) is read here.
fn check_applicable(
    mut plan: torcx::PackagePlan,
    choice: &Choice,
    os_version: &str,
) -> Result<torcx::PackagePlan> {
    let followed = match &mut plan {
        torcx::PackagePlan::Staged { followed, .. } => followed.take(),
        _ => None,
    };
    let checked = match (&plan, followed) {
        (_, Some(answer)) => answer,
        (torcx::PackagePlan::ShippedWithOs(_), None) => return Ok(plan),
        (torcx::PackagePlan::InPlace(p), None) => check_file(p, choice, os_version),
        (torcx::PackagePlan::Staged { staged, .. }, None) => {
            check_file(staged.partial(), choice, os_version)
        }
    };
    match checked {
        Ok(()) => Ok(plan),
        // `plan` is dropped: a staged package's partial is deleted.
        Err(e) => {
            error!(message_id = crate::message_ids::PACKAGE_REFUSED, step = STEP, version = %choice.version,
                package = %choice.archive_name(), os_version, error = %e, "package refused: torcx could not apply it");
            Err(e)
        }
    }
}

fn check_file(file: &std::path::Path, choice: &Choice, os_version: &str) -> Result<()> {
    let f = std::fs::File::open(file).map_err(|e| {
        Error::internal(format!(
            "failed to read the package {}: {e}",
            file.display()
        ))
    })?;
    image_check(choice, os_version)(&mut std::io::BufReader::new(f))
}

/// The check of torcx's rules on the bytes of `choice`'s package for
/// `os_version`: the file, or the download as it arrives. The caller logs
/// a refusal once it knows the answer counts.
fn image_check(choice: &Choice, os_version: &str) -> follow::Follower {
    let (version, os_version) = (choice.version.clone(), os_version.to_string());
    let what = format!(
        "the docker {version} package for OS {os_version} ({}, {:?})",
        choice.archive_name(),
        choice.hash
    );
    Box::new(move |image| {
        let summary = torcx_image::check_reader(image, &what)?;
        debug!(step = STEP, version = %version, os_version = %os_version,
            binaries = %summary.binaries.join(","), units = %summary.units.join(","),
            unpacked_bytes = summary.unpacked_bytes, "torcx can apply the package");
        Ok(())
    })
}

/// The build of `choice.version` for the running OS version (which the
/// node falls back to if the update rolls back), if its source offers it.
async fn same_docker_for_running_os(
    config: &Inputs<'_>,
    fetcher: &Fetcher,
    os: &OsIdentity,
    choice: &Choice,
) -> Result<Option<Choice>> {
    match config.addon.package_source {
        PackageSource::TorcxManifest => {
            match load_manifest(config, fetcher, &os.board, &os.version_id, false).await? {
                Some((m, base)) => {
                    match m.choose(std::slice::from_ref(&choice.version), &os.board, &base) {
                        Ok(c) if c.version == choice.version => return Ok(Some(c)),
                        _ => {
                            info!(step = STEP, version = %choice.version, os_version = %os.version_id,
                               "the running OS's manifest does not offer this docker; installing for the next OS only")
                        }
                    }
                }
                None => {
                    info!(step = STEP, os_version = %os.version_id, "no package manifest for the running OS version")
                }
            }
            Ok(None)
        }
        PackageSource::Metadata => {
            metasource::same_version_for(config, &choice.version, &os.board, &os.version_id).await
        }
    }
}

async fn ensure_sysext(
    config: &Inputs<'_>,
    fetcher: &Fetcher,
    choice: Choice,
) -> Result<AddonOutcome> {
    let boot_id = crate::boot::id(&config.paths.run_dir)?;
    let (running, source) = running_docker_sysext(config, &boot_id).await;
    let mut installed = Vec::new();
    if !sysext::image_in_place(config, &choice)? {
        let staged = sysext::prepare_image(config, fetcher, &choice).await?;
        let image = staged.commit()?;
        installed.push(image.clone());
        // What ran in this boot before the install, for later calls in it.
        let previous = match read_same_boot_previous(config, &boot_id) {
            Some(p) => p,
            None => running.clone(),
        };
        installed.push(sysext::write_record(
            config,
            &sysext::SysextRecord {
                version: choice.version.clone(),
                sha512: choice.hash.to_hex(),
                image,
                boot_id: boot_id.clone(),
                previous,
            },
        )?);
    } else if sysext::read_record(config).is_none_or(|r| r.sha512 != choice.hash.to_hex()) {
        // In place but not recorded (installed by hand or by an older
        // agent): record it as present since before this boot.
        installed.push(sysext::write_record(
            config,
            &sysext::SysextRecord {
                version: choice.version.clone(),
                sha512: choice.hash.to_hex(),
                image: sysext::image_path(config),
                boot_id: String::new(),
                previous: None,
            },
        )?);
    }
    installed.extend(sysext::ensure_masks(config)?);
    installed.extend(sysext::ensure_unit_enabled(config)?);
    let (running, source) = if installed.is_empty() {
        (running, source)
    } else {
        running_docker_sysext(config, &boot_id).await
    };
    Ok(outcome(
        Backend::Sysext,
        running,
        source,
        choice.version,
        installed,
        Vec::new(),
        None,
        None,
    ))
}

/// The `previous` of a record written earlier in this same boot: a second
/// install in one boot does not change what runs now.
fn read_same_boot_previous(config: &Inputs<'_>, boot_id: &str) -> Option<Option<String>> {
    sysext::read_record(config)
        .filter(|r| r.boot_id == boot_id)
        .map(|r| r.previous)
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    backend: Backend,
    running: Option<String>,
    source: Option<&'static str>,
    next: String,
    installed: Vec<PathBuf>,
    os_versions: Vec<String>,
    profile: Option<String>,
    note: Option<String>,
) -> AddonOutcome {
    let next_v = DockerVersion::parse(&next);
    let running_v = running.as_deref().and_then(DockerVersion::parse);
    let same = match (&next_v, &running_v) {
        (Some(n), Some(r)) => n.same_docker(r),
        _ => running.as_deref() == Some(next.as_str()),
    };
    let reboot_needed = !same;
    let wipe = reboot_needed
        && !matches!((&next_v, &running_v), (Some(n), Some(r)) if n.datadir_compatible(r));
    let o = AddonOutcome {
        docker_running: running,
        docker_next: next,
        reboot_needed,
        wipe_docker_datadir: wipe,
        installed,
        backend,
        docker_running_source: source.map(str::to_string),
        os_versions,
        profile,
        note,
    };
    info!(
        step = STEP,
        docker_running = o.docker_running.as_deref().unwrap_or("unknown"),
        docker_next = %o.docker_next,
        reboot_needed = o.reboot_needed,
        wipe_docker_datadir = o.wipe_docker_datadir,
        written = o.installed.len(),
        "docker addon in place"
    );
    o
}

/// OS versions before 1520.3.0: no remote packages, the vendor docker stays.
async fn skip_old_os(config: &Inputs<'_>, backend: Backend, target: &str) -> Result<AddonOutcome> {
    let note = format!(
        "OS version {target} predates remote docker packages ({}); the OS's own docker stays",
        OsVersion::FIRST_REMOTE_PACKAGES
    );
    warn!(step = STEP, os_version = target, "{note}");
    let (running, source, next) = match backend {
        Backend::Torcx => {
            let tp = torcx::TorcxPaths::new(config.paths);
            let (running, source) = running_docker_torcx(config, &tp).await;
            let next = torcx::docker_ref(&torcx::next_boot_images(&tp)?);
            (running, source, next)
        }
        Backend::Sysext => {
            let boot_id = crate::boot::id(&config.paths.run_dir)?;
            let (running, source) = running_docker_sysext(config, &boot_id).await;
            (running, source, None)
        }
    };
    let next = next
        .or_else(|| running.clone())
        .unwrap_or_else(|| "vendor".to_string());
    let mut o = outcome(
        backend,
        running,
        source,
        next,
        Vec::new(),
        Vec::new(),
        None,
        Some(note),
    );
    // Nothing was changed, so nothing needs a reboot on our account.
    o.reboot_needed = false;
    o.wipe_docker_datadir = false;
    Ok(o)
}

/// Renders a manifest template for a board and OS version.
fn render_template(t: &str, board: &str, os_version: &str) -> String {
    t.replace("{board}", board)
        .replace("{os_version}", os_version)
}

/// The manifest location for a board and OS version (file wins over URL).
pub fn manifest_source(config: &Inputs<'_>, board: &str, os_version: &str) -> Result<Source> {
    if let Some(f) = &config.addon.manifest_file {
        return Ok(Source::File(PathBuf::from(render_template(
            f, board, os_version,
        ))));
    }
    let Some(u) = &config.addon.manifest_url else {
        return Err(Error::config(
            "addon.manifest_url (or addon.manifest_file) is not set",
        ));
    };
    let rendered = render_template(u, board, os_version);
    let parsed = url::Url::parse(&rendered)
        .map_err(|e| Error::config(format!("addon.manifest_url renders to {rendered:?}: {e}")))?;
    Source::from_url(&parsed)
}

/// Fetches the manifest and its signature and verifies it. `required`:
/// a missing manifest is an error; else `Ok(None)`.
async fn load_manifest(
    config: &Inputs<'_>,
    fetcher: &Fetcher,
    board: &str,
    os_version: &str,
    required: bool,
) -> Result<Option<(PackageManifest, url::Url)>> {
    let src = manifest_source(config, board, os_version)?;
    let shown = src.display();
    let Some(body) = fetcher.get_document(&src, "package manifest").await? else {
        if required {
            return Err(Error::bad_input(format!(
                "no package manifest for board {board}, OS version {os_version} at {shown}"
            )));
        }
        return Ok(None);
    };
    let sig_src = src.signature();
    let sig = fetcher.get_document(&sig_src, "manifest signature").await?;
    match sig {
        Some(sig) => {
            let keyring = crate::openpgp::Keyring::load(&keyring_path(config))?;
            let good =
                keyring.verify_detached(&body, &sig, &format!("package manifest {shown}"))?;
            info!(step = STEP, url = %shown, key = %good.signer_fingerprint, "package manifest signature verified");
        }
        None if config.addon.allow_unsigned => {
            warn!(
                step = STEP,
                url = %shown,
                "using an UNSIGNED package manifest (no signature at {}) because addon.allow_unsigned is true",
                sig_src.display()
            );
        }
        None => {
            return Err(Error::verification(format!(
                "package manifest {shown} has no signature at {}; refusing an unsigned manifest (addon.allow_unsigned is false)",
                sig_src.display()
            )));
        }
    }
    let m = PackageManifest::parse(&body, &shown)?;
    let base = match &src {
        Source::Url(u) => u.clone(),
        Source::File(p) => url::Url::from_file_path(p).map_err(|()| {
            Error::config(format!(
                "addon.manifest_file {} is not absolute",
                p.display()
            ))
        })?,
    };
    Ok(Some((m, base)))
}

/// The running daemon's version from Docker's API, when docker answers.
pub async fn docker_api_version(socket: &Path, timeout: Duration) -> Option<String> {
    match crate::docker::version(socket, timeout).await {
        Ok(v) => {
            debug!(step = STEP, version = %v.version, "docker daemon version");
            Some(v.version)
        }
        Err(e) if !socket.exists() => {
            debug!(step = STEP, error = %e, "docker is not up");
            None
        }
        Err(e) => {
            warn!(step = STEP, path = %socket.display(), error = %e, "docker did not answer");
            None
        }
    }
}

async fn running_docker_torcx(
    config: &Inputs<'_>,
    tp: &torcx::TorcxPaths,
) -> (Option<String>, Option<&'static str>) {
    if let Some(v) =
        docker_api_version(&config.paths.docker_socket, config.addon.docker_api_timeout).await
    {
        return (Some(v), Some("docker-api"));
    }
    match torcx::running_images(tp) {
        Ok(Some(images)) => match torcx::docker_ref(&images) {
            Some(r) => (Some(r), Some("torcx-run-profile")),
            None => (None, None),
        },
        Ok(None) => (None, None),
        Err(e) => {
            warn!(step = STEP, error = %e, "cannot read what torcx applied at boot");
            (None, None)
        }
    }
}

async fn running_docker_sysext(
    config: &Inputs<'_>,
    boot_id: &str,
) -> (Option<String>, Option<&'static str>) {
    if let Some(v) =
        docker_api_version(&config.paths.docker_socket, config.addon.docker_api_timeout).await
    {
        return (Some(v), Some("docker-api"));
    }
    match sysext::running_from_sysext(config, boot_id) {
        Some((v, s)) => (Some(v), Some(s)),
        None => (None, None),
    }
}

/// After the reboot: does the node now run `intended.docker_next`? Reads
/// what the boot applied (torcx's `/run/torcx/profile.json`, or the merged
/// sysext: the backend `intended` was installed with), not docker itself,
/// so it works before docker starts.
pub fn confirm_active(config: &Inputs<'_>, intended: &AddonOutcome) -> Result<bool> {
    let want = DockerVersion::parse(&intended.docker_next);
    let same = |have: &str| match (&want, DockerVersion::parse(have)) {
        (Some(w), Some(h)) => w.same_docker(&h),
        _ => have == intended.docker_next,
    };
    let active = match intended.backend {
        Backend::Torcx => {
            let tp = torcx::TorcxPaths::new(config.paths);
            let images =
                torcx::running_images(&tp).context(|| "reading what torcx applied at this boot")?;
            match images.as_deref().and_then(torcx::docker_ref) {
                Some(r) => same(&r),
                None => false,
            }
        }
        Backend::Sysext => {
            let boot_id = crate::boot::id(&config.paths.run_dir)?;
            match sysext::running_from_sysext(config, &boot_id) {
                Some((v, _)) => same(&v),
                None => false,
            }
        }
    };
    info!(step = STEP, docker_next = %intended.docker_next, active, "checked the docker applied at boot");
    Ok(active)
}

/// What the pre-reboot hook did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookOutcome {
    pub addon: AddonOutcome,
    /// Store directories of older OS versions removed.
    pub removed: Vec<PathBuf>,
}

/// Before an OS-update reboot: make sure the docker for `next_os_version`
/// is in the store (and the profile names it), then remove the stores of OS
/// versions older than the running one.
pub async fn pre_reboot_hook(config: &Inputs<'_>, req: &AddonRequest) -> Result<HookOutcome> {
    let addon = ensure(config, req).await?;
    let removed = gc(config)?;
    Ok(HookOutcome { addon, removed })
}

/// Removes store directories of OS versions older than the running one.
pub fn gc(config: &Inputs<'_>) -> Result<Vec<PathBuf>> {
    let os = OsIdentity::read(&config.paths.os_release)?;
    torcx::gc(&torcx::TorcxPaths::new(config.paths), os.version)
}

/// The cluster version the node was bootstrapped for, from the
/// `KUBELET_IMAGE_TAG` of `/etc/kubernetes/kubelet.env` (for the hook,
/// which runs long after `run`).
pub fn cluster_version_from_kubelet_env(config: &Inputs<'_>) -> Result<String> {
    let p = &config.paths.kubelet_env;
    let text = crate::fsutil::read_input("kubelet.env", p)?;
    let env = crate::kubelet_env::EnvFile::parse(&text, p)?;
    let tag = env
        .get("KUBELET_IMAGE_TAG")
        .ok_or_else(|| Error::bad_input(format!("{} has no KUBELET_IMAGE_TAG", p.display())))?;
    Ok(crate::kubelet_env::version_from_tag(tag))
}

/// The OS version update_engine has staged for the next boot, if an update
/// waits for a reboot (`UPDATE_STATUS_UPDATED_NEED_REBOOT`).
pub async fn next_os_from_update_engine() -> Result<Option<String>> {
    let bus = crate::systemd::agent_bus().await?;
    let engine = crate::os_update::UpdateEngine::new(&bus).await?;
    crate::os_update::pending_reboot(&engine).await
}
