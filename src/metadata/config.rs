//! The `sources` config section: where artifact metadata is searched.
//!
//! ```json
//! "sources": {
//!   "local_dir": "/var/lib/node-bootstrap/metadata",
//!   "url": "https://mirror.example.internal/node-bootstrap",
//!   "use_cluster_bucket": true, "bucket_prefix": "metadata",
//!   "default_url": "https://…", "use_default": true,
//!   "allow_unsigned": ["local"],
//!   "keyring": "/etc/kubernetes/installer/keyring.asc",
//!   "dev_dir": "/home/core/build/artifacts",
//!   "product_id_template": "com.node-bootstrap:{name}:{series}:{arch}",
//!   "timeout_secs": 30, "attempts": 3
//! }
//! ```
//!
//! Locations are tried in this order (seed 001): `dev_dir` (development
//! mode only), `local_dir`, `url`, the cluster's bucket
//! (`s3://<assets.s3.bucket>/<bucket_prefix>`, when `assets.s3` is set), and
//! the default location, only when `default_url` is set or `use_default` is
//! true. At each, signed metadata (`index.sjson`) is tried before unsigned
//! (`index.json`), which is used only where `allow_unsigned` names the
//! location's kind.

use crate::settings::{FieldError, FieldResult, absolute_path, in_range, seconds_in};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// The built-in default location. The project has no public mirror yet:
/// this is a reserved name (RFC 2606) that never resolves, so out of the
/// box only the configured locations answer. Set `sources.default_url` once
/// a mirror exists; until then the default location is searched only when
/// `default_url` is set or `use_default` is true.
pub const DEFAULT_URL: &str = "https://artifacts.node-bootstrap.example/streams";

/// Default local store.
pub const DEFAULT_LOCAL_DIR: &str = "/var/lib/node-bootstrap/metadata";

/// The kinds of location in the search path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LocationKind {
    /// Locally built artifacts (development mode).
    Dev,
    /// The node's local store.
    Local,
    /// The user-supplied URL or directory.
    Url,
    /// The cluster's bucket.
    Bucket,
    /// The built-in default URL.
    Default,
}

impl LocationKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LocationKind::Dev => "dev",
            LocationKind::Local => "local",
            LocationKind::Url => "url",
            LocationKind::Bucket => "bucket",
            LocationKind::Default => "default",
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSources {
    /// The node's local store (default /var/lib/node-bootstrap/metadata).
    pub local_dir: Option<PathBuf>,
    /// A user-supplied location: `https://…`, `http://…`, `file:///dir`, or
    /// an absolute directory path.
    pub url: Option<String>,
    /// Search the cluster's bucket (default true; needs `assets.s3`).
    pub use_cluster_bucket: Option<bool>,
    /// Prefix of the metadata tree in the cluster's bucket (default "metadata").
    pub bucket_prefix: Option<String>,
    /// The built-in default location (see [`DEFAULT_URL`]).
    pub default_url: Option<String>,
    /// Search the default location (default: true when `default_url` is
    /// set, else false; the built-in default, [`DEFAULT_URL`], is a reserved
    /// name that never resolves).
    pub use_default: Option<bool>,
    /// Location kinds where unsigned metadata is accepted (default none).
    #[serde(default)]
    pub allow_unsigned: Vec<LocationKind>,
    /// Armored OpenPGP public keys that sign metadata (default
    /// `<paths.seed_dir>/keyring.asc`).
    pub keyring: Option<PathBuf>,
    /// Development mode: search this directory of locally built artifacts
    /// first, unsigned allowed. Loudly logged on every search.
    pub dev_dir: Option<PathBuf>,
    /// How the product ids of the mirrors name an artifact: `{name}`,
    /// `{series}` and `{arch}` filled in (default
    /// `com.node-bootstrap:{name}:{series}:{arch}`, what `metadata generate`
    /// writes; another writer's scheme, e.g. `com.example:{series}:{arch}`).
    pub product_id_template: Option<String>,
    /// Timeout of one HTTP request, seconds (default 30).
    pub timeout_secs: Option<u64>,
    /// Attempts per HTTP/S3 fetch on transient errors (default 3).
    pub attempts: Option<u32>,
}

/// A user-supplied location, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserLocation {
    Dir(PathBuf),
    Http(url::Url),
}

/// Parses a location string: absolute path, `file://`, `http(s)://`.
pub fn parse_location(field: &str, s: &str) -> FieldResult<UserLocation> {
    if s.starts_with('/') {
        return Ok(UserLocation::Dir(PathBuf::from(s)));
    }
    let u = url::Url::parse(s).map_err(|e| {
        FieldError::new(field, format!("is not a URL or absolute path ({e}): {s:?}"))
    })?;
    match u.scheme() {
        "file" => Ok(UserLocation::Dir(PathBuf::from(u.path()))),
        "http" | "https" => Ok(UserLocation::Http(u)),
        other => Err(FieldError::new(
            field,
            format!(
                "scheme {other:?} is not supported (use https://, http://, file:// or a path): {s:?}"
            ),
        )),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesSettings {
    pub local_dir: PathBuf,
    pub url: Option<UserLocation>,
    pub use_cluster_bucket: bool,
    pub bucket_prefix: String,
    pub default_url: Option<url::Url>,
    pub allow_unsigned: Vec<LocationKind>,
    pub keyring: Option<PathBuf>,
    pub dev_dir: Option<PathBuf>,
    pub product_id_template: String,
    pub timeout: Duration,
    pub attempts: u32,
}

impl Default for SourcesSettings {
    fn default() -> Self {
        RawSources::default()
            .validate()
            .expect("defaults are valid")
    }
}

impl SourcesSettings {
    /// The keyring path in effect.
    pub fn keyring_path(&self, paths: &crate::settings::Paths) -> PathBuf {
        self.keyring
            .clone()
            .unwrap_or_else(|| paths.seed_dir.join("keyring.asc"))
    }
}

impl SourcesSettings {
    /// The section as a config file writes it, every default filled in
    /// (the default location as `use_default` and the `default_url`
    /// searched, if any).
    pub fn to_raw(&self, paths: &crate::settings::Paths) -> RawSources {
        RawSources {
            local_dir: Some(self.local_dir.clone()),
            url: self.url.as_ref().map(|u| match u {
                UserLocation::Dir(d) => d.display().to_string(),
                UserLocation::Http(u) => u.to_string(),
            }),
            use_cluster_bucket: Some(self.use_cluster_bucket),
            bucket_prefix: Some(self.bucket_prefix.clone()),
            default_url: self.default_url.as_ref().map(url::Url::to_string),
            use_default: Some(self.default_url.is_some()),
            allow_unsigned: self.allow_unsigned.clone(),
            keyring: Some(self.keyring_path(paths)),
            dev_dir: self.dev_dir.clone(),
            product_id_template: Some(self.product_id_template.clone()),
            timeout_secs: Some(self.timeout.as_secs()),
            attempts: Some(self.attempts),
        }
    }
}

impl RawSources {
    pub fn validate(self) -> FieldResult<SourcesSettings> {
        let local_dir = absolute_path(
            "sources.local_dir",
            self.local_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_LOCAL_DIR)),
        )?;
        let url = self
            .url
            .as_deref()
            .map(|s| parse_location("sources.url", s))
            .transpose()?;
        // No public mirror exists, so the built-in default is searched only
        // when asked for: a `default_url` set, or `use_default: true`.
        let default_url = if self.use_default.unwrap_or(self.default_url.is_some()) {
            let s = self.default_url.as_deref().unwrap_or(DEFAULT_URL);
            match parse_location("sources.default_url", s)? {
                UserLocation::Http(u) => Some(u),
                UserLocation::Dir(_) => {
                    return Err(FieldError::new(
                        "sources.default_url",
                        format!("must be an http(s) URL, got {s:?}"),
                    ));
                }
            }
        } else {
            None
        };
        let bucket_prefix = self
            .bucket_prefix
            .unwrap_or_else(|| "metadata".to_string())
            .trim_matches('/')
            .to_string();
        let keyring = self
            .keyring
            .map(|k| absolute_path("sources.keyring", k))
            .transpose()?;
        let dev_dir = self
            .dev_dir
            .map(|d| absolute_path("sources.dev_dir", d))
            .transpose()?;
        let attempts = in_range("sources.attempts", self.attempts.unwrap_or(3), 1, 20, "")?;
        if self.allow_unsigned.contains(&LocationKind::Dev) {
            return Err(FieldError::new(
                "sources.allow_unsigned",
                "\"dev\" is always unsigned; list only local, url, bucket, default",
            ));
        }
        let product_id_template = self
            .product_id_template
            .unwrap_or_else(|| super::format::DEFAULT_PRODUCT_ID_TEMPLATE.to_string());
        check_template(&product_id_template)?;
        Ok(SourcesSettings {
            product_id_template,
            local_dir,
            url,
            use_cluster_bucket: self.use_cluster_bucket.unwrap_or(true),
            bucket_prefix,
            default_url,
            allow_unsigned: self.allow_unsigned,
            keyring,
            dev_dir,
            timeout: seconds_in(
                "sources.timeout_secs",
                self.timeout_secs.unwrap_or(30),
                1,
                600,
            )?,
            attempts,
        })
    }
}

/// A product id template names the artifact (`{name}`) and uses no
/// placeholder but `{name}`, `{series}` and `{arch}`.
fn check_template(t: &str) -> FieldResult<()> {
    const FIELD: &str = "sources.product_id_template";
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| FieldError::new(FIELD, format!("has an unclosed {{ in {t:?}")))?;
        let name = &rest[open + 1..open + close];
        if !["name", "series", "arch"].contains(&name) {
            return Err(FieldError::new(
                FIELD,
                format!(
                    "has the placeholder {{{name}}}; only {{name}}, {{series}} and {{arch}} exist"
                ),
            ));
        }
        rest = &rest[open + close + 1..];
    }
    if !t.contains("{name}") {
        return Err(FieldError::new(
            FIELD,
            format!("{t:?} does not contain {{name}}, so every artifact would be the same product"),
        ));
    }
    Ok(())
}
