//! Downloading one S3 object to a file: ranged parts in parallel, streamed
//! to disk (memory does not grow with the object) and reported as they
//! land (see [`super::follow`]: the bundle is unpacked while it arrives),
//! each part retried on its own with jittered backoff on throttling, 5xx, timeouts and truncated
//! bodies, all parts pinned to the first part's ETag (`If-Match`) so a
//! bundle replaced mid-download is never stitched together.
//!
//! Failures the caller must tell apart come back as [`Failure`] kinds:
//! missing object or bucket, access denied / bad credentials, object changed,
//! everything else.

use super::config::{Checksum, S3Settings};
use super::follow::{FailOnDrop, Layout, Prefix};
use crate::error::{Error, Result};
use crate::metrics::Remote;
use crate::retry::{Attempt, RetryPolicy, retry};
use aws_sdk_s3::Client;
use aws_sdk_s3::config::{
    BehaviorVersion, Region, ResponseChecksumValidation, StalledStreamProtectionConfig,
};
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_s3::operation::get_object::{GetObjectError, GetObjectOutput};
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use futures_util::{StreamExt, TryStreamExt};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Builds an S3 client: credentials from the standard AWS chain (env,
/// profile, web identity, ECS, instance role), region from config or that
/// chain (which includes instance metadata); the SDK's own retries are off
/// because every call here goes through [`crate::retry`].
pub async fn client(s3: &S3Settings) -> Result<Client> {
    // Names (S3's, the instance metadata service's) resolved without NSS.
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).http_client(crate::dns::aws_http_client());
    if let Some(r) = &s3.region {
        loader = loader.region(Region::new(r.clone()));
    }
    let shared = loader.load().await;
    if shared.region().is_none() {
        return Err(Error::config(
            "no S3 region: set assets.s3.region (none came from AWS_REGION, the AWS profile or instance metadata)",
        ));
    }
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(10).min(s3.request_timeout))
        .read_timeout(s3.request_timeout)
        .build();
    let mut b = aws_sdk_s3::config::Builder::from(&shared)
        .force_path_style(s3.force_path_style)
        .retry_config(RetryConfig::disabled())
        .timeout_config(timeouts)
        .stalled_stream_protection(
            StalledStreamProtectionConfig::enabled()
                .grace_period(s3.request_timeout)
                .build(),
        )
        .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
    if let Some(e) = &s3.endpoint {
        b = b.endpoint_url(e);
    }
    Ok(Client::from_conf(b.build()))
}

/// Why a download did not succeed, as far as the caller's decisions go.
#[derive(Debug)]
pub enum Failure {
    /// The bucket or object does not exist (yet).
    Missing(Error),
    /// Access denied or the credentials are not accepted.
    Denied(Error),
    /// The object changed between parts (ETag no longer matches).
    Changed(Error),
    /// Anything else (already retried where retrying made sense).
    Other(Error),
}

impl Failure {
    pub fn into_error(self) -> Error {
        match self {
            Failure::Missing(e) | Failure::Denied(e) | Failure::Changed(e) | Failure::Other(e) => e,
        }
    }
}

/// The outcome of one download.
#[derive(Debug, Clone)]
pub struct Downloaded {
    pub size: u64,
    pub etag: Option<String>,
    /// Checksums found in the object's user metadata (`x-amz-meta-sha256`,
    /// `x-amz-meta-sha512`).
    pub metadata_checksums: Vec<Checksum>,
    pub parts: u64,
    /// Requests that were retried (over all parts).
    pub retries: u64,
}

enum Kind {
    Missing,
    Denied,
    Changed,
    Empty,
    Transient(Option<Duration>),
    Fatal,
}

fn classify(err: &SdkError<GetObjectError>) -> Kind {
    match err {
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status().as_u16();
            let code = ctx.err().code().unwrap_or("");
            let retry_after = ctx
                .raw()
                .headers()
                .get("retry-after")
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            match (status, code) {
                (_, "NoSuchKey" | "NoSuchBucket") | (404, _) => Kind::Missing,
                (_, "PreconditionFailed") | (412, _) => Kind::Changed,
                (_, "InvalidRange") | (416, _) => Kind::Empty,
                (
                    _,
                    "SlowDown"
                    | "Throttling"
                    | "ThrottlingException"
                    | "RequestTimeout"
                    | "InternalError"
                    | "ServiceUnavailable"
                    | "RequestTimeTooSkewed",
                ) => Kind::Transient(retry_after),
                (403, _)
                | (
                    _,
                    "AccessDenied"
                    | "InvalidAccessKeyId"
                    | "SignatureDoesNotMatch"
                    | "ExpiredToken"
                    | "InvalidToken",
                ) => Kind::Denied,
                (429 | 500..=599, _) => Kind::Transient(retry_after),
                _ => Kind::Fatal,
            }
        }
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            Kind::Transient(None)
        }
        SdkError::ConstructionFailure(_) => Kind::Fatal,
        _ => Kind::Transient(None),
    }
}

fn describe(err: &SdkError<GetObjectError>) -> String {
    match err {
        SdkError::ServiceError(ctx) => {
            let status = ctx.raw().status().as_u16();
            let code = ctx.err().code().unwrap_or("no error code");
            match ctx.err().message() {
                Some(m) => format!("HTTP {status} {code}: {m}"),
                None => format!("HTTP {status} {code}"),
            }
        }
        other => DisplayErrorContext(other).to_string(),
    }
}

/// A part failure, before the retry loop decides.
enum PartError {
    Sdk(Kind, String),
    Truncated(String),
    Io(Error),
}

struct Ctx<'a> {
    client: &'a Client,
    s3: &'a S3Settings,
    retries: &'a AtomicU64,
}

impl Ctx<'_> {
    fn policy(&self) -> RetryPolicy {
        RetryPolicy::new(
            self.s3.retry_initial,
            self.s3.retry_max,
            self.s3.max_attempts,
        )
    }

    async fn get(
        &self,
        start: u64,
        end: u64,
        if_match: Option<&str>,
    ) -> std::result::Result<GetObjectOutput, PartError> {
        let mut req = self
            .client
            .get_object()
            .bucket(&self.s3.bucket)
            .key(&self.s3.key)
            .range(format!("bytes={start}-{end}"));
        if let Some(etag) = if_match {
            req = req.if_match(etag);
        }
        req.send()
            .await
            .map_err(|e| PartError::Sdk(classify(&e), describe(&e)))
    }

    /// Streams `out`'s body into `path` at `offset`; exactly `expected`
    /// bytes must arrive. Each chunk is written with `pwrite` as it comes
    /// (a page-cache copy: short enough to do on the runtime's thread) and
    /// only then reported to `progress` as part `part`'s, so a reader that
    /// follows the download never reads a byte before it is on file.
    async fn write_body(
        &self,
        out: GetObjectOutput,
        path: &Path,
        (part, offset, expected): (u64, u64, u64),
        progress: &Prefix,
    ) -> std::result::Result<(), PartError> {
        let io = |e: std::io::Error| {
            PartError::Io(Error::internal(format!(
                "failed to write the download to {}: {e}",
                path.display()
            )))
        };
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io)?;
        let mut body = out.body;
        let mut got = 0u64;
        loop {
            let next = tokio::time::timeout(self.s3.request_timeout, body.try_next()).await;
            match next {
                Err(_) => {
                    return Err(PartError::Truncated(format!(
                        "no data for {}s after {got} of {expected} bytes",
                        self.s3.request_timeout.as_secs()
                    )));
                }
                Ok(Err(e)) => {
                    return Err(PartError::Truncated(format!(
                        "body broke off after {got} of {expected} bytes: {}",
                        DisplayErrorContext(&e)
                    )));
                }
                Ok(Ok(None)) => break,
                Ok(Ok(Some(chunk))) => {
                    if got + chunk.len() as u64 > expected {
                        return Err(PartError::Truncated(format!(
                            "body is longer than the {expected} bytes announced"
                        )));
                    }
                    crate::metrics::record::fetched(Remote::AssetBucket, chunk.len() as u64);
                    file.write_all_at(&chunk, offset + got).map_err(io)?;
                    got += chunk.len() as u64;
                    progress.advance(part, got);
                }
            }
        }
        if got != expected {
            return Err(PartError::Truncated(format!(
                "body ended after {got} of {expected} bytes"
            )));
        }
        Ok(())
    }

    fn to_attempt(&self, what: &str, e: PartError) -> Attempt {
        let uri = self.s3.uri();
        match e {
            PartError::Sdk(Kind::Transient(after), msg) => {
                self.retries.fetch_add(1, Ordering::Relaxed);
                Attempt::Retry {
                    error: Error::retryable(format!("GET {uri} ({what}): {msg}")),
                    after,
                }
            }
            PartError::Truncated(msg) => {
                self.retries.fetch_add(1, Ordering::Relaxed);
                Attempt::retry(Error::retryable(format!(
                    "GET {uri} ({what}): truncated: {msg}"
                )))
            }
            PartError::Io(e) => Attempt::Fail(e),
            PartError::Sdk(kind, msg) => Attempt::Fail(kinded(kind, &uri, &msg)),
        }
    }
}

/// Marker text the caller uses to recover the failure kind from an error.
const MISSING: &str = "does not exist";
const DENIED: &str = "access denied";
const CHANGED: &str = "changed during the download";

fn kinded(kind: Kind, uri: &str, msg: &str) -> Error {
    match kind {
        Kind::Missing => Error::bad_input(format!("asset bundle {uri} {MISSING} ({msg})")),
        Kind::Denied => Error::config(format!(
            "{DENIED} to asset bundle {uri} ({msg}): check the node's credentials (instance role or AWS_* environment) and the bucket policy"
        )),
        Kind::Changed => Error::retryable(format!("asset bundle {uri} {CHANGED} ({msg})")),
        Kind::Empty => Error::bad_input(format!("asset bundle {uri} is empty ({msg})")),
        Kind::Transient(_) => Error::retryable(format!("GET {uri}: {msg}")),
        Kind::Fatal => Error::bad_input(format!("GET {uri} failed: {msg}")),
    }
}

fn to_failure(e: Error) -> Failure {
    let root = e.root_cause();
    if root.contains(MISSING) {
        Failure::Missing(e)
    } else if root.starts_with(DENIED) {
        Failure::Denied(e)
    } else if root.contains(CHANGED) {
        Failure::Changed(e)
    } else {
        Failure::Other(e)
    }
}

/// `bytes 0-99/1234` -> 1234.
fn total_from_content_range(v: &str) -> Option<u64> {
    v.rsplit('/').next()?.trim().parse().ok()
}

fn metadata_checksums(out: &GetObjectOutput) -> Vec<Checksum> {
    let mut v = Vec::new();
    if let Some(md) = out.metadata() {
        for (alg, key) in [("sha256", "sha256"), ("sha512", "sha512")] {
            if let Some(h) = md.get(key) {
                match Checksum::parse(&format!("x-amz-meta-{key}"), alg, h) {
                    Ok(c) => v.push(c),
                    Err(e) => {
                        tracing::warn!(step = "assets", field = %e.field, error = %e.message,
                        "ignoring malformed checksum in the object's metadata")
                    }
                }
            }
        }
    }
    v
}

/// Downloads the object into `dest` (created or truncated).
pub async fn download(
    client: &Client,
    s3: &S3Settings,
    dest: &Path,
) -> std::result::Result<Downloaded, Failure> {
    // Nobody follows this download: no reader to finish or fail.
    download_parts(client, s3, dest, &Prefix::default()).await
}

/// Downloads the object into `dest` (created or truncated), reporting what
/// is on file to `progress` as it arrives; on success it is finished, on
/// failure (or if this future is dropped) failed, so readers following it
/// never wait forever.
pub async fn download_following(
    client: &Client,
    s3: &S3Settings,
    dest: &Path,
    progress: &Arc<Prefix>,
) -> std::result::Result<Downloaded, Failure> {
    let guard = FailOnDrop(progress.clone());
    let d = download_parts(client, s3, dest, progress).await?;
    progress.finish();
    drop(guard);
    Ok(d)
}

async fn download_parts(
    client: &Client,
    s3: &S3Settings,
    dest: &Path,
    progress: &Prefix,
) -> std::result::Result<Downloaded, Failure> {
    let retries = AtomicU64::new(0);
    let ctx = Ctx {
        client,
        s3,
        retries: &retries,
    };
    let uri = s3.uri();
    std::fs::File::create(dest).map_err(|e| {
        Failure::Other(Error::internal(format!(
            "failed to create {}: {e}",
            dest.display()
        )))
    })?;

    let (size, etag, md, whole) = first_part(&ctx, &uri, dest, progress).await?;
    let parts = if whole {
        1
    } else {
        size.div_ceil(s3.part_size).max(1)
    };
    if parts > 1 {
        other_parts(&ctx, dest, progress, size, parts, &etag).await?;
    }
    // The file must be exactly the announced size (nothing beyond it).
    let len = std::fs::metadata(dest).map(|m| m.len()).unwrap_or(u64::MAX);
    if len != size {
        return Err(Failure::Other(Error::internal(format!(
            "downloaded file {} is {len} bytes, expected {size}",
            dest.display()
        ))));
    }
    Ok(Downloaded {
        size,
        etag,
        metadata_checksums: md,
        parts,
        retries: retries.load(Ordering::Relaxed),
    })
}

/// Part 1 of the object, which also says its size, ETag and metadata
/// checksums, and whether the server ignored the range (sent it whole).
async fn first_part(
    ctx: &Ctx<'_>,
    uri: &str,
    dest: &Path,
    progress: &Prefix,
) -> std::result::Result<(u64, Option<String>, Vec<Checksum>, bool), Failure> {
    let s3 = ctx.s3;
    // Part 0 also tells the size, ETag and metadata; once the first answer
    // named an ETag, its retries are pinned to it too.
    let first_end = s3.part_size - 1;
    let ctx_ref = ctx;
    let pinned: Mutex<Option<String>> = Mutex::new(None);
    let pinned = &pinned;
    retry(Remote::AssetBucket, ctx.policy(), &format!("GET {uri}"), |_| async move {
        let if_match = pinned.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let out = ctx_ref
            .get(0, first_end, if_match.as_deref())
            .await
            .map_err(|e| ctx_ref.to_attempt("part 1", e))?;
        let size = out
            .content_range()
            .and_then(total_from_content_range)
            .or(out.content_length().map(|l| l.max(0) as u64))
            .ok_or_else(|| {
                Attempt::Fail(Error::bad_input(format!(
                    "GET {uri}: the response says neither Content-Range nor Content-Length"
                )))
            })?;
        if size > s3.max_size {
            return Err(Attempt::Fail(Error::bad_input(format!(
                "asset bundle {uri} is {size} bytes, more than the {} byte limit (assets.s3.max_size_mib)",
                s3.max_size
            ))));
        }
        let etag = out.e_tag().map(str::to_string);
        if let Some(e) = &etag {
            *pinned.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
        }
        let md = metadata_checksums(&out);
        // A server that ignores Range sends the whole object at once.
        let whole = out.content_range().is_none();
        let part_size = if whole { size } else { s3.part_size };
        progress.start(Layout { size, part_size }, md.clone());
        let expected = size.min(part_size);
        ctx_ref
            .write_body(out, dest, (0, 0, expected), progress)
            .await
            .map_err(|e| ctx_ref.to_attempt("part 1", e))?;
        Ok((size, etag, md, whole))
    })
    .await
    .map_err(to_failure)
}

/// Parts 2 to `parts` of the object, `s3.concurrency` at a time, each
/// pinned to the ETag part 1 named.
async fn other_parts(
    ctx: &Ctx<'_>,
    dest: &Path,
    progress: &Prefix,
    size: u64,
    parts: u64,
    etag: &Option<String>,
) -> std::result::Result<(), Failure> {
    let s3 = ctx.s3;
    let etag = Arc::new(etag.clone());
    futures_util::stream::iter(1..parts)
        .map(|i| {
            let etag = etag.clone();
            async move {
                let start = i * s3.part_size;
                let end = (start + s3.part_size).min(size) - 1;
                let what = format!("part {} of {parts}", i + 1);
                let what_ref = &what;
                retry(
                    Remote::AssetBucket,
                    ctx.policy(),
                    &format!("GET {} {what}", s3.uri()),
                    |_| {
                        let etag = etag.clone();
                        async move {
                            let out = ctx
                                .get(start, end, etag.as_deref())
                                .await
                                .map_err(|e| ctx.to_attempt(what_ref, e))?;
                            ctx.write_body(out, dest, (i, start, end - start + 1), progress)
                                .await
                                .map_err(|e| ctx.to_attempt(what_ref, e))
                        }
                    },
                )
                .await
            }
        })
        .buffer_unordered(s3.concurrency)
        .try_collect::<Vec<()>>()
        .await
        .map_err(to_failure)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn content_range_total() {
        assert_eq!(total_from_content_range("bytes 0-99/1234"), Some(1234));
        assert_eq!(total_from_content_range("bytes 0-99/*"), None);
    }

    #[test]
    fn kinds_round_trip_through_errors() {
        let e = kinded(Kind::Missing, "s3://b/k", "HTTP 404 NoSuchKey");
        assert_eq!(e.class(), ErrorClass::BadInput);
        assert!(matches!(to_failure(e), Failure::Missing(_)));
        let e = kinded(Kind::Denied, "s3://b/k", "HTTP 403 AccessDenied");
        assert_eq!(e.class(), ErrorClass::Config);
        assert!(matches!(to_failure(e), Failure::Denied(_)));
        let e = kinded(Kind::Changed, "s3://b/k", "HTTP 412");
        assert!(matches!(to_failure(e), Failure::Changed(_)));
    }
}
