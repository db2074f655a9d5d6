//! Fetching manifests, signatures and packages: HTTP(S) with bounded,
//! jittered retries on transport errors and 5xx, resumable downloads where
//! the server honours `Range`, size limits, and sha512 verification before
//! anything gets its final name.
//!
//! A package is streamed into a hidden partial file next to its target
//! (`.<name>.part-<hash prefix>`), which survives a crash so the next run
//! resumes it. Only once the whole file's sha512 equals the manifest's is
//! it fsynced, given mode 0644 and renamed to its final name (then the
//! directory is fsynced): there is never a truncated or mixed file under a
//! final name. A partial that fails verification is deleted.
//!
//! A caller may have the package checked while it downloads
//! ([`Fetcher::fetch_package_following`], [`super::follow`]).

use super::config::AddonSettings;
use super::follow::{AbandonOnDrop, Follow, Follower, Written};
use crate::digest::{Sha512, sha512_file};
use crate::error::{Context as _, Error, ErrorClass, Result};
use crate::fsutil::staged::{Staged, ensure_dir, partial_path, remove_other_partials};
use crate::http::{BodyError, read_body};
use crate::metrics::Remote;
use crate::retry::{Attempt, RetryPolicy, retry};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tracing::{debug, info, warn};

/// Largest manifest or signature accepted.
pub const MAX_DOCUMENT_BYTES: usize = 4 * 1024 * 1024;

/// Where a document or package comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Url(url::Url),
    File(PathBuf),
}

impl Source {
    /// A `file://` URL becomes a file source.
    pub fn from_url(u: &url::Url) -> Result<Source> {
        if u.scheme() == "file" {
            let p = u
                .to_file_path()
                .map_err(|()| Error::bad_input(format!("{u} is not a local file path")))?;
            Ok(Source::File(p))
        } else {
            Ok(Source::Url(u.clone()))
        }
    }

    pub fn display(&self) -> String {
        match self {
            Source::Url(u) => u.to_string(),
            Source::File(p) => p.display().to_string(),
        }
    }

    /// The detached signature's location: the same with `.asc` appended.
    pub fn signature(&self) -> Source {
        match self {
            Source::Url(u) => {
                let mut s = u.clone();
                s.set_path(&format!("{}.asc", u.path()));
                Source::Url(s)
            }
            Source::File(p) => {
                let mut s = p.clone().into_os_string();
                s.push(".asc");
                Source::File(PathBuf::from(s))
            }
        }
    }
}

/// HTTP client and policies for the addon step.
pub struct Fetcher {
    client: reqwest::Client,
    policy: RetryPolicy,
    max_package_bytes: u64,
}

impl Fetcher {
    pub fn new(s: &AddonSettings) -> Result<Fetcher> {
        let client = crate::http::client_builder(s.connect_timeout)
            .read_timeout(s.read_timeout)
            .build()
            .map_err(|e| Error::internal(format!("failed to set up the HTTP client: {e}")))?;
        Ok(Fetcher {
            client,
            policy: RetryPolicy::new(
                s.download_backoff,
                s.download_backoff_max,
                s.download_attempts,
            )
            .with_deadline(s.download_deadline),
            max_package_bytes: s.max_package_bytes,
        })
    }

    /// A small document (manifest, signature) in memory. `Ok(None)` when it
    /// does not exist (HTTP 404/410, or no such file); the caller decides
    /// whether that is an error.
    pub async fn get_document(&self, src: &Source, what: &str) -> Result<Option<Vec<u8>>> {
        match src {
            Source::File(p) => match fs::metadata(p) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::bad_input(format!(
                    "failed to read {what} at {}: {e}",
                    p.display()
                ))),
                Ok(m) if m.len() > MAX_DOCUMENT_BYTES as u64 => Err(Error::bad_input(format!(
                    "{what} at {} is {} bytes, more than the {MAX_DOCUMENT_BYTES} allowed",
                    p.display(),
                    m.len()
                ))),
                Ok(_) => fs::read(p).map(Some).ctx(ErrorClass::BadInput, || {
                    format!("failed to read {what} at {}", p.display())
                }),
            },
            Source::Url(u) => {
                retry(Remote::Mirror, self.policy, &format!("GET {u}"), |attempt| {
                    let u = u.clone();
                    async move {
                        debug!(step = "docker-addon", url = %u, attempt, "fetching {}", what);
                        let resp = self
                            .client
                            .get(u.clone())
                            .send()
                            .await
                            .map_err(|e| transport(&u, what, e))?;
                        let status = resp.status();
                        if status.as_u16() == 404 || status.as_u16() == 410 {
                            return Ok(None);
                        }
                        check_status(&resp, &u, what)?;
                        if resp
                            .content_length()
                            .is_some_and(|l| l > MAX_DOCUMENT_BYTES as u64)
                        {
                            return Err(Attempt::Fail(Error::bad_input(format!(
                                "{what} at {u} is larger than the {MAX_DOCUMENT_BYTES} bytes allowed"
                            ))));
                        }
                        let mut resp = resp;
                        let mut body = Vec::new();
                        let read = read_body(&mut resp, Remote::Mirror, 0, MAX_DOCUMENT_BYTES as u64, |c| {
                            body.extend_from_slice(c);
                            Ok(())
                        });
                        match read.await {
                            Ok(_) => Ok(Some(body)),
                            Err((_, BodyError::TooLarge)) => Err(Attempt::Fail(Error::bad_input(format!(
                                "{what} at {u} is larger than the {MAX_DOCUMENT_BYTES} bytes allowed"
                            )))),
                            Err((_, BodyError::BrokeOff(e))) => Err(transport(&u, what, e)),
                            Err((_, BodyError::Write(e))) => Err(Attempt::Fail(Error::internal(format!(
                                "failed to hold {what} from {u}: {e}"
                            )))),
                        }
                    }
                })
                .await
            }
        }
    }

    /// Fetches a package into `dir` as `final_name`, verified against
    /// `hash`, and returns it staged (not yet under its final name).
    pub async fn fetch_package(
        &self,
        src: &Source,
        dir: &Path,
        final_name: &str,
        hash: &Sha512,
    ) -> Result<Staged> {
        let (staged, _) = self
            .fetch_package_following(src, dir, final_name, hash, None)
            .await?;
        Ok(staged)
    }

    /// [`fetch_package`](Self::fetch_package), running `follower` on the
    /// package's bytes as they download ([`super::follow`]). Its result
    /// comes back when it saw the whole package written once, in order,
    /// and the package is the one the manifest names; `None` when it
    /// could not follow (a local copy, a resumed download): the caller
    /// checks the file.
    pub async fn fetch_package_following(
        &self,
        src: &Source,
        dir: &Path,
        final_name: &str,
        hash: &Sha512,
        follower: Option<Follower>,
    ) -> Result<(Staged, Option<Result<()>>)> {
        ensure_dir(dir)?;
        let partial = partial_path(dir, final_name, hash);
        remove_other_partials(dir, final_name, &partial);
        let target = dir.join(final_name);
        let started = Instant::now();
        let written = Written::new();
        let guard = AbandonOnDrop(written.clone());
        // A local copy is not followed: the caller checks the file.
        let following = follower.filter(|_| matches!(src, Source::Url(_))).map(|f| {
            let mut reader = Follow::new(partial.clone(), written.clone());
            tokio::task::spawn_blocking(move || f(&mut reader))
        });
        let res = match src {
            Source::File(p) => self.copy_into(p, &partial),
            Source::Url(u) => self.download_into(u, &partial, &written).await,
        };
        if res.is_ok() {
            written.complete();
        }
        drop(guard);
        if let Err(e) = res {
            // Keep a partial with data for the next run to resume; an empty
            // one is just litter.
            if fs::metadata(&partial).is_ok_and(|m| m.len() == 0) {
                let _ = fs::remove_file(&partial);
            }
            return Err(e);
        }
        let staged = Staged::new(partial.clone(), target);
        let got = sha512_file(&partial).ctx(ErrorClass::Internal, || {
            format!("failed to read back {}", partial.display())
        })?;
        if got != *hash {
            // `staged` is dropped here: the partial is deleted.
            let err = Error::verification(format!(
                "package {} does not match the manifest: sha512 is {}, the manifest says {}; nothing was installed",
                src.display(),
                got.to_hex(),
                hash.to_hex()
            ));
            tracing::error!(message_id = crate::message_ids::PACKAGE_REFUSED, step = "docker-addon",
                package = final_name, error = %err, "package refused: its checksum does not match the manifest");
            return Err(err);
        }
        let followed = match following {
            Some(task) if written.followed_whole() => Some(task.await.unwrap_or_else(|e| {
                Err(Error::internal(format!(
                    "the check that followed the download of {} failed: {e}",
                    src.display()
                )))
            })),
            _ => None,
        };
        let size = fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
        info!(
            step = "docker-addon",
            url = %src.display(),
            path = %staged.target().display(),
            bytes = size,
            elapsed_ms = started.elapsed().as_millis() as u64,
            followed = followed.is_some(),
            "package fetched and verified"
        );
        Ok((staged, followed))
    }

    /// Copies a local file into the partial (hash checked by the caller).
    fn copy_into(&self, from: &Path, partial: &Path) -> Result<()> {
        let meta = fs::metadata(from).ctx(ErrorClass::BadInput, || {
            format!("failed to read package {}", from.display())
        })?;
        if meta.len() > self.max_package_bytes {
            return Err(Error::bad_input(format!(
                "package {} is {} bytes, more than addon.max_package_bytes ({})",
                from.display(),
                meta.len(),
                self.max_package_bytes
            )));
        }
        let io = || -> io::Result<()> {
            let mut src = File::open(from)?;
            let mut dst = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(partial)?;
            io::copy(&mut src, &mut dst)?;
            dst.sync_all()
        };
        io().ctx(ErrorClass::Internal, || {
            format!("failed to copy {} to {}", from.display(), partial.display())
        })
    }

    /// Downloads `u` into `partial`, resuming what is there when the server
    /// honours ranges. Retries transport errors, 5xx, 408 and 429.
    /// Says how far the file is written in `written`.
    async fn download_into(&self, u: &url::Url, partial: &Path, written: &Written) -> Result<()> {
        let max = self.max_package_bytes;
        retry(Remote::Mirror, self.policy, &format!("download {u}"), |attempt| async move {
            let mut file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(partial)
                .map_err(|e| {
                    Attempt::Fail(Error::internal(format!(
                        "failed to open {}: {e}",
                        partial.display()
                    )))
                })?;
            let local_io = |e: io::Error| {
                Attempt::Fail(Error::internal(format!(
                    "failed to write {}: {e}",
                    partial.display()
                )))
            };
            let mut have = file.seek(SeekFrom::End(0)).map_err(local_io)?;
            if have > max {
                file.set_len(0).map_err(local_io)?;
                have = 0;
            }
            let mut req = self.client.get(u.clone());
            if have > 0 {
                req = req.header(reqwest::header::RANGE, format!("bytes={have}-"));
            }
            info!(step = "docker-addon", url = %u, attempt, resume_from = have, "downloading package");
            let mut resp = req.send().await.map_err(|e| transport(u, "package", e))?;
            let have = where_resumed(&resp, &mut file, have, u).map_err(|e| match e {
                Resumed::Io(e) => local_io(e),
                Resumed::Not(a) => a,
            })?;
            if let Some(len) = resp.content_length()
                && have + len > max
            {
                return Err(Attempt::Fail(Error::bad_input(format!(
                    "package {u} is {} bytes, more than addon.max_package_bytes ({max})",
                    have + len
                ))));
            }
            let expected = resp.content_length().map(|l| have + l);
            let mut at = have;
            let write = |c: &[u8]| {
                file.write_all(c)?;
                written.at(at, at + c.len() as u64);
                at += c.len() as u64;
                Ok(())
            };
            let got = match read_body(&mut resp, Remote::Mirror, have, max, write).await {
                Ok(got) => got,
                Err((_, BodyError::TooLarge)) => {
                    return Err(Attempt::Fail(Error::bad_input(format!(
                        "package {u} is more than addon.max_package_bytes ({max})"
                    ))));
                }
                Err((_, BodyError::Write(e))) => return Err(local_io(e)),
                Err((got, BodyError::BrokeOff(e))) => {
                    let _ = file.sync_data();
                    if let Some(exp) = expected
                        && got < exp
                    {
                        // Resumed from here by the next attempt.
                        return Err(Attempt::retry(Error::retryable(format!(
                            "download of {u} broke off at byte {got} of the {exp} announced: {}",
                            error_chain(&e)
                        ))));
                    }
                    return Err(transport(u, "package", e));
                }
            };
            file.sync_all().map_err(local_io)?;
            if let Some(exp) = expected
                && got < exp
            {
                return Err(Attempt::retry(Error::retryable(format!(
                    "download of {u} ended at byte {got} of {exp}"
                ))));
            }
            Ok(())
        })
        .await
    }
}

/// Why a download did not resume.
enum Resumed {
    Io(io::Error),
    Not(Attempt),
}

/// Where the answer to a download that asked for `bytes=<have>-` goes on
/// in `file`: at `have` (206 at that offset), or from the start (200: the
/// server ignored the range); anything else is retried or fails.
fn where_resumed(
    resp: &reqwest::Response,
    file: &mut File,
    have: u64,
    u: &url::Url,
) -> Result<u64, Resumed> {
    let status = resp.status().as_u16();
    match status {
        206 => {
            let start = content_range_start(resp);
            if start != Some(have) {
                warn!(step = "docker-addon", url = %u, "server resumed at the wrong offset; starting over");
                file.set_len(0).map_err(Resumed::Io)?;
                return Err(Resumed::Not(Attempt::retry(Error::retryable(format!(
                    "{u} answered a range other than the one asked for"
                )))));
            }
        }
        200 => {
            if have > 0 {
                debug!(step = "docker-addon", url = %u, "server ignored the range; starting over");
            }
            file.set_len(0).map_err(Resumed::Io)?;
            file.seek(SeekFrom::Start(0)).map_err(Resumed::Io)?;
            return Ok(0);
        }
        416 => {
            // What we have is not a prefix the server can continue.
            file.set_len(0).map_err(Resumed::Io)?;
            return Err(Resumed::Not(Attempt::retry(Error::retryable(format!(
                "{u} cannot resume at byte {have}"
            )))));
        }
        _ => {
            check_status(resp, u, "package").map_err(Resumed::Not)?;
            return Err(Resumed::Not(Attempt::Fail(Error::bad_input(format!(
                "{u} answered HTTP {status} to a package download"
            )))));
        }
    }
    Ok(have)
}

fn content_range_start(resp: &reqwest::Response) -> Option<u64> {
    let v = resp
        .headers()
        .get(reqwest::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let rest = v.strip_prefix("bytes ")?;
    rest.split('-').next()?.trim().parse().ok()
}

/// A transport failure (connect, TLS, timeout, cut connection): retry.
fn transport(u: &url::Url, what: &str, e: reqwest::Error) -> Attempt {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "failed"
    };
    Attempt::retry(Error::retryable(format!(
        "fetching {what} from {u} {kind}: {}",
        error_chain(&e)
    )))
}

/// reqwest's Display omits the cause chain (e.g. "connection refused").
fn error_chain(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}

/// Maps a non-success status: 5xx, 408 and 429 are retried (honouring
/// `Retry-After`), anything else fails at once as bad input.
fn check_status(resp: &reqwest::Response, u: &url::Url, what: &str) -> Result<(), Attempt> {
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let code = status.as_u16();
    let err = format!("{u} answered HTTP {code} for the {what}");
    if status.is_server_error() || code == 408 || code == 429 {
        let after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        return Err(Attempt::Retry {
            error: Error::retryable(err),
            after,
        });
    }
    Err(Attempt::Fail(Error::bad_input(err)))
}
