//! The places metadata and artifacts are read from: a directory, an HTTP(S)
//! base URL, or a prefix in an S3 bucket. Every read is bounded (timeouts,
//! jittered retries of transient failures) and tells "not there" apart from
//! "could not ask".

use crate::assets::config::S3Settings;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::metrics::Remote;
use crate::retry::{Attempt, RetryPolicy, retry};
use std::io::{Read as _, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Largest metadata document read (index or product file).
pub const MAX_METADATA_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, Clone)]
pub enum Location {
    Dir(PathBuf),
    Http(url::Url),
    /// `settings.key` is the prefix (no trailing slash; may be empty).
    S3(Box<S3Settings>),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Dir(d) => write!(f, "{}", d.display()),
            Location::Http(u) => write!(f, "{u}"),
            Location::S3(s) if s.key.is_empty() => write!(f, "s3://{}", s.bucket),
            Location::S3(s) => write!(f, "s3://{}/{}", s.bucket, s.key),
        }
    }
}

/// A read that did not produce the document.
#[derive(Debug)]
pub enum FetchError {
    NotFound,
    Failed(Error),
}

fn http_client(timeout: Duration) -> Result<reqwest::Client> {
    crate::http::client_builder(Duration::from_secs(10).min(timeout))
        .read_timeout(timeout)
        .build()
        .map_err(|e| Error::internal(format!("failed to build the HTTP client: {e}")))
}

impl Location {
    /// Where `rel` lives, for messages and reports.
    pub fn resolve(&self, rel: &str) -> String {
        match self {
            Location::Dir(d) => d.join(rel).display().to_string(),
            Location::Http(u) => join_url(u, rel).to_string(),
            Location::S3(s) => format!("s3://{}/{}", s.bucket, s3_key(s, rel)),
        }
    }

    /// Reads a small document (at most [`MAX_METADATA_BYTES`]).
    pub async fn get(
        &self,
        rel: &str,
        timeout: Duration,
        attempts: u32,
    ) -> Result<Vec<u8>, FetchError> {
        match self {
            Location::Dir(d) => {
                let p = d.join(rel);
                match std::fs::metadata(&p) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(FetchError::NotFound),
                    Err(e) => Err(FetchError::Failed(Error::bad_input(format!(
                        "failed to read {}: {e}",
                        p.display()
                    )))),
                    Ok(m) if m.len() > MAX_METADATA_BYTES => {
                        Err(FetchError::Failed(Error::bad_input(format!(
                            "{} is larger than {MAX_METADATA_BYTES} bytes",
                            p.display()
                        ))))
                    }
                    Ok(_) => std::fs::read(&p).map_err(|e| {
                        FetchError::Failed(Error::bad_input(format!(
                            "failed to read {}: {e}",
                            p.display()
                        )))
                    }),
                }
            }
            Location::Http(base) => {
                let url = join_url(base, rel);
                let client = http_client(timeout).map_err(FetchError::Failed)?;
                let mut buf = Vec::new();
                http_stream(&client, &url, attempts, MAX_METADATA_BYTES, &mut buf).await?;
                Ok(buf)
            }
            Location::S3(s) => {
                let scratch = Scratch::new();
                self.copy_s3(s, rel, &scratch.0, attempts, MAX_METADATA_BYTES)
                    .await?;
                std::fs::read(&scratch.0).map_err(|e| {
                    FetchError::Failed(Error::internal(format!(
                        "failed to read {}: {e}",
                        scratch.0.display()
                    )))
                })
            }
        }
    }

    async fn copy_s3(
        &self,
        s: &S3Settings,
        rel: &str,
        dest: &Path,
        attempts: u32,
        max: u64,
    ) -> Result<(), FetchError> {
        let mut settings = s.clone();
        settings.key = s3_key(s, rel);
        settings.max_attempts = attempts;
        settings.max_size = max;
        let client = crate::assets::s3::client(&settings)
            .await
            .map_err(FetchError::Failed)?;
        match crate::assets::s3::download(&client, &settings, dest).await {
            Ok(_) => Ok(()),
            Err(crate::assets::s3::Failure::Missing(_)) => Err(FetchError::NotFound),
            Err(other) => Err(FetchError::Failed(other.into_error())),
        }
    }

    /// Copies the artifact at `rel` into `out` (a file not yet under its
    /// final name: the caller verifies it, then commits it), refusing more
    /// than `max` bytes.
    pub async fn fetch_to(
        &self,
        rel: &str,
        out: &mut fsutil::AtomicFile,
        timeout: Duration,
        attempts: u32,
        max: u64,
    ) -> Result<(), FetchError> {
        let temp = out.temp_path().to_path_buf();
        let failed = |e: std::io::Error| {
            FetchError::Failed(Error::internal(format!(
                "failed to write {}: {e}",
                temp.display()
            )))
        };
        match self {
            Location::Dir(d) => {
                let src = d.join(rel);
                let mut f = match std::fs::File::open(&src) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(FetchError::NotFound);
                    }
                    Err(e) => {
                        return Err(FetchError::Failed(Error::bad_input(format!(
                            "failed to read {}: {e}",
                            src.display()
                        ))));
                    }
                    Ok(f) => f,
                };
                let n = std::io::copy(&mut (&mut f).take(max + 1), out).map_err(failed)?;
                if n > max {
                    return Err(FetchError::Failed(Error::bad_input(format!(
                        "{} is larger than {max} bytes",
                        src.display()
                    ))));
                }
                Ok(())
            }
            Location::Http(base) => {
                let url = join_url(base, rel);
                let client = http_client(timeout).map_err(FetchError::Failed)?;
                http_stream(&client, &url, attempts, max, out).await
            }
            Location::S3(s) => self.copy_s3(s, rel, &temp, attempts, max).await,
        }
    }
}

/// A file name in the temp dir, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> Scratch {
        Scratch(std::env::temp_dir().join(format!(
            "node-bootstrap-{}-{:016x}",
            std::process::id(),
            fastrand::u64(..)
        )))
    }
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where an HTTP body goes; emptied before each attempt so a retried,
/// broken-off body never leaves its first half behind.
trait Sink: Write {
    fn reset(&mut self) -> std::io::Result<()>;
}

impl Sink for Vec<u8> {
    fn reset(&mut self) -> std::io::Result<()> {
        self.clear();
        Ok(())
    }
}

impl Sink for fsutil::AtomicFile {
    fn reset(&mut self) -> std::io::Result<()> {
        use std::io::Seek;
        let f = self.file_mut();
        f.set_len(0)?;
        f.seek(std::io::SeekFrom::Start(0)).map(|_| ())
    }
}

fn s3_key(s: &S3Settings, rel: &str) -> String {
    if s.key.is_empty() {
        rel.to_string()
    } else {
        format!("{}/{rel}", s.key.trim_end_matches('/'))
    }
}

fn join_url(base: &url::Url, rel: &str) -> url::Url {
    let mut b = base.clone();
    if !b.path().ends_with('/') {
        let p = format!("{}/", b.path());
        b.set_path(&p);
    }
    b.join(rel).unwrap_or(b)
}

/// GETs `url` into `out` with retries of transient failures; 404/410 are
/// [`FetchError::NotFound`]; more than `max` bytes is an error.
async fn http_stream<W: Sink>(
    client: &reqwest::Client,
    url: &url::Url,
    attempts: u32,
    max: u64,
    out: &mut W,
) -> Result<(), FetchError> {
    use crate::http::{BodyError, read_body};
    let policy = RetryPolicy::new(
        Duration::from_millis(500),
        Duration::from_secs(10),
        attempts,
    );
    let out = tokio::sync::Mutex::new(out);
    let r = retry(Remote::Mirror, policy, &format!("GET {url}"), |_| {
        let out = &out;
        async move {
            let mut resp = client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| Attempt::retry(Error::retryable(format!("GET {url}: {e}"))))?;
            let status = resp.status();
            if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
                return Ok(false);
            }
            if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
                return Err(Attempt::retry(Error::retryable(format!(
                    "GET {url}: HTTP {status}"
                ))));
            }
            if !status.is_success() {
                return Err(Attempt::Fail(Error::bad_input(format!(
                    "GET {url}: HTTP {status}"
                ))));
            }
            if resp.content_length().is_some_and(|l| l > max) {
                return Err(Attempt::Fail(Error::bad_input(format!(
                    "GET {url}: larger than {max} bytes"
                ))));
            }
            let mut buf: Vec<u8> = Vec::new();
            let mut guard = out.lock().await;
            let writing = |e| Attempt::Fail(Error::internal(format!("writing {url}: {e}")));
            guard.reset().map_err(writing)?;
            let sink = &mut **guard;
            let read = read_body(&mut resp, Remote::Mirror, 0, max, |c| {
                buf.extend_from_slice(c);
                if buf.len() >= 1 << 20 {
                    sink.write_all(&buf)?;
                    buf.clear();
                }
                Ok(())
            });
            match read.await {
                Ok(_) => {}
                Err((_, BodyError::TooLarge)) => {
                    return Err(Attempt::Fail(Error::bad_input(format!(
                        "GET {url}: larger than {max} bytes"
                    ))));
                }
                Err((_, BodyError::BrokeOff(e))) => {
                    return Err(Attempt::retry(Error::retryable(format!(
                        "GET {url}: body broke off: {e}"
                    ))));
                }
                Err((_, BodyError::Write(e))) => return Err(writing(e)),
            }
            sink.write_all(&buf).map_err(writing)?;
            Ok(true)
        }
    })
    .await;
    match r {
        Ok(true) => Ok(()),
        Ok(false) => Err(FetchError::NotFound),
        Err(e) => Err(FetchError::Failed(e)),
    }
}
