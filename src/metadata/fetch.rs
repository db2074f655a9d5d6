//! Fetching an item the search found: from the location that served it,
//! verified by the metadata's size and hashes before it has its name.

use super::format::Artifact;
use super::location::FetchError;
use super::{Found, Inputs};
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use std::path::Path;

/// Checks a downloaded file's size and hashes against its item.
pub fn verify_file(path: &Path, item: &Artifact, what: &str) -> Result<()> {
    let f = std::fs::File::open(path).ctx(ErrorClass::Internal, || {
        format!("failed to open {}", path.display())
    })?;
    let d = crate::digest::digest(f, item.sha256.is_some(), || item.sha512.is_some())
        .ctx(ErrorClass::Internal, || {
            format!("failed to read {}", path.display())
        })?;
    let size = d.size;
    if size != item.size {
        return Err(Error::verification(format!(
            "{what}: size is {size} bytes, the metadata says {}",
            item.size
        )));
    }
    if let Some(h) = &item.sha256 {
        let got = &d.sha256;
        if !got.eq_ignore_ascii_case(h) {
            return Err(Error::verification(format!(
                "{what}: sha256 is {got}, the metadata says {h}"
            )));
        }
    }
    if let Some(h) = &item.sha512 {
        let got = &d.sha512;
        if !got.eq_ignore_ascii_case(h) {
            return Err(Error::verification(format!(
                "{what}: sha512 is {got}, the metadata says {h}"
            )));
        }
    }
    Ok(())
}

/// Downloads the item `found` names to `dest`, verifying size and hashes
/// before it appears there ([`fsutil::AtomicFile`]); a bad download is
/// removed.
pub async fn fetch_item(config: &Inputs<'_>, found: &Found, dest: &Path) -> Result<()> {
    let mut out = fsutil::AtomicFile::create(dest, fsutil::MODE_PUBLIC)
        .ctx(ErrorClass::Internal, || {
            format!("failed to create a file beside {}", dest.display())
        })?;
    fetch_into(config, found, &mut out).await?;
    out.commit().ctx(ErrorClass::Internal, || {
        format!("failed to put {} in place", dest.display())
    })
}

/// Fetches the artifact `found` names into `dir` as `final_name`,
/// verified (size and hashes, by [`fetch_item`]) under its hidden partial
/// name ([`fsutil::staged`]), and returns it staged: refused when larger
/// than `limit` (the setting's name and value), logged as `step`.
pub(crate) async fn fetch_staged(
    config: &Inputs<'_>,
    found: &Found,
    dir: &Path,
    final_name: &str,
    hash: &crate::digest::Sha512,
    limit: (&str, u64),
    step: &'static str,
) -> Result<fsutil::staged::Staged> {
    let (setting, max) = limit;
    if found.item.size > max {
        return Err(Error::bad_input(format!(
            "{} is {} bytes, more than {setting} ({max})",
            found.url, found.item.size
        )));
    }
    fsutil::staged::ensure_dir(dir)?;
    let partial = fsutil::staged::partial_path(dir, final_name, hash);
    fsutil::staged::remove_other_partials(dir, final_name, &partial);
    let started = std::time::Instant::now();
    fetch_item(config, found, &partial).await.map_err(|e| {
        if e.class() == ErrorClass::Verification {
            e.context("nothing was installed")
        } else {
            e
        }
    })?;
    let staged = fsutil::staged::Staged::new(partial, dir.join(final_name));
    tracing::info!(step, source = "metadata", url = %found.url, location = %found.location,
        path = %staged.target().display(), bytes = found.item.size,
        elapsed_ms = started.elapsed().as_millis() as u64, "package fetched and verified");
    Ok(staged)
}

/// Downloads the item `found` names into `out` and verifies its size and
/// hashes; `out` stays under its temp name for the caller to commit.
pub async fn fetch_into(
    config: &Inputs<'_>,
    found: &Found,
    out: &mut fsutil::AtomicFile,
) -> Result<()> {
    let loc = found
        .base
        .as_ref()
        .ok_or_else(|| Error::internal("Found without a location"))?;
    match loc
        .fetch_to(
            &found.item.path,
            out,
            config.sources.timeout,
            config.sources.attempts,
            found.item.size,
        )
        .await
    {
        Ok(()) => {}
        Err(FetchError::NotFound) => {
            return Err(Error::bad_input(format!(
                "{} is listed in the metadata of {} but does not exist",
                found.url, found.location
            )));
        }
        Err(FetchError::Failed(e)) => return Err(e),
    }
    verify_file(out.temp_path(), &found.item, &found.url)
}
