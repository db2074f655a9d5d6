//! The `assets` config section.
//!
//! ```json
//! "assets": {
//!   "mode": "pull",
//!   "marker": ".assets-complete",
//!   "s3": {
//!     "bucket": "my-cluster-assets", "key": "assets/bundle.tar.gz",
//!     "region": "eu-west-1",
//!     "endpoint": "http://127.0.0.1:9000", "force_path_style": true,
//!     "checksum_sha256": "<64 hex digits>",
//!     "part_size_mib": 16, "concurrency": 4, "max_size_mib": 4096,
//!     "max_attempts": 8, "retry_initial_secs": 1, "retry_max_secs": 20,
//!     "request_timeout_secs": 60,
//!     "wait_for_object_secs": 600, "access_denied_grace_secs": 60
//!   },
//!   "limits": { "max_total_mib": 4096, "max_entry_mib": 1024, "max_entries": 100000 }
//! }
//! ```
//!
//! Every field is optional except `s3.bucket` and `s3.key` in pull mode.

use crate::settings::{FieldError, FieldResult, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::time::Duration;

const MIB: u64 = 1024 * 1024;

/// How assets reach the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssetsMode {
    /// terraform copies them over SSH; the agent only waits.
    #[default]
    Push,
    /// The agent pulls a bundle from S3.
    Pull,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAssets {
    #[serde(default)]
    pub mode: AssetsMode,
    /// File name inside the assets dir that marks them complete (written
    /// last by the push, and by `assets pull` before its rename). Unset:
    /// the assets dir's existence (Tectonic's atomic `mv`) is the mark.
    pub marker: Option<String>,
    /// Where the bundle is pulled from (required in pull mode).
    pub s3: Option<RawS3>,
    #[serde(default)]
    pub limits: RawLimits,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawS3 {
    pub bucket: Option<String>,
    pub key: Option<String>,
    /// Region; unset: the standard AWS chain (env, profile, instance metadata).
    pub region: Option<String>,
    /// A custom endpoint (S3-compatible store), e.g. `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// Path-style addressing (`endpoint/bucket/key`); default true with a
    /// custom endpoint, false without.
    pub force_path_style: Option<bool>,
    /// Expected SHA-256 of the bundle (hex). Stronger than the object's own
    /// metadata, which whoever writes the object also writes.
    pub checksum_sha256: Option<String>,
    /// Expected SHA-512 of the bundle (hex).
    pub checksum_sha512: Option<String>,
    /// Size of one ranged GET, MiB (default 16, 1..=1024).
    pub part_size_mib: Option<u64>,
    /// Parts downloaded at once (default 4, 1..=32).
    pub concurrency: Option<usize>,
    /// Largest bundle accepted, MiB (default 4096).
    pub max_size_mib: Option<u64>,
    /// Attempts per request on throttling, 5xx, timeouts, truncated bodies
    /// (default 8).
    pub max_attempts: Option<u32>,
    /// First backoff step, seconds (default 1).
    pub retry_initial_secs: Option<u64>,
    /// Backoff cap, seconds (default 20).
    pub retry_max_secs: Option<u64>,
    /// A request that sends nothing for this long is abandoned and retried
    /// (default 60).
    pub request_timeout_secs: Option<u64>,
    /// How long a missing bucket/object is waited for (terraform may still be
    /// uploading it) before it is an error (default 600; 0: fail at once).
    pub wait_for_object_secs: Option<u64>,
    /// How long "access denied" is retried (a new instance role can take a
    /// while to apply) before it is an error (default 60; 0: fail at once).
    pub access_denied_grace_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Sum of all entry sizes in the bundle, MiB (default 4096).
    pub max_total_mib: Option<u64>,
    /// Size of one entry, MiB (default 1024).
    pub max_entry_mib: Option<u64>,
    /// Number of entries (default 100000).
    pub max_entries: Option<u64>,
}

/// A checksum the bundle must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    Sha256(String),
    Sha512(String),
}

impl Checksum {
    pub fn algorithm(&self) -> &'static str {
        match self {
            Checksum::Sha256(_) => "sha256",
            Checksum::Sha512(_) => "sha512",
        }
    }
    pub fn hex(&self) -> &str {
        match self {
            Checksum::Sha256(h) | Checksum::Sha512(h) => h,
        }
    }
    /// Parses `hex` as a checksum of `algorithm`'s length; `field` names it in errors.
    pub fn parse(field: &str, algorithm: &str, hex: &str) -> FieldResult<Checksum> {
        let h = hex.trim().to_ascii_lowercase();
        let len = if algorithm == "sha256" { 64 } else { 128 };
        if h.len() != len || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(FieldError::new(
                field,
                format!("must be {len} hex digits ({algorithm}), got {hex:?}"),
            ));
        }
        Ok(if algorithm == "sha256" {
            Checksum::Sha256(h)
        } else {
            Checksum::Sha512(h)
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Settings {
    pub bucket: String,
    pub key: String,
    pub region: Option<String>,
    pub endpoint: Option<String>,
    pub force_path_style: bool,
    /// Checksums from config (all must match).
    pub checksums: Vec<Checksum>,
    pub part_size: u64,
    pub concurrency: usize,
    pub max_size: u64,
    pub max_attempts: u32,
    pub retry_initial: Duration,
    pub retry_max: Duration,
    pub request_timeout: Duration,
    pub wait_for_object: Duration,
    pub access_denied_grace: Duration,
}

impl S3Settings {
    /// Settings for reading below `prefix` of `bucket` (`metadata validate
    /// s3://…`), every other field at its default: region, endpoint and
    /// credentials from the standard AWS chain.
    pub fn for_prefix(bucket: &str, prefix: &str) -> FieldResult<S3Settings> {
        let mut s = RawS3 {
            bucket: Some(bucket.to_string()),
            // Required of an object; replaced by the prefix below.
            key: Some("-".to_string()),
            ..Default::default()
        }
        .validate()?;
        s.key = prefix.trim_matches('/').to_string();
        Ok(s)
    }

    /// `s3://bucket/key`, for messages.
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }
}

/// Limits of what an archive may contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    pub max_total_bytes: u64,
    pub max_entry_bytes: u64,
    pub max_entries: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_total_bytes: 4096 * MIB,
            max_entry_bytes: 1024 * MIB,
            max_entries: 100_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssetsSettings {
    pub mode: AssetsMode,
    pub marker: Option<String>,
    pub s3: Option<S3Settings>,
    pub limits: UnpackLimits,
}

impl Default for AssetsSettings {
    fn default() -> Self {
        RawAssets::default().validate().expect("defaults are valid")
    }
}

impl AssetsSettings {
    /// The section as a config file writes it, every default filled in
    /// (sizes in MiB as the file gives them).
    pub fn to_raw(&self) -> RawAssets {
        RawAssets {
            mode: self.mode,
            marker: self.marker.clone(),
            s3: self.s3.as_ref().map(S3Settings::to_raw),
            limits: RawLimits {
                max_total_mib: Some(self.limits.max_total_bytes / MIB),
                max_entry_mib: Some(self.limits.max_entry_bytes / MIB),
                max_entries: Some(self.limits.max_entries),
            },
        }
    }
}

impl S3Settings {
    fn to_raw(&self) -> RawS3 {
        let checksum = |algorithm: &str| {
            self.checksums
                .iter()
                .find(|c| c.algorithm() == algorithm)
                .map(|c| c.hex().to_string())
        };
        RawS3 {
            bucket: Some(self.bucket.clone()),
            key: Some(self.key.clone()),
            region: self.region.clone(),
            endpoint: self.endpoint.clone(),
            force_path_style: Some(self.force_path_style),
            checksum_sha256: checksum("sha256"),
            checksum_sha512: checksum("sha512"),
            part_size_mib: Some(self.part_size / MIB),
            concurrency: Some(self.concurrency),
            max_size_mib: Some(self.max_size / MIB),
            max_attempts: Some(self.max_attempts),
            retry_initial_secs: Some(self.retry_initial.as_secs()),
            retry_max_secs: Some(self.retry_max.as_secs()),
            request_timeout_secs: Some(self.request_timeout.as_secs()),
            wait_for_object_secs: Some(self.wait_for_object.as_secs()),
            access_denied_grace_secs: Some(self.access_denied_grace.as_secs()),
        }
    }
}

fn mib_in(field: &str, v: Option<u64>, default: u64, min: u64, max: u64) -> FieldResult<u64> {
    Ok(in_range(field, v.unwrap_or(default), min, max, " MiB")? * MIB)
}

fn non_empty(field: &str, v: Option<String>) -> FieldResult<Option<String>> {
    match v {
        Some(s) if s.trim().is_empty() => Err(FieldError::new(field, "must not be empty")),
        other => Ok(other),
    }
}

impl RawS3 {
    fn validate(self) -> FieldResult<S3Settings> {
        let bucket = non_empty("assets.s3.bucket", self.bucket)?
            .ok_or_else(|| FieldError::new("assets.s3.bucket", "is required"))?;
        if bucket.contains('/') {
            return Err(FieldError::new(
                "assets.s3.bucket",
                format!("must be a bucket name without '/', got {bucket:?}"),
            ));
        }
        let key = non_empty("assets.s3.key", self.key)?
            .ok_or_else(|| FieldError::new("assets.s3.key", "is required"))?;
        let key = key.trim_start_matches('/').to_string();
        let region = non_empty("assets.s3.region", self.region)?;
        let endpoint = non_empty("assets.s3.endpoint", self.endpoint)?;
        if let Some(e) = &endpoint {
            check_endpoint(e)?;
        }
        let mut checksums = Vec::new();
        if let Some(h) = &self.checksum_sha256 {
            checksums.push(Checksum::parse("assets.s3.checksum_sha256", "sha256", h)?);
        }
        if let Some(h) = &self.checksum_sha512 {
            checksums.push(Checksum::parse("assets.s3.checksum_sha512", "sha512", h)?);
        }
        let concurrency = in_range(
            "assets.s3.concurrency",
            self.concurrency.unwrap_or(4),
            1,
            32,
            "",
        )?;
        let max_attempts = in_range(
            "assets.s3.max_attempts",
            self.max_attempts.unwrap_or(8),
            1,
            100,
            "",
        )?;
        Ok(S3Settings {
            force_path_style: self.force_path_style.unwrap_or(endpoint.is_some()),
            bucket,
            key,
            region,
            endpoint,
            checksums,
            part_size: mib_in("assets.s3.part_size_mib", self.part_size_mib, 16, 1, 1024)?,
            concurrency,
            max_size: mib_in(
                "assets.s3.max_size_mib",
                self.max_size_mib,
                4096,
                1,
                1024 * 1024,
            )?,
            max_attempts,
            retry_initial: seconds_in(
                "assets.s3.retry_initial_secs",
                self.retry_initial_secs.unwrap_or(1),
                0,
                600,
            )?,
            retry_max: seconds_in(
                "assets.s3.retry_max_secs",
                self.retry_max_secs.unwrap_or(20),
                0,
                3600,
            )?,
            request_timeout: seconds_in(
                "assets.s3.request_timeout_secs",
                self.request_timeout_secs.unwrap_or(60),
                1,
                3600,
            )?,
            wait_for_object: seconds_in(
                "assets.s3.wait_for_object_secs",
                self.wait_for_object_secs.unwrap_or(600),
                0,
                24 * 3600,
            )?,
            access_denied_grace: seconds_in(
                "assets.s3.access_denied_grace_secs",
                self.access_denied_grace_secs.unwrap_or(60),
                0,
                24 * 3600,
            )?,
        })
    }
}

/// An S3 endpoint: an http(s) URL, plain http only on loopback (the bundle
/// holds private keys).
fn check_endpoint(e: &str) -> FieldResult<()> {
    let u = url::Url::parse(e).map_err(|err| {
        FieldError::new("assets.s3.endpoint", format!("is not a URL ({err}): {e:?}"))
    })?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(FieldError::new(
            "assets.s3.endpoint",
            format!("must be http:// or https://, got {e:?}"),
        ));
    }
    // The bundle holds private keys: plain http only on loopback.
    let loopback = match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    if u.scheme() == "http" && !loopback {
        return Err(FieldError::new(
            "assets.s3.endpoint",
            format!(
                "must be https:// (plain http only for a loopback endpoint: the bundle holds private keys), got {e:?}"
            ),
        ));
    }
    Ok(())
}

impl RawLimits {
    fn validate(self) -> FieldResult<UnpackLimits> {
        let d = UnpackLimits::default();
        let max_entries = self.max_entries.unwrap_or(d.max_entries);
        if max_entries == 0 {
            return Err(FieldError::new(
                "assets.limits.max_entries",
                "must be at least 1",
            ));
        }
        Ok(UnpackLimits {
            max_total_bytes: mib_in(
                "assets.limits.max_total_mib",
                self.max_total_mib,
                d.max_total_bytes / MIB,
                1,
                1024 * 1024,
            )?,
            max_entry_bytes: mib_in(
                "assets.limits.max_entry_mib",
                self.max_entry_mib,
                d.max_entry_bytes / MIB,
                1,
                1024 * 1024,
            )?,
            max_entries,
        })
    }
}

/// Whether `name` is a plain file name (no `/`, not `.`/`..`, not empty).
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

impl RawAssets {
    pub fn validate(self) -> FieldResult<AssetsSettings> {
        if let Some(m) = &self.marker
            && !is_plain_file_name(m)
        {
            return Err(FieldError::new(
                "assets.marker",
                format!("must be a plain file name inside the assets dir, got {m:?}"),
            ));
        }
        let s3 = self.s3.map(RawS3::validate).transpose()?;
        if self.mode == AssetsMode::Pull && s3.is_none() {
            return Err(FieldError::new(
                "assets.s3",
                "is required when assets.mode is \"pull\" (bucket and key of the bundle)",
            ));
        }
        Ok(AssetsSettings {
            mode: self.mode,
            marker: self.marker,
            s3,
            limits: self.limits.validate()?,
        })
    }
}
