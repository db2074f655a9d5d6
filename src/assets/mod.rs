//! Cluster assets: pulled from S3 (pull mode) or pushed by terraform over
//! SSH (push mode), unpacked safely and moved into place in one step.
//!
//! ## Where assets go and when they count as complete
//! The assets live at `paths.assets_dir` (default `/opt/tectonic`). They are
//! complete when
//! - `assets.marker` is set: the file `<assets_dir>/<marker>` exists (the
//!   push writes it last; `assets pull` writes it into the tree before the
//!   rename);
//! - otherwise: `<assets_dir>` exists and is not empty (Tectonic's push does
//!   `rm -rf /opt/tectonic; mv /home/core/tectonic /opt/`, one rename).
//!
//! ## Pull mode (`node-bootstrap assets pull`, run by init-assets.service)
//! 1. If the assets are already complete, nothing is done (so a re-run never
//!    replaces assets that bootkube already used, nor its `.done` markers).
//! 2. Stale staging dirs of crashed runs (`<parent>/.<name>.pull-*`) are removed.
//! 3. The bundle is downloaded into a staging dir next to the assets dir
//!    (same filesystem): ranged parts in parallel, streamed to disk. While
//!    the parts arrive, one thread unpacks the bundle (see [`unpack`]) into
//!    `<staging>/tree` and another hashes it, both reading the downloaded
//!    prefix of the file as it grows ([`follow`]); the unpacked files start
//!    going to disk as they are written.
//! 4. Its SHA-256/512 is checked against every checksum known:
//!    from config (`assets.s3.checksum_sha256/512`) and from the object's
//!    metadata (`x-amz-meta-sha256/512`); with none known, or a mismatch,
//!    nothing is installed (a mismatch is reported as such even when the
//!    corrupt bytes also broke the archive). A failed attempt (the object
//!    changed, or is missing and waited for) starts over from an empty tree.
//! 5. Only then is the marker written, the filesystem synced, and the tree renamed to the
//!    assets dir in one step. An existing but incomplete assets dir (empty,
//!    or without the marker) is swapped out atomically
//!    (`renameat2(RENAME_EXCHANGE)`) and then deleted.
//! 6. On any failure the staging dir is removed: the assets dir is either
//!    untouched or complete.
//!
//! ## Push mode
//! The agent never fetches; [`readiness`] says what it waits for and where.

pub mod config;
pub mod follow;
pub mod s3;
pub mod unpack;

use crate::error::{Context as _, Error, ErrorClass, Result, ResultExt as _};
use crate::fsutil;
use config::{AssetsMode, Checksum, S3Settings};
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Whether the assets are in place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum AssetsReadiness {
    Ready { path: PathBuf },
    Waiting { what: String },
}

/// What the asset step reads of the agent's config: its own section and the
/// node's paths.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub paths: &'a crate::settings::Paths,
    pub assets: &'a config::AssetsSettings,
}

/// Whether the assets at `dir` are complete (see module docs).
pub fn is_complete(dir: &Path, marker: Option<&str>) -> bool {
    match marker {
        Some(m) => dir.join(m).is_file(),
        None => fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()),
    }
}

/// What `run` and `status` report about the assets.
pub fn readiness(config: &Inputs<'_>) -> AssetsReadiness {
    let dir = &config.paths.assets_dir;
    let marker = config.assets.marker.as_deref();
    if is_complete(dir, marker) {
        return AssetsReadiness::Ready { path: dir.clone() };
    }
    let at = match marker {
        Some(m) => format!(
            "waiting for assets at {} (complete once {} exists)",
            dir.display(),
            dir.join(m).display()
        ),
        None => format!("waiting for assets at {}", dir.display()),
    };
    let how = match (config.assets.mode, &config.assets.s3) {
        (AssetsMode::Pull, Some(s3)) => format!(
            "pulled from {} by init-assets.service (`node-bootstrap assets pull`)",
            s3.uri()
        ),
        (AssetsMode::Pull, None) => "pulled by init-assets.service".to_string(),
        (AssetsMode::Push, _) => match marker {
            Some(m) => format!("pushed by terraform over SSH, which writes {m} last"),
            None => "pushed by terraform over SSH (moved into place in one `mv`)".to_string(),
        },
    };
    AssetsReadiness::Waiting {
        what: format!("{at}, {how}"),
    }
}

/// What `assets pull` did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PullReport {
    /// `s3://bucket/key`.
    pub source: String,
    pub path: PathBuf,
    /// The assets were complete already; nothing was downloaded.
    pub already_present: bool,
    pub bytes: u64,
    pub sha256: Option<String>,
    /// Which checksums were verified, e.g. `sha256 (config)`.
    pub verified: Vec<String>,
    pub parts: u64,
    pub retries: u64,
    pub files: u64,
    pub secrets: u64,
    /// An incomplete assets dir was replaced.
    pub replaced_incomplete: bool,
    pub elapsed_ms: u64,
    /// Peak resident memory of this process (VmHWM), KiB.
    pub peak_rss_kib: Option<u64>,
}

/// This process's peak RSS (VmHWM) in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let s = fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn parent_and_name(dir: &Path) -> Result<(PathBuf, String)> {
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| {
            Error::config(format!(
                "paths.assets_dir {} has no parent directory",
                dir.display()
            ))
        })?;
    let name = dir
        .file_name()
        .ok_or_else(|| Error::config(format!("paths.assets_dir {} has no name", dir.display())))?
        .to_string_lossy()
        .into_owned();
    Ok((parent.to_path_buf(), name))
}

/// A staging dir next to the assets dir; removed on drop unless kept.
struct Staging {
    dir: PathBuf,
}

impl Staging {
    fn create(parent: &Path, name: &str) -> Result<Staging> {
        fs::create_dir_all(parent).ctx(ErrorClass::Internal, || {
            format!("failed to create {}", parent.display())
        })?;
        let dir = parent.join(format!(
            ".{name}.pull-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        fs::create_dir(&dir).ctx(ErrorClass::Internal, || {
            format!("failed to create staging dir {}", dir.display())
        })?;
        fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .ctx(ErrorClass::Internal, || {
                format!("failed to set mode of {}", dir.display())
            })?;
        Ok(Staging { dir })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(step = "assets", path = %self.dir.display(), error = %e,
                "failed to remove the staging dir");
        }
    }
}

/// Removes staging dirs that crashed pulls left next to the assets dir.
fn remove_stale_staging(parent: &Path, name: &str) {
    let prefix = format!(".{name}.pull-");
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix)
            && e.file_type().is_ok_and(|t| t.is_dir())
        {
            let p = e.path();
            match fs::remove_dir_all(&p) {
                Ok(()) => {
                    tracing::info!(step = "assets", path = %p.display(), "removed a stale staging dir")
                }
                Err(err) => {
                    tracing::warn!(step = "assets", path = %p.display(), error = %err, "failed to remove a stale staging dir")
                }
            }
        }
    }
}

/// Moves a complete `tree` to `target` in one step (see module docs).
/// Returns whether an incomplete dir was replaced.
fn install_tree(tree: &Path, target: &Path, marker: Option<&str>) -> Result<bool> {
    if let Some(m) = marker {
        fsutil::write_file(
            "assets marker",
            &tree.join(m),
            format!("{} assets pull\n", crate::clock::now_rfc3339()).as_bytes(),
            fsutil::MODE_PUBLIC,
        )?;
    }
    fs::set_permissions(tree, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .ctx(ErrorClass::Internal, || {
            format!("failed to set mode of {}", tree.display())
        })?;
    // Everything unpacked reaches the disk before the rename publishes it.
    let fd = fs::File::open(tree).ctx(ErrorClass::Internal, || {
        format!("failed to open {}", tree.display())
    })?;
    nix::unistd::syncfs(&fd)
        .map_err(|e| Error::internal(format!("syncfs of {} failed: {e}", tree.display())))?;
    drop(fd);
    let parent = target.parent().unwrap_or(Path::new("/"));
    let replaced = match fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::rename(tree, target).ctx(ErrorClass::Internal, || {
                format!(
                    "failed to rename {} to {}",
                    tree.display(),
                    target.display()
                )
            })?;
            false
        }
        Ok(m) if m.file_type().is_dir() => {
            // Incomplete (the caller checked): swap, then delete the old one.
            nix::fcntl::renameat2(
                nix::fcntl::AT_FDCWD,
                tree,
                nix::fcntl::AT_FDCWD,
                target,
                nix::fcntl::RenameFlags::RENAME_EXCHANGE,
            )
            .map_err(|e| {
                Error::internal(format!(
                    "failed to swap {} into place at {}: {e}",
                    tree.display(),
                    target.display()
                ))
            })?;
            // `tree` now holds the old, incomplete dir; the staging dir's
            // removal deletes it.
            true
        }
        Ok(_) => {
            return Err(Error::bad_input(format!(
                "{} exists and is not a directory; remove it so the assets can be put there",
                target.display()
            )));
        }
        Err(e) => {
            return Err(Error::internal(format!(
                "failed to inspect {}: {e}",
                target.display()
            )));
        }
    };
    fsutil::fsync_dir(parent).ctx(ErrorClass::Internal, || {
        format!("failed to fsync {}", parent.display())
    })?;
    Ok(replaced)
}

/// Checks `sha256`/`sha512` of the download against every known checksum.
fn verify(
    uri: &str,
    sha256: &str,
    sha512: &str,
    from_config: &[Checksum],
    from_metadata: &[Checksum],
) -> Result<Vec<String>> {
    if from_config.is_empty() && from_metadata.is_empty() {
        return Err(Error::verification(format!(
            "no checksum for asset bundle {uri}: set assets.s3.checksum_sha256 (or _sha512), or upload the object with x-amz-meta-sha256 metadata; nothing was installed"
        )));
    }
    let mut verified = Vec::new();
    for (source, list) in [("config", from_config), ("object metadata", from_metadata)] {
        for c in list {
            let actual = match c {
                Checksum::Sha256(_) => sha256,
                Checksum::Sha512(_) => sha512,
            };
            if actual != c.hex() {
                return Err(Error::verification(format!(
                    "checksum mismatch for asset bundle {uri}: {} from {source} is {}, the download's is {actual}; nothing was installed",
                    c.algorithm(),
                    c.hex()
                )));
            }
            verified.push(format!("{} ({source})", c.algorithm()));
        }
    }
    Ok(verified)
}

/// `assets pull`: see module docs.
pub async fn pull(config: &Inputs<'_>) -> Result<PullReport> {
    let t0 = Instant::now();
    let s3 = config.assets.s3.as_ref().ok_or_else(|| {
        Error::config("assets.s3 is not configured (bucket and key of the asset bundle)")
    })?;
    let target = &config.paths.assets_dir;
    let marker = config.assets.marker.as_deref();
    let mut report = PullReport {
        source: s3.uri(),
        path: target.clone(),
        ..Default::default()
    };
    if is_complete(target, marker) {
        tracing::info!(step = "assets", path = %target.display(), url = %s3.uri(),
            "assets already in place; nothing to pull");
        report.already_present = true;
        return Ok(report);
    }
    let (parent, name) = parent_and_name(target)?;
    fs::create_dir_all(&parent).ctx(ErrorClass::Internal, || {
        format!("failed to create {}", parent.display())
    })?;
    // The lock lives in the per-boot run dir, so nothing but the assets
    // themselves is ever left next to the assets dir.
    let _lock = fsutil::RunLock::acquire(
        &config.paths.run_dir.join("assets-pull.lock"),
        Duration::from_secs(0),
    )
    .context(|| "another `assets pull` is running")?;
    remove_stale_staging(&parent, &name);

    let staging = Staging::create(&parent, &name)?;
    tracing::info!(step = "assets", url = %s3.uri(), path = %target.display(),
        part_size = s3.part_size, concurrency = s3.concurrency, "pulling the asset bundle");
    let client = s3::client(s3).await?;
    let fetched = fetch_with_waits(&client, s3, &staging.dir, &config.assets.limits).await?;
    let (dl, digests) = (&fetched.download, &fetched.digests);
    report.bytes = dl.size;
    report.parts = dl.parts;
    report.retries = dl.retries;
    // The checksum decides before anything else: nothing unverified is
    // installed, and a corrupt download is reported as such, not as a bad
    // archive.
    report.verified = verify(
        &s3.uri(),
        &digests.sha256,
        &digests.sha512,
        &s3.checksums,
        &dl.metadata_checksums,
    )?;
    report.sha256 = Some(digests.sha256.clone());
    tracing::info!(step = "assets", url = %s3.uri(), bytes = dl.size, sha256 = %digests.sha256,
        verified = %report.verified.join(", "), "asset bundle unpacked and verified");
    let unpacked = fetched
        .unpacked
        .context(|| format!("unpacking asset bundle {}", s3.uri()))?;
    let (bundle, tree) = (staging.dir.join(BUNDLE), staging.dir.join(TREE));
    // The bundle is no longer needed; free the space before the rename.
    let _ = fs::remove_file(&bundle);
    report.files = unpacked.files;
    report.secrets = unpacked.secrets.len() as u64;
    // A concurrent push may have completed meanwhile: keep what is there.
    if is_complete(target, marker) {
        tracing::warn!(step = "assets", path = %target.display(),
            "assets appeared while pulling; keeping them and discarding the download");
        report.already_present = true;
    } else {
        report.replaced_incomplete = install_tree(&tree, target, marker)?;
        if report.replaced_incomplete {
            tracing::warn!(step = "assets", path = %target.display(),
                "replaced an incomplete assets dir");
        }
    }
    drop(staging);
    report.elapsed_ms = t0.elapsed().as_millis() as u64;
    report.peak_rss_kib = peak_rss_kib();
    tracing::info!(step = "assets", path = %target.display(), url = %s3.uri(),
        files = unpacked.files, dirs = unpacked.dirs, symlinks = unpacked.symlinks,
        secrets = report.secrets, bytes = report.bytes, parts = report.parts, retries = report.retries,
        elapsed_ms = report.elapsed_ms, peak_rss_kib = report.peak_rss_kib.unwrap_or(0),
        "assets in place");
    Ok(report)
}

/// The download's file and the tree it unpacks to, in the staging dir.
const BUNDLE: &str = "bundle";
const TREE: &str = "tree";

/// One bundle fetched: downloaded, hashed, unpacked (or why not).
struct Fetched {
    download: s3::Downloaded,
    digests: crate::digest::Digests,
    /// Checked only once the digests are: a corrupt download is a checksum
    /// error, not an archive error.
    unpacked: Result<unpack::UnpackReport>,
}

/// Downloads the bundle into `<staging>/bundle` while one thread unpacks it
/// into `<staging>/tree` and another hashes it, both following the parts as
/// they land ([`follow`]). Waits (bounded) for a missing object and for
/// access to be granted, and starts over if the object changes
/// mid-download.
async fn fetch_with_waits(
    client: &aws_sdk_s3::Client,
    s3: &S3Settings,
    staging: &Path,
    limits: &config::UnpackLimits,
) -> Result<Fetched> {
    let mut changes = 0u32;
    let mut wait = crate::retry::BoundedWait::new(crate::retry::RetryPolicy::new(
        Duration::from_secs(1).max(s3.retry_initial),
        Duration::from_secs(30),
        u32::MAX,
    ));
    loop {
        let (err, limit, why) = match fetch(client, s3, staging, limits).await? {
            Ok(f) => return Ok(f),
            Err(s3::Failure::Missing(e)) => (e, s3.wait_for_object, "not there yet"),
            Err(s3::Failure::Denied(e)) => (e, s3.access_denied_grace, "access not granted yet"),
            Err(s3::Failure::Changed(e)) => {
                changes += 1;
                if changes > 3 {
                    return Err(e.context("the asset bundle keeps changing"));
                }
                tracing::warn!(step = "assets", url = %s3.uri(), error = %e, "restarting the download");
                continue;
            }
            Err(s3::Failure::Other(e)) => return Err(e),
        };
        let shown = err.to_string();
        let (waits, delay) = wait.next(limit, err, |s| format!("gave up after waiting {s}s"))?;
        tracing::warn!(step = "assets", url = %s3.uri(), error = %shown, attempt = waits,
            delay_ms = delay.as_millis() as u64, "asset bundle {why}; waiting");
        tokio::time::sleep(delay).await;
    }
}

/// One attempt of [`fetch_with_waits`], from an empty tree. The outer
/// error is this host's (files it cannot create); the inner one the
/// download's.
async fn fetch(
    client: &aws_sdk_s3::Client,
    s3: &S3Settings,
    staging: &Path,
    limits: &config::UnpackLimits,
) -> Result<std::result::Result<Fetched, s3::Failure>> {
    let (bundle, tree) = (staging.join(BUNDLE), staging.join(TREE));
    if let Err(e) = fs::remove_dir_all(&tree)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(Error::internal(format!(
            "failed to clear {} for another attempt: {e}",
            tree.display()
        )));
    }
    fs::create_dir(&tree).ctx(ErrorClass::Internal, || {
        format!("failed to create {}", tree.display())
    })?;
    let open = || {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&bundle)
            .ctx(ErrorClass::Internal, || {
                format!("failed to open {}", bundle.display())
            })
    };
    let prefix = follow::Prefix::new();
    let hash_reader = follow::FollowReader::new(open()?, prefix.clone());
    let unpack_reader = follow::FollowReader::new(open()?, prefix.clone());
    let is_sha512 = |c: &Checksum| matches!(c, Checksum::Sha512(_));
    let config_sha512 = s3.checksums.iter().any(is_sha512);
    let meta = prefix.clone();
    let hasher = tokio::task::spawn_blocking(move || {
        crate::digest::digest(hash_reader, true, || {
            config_sha512 || meta.metadata_checksums().iter().any(is_sha512)
        })
    });
    let (t, limits) = (tree.clone(), *limits);
    let unpacker = tokio::task::spawn_blocking(move || unpack::unpack(unpack_reader, &t, &limits));
    let downloaded = s3::download_following(client, s3, &bundle, &prefix).await;
    if let Ok(d) = &downloaded {
        tracing::info!(step = "assets", url = %s3.uri(), bytes = d.size, parts = d.parts,
            retries = d.retries, "asset bundle fetched; finishing its unpacking and hashing");
    }
    // Both readers end now: at the end of the download, or with its error.
    let joined = |e: tokio::task::JoinError| Error::internal(format!("unpack task failed: {e}"));
    let digests = hasher.await.map_err(joined)?;
    let unpacked = unpacker.await.map_err(joined)?;
    let download = match downloaded {
        Ok(d) => d,
        Err(f) => return Ok(Err(f)),
    };
    let digests = digests.ctx(ErrorClass::Internal, || {
        format!("failed to read the downloaded bundle {}", bundle.display())
    })?;
    Ok(Ok(Fetched {
        download,
        digests,
        unpacked,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owned {
        paths: crate::settings::Paths,
        assets: config::AssetsSettings,
    }

    impl Owned {
        fn inputs(&self) -> Inputs<'_> {
            Inputs {
                paths: &self.paths,
                assets: &self.assets,
            }
        }
    }

    /// The sections the assets read, from a config file's JSON (`DIR`: `dir`).
    fn config(text: &str, dir: &Path) -> Owned {
        use crate::settings::{RawPaths, section};
        let text = text.replace("DIR", &dir.display().to_string());
        let file: serde_json::Value = serde_json::from_str(&text).unwrap();
        Owned {
            paths: section::<RawPaths>(&file, "paths").validate().unwrap(),
            assets: section::<config::RawAssets>(&file, "assets")
                .validate()
                .unwrap(),
        }
    }

    #[test]
    fn push_readiness_without_marker_is_the_dir() {
        let d = tempfile::tempdir().unwrap();
        let assets = d.path().join("tectonic");
        let c = config(r#"{"paths":{"assets_dir":"DIR/tectonic"}}"#, d.path());
        assert_eq!(
            readiness(&c.inputs()),
            AssetsReadiness::Waiting {
                what: format!(
                    "waiting for assets at {}, pushed by terraform over SSH (moved into place in one `mv`)",
                    assets.display()
                )
            }
        );
        fs::create_dir(&assets).unwrap();
        assert!(
            matches!(readiness(&c.inputs()), AssetsReadiness::Waiting { .. }),
            "empty dir"
        );
        fs::write(assets.join("bootkube.sh"), "x").unwrap();
        assert_eq!(
            readiness(&c.inputs()),
            AssetsReadiness::Ready { path: assets }
        );
    }

    #[test]
    fn push_readiness_with_marker_waits_for_it() {
        let d = tempfile::tempdir().unwrap();
        let assets = d.path().join("tectonic");
        let c = config(
            r#"{"paths":{"assets_dir":"DIR/tectonic"},"assets":{"marker":".assets-complete"}}"#,
            d.path(),
        );
        fs::create_dir(&assets).unwrap();
        fs::write(assets.join("bootkube.sh"), "x").unwrap();
        let AssetsReadiness::Waiting { what } = readiness(&c.inputs()) else {
            panic!("must wait for the marker")
        };
        assert!(
            what.contains(&format!("{}/.assets-complete", assets.display())),
            "{what}"
        );
        assert!(what.contains("writes .assets-complete last"), "{what}");
        fs::write(assets.join(".assets-complete"), "").unwrap();
        assert_eq!(
            readiness(&c.inputs()),
            AssetsReadiness::Ready { path: assets }
        );
    }

    #[test]
    fn pull_readiness_names_the_bucket() {
        let d = tempfile::tempdir().unwrap();
        let c = config(
            r#"{"paths":{"assets_dir":"DIR/t"},"assets":{"mode":"pull","s3":{"bucket":"b","key":"k.tgz"}}}"#,
            d.path(),
        );
        let AssetsReadiness::Waiting { what } = readiness(&c.inputs()) else {
            panic!()
        };
        assert!(
            what.contains("pulled from s3://b/k.tgz by init-assets.service"),
            "{what}"
        );
    }

    #[test]
    fn verify_needs_a_checksum_and_all_must_match() {
        let e = verify("s3://b/k", "aa", "bb", &[], &[]).unwrap_err();
        assert_eq!(e.class(), ErrorClass::Verification);
        assert!(e.to_string().contains("no checksum"), "{e}");
        let good = Checksum::Sha256("aa".into());
        let bad = Checksum::Sha512("cc".into());
        assert_eq!(
            verify("s3://b/k", "aa", "bb", std::slice::from_ref(&good), &[]).unwrap(),
            vec!["sha256 (config)".to_string()]
        );
        let e = verify("s3://b/k", "aa", "bb", &[good], &[bad]).unwrap_err();
        assert!(
            e.to_string().contains("sha512 from object metadata is cc"),
            "{e}"
        );
    }

    #[test]
    fn install_replaces_only_by_swap_and_leaves_no_staging() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("tectonic");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("old"), "x").unwrap();
        let tree = d.path().join("tree");
        fs::create_dir(&tree).unwrap();
        fs::write(tree.join("bootkube.sh"), "new").unwrap();
        assert!(install_tree(&tree, &target, Some(".done")).unwrap());
        assert_eq!(
            fs::read_to_string(target.join("bootkube.sh")).unwrap(),
            "new"
        );
        assert!(target.join(".done").is_file());
        // The old tree is where the new one was, for the caller to delete.
        assert!(tree.join("old").is_file());
    }
}
