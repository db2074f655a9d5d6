//! Putting an agent binary in place on the node, so that a kill -9 or a
//! power cut at any instant leaves a binary that runs under the installed
//! name (`agent.binary`):
//! 1. the new binary is written beside the installed one under a temp name
//!    and fsynced (a kill leaves a stray temp; the next run removes it);
//! 2. it must answer `version --json` with the expected version and the
//!    node's arch: a binary that does not run here is never installed;
//! 3. the installed binary is hard-linked under a temp name and renamed
//!    over `<binary>.previous` (kept for `upgrade --rollback`);
//! 4. the new binary is renamed over the installed one; the directory is
//!    fsynced.
//!
//! A rollback exchanges the two names in one `renameat2(RENAME_EXCHANGE)`
//! after checking the previous binary still runs.

use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// What `<binary> version --json` answered.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Answered {
    pub version: String,
    pub arch: Option<String>,
}

/// What `<path> version --json` answers (bounded by `timeout`); the error
/// (class `Verification`) says what the binary did instead.
pub async fn version_of(path: &Path, timeout: Duration) -> Result<Answered> {
    let what = path.display();
    let run = tokio::process::Command::new(path)
        .args(["version", "--json"])
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(timeout, run).await {
        Err(_) => {
            return Err(Error::verification(format!(
                "{what} did not answer `version --json` within {}s",
                timeout.as_secs()
            )));
        }
        Ok(Err(e)) => {
            return Err(Error::verification(format!(
                "{what} does not run on this node: {e}"
            )));
        }
        Ok(Ok(out)) => out,
    };
    if !out.status.success() {
        return Err(Error::verification(format!(
            "{what} does not run on this node: `version --json` ended with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::verification(format!(
            "{what} answered `version --json` with something else ({e}): {:?}",
            String::from_utf8_lossy(&out.stdout).trim()
        ))
    })
}

/// Checks that `path` runs here and says it is `want_version` for
/// `want_arch`.
pub async fn check_runs(
    path: &Path,
    want_version: &str,
    want_arch: &str,
    timeout: Duration,
) -> Result<Answered> {
    let answered = version_of(path, timeout).await?;
    if answered.version != want_version || answered.arch.as_deref() != Some(want_arch) {
        return Err(Error::verification(format!(
            "{} says it is node-bootstrap {} for {}, not {want_version} for {want_arch}",
            path.display(),
            answered.version,
            answered.arch.as_deref().unwrap_or("an unknown arch")
        )));
    }
    Ok(answered)
}

/// Steps 3 and 4: keeps the installed binary as `previous`, then renames
/// the checked `staged` binary over `binary`.
pub fn replace(staged: fsutil::AtomicFile, binary: &Path, previous: &Path) -> Result<()> {
    if binary.exists() {
        keep_previous(binary, previous)?;
    }
    staged.commit().ctx(ErrorClass::Internal, || {
        format!(
            "failed to put the new agent in place at {}",
            binary.display()
        )
    })
}

/// `previous` becomes (a hard link to) the installed binary, atomically.
fn keep_previous(binary: &Path, previous: &Path) -> Result<()> {
    fsutil::link_over(binary, previous).ctx(ErrorClass::Internal, || {
        format!(
            "failed to keep the installed agent {} as {}",
            binary.display(),
            previous.display()
        )
    })
}

/// Exchanges `binary` and `previous` in one step (both must exist).
pub fn exchange(binary: &Path, previous: &Path) -> Result<()> {
    nix::fcntl::renameat2(
        nix::fcntl::AT_FDCWD,
        binary,
        nix::fcntl::AT_FDCWD,
        previous,
        nix::fcntl::RenameFlags::RENAME_EXCHANGE,
    )
    .map_err(|e| {
        Error::internal(format!(
            "failed to exchange {} and {}: {e}",
            binary.display(),
            previous.display()
        ))
    })?;
    fsutil::fsync_dir(binary.parent().unwrap_or(Path::new("/"))).ctx(ErrorClass::Internal, || {
        format!("failed to fsync the directory of {}", binary.display())
    })
}
